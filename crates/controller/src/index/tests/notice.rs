//! Preemption with a notice (`spec.preemption.noticeSeconds: 300`): the
//! victim is told and runs on, its quota held for the preemptor, until the
//! deadline or until it acknowledges; a stale acknowledgement does not
//! count; a restarted controller keeps the deadline.

use super::*;
use crate::index::notice::rule::rfc3339;
use sluice_api::labels::{CHECKPOINT_DONE, PREEMPTION_NOTICE};

/// When `high` preempts `low`.
const PREEMPTED_AT: i64 = T0 + 3000;
const DEADLINE: i64 = PREEMPTED_AT + 300_000;

fn noticed_cq() -> ClusterQueue {
    let mut q = cq("cluster-gpu", 8);
    q.spec.preemption.notice_seconds = Some(300);
    q
}

/// An index whose ClusterQueue gives a 300 s notice.
fn notice_index() -> Index {
    let mut ix = ready_index();
    ix.apply_cluster_queue(noticed_cq());
    ix
}

fn running(j: &Job) -> Job {
    let mut r = j.clone();
    r.spec.as_mut().unwrap().suspend = Some(false);
    r.status = serde_json::from_value(json!({"startTime": "2027-01-15T08:00:01Z", "active": 4})).unwrap();
    r
}

fn acknowledged(j: &Job, at_ms: i64) -> Job {
    let mut a = j.clone();
    a.metadata
        .annotations
        .get_or_insert_default()
        .insert(CHECKPOINT_DONE.into(), rfc3339(at_ms));
    a
}

/// `low` (8 GPUs) admitted and running (as `low`, e.g. acknowledged
/// already), then `high` (8 GPUs, priority 100) arrives; the plans of
/// the cycle that preempts `low`, and its wake-up.
fn preempt(ix: &mut Index, low: &Job) -> (Vec<Plan>, Option<i64>) {
    ix.apply_job(low.clone(), T0);
    ix.apply_workload(stored_workload(low, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    observe_status(ix, low, 0, 0, T0);
    ix.apply_job(running(low), T0 + 1000);
    let high = mk_job("high", "team-a", 4, 2);
    ix.apply_job(high.clone(), T0 + 2000);
    ix.apply_workload(stored_workload(&high, 100, 2), T0 + 2000);
    ix.take_plans();
    ix.cycle(PREEMPTED_AT)
}

/// The plans that change a workload's state (not its explanation).
fn state_changes(plans: &[Plan]) -> Vec<&'static str> {
    purposes(plans).into_iter().filter(|p| *p != "pending").collect()
}

fn plan<'a>(plans: &'a [Plan], label: &str) -> &'a Plan {
    plans
        .iter()
        .find(|p| p.purpose.label() == label)
        .unwrap_or_else(|| panic!("no {label} plan in {:?}", purposes(plans)))
}

/// The victim holds its quota and the preemptor waits.
fn assert_held(ix: &Index) {
    assert_eq!(ix.engine().workload_state("wl-uid-low"), Some(WorkloadState::Evicting));
    assert_eq!(
        ix.engine().workload_state("wl-uid-high"),
        Some(WorkloadState::Preempting)
    );
}

#[test]
fn the_victim_is_told_its_deadline_and_keeps_running() {
    let mut ix = notice_index();
    let low = mk_job("low", "team-a", 4, 2);
    let (plans, wake) = preempt(&mut ix, &low);
    assert_eq!(state_changes(&plans), ["notice"], "told, not evicted");
    let notice = plan(&plans, "notice");
    let s = status_step(notice);
    let (st, reason, msg) = condition(s, cond::PREEMPTION_NOTICE);
    assert_eq!((st, reason), ("True", "Preempted"));
    assert!(msg.contains("research/job-high"), "{msg}");
    assert!(
        msg.ends_with(&format!(
            "it is suspended at {}, or as soon as it writes sluice.dev/checkpoint-done",
            rfc3339(DEADLINE)
        )),
        "{msg}"
    );
    assert_eq!(
        ms(&s.condition(cond::PREEMPTION_NOTICE).unwrap().last_transition_time),
        PREEMPTED_AT
    );
    assert!(s.condition(cond::EVICTED).is_none(), "not evicted yet");
    assert!(job_patches(notice).is_empty(), "the Job is not suspended");
    let events: Vec<&str> = notice
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) if e.regarding.kind.as_deref() == Some("Job") => Some(e.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(events, ["PreemptionNotice"]);
    let annotate = notice.steps.iter().find_map(|s| match s {
        Step::AnnotatePods { job, key, value, .. } => Some((job.to_string(), *key, value.clone())),
        _ => None,
    });
    assert_eq!(
        annotate,
        Some(("research/low".into(), PREEMPTION_NOTICE, rfc3339(DEADLINE)))
    );
    assert_held(&ix);
    assert!(wake.is_some_and(|w| w <= DEADLINE), "wakes by the deadline: {wake:?}");
}

