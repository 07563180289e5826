//! Backfill: in a queue with `Backfill::Reserve`, the first workload that
//! does not fit reserves its quota from the time admitted work with
//! declared run times frees it; a later workload is admitted only if that
//! time does not move (it ends before, or fits beside), and is told why
//! when it would.

use crate::common::*;
use sluice_scheduler::*;

const MIN: Millis = 60_000;
const HOUR: Millis = 60 * MIN;

/// `Reserved` from `start` with `backfilled` gone ahead, quota only.
fn reserved(start: ReservedStart, backfilled: u32) -> PendingReason {
    PendingReason::Reserved {
        start,
        backfilled,
        nodes: vec![],
    }
}

fn reason(w: &World, uid: &str) -> PendingReason {
    w.e.explanation(uid).expect("explained").reason.clone()
}

/// Queue `a` (8 GPUs, reserving) with `run` holding 6 of them for 2 h
/// from t=0, and `big` (8 GPUs) waiting behind it.
fn reserved_for_big() -> World {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).reserve()]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    assert_eq!(admitted(&w.cycle(0)), ["run"]);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    w
}

#[test]
fn the_first_workload_that_does_not_fit_reserves_from_when_declared_work_ends() {
    let w = reserved_for_big();
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(2 * HOUR), 0));
    assert_eq!(w.e.explanation("big").unwrap().reason_code(), "Reserved");
    assert!(w.why("big").starts_with(
        "first in its queue and does not fit: its quota is reserved from ~t=2h00m; 0 smaller workload(s) admitted meanwhile"
    ));
    // What each flavor lacks is still said.
    assert!(w.why("big").contains("needs 8 nvidia.com/gpu"), "{}", w.why("big"));
}

#[test]
fn a_workload_that_ends_before_the_reservation_starts_is_backfilled_and_says_so() {
    let mut w = reserved_for_big();
    w.add(wl("short").queue("a").at(2).runs(HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(2 * MIN);
    assert_eq!(admitted(&c), ["short"]);
    let note = c.admitted[0].backfill.clone().expect("backfilled");
    assert_eq!(
        note,
        Backfilled {
            reserved_for: "ns/big".into(),
            start: ReservedStart::At(2 * HOUR),
            ends_before: true,
            delay: 0,
            queue: "a".into(),
            due: Some(2 * MIN + HOUR)
        }
    );
    assert_eq!(
        sluice_convert::text::backfilled(&note),
        "backfilled: its declared run time ends before the reservation of ns/big from ~t=2h00m"
    );
    // The head is told how many went ahead of it.
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(2 * HOUR), 1));
}

#[test]
fn a_workload_that_would_run_past_the_start_or_declares_nothing_waits_and_is_told_why() {
    let mut w = reserved_for_big();
    w.add(wl("long").queue("a").at(2).runs(3 * HOUR).pods(1, &[(GPU, 2)]));
    w.add(wl("open").queue("a").at(3).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    assert_eq!(
        reason(&w, "long"),
        PendingReason::WouldDelayReservation {
            reserved_for: "ns/big".into(),
            start: ReservedStart::At(2 * HOUR),
            declared: Some(3 * HOUR)
        }
    );
    assert_eq!(
        w.why("open"),
        "fits now, but would delay ns/big, which holds a reservation from ~t=2h00m: it declares no run time \
         (sluice.dev/expected-runtime), and what it asks leaves too little for the reservation"
    );
    // The reservation starts on time: `run` ends, `big` is admitted first.
    w.e.finish("run").unwrap();
    assert_eq!(admitted(&w.cycle(2 * HOUR)), ["big"]);
}

#[test]
fn without_reserve_a_queue_admits_whatever_fits_as_kueue_does() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("open").queue("a").at(2).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(MIN)), ["open"]);
    assert_eq!(reason(&w, "big"), PendingReason::NoFit);
}

#[test]
fn a_workload_that_fits_beside_the_reservation_is_backfilled_whatever_it_declares() {
    // 10 GPUs: once `run` ends, `big` takes 8 and leaves 2.
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 10)]).reserve()]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("open1").queue("a").at(2).pods(1, &[(GPU, 2)]));
    w.add(wl("open2").queue("a").at(3).pods(1, &[(GPU, 2)]));
    let c = w.cycle(MIN);
    assert_eq!(admitted(&c), ["open1"]);
    assert!(!c.admitted[0].backfill.as_ref().unwrap().ends_before);
    assert!(matches!(
        reason(&w, "open2"),
        PendingReason::WouldDelayReservation { .. }
    ));
}

