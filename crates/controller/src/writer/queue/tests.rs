//! The write queue's lanes: order, turns, latest-wins and superseded plans.

use serde_json::{Value, json};

use super::*;
use crate::plan::{ObjKey, Plan, Purpose, Step};

#[test]
fn the_queue_writes_state_changes_first_then_the_lazy_queues_in_turn_and_drops_superseded_ones() {
    let plan = |purpose: Purpose| Plan { purpose, steps: vec![] };
    let q = WriteQueue::default();
    assert!(q.push(plan(Purpose::Pending { uid: "a".into() })).is_empty());
    assert!(q.push(plan(Purpose::Report)).is_empty());
    assert!(q.push(plan(Purpose::Pending { uid: "b".into() })).is_empty());
    // Superseded plans come back, so the index hears of them.
    assert_eq!(
        q.push(plan(Purpose::Pending { uid: "b".into() }))
            .pop()
            .map(|p| p.purpose),
        Some(Purpose::Pending { uid: "b".into() })
    );
    assert_eq!(
        q.push(plan(Purpose::Admit { uid: "a".into() }))
            .pop()
            .map(|p| p.purpose),
        Some(Purpose::Pending { uid: "a".into() })
    );
    assert!(q.push(plan(Purpose::Evict { uid: "c".into() })).is_empty());
    assert!(q.push(plan(Purpose::Report)).is_empty());
    assert_eq!(q.len(), 5);
    let epoch = q.epoch();
    let order: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|(e, p)| {
            assert_eq!(e, epoch);
            format!("{:?}", p.purpose)
        })
        .collect();
    assert_eq!(
        order,
        [
            "Admit { uid: \"a\" }",
            "Evict { uid: \"c\" }",
            "Report",
            "Pending { uid: \"b\" }",
            "Report",
        ]
    );
    assert!(q.is_empty());
    let _ = q.push(plan(Purpose::Pending { uid: "x".into() }));
    q.clear();
    assert!(q.pop().is_none());
    assert_eq!(q.epoch(), epoch + 1, "a new epoch after leadership is lost");
}

#[test]
fn a_queue_status_waiting_to_be_written_is_replaced_by_a_newer_one() {
    let status = |name: &str, n: u32| Plan {
        purpose: Purpose::QueueStatus,
        steps: vec![Step::ApplyQueueStatus {
            queue: crate::plan::QueueRef::ClusterQueue(name.into()),
            status: json!({"pendingWorkloads": n}),
        }],
    };
    let q = WriteQueue::default();
    assert!(q.push(status("gpu", 1)).is_empty());
    assert!(q.push(status("cpu", 1)).is_empty());
    assert_eq!(q.push(status("gpu", 2)).len(), 1);
    assert!(
        q.push(Plan {
            purpose: Purpose::Admit { uid: "a".into() },
            steps: vec![],
        })
        .is_empty()
    );
    assert_eq!(q.len(), 3);
    assert_eq!(q.pop().unwrap().1.purpose, Purpose::Admit { uid: "a".into() });
    let written: Vec<Value> = std::iter::from_fn(|| q.pop())
        .map(|(_, p)| match &p.steps[0] {
            Step::ApplyQueueStatus { queue, status } => json!([queue.name(), status["pendingWorkloads"]]),
            _ => Value::Null,
        })
        .collect();
    assert_eq!(written, [json!(["gpu", 2]), json!(["cpu", 1])]);
}

#[test]
fn a_cohort_and_a_cluster_queue_of_one_name_each_keep_their_own_status_write() {
    use crate::plan::{ObjKey, QueueRef};
    let status = |queue: QueueRef, n: u32| Plan {
        purpose: Purpose::QueueStatus,
        steps: vec![Step::ApplyQueueStatus {
            queue,
            status: json!({"n": n}),
        }],
    };
    let q = WriteQueue::default();
    assert!(q.push(status(QueueRef::ClusterQueue("gpu".into()), 1)).is_empty());
    assert!(q.push(status(QueueRef::Cohort("gpu".into()), 1)).is_empty());
    assert!(
        q.push(status(QueueRef::LocalQueue(ObjKey::new("gpu", "gpu")), 1))
            .is_empty()
    );
    // A newer Cohort status replaces the Cohort's only.
    let replaced = q.push(status(QueueRef::Cohort("gpu".into()), 2));
    assert_eq!(replaced.len(), 1);
    assert_eq!(
        replaced[0].steps[0],
        Step::ApplyQueueStatus {
            queue: QueueRef::Cohort("gpu".into()),
            status: json!({"n": 1})
        }
    );
    assert_eq!(q.len(), 3);
}

