//! Idle-GPU reclaim in the index: which workloads a check looks at, and
//! what its verdicts do under each action.

use super::*;
use sluice_api::v1alpha1::{IdleAction, IdleReclaim};
use sluice_scheduler::idle::{Idleness, Unknown};

const MIN: i64 = 60_000;

/// The ready index, with cluster-gpu (8 GPUs) under an idle policy
/// (`for` 30m, grace 15m) and `min_runtime_s` of protection.
fn idle_index(action: IdleAction, only_when_contended: bool, min_runtime_s: Option<i64>) -> Index {
    let mut ix = ready_index();
    let mut q = cq("cluster-gpu", 8);
    q.spec.min_runtime_seconds = min_runtime_s;
    q.spec.idle_reclaim = Some(IdleReclaim {
        action,
        only_when_contended,
        ..IdleReclaim::default()
    });
    ix.apply_cluster_queue(q);
    ix
}

/// Job `name` with `gpus` GPUs admitted at T0 and running.
fn admit(ix: &mut Index, name: &str, gpus: u32, at: i64) {
    let j = mk_job(name, "team-a", 1, gpus);
    ix.apply_job(j.clone(), at);
    ix.apply_workload(stored_workload(&j, 0, 0), at);
    ix.take_plans();
    let (plans, _) = ix.cycle(at);
    assert_eq!(purposes(&plans), ["admit"]);
    observe_status(ix, &j, 0, 0, at);
    let mut running = j;
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 1, "ready": 1})).unwrap();
    ix.apply_job(running, at + 1);
    ix.take_plans();
}

/// A Job of 4 GPUs that waits (the idle one holds all 8).
fn waiter(ix: &mut Index, at: i64) {
    let j = mk_job("waiter", "team-a", 1, 4);
    ix.apply_job(j.clone(), at);
    ix.apply_workload(stored_workload(&j, 0, 1), at);
    ix.take_plans();
    let (plans, _) = ix.cycle(at);
    assert!(!purposes(&plans).contains(&"admit"));
}

fn idle() -> Idleness {
    Idleness::Idle {
        mean_percent: 1.5,
        max_percent: 3.0,
        pods: 1,
    }
}

fn verdict(v: Idleness) -> IdleOutcome {
    IdleOutcome::Checked {
        verdicts: vec![("wl-uid-nb".into(), T0, v)],
    }
}

#[test]
fn targets_are_admitted_workloads_past_grace_and_window() {
    let mut ix = idle_index(IdleAction::Warn, true, None);
    admit(&mut ix, "nb", 8, T0);
    assert!(
        ix.idle_targets(T0 + 44 * MIN).is_empty(),
        "15 min grace + 30 min window not over"
    );
    let t = ix.idle_targets(T0 + 45 * MIN);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].uid, "wl-uid-nb");
    assert_eq!(t[0].cluster_queue, "cluster-gpu");
    assert_eq!(t[0].admitted_at_ms, T0);
    assert_eq!(t[0].pods[0].1, "controller-uid=job-uid-nb");
    // Without a policy: nothing to check.
    let mut plain = ready_index();
    admit(&mut plain, "nb", 8, T0);
    assert!(!plain.has_idle_policies());
    assert!(plain.idle_targets(T0 + 100 * MIN).is_empty());
}

#[test]
fn nothing_happens_to_an_idle_workload_nobody_waits_for() {
    let mut ix = idle_index(IdleAction::Evict, true, None);
    admit(&mut ix, "nb", 8, T0);
    let applied = ix.apply_idle(verdict(idle()), T0 + 45 * MIN);
    assert_eq!(applied.idle["cluster-gpu"], 1, "counted as idle");
    assert!(applied.reclaims.is_empty());
    assert!(ix.take_plans().is_empty());
    assert_eq!(ix.engine().workload_state("wl-uid-nb"), Some(WorkloadState::Admitted));
}