#[test]
fn the_reservation_is_re_planned_when_work_ends_early() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).reserve()]);
    w.add(wl("r1").queue("a").at(0).runs(3 * HOUR).pods(1, &[(GPU, 4)]));
    w.add(wl("r2").queue("a").at(0).runs(3 * HOUR).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("x").queue("a").at(2).runs(2 * HOUR).pods(1, &[(GPU, 2)]));
    w.add(wl("y").queue("a").at(3).runs(4 * HOUR).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(MIN)).is_empty());
    // r1 ends early: x ends (10 min + 2 h) before r2 does (3 h); y would not.
    w.e.finish("r1").unwrap();
    assert_eq!(admitted(&w.cycle(10 * MIN)), ["x"]);
    assert!(matches!(reason(&w, "y"), PendingReason::WouldDelayReservation { .. }));
    // r2 ends early too: big now waits for x alone.
    w.e.finish("r2").unwrap();
    assert!(admitted(&w.cycle(20 * MIN)).is_empty());
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(10 * MIN + 2 * HOUR), 1));
}

#[test]
fn running_work_without_a_declared_run_time_makes_the_start_unknown_and_backfill_must_fit_beside() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).reserve()]);
    w.add(wl("run").queue("a").at(0).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    // Even a 1-minute job: nobody knows when `run` ends.
    w.add(wl("short").queue("a").at(2).runs(MIN).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(MIN)).is_empty());
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::AfterUndeclared, 0));
    assert!(
        w.why("big")
            .contains("reserved from when admitted work that declared no run time ends")
    );
    assert!(matches!(
        reason(&w, "short"),
        PendingReason::WouldDelayReservation { .. }
    ));
}

#[test]
fn a_higher_priority_arrival_that_does_not_fit_takes_the_reservation_over() {
    let mut w = reserved_for_big();
    w.add(wl("urgent").queue("a").prio(5).at(2).pods(1, &[(GPU, 4)]));
    w.add(wl("short").queue("a").at(3).runs(HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(2 * MIN);
    // `urgent` does not fit either (2 free) and now holds the reservation;
    // `short` (2 GPUs until 1 h 2 min) would leave `urgent` 0 GPUs at once,
    // but `run` frees 6 at 2 h, before which `short` ends: backfilled.
    assert_eq!(reason(&w, "urgent"), reserved(ReservedStart::At(2 * HOUR), 1));
    assert_eq!(reason(&w, "big"), PendingReason::NoFit);
    assert_eq!(admitted(&c), ["short"]);
    assert_eq!(
        c.admitted[0].backfill.as_ref().unwrap().reserved_for,
        "ns/urgent".into()
    );
}

#[test]
fn the_head_leaving_its_queue_ends_the_reservation_and_those_it_held_back_are_looked_at_again() {
    let mut w = reserved_for_big();
    w.add(wl("open").queue("a").at(2).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    w.e.remove_workload("big").unwrap();
    assert_eq!(admitted(&w.cycle(3 * MIN)), ["open"]);
}

#[test]
fn behind_its_queues_reservation_a_workload_does_not_preempt() {
    let world = |reserve: bool| {
        let q = cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority);
        let mut w = World::new(vec![if reserve { q.reserve() } else { q }]);
        w.add(wl("low").queue("a").prio(-1).at(0).runs(2 * HOUR).pods(1, &[(GPU, 4)]));
        w.add(wl("peer").queue("a").prio(0).at(0).runs(2 * HOUR).pods(1, &[(GPU, 4)]));
        w.cycle(0);
        // `big` could take only `low`'s 4 GPUs by preemption: not enough.
        w.add(wl("big").queue("a").prio(0).at(1).pods(1, &[(GPU, 8)]));
        w.add(wl("mid").queue("a").prio(0).at(2).pods(1, &[(GPU, 4)]));
        w
    };
    let mut w = world(false);
    assert_eq!(victims(&w.cycle(MIN)), ["low"]);
    let mut w = world(true);
    assert!(victims(&w.cycle(MIN)).is_empty());
    assert!(matches!(reason(&w, "big"), PendingReason::Reserved { .. }));
    assert_eq!(reason(&w, "mid"), PendingReason::NoFit);
}

#[test]
fn behind_its_queues_reservation_a_workload_that_ends_before_the_start_may_preempt() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .reserve()
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("low").queue("a").prio(-1).at(0).runs(2 * HOUR).pods(1, &[(GPU, 4)]));
    w.add(wl("peer").queue("a").prio(0).at(0).runs(2 * HOUR).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("big").queue("a").prio(0).at(1).pods(1, &[(GPU, 8)]));
    // 30 minutes, gone long before `big` starts at 2 h: its room is free
    // again by then, so it may take it from `low`.
    w.add(wl("quick").queue("a").prio(0).at(2).runs(30 * MIN).pods(1, &[(GPU, 4)]));
    assert_eq!(victims(&w.cycle(MIN)), ["low"]);
    assert!(matches!(reason(&w, "big"), PendingReason::Reserved { .. }));
}

