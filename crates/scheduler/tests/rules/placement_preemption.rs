//! Placement with preemption, evictions under way and bound pods: victims
//! chosen node by node, room that terminating pods give back, and what a
//! workload's bound pods cancel of its reservation.

use crate::common::*;
use crate::placement::{no_node_fits, no_room, pods_on, reserved_gpus};
use sluice_scheduler::*;

/// Queue `a` (a100 GPUs, lower-priority preemption) and the named 8-GPU
/// a100 nodes.
fn world(gpus: i64, nodes: &[&str]) -> World {
    let mut w = World::placement(vec![
        cq("a")
            .quota("a100", vec![q(GPU, gpus)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    for n in nodes {
        w.node(node(n, "a100", 8));
    }
    w
}

fn complete(w: &mut World, uids: &[&str], now: Millis) {
    for uid in uids {
        w.e.eviction_complete(uid, now).unwrap();
    }
}

#[test]
fn preemption_empties_one_node_rather_than_slivers_of_two() {
    let mut w = world(16, &["A"]);
    for i in 1..=4 {
        w.add(wl(&format!("a{i}")).queue("a").at(0).pods(1, &[(GPU, 1)]));
    }
    w.cycle(0);
    // B's workloads are admitted later: quota alone would take them first.
    w.node(node("A", "a100", 8).cordoned());
    w.node(node("B", "a100", 8));
    for i in 1..=8 {
        w.add(wl(&format!("b{i}")).queue("a").at(1).pods(1, &[(GPU, 1)]));
    }
    assert_eq!(w.cycle(1).admitted.len(), 8);
    w.node(node("A", "a100", 8));
    assert_eq!(pods_on(&w, "b8"), [("B".into(), 1)]);

    // 4 GPUs of quota free, 4 on A, 0 on B: A's four make room for 8.
    w.add(wl("p").queue("a").prio(10).at(2).pods(1, &[(GPU, 8)]));
    let c = w.cycle(2);
    assert_eq!(victims(&c), ["a1", "a2", "a3", "a4"]);
    assert_eq!(pods_on(&w, "p"), [("A".into(), 1)]);
    complete(&mut w, &["a1", "a2", "a3", "a4"], 3);
    assert_eq!(admitted(&w.cycle(3)), ["p"]);
    assert_eq!(pods_on(&w, "p"), [("A".into(), 1)]);
    assert_eq!(reserved_gpus(&w, "A"), 8);
}

#[test]
fn with_quota_to_spare_the_node_needing_the_fewest_victims_is_emptied() {
    let mut w = world(32, &["A"]);
    for i in 1..=4 {
        w.add(wl(&format!("a{i}")).queue("a").at(0).pods(1, &[(GPU, 1)]));
    }
    w.cycle(0);
    w.node(node("A", "a100", 8).cordoned());
    w.node(node("B", "a100", 8));
    w.add(wl("b-big").queue("a").at(1).pods(1, &[(GPU, 6)]));
    assert_eq!(admitted(&w.cycle(1)), ["b-big"]);
    w.node(node("A", "a100", 8));
    // A needs its four victims, B only one.
    w.add(wl("p").queue("a").prio(10).at(2).pods(1, &[(GPU, 8)]));
    let c = w.cycle(2);
    assert_eq!(victims(&c), ["b-big"]);
    assert_eq!(c.preempted[0].reason, PreemptionReason::InClusterQueue);
    complete(&mut w, &["b-big"], 3);
    assert_eq!(admitted(&w.cycle(3)), ["p"]);
    assert_eq!(pods_on(&w, "p"), [("B".into(), 1)]);
}

#[test]
fn nothing_is_preempted_when_even_every_candidate_gone_would_not_place_it() {
    let mut w = world(32, &["A", "B"]);
    w.usage("A", &[(GPU, 5)]);
    w.add(wl("high").queue("a").prio(20).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("low").queue("a").prio(0).at(1).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(0)), ["high", "low"]);
    // A: 5 foreign and low; B: high, not a candidate. At most 4 on either.
    assert_eq!(pods_on(&w, "high"), [("B".into(), 1)]);
    assert_eq!(pods_on(&w, "low"), [("A".into(), 1)]);
    w.add(wl("p").queue("a").prio(10).at(2).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty() && c.admitted.is_empty(), "{c:?}");
    assert_eq!(no_room(&w, "p"), no_node_fits(8, 1, 0, (26, 32), 2, (4, Some("B"))));
    assert_eq!(w.state("low"), WorkloadState::Admitted);
}

#[test]
fn terminating_pods_are_waited_for_rather_than_preempting() {
    let mut w = world(16, &["n1"]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(0)), ["low"]);
    // Foreign pods on the other half, on their way out.
    w.usage_terminating("n1", &[(GPU, 4)], &[(GPU, 4)]);
    w.add(wl("p").queue("a").prio(10).at(1).pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty() && c.admitted.is_empty(), "{c:?}");
    assert_eq!(w.e.explanation("p").unwrap().reason, PendingReason::WaitingForEvictions);
    // They are gone: admitted at the next cycle, low untouched.
    w.usage("n1", &[]);
    assert_eq!(admitted(&w.cycle(2)), ["p"]);
    assert_eq!(w.state("low"), WorkloadState::Admitted);
}

/// Regression: an evicted workload's bound pods, terminating, are in the
/// node's terminating usage too; the room they give back was counted
/// twice, so a two-pod preemptor waited for one node's evictions to hold
/// both its pods instead of preempting.
#[test]
fn an_evicted_workloads_terminating_pods_give_back_their_room_once() {
    let mut w = world(32, &["A", "B"]);
    w.add(wl("w1").queue("a").at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("w2").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["w1", "w2"]);
    assert_eq!(pods_on(&w, "w1"), [("A".into(), 1)]);
    w.usage("A", &[(GPU, 8)]);
    w.bind("w1", &[("A", 1, &[(GPU, 8)])]);
    w.usage("B", &[(GPU, 8)]);
    w.bind("w2", &[("B", 1, &[(GPU, 8)])]);
    w.e.evict("w1").unwrap();
    w.usage_terminating("A", &[(GPU, 8)], &[(GPU, 8)]);
    w.add(wl("p").queue("a").prio(10).at(2).pods(2, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert_eq!(victims(&c), ["w2"], "{}", w.why("p"));
}

/// Regression: pods bound in an earlier admission were still subtracted
/// from the reservation of the next one after the eviction completed.
#[test]
fn pods_of_an_earlier_admission_do_not_cancel_the_next_ones_reservation() {
    let mut w = world(32, &["n1"]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["job"]);
    w.usage("n1", &[(GPU, 8)]);
    w.bind("job", &[("n1", 1, &[(GPU, 8)])]);
    w.e.evict("job").unwrap();
    w.usage("n1", &[]);
    w.e.eviction_complete("job", 1).unwrap();
    assert_eq!(admitted(&w.cycle(1)), ["job"]);
    assert_eq!(reserved_gpus(&w, "n1"), 8);
    w.add(wl("other").queue("a").at(2).pods(1, &[(GPU, 8)]));
    assert!(w.cycle(2).admitted.is_empty());
    assert_eq!(
        no_room(&w, "other"),
        no_node_fits(8, 1, 0, (24, 32), 1, (0, Some("n1")))
    );
}

/// Regression: a bound pod cancelled the reservation of whichever pod was
/// planned first on its node, whatever its size: a launcher bound beside
/// its worker's planned place cancelled the worker's 8 GPUs.
#[test]
fn a_bound_pod_cancels_the_reservation_of_a_pod_like_it() {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 32), q(CPU, 64)])]);
    w.node(node("n1", "a100", 8));
    w.node(node("n2", "a100", 8));
    w.add(
        wl("mpi")
            .queue("a")
            .pod_set("worker", 1, &[(GPU, 8), (CPU, 4)])
            .pod_set("launcher", 1, &[(CPU, 1)]),
    );
    assert_eq!(admitted(&w.cycle(0)), ["mpi"]);
    assert_eq!(pods_on(&w, "mpi"), [("n1".into(), 2)]);
    w.usage("n1", &[(CPU, 1)]);
    w.bind("mpi", &[("n1", 1, &[(CPU, 1)])]);
    assert_eq!(reserved_gpus(&w, "n1"), 8, "the worker is not bound yet");
    w.add(wl("x").queue("a").at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(1)), ["x"]);
    assert_eq!(pods_on(&w, "x"), [("n2".into(), 1)]);
}

