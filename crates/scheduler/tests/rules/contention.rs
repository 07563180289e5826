//! Contention: who waits for the quota an admitted workload holds (the
//! condition under which idle-GPU reclaim acts by default).

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn nobody_waits_while_everything_fits() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("idle").queue("a").pods(1, &[(GPU, 4)]));
    w.add(wl("other").queue("a").pods(1, &[(GPU, 4)]));
    w.cycle(0);
    assert_eq!(w.e.waiting_for_quota_of("idle"), None);
}

#[test]
fn a_workload_that_does_not_fit_waits_for_the_same_flavor() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("idle").queue("a").pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("waiter").queue("a").at(1).pods(1, &[(GPU, 2)]));
    w.cycle(1);
    assert_eq!(w.e.waiting_for_quota_of("idle").as_deref(), Some("waiter"));
    // Not for a pending workload, nor one that is unknown.
    assert_eq!(w.e.waiting_for_quota_of("waiter"), None);
    assert_eq!(w.e.waiting_for_quota_of("nobody"), None);
}

#[test]
fn a_waiter_for_another_resource_does_not_count() {
    let mut w = World::new(vec![
        cq("a")
            .group(vec![("a100", vec![q(GPU, 8)])])
            .group(vec![("default", vec![q(CPU, 4)])]),
    ]);
    w.add(wl("idle").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("cpu-hog").queue("a").pods(1, &[(CPU, 4)]));
    w.cycle(0);
    // Waits for CPU only: the idle workload's GPUs would not help it.
    w.add(wl("cpu-waiter").queue("a").at(1).pods(1, &[(CPU, 1)]));
    w.cycle(1);
    assert_eq!(w.e.explanation("cpu-waiter").unwrap().reason, PendingReason::NoFit);
    assert_eq!(w.e.waiting_for_quota_of("idle"), None);
}

#[test]
fn a_waiter_in_the_cohort_that_could_use_the_flavor_counts() {
    let mut w = World::new(vec![
        cq("a").cohort("c").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("c").quota("a100", vec![q(GPU, 0)]),
        cq("far").cohort("c").quota("h100", vec![q(GPU, 0)]),
    ]);
    w.add(wl("idle").queue("a").pods(1, &[(GPU, 8)]));
    w.cycle(0);
    // Only h100 in its queue: a100 GPUs freed would not help it.
    w.add(wl("elsewhere").queue("far").at(1).pods(1, &[(GPU, 1)]));
    w.cycle(1);
    assert_eq!(w.e.waiting_for_quota_of("idle"), None);
    w.add(wl("borrower").queue("b").at(2).pods(1, &[(GPU, 1)]));
    w.cycle(2);
    assert_eq!(w.e.waiting_for_quota_of("idle").as_deref(), Some("borrower"));
}

#[test]
fn a_workload_that_can_never_fit_or_is_held_does_not_count() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("idle").queue("a").pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("too-big").queue("a").at(1).pods(1, &[(GPU, 16)]));
    w.cycle(1);
    assert_eq!(w.e.explanation("too-big").unwrap().reason, PendingReason::NeverFits);
    assert_eq!(w.e.waiting_for_quota_of("idle"), None);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).stop(StopPolicy::Hold).build());
    w.add(wl("held").queue("a").at(2).pods(1, &[(GPU, 1)]));
    w.cycle(2);
    assert_eq!(w.e.waiting_for_quota_of("idle"), None);
}
