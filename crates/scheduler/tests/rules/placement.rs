//! Node-aware placement (`PlacementMode::Nodes`): a workload is admitted
//! only if all its pods fit on nodes of its flavors at once; the engine
//! reserves where they go until they are bound.

use crate::common::*;
use sluice_scheduler::*;

/// (node, pods) of a workload's placement, in node-name order.
pub fn pods_on(w: &World, uid: &str) -> Vec<(String, u32)> {
    w.e.workload_placement(uid)
        .into_iter()
        .map(|b| (b.node, b.pods))
        .collect()
}

/// GPUs reserved on a node, whole units.
pub fn reserved_gpus(w: &World, node: &str) -> i64 {
    w.e.node_reserved(node)
        .expect("known node")
        .get(GPU)
        .copied()
        .unwrap_or(0)
        / 1000
}

/// The single placement verdict of a workload waiting with `NoPlacement`.
pub fn no_room(w: &World, uid: &str) -> Verdict {
    let e = w.e.explanation(uid).expect("explained");
    assert_eq!(e.reason, PendingReason::NoPlacement, "{uid}: {}", w.why(uid));
    assert_eq!(e.flavors.len(), 1, "{e:?}");
    e.flavors[0].verdict.clone()
}

/// `NoNodeFits` for GPUs; `quota` is (free, nominal), `largest` the
/// largest free block and its node.
pub fn no_node_fits(
    per_pod: i64,
    pods: u32,
    placeable: u32,
    quota: (i64, i64),
    nodes: usize,
    largest: (i64, Option<&str>),
) -> Verdict {
    Verdict::NoNodeFits {
        resource: GPU.into(),
        per_pod: u(per_pod),
        pods,
        placeable,
        quota_free: u(quota.0),
        nominal: u(quota.1),
        nodes,
        largest_free: u(largest.0),
        largest_node: largest.1.map(String::from),
        topology: None,
    }
}

/// Queue `a` with 16 a100 GPUs and two 8-GPU a100 nodes `n1`, `n2`.
fn two_nodes() -> World {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)])]);
    w.node(node("n1", "a100", 8));
    w.node(node("n2", "a100", 8));
    w
}

#[test]
fn an_eight_gpu_pod_does_not_fit_two_nodes_with_four_free_each() {
    let mut w = two_nodes();
    w.usage("n1", &[(GPU, 4)]);
    w.usage("n2", &[(GPU, 4)]);
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    let c = w.cycle(0);
    assert!(c.admitted.is_empty());
    assert_eq!(c.pending_changed.len(), 1);
    assert_eq!(c.pending_changed[0].1.reason, PendingReason::NoPlacement);
    // Equal blocks: the first node known is named.
    assert_eq!(no_room(&w, "big"), no_node_fits(8, 1, 0, (16, 16), 2, (4, Some("n1"))));
    assert_eq!(w.e.explanation("big").unwrap().flavors[0].flavor, "a100");
    assert!(w.why("big").contains("largest free block: 4 on n1"), "{}", w.why("big"));

    // One GPU less free on n1: the largest block is n2's.
    let mut w = two_nodes();
    w.usage("n1", &[(GPU, 5)]);
    w.usage("n2", &[(GPU, 4)]);
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    assert!(w.cycle(0).admitted.is_empty());
    assert_eq!(no_room(&w, "big"), no_node_fits(8, 1, 0, (16, 16), 2, (4, Some("n2"))));
}

#[test]
fn two_four_gpu_pods_fit_two_nodes_with_four_free_each() {
    let mut w = two_nodes();
    w.usage("n1", &[(GPU, 4)]);
    w.usage("n2", &[(GPU, 4)]);
    w.add(wl("pair").queue("a").pods(2, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(0)), ["pair"]);
    assert_eq!(pods_on(&w, "pair"), [("n1".into(), 1), ("n2".into(), 1)]);
    assert_eq!((reserved_gpus(&w, "n1"), reserved_gpus(&w, "n2")), (4, 4));
}

