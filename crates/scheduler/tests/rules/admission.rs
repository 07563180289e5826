//! Admission basics: what fits is admitted, whole or not at all, in order.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn admits_a_workload_that_fits() {
    let mut w = World::new(vec![cq("team-a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("team-a").pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["job"]);
    assert_eq!(flavor_of(&c, "job", GPU), "a100");
    assert_eq!(c.admitted[0].pod_sets[0].usage[GPU], u(4));
    assert!(!c.admitted[0].borrowing);
    assert_eq!(w.used("team-a", "a100", GPU), 4);
}

#[test]
fn queues_when_full_and_admits_when_quota_is_released() {
    let mut w = World::new(vec![cq("team-a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("first").queue("team-a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("second").queue("team-a").at(2).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["first"]);
    assert_eq!(w.state("second"), WorkloadState::Pending);
    w.e.finish("first").unwrap();
    assert_eq!(admitted(&w.cycle(10)), ["second"]);
}

#[test]
fn one_cycle_admits_as_many_as_fit_not_one_per_queue() {
    let mut w = World::new(vec![cq("team-a").quota("default", vec![q(CPU, 10)])]);
    for i in 0..12 {
        w.add(wl(&format!("w{i:02}")).queue("team-a").at(i).pods(1, &[(CPU, 1)]));
    }
    let c = w.cycle(0);
    assert_eq!(c.admitted.len(), 10);
    assert_eq!(admitted(&c)[..3], ["w00", "w01", "w02"]);
    assert_eq!(w.state("w10"), WorkloadState::Pending);
}

#[test]
fn one_cycle_admits_across_all_queues() {
    let mut w = World::new(vec![
        cq("a").quota("default", vec![q(CPU, 2)]),
        cq("b").quota("default", vec![q(CPU, 2)]),
        cq("c").quota("default", vec![q(CPU, 2)]),
    ]);
    for queue in ["a", "b", "c"] {
        for i in 0..3 {
            w.add(wl(&format!("{queue}{i}")).queue(queue).at(i).pods(1, &[(CPU, 1)]));
        }
    }
    let mut got = admitted(&w.cycle(0)).into_iter().map(String::from).collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["a0", "a1", "b0", "b1", "c0", "c1"]);
}

#[test]
fn order_is_priority_then_queue_time_then_arrival() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 3)])]);
    w.add(wl("late-high").queue("a").prio(10).at(50).pods(1, &[(CPU, 1)]));
    w.add(wl("early-low").queue("a").prio(0).at(1).pods(1, &[(CPU, 1)]));
    // Same priority and queue-order time: the one given first goes first,
    // whatever its UID.
    w.add(wl("b-same").queue("a").prio(5).at(7).pods(1, &[(CPU, 1)]));
    w.add(wl("a-same").queue("a").prio(5).at(7).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["late-high", "b-same", "a-same"]);
    assert_eq!(w.state("early-low"), WorkloadState::Pending);
}

#[test]
fn a_gang_is_admitted_whole_or_not_at_all() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 24)])]);
    w.add(wl("gang").queue("a").pods(4, &[(GPU, 8)]));
    let c = w.cycle(0);
    assert!(c.admitted.is_empty());
    assert_eq!(w.used("a", "a100", GPU), 0);
    assert!(w.why("gang").contains("needs 32 nvidia.com/gpu"), "{}", w.why("gang"));
}

#[test]
fn pod_sets_of_one_workload_add_up_on_a_shared_flavor() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 10)])]);
    w.add(
        wl("mpi")
            .queue("a")
            .pod_set("launcher", 1, &[(GPU, 2)])
            .pod_set("workers", 2, &[(GPU, 4)]),
    );
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["mpi"]);
    assert_eq!(c.admitted[0].pod_sets.len(), 2);
    assert_eq!(c.admitted[0].pod_sets[1].usage[GPU], u(8));
    assert_eq!(w.used("a", "a100", GPU), 10);

    w.add(
        wl("too-big")
            .queue("a")
            .pod_set("launcher", 1, &[(GPU, 2)])
            .pod_set("workers", 3, &[(GPU, 4)]),
    );
    w.e.finish("mpi").unwrap();
    assert!(
        w.cycle(1).admitted.is_empty(),
        "2 + 12 GPUs exceed 10 even though each pod set alone fits"
    );
}

#[test]
fn zero_requests_need_no_quota() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("job").queue("a").pods(1, &[(CPU, 1), (GPU, 0)]));
    assert_eq!(admitted(&w.cycle(0)), ["job"]);
}

#[test]
fn fractional_requests_are_exact_in_milli_units() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 1)])]);
    w.e.add_workload(wl("a").queue("a").at(0).pods_milli(2, &[(CPU, 250)]).build())
        .unwrap();
    w.e.add_workload(wl("b").queue("a").at(1).pods_milli(2, &[(CPU, 250)]).build())
        .unwrap();
    w.e.add_workload(wl("c").queue("a").at(2).pods_milli(1, &[(CPU, 1)]).build())
        .unwrap();
    assert_eq!(admitted(&w.cycle(0)), ["a", "b"]);
    assert!(
        w.why("c").contains("needs 1m cpu, 0 free of 1 nominal"),
        "{}",
        w.why("c")
    );
}

#[test]
fn more_than_the_queue_can_ever_hold_never_fits() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8).borrow(0)])]);
    w.add(wl("huge").queue("a").pods(2, &[(GPU, 8)]));
    let c = w.cycle(0);
    let e = &c.pending_changed[0].1;
    assert_eq!(e.reason, PendingReason::NeverFits);
    assert_eq!(
        sluice_convert::text::explanation(e),
        "exceeds what the ClusterQueue can ever admit; pod set main: a100: needs 16 nvidia.com/gpu, more than the 8 this queue can ever use"
    );
}

#[test]
fn nothing_happens_without_an_event() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("waiting").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    let c = w.cycle(1);
    assert!(c.is_empty());
    assert_eq!(c.next_wakeup, None);
}