/// Regression: a workload restored as admitted was placed in whichever
/// domain fitted best, not in the one its admission names (where the
/// controller pins its pods).
#[test]
fn a_restored_workload_is_placed_in_the_domain_its_admission_names() {
    let mut w = World::placement(vec![cq("a").quota("racked", vec![q(GPU, 32)])]);
    w.node(node("r1-a", "racked", 4).rack("r1"));
    w.node(node("r2-a", "racked", 4).rack("r2"));
    let spec = wl("old").queue("a").pods(1, &[(GPU, 4)]).single_domain().build();
    let assignment = PodSetAssignment {
        name: "main".into(),
        count: 1,
        flavors: [(GPU.to_string(), "racked".to_string())].into(),
        usage: [(GPU.to_string(), u(4))].into(),
        topology: Some(TopologyDomain {
            key: RACK.into(),
            value: "r2".into(),
        }),
    };
    w.e.restore_admitted(spec, "a", &[assignment], 0).unwrap();
    assert_eq!(pods_on(&w, "old"), [("r2-a".into(), 1)]);
    w.add(wl("new").queue("a").pods(1, &[(GPU, 4)]).single_domain());
    assert_eq!(admitted(&w.cycle(0)), ["new"]);
    assert_eq!(pods_on(&w, "new"), [("r1-a".into(), 1)]);
}

