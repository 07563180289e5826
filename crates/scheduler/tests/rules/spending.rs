//! Budgets as the engine obeys them (the standing the driver gives from
//! the usage book): `Stop` admits nothing new and says what was spent,
//! `Deprioritize` puts the queue behind its cohort and keeps it from
//! borrowing, a declared run time that would overrun what is left waits
//! with the arithmetic; and usage history in fair sharing.

use crate::common::*;
use sluice_scheduler::usage::HOUR;
use sluice_scheduler::*;

const GPU_HOUR: i128 = 1000 * HOUR as i128;

fn standing(action: Option<BudgetAction>, spent_gpu_hours: i128, limit: i128) -> BudgetStanding {
    BudgetStanding {
        action,
        resource: GPU.to_string(),
        flavor: None,
        spent: spent_gpu_hours * GPU_HOUR,
        limit: limit * GPU_HOUR,
        stop_at: Some(limit * GPU_HOUR),
        period: "7d calendar".to_string(),
    }
}

#[test]
fn a_stopped_queue_admits_nothing_new_says_what_it_spent_and_keeps_what_runs() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Stop), 12, 10)))
        .unwrap();
    w.add(wl("new").queue("a").pods(1, &[(GPU, 2)]));
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(w.state("running"), WorkloadState::Admitted);
    assert_eq!(
        w.why("new"),
        "the ClusterQueue's budget stops new admissions: it spent 12 GPU-hours of nvidia.com/gpu this period (7d calendar), and stops at 10 GPU-hours"
    );
    // A new period: the standing is lifted and the queue admits again.
    w.e.set_budget_standing("a", Some(standing(None, 0, 10))).unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["new"]);
}

#[test]
fn a_warned_queue_admits_as_before() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Warn), 9, 10)))
        .unwrap();
    w.add(wl("job").queue("a").pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(0)), ["job"]);
}

/// Two queues with 4 GPUs each in a cohort.
fn pair() -> World {
    World::new(vec![
        cq("a").cohort("pool").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("pool").quota("a100", vec![q(GPU, 4)]),
    ])
}

#[test]
fn a_deprioritized_queue_may_not_borrow() {
    let mut w = pair();
    w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Deprioritize), 9, 10)))
        .unwrap();
    w.add(wl("big").queue("a").pods(1, &[(GPU, 6)]));
    assert!(w.cycle(0).admitted.is_empty(), "6 GPUs need 2 borrowed");
    assert!(w.why("big").contains("0 borrowable"), "{}", w.why("big"));
    w.add(wl("small").queue("a").pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(1)), ["small"], "within its nominal quota");
    w.e.set_budget_standing("a", None).unwrap();
    w.e.finish("small").unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["big"], "without the budget it borrows");
}

#[test]
fn a_deprioritized_queue_comes_after_every_other_queue_of_its_cohort() {
    // a's workload has the higher priority and came first, but a is
    // deprioritized: b's two are served before it, the second by
    // borrowing a's idle quota, and a's waits.
    let mut w = World::new(vec![
        cq("a").cohort("pool").quota("a100", vec![q(GPU, 2)]),
        cq("b").cohort("pool").quota("a100", vec![q(GPU, 2)]),
    ]);
    w.add(wl("a-first").queue("a").prio(5).at(0).pods(1, &[(GPU, 2)]));
    w.add(wl("b-later").queue("b").prio(0).at(10).pods(1, &[(GPU, 2)]));
    w.add(wl("b-more").queue("b").prio(0).at(11).pods(1, &[(GPU, 2)]));
    w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Deprioritize), 9, 10)))
        .unwrap();
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["b-later", "b-more"]);
    assert_eq!(w.state("a-first"), WorkloadState::Pending);
    // Within budget again, a comes first in priority order.
    w.e.set_budget_standing("a", None).unwrap();
    w.e.finish("b-more").unwrap();
    w.add(wl("b-last").queue("b").prio(0).at(12).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(1)), ["a-first"]);
}

#[test]
fn a_declared_run_time_that_would_overrun_what_is_left_waits_with_the_arithmetic() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    // 10 GPU-hours left before the stop.
    w.e.set_budget_standing("a", Some(standing(None, 90, 100))).unwrap();
    w.add(wl("long").queue("a").runs(2 * HOUR).pods(1, &[(GPU, 8)]));
    w.add(wl("short").queue("a").at(1).runs(HOUR).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["short"], "8 GPU-hours fit in the 10 left");
    assert_eq!(
        w.why("long"),
        "fits now, but its declared run time would overrun the ClusterQueue's budget (7d calendar): 8 nvidia.com/gpu × 2h00m = 16 GPU-hours, and 10 GPU-hours is left before the budget stops the queue"
    );
}

#[test]
fn a_workload_without_a_declared_run_time_is_not_refused_early() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.e.set_budget_standing("a", Some(standing(None, 99, 100))).unwrap();
    w.add(wl("open-ended").queue("a").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["open-ended"]);
}

/// Two queues with no quota of their own in a cohort of 8 GPUs.
fn borrowers() -> World {
    let mut w = World::new(vec![
        cq("a").cohort("pool").quota("a100", vec![q(GPU, 0)]),
        cq("b").cohort("pool").quota("a100", vec![q(GPU, 0)]),
    ]);
    w.cohort(cohort("pool").quota("a100", vec![q(GPU, 8)]));
    w
}

