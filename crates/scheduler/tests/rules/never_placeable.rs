//! Never placeable: a pod set no node of any flavor it may use could hold,
//! even with nothing else running, is told so (`NeverPlaceable`), with the
//! largest node's numbers, rather than to wait for quota that never helps.
//! Decided on the nodes as they are, and looked at again when they change.

use crate::common::*;
use sluice_scheduler::*;

/// Queue `a` with 8 a100 GPUs on two 4-GPU nodes.
fn small_nodes() -> World {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.node(node("n1", "a100", 4));
    w.node(node("n2", "a100", 4));
    w
}

fn reason(w: &World, uid: &str) -> PendingReason {
    w.e.explanation(uid).expect("explained").reason.clone()
}

#[test]
fn a_pod_larger_than_every_node_is_told_no_node_could_ever_hold_it_while_others_hold_the_quota() {
    let mut w = small_nodes();
    w.add(wl("small").queue("a").at(0).pods(2, &[(GPU, 4)]));
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["small"]);
    // Before: "insufficient quota; … needs 8 nvidia.com/gpu, 0 free of 8 nominal".
    assert_eq!(reason(&w, "big"), PendingReason::NeverPlaceable);
    assert_eq!(w.e.explanation("big").unwrap().reason_code(), "NeverPlaceable");
    assert_eq!(
        w.why("big"),
        "no node could ever hold it, even with nothing else running: more quota or waiting does not help; \
         pod set main: a100: a pod needs 8 nvidia.com/gpu; none of its 2 node(s) has that much allocatable: \
         the largest has 4 allocatable (n1)"
    );
    // With the quota free it is told the same (not "fits quota but not the nodes").
    w.e.finish("small").unwrap();
    w.cycle(1);
    assert_eq!(reason(&w, "big"), PendingReason::NeverPlaceable);
}

#[test]
fn a_gang_larger_than_the_nodes_together_says_how_many_of_its_pods_they_would_hold() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)])]);
    w.node(node("n1", "a100", 4));
    w.node(node("n2", "a100", 4));
    w.add(wl("gang").queue("a").pods(3, &[(GPU, 4)]));
    assert!(w.cycle(0).admitted.is_empty());
    let e = w.e.explanation("gang").unwrap();
    assert_eq!(e.reason, PendingReason::NeverPlaceable, "{}", w.why("gang"));
    match &e.flavors[0].verdict {
        Verdict::NeverOnNodes(n) => {
            assert_eq!((n.pods, n.placeable, n.nodes, n.per_pod), (3, 2, 2, u(4)));
        }
        other => panic!("{other:?}"),
    }
    // Its quota never suffices either: both are said.
    let mut w = small_nodes();
    w.add(wl("gang").queue("a").pods(3, &[(GPU, 4)]));
    w.cycle(0);
    assert_eq!(
        w.why("gang"),
        "exceeds what the ClusterQueue can ever admit; pod set main: a100: needs 12 nvidia.com/gpu, more than the 8 \
         this queue can ever use, a100: its 2 node(s) hold only 2 of its 3 pods (4 nvidia.com/gpu each) even with \
         nothing else running; the largest has 4 allocatable (n1)"
    );
}

#[test]
fn a_cordoned_node_that_could_hold_it_is_not_never() {
    let mut w = small_nodes();
    w.node(node("big-node", "a100", 8).cordoned());
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    assert!(w.cycle(0).admitted.is_empty());
    assert_eq!(reason(&w, "big"), PendingReason::NoPlacement, "{}", w.why("big"));
}

#[test]
fn a_node_that_joins_and_could_hold_it_admits_it_and_one_that_leaves_tells_it_never() {
    let mut w = small_nodes();
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    w.cycle(0);
    assert_eq!(reason(&w, "big"), PendingReason::NeverPlaceable);
    w.node(node("n3", "a100", 8));
    assert_eq!(admitted(&w.cycle(1)), ["big"]);

    // The only node large enough leaves while another waits for it.
    w.add(wl("next").queue("a").at(2).pods(1, &[(GPU, 8)]));
    w.cycle(2);
    // Quota is what it waits for while n3 exists.
    assert_eq!(reason(&w, "next"), PendingReason::NoFit, "{}", w.why("next"));
    w.e.remove_node("n3");
    w.e.finish("big").unwrap();
    w.cycle(3);
    assert_eq!(reason(&w, "next"), PendingReason::NeverPlaceable, "{}", w.why("next"));
}

#[test]
fn taints_and_selectors_count_as_the_nodes_they_exclude() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)])]);
    w.node(node("open", "a100", 4));
    w.node(node("dedicated", "a100", 8).taint("dedicated"));
    w.add(wl("big").queue("a").at(0).pods(1, &[(GPU, 8)]));
    w.add(
        wl("tolerant")
            .queue("a")
            .at(1)
            .pods(1, &[(GPU, 8)])
            .tolerating("dedicated"),
    );
    assert_eq!(admitted(&w.cycle(0)), ["tolerant"]);
    assert_eq!(reason(&w, "big"), PendingReason::NeverPlaceable, "{}", w.why("big"));
    assert!(w.why("big").contains("none of its 1 node(s)"), "{}", w.why("big"));
}

#[test]
fn in_quota_only_mode_nodes_are_never_a_reason() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.node(node("n1", "a100", 4));
    w.add(wl("small").queue("a").at(0).pods(2, &[(GPU, 4)]));
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["small"]);
    assert_eq!(reason(&w, "big"), PendingReason::NoFit);
}

/// The usual setup: CPU and memory in a group of their own on a flavor
/// without labels, GPUs on a flavor whose nodes are tainted and whose
/// tolerations admitted pods get. The groups are placed together, so the
/// GPU flavor's toleration lets the pod's CPU onto its nodes too: a gang
/// that fits the empty nodes waits for room, it is not "never placeable".
#[test]
fn resource_groups_are_judged_together_a_gpu_flavors_toleration_covers_the_pods_cpu() {
    let mut w = World::placement(vec![
        cq("a")
            .quota("cpu-pool", vec![q(CPU, 64)])
            .group(vec![("gpu-pool", vec![q(GPU, 16)])]),
    ]);
    w.e.upsert_flavor(flavor("cpu-pool"));
    let mut gpu = labelled_flavor("gpu-pool", "gpu", "a100");
    gpu.tolerations = vec![tolerate("nvidia.com/gpu")];
    w.e.upsert_flavor(gpu);
    w.node(node("n1", "a100", 8).taint("nvidia.com/gpu"));
    w.add(wl("run").queue("a").at(0).pods(2, &[(GPU, 4), (CPU, 8)]));
    w.add(wl("next").queue("a").at(1).pods(2, &[(GPU, 4), (CPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["run"]);
    assert_eq!(reason(&w, "next"), PendingReason::NoPlacement, "{}", w.why("next"));
    // A pod larger than the node is still told so, named by its GPU flavor.
    w.add(wl("huge").queue("a").at(2).pods(1, &[(GPU, 16), (CPU, 8)]));
    w.cycle(1);
    assert_eq!(reason(&w, "huge"), PendingReason::NeverPlaceable);
    assert!(
        w.why("huge").contains("gpu-pool: a pod needs 16 nvidia.com/gpu"),
        "{}",
        w.why("huge")
    );
}