#[test]
fn small_pods_go_to_the_fullest_node_so_a_large_one_finds_an_empty_node() {
    let mut w = two_nodes();
    w.usage("n2", &[(GPU, 4)]);
    w.add(wl("small-1").queue("a").at(0).pods(1, &[(GPU, 1)]));
    w.add(wl("small-2").queue("a").at(1).pods(1, &[(GPU, 1)]));
    w.add(wl("big").queue("a").at(2).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["small-1", "small-2", "big"]);
    assert_eq!(pods_on(&w, "small-1"), [("n2".into(), 1)]);
    assert_eq!(pods_on(&w, "small-2"), [("n2".into(), 1)]);
    assert_eq!(pods_on(&w, "big"), [("n1".into(), 1)]);
}

#[test]
fn a_pod_set_that_requires_one_rack_waits_for_a_rack_with_room_for_all_its_pods() {
    let mut w = World::placement(vec![cq("a").quota("racked", vec![q(GPU, 32)])]);
    for (n, r) in [("r1-a", "r1"), ("r1-b", "r1"), ("r2-a", "r2"), ("r2-b", "r2")] {
        w.node(node(n, "racked", 4).rack(r));
    }
    w.usage("r1-a", &[(GPU, 4)]);
    w.usage("r2-b", &[(GPU, 4)]);
    w.add(wl("gang").queue("a").at(0).pods(2, &[(GPU, 4)]).single_domain());
    assert!(w.cycle(0).admitted.is_empty());
    let mut expected = no_node_fits(4, 2, 1, (32, 32), 4, (4, Some("r1-b")));
    if let Verdict::NoNodeFits { topology, .. } = &mut expected {
        *topology = Some(RACK.into());
    }
    assert_eq!(no_room(&w, "gang"), expected);
    assert!(w.why("gang").contains("within one rack domain"), "{}", w.why("gang"));

    // Without the requirement, the same pods spread over both racks.
    w.add(wl("spread").queue("a").at(1).pods(2, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert_eq!(admitted(&c), ["spread"]);
    assert_eq!(topologies(&c.admitted[0]), [None]);
    assert_eq!(pods_on(&w, "spread"), [("r1-b".into(), 1), ("r2-a".into(), 1)]);

    // Rack r2 empties: the gang goes there, and its admission names it.
    w.e.finish("spread").unwrap();
    w.usage("r2-b", &[]);
    let c = w.cycle(2);
    assert_eq!(admitted(&c), ["gang"]);
    assert_eq!(
        topologies(&c.admitted[0]),
        [Some(TopologyDomain {
            key: RACK.into(),
            value: "r2".into()
        })]
    );
    assert_eq!(pods_on(&w, "gang"), [("r2-a".into(), 1), ("r2-b".into(), 1)]);
}

/// Each pod set's topology domain.
pub fn topologies(a: &Admission) -> Vec<Option<TopologyDomain>> {
    a.pod_sets.iter().map(|p| p.topology.clone()).collect()
}

#[test]
fn cordoned_nodes_and_untolerated_taints_are_not_used() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 32)])]);
    w.node(node("cordoned", "a100", 8).cordoned());
    w.node(node("tainted", "a100", 8).taint("dedicated"));
    w.node(node("other-flavor", "h100", 8));
    w.add(wl("plain").queue("a").at(0).pods(1, &[(GPU, 8)]));
    w.add(
        wl("tolerant")
            .queue("a")
            .at(1)
            .pods(1, &[(GPU, 8)])
            .tolerating("dedicated"),
    );
    assert_eq!(admitted(&w.cycle(0)), ["tolerant"]);
    assert_eq!(pods_on(&w, "tolerant"), [("tainted".into(), 1)]);
    assert_eq!(no_room(&w, "plain"), no_node_fits(8, 1, 0, (32, 32), 0, (0, None)));
    // Uncordoned: the node gained room, the queue is looked at again.
    w.node(node("cordoned", "a100", 8));
    assert_eq!(admitted(&w.cycle(1)), ["plain"]);
    assert_eq!(pods_on(&w, "plain"), [("cordoned".into(), 1)]);
}

#[test]
fn a_pod_sets_node_selector_is_respected() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 32)])]);
    w.node(node("east", "a100", 8).label("zone", "east"));
    w.node(node("west", "a100", 8).label("zone", "west"));
    w.add(wl("e1").queue("a").at(0).pods(1, &[(GPU, 8)]).selector("zone", "east"));
    w.add(wl("e2").queue("a").at(1).pods(1, &[(GPU, 8)]).selector("zone", "east"));
    assert_eq!(admitted(&w.cycle(0)), ["e1"]);
    assert_eq!(pods_on(&w, "e1"), [("east".into(), 1)]);
    // West is empty, but not east.
    assert_eq!(no_room(&w, "e2"), no_node_fits(8, 1, 0, (24, 32), 1, (0, Some("east"))));
}