#[test]
fn behind_its_queues_reservation_a_workload_does_not_run_reduced() {
    let mut w = reserved_for_big();
    w.add(wl("elastic").queue("a").at(2).pods(4, &[(GPU, 1)]).min_count(1));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    assert_eq!(w.state("elastic"), WorkloadState::Pending);
}

#[test]
fn another_queue_of_the_cohort_is_held_to_the_reservation_only_when_it_borrows() {
    let mut w = World::new(vec![
        cq("a").cohort("org").quota("a100", vec![q(GPU, 4)]).reserve(),
        cq("b").cohort("org").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 2)]));
    w.cycle(0);
    // `big` needs a's 4 and b's 4 (borrowing): it reserves from 2 h.
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(2 * HOUR), 0));
    // b within its own nominal quota: not held back.
    w.add(wl("own").queue("b").at(2).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(2 * MIN)), ["own"]);
    // b borrowing a's quota: held to the reservation.
    w.add(wl("borrow").queue("b").at(3).pods(1, &[(GPU, 3)]));
    assert!(admitted(&w.cycle(3 * MIN)).is_empty());
    assert!(matches!(
        reason(&w, "borrow"),
        PendingReason::WouldDelayReservation { .. }
    ));
}

#[test]
fn a_workload_that_runs_past_the_run_time_it_declared_is_evicted_once_it_holds_the_reservation_off() {
    let mut w = reserved_for_big();
    w.add(wl("short").queue("a").at(2).runs(HOUR).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(2 * MIN)), ["short"]);
    // Due at 1 h 02 m and still running: `big` is looked at, but `run`
    // holds 6 GPUs until 2 h, so evicting `short` would not help yet.
    let c = w.cycle(HOUR + 2 * MIN);
    assert!(c.evicted.is_empty());
    assert_eq!(w.state("short"), WorkloadState::Admitted);
    // `run` ends on time; `short` alone keeps `big` from fitting: evicted.
    w.e.finish("run").unwrap();
    let c = w.cycle(2 * HOUR);
    assert!(admitted(&c).is_empty());
    assert_eq!(c.evicted.len(), 1);
    let ev = &c.evicted[0];
    assert_eq!(
        (&*ev.uid, ev.reason, &*ev.queue),
        ("short", EvictionReason::BackfillOverrun, "ns/big")
    );
    assert!(sluice_convert::text::eviction(ev).contains("ran past that run time"));
    // Its pods gone, `big` starts.
    w.e.eviction_complete("short", 2 * HOUR + MIN).unwrap();
    assert_eq!(admitted(&w.cycle(2 * HOUR + MIN)), ["big"]);
}

#[test]
fn a_workload_that_fits_beside_the_reservation_is_never_evicted_for_its_run_time() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 10)]).reserve()]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("beside").queue("a").at(2).runs(MIN).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(MIN)), ["beside"]);
    w.e.finish("run").unwrap();
    let c = w.cycle(2 * HOUR);
    assert!(c.evicted.is_empty());
    assert_eq!(admitted(&c), ["big"]);
}