#[test]
fn a_backlog_in_one_lazy_queue_never_starves_the_others() {
    // 5 finished states queued first, then 2 explanations and a queue
    // status: they take turns (queue status, explanation, finished state).
    let finish = |u: &str| Plan {
        purpose: Purpose::Finish { uid: u.into() },
        steps: vec![],
    };
    let q = WriteQueue::default();
    for i in 0..5 {
        assert!(q.push(finish(&format!("f{i}"))).is_empty());
    }
    for u in ["e0", "e1"] {
        assert!(
            q.push(Plan {
                purpose: Purpose::Pending { uid: u.into() },
                steps: vec![]
            })
            .is_empty()
        );
    }
    assert!(
        q.push(Plan {
            purpose: Purpose::Report,
            steps: vec![]
        })
        .is_empty()
    );
    assert_eq!(q.lane_len(Lane::Bookkeeping), 6);
    assert_eq!(q.lane_len(Lane::Explanation), 2);
    let order: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|(_, p)| match p.purpose {
            Purpose::Finish { uid } | Purpose::Release { uid } | Purpose::Pending { uid } => uid,
            other => other.label().to_string(),
        })
        .collect();
    assert_eq!(order, ["report", "e0", "f0", "e1", "f1", "f2", "f3", "f4"]);
    // A state change of a workload drops its queued finished state (its
    // whole status is written) and explanation.
    assert!(q.push(finish("x")).is_empty());
    let dropped = q.push(Plan {
        purpose: Purpose::Evict { uid: "x".into() },
        steps: vec![],
    });
    assert_eq!(dropped.len(), 1);
    assert_eq!(q.lane_len(Lane::Bookkeeping), 0);
}

#[test]
fn the_requeue_of_a_workload_without_a_job_takes_over_its_queued_eviction_write() {
    let key = ObjKey::new("research", "wl-x");
    let status = |seq| Step::workload_status(key.clone(), "x".into(), Default::default(), seq);
    let event = || {
        Step::Event(crate::plan::EventSpec {
            regarding: Default::default(),
            type_: "Normal",
            reason: "Preempted".into(),
            action: "Evict",
            note: String::new(),
        })
    };
    let q = WriteQueue::default();
    assert!(
        q.push(Plan {
            purpose: Purpose::Evict { uid: "x".into() },
            steps: vec![status(1), event()],
        })
        .is_empty()
    );
    assert!(
        q.push(Plan {
            purpose: Purpose::Admit { uid: "y".into() },
            steps: vec![],
        })
        .is_empty()
    );
    // The requeue's whole status (evicted and requeued) is the one write.
    let dropped = q.push(Plan {
        purpose: Purpose::Requeue { uid: "x".into() },
        steps: vec![status(2)],
    });
    assert_eq!(
        dropped,
        [Plan {
            purpose: Purpose::Evict { uid: "x".into() },
            steps: vec![status(1)]
        }]
    );
    let order: Vec<(String, usize)> = std::iter::from_fn(|| q.pop())
        .map(|(_, p)| (p.purpose.label().to_string(), p.steps.len()))
        .collect();
    assert_eq!(
        order,
        [("evict".into(), 1), ("admit".into(), 0), ("requeue".into(), 1)],
        "the eviction keeps its Event"
    );
    // A Job's eviction suspends the Job: never merged (its requeue comes
    // only after the pods are gone anyway).
    let job = ObjKey::new("research", "job-x");
    assert!(
        q.push(Plan {
            purpose: Purpose::Evict { uid: "x".into() },
            steps: vec![
                status(3),
                Step::PatchJob {
                    job: crate::plan::JobRef::job(job.namespace, job.name),
                    patch: sluice_kinds::ObjPatch::Merge(json!({}))
                }
            ],
        })
        .is_empty()
    );
    assert!(
        q.push(Plan {
            purpose: Purpose::Requeue { uid: "x".into() },
            steps: vec![status(4)],
        })
        .is_empty()
    );
    assert_eq!(q.pop().unwrap().1.steps.len(), 2);
}
