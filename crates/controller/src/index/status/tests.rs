//! Each decision's Workload status, table by table: the conditions it sets
//! (type, status, reason, message), their transition times, and `state`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use sluice_api::v1alpha1::{Admission, WorkloadState, WorkloadStatus, conditions as cond};
use sluice_scheduler::{self as eng, Explanation, FlavorVerdict, PendingReason, Verdict};

use super::*;

const T0: i64 = 1_800_000_000_000;
const LATER: i64 = T0 + 60_000;

/// A status with these `(type, status)` conditions, all set at `T0`.
fn with(conds: &[(&str, &str)]) -> WorkloadStatus {
    let mut s = WorkloadStatus::default();
    for (t, st) in conds {
        set_condition(&mut s.conditions, t, st, "Before", "before", T0, Some(1));
    }
    s
}

fn admission() -> Admission {
    Admission {
        cluster_queue: "cluster-gpu".into(),
        pod_set_assignments: Vec::new(),
        backfill: None,
    }
}

/// `(type, status, reason, message, changed at LATER)` of every condition.
fn conditions(s: &WorkloadStatus) -> Vec<(&str, &str, &str, &str, bool)> {
    s.conditions
        .iter()
        .map(|c: &Condition| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str(),
                ms(&c.last_transition_time) == LATER,
            )
        })
        .collect()
}