#[test]
fn with_a_max_delay_work_may_push_the_reservation_back_by_that_much_from_its_first_start_in_all() {
    let mut w = World::new(vec![
        cq("a").quota("a100", vec![q(GPU, 8)]).reserve().max_delay(30 * MIN),
    ]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    // Ends at 2 h 22 m: 22 minutes late, within the 30.
    w.add(wl("a").queue("a").at(2).runs(2 * HOUR + 20 * MIN).pods(1, &[(GPU, 2)]));
    let c = w.cycle(2 * MIN);
    assert_eq!(admitted(&c), ["a"]);
    let note = c.admitted[0].backfill.clone().unwrap();
    assert_eq!(note.delay, 22 * MIN);
    assert_eq!(
        sluice_convert::text::backfilled(&note),
        "backfilled: it starts the reservation of ns/big 22m later, within its ClusterQueue's backfill.maxDelayMinutes"
    );
    // `run` ends early: 6 GPUs free, but `big` still waits for `a` (2 h
    // 22 m). `b` fits now and would hold 2 GPUs until 2 h 33 m: 33 minutes
    // after the first start, past the 30.
    w.e.finish("run").unwrap();
    w.add(wl("b").queue("a").at(3).runs(2 * HOUR + 30 * MIN).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(3 * MIN)).is_empty());
    assert!(matches!(reason(&w, "b"), PendingReason::WouldDelayReservation { .. }));
}

#[test]
fn the_head_counts_on_what_it_may_preempt_once_the_minimum_runtime_protecting_it_is_over() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .reserve()
            .within(WithinClusterQueue::LowerPriority)
            .min_runtime(30 * MIN),
    ]);
    // `low` declares no run time, but `big` may preempt it from 30 min on.
    w.add(wl("low").queue("a").prio(-1).at(0).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").prio(0).at(1).pods(1, &[(GPU, 8)]));
    assert!(victims(&w.cycle(MIN)).is_empty());
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(30 * MIN), 0));
    // Another low-priority workload admitted now would be protected until
    // 32 min: it would delay the start, so it waits.
    w.add(wl("low2").queue("a").prio(-1).at(2).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    assert!(matches!(
        reason(&w, "low2"),
        PendingReason::WouldDelayReservation { .. }
    ));
    // At the start, `big` preempts `low`, as its queue's policy allows.
    assert_eq!(victims(&w.cycle(30 * MIN)), ["low"]);
}

#[test]
fn the_head_reserves_the_flavor_that_frees_first_not_its_most_preferred() {
    let mut w = World::new(vec![
        cq("a")
            .group(vec![("h100", vec![q(GPU, 8)]), ("a100", vec![q(GPU, 8)])])
            .reserve(),
    ]);
    w.add(wl("on-h100").queue("a").at(0).runs(5 * HOUR).pods(1, &[(GPU, 8)]));
    w.add(wl("on-a100").queue("a").at(1).runs(HOUR).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)).len(), 2);
    w.add(wl("big").queue("a").at(2).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    // h100, preferred, frees at 5 h; a100 at 1 h.
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(HOUR), 0));
    // The start is re-planned at every check: h100 freeing early admits
    // `big` there, ahead of a later job that would also fit.
    w.e.finish("on-h100").unwrap();
    w.add(wl("long").queue("a").at(3).runs(3 * HOUR).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(2 * MIN)), ["big"]);
}

/// With node placement: queue `a` (16 GPUs, reserving) on two 8-GPU
/// nodes; `long` holds 6 GPUs on one until 3 h, `mid` 4 on the other until
/// 2 h, and `big` (one 8-GPU pod) fits its quota but no node.
fn nodes_for_big() -> World {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)]).reserve()]);
    w.node(node("n1", "a100", 8));
    w.node(node("n2", "a100", 8));
    w.add(wl("long").queue("a").at(0).runs(3 * HOUR).pods(1, &[(GPU, 6)]));
    w.add(wl("mid").queue("a").at(1).runs(2 * HOUR).pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(0)).len(), 2);
    w.add(wl("big").queue("a").at(2).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    w
}

#[test]
fn with_node_placement_a_head_whose_quota_fits_but_no_node_reserves_the_node_that_frees_first() {
    let w = nodes_for_big();
    let mid_node = w.e.workload_placement("mid")[0].node.clone();
    assert_eq!(
        reason(&w, "big"),
        PendingReason::Reserved {
            start: ReservedStart::At(2 * HOUR),
            backfilled: 0,
            nodes: vec![ReservedNodes {
                flavor: "a100".into(),
                nodes: 1,
                domain: None
            }]
        }
    );
    assert!(
        w.why("big").starts_with(
            "first in its queue and does not fit: its quota is reserved from ~t=2h00m, with room on 1 node of a100; 0 smaller"
        ),
        "{}",
        w.why("big")
    );
    assert_ne!(w.e.workload_placement("long")[0].node, mid_node);
}