#[test]
fn warn_sets_gpu_idle_with_numbers_once_and_clears_it_when_busy() {
    let mut ix = idle_index(IdleAction::Warn, true, None);
    admit(&mut ix, "nb", 8, T0);
    waiter(&mut ix, T0 + 40 * MIN);
    let applied = ix.apply_idle(verdict(idle()), T0 + 45 * MIN);
    assert_eq!(applied.reclaims, [("cluster-gpu".to_string(), IdleAction::Warn)]);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["idle_gpu"]);
    let (st, reason, msg) = condition(status_step(&plans[0]), cond::GPU_IDLE);
    assert_eq!((st, reason), ("True", "IdleGPU"));
    assert_eq!(
        msg,
        "GPUs idle: utilisation 1.5 % on average (at most 3.0 %) across 1 GPU pod(s) for the last 30 min, below 10 %; research/job-waiter waits for its quota"
    );
    let warned_job = plans[0].steps.iter().any(|s| {
        matches!(s, Step::Event(e) if e.regarding.kind.as_deref() == Some("Job") && e.type_ == "Warning" && e.reason == "IdleGPU")
    });
    assert!(warned_job, "an event on the Job: {:?}", plans[0].steps);
    assert_eq!(
        ix.engine().workload_state("wl-uid-nb"),
        Some(WorkloadState::Admitted),
        "warned, not evicted"
    );
    // Still idle: nothing more is written.
    assert!(ix.apply_idle(verdict(idle()), T0 + 46 * MIN).reclaims.is_empty());
    assert!(ix.take_plans().is_empty());
    // Busy again: GPUIdle=False, once.
    let busy = Idleness::Busy {
        pod: "p".into(),
        percent: 80.0,
        at: T0 + 46 * MIN,
    };
    ix.apply_idle(verdict(busy.clone()), T0 + 47 * MIN);
    let plans = ix.take_plans();
    assert_eq!(condition(status_step(&plans[0]), cond::GPU_IDLE).1, "GPUBusy");
    ix.apply_idle(verdict(busy), T0 + 48 * MIN);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn evict_requeues_with_backoff_and_the_reason_idle_gpu() {
    let mut ix = idle_index(IdleAction::Evict, true, None);
    admit(&mut ix, "nb", 8, T0);
    waiter(&mut ix, T0 + 40 * MIN);
    let now = T0 + 45 * MIN;
    let applied = ix.apply_idle(verdict(idle()), now);
    assert_eq!(applied.reclaims, [("cluster-gpu".to_string(), IdleAction::Evict)]);
    assert_eq!(applied.gpu_hours_reclaimed, 4.0, "8 GPUs × 30 min");
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    let s = status_step(&plans[0]);
    let (st, reason, msg) = condition(s, cond::EVICTED);
    assert_eq!((st, reason), ("True", "IdleGPU"));
    assert!(msg.starts_with("GPUs idle: utilisation 1.5 %"), "{msg}");
    let rq = s.requeue_state.as_ref().unwrap();
    assert_eq!((rq.count, ms(rq.requeue_at.as_ref().unwrap())), (1, now + 60_000));
    assert_eq!(ix.engine().workload_state("wl-uid-nb"), Some(WorkloadState::Evicting));
}

#[test]
fn a_warning_goes_with_the_eviction_and_a_verdict_for_an_older_admission_is_ignored() {
    let mut ix = idle_index(IdleAction::Warn, true, None);
    admit(&mut ix, "nb", 8, T0);
    waiter(&mut ix, T0 + 40 * MIN);
    ix.apply_idle(verdict(idle()), T0 + 45 * MIN);
    ix.take_plans();
    let mut q = cq("cluster-gpu", 8);
    q.spec.idle_reclaim = Some(IdleReclaim {
        action: IdleAction::Evict,
        ..IdleReclaim::default()
    });
    ix.apply_cluster_queue(q);
    // Judged for an admission at another time: not this one's verdict.
    let stale = IdleOutcome::Checked {
        verdicts: vec![("wl-uid-nb".into(), T0 - MIN, idle())],
    };
    assert!(ix.apply_idle(stale, T0 + 46 * MIN).reclaims.is_empty());
    ix.apply_idle(verdict(idle()), T0 + 46 * MIN);
    let plans = ix.take_plans();
    let s = status_step(&plans[0]);
    assert_eq!(condition(s, cond::EVICTED).1, "IdleGPU");
    assert!(
        s.condition(cond::GPU_IDLE).is_none(),
        "the warning is gone with the GPUs"
    );
}