#[test]
fn at_the_deadline_the_victim_is_suspended_and_the_preemptor_admitted_once_it_is_gone() {
    let mut ix = notice_index();
    let low = mk_job("low", "team-a", 4, 2);
    preempt(&mut ix, &low);
    let (plans, _) = ix.cycle(DEADLINE - 1);
    assert!(!purposes(&plans).contains(&"evict"), "{:?}", purposes(&plans));
    assert_held(&ix);
    let (plans, _) = ix.cycle(DEADLINE);
    let evict = plan(&plans, "evict");
    let s = status_step(evict);
    assert_eq!(condition(s, cond::PREEMPTION_NOTICE).0, "False");
    assert_eq!(condition(s, cond::PREEMPTION_NOTICE).1, "Suspended");
    assert_eq!(condition(s, cond::EVICTED).1, "Preempted");
    assert_eq!(condition(s, cond::PREEMPTED).1, "InClusterQueue");
    assert_eq!(job_patches(evict), [("job", &json!({"spec": {"suspend": true}}))]);
    assert_held(&ix);
    // Suspended, its pods gone: the quota goes to the preemptor.
    let mut gone = running(&low);
    gone.spec.as_mut().unwrap().suspend = Some(true);
    gone.status.as_mut().unwrap().active = None;
    gone.status.as_mut().unwrap().terminating = Some(0);
    ix.apply_job(gone, DEADLINE + 1000);
    assert_eq!(purposes(&ix.take_plans()), ["requeue"]);
    let (plans, _) = ix.cycle(DEADLINE + 2000);
    assert!(
        plans.iter().any(|p| p.purpose
            == Purpose::Admit {
                uid: "wl-uid-high".into()
            }),
        "{:?}",
        purposes(&plans)
    );
}

#[test]
fn an_acknowledgement_suspends_the_victim_before_the_deadline() {
    let mut ix = notice_index();
    let low = mk_job("low", "team-a", 4, 2);
    preempt(&mut ix, &low);
    ix.apply_job(
        acknowledged(&running(&low), PREEMPTED_AT + 10_000),
        PREEMPTED_AT + 10_000,
    );
    let plans = ix.take_plans();
    let evict = plan(&plans, "evict");
    let (st, reason, msg) = condition(status_step(evict), cond::PREEMPTION_NOTICE);
    assert_eq!((st, reason), ("False", "Suspended"));
    assert!(msg.contains(CHECKPOINT_DONE), "{msg}");
    assert_eq!(job_patches(evict), [("job", &json!({"spec": {"suspend": true}}))]);
    assert_held(&ix);
}

#[test]
fn an_acknowledgement_from_before_the_notice_does_not_skip_it() {
    let mut ix = notice_index();
    // Left from an earlier preemption: a time before this notice began.
    let low = acknowledged(&mk_job("low", "team-a", 4, 2), T0);
    let (plans, _) = preempt(&mut ix, &low);
    assert_eq!(state_changes(&plans), ["notice"]);
    let (plans, _) = ix.cycle(PREEMPTED_AT + 60_000);
    assert!(!purposes(&plans).contains(&"evict"));
    // Written again, not yet a time (it acknowledges nothing).
    let mut garbage = running(&low);
    garbage
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(CHECKPOINT_DONE.into(), "done".into());
    ix.apply_job(garbage, PREEMPTED_AT + 61_000);
    assert!(!purposes(&ix.take_plans()).contains(&"evict"));
    assert_held(&ix);
}