type Transition = fn(&mut WorkloadStatus);
/// `(type, status, reason, message, changed at LATER)`
type Row = (&'static str, &'static str, &'static str, &'static str, bool);
/// `(what, status before, decision, conditions after, state after)`
type Case = (&'static str, WorkloadStatus, Transition, Vec<Row>, WorkloadState);

/// After an eviction: quota released, not admitted, and `requeued`.
fn released(requeued: Row) -> Vec<Row> {
    vec![
        (
            cond::QUOTA_RESERVED,
            "False",
            "Pending",
            "Quota released after eviction",
            true,
        ),
        (
            cond::ADMITTED,
            "False",
            "Pending",
            "Evicted; waiting in the queue again",
            true,
        ),
        requeued,
    ]
}

#[test]
fn each_decision_writes_its_conditions_and_state() {
    let cases: Vec<Case> = vec![
        (
            "admitted after an eviction: eviction, preemption and readiness are over",
            with(&[
                (cond::EVICTED, "True"),
                (cond::PREEMPTED, "True"),
                (cond::PODS_READY, "True"),
                (cond::QUOTA_RESERVED, "False"),
            ]),
            |s| admitted(s, admission(), None, true, LATER, Some(2)),
            vec![
                (cond::EVICTED, "False", "Admitted", "Admitted again", true),
                (cond::PREEMPTED, "False", "Admitted", "Admitted again", true),
                (
                    cond::PODS_READY,
                    "False",
                    "WaitForStart",
                    "Admitted again; waiting for its pods",
                    true,
                ),
                (
                    cond::QUOTA_RESERVED,
                    "True",
                    "QuotaReserved",
                    "Quota reserved in ClusterQueue cluster-gpu",
                    true,
                ),
                (cond::ADMITTED, "True", "Admitted", "The workload is admitted", true),
            ],
            WorkloadState::Admitted,
        ),
        (
            "preempted: evicted and preempted, quota still held",
            with(&[(cond::QUOTA_RESERVED, "True"), (cond::ADMITTED, "True")]),
            |s| {
                evicted(
                    s,
                    "Preempted",
                    Some("InClusterQueue"),
                    "to make room",
                    true,
                    LATER,
                    Some(1),
                )
            },
            vec![
                (cond::QUOTA_RESERVED, "True", "Before", "before", false),
                (cond::ADMITTED, "True", "Before", "before", false),
                (cond::EVICTED, "True", "Preempted", "to make room", true),
                (cond::PREEMPTED, "True", "InClusterQueue", "to make room", true),
            ],
            WorkloadState::Evicting,
        ),
        (
            "evicted for a pods-ready timeout: not preempted",
            with(&[(cond::QUOTA_RESERVED, "True")]),
            |s| evicted(s, "PodsReadyTimeout", None, "too slow", true, LATER, Some(1)),
            vec![
                (cond::QUOTA_RESERVED, "True", "Before", "before", false),
                (cond::EVICTED, "True", "PodsReadyTimeout", "too slow", true),
            ],
            WorkloadState::Evicting,
        ),
        (
            "requeued at once after an eviction",
            with(&[(cond::QUOTA_RESERVED, "True"), (cond::ADMITTED, "True")]),
            |s| {
                assert_eq!(requeued(s, None, true, LATER, Some(1)), "Requeued after eviction");
            },
            released((cond::REQUEUED, "True", "Pending", "Requeued after eviction", true)),
            WorkloadState::Pending,
        ),
        (
            "requeued after a backoff",
            with(&[(cond::QUOTA_RESERVED, "True")]),
            |s| {
                assert_eq!(
                    requeued(s, Some(LATER + 1), true, LATER, Some(1)),
                    "Requeue after backoff"
                );
            },
            released((cond::REQUEUED, "False", "Backoff", "Requeue after backoff", true)),
            WorkloadState::Pending,
        ),
        (
            "deactivated: not requeued, backoff or not",
            with(&[(cond::QUOTA_RESERVED, "True")]),
            |s| {
                assert_eq!(
                    requeued(s, Some(LATER + 1), false, LATER, Some(1)),
                    "Deactivated; not requeued until spec.active is true"
                );
            },
            released((
                cond::REQUEUED,
                "False",
                "Deactivated",
                "Deactivated; not requeued until spec.active is true",
                true,
            )),
            WorkloadState::Inactive,
        ),
        (
            "finished",
            with(&[(cond::QUOTA_RESERVED, "True"), (cond::ADMITTED, "True")]),
            |s| finished(s, "Succeeded", "Job finished successfully", true, LATER, Some(1)),
            vec![
                (cond::QUOTA_RESERVED, "True", "Before", "before", false),
                (cond::ADMITTED, "True", "Before", "before", false),
                (cond::FINISHED, "True", "Succeeded", "Job finished successfully", true),
            ],
            WorkloadState::Finished,
        ),
        (
            "pods ready",
            with(&[(cond::QUOTA_RESERVED, "True"), (cond::ADMITTED, "True")]),
            |s| pods_ready(s, true, LATER, Some(1)),
            vec![
                (cond::QUOTA_RESERVED, "True", "Before", "before", false),
                (cond::ADMITTED, "True", "Before", "before", false),
                (
                    cond::PODS_READY,
                    "True",
                    "PodsReady",
                    "All pods were ready or succeeded",
                    true,
                ),
            ],
            WorkloadState::Admitted,
        ),
        (
            "namespace not selected",
            WorkloadStatus::default(),
            |s| namespace_not_selected(s, "namespace research is not selected", true, LATER, Some(1)),
            vec![(
                cond::QUOTA_RESERVED,
                "False",
                "NamespaceNotSelected",
                "namespace research is not selected",
                true,
            )],
            WorkloadState::Pending,
        ),
        (
            "pending: the reason now, the text when written; its transition time kept",
            with(&[(cond::QUOTA_RESERVED, "False")]),
            |s| pending(s, "InsufficientQuota", true, LATER, Some(1)),
            vec![(cond::QUOTA_RESERVED, "False", "InsufficientQuota", "", false)],
            WorkloadState::Pending,
        ),
        (
            "pending while deactivated",
            WorkloadStatus::default(),
            |s| pending(s, "Queued", false, LATER, Some(1)),
            vec![(cond::QUOTA_RESERVED, "False", "Queued", "", true)],
            WorkloadState::Inactive,
        ),
    ];
    for (name, mut status, transition, want, state) in cases {
        transition(&mut status);
        assert_eq!(conditions(&status), want, "{name}");
        assert_eq!(status.state, Some(state), "{name}");
    }
}

#[test]
fn admission_and_explanations_follow_the_decision() {
    let mut s = with(&[(cond::QUOTA_RESERVED, "False")]);
    s.pending = Some(Default::default());
    admitted(&mut s, admission(), None, true, LATER, Some(1));
    assert_eq!(
        s.admission.as_ref().map(|a| a.cluster_queue.as_str()),
        Some("cluster-gpu")
    );
    assert!(s.pending.is_none(), "no explanation once admitted");
    requeued(&mut s, None, true, LATER, Some(1));
    assert!(s.admission.is_none(), "no admission once requeued");
    namespace_not_selected(&mut s, "namespace research is not selected", true, LATER, Some(1));
    assert_eq!(s.pending.as_ref().unwrap().reason, "NamespaceNotSelected");
    finished(&mut s, "Failed", "Job failed", true, LATER, Some(1));
    assert!(s.pending.is_none(), "no explanation once finished");
}

#[test]
fn an_explanation_gives_its_summary_detail_per_flavor_and_position() {
    let expl = Explanation {
        reason: PendingReason::NoFit,
        flavors: vec![
            FlavorVerdict {
                pod_set: "main".into(),
                flavor: "a100".into(),
                verdict: Verdict::FlavorNotFound,
            },
            FlavorVerdict {
                pod_set: "workers".into(),
                flavor: "a100".into(),
                verdict: Verdict::PreemptionNotPossible { protected: 1 },
            },
        ],
    };
    // The engine's positions start at 0; what users read, at 1.
    let pos = Some(eng::QueuePosition {
        in_cluster_queue: 2,
        in_local_queue: 0,
    });
    // Already False since T0: its transition time is kept.
    let mut s = with(&[(cond::QUOTA_RESERVED, "False")]);
    explained(&mut s, &expl, pos, true, LATER, Some(4));
    let c = s.condition(cond::QUOTA_RESERVED).unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "InsufficientQuota"));
    assert_eq!(ms(&c.last_transition_time), T0);
    assert_eq!(c.observed_generation, Some(4));
    let full = sluice_convert::text::explanation(&expl);
    assert_eq!(
        c.message,
        format!("{full} (position 3 in ClusterQueue, 1 in LocalQueue)")
    );
    let p = s.pending.as_ref().unwrap();
    assert_eq!(p.reason, "InsufficientQuota");
    assert!(!p.message.contains("; pod set"), "the summary only: {}", p.message);
    assert!(p.message.ends_with(" (position 3 in ClusterQueue, 1 in LocalQueue)"));
    assert_eq!(
        (p.position_in_cluster_queue, p.position_in_local_queue),
        (Some(3), Some(1))
    );
    // One entry per flavor, the pod sets' verdicts joined.
    assert_eq!(p.flavors.len(), 1);
    assert_eq!(p.flavors[0].reason, "FlavorNotFound");
    assert!(p.flavors[0].message.starts_with("pod set main: "));
    assert!(p.flavors[0].message.contains("; pod set workers: "));
    assert_eq!(s.state, Some(WorkloadState::Pending));
    // Newly pending: the transition is now.
    let mut s = with(&[(cond::QUOTA_RESERVED, "True")]);
    explained(&mut s, &expl, None, true, LATER, Some(4));
    assert_eq!(
        ms(&s.condition(cond::QUOTA_RESERVED).unwrap().last_transition_time),
        LATER
    );
}

#[test]
fn an_owners_finished_condition_is_taken_over_ours() {
    let observed = with(&[(cond::FINISHED, "True")]);
    let mut ours = with(&[(cond::QUOTA_RESERVED, "True"), (cond::FINISHED, "False")]);
    take_foreign(&mut ours, &observed);
    assert!(is_true(&ours, cond::FINISHED));
    assert_eq!(ours.conditions.len(), 2);
    // Nothing else is taken.
    let mut ours = with(&[(cond::QUOTA_RESERVED, "True")]);
    take_foreign(&mut ours, &with(&[(cond::QUOTA_RESERVED, "False")]));
    assert!(is_true(&ours, cond::QUOTA_RESERVED));
}
