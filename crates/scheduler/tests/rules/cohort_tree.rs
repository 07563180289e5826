//! Cohort trees: a cohort's own quota, its limits towards its parent,
//! borrowing across levels, and parent cycles refused.

use crate::common::*;
use sluice_scheduler::*;

/// Queue `a` (nominal 0) in team `t`, below root `org` with 8 GPUs of its own.
fn team_under_org(team: CohortSpec) -> World {
    let mut w = World::new(vec![cq("a").cohort("t").quota("a100", vec![q(GPU, 0)])]);
    w.cohort(cohort("org").quota("a100", vec![q(GPU, 8)]));
    w.cohort(team.parent("org"));
    w
}

#[test]
fn a_queue_borrows_a_cohorts_own_quota_across_levels() {
    let mut w = team_under_org(cohort("t"));
    for i in 0..9 {
        w.add(wl(&format!("j{i}")).queue("a").at(i).pods(1, &[(GPU, 1)]));
    }
    let c = w.cycle(0);
    assert_eq!(c.admitted.len(), 8, "the root's 8 GPUs, two levels up");
    assert_eq!(w.used("a", "a100", GPU), 8);
    assert_eq!(w.state("j8"), WorkloadState::Pending);
}

#[test]
fn a_cohorts_borrowing_limit_bounds_what_its_subtree_takes_from_its_parent() {
    // The team has 2 of its own and may borrow 3 more from org.
    let mut w = team_under_org(cohort("t").quota("a100", vec![q(GPU, 2).borrow(3)]));
    for i in 0..8 {
        w.add(wl(&format!("j{i}")).queue("a").at(i).pods(1, &[(GPU, 1)]));
    }
    assert_eq!(w.cycle(0).admitted.len(), 5);
}

#[test]
fn a_cohorts_lending_limit_keeps_part_of_its_quota_for_its_own_subtree() {
    // Team t has 6 and lends at most 2 of them; queue b sits beside t under
    // org (which has nothing of its own here) and can take only those 2.
    let mut w = World::new(vec![
        cq("a").cohort("t").quota("a100", vec![q(GPU, 0)]),
        cq("b").cohort("org").quota("a100", vec![q(GPU, 0)]),
    ]);
    w.cohort(cohort("org"));
    w.cohort(cohort("t").parent("org").quota("a100", vec![q(GPU, 6).lend(2)]));
    for i in 0..6 {
        w.add(wl(&format!("b{i}")).queue("b").at(i).pods(1, &[(GPU, 1)]));
    }
    w.cycle(0);
    assert_eq!(w.used("b", "a100", GPU), 2);
    for i in 0..6 {
        w.add(wl(&format!("a{i}")).queue("a").at(10 + i).pods(1, &[(GPU, 1)]));
    }
    w.cycle(1);
    assert_eq!(w.used("a", "a100", GPU), 4, "what t did not lend");
}

#[test]
fn a_parent_that_leads_back_to_the_cohort_is_refused_and_nothing_changes() {
    let mut w = World::new(vec![cq("a").cohort("x").quota("a100", vec![q(GPU, 1)])]);
    w.cohort(cohort("y").parent("z"));
    w.cohort(cohort("x").parent("y"));
    let err = w.e.upsert_cohort(cohort("z").parent("x")).unwrap_err();
    assert_eq!(
        err,
        EngineError::CohortCycle {
            cohort: "z".into(),
            path: "z -> x -> y -> z".into()
        }
    );
    assert!(err.to_string().contains("z -> x -> y -> z"), "{err}");
    let self_parent = w.e.upsert_cohort(cohort("q").parent("q")).unwrap_err();
    assert!(matches!(self_parent, EngineError::CohortCycle { .. }));
    w.add(wl("one").queue("a").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["one"], "the tree still works");
}

#[test]
fn removing_a_cohort_object_takes_its_quota_and_parent_away() {
    let mut w = team_under_org(cohort("t"));
    w.add(wl("j").queue("a").pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(0)), ["j"]);
    w.e.remove_cohort("t");
    w.e.finish("j").unwrap();
    w.add(wl("k").queue("a").at(2).pods(1, &[(GPU, 1)]));
    w.cycle(2);
    assert_eq!(
        w.e.explanation("k").unwrap().reason,
        PendingReason::NeverFits,
        "t is a root again, with no quota: {}",
        w.why("k")
    );
}

#[test]
fn moving_a_cohort_under_a_new_parent_keeps_the_usage_of_what_runs() {
    let mut w = team_under_org(cohort("t"));
    w.add(wl("j").queue("a").pods(1, &[(GPU, 6)]));
    assert_eq!(admitted(&w.cycle(0)), ["j"]);
    // A new root with 10; t moves there while j runs.
    w.cohort(cohort("big").quota("a100", vec![q(GPU, 10)]));
    w.cohort(cohort("t").parent("big"));
    w.add(wl("k").queue("a").at(1).pods(1, &[(GPU, 4)]));
    w.add(wl("l").queue("a").at(2).pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(1)), ["k"], "6 + 4 of big's 10");
}