#[test]
fn with_node_placement_work_that_would_take_the_reserved_nodes_waits_and_work_beside_them_is_backfilled() {
    let mut w = nodes_for_big();
    let (long_node, mid_node) = (
        w.e.workload_placement("long")[0].node.clone(),
        w.e.workload_placement("mid")[0].node.clone(),
    );
    // 2 GPUs for 3 h: best fit puts it beside `long`, off the node `big`
    // counts on at 2 h.
    w.add(wl("beside").queue("a").at(3).runs(3 * HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(2 * MIN);
    assert_eq!(admitted(&c), ["beside"]);
    assert_eq!(w.e.workload_placement("beside")[0].node, long_node);
    assert!(!c.admitted[0].backfill.as_ref().unwrap().ends_before);
    // The same again now fits only on `mid`'s node, past 2 h: it waits,
    // though its quota (4 of 16 left) fits.
    w.add(wl("onto").queue("a").at(4).runs(3 * HOUR).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(3 * MIN)).is_empty());
    assert!(matches!(
        reason(&w, "onto"),
        PendingReason::WouldDelayReservation { .. }
    ));
    // One that ends before 2 h may use that node meanwhile.
    w.add(wl("quick").queue("a").at(5).runs(HOUR).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(4 * MIN)), ["quick"]);
    assert_eq!(w.e.workload_placement("quick")[0].node, mid_node);
    // At 2 h `mid` and `quick` have ended: `big` goes on their node.
    w.e.finish("mid").unwrap();
    w.e.finish("quick").unwrap();
    assert_eq!(admitted(&w.cycle(2 * HOUR)), ["big"]);
    assert_eq!(w.e.workload_placement("big")[0].node, mid_node);
}

#[test]
fn after_a_restart_a_workload_that_went_ahead_by_its_run_time_is_still_evicted_for_overrunning() {
    // The state `a_workload_that_runs_past…` reaches at 2 min, rebuilt by
    // a restarted controller from the Workloads' admissions.
    let restarted = |keep_record: bool| {
        let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).reserve()]);
        let run = wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]).build();
        let short = wl("short").queue("a").at(2).runs(HOUR).pods(1, &[(GPU, 2)]).build();
        w.e.restore_admitted(run, "a", &[a100_assignment(1, 6)], 0).unwrap();
        w.e.restore_admitted(short, "a", &[a100_assignment(1, 2)], 2 * MIN)
            .unwrap();
        if keep_record {
            w.e.restore_backfill("short", "a", "ns/big", 2 * MIN + HOUR).unwrap();
        }
        w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
        w.cycle(3 * MIN);
        assert!(matches!(reason(&w, "big"), PendingReason::Reserved { .. }));
        w.e.finish("run").unwrap();
        w.cycle(2 * HOUR)
    };
    let c = restarted(true);
    assert_eq!(c.evicted.len(), 1);
    assert_eq!(
        (&*c.evicted[0].uid, c.evicted[0].reason),
        ("short", EvictionReason::BackfillOverrun)
    );
    // Without the record it would keep the reservation off.
    assert!(restarted(false).evicted.is_empty());
    // A record naming no known queue is refused, and changes nothing.
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).reserve()]);
    let short = wl("short").queue("a").runs(HOUR).pods(1, &[(GPU, 2)]).build();
    w.e.restore_admitted(short, "a", &[a100_assignment(1, 2)], 0).unwrap();
    assert_eq!(
        w.e.restore_backfill("short", "gone", "ns/big", HOUR),
        Err(EngineError::UnknownClusterQueue("gone".into()))
    );
}