/// A new leader at `at`, after `low` was preempted with a notice by the
/// first index; `high` still there or deleted meanwhile.
fn restarted(low: &Job, high_still_there: bool, at: i64) -> Index {
    let mut first = notice_index();
    preempt(&mut first, low);
    let mut stored = stored_workload(low, 0, 0);
    stored.status = first.workload_status(&wkey("low")).cloned();
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(noticed_cq());
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    ix.apply_job(running(low), at);
    ix.apply_workload(stored, at);
    if high_still_there {
        let high = mk_job("high", "team-a", 4, 2);
        ix.apply_job(high.clone(), at);
        ix.apply_workload(stored_workload(&high, 100, 2), at);
    }
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix.take_plans();
    ix
}

#[test]
fn a_restarted_controller_keeps_the_deadline() {
    // Two minutes later: the notice's start is the condition's.
    let later = PREEMPTED_AT + 120_000;
    let mut ix = restarted(&mk_job("low", "team-a", 4, 2), true, later);
    let (plans, wake) = ix.cycle(later);
    let (_, _, msg) = condition(status_step(plan(&plans, "notice")), cond::PREEMPTION_NOTICE);
    assert!(msg.contains(&rfc3339(DEADLINE)), "{msg}");
    assert!(wake.is_some_and(|w| w <= DEADLINE), "{wake:?}");
    assert!(!purposes(&ix.cycle(DEADLINE - 1).0).contains(&"evict"));
    assert!(purposes(&ix.cycle(DEADLINE).0).contains(&"evict"));
}

#[test]
fn without_a_notice_the_victim_is_evicted_at_once() {
    let mut ix = ready_index();
    let (plans, _) = preempt(&mut ix, &mk_job("low", "team-a", 4, 2));
    let evict = plan(&plans, "evict");
    assert!(status_step(evict).condition(cond::PREEMPTION_NOTICE).is_none());
    assert!(!purposes(&plans).contains(&"notice"));
}

#[test]
fn a_victim_that_finishes_during_its_notice_ends_it_and_frees_its_quota() {
    let mut ix = notice_index();
    let low = mk_job("low", "team-a", 4, 2);
    preempt(&mut ix, &low);
    let mut done = running(&low);
    done.status = serde_json::from_value(json!({
        "startTime": "2027-01-15T08:00:01Z", "succeeded": 4,
        "conditions": [{"type": "Complete", "status": "True"}]}))
    .unwrap();
    ix.apply_job(done, PREEMPTED_AT + 5000);
    let plans = ix.take_plans();
    let s = plans
        .iter()
        .filter_map(|p| match p.steps.first() {
            Some(Step::ApplyWorkloadStatus { status, .. }) => Some(status),
            _ => None,
        })
        .find(|s| s.condition(cond::FINISHED).is_some())
        .unwrap_or_else(|| panic!("no Finished write in {:?}", purposes(&plans)));
    assert_eq!(condition(s, cond::PREEMPTION_NOTICE).0, "False");
    assert!(!purposes(&plans).contains(&"evict"), "nothing to suspend");
    let (plans, wake) = ix.cycle(PREEMPTED_AT + 6000);
    assert!(
        plans.iter().any(|p| p.purpose
            == Purpose::Admit {
                uid: "wl-uid-high".into()
            }),
        "{:?}",
        purposes(&plans)
    );
    assert!(
        wake.is_none_or(|w| w > DEADLINE),
        "no wake-up for a notice that ended: {wake:?}"
    );
}

#[test]
fn a_notice_whose_preemptor_went_during_a_restart_is_withdrawn() {
    let later = PREEMPTED_AT + 120_000;
    let mut ix = restarted(&mk_job("low", "team-a", 4, 2), false, later);
    let (plans, _) = ix.cycle(later);
    let (st, reason, _) = condition(status_step(plan(&plans, "notice")), cond::PREEMPTION_NOTICE);
    assert_eq!((st, reason), ("False", "Withdrawn"));
    assert_eq!(ix.engine().workload_state("wl-uid-low"), Some(WorkloadState::Admitted));
    // Once: later cycles write nothing more about it.
    assert!(!purposes(&ix.cycle(later + 1000).0).contains(&"notice"));
}