#[test]
fn pods_sluice_does_not_admit_take_room_and_their_leaving_wakes_the_queue() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)])]);
    w.node(node("n1", "a100", 8));
    w.usage("n1", &[(GPU, 6)]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 4)]));
    assert!(w.cycle(0).admitted.is_empty());
    assert_eq!(no_room(&w, "job"), no_node_fits(4, 1, 0, (16, 16), 1, (2, Some("n1"))));
    // More foreign pods: still nothing, and nothing new to say.
    w.usage("n1", &[(GPU, 7)]);
    assert!(w.cycle(1).is_empty());
    // They leave: the next cycle admits, with no other event.
    w.usage("n1", &[(GPU, 2)]);
    assert_eq!(admitted(&w.cycle(2)), ["job"]);
}

#[test]
fn pods_bound_elsewhere_than_planned_are_not_counted_twice() {
    let mut w = two_nodes();
    w.add(wl("first").queue("a").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["first"]);
    assert_eq!(pods_on(&w, "first"), [("n1".into(), 1)]);
    assert_eq!(reserved_gpus(&w, "n1"), 8);
    // The pod landed on n2: its node usage counts it, the reservation on n1 goes.
    w.usage("n2", &[(GPU, 8)]);
    w.bind("first", &[("n2", 1, &[(GPU, 8)])]);
    assert_eq!((reserved_gpus(&w, "n1"), reserved_gpus(&w, "n2")), (0, 0));
    w.add(wl("second").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(1)), ["second"]);
    assert_eq!(pods_on(&w, "second"), [("n1".into(), 1)]);
    // Bound where planned: counted once, by the node's usage.
    w.usage("n1", &[(GPU, 8)]);
    w.bind("second", &[("n1", 1, &[(GPU, 8)])]);
    assert_eq!(reserved_gpus(&w, "n1"), 0);
    w.e.finish("first").unwrap();
    w.add(wl("third").queue("a").at(2).pods(1, &[(GPU, 8)]));
    // first's pod is still on n2 until the node's usage says otherwise.
    assert!(w.cycle(2).admitted.is_empty());
    assert_eq!(no_room(&w, "third"), no_node_fits(8, 1, 0, (8, 16), 2, (0, Some("n1"))));
    w.usage("n2", &[]);
    assert_eq!(admitted(&w.cycle(3)), ["third"]);
}

#[test]
fn finishing_and_evicting_release_reservations() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 32)])]);
    w.node(node("n1", "a100", 8));
    w.add(wl("a1").queue("a").at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("a2").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["a1"]);
    assert_eq!(no_room(&w, "a2"), no_node_fits(8, 1, 0, (24, 32), 1, (0, Some("n1"))));
    w.e.finish("a1").unwrap();
    assert_eq!(reserved_gpus(&w, "n1"), 0);
    assert_eq!(admitted(&w.cycle(1)), ["a2"]);
    assert_eq!(reserved_gpus(&w, "n1"), 8);
    // An evicted workload keeps its room until its eviction completes.
    w.e.evict("a2").unwrap();
    w.add(wl("a3").queue("a").at(2).pods(1, &[(GPU, 8)]));
    assert!(w.cycle(2).admitted.is_empty());
    assert_eq!(
        w.e.explanation("a3").unwrap().reason,
        PendingReason::WaitingForEvictions
    );
    assert_eq!(reserved_gpus(&w, "n1"), 8);
    w.e.eviction_complete("a2", 3).unwrap();
    assert_eq!(reserved_gpus(&w, "n1"), 0);
    // a2 requeued behind a3 (eviction time).
    assert_eq!(admitted(&w.cycle(3)), ["a3"]);
    assert_eq!(w.state("a2"), WorkloadState::Pending);
}

