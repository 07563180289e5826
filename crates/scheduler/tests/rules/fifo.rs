//! Queueing strategies: StrictFIFO blocks behind its head, BestEffortFIFO lets smaller work pass.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn strict_fifo_head_blocks_the_queue() {
    let mut w = World::new(vec![cq("a").strict().quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty(), "StrictFIFO: small must wait behind big-head");
    assert_eq!(w.e.explanation("small").unwrap().reason, PendingReason::BlockedByHead);
    w.e.finish("running").unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["big-head", "small"]);
}

#[test]
fn best_effort_fifo_lets_smaller_workloads_pass() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(1)), ["small"]);
    assert_eq!(w.state("big-head"), WorkloadState::Pending);
}

#[test]
fn strict_fifo_head_parked_earlier_still_blocks_a_newcomer() {
    let mut w = World::new(vec![cq("a").strict().quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    assert!(w.cycle(1).admitted.is_empty());
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    assert!(
        w.cycle(2).admitted.is_empty(),
        "small arrived later: it must wait behind big-head"
    );
    assert_eq!(w.e.explanation("small").unwrap().reason, PendingReason::BlockedByHead);
}

#[test]
fn a_strict_fifo_preemptor_does_not_block_higher_priority_newcomers() {
    let mut w = World::new(vec![
        cq("a")
            .strict()
            .quota("a100", vec![q(GPU, 8)])
            .quota("default", vec![q(CPU, 4)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("mid").queue("a").prio(50).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low"], "mid waits for low's pods");
    // vip is ahead of mid in queue order, so StrictFIFO does not hold it
    // behind mid; it needs only cpu, which nobody claimed.
    w.add(wl("vip").queue("a").prio(100).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(2)), ["vip"]);
    // A newcomer behind mid waits, whatever it needs.
    w.add(wl("late").queue("a").prio(10).pods(1, &[(CPU, 1)]));
    assert!(w.cycle(3).admitted.is_empty());
    assert_eq!(w.e.explanation("late").unwrap().reason, PendingReason::BlockedByHead);
}