#[test]
fn the_head_reserves_a_flavor_its_nominal_quota_holds_before_one_where_it_must_borrow() {
    let mut w = World::new(vec![
        cq("a")
            .cohort("org")
            .group(vec![("h100", vec![q(GPU, 4)]), ("a100", vec![q(GPU, 8)])])
            .reserve(),
        cq("b").cohort("org").quota("h100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("b-run").queue("b").at(0).runs(HOUR).pods(1, &[(GPU, 8)]));
    w.add(wl("a-h100").queue("a").at(1).runs(HOUR).pods(1, &[(GPU, 4)]));
    w.add(wl("a-a100").queue("a").at(2).runs(3 * HOUR).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)).len(), 3);
    // On h100 `big` could start at 1 h, but only with 4 GPUs borrowed
    // from b, which b may take back; on a100, its own, at 3 h.
    w.add(wl("big").queue("a").at(3).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(3 * HOUR), 0));
}

/// Queue `a` (12 GPUs, reserving `depth` deep): `run` holds 8 until 1 h;
/// `big1` (8, declares 2 h) and `big2` (12) wait; `x` (2, declares 4 h)
/// fits now.
fn two_deep(depth: u32) -> (World, Cycle) {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 12)]).reserve().depth(depth)]);
    w.add(wl("run").queue("a").at(0).runs(HOUR).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("big1").queue("a").at(1).runs(2 * HOUR).pods(1, &[(GPU, 8)]));
    w.add(wl("big2").queue("a").at(2).pods(1, &[(GPU, 12)]));
    w.add(wl("x").queue("a").at(3).runs(4 * HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(MIN);
    (w, c)
}

#[test]
fn with_a_depth_of_two_the_second_workload_that_does_not_fit_reserves_after_the_first_and_may_not_be_delayed() {
    let (w, c) = two_deep(2);
    assert_eq!(reason(&w, "big1"), reserved(ReservedStart::At(HOUR), 0));
    // After `big1`'s declared 2 h from its start.
    assert_eq!(reason(&w, "big2"), reserved(ReservedStart::At(3 * HOUR), 0));
    // `x` fits beside `big1` but would hold 2 of `big2`'s 12 past 3 h.
    assert!(admitted(&c).is_empty());
    assert_eq!(
        reason(&w, "x"),
        PendingReason::WouldDelayReservation {
            reserved_for: "ns/big2".into(),
            start: ReservedStart::At(3 * HOUR),
            declared: Some(4 * HOUR)
        }
    );
}

#[test]
fn with_the_default_depth_only_the_first_reserves_and_work_beside_it_goes_ahead() {
    let (w, c) = two_deep(1);
    assert!(matches!(reason(&w, "big1"), PendingReason::Reserved { .. }));
    assert_eq!(reason(&w, "big2"), PendingReason::NoFit);
    assert_eq!(admitted(&c), ["x"]);
}

#[test]
fn a_workload_ahead_of_the_reservations_pushes_the_last_one_out_of_the_depth() {
    let (mut w, _) = two_deep(2);
    w.add(wl("urgent").queue("a").prio(5).at(4).runs(HOUR).pods(1, &[(GPU, 10)]));
    w.cycle(2 * MIN);
    assert!(matches!(reason(&w, "urgent"), PendingReason::Reserved { .. }));
    assert!(matches!(reason(&w, "big1"), PendingReason::Reserved { .. }));
    assert_eq!(reason(&w, "big2"), PendingReason::NoFit);
}

#[test]
fn a_workload_queued_at_the_same_instant_as_the_head_but_arriving_after_it_is_behind_its_reservation() {
    // The API server's creation times have whole seconds: a Job created
    // just after `big` was told its start can share its queue-order time.
    // Its UID sorting first must not put it ahead of the reservation.
    let mut w = reserved_for_big();
    w.add(wl("a-long").queue("a").at(1).runs(3 * HOUR).pods(1, &[(GPU, 2)]));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    assert!(matches!(
        reason(&w, "a-long"),
        PendingReason::WouldDelayReservation { .. }
    ));
    assert_eq!(reason(&w, "big"), reserved(ReservedStart::At(2 * HOUR), 0));
    // One that ends before the start is backfilled, and says so.
    w.add(wl("a-short").queue("a").at(1).runs(HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(3 * MIN);
    assert_eq!(admitted(&c), ["a-short"]);
    assert!(c.admitted[0].backfill.as_ref().is_some_and(|b| b.ends_before));
}

#[test]
fn a_higher_priority_arrival_that_fits_moves_the_reservation_and_the_head_is_told() {
    let mut w = reserved_for_big();
    // Ahead of `big` in queue order, and it fits: it goes first, and
    // holds 2 of the 8 GPUs until 3 h 02 m.
    w.add(
        wl("urgent")
            .queue("a")
            .prio(5)
            .at(2)
            .runs(3 * HOUR)
            .pods(1, &[(GPU, 2)]),
    );
    let c = w.cycle(2 * MIN);
    assert_eq!(admitted(&c), ["urgent"]);
    assert!(c.admitted[0].backfill.is_none());
    let to = ReservedStart::At(2 * MIN + 3 * HOUR);
    assert_eq!(
        c.moved,
        [ReservationMoved {
            uid: "big".into(),
            from: ReservedStart::At(2 * HOUR),
            to,
            ahead: vec!["ns/urgent".into()],
        }]
    );
    assert_eq!(reason(&w, "big"), reserved(to, 0));
    // Told once: the next cycle has nothing new to say.
    assert!(w.cycle(3 * MIN).moved.is_empty());
}

#[test]
fn work_let_ahead_within_the_max_delay_tells_the_head_its_later_start() {
    let mut w = World::new(vec![
        cq("a").quota("a100", vec![q(GPU, 8)]).reserve().max_delay(30 * MIN),
    ]);
    w.add(wl("run").queue("a").at(0).runs(2 * HOUR).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("big").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(MIN);
    w.add(wl("a").queue("a").at(2).runs(2 * HOUR + 20 * MIN).pods(1, &[(GPU, 2)]));
    let c = w.cycle(2 * MIN);
    assert_eq!(admitted(&c), ["a"]);
    let later = ReservedStart::At(2 * HOUR + 22 * MIN);
    assert_eq!(reason(&w, "big"), reserved(later, 1));
    assert_eq!(c.moved.len(), 1);
    assert_eq!((c.moved[0].to, &c.moved[0].ahead[..]), (later, &["ns/a".into()][..]));
}

#[test]
fn a_reservation_whose_head_can_no_longer_start_is_given_up_and_the_head_told() {
    let mut w = nodes_for_big();
    let (long_node, mid_node) = (
        w.e.workload_placement("long")[0].node.clone(),
        w.e.workload_placement("mid")[0].node.clone(),
    );
    // A pod Sluice does not know of takes a GPU on `mid`'s node: `big`
    // now starts on `long`'s node, at 3 h. Told, with nothing admitted
    // ahead of it, once its queue is looked at (a job arrives).
    w.usage(&mid_node, &[(GPU, 1)]);
    w.add(wl("tiny").queue("a").at(3).runs(10 * MIN).pods(1, &[(GPU, 1)]));
    let c = w.cycle(2 * MIN);
    assert_eq!(
        c.moved.iter().map(|m| (m.to, m.ahead.len())).collect::<Vec<_>>(),
        [(ReservedStart::At(3 * HOUR), 0)]
    );
    assert!(matches!(
        reason(&w, "big"),
        PendingReason::Reserved {
            start: ReservedStart::At(t),
            ..
        } if t == 3 * HOUR
    ));
    // Another on `long`'s node: no node will ever have 8 GPUs free. The
    // reservation is given up, `big` is told it waits for quota, and
    // work the reservation held back goes.
    w.usage(&long_node, &[(GPU, 1)]);
    w.add(wl("onto").queue("a").at(4).runs(3 * HOUR).pods(1, &[(GPU, 2)]));
    let c = w.cycle(3 * MIN);
    assert_eq!(admitted(&c), ["onto"]);
    assert!(!matches!(reason(&w, "big"), PendingReason::Reserved { .. }));
    assert!(c.pending_changed.iter().any(|(uid, _)| &**uid == "big"));
}

#[test]
fn a_head_that_can_never_fit_any_more_gives_its_reservation_up() {
    let mut w = reserved_for_big();
    w.add(wl("small").queue("a").at(2).runs(3 * HOUR).pods(1, &[(GPU, 1)]));
    assert!(admitted(&w.cycle(2 * MIN)).is_empty());
    // The queue shrinks to 7 GPUs: `big` (8) never fits. It is told so,
    // and holds nothing back any more.
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 7)]).reserve().build());
    let c = w.cycle(3 * MIN);
    assert_eq!(reason(&w, "big"), PendingReason::NeverFits);
    assert_eq!(admitted(&c), ["small"]);
}
