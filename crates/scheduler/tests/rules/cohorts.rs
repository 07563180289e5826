//! Cohorts: borrowing and lending limits, and nominal quota served before borrowing in a cycle.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn borrowing_stops_at_the_borrowing_limit() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8).borrow(4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 16)]),
    ]);
    w.add(wl("twelve").queue("a").at(1).pods(1, &[(GPU, 12)]));
    w.add(wl("one-more").queue("a").at(2).pods(1, &[(GPU, 1)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["twelve"]);
    assert!(
        w.why("one-more")
            .contains("needs 1 nvidia.com/gpu, 0 free of 8 nominal, 0 borrowable"),
        "{}",
        w.why("one-more")
    );
}

#[test]
fn a_queue_outside_a_cohort_never_borrows() {
    let mut w = World::new(vec![
        cq("a").quota("a100", vec![q(GPU, 8)]),
        cq("b").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("nine").queue("a").pods(1, &[(GPU, 9)]));
    w.cycle(0);
    assert_eq!(w.e.explanation("nine").unwrap().reason, PendingReason::NeverFits);
}

#[test]
fn borrowing_is_limited_by_what_the_cohort_has_free() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("b-uses-6").queue("b").pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("a-wants-12").queue("a").pods(1, &[(GPU, 12)]));
    w.add(wl("a-wants-10").queue("a").pods(1, &[(GPU, 10)]));
    let c = w.cycle(1);
    assert_eq!(admitted(&c), ["a-wants-10"]);
    assert!(
        w.why("a-wants-12").contains("needs 12 nvidia.com/gpu"),
        "{}",
        w.why("a-wants-12")
    );
}

#[test]
fn a_lending_limit_keeps_quota_back_from_the_cohort() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("keeper").cohort("co").quota("a100", vec![q(GPU, 8).lend(2)]),
    ]);
    w.add(wl("greedy").queue("a").at(1).pods(1, &[(GPU, 11)]));
    w.add(wl("fits").queue("a").at(2).pods(1, &[(GPU, 10)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["fits"], "keeper lends only 2 of its 8");
    w.add(wl("keeper-job").queue("keeper").pods(1, &[(GPU, 6)]));
    assert_eq!(
        admitted(&w.cycle(1)),
        ["keeper-job"],
        "the 6 kept back stay available to keeper"
    );
}

#[test]
fn a_queue_can_use_its_own_nominal_quota_only_when_the_cohort_has_not_lent_it() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("a-borrows").queue("a").pods(1, &[(GPU, 14)]));
    w.cycle(0);
    w.add(wl("b-own").queue("b").pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty());
    assert!(
        w.why("b-own")
            .contains("needs 4 nvidia.com/gpu, 2 free of 8 nominal, 0 borrowable"),
        "{}",
        w.why("b-own")
    );
}

#[test]
fn work_within_nominal_quota_goes_before_work_that_borrows_in_the_same_cycle() {
    // As in Kueue: a peer's guaranteed share is handed out before anyone
    // borrows it, whatever the priorities (no reclaim policy is needed).
    let mut w = World::new(vec![
        cq("owner").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("borrower").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("b-big").queue("borrower").prio(100).at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("o-low").queue("owner").prio(1).at(1).pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["o-low"]);
    assert!(c.preempted.is_empty());
    assert_eq!(w.state("b-big"), WorkloadState::Pending);
    // Once nobody else needs it, borrowing proceeds.
    w.e.finish("o-low").unwrap();
    assert_eq!(admitted(&w.cycle(1)), ["b-big"]);
}

#[test]
fn a_queue_waiting_to_borrow_keeps_its_own_order() {
    // a-first must borrow, so queue a waits for the second pass; a-second
    // would fit within a's nominal quota but may not pass a-first.
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("a-first").queue("a").prio(10).at(0).pods(1, &[(GPU, 6)]));
    w.add(wl("a-second").queue("a").prio(5).at(1).pods(1, &[(GPU, 2)]));
    w.add(wl("b-one").queue("b").prio(1).at(2).pods(1, &[(GPU, 2)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["b-one", "a-first"]);
    assert_eq!(w.state("a-second"), WorkloadState::Pending);
}

#[test]
fn moving_a_queue_between_cohorts_moves_its_quota() {
    let mut w = World::new(vec![
        cq("a").cohort("one").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("one").quota("a100", vec![q(GPU, 4)]),
        cq("c").cohort("two").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("borrow").queue("a").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["borrow"]);
    w.e.finish("borrow").unwrap();
    w.e.upsert_cluster_queue(cq("b").cohort("two").quota("a100", vec![q(GPU, 4)]).build());
    w.add(wl("borrow-again").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("c-borrows").queue("c").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(1)), ["c-borrows"]);
}