/// Regression: the free quota in a placement verdict left out what the
/// queue can borrow from its cohort.
#[test]
fn the_free_quota_of_a_placement_verdict_includes_what_can_be_borrowed() {
    let mut w = World::placement(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.node(node("n1", "a100", 8));
    w.node(node("n2", "a100", 8));
    w.usage("n1", &[(GPU, 6)]);
    w.usage("n2", &[(GPU, 6)]);
    w.add(wl("wide").queue("a").pods(2, &[(GPU, 6)]));
    assert!(w.cycle(0).admitted.is_empty());
    assert_eq!(no_room(&w, "wide"), no_node_fits(6, 2, 0, (16, 8), 2, (2, Some("n1"))));
}

/// Queue `a` borrows to fit 3 pods × 4 GPUs (nominal 8, cohort of 24);
/// queue `b` borrows 8: b-low (priority 0) and three others of
/// `others` priority fill nodes n1 and n2; n3 has 4 foreign GPUs. Quota
/// wants b-low gone, the nodes one more of b's.
fn borrowing_preemptor(others: i32) -> (World, Cycle) {
    let mut w = World::placement_with(
        FairSharing::Off,
        vec![
            cq("a")
                .cohort("co")
                .quota("a100", vec![q(GPU, 8)])
                .reclaim(ReclaimWithinCohort::Any)
                .borrow_within(None),
            cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
            cq("c").cohort("co").quota("a100", vec![q(GPU, 8)]),
        ],
    );
    for n in ["n1", "n2", "n3"] {
        w.node(node(n, "a100", 8));
    }
    w.add(wl("b-1").queue("b").prio(100).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("b-2").queue("b").prio(100).at(1).pods(1, &[(GPU, 4)]));
    w.add(wl("b-3").queue("b").prio(others).at(2).pods(1, &[(GPU, 4)]));
    w.add(wl("b-low").queue("b").prio(0).at(3).pods(1, &[(GPU, 4)]));
    assert_eq!(w.cycle(0).admitted.len(), 4);
    assert_eq!(pods_on(&w, "b-3"), [("n2".into(), 1)]);
    assert_eq!(pods_on(&w, "b-low"), [("n2".into(), 1)]);
    w.usage("n3", &[(GPU, 4)]);
    w.add(wl("p").queue("a").prio(50).at(4).pods(3, &[(GPU, 4)]));
    let c = w.cycle(1);
    (w, c)
}

/// Regression: victims for placement were allowed by `reclaimWithinCohort`
/// although the preemptor borrows (then only `borrowWithinCohort` may
/// preempt in other queues, lower priority only).
#[test]
fn a_borrowing_preemptor_takes_placement_victims_by_borrow_within_cohort_only() {
    let (w, c) = borrowing_preemptor(100);
    assert!(c.preempted.is_empty(), "{:?}", c.preempted);
    assert_eq!(w.state("b-3"), WorkloadState::Admitted);

    let (_, c) = borrowing_preemptor(10);
    assert_eq!(victims(&c), ["b-3", "b-low"]);
    assert!(
        c.preempted
            .iter()
            .all(|p| p.reason == PreemptionReason::InCohortReclaimWhileBorrowing),
        "{:?}",
        c.preempted
    );
}