#[test]
fn a_workload_restored_as_admitted_reserves_room() {
    let mut w = two_nodes();
    let spec = wl("old").queue("a").pods(1, &[(GPU, 8)]).build();
    w.e.restore_admitted(spec, "a", &[a100_assignment(1, 8)], 0).unwrap();
    assert_eq!(pods_on(&w, "old"), [("n1".into(), 1)]);
    assert_eq!(reserved_gpus(&w, "n1"), 8);
    w.add(wl("n2-only").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("too-many").queue("a").at(2).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert_eq!(admitted(&c), ["n2-only"]);
    assert_eq!(pods_on(&w, "n2-only"), [("n2".into(), 1)]);
    assert_eq!(w.state("too-many"), WorkloadState::Pending);
}

#[test]
fn quota_only_mode_ignores_nodes() {
    // The same calls, quota-only with nodes and usage, and without any node.
    let run = |with_nodes: bool| {
        let mut w = World::new(vec![
            cq("a")
                .quota("a100", vec![q(GPU, 16)])
                .within(WithinClusterQueue::LowerPriority),
        ]);
        if with_nodes {
            w.node(node("n1", "a100", 8));
            w.node(node("n2", "a100", 8).cordoned());
            w.usage("n1", &[(GPU, 4)]);
        }
        let mut cycles = Vec::new();
        w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
        w.add(wl("pair").queue("a").at(1).pods(2, &[(GPU, 4)]));
        cycles.push(w.cycle(0));
        w.add(wl("high").queue("a").prio(10).pods(1, &[(GPU, 8)]));
        cycles.push(w.cycle(1));
        if with_nodes {
            assert!(w.e.workload_placement("big").is_empty());
            assert_eq!(w.e.node_reserved("n1"), Some(Default::default()));
        }
        cycles
    };
    let with = run(true);
    assert_eq!(admitted(&with[0]), ["big", "pair"]);
    assert_eq!(with[1].preempted.len(), 1, "{:?}", with[1]);
    assert_eq!(with, run(false));
}

#[test]
fn a_removed_node_is_not_used_and_coming_back_wakes_the_queue() {
    let mut w = two_nodes();
    w.e.remove_node("n2");
    assert_eq!(w.e.node_count(), 1);
    w.add(wl("a1").queue("a").at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("a2").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["a1"]);
    assert_eq!(no_room(&w, "a2"), no_node_fits(8, 1, 0, (8, 16), 1, (0, Some("n1"))));
    w.node(node("n2", "a100", 8));
    assert_eq!(admitted(&w.cycle(1)), ["a2"]);
    assert_eq!(pods_on(&w, "a2"), [("n2".into(), 1)]);
}

/// Queue `a` with 8 GPUs on a100 then 8 on h100 (that preference), one
/// 8-GPU node of each.
fn two_flavors() -> World {
    let mut w = World::placement(vec![
        cq("a").group(vec![("a100", vec![q(GPU, 8)]), ("h100", vec![q(GPU, 8)])]),
    ]);
    w.node(node("a-1", "a100", 8));
    w.node(node("h-1", "h100", 8));
    w
}

#[test]
fn a_workload_whose_first_flavor_has_no_room_on_its_nodes_takes_the_next_that_has() {
    let mut w = two_flavors();
    // Something Sluice did not admit fills half of the a100 node: a100's
    // quota is free, its node is not.
    w.usage("a-1", &[(GPU, 4)]);
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["big"]);
    assert_eq!(flavor_of(&c, "big", GPU), "h100");
    assert_eq!(pods_on(&w, "big"), [("h-1".to_string(), 1)]);
}

#[test]
fn the_preferred_flavor_is_kept_when_its_nodes_have_room() {
    let mut w = two_flavors();
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "big", GPU), "a100");
}

#[test]
fn with_no_flavor_whose_nodes_have_room_it_waits_on_the_first() {
    let mut w = two_flavors();
    w.usage("a-1", &[(GPU, 4)]);
    w.usage("h-1", &[(GPU, 2)]);
    w.add(wl("big").queue("a").pods(1, &[(GPU, 8)]));
    assert!(admitted(&w.cycle(0)).is_empty());
    assert_eq!(
        w.e.explanation("big").unwrap().flavors[0].flavor,
        "a100",
        "{}",
        w.why("big")
    );
    // The h100 node empties: the next cycle takes it.
    w.usage("h-1", &[]);
    let c = w.cycle(1);
    assert_eq!(flavor_of(&c, "big", GPU), "h100");
}