#[test]
fn with_a_usage_history_the_queue_that_used_the_cohort_waits_behind_one_that_did_not() {
    let flood = |w: &mut World| {
        for i in 0..8 {
            w.add(wl(&format!("a-{i}")).queue("a").at(i).pods(1, &[(GPU, 1)]));
            w.add(wl(&format!("b-{i}")).queue("b").at(100 + i).pods(1, &[(GPU, 1)]));
        }
    };
    // No history: an even split.
    let mut w = borrowers();
    flood(&mut w);
    w.cycle(0);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (4, 4));

    // a held 4 GPUs on average lately: b gets what evens the shares.
    let mut w = borrowers();
    w.e.set_usage_history("a", &[("a100", GPU, u(4))]).unwrap();
    flood(&mut w);
    w.cycle(0);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (2, 6));
    assert_eq!((w.share("a"), w.share("b")), (750, 750), "(2 + 4) / 8 and 6 / 8");
    // Forgotten: shares are now-only again.
    w.e.set_usage_history("a", &[]).unwrap();
    assert_eq!(w.share("a"), 250);
}

#[test]
fn accounting_governs_the_engine_as_the_budget_is_spent_and_reports_each_change() {
    use sluice_scheduler::usage::{Accounting, Budget, Period, Window};
    let mut w = World::with_config(
        EngineConfig {
            metering: true,
            ..Default::default()
        },
        vec![cq("a").quota("a100", vec![q(GPU, 8)])],
    );
    let mut acc = Accounting::new(None);
    acc.set_budget(
        "a",
        Some(Budget {
            resource: GPU.into(),
            flavor: None,
            limit: 16 * GPU_HOUR,
            period: Period::Day,
            window: Window::Calendar,
            actions: vec![(50, BudgetAction::Warn), (100, BudgetAction::Stop)],
        }),
    );
    w.add(wl("first").queue("a").pods(1, &[(GPU, 8)]));
    acc.govern(&mut w.e, 0);
    w.cycle(0);
    acc.charge(&mut w.e, 0);
    let changes = acc.govern(&mut w.e, HOUR);
    assert_eq!(changes[0].after, Some(BudgetAction::Warn), "8 of 16 GPU-hours");
    let changes = acc.govern(&mut w.e, 2 * HOUR);
    assert_eq!(
        (changes[0].before, changes[0].after),
        (Some(BudgetAction::Warn), Some(BudgetAction::Stop))
    );
    w.e.finish("first").unwrap();
    acc.charge(&mut w.e, 2 * HOUR);
    w.add(wl("second").queue("a").pods(1, &[(GPU, 1)]));
    assert!(w.cycle(2 * HOUR).admitted.is_empty(), "stopped: {}", w.why("second"));
    assert!(
        acc.govern(&mut w.e, 3 * HOUR).is_empty(),
        "nothing held, nothing changes"
    );
    assert_eq!(acc.spending("a").unwrap().spent, 16 * GPU_HOUR);
}

#[test]
fn a_deprioritized_queue_does_not_borrow_by_preempting_either() {
    // a's urgent job needs all 6 GPUs of the cohort: its own 4, after
    // preempting its own running job, and b's 2 borrowed, which a
    // deprioritized queue may not.
    let mut w = World::new(vec![
        cq("a")
            .cohort("pool")
            .quota("a100", vec![q(GPU, 4)])
            .within(WithinClusterQueue::LowerPriority),
        cq("b").cohort("pool").quota("a100", vec![q(GPU, 2)]),
    ]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Deprioritize), 9, 10)))
        .unwrap();
    w.add(wl("urgent").queue("a").prio(10).at(1).pods(1, &[(GPU, 6)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty() && c.admitted.is_empty(), "{:?}", victims(&c));
    // Within budget, it preempts its own job and borrows.
    w.e.set_budget_standing("a", None).unwrap();
    assert_eq!(victims(&w.cycle(2)), ["low"]);
}

/// The e2e test's case: a's job within its own nominal quota arrived first;
/// b's, which needs a's idle quota, after; both wait for the same GPUs.
#[test]
fn a_deprioritized_queue_loses_its_idle_quota_to_a_later_borrower_it_would_otherwise_keep() {
    let run = |deprioritized: bool| {
        let mut w = pair();
        w.add(wl("run").queue("a").pods(1, &[(GPU, 2)]));
        w.add(wl("blocker").queue("b").pods(3, &[(GPU, 2)]));
        assert_eq!(admitted(&w.cycle(0)), ["run", "blocker"]);
        w.add(wl("a-next").queue("a").at(1).pods(1, &[(GPU, 2)]));
        w.add(wl("b-next").queue("b").at(2).pods(3, &[(GPU, 2)]));
        assert!(w.cycle(3).admitted.is_empty());
        if deprioritized {
            w.e.set_budget_standing("a", Some(standing(Some(BudgetAction::Deprioritize), 9, 10)))
                .unwrap();
        }
        w.e.finish("blocker").unwrap();
        let c = w.cycle(4);
        admitted(&c).iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(run(false), ["a-next"], "within budget: its nominal quota first");
    assert_eq!(run(true), ["b-next"], "deprioritized: the borrower first");
}