#[test]
fn deactivate_sets_active_false_and_evicts() {
    let mut ix = idle_index(IdleAction::Deactivate, false, None);
    admit(&mut ix, "nb", 8, T0);
    // onlyWhenContended false: no waiter needed.
    ix.apply_idle(verdict(idle()), T0 + 45 * MIN);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["deactivate", "evict"]);
    assert_eq!(
        plans[0].steps,
        [Step::PatchWorkload {
            key: wkey("nb"),
            patch: json!({"spec": {"active": false}})
        }]
    );
    let (_, reason, msg) = condition(status_step(&plans[1]), cond::EVICTED);
    assert_eq!(reason, "IdleGPU");
    assert!(
        msg.ends_with("deactivated (set spec.active to true to queue it again)"),
        "{msg}"
    );
}

#[test]
fn minimum_runtime_protects_from_idle_eviction() {
    let mut ix = idle_index(IdleAction::Evict, false, Some(3600));
    admit(&mut ix, "nb", 8, T0);
    assert!(ix.apply_idle(verdict(idle()), T0 + 45 * MIN).reclaims.is_empty());
    assert!(ix.take_plans().is_empty());
    assert_eq!(ix.apply_idle(verdict(idle()), T0 + 60 * MIN).reclaims.len(), 1);
}

#[test]
fn unknown_verdicts_and_failed_checks_never_act_and_the_queue_says_why() {
    let mut ix = idle_index(IdleAction::Evict, false, None);
    admit(&mut ix, "nb", 8, T0);
    assert!(ix.idle_check_condition("cluster-gpu").is_none(), "no check ran yet");
    let gap = Idleness::Unknown(Unknown::Gap {
        pod: "p".into(),
        from: 0,
        to: MIN,
    });
    assert!(ix.apply_idle(verdict(gap), T0 + 45 * MIN).reclaims.is_empty());
    let c = ix.idle_check_condition("cluster-gpu").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "IdleCheckSucceeded"));
    let down = IdleOutcome::Unavailable {
        reason: cond::reasons::PROMETHEUS_UNAVAILABLE,
        metric: "unreachable",
        message: "cannot reach Prometheus at http://127.0.0.1:1: connection refused; nothing is judged idle".into(),
    };
    assert!(ix.apply_idle(down.clone(), T0 + 46 * MIN).reclaims.is_empty());
    let c = ix.idle_check_condition("cluster-gpu").unwrap();
    assert_eq!((c.type_.as_str(), c.status.as_str()), ("IdleCheckUnavailable", "True"));
    assert_eq!(c.reason, "PrometheusUnavailable");
    assert!(c.message.contains("connection refused"));
    // The transition time stays while it stays down.
    ix.apply_idle(down, T0 + 47 * MIN);
    assert_eq!(
        ix.idle_check_condition("cluster-gpu").unwrap().last_transition_time,
        c.last_transition_time
    );
    assert!(ix.take_plans().is_empty());
    assert_eq!(ix.engine().workload_state("wl-uid-nb"), Some(WorkloadState::Admitted));
}

#[test]
fn an_invalid_policy_is_refused_with_the_queue_and_the_one_before_stays() {
    let mut ix = ready_index();
    let mut q = cq("cluster-gpu", 8);
    q.spec.idle_reclaim = Some(IdleReclaim {
        window: "soon".into(),
        ..IdleReclaim::default()
    });
    ix.apply_cluster_queue(q);
    admit(&mut ix, "nb", 8, T0);
    let (reason, message) = ix.cluster_queue_problem("cluster-gpu").unwrap();
    assert_eq!(reason, "InvalidClusterQueue");
    assert!(
        message.contains("spec.idleReclaim.for: expected a duration"),
        "{message}"
    );
    assert!(!ix.has_idle_policies(), "the queue before it had none");
    assert!(ix.idle_targets(T0 + 1000 * MIN).is_empty());
    assert!(ix.idle_check_condition("cluster-gpu").is_none());
}

/// The log line says once that nothing is judged idle (it used to say it
/// twice: once itself, once in the message).
#[test]
fn the_unavailable_log_says_once_that_nothing_is_judged_idle() {
    for cause in [
        "idleReclaim needs the controller's --prometheus-url",
        "connection refused",
    ] {
        let line = crate::index::idle::unavailable_log(&crate::idle::unavailable_message(cause));
        assert_eq!(line.matches("nothing is judged idle").count(), 1, "{line}");
        assert!(line.contains(cause), "{line}");
    }
}
