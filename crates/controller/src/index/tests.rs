//! The index, driven with tiny builders and no API: events in, plans and
//! engine state out.

use super::*;
use crate::plan::{Purpose, Step};
use crate::testing::{cq, flavor};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{
    ClusterQueue, FlavorPendingReason, LocalQueue, PendingExplanation, RequeueState, Workload, conditions as cond,
};
use sluice_kinds::job;
use sluice_scheduler::WorkloadState;

const NS: &str = "research";
const T0: i64 = 1_800_000_000_000;

fn lq(name: &str, cluster_queue: &str) -> LocalQueue {
    crate::testing::lq(NS, name, cluster_queue)
}

fn mk_job(name: &str, queue: &str, pods: i32, gpus: u32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "uid": format!("job-uid-{name}"),
                     "labels": {"sluice.dev/queue": queue}, "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"parallelism": pods, "suspend": true, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}},
        "status": {}
    }))
    .unwrap()
}

/// The Workload the API server would hold after the controller created it.
fn stored_workload(j: &Job, priority: i32, created_s: i64) -> Workload {
    let mut wl = job::workload_for_job(j, false, |_| None, |_| None).unwrap();
    wl.spec.priority = Some(priority);
    wl.metadata.uid = Some(format!("wl-uid-{}", j.metadata.name.as_deref().unwrap()));
    wl.metadata.generation = Some(1);
    wl.metadata.creation_timestamp = Some(time_of(T0 + created_s * 1000));
    wl
}

/// The status of a Workload admitted onto a100 in cluster-gpu at T0:
/// `pods` pods, `gpus` GPUs in all.
fn admitted_status(pods: u32, gpus: u32) -> WorkloadStatus {
    let mut status = WorkloadStatus::default();
    for (type_, reason) in [(cond::QUOTA_RESERVED, "QuotaReserved"), (cond::ADMITTED, "Admitted")] {
        set_condition(&mut status.conditions, type_, "True", reason, "", T0, Some(1));
    }
    status.admission = Some(
        serde_json::from_value(json!({"clusterQueue": "cluster-gpu", "podSetAssignments": [
            {"name": "main", "count": pods, "flavors": {"nvidia.com/gpu": "a100"},
             "resourceUsage": {"nvidia.com/gpu": gpus.to_string()}}]}))
        .unwrap(),
    );
    status
}

fn ready_index() -> Index {
    ready_index_with(IndexConfig::default())
}

/// An index with flavor a100, ClusterQueue cluster-gpu (8 GPUs) and
/// LocalQueue team-a, everything listed.
fn ready_index_with(config: IndexConfig) -> Index {
    let mut ix = Index::new(config);
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix
}

fn wkey(job: &str) -> ObjKey {
    ObjKey::new(NS, format!("job-{job}"))
}

fn status_step(plan: &Plan) -> &WorkloadStatus {
    match &plan.steps[0] {
        Step::ApplyWorkloadStatus { status, .. } => status,
        other => panic!("first step is not a status write: {other:?}"),
    }
}

fn condition<'a>(s: &'a WorkloadStatus, t: &str) -> (&'a str, &'a str, &'a str) {
    let c = s.condition(t).unwrap_or_else(|| panic!("no {t} condition"));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

fn job_patches(plan: &Plan) -> Vec<(&'static str, &Value)> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::PatchJob {
                patch: sluice_kinds::ObjPatch::Merge(patch),
                ..
            } => Some(("job", patch)),
            Step::PatchJobStatus { patch, .. } => Some(("status", patch)),
            _ => None,
        })
        .collect()
}

fn purposes(plans: &[Plan]) -> Vec<&'static str> {
    plans.iter().map(|p| p.purpose.label()).collect()
}

/// Stores the Workload as the API server would after a status write.
fn observe_status(ix: &mut Index, j: &Job, priority: i32, created_s: i64, now: i64) {
    let key = wkey(j.metadata.name.as_deref().unwrap());
    let mut wl = stored_workload(j, priority, created_s);
    wl.status = ix.workload_status(&key).cloned();
    ix.apply_workload(wl, now);
}

#[test]
fn a_queued_job_gets_one_workload_and_a_running_one_is_suspended_first() {
    let mut ix = ready_index();
    let mut j = mk_job("train", "team-a", 2, 1);
    j.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_job(j.clone(), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job", "create_workload"]);
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    match &plans[1].steps[0] {
        Step::ApplyWorkload(wl) => {
            assert_eq!(wl.metadata.name.as_deref(), Some("job-train"));
            assert_eq!(wl.spec.pod_sets[0].count, 2);
        }
        other => panic!("{other:?}"),
    }
    // The same Job seen again before the writes land: nothing repeated.
    ix.apply_job(j, T0);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn nothing_is_admitted_before_every_kind_is_listed() {
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    let j = mk_job("train", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    for k in Kind::all().filter(|k| *k != Kind::JOB) {
        ix.mark_synced(k);
    }
    assert!(!ix.is_ready());
    assert!(ix.cycle(T0).0.is_empty());
    ix.mark_synced(Kind::JOB);
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
}

#[test]
fn admission_writes_status_first_then_the_job_then_events() {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", 4, 2);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(purposes(&plans), ["admit"]);
    let p = &plans[0];
    assert_eq!(
        p.purpose,
        Purpose::Admit {
            uid: "wl-uid-train".into()
        }
    );
    let kinds: Vec<_> = p.steps.iter().map(Step::kind).collect();
    assert_eq!(kinds, ["workload_status", "job", "event", "event"]);
    let s = status_step(p);
    assert_eq!(
        condition(s, cond::QUOTA_RESERVED),
        ("True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-gpu")
    );
    assert_eq!(condition(s, cond::ADMITTED).0, "True");
    let adm = s.admission.as_ref().unwrap();
    assert_eq!(adm.cluster_queue, "cluster-gpu");
    assert_eq!(adm.pod_set_assignments[0].flavors["nvidia.com/gpu"], "a100");
    assert_eq!(adm.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "8");
    let patch = job_patches(p)[0].1;
    assert_eq!(patch["spec"]["suspend"], json!(false));
    assert_eq!(
        patch["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu": "a100"})
    );
    match &p.steps[2] {
        Step::Event(e) => {
            assert_eq!(e.regarding.kind.as_deref(), Some("Workload"));
            assert_eq!(e.reason, "Admitted");
            assert!(e.note.contains("ClusterQueue cluster-gpu"), "{}", e.note);
        }
        other => panic!("{other:?}"),
    }
    match &p.steps[3] {
        Step::Event(e) => assert_eq!(e.regarding.kind.as_deref(), Some("Job")),
        other => panic!("{other:?}"),
    }
    // Observing the written status and the unsuspended Job changes nothing.
    observe_status(&mut ix, &j, 0, 0, T0 + 6000);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_job(running, T0 + 6000);
    assert!(ix.cycle(T0 + 7000).0.is_empty());
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 1);
    let lq_stats = &ix.local_queue_stats()[&ObjKey::new(NS, "team-a")];
    assert_eq!((lq_stats.pending, lq_stats.admitted), (0, 1));
    assert_eq!(
        lq_stats.usage[&("a100".to_string(), "nvidia.com/gpu".to_string())],
        8000
    );
}

#[test]
fn a_failed_status_write_rolls_the_admission_back_and_it_is_retried() {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", 4, 2);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    ix.admission_failed("wl-uid-train", T0 + 1);
    assert_eq!(ix.engine().workload_state("wl-uid-train"), Some(WorkloadState::Pending));
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );
    assert!(ix.workload_status(&wkey("train")).unwrap().admission.is_none());
    let (plans, _) = ix.cycle(T0 + 2);
    assert_eq!(purposes(&plans), ["admit"], "admitted again once");
}

#[test]
fn restart_restores_admitted_workloads_before_any_cycle_and_never_admits_twice() {
    // First life: admit "first" (8 of 8 GPUs).
    let mut ix = ready_index();
    let first = mk_job("first", "team-a", 4, 2);
    ix.apply_job(first.clone(), T0);
    ix.apply_workload(stored_workload(&first, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let persisted = ix.workload_status(&wkey("first")).cloned();

    // Second life: the Workloads are listed before the ClusterQueue.
    let mut ix = Index::new(IndexConfig::default());
    let second = mk_job("second", "team-a", 1, 1);
    let mut wl = stored_workload(&first, 0, 0);
    wl.status = persisted;
    ix.apply_workload(wl, T0 + 10);
    ix.apply_workload(stored_workload(&second, 0, 5), T0 + 10);
    assert_eq!(ix.unrestored(), 1, "its ClusterQueue is not known yet");
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    assert_eq!(ix.unrestored(), 0);
    let mut running = first.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_job(running, T0 + 10);
    ix.apply_job(second, T0 + 10);
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    assert!(ix.take_plans().is_empty(), "the running admitted Job is left alone");
    assert_eq!(
        ix.engine().workload_state("wl-uid-first"),
        Some(WorkloadState::Admitted)
    );
    let (plans, _) = ix.cycle(T0 + 20);
    // "second" does not fit beside the restored "first": it is explained, not admitted.
    assert_eq!(purposes(&plans), ["pending"]);
    assert_eq!(
        plans[0].purpose,
        Purpose::Pending {
            uid: "wl-uid-second".into()
        }
    );
    let s = status_step(&plans[0]);
    assert_eq!(condition(s, cond::QUOTA_RESERVED).1, "InsufficientQuota");
    assert_eq!(s.pending.as_ref().unwrap().position_in_cluster_queue, Some(1));
    // The text is the engine's, with the position.
    let (_, _, message) = condition(s, cond::QUOTA_RESERVED);
    assert!(
        message.contains("(position 1 in ClusterQueue, 1 in LocalQueue)"),
        "{message}"
    );
    assert!(s.pending.as_ref().unwrap().message.contains("position 1"), "{s:?}");
    // Explanations are written once per reason: the echo of the write
    // changes nothing, and the index keeps no copy of the text.
    let mut echo = stored_workload(&mk_job("second", "team-a", 1, 1), 0, 5);
    echo.status = Some(s.clone());
    ix.apply_workload(echo, T0 + 21);
    let kept = ix.workload_status(&wkey("second")).unwrap();
    assert!(kept.pending.is_none());
    assert_eq!(condition(kept, cond::QUOTA_RESERVED).2, "");
    assert!(ix.cycle(T0 + 30).0.is_empty());
}

#[test]
fn a_requeue_backoff_found_after_a_restart_still_runs() {
    let mut ix = ready_index();
    let j = mk_job("backing-off", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    let mut status = WorkloadStatus::default();
    set_condition(
        &mut status.conditions,
        cond::REQUEUED,
        "False",
        "Backoff",
        "Requeue after backoff",
        T0,
        Some(1),
    );
    status.requeue_state = Some(RequeueState {
        count: 1,
        requeue_at: Some(time_of(T0 + 60_000)),
    });
    wl.status = Some(status);
    ix.apply_workload(wl, T0);
    ix.take_plans();
    let (plans, wake) = ix.cycle(T0 + 1_000);
    assert!(!purposes(&plans).contains(&"admit"), "{:?}", purposes(&plans));
    assert_eq!(wake, Some(T0 + 60_000), "wakes when the backoff ends");
    assert_eq!(purposes(&ix.cycle(T0 + 60_000).0), ["admit"]);
}

#[test]
fn an_admitted_workload_whose_job_never_started_is_started_after_a_restart() {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", 1, 1);
    let mut wl = stored_workload(&j, 0, 0);
    let status = admitted_status(1, 1);
    wl.status = Some(status);
    ix.apply_workload(wl, T0);
    ix.apply_job(j, T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["start_job"]);
    assert_eq!(job_patches(&plans[0])[0].1["spec"]["suspend"], json!(false));
    assert!(ix.cycle(T0).0.is_empty(), "not admitted a second time");
}

#[test]
fn preemption_evicts_names_the_preemptor_and_requeues_once_pods_are_gone() {
    let mut ix = ready_index();
    let low = mk_job("low", "team-a", 4, 2);
    ix.apply_job(low.clone(), T0);
    ix.apply_workload(stored_workload(&low, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    observe_status(&mut ix, &low, 0, 0, T0);
    // It ran: started, pods active.
    let mut running = low.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"startTime": "2027-01-15T08:00:01Z", "active": 4})).unwrap();
    let mut annotated = running.clone();
    let inject = job::injection_patch(&low, &[&flavor("a100")], None).unwrap();
    let mut v = serde_json::to_value(&annotated).unwrap();
    json_patch::merge(&mut v, &inject);
    annotated = serde_json::from_value(v).unwrap();
    ix.apply_job(annotated.clone(), T0 + 1000);

    let high = mk_job("high", "team-a", 2, 2);
    ix.apply_job(high.clone(), T0 + 2000);
    ix.apply_workload(stored_workload(&high, 100, 2), T0 + 2000);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 3000);
    let evict = plans
        .iter()
        .find(|p| p.purpose.label() == "evict")
        .expect("an eviction");
    let s = status_step(evict);
    let (st, reason, msg) = condition(s, cond::EVICTED);
    assert_eq!((st, reason), ("True", "Preempted"));
    assert!(msg.contains("research/job-high"), "{msg}");
    assert_eq!(condition(s, cond::PREEMPTED).1, "InClusterQueue");
    assert_eq!(job_patches(evict), [("job", &json!({"spec": {"suspend": true}}))]);
    // The victim keeps its quota until its pods are gone.
    assert_eq!(ix.engine().workload_state("wl-uid-low"), Some(WorkloadState::Evicting));
    let mut suspended = annotated.clone();
    suspended.spec.as_mut().unwrap().suspend = Some(true);
    suspended.status.as_mut().unwrap().active = Some(2);
    ix.apply_job(suspended.clone(), T0 + 4000);
    assert!(ix.take_plans().is_empty(), "pods still running");
    // The server reports pods being deleted (1.29+): wait for them too.
    suspended.status.as_mut().unwrap().active = None;
    suspended.status.as_mut().unwrap().terminating = Some(2);
    ix.apply_job(suspended.clone(), T0 + 4500);
    assert!(ix.take_plans().is_empty(), "pods still terminating");
    suspended.status.as_mut().unwrap().terminating = Some(0);
    ix.apply_job(suspended, T0 + 5000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["requeue"]);
    let s = status_step(&plans[0]);
    assert!(s.admission.is_none());
    assert_eq!(condition(s, cond::REQUEUED).0, "True");
    assert_eq!(condition(s, cond::QUOTA_RESERVED).0, "False");
    // Started Job: clear startTime through /status, then restore the template.
    let patches = job_patches(&plans[0]);
    assert_eq!(patches[0], ("status", &json!({"status": {"startTime": null}})));
    assert_eq!(patches[1].0, "job");
    assert_eq!(patches[1].1["spec"]["template"]["spec"]["nodeSelector"], Value::Null);
    assert_eq!(
        patches[1].1["metadata"]["annotations"][job::ORIGINAL_SCHEDULING],
        Value::Null
    );
    // Now the preemptor is admitted.
    let (plans, _) = ix.cycle(T0 + 6000);
    assert!(
        plans.iter().any(|p| p.purpose
            == Purpose::Admit {
                uid: "wl-uid-high".into()
            }),
        "{:?}",
        purposes(&plans)
    );
}

/// Jobs `a` and `b` of 8 GPUs each in the 8-GPU queue: `a` admitted, `b`
/// waiting; then `a` completes. The index, and `b` (still to be deleted or
/// admitted by the caller).
fn a_finished_b_waiting() -> (Index, Job) {
    let mut ix = ready_index();
    let a = mk_job("a", "team-a", 4, 2);
    let b = mk_job("b", "team-a", 4, 2);
    for (j, t) in [(&a, 0), (&b, 1)] {
        ix.apply_job(j.clone(), T0);
        ix.apply_workload(stored_workload(j, 0, t), T0);
    }
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit", "pending"]);
    let mut done = a;
    done.status = serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True"}]})).unwrap();
    ix.apply_job(done, T0 + 10);
    (ix, b)
}

#[test]
fn a_finished_job_releases_its_quota_and_a_deleted_job_too() {
    let (mut ix, b) = a_finished_b_waiting();
    let released = ix.take_plans();
    assert_eq!(purposes(&released), ["release"]);
    assert_eq!(
        condition(status_step(&released[0]), cond::FINISHED),
        ("True", "Succeeded", "Job finished successfully")
    );
    let (plans, _) = ix.cycle(T0 + 20);
    assert!(
        plans
            .iter()
            .any(|p| p.purpose == Purpose::Admit { uid: "wl-uid-b".into() })
    );
    // b is deleted while admitted: its quota is released through its
    // Finished write (the Workload lives until the garbage collector).
    ix.delete_job(&crate::plan::JobRef::job(NS, "b"), T0 + 30);
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );
    let released = ix.take_plans();
    assert_eq!(purposes(&released), ["release"]);
    assert_eq!(
        condition(status_step(&released[0]), cond::FINISHED),
        ("True", "JobDeleted", "The Job was deleted")
    );
    // Its Workload, updated before the garbage collector deletes it, does not take quota again.
    observe_status(&mut ix, &b, 0, 1, T0 + 31);
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );
    assert_ne!(ix.engine().workload_state("wl-uid-b"), Some(WorkloadState::Admitted));
}

/// Quota freed by a finished Job is reused only by admissions written
/// after the Workload's `Finished`: both in the state lane, in that order,
/// so no one reading the Workloads ever sees more admitted than the quota.
#[test]
fn a_finished_jobs_finished_write_goes_out_before_the_admission_that_reuses_its_quota() {
    use crate::writer::{Lane, WriteQueue};
    let (mut ix, _) = a_finished_b_waiting();
    let mut plans = ix.take_plans();
    let (more, _) = ix.cycle(T0 + 20);
    plans.extend(more);
    // As the event loop queues them.
    let queue = WriteQueue::default();
    for p in plans {
        assert!(queue.push(p).is_empty());
    }
    let mut written = Vec::new();
    while let Some((_, p)) = queue.pop_state() {
        assert_eq!(Lane::of(&p.purpose), Lane::State);
        written.push(p.purpose);
    }
    let release = written
        .iter()
        .position(|p| *p == Purpose::Release { uid: "wl-uid-a".into() });
    let admit = written
        .iter()
        .position(|p| *p == Purpose::Admit { uid: "wl-uid-b".into() });
    assert!(
        matches!((release, admit), (Some(r), Some(a)) if r < a),
        "the Finished write must precede the admission: {written:?}"
    );
}

#[test]
fn a_deleted_workload_of_a_live_job_is_recreated() {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    ix.delete_workload(&wkey("train"), T0 + 1);
    // The index keeps only a view of the Job: it asks for the Job again...
    assert!(ix.take_plans().is_empty());
    assert_eq!(ix.take_refetch(), [crate::plan::JobRef::job(NS, "train")]);
    // ...and recreates the Workload from it.
    ix.apply_job(j, T0 + 2);
    assert_eq!(purposes(&ix.take_plans()), ["create_workload"]);
    assert!(ix.take_refetch().is_empty());
}

#[test]
fn malformed_objects_are_recorded_and_skipped_and_missing_queues_explained() {
    let mut ix = ready_index();
    let mut bad = cq("broken", 4);
    bad.spec.cohort = None;
    bad.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
    ix.apply_cluster_queue(bad);
    let err = &ix.errors()[&(Kind::ClusterQueue, "broken".to_string())];
    assert_eq!(err.reason, "InvalidClusterQueue");
    // Reported once with a Warning Event on the object.
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["report"]);
    match &plans[0].steps[0] {
        Step::Event(e) => {
            assert_eq!((e.type_, e.reason.as_str()), ("Warning", "InvalidClusterQueue"));
            assert_eq!(e.regarding.name.as_deref(), Some("broken"));
            assert!(e.note.contains("borrowingLimit"), "{}", e.note);
        }
        other => panic!("{other:?}"),
    }
    let mut again = cq("broken", 4);
    again.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
    ix.apply_cluster_queue(again);
    assert!(ix.take_plans().is_empty(), "not reported twice");
    assert!(!ix.engine().cluster_queue_names().iter().any(|n| &**n == "broken"));
    // A Workload whose pod set has a bad quantity.
    let j = mk_job("odd", "team-a", 1, 1);
    let mut wl = stored_workload(&j, 0, 0);
    wl.spec.pod_sets[0].template.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"requests": {"cpu": "lots"}})).unwrap());
    ix.apply_workload(wl, T0);
    assert!(
        ix.errors()
            .contains_key(&(Kind::Workload, "research/job-odd".to_string()))
    );
    // Missing LocalQueue: pending with that reason.
    let lost = mk_job("lost", "nowhere", 1, 1);
    ix.apply_job(lost.clone(), T0);
    ix.apply_workload(stored_workload(&lost, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["pending"]);
    assert_eq!(
        condition(status_step(&plans[0]), cond::QUOTA_RESERVED).1,
        "LocalQueueMissing"
    );
}

#[test]
fn pods_not_ready_in_time_are_evicted_with_exponential_backoff() {
    let mut ix = ready_index();
    let j = mk_job("slow", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, wake) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    assert_eq!(wake, Some(T0 + 600_000), "wakes at the pods-ready deadline");
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
    ix.apply_job(running.clone(), T0 + 1000);
    assert!(ix.cycle(T0 + 599_000).0.is_empty());
    let (plans, _) = ix.cycle(T0 + 600_000);
    assert_eq!(purposes(&plans), ["evict"]);
    let s = status_step(&plans[0]);
    assert_eq!(condition(s, cond::EVICTED).1, "PodsReadyTimeout");
    let rq = s.requeue_state.as_ref().unwrap();
    assert_eq!(rq.count, 1);
    assert_eq!(ms(rq.requeue_at.as_ref().unwrap()), T0 + 600_000 + 60_000);
    // Pods gone (a server that reports terminating pods): requeued with
    // backoff (Requeued=False until it ends).
    running.spec.as_mut().unwrap().suspend = Some(true);
    running.status = serde_json::from_value(json!({"terminating": 0})).unwrap();
    ix.apply_job(running, T0 + 601_000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["requeue"]);
    assert_eq!(condition(status_step(&plans[0]), cond::REQUEUED).0, "False");
    assert_eq!(ix.engine().workload_state("wl-uid-slow"), Some(WorkloadState::Pending));
}

#[test]
fn over_the_requeue_limit_a_workload_is_deactivated_not_requeued() {
    let mut ix = ready_index_with(IndexConfig {
        requeue_limit: Some(1),
        ..IndexConfig::default()
    });
    let j = mk_job("flaky", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    // Admitted, never all ready, evicted, pods gone: requeued (1 of 1).
    let mut t = T0;
    for round in 1..=2 {
        let (plans, _) = ix.cycle(t);
        assert_eq!(purposes(&plans), ["admit"], "round {round}");
        observe_status(&mut ix, &j, 0, 0, t);
        let mut running = j.clone();
        running.spec.as_mut().unwrap().suspend = Some(false);
        running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
        ix.apply_job(running.clone(), t + 1000);
        ix.take_plans();
        let (plans, _) = ix.cycle(t + 600_000);
        let s = if round == 1 {
            assert_eq!(purposes(&plans), ["evict"]);
            status_step(&plans[0])
        } else {
            // Over the limit: spec.active goes false first, then the eviction.
            assert_eq!(purposes(&plans), ["deactivate", "evict"]);
            assert_eq!(
                plans[0].steps,
                [Step::PatchWorkload {
                    key: wkey("flaky"),
                    patch: json!({"spec": {"active": false}})
                }]
            );
            status_step(&plans[1])
        };
        let rq = s.requeue_state.as_ref().unwrap();
        assert_eq!(rq.count, round);
        assert_eq!(rq.requeue_at.is_some(), round == 1);
        let (_, _, msg) = condition(s, cond::EVICTED);
        assert_eq!(
            msg.contains("over the requeue limit of 1: deactivated"),
            round == 2,
            "{msg}"
        );
        // A Workload event older than our patch does not reactivate it.
        observe_status(&mut ix, &j, 0, 0, t + 600_001);
        running.spec.as_mut().unwrap().suspend = Some(true);
        running.status = serde_json::from_value(json!({"terminating": 0})).unwrap();
        ix.apply_job(running, t + 601_000);
        let plans = ix.take_plans();
        assert_eq!(purposes(&plans), ["requeue"]);
        let (st, reason, _) = condition(status_step(&plans[0]), cond::REQUEUED);
        if round == 1 {
            assert_eq!((st, reason), ("False", "Backoff"));
            assert_eq!(ix.engine().workload_state("wl-uid-flaky"), Some(WorkloadState::Pending));
        } else {
            assert_eq!((st, reason), ("False", "Deactivated"));
            assert_eq!(ix.engine().workload_state("wl-uid-flaky"), None, "out of the queue");
        }
        observe_status(&mut ix, &j, 0, 0, t + 601_001);
        // After the 60 s backoff.
        t += 662_000;
    }
    assert!(ix.cycle(t).0.is_empty(), "deactivated: not admitted");
    // Our patch is observed; then its owner activates it again: queued
    // with a fresh requeue count.
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = ix.workload_status(&wkey("flaky")).cloned();
    wl.spec.active = false;
    ix.apply_workload(wl.clone(), t);
    wl.spec.active = true;
    ix.apply_workload(wl, t + 1);
    assert_eq!(ix.engine().workload_state("wl-uid-flaky"), Some(WorkloadState::Pending));
    assert!(ix.workload_status(&wkey("flaky")).unwrap().requeue_state.is_none());
}

#[test]
fn watch_events_older_than_our_status_write_do_not_undo_it() {
    let mut ix = ready_index();
    let j = mk_job("fenced", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut before = stored_workload(&j, 0, 0);
    before.metadata.resource_version = Some("5".into());
    ix.apply_workload(before.clone(), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    let written = status_step(&plans[0]).clone();
    let has_admission = |ix: &Index| ix.workload_status(&wkey("fenced")).unwrap().admission.is_some();
    // The admission is not written yet; an event from before it arrives.
    ix.apply_workload(before.clone(), T0 + 1);
    assert!(has_admission(&ix), "kept while the write is in flight");
    // Written (resourceVersion 10) and acknowledged.
    ix.acknowledge(&plans[0], &[(0, "10".to_string())]);
    let mut stale = before.clone();
    stale.metadata.resource_version = Some("8".into());
    ix.apply_workload(stale, T0 + 2);
    assert!(has_admission(&ix), "an event older than our write is ignored");
    // The echo of our write, then an owner's Finished (newer): taken.
    let mut echo = before.clone();
    echo.metadata.resource_version = Some("10".into());
    echo.status = Some(written.clone());
    ix.apply_workload(echo.clone(), T0 + 3);
    assert!(has_admission(&ix));
    let mut done = echo;
    done.metadata.resource_version = Some("12".into());
    let st = done.status.as_mut().unwrap();
    set_condition(
        &mut st.conditions,
        cond::FINISHED,
        "True",
        "Succeeded",
        "done",
        T0 + 4,
        Some(1),
    );
    ix.apply_workload(done, T0 + 4);
    assert_eq!(
        ix.engine().workload_state("wl-uid-fenced"),
        Some(WorkloadState::Finished)
    );
}

#[test]
fn an_admission_removed_outside_sluice_is_found_by_the_drift_check_and_evicted() {
    let mut ix = ready_index();
    let j = mk_job("lost", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    wl.metadata.resource_version = Some("5".into());
    ix.apply_workload(wl.clone(), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    ix.acknowledge(&plans[0], &[(0, "10".to_string())]);
    // Someone rewrites the status without the admission (newer than ours).
    wl.metadata.resource_version = Some("11".into());
    wl.status = Some(WorkloadStatus::default());
    ix.apply_workload(wl, T0 + 1_000);
    assert_eq!(ix.engine().workload_state("wl-uid-lost"), Some(WorkloadState::Admitted));
    assert!(ix.cycle(T0 + 30_000).0.is_empty(), "checked at most once a minute");
    let (plans, _) = ix.cycle(T0 + 60_000);
    assert_eq!(purposes(&plans), ["evict"]);
    assert_eq!(condition(status_step(&plans[0]), cond::EVICTED).1, "AdmissionLost");
    assert_eq!(ix.engine().workload_state("wl-uid-lost"), Some(WorkloadState::Evicting));
    assert_eq!(ix.take_stats().drift, ["engine_only"]);
}

/// A failed plan as the writer reports it: stopped at `step`, nothing acked.
fn fail(ix: &mut Index, plan: &Plan, step: usize, now: i64) {
    if let (Purpose::Admit { uid }, 0) = (&plan.purpose, step) {
        ix.admission_failed(uid, now);
    }
    ix.plan_failed(plan, step, now);
}

#[test]
fn a_failed_admission_is_read_back_and_the_server_wins() {
    let mut ix = ready_index();
    let j = mk_job("unlucky", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    wl.metadata.resource_version = Some("5".into());
    ix.apply_workload(wl.clone(), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    // An event arrives while the write is queued (ignored), then it fails.
    ix.apply_workload(wl.clone(), T0 + 1);
    fail(&mut ix, &plans[0], 0, T0 + 2);
    assert_eq!(ix.take_workload_refetch(), [wkey("unlucky")]);
    assert!(
        ix.workload_status(&wkey("unlucky")).unwrap().admission.is_none(),
        "back to what it was before the admission"
    );
    // Read back: nothing landed. The drift check finds nothing; the next
    // cycle admits it again, once.
    ix.apply_fetched_workload(&wl, T0 + 3);
    let (plans, _) = ix.cycle(T0 + 60_000);
    assert_eq!(purposes(&plans), ["admit"]);
    assert!(ix.take_stats().drift.is_empty());
}

#[test]
fn an_admission_that_timed_out_but_landed_is_taken_from_the_read_back() {
    let mut ix = ready_index();
    let j = mk_job("slow-api", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    wl.metadata.resource_version = Some("5".into());
    ix.apply_workload(wl.clone(), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    let written = status_step(&plans[0]).clone();
    // The client gave up, the server wrote it: rolled back, then read back.
    fail(&mut ix, &plans[0], 0, T0 + 10_000);
    assert_eq!(
        ix.engine().workload_state("wl-uid-slow-api"),
        Some(WorkloadState::Pending)
    );
    let mut landed = wl.clone();
    landed.metadata.resource_version = Some("6".into());
    landed.status = Some(written);
    ix.apply_fetched_workload(&landed, T0 + 10_001);
    assert_eq!(
        ix.engine().workload_state("wl-uid-slow-api"),
        Some(WorkloadState::Admitted),
        "the admission on the server is the admission"
    );
    let (plans, _) = ix.cycle(T0 + 10_002);
    assert!(!purposes(&plans).contains(&"admit"), "never admitted twice");
}

#[test]
fn an_explanation_that_is_not_written_is_planned_again() {
    let mut ix = ready_index();
    let big = mk_job("big", "team-a", 1, 16);
    ix.apply_job(big.clone(), T0);
    ix.apply_workload(stored_workload(&big, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["pending"]);
    fail(&mut ix, &plans[0], 0, T0 + 1);
    let again = ix.take_explanations(10, T0 + 2);
    assert_eq!(purposes(&again), ["pending"], "the same reason, written after all");
    // Superseded in the queue by a later plan: planned again too.
    ix.superseded(&again[0]);
    assert_eq!(purposes(&ix.take_explanations(10, T0 + 3)), ["pending"]);
}

#[test]
fn a_failed_deactivation_is_tried_again_and_the_workload_stays_out() {
    let mut ix = ready_index_with(IndexConfig {
        requeue_limit: Some(0),
        ..IndexConfig::default()
    });
    let j = mk_job("flaky", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
    ix.apply_job(running, T0 + 1);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 600_000);
    assert_eq!(purposes(&plans), ["deactivate", "evict"]);
    fail(&mut ix, &plans[0], 0, T0 + 600_001);
    // The Workload as observed still says active: not a reactivation.
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = Some(status_step(&plans[1]).clone());
    ix.apply_workload(wl, T0 + 600_002);
    let rq = ix.workload_status(&wkey("flaky")).unwrap().requeue_state.clone();
    assert_eq!(rq.map(|r| r.count), Some(1), "the count is kept");
    assert_eq!(purposes(&ix.cycle(T0 + 601_000).0), ["deactivate"], "tried again");
}

#[test]
fn a_failed_job_start_is_tried_again_next_cycle() {
    let mut ix = ready_index();
    let j = mk_job("stalled", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    // The status write was made (acked); the Job patch (step 1) failed.
    ix.acknowledge(&plans[0], &[(0, "10".into())]);
    fail(&mut ix, &plans[0], 1, T0 + 1);
    let (plans, _) = ix.cycle(T0 + 1_000);
    assert_eq!(purposes(&plans), ["start_job"]);
    assert_eq!(
        job_patches(&plans[0]).last().unwrap().1["spec"]["suspend"],
        json!(false)
    );
}

#[test]
fn an_owners_finished_condition_counts_even_while_our_write_is_in_flight() {
    let mut ix = ready_index();
    let j = mk_job("owned", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    // Not acknowledged; the owner marks it finished on the status we wrote.
    let mut wl = stored_workload(&j, 0, 0);
    let mut st = status_step(&plans[0]).clone();
    set_condition(
        &mut st.conditions,
        cond::FINISHED,
        "True",
        "Succeeded",
        "done",
        T0 + 1,
        Some(1),
    );
    wl.status = Some(st);
    ix.apply_workload(wl, T0 + 1);
    assert_eq!(
        ix.engine().workload_state("wl-uid-owned"),
        Some(WorkloadState::Finished)
    );
}

#[test]
fn without_status_terminating_the_pods_are_listed_before_quota_is_released() {
    let mut ix = ready_index();
    let j = mk_job("evicted", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    observe_status(&mut ix, &j, 0, 0, T0);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2})).unwrap();
    ix.apply_job(running, T0);
    ix.take_plans();
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = ix.workload_status(&wkey("evicted")).cloned();
    wl.spec.active = false;
    ix.apply_workload(wl, T0 + 1);
    assert_eq!(purposes(&ix.take_plans()), ["evict"]);
    // Suspended; `active` 0 and no `terminating` (a 1.24-1.28 server):
    // deleted pods may still run, so their pods are listed first.
    let mut suspended = j.clone();
    suspended.status = serde_json::from_value(json!({"active": 0})).unwrap();
    ix.apply_job(suspended.clone(), T0 + 2);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["confirm_pods_gone"]);
    assert_eq!(
        plans[0].steps,
        [Step::ConfirmPodsGone {
            job: crate::plan::JobRef::job(NS, "evicted"),
            selector: "controller-uid=job-uid-evicted".into()
        }]
    );
    assert!(!plans[0].steps[0].is_write());
    assert_eq!(
        ix.engine().workload_state("wl-uid-evicted"),
        Some(WorkloadState::Evicting)
    );
    // One check at a time.
    ix.apply_job(suspended.clone(), T0 + 3);
    assert!(ix.take_plans().is_empty());
    // Pods remain: looked at again after 2 s, not before (and the loop is
    // told to wake then).
    ix.pods_remain("wl-uid-evicted", T0 + 10);
    let (plans, wake) = ix.cycle(T0 + 1_000);
    assert!(plans.is_empty());
    assert_eq!(wake, Some(T0 + 2_010));
    assert_eq!(purposes(&ix.cycle(T0 + 2_010).0), ["confirm_pods_gone"]);
    // Gone: quota released, Job restored, workload requeued (deactivated).
    ix.pods_gone("wl-uid-evicted", T0 + 2_500);
    assert_eq!(purposes(&ix.take_plans()), ["requeue"]);
    assert_ne!(
        ix.engine().workload_state("wl-uid-evicted"),
        Some(WorkloadState::Evicting)
    );
    // A late duplicate confirmation changes nothing.
    ix.pods_gone("wl-uid-evicted", T0 + 2_600);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn no_eviction_when_the_server_does_not_report_ready_pods() {
    let mut ix = ready_index();
    let j = mk_job("old-server", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    // As recorded from a 1.24 alpha server: `active` but no `ready`.
    running.status = serde_json::from_value(json!({"active": 2})).unwrap();
    ix.apply_job(running, T0 + 1000);
    let (plans, wake) = ix.cycle(T0 + 600_000);
    assert!(plans.is_empty());
    assert_eq!(wake, None, "no deadline left to wake for");
    assert_eq!(
        ix.engine().workload_state("wl-uid-old-server"),
        Some(WorkloadState::Admitted)
    );
}

#[test]
fn an_admission_written_by_another_leader_is_adopted_not_repeated() {
    let mut ix = ready_index();
    let j = mk_job("handover", "team-a", 4, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(
        ix.engine().workload_state("wl-uid-handover"),
        Some(WorkloadState::Pending)
    );
    // The old leader's status write arrives before our first cycle.
    let mut wl = stored_workload(&j, 0, 0);
    let status = admitted_status(4, 8);
    wl.status = Some(status);
    ix.apply_workload(wl, T0 + 1);
    assert_eq!(
        ix.engine().workload_state("wl-uid-handover"),
        Some(WorkloadState::Admitted)
    );
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        8000
    );
    let (plans, _) = ix.cycle(T0 + 2);
    assert!(
        plans.iter().all(|p| p.purpose.label() != "admit"),
        "{:?}",
        purposes(&plans)
    );
}

#[test]
fn a_restart_does_not_rewrite_explanations_whose_reason_is_unchanged() {
    let mut ix = ready_index();
    let big = mk_job("big", "team-a", 4, 4);
    ix.apply_job(big.clone(), T0);
    let mut wl = stored_workload(&big, 0, 0);
    let mut status = WorkloadStatus::default();
    set_condition(
        &mut status.conditions,
        cond::QUOTA_RESERVED,
        "False",
        "ExceedsQuota",
        "old numbers",
        T0,
        Some(1),
    );
    status.pending = Some(PendingExplanation {
        reason: "ExceedsQuota".into(),
        message: "needs 16, had 6 (position 3)".into(),
        flavors: vec![FlavorPendingReason {
            name: "a100".into(),
            reason: "ExceedsMaxQuota".into(),
            message: "old".into(),
            resources: vec![],
        }],
        position_in_cluster_queue: Some(3),
        position_in_local_queue: Some(3),
        estimated_start: None,
    });
    wl.status = Some(status);
    ix.apply_workload(wl, T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 1);
    assert!(plans.is_empty(), "{:?}", purposes(&plans));
}

#[test]
fn a_deactivated_workload_is_evicted_not_requeued_and_comes_back_when_activated() {
    let mut ix = ready_index();
    let j = mk_job("paused", "team-a", 4, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 4, "ready": 4})).unwrap();
    ix.apply_job(running.clone(), T0 + 1);
    assert_eq!(purposes(&ix.take_plans()), ["pods_ready"]);
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = ix.workload_status(&wkey("paused")).cloned();
    wl.spec.active = false;
    ix.apply_workload(wl.clone(), T0 + 2);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    assert_eq!(condition(status_step(&plans[0]), cond::EVICTED).1, "Deactivated");
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    // Pods gone: quota released, not requeued.
    running.spec.as_mut().unwrap().suspend = Some(true);
    running.status = serde_json::from_value(json!({"terminating": 0})).unwrap();
    ix.apply_job(running, T0 + 3);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["requeue"]);
    assert_eq!(
        condition(status_step(&plans[0]), cond::REQUEUED),
        (
            "False",
            "Deactivated",
            "Deactivated; not requeued until spec.active is true"
        )
    );
    assert_eq!(ix.engine().workload_state("wl-uid-paused"), None);
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );
    // Activated again: queued and admitted.
    wl.status = ix.workload_status(&wkey("paused")).cloned();
    wl.spec.active = true;
    ix.apply_workload(wl, T0 + 4);
    let (plans, _) = ix.cycle(T0 + 5);
    assert_eq!(purposes(&plans), ["admit"]);
    // The readiness of the first admission does not carry over.
    assert_eq!(condition(status_step(&plans[0]), cond::PODS_READY).0, "False");
}

#[test]
fn a_lending_limit_above_nominal_is_skipped_as_the_e2e_test_expects() {
    // The malformed ClusterQueue of the end-to-end test: schema- and
    // CEL-valid, rejected by validate().
    let mut ix = ready_index();
    let bad: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "bad"},
        "spec": {"cohort": "lonely", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4", "lendingLimit": "6"}]}]}]}
    }))
    .unwrap();
    ix.apply_cluster_queue(bad);
    assert_eq!(
        ix.errors()[&(Kind::ClusterQueue, "bad".to_string())].reason,
        "InvalidClusterQueue"
    );
    ix.apply_local_queue(lq("bad-team", "bad"));
    let stuck = mk_job("stuck", "bad-team", 1, 1);
    ix.apply_job(stuck.clone(), T0);
    ix.apply_workload(stored_workload(&stuck, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(
        condition(status_step(&plans[0]), cond::QUOTA_RESERVED).1,
        "ClusterQueueMissing"
    );
}

/// Without fair sharing a lender reclaims (`InCohortReclamation`); with
/// it (the default) every victim in another queue is preempted by the
/// share rules (`InCohortFairSharing`, as in Kueue).
#[test]
fn a_lender_reclaims_what_a_cohort_peer_borrowed() {
    for (fair_sharing, reason) in [
        (eng::FairSharing::Off, "InCohortReclamation"),
        (eng::FairSharing::default(), "InCohortFairSharing"),
    ] {
        reclaim_case(fair_sharing, reason);
    }
}

fn reclaim_case(fair_sharing: eng::FairSharing, reason: &str) {
    let mut ix = ready_index_with(IndexConfig {
        fair_sharing,
        ..IndexConfig::default()
    });
    let cohort_queue = |name: &str| -> ClusterQueue {
        serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohort": "pool", "namespaceSelector": {}, "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                     "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                         {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]}
        }))
        .unwrap()
    };
    ix.apply_cluster_queue(cohort_queue("a"));
    ix.apply_cluster_queue(cohort_queue("b"));
    ix.apply_local_queue(lq("qa", "a"));
    ix.apply_local_queue(lq("qb", "b"));
    let borrower = mk_job("borrower", "qa", 4, 2);
    ix.apply_job(borrower.clone(), T0);
    ix.apply_workload(stored_workload(&borrower, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"], "8 GPUs: 4 own + 4 borrowed");
    let owner = mk_job("owner", "qb", 2, 2);
    ix.apply_job(owner.clone(), T0 + 1);
    ix.apply_workload(stored_workload(&owner, 0, 1), T0 + 1);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 2);
    let evict = plans.iter().find(|p| p.purpose.label() == "evict").expect("reclaim");
    assert_eq!(
        condition(status_step(evict), cond::PREEMPTED).1,
        reason,
        "{fair_sharing:?}"
    );
}

#[test]
fn explanation_writes_are_handed_out_in_bounded_batches_with_the_latest_status() {
    let mut ix = ready_index_with(IndexConfig {
        explanations_per_cycle: 2,
        ..IndexConfig::default()
    });
    for i in 0..6 {
        let j = mk_job(&format!("j{i}"), "team-a", 4, 2);
        ix.apply_job(j.clone(), T0);
        ix.apply_workload(stored_workload(&j, 0, i), T0);
    }
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit", "pending", "pending"]);
    assert_eq!(ix.explanations_due(), 3);
    // Two are out: no more until they are answered.
    assert!(ix.take_explanations(10, T0).is_empty());
    for p in &plans[1..] {
        ix.feedback(p, &Ok(vec![]), T0);
    }
    let next = ix.take_explanations(10, T0);
    assert_eq!(next.len(), 2);
    // One answered, one superseded in the queue: both count as back.
    ix.feedback(&next[0], &Ok(vec![]), T0);
    ix.superseded(&next[1]);
    let rest = ix.take_explanations(10, T0);
    assert_eq!(rest.len(), 2, "the last one, and the superseded one planned again");
    assert!(rest.iter().all(|p| status_step(p).pending.is_some()));
    assert_eq!(ix.explanations_due(), 0);
    assert!(ix.take_explanations(10, T0).is_empty());
}

#[test]
fn no_explanation_is_written_for_a_workload_younger_than_the_grace_period() {
    let mut ix = ready_index_with(IndexConfig {
        explain_after_ms: 5_000,
        ..IndexConfig::default()
    });
    // "old" was created 10 s ago, "young" 1 s ago; neither fits beside "big".
    for (name, created) in [("big", T0 - 20_000), ("old", T0 - 10_000), ("young", T0 - 1_000)] {
        let j = mk_job(name, "team-a", 4, 2);
        ix.apply_job(j.clone(), T0);
        let mut wl = stored_workload(&j, 0, 0);
        wl.metadata.creation_timestamp = Some(time_of(created));
        ix.apply_workload(wl, T0);
    }
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit", "pending"]);
    assert_eq!(
        plans[1].purpose,
        Purpose::Pending {
            uid: "wl-uid-old".into()
        }
    );
    assert_eq!(ix.explanations_due(), 1, "young stays marked");
    // 3.999 s later "young" is still within its 5 s; at 4 s it is due.
    assert!(ix.take_explanations(10, T0 + 3_999).is_empty());
    let due = ix.take_explanations(10, T0 + 4_000);
    assert_eq!(purposes(&due), ["pending"]);
    assert_eq!(
        due[0].purpose,
        Purpose::Pending {
            uid: "wl-uid-young".into()
        }
    );
}

#[test]
fn a_pending_workload_moved_to_another_queue_is_queued_there() {
    let mut ix = ready_index();
    ix.apply_cluster_queue(cq("other", 8));
    ix.apply_local_queue(lq("team-b", "other"));
    let j = mk_job("mover", "nowhere", 1, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    ix.apply_workload(wl.clone(), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(
        condition(status_step(&plans[0]), cond::QUOTA_RESERVED).1,
        "LocalQueueMissing"
    );
    wl.spec.queue_name = "team-b".into();
    wl.status = ix.workload_status(&wkey("mover")).cloned();
    ix.apply_workload(wl, T0 + 1);
    let (plans, _) = ix.cycle(T0 + 2);
    assert_eq!(purposes(&plans), ["admit"]);
    assert_eq!(
        status_step(&plans[0]).admission.as_ref().unwrap().cluster_queue,
        "other"
    );
}

#[test]
fn a_finished_or_evicting_workload_leaves_no_pods_ready_deadline() {
    let mut ix = ready_index();
    let j = mk_job("done", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    assert_eq!(ix.next_pods_ready_deadline(), Some(T0 + 600_000));
    // Finished before its pods were ever seen ready: no deadline left, so
    // the loop does not wake at a past deadline over and over.
    let mut done = j.clone();
    done.status = serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True"}]})).unwrap();
    ix.apply_job(done, T0 + 10);
    assert_eq!(purposes(&ix.take_plans()), ["release"]);
    assert_eq!(ix.next_pods_ready_deadline(), None);
    let (_, wake) = ix.cycle(T0 + 700_000);
    assert_eq!(wake, None);

    // Evicted (pods-ready timeout) while its pods are still there: no
    // deadline while it waits for them to go.
    let k = mk_job("slow", "team-a", 2, 1);
    ix.apply_job(k.clone(), T0);
    ix.apply_workload(stored_workload(&k, 0, 1), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0 + 700_000).0), ["admit"]);
    let mut running = k.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
    ix.apply_job(running, T0 + 701_000);
    assert_eq!(purposes(&ix.cycle(T0 + 1_300_000).0), ["evict"]);
    assert_eq!(ix.engine().workload_state("wl-uid-slow"), Some(WorkloadState::Evicting));
    assert_eq!(ix.next_pods_ready_deadline(), None);
}

fn with_completions(mut j: Job, completions: i32) -> Job {
    j.spec.as_mut().unwrap().completions = Some(completions);
    j
}

fn admitted_and_running(ix: &mut Index, j: &Job, status: Value, now: i64) {
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(status).unwrap();
    ix.apply_job(running, now);
}

#[test]
fn the_pod_count_is_min_of_parallelism_and_completions() {
    let count = |p: Option<i32>, c: Option<i32>| {
        let mut j = mk_job("n", "team-a", 1, 1);
        j.spec.as_mut().unwrap().parallelism = p;
        j.spec.as_mut().unwrap().completions = c;
        job::workload_for_job(&j, false, |_| None, |_| None)
            .unwrap()
            .spec
            .pod_sets[0]
            .count
    };
    assert_eq!(count(Some(4), Some(2)), 2);
    assert_eq!(count(Some(4), Some(10)), 4);
    assert_eq!(count(Some(4), None), 4);
    assert_eq!(count(None, None), 1);
    assert_eq!(count(None, Some(3)), 1);
}

#[test]
fn pods_ready_counts_min_of_parallelism_and_completions() {
    // parallelism 4, completions 2: only 2 pods ever run at once.
    let mut ix = ready_index();
    let j = with_completions(mk_job("few", "team-a", 4, 1), 2);
    admitted_and_running(&mut ix, &j, json!({"active": 2, "ready": 2}), T0 + 1000);
    assert_eq!(purposes(&ix.take_plans()), ["pods_ready"]);
    assert!(ix.cycle(T0 + 600_000).0.is_empty(), "not evicted");
    assert_eq!(ix.engine().workload_state("wl-uid-few"), Some(WorkloadState::Admitted));
}

#[test]
fn pods_that_succeeded_count_as_ready() {
    let mut ix = ready_index();
    let j = mk_job("quick", "team-a", 2, 1);
    admitted_and_running(&mut ix, &j, json!({"active": 1, "ready": 1, "succeeded": 1}), T0 + 1000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["pods_ready"]);
    assert_eq!(
        condition(status_step(&plans[0]), cond::PODS_READY),
        ("True", "PodsReady", "All pods were ready or succeeded")
    );
    assert_eq!(ix.next_pods_ready_deadline(), None);
    assert!(ix.cycle(T0 + 600_000).0.is_empty(), "not evicted");
    // Seen again: written once.
    let mut again = j.clone();
    again.spec.as_mut().unwrap().suspend = Some(false);
    again.status = serde_json::from_value(json!({"active": 2, "ready": 2})).unwrap();
    ix.apply_job(again, T0 + 2000);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn a_restarted_controller_remembers_pods_were_ready_and_does_not_evict() {
    let mut ix = ready_index();
    let j = mk_job("long", "team-a", 2, 1);
    admitted_and_running(&mut ix, &j, json!({"active": 2, "ready": 2}), T0 + 1000);
    assert_eq!(purposes(&ix.take_plans()), ["pods_ready"]);
    let persisted = ix.workload_status(&wkey("long")).cloned();

    // Restart hours later; a pod is restarting, so not all are ready now.
    let later = T0 + 5 * 3_600_000;
    let mut ix = ready_index();
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = persisted;
    ix.apply_workload(wl, later);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
    ix.apply_job(running, later);
    ix.take_plans();
    assert_eq!(ix.next_pods_ready_deadline(), None);
    assert!(ix.cycle(later + 1000).0.is_empty(), "long-running Job not evicted");
    assert_eq!(ix.engine().workload_state("wl-uid-long"), Some(WorkloadState::Admitted));
}

#[test]
fn backoff_saturates_at_its_cap_for_any_count() {
    assert_eq!(backoff_ms(60_000, 3_600_000, 1), 60_000);
    assert_eq!(backoff_ms(60_000, 3_600_000, 3), 240_000);
    assert_eq!(backoff_ms(60_000, 3_600_000, 7), 3_600_000);
    assert_eq!(backoff_ms(60_000, 3_600_000, i32::MAX), 3_600_000);
    assert_eq!(backoff_ms(60_000, 3_600_000, i32::MIN), 60_000);
    assert_eq!(backoff_ms(i64::MAX, i64::MAX, 40), i64::MAX);
}

#[test]
fn a_huge_requeue_count_from_the_api_does_not_overflow() {
    let mut ix = ready_index();
    let j = mk_job("again", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = Some(WorkloadStatus {
        requeue_state: Some(RequeueState {
            count: i32::MAX,
            requeue_at: None,
        }),
        ..Default::default()
    });
    ix.apply_workload(wl, T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 0})).unwrap();
    ix.apply_job(running, T0 + 1000);
    let (plans, _) = ix.cycle(T0 + 600_000);
    assert_eq!(purposes(&plans), ["evict"]);
    let rq = status_step(&plans[0]).requeue_state.as_ref().unwrap();
    assert_eq!(rq.count, i32::MAX);
    assert_eq!(
        ms(rq.requeue_at.as_ref().unwrap()),
        T0 + 600_000 + 3_600_000,
        "capped at 1 h"
    );
}

#[test]
fn a_huge_pods_ready_timeout_does_not_overflow() {
    let mut ix = ready_index_with(IndexConfig {
        pods_ready_timeout_ms: Some(i64::MAX),
        ..IndexConfig::default()
    });
    let j = mk_job("patient", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, wake) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    assert_eq!(wake, Some(i64::MAX));
    assert!(ix.cycle(T0 + 1_000_000).0.is_empty());
}

#[test]
fn sluice_made_workloads_carry_the_job_uid_label() {
    let j = mk_job("train", "team-a", 1, 1);
    let wl = job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    assert_eq!(
        wl.metadata
            .labels
            .as_ref()
            .unwrap()
            .get(job::JOB_UID_LABEL)
            .map(String::as_str),
        Some("job-uid-train")
    );
}

/// The Workload as it is after an orphaning delete of its Job: the garbage
/// collector stripped the owner reference; the label stays.
fn orphaned(mut wl: Workload) -> Workload {
    wl.metadata.owner_references = None;
    wl
}

#[test]
fn an_orphaned_workload_of_a_deleted_job_is_finished_and_never_takes_quota_again() {
    let mut ix = ready_index();
    let j = mk_job("gone", "team-a", 4, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let admitted = ix.workload_status(&wkey("gone")).cloned();
    // `DELETE` of a batch/v1 Job without a propagation policy orphans.
    // Its deletion finishes the Workload (whether or not it is orphaned).
    ix.delete_job(&crate::plan::JobRef::job(NS, "gone"), T0 + 10);
    let mut wl = orphaned(stored_workload(&j, 0, 0));
    wl.status = admitted.clone();
    ix.apply_workload(wl, T0 + 11);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["release"]);
    assert_eq!(
        condition(status_step(&plans[0]), cond::FINISHED),
        ("True", "JobDeleted", "The Job was deleted")
    );
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );

    // A restart before that write landed: listed with its admission, no
    // owner, and no Job. It is finished, not restored.
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    let mut wl = orphaned(stored_workload(&j, 0, 0));
    wl.status = admitted;
    ix.apply_workload(wl, T0 + 20);
    let next = mk_job("next", "team-a", 4, 2);
    ix.apply_job(next.clone(), T0 + 20);
    ix.apply_workload(stored_workload(&next, 0, 5), T0 + 20);
    ix.take_plans();
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    let (plans, _) = ix.cycle(T0 + 30);
    assert_eq!(purposes(&plans), ["release", "admit"], "its quota goes to the next one");
    assert_eq!(
        condition(status_step(&plans[0]), cond::FINISHED).2,
        "The Job was deleted; its Workload was orphaned"
    );
    assert_eq!(condition(status_step(&plans[0]), cond::FINISHED).1, "JobDeleted");
    assert_eq!(ix.engine().workload_state("wl-uid-gone"), Some(WorkloadState::Finished));
}

/// A restart between a Job's completion and its Workload's Finished write:
/// the new leader counts the admission it lists (never admitting into that
/// quota early), releases it through the Finished write, and only then
/// admits the next one; a restart after the write counts nothing.
#[test]
fn a_restart_before_a_finished_write_counts_the_quota_until_that_write_is_queued() {
    let a = mk_job("a", "team-a", 4, 2);
    let b = mk_job("b", "team-a", 4, 2);
    let mut ix = ready_index();
    ix.apply_job(a.clone(), T0);
    ix.apply_workload(stored_workload(&a, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    let admitted = ix.workload_status(&wkey("a")).cloned();
    let mut done = a.clone();
    done.spec.as_mut().unwrap().suspend = Some(false);
    done.status = serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True"}]})).unwrap();

    // The new leader lists Workloads (a still admitted), then Jobs.
    let restarted = |finished_written: bool| {
        let mut ix = Index::new(IndexConfig::default());
        ix.apply_flavor(flavor("a100"));
        ix.apply_cluster_queue(cq("cluster-gpu", 8));
        ix.apply_local_queue(lq("team-a", "cluster-gpu"));
        let mut wl = stored_workload(&a, 0, 0);
        wl.status = admitted.clone();
        if finished_written {
            let s = wl.status.as_mut().unwrap();
            super::status::finished(
                s,
                cond::reasons::SUCCEEDED,
                "Job finished successfully",
                true,
                T0 + 5,
                None,
            );
        }
        ix.apply_workload(wl, T0 + 10);
        ix.apply_workload(stored_workload(&b, 0, 1), T0 + 10);
        assert_eq!(
            ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
            if finished_written { 0 } else { 8_000 },
            "the listed admission is counted until its Finished is written"
        );
        ix.apply_job(done.clone(), T0 + 10);
        ix.apply_job(b.clone(), T0 + 10);
        for k in Kind::all() {
            ix.mark_synced(k);
        }
        let mut plans = ix.take_plans();
        plans.extend(ix.cycle(T0 + 20).0);
        purposes(&plans)
            .into_iter()
            .filter(|p| matches!(*p, "release" | "admit" | "finish"))
            .collect::<Vec<_>>()
    };
    assert_eq!(restarted(false), ["release", "admit"]);
    assert_eq!(restarted(true), ["admit"]);
}

/// A Workload created directly (no Job, no job-uid label), as tools and
/// `sluice bench` make them.
fn workload_without_job(name: &str, created_s: i64) -> Workload {
    let mut wl = orphaned(stored_workload(&mk_job(name, "team-a", 1, 1), 0, created_s));
    wl.metadata.labels.as_mut().unwrap().remove(job::JOB_UID_LABEL);
    wl
}

/// Its admission (`plan`) is written, then its owner marks it Finished.
fn finished_by_its_owner(ix: &mut Index, wl: &mut Workload, plan: &Plan) {
    let mut st = status_step(plan).clone();
    ix.feedback(plan, &Ok(vec![(0, "10".into())]), T0);
    set_condition(
        &mut st.conditions,
        cond::FINISHED,
        "True",
        "Succeeded",
        "done",
        T0 + 1,
        Some(1),
    );
    wl.status = Some(st);
    wl.metadata.resource_version = Some("11".into());
    ix.apply_workload(wl.clone(), T0 + 1);
}

#[test]
fn a_workload_created_directly_without_the_label_is_not_an_orphan() {
    let mut ix = ready_index();
    let mut wl = workload_without_job("tool", 0);
    ix.apply_workload(wl.clone(), T0);
    assert!(ix.take_plans().is_empty());
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    // Its owner marks it finished: the quota is released and the state
    // (a printer column) follows in one small write of that field alone.
    finished_by_its_owner(&mut ix, &mut wl, &plans[0]);
    assert_eq!(ix.engine().workload_state("wl-uid-tool"), Some(WorkloadState::Finished));
    // Due, not queued: handed out when the bookkeeping lane asks.
    assert!(ix.take_plans().is_empty());
    let plans = ix.take_finished_states();
    assert_eq!(purposes(&plans), ["finish"]);
    assert!(ix.take_finished_states().is_empty(), "handed out once");
    let finished_state = Step::PatchWorkloadState {
        key: ObjKey::new("research", "job-tool"),
        uid: "wl-uid-tool".into(),
        state: sluice_api::v1alpha1::WorkloadState::Finished,
    };
    assert_eq!(plans[0].steps, std::slice::from_ref(&finished_state));
    // One at a time: the same status seen again plans nothing more.
    ix.apply_workload(wl.clone(), T0 + 2);
    assert!(ix.take_plans().is_empty());
    assert!(ix.take_finished_states().is_empty());
    // Failed: the Workload is read back, and the state is planned again
    // from what is read.
    ix.plan_failed(&plans[0], 0, T0 + 3);
    assert_eq!(ix.take_workload_refetch(), [ObjKey::new("research", "job-tool")]);
    ix.apply_fetched_workload(&wl, T0 + 4);
    let plans = ix.take_finished_states();
    assert_eq!(
        plans.iter().map(|p| p.steps.clone()).collect::<Vec<_>>(),
        [vec![finished_state]]
    );
    // Written: the watch shows it, and nothing more is planned.
    ix.feedback(&plans[0], &Ok(vec![]), T0 + 5);
    wl.status.as_mut().unwrap().state = Some(sluice_api::v1alpha1::WorkloadState::Finished);
    wl.metadata.resource_version = Some("12".into());
    ix.apply_workload(wl.clone(), T0 + 6);
    assert!(ix.take_plans().is_empty());
    assert!(ix.take_finished_states().is_empty());
    // Kept cut down: its state and Finished condition, not its admission.
    let kept = ix.workload_status(&ObjKey::new("research", "job-tool")).unwrap();
    assert_eq!(kept.state, Some(sluice_api::v1alpha1::WorkloadState::Finished));
    assert!(kept.admission.is_none());
    assert_eq!(
        kept.conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
        [cond::FINISHED]
    );
    // Seen again in full (a relist): still nothing to write, cut down again.
    wl.metadata.resource_version = Some("13".into());
    ix.apply_workload(wl, T0 + 7);
    assert!(ix.take_plans().is_empty());
    assert!(ix.cycle(T0 + 8).0.is_empty());
    let kept = ix.workload_status(&ObjKey::new("research", "job-tool")).unwrap();
    assert_eq!(kept.conditions.len(), 1);
}

#[test]
fn a_failed_pods_ready_write_is_retried_on_the_next_job_event() {
    let mut ix = ready_index();
    let j = mk_job("retry", "team-a", 2, 1);
    admitted_and_running(&mut ix, &j, json!({"active": 2, "ready": 2}), T0 + 1000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["pods_ready"]);
    ix.plan_failed(&plans[0], 0, T0 + 1000);
    // Still not evicted meanwhile.
    assert_eq!(ix.next_pods_ready_deadline(), None);
    let mut again = j.clone();
    again.spec.as_mut().unwrap().suspend = Some(false);
    again.status = serde_json::from_value(json!({"active": 2, "ready": 2})).unwrap();
    ix.apply_job(again.clone(), T0 + 2000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["pods_ready"]);
    assert_eq!(condition(status_step(&plans[0]), cond::PODS_READY).0, "True");
    ix.apply_job(again, T0 + 3000);
    assert!(ix.take_plans().is_empty(), "once written, not again");
}

#[test]
fn a_thousand_arrivals_into_a_full_queue_cost_one_state_write_per_admission_and_one_per_finish() {
    use crate::writer::Lane;
    // 8 GPUs; 1 000 one-GPU Jobs arrive at 50/s, each runs 10 s: the queue
    // is full from the first second. The loop is replayed second by
    // second: arrivals, completions, a cycle, the explanation tick, and
    // every status write answered. A finished Job's Finished write is a
    // state write (its quota is reused after it), as in Kueue.
    let mut ix = ready_index_with(IndexConfig {
        explain_after_ms: 5_000,
        ..IndexConfig::default()
    });
    let n = 1_000;
    let mut finish_at: BTreeMap<String, i64> = BTreeMap::new();
    let (mut admissions, mut state_writes, mut lazy_writes, mut finished) = (0, 0, 0, 0);
    let mut second = 0;
    while finished < n {
        assert!(second < 3_000, "stuck: {finished} of {n} finished");
        let now = T0 + second * 1_000;
        for i in (50 * second).min(n)..(50 * (second + 1)).min(n) {
            let j = mk_job(&format!("j{i}"), "team-a", 1, 1);
            ix.apply_job(j.clone(), now);
            ix.apply_workload(stored_workload(&j, 0, second), now);
        }
        let done: Vec<String> = finish_at
            .iter()
            .filter(|&(_, &at)| at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in done {
            finish_at.remove(&name);
            let mut j = mk_job(&name, "team-a", 1, 1);
            j.spec.as_mut().unwrap().suspend = Some(false);
            j.status = serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True"}]})).unwrap();
            ix.apply_job(j, now);
            finished += 1;
        }
        let mut plans = ix.take_plans();
        plans.extend(ix.cycle(now).0);
        plans.extend(ix.take_explanations(500, now));
        for p in &plans {
            let writes = p
                .steps
                .iter()
                .filter(|s| matches!(s, Step::ApplyWorkloadStatus { .. } | Step::PatchWorkloadState { .. }))
                .count();
            if Lane::of(&p.purpose) == Lane::State {
                state_writes += writes;
            } else {
                lazy_writes += writes;
            }
            if let Purpose::Admit { uid } = &p.purpose {
                admissions += 1;
                finish_at.insert(uid.trim_start_matches("wl-uid-").to_string(), now + 10_000);
            }
            ix.feedback(p, &Ok(vec![]), now);
        }
        second += 1;
    }
    assert_eq!(admissions, n);
    assert!(
        state_writes as f64 <= 1.05 * (admissions + finished) as f64,
        "{state_writes} state-lane status writes for {admissions} admissions and {finished} finishes"
    );
    // Every workload that waited past the grace period was explained once
    // (its reason never changes here).
    assert!(lazy_writes <= n as usize, "{lazy_writes} lazy writes");
}

mod backfill;
mod cohorts;
mod default_queue;
mod foreign;
mod gangs;
mod idle;
mod kinds;
mod notice;
mod partial;
mod placement;
mod reshape;
mod selection;
mod tenant_property;
mod trainjob;
mod usage;
mod visibility;

#[test]
fn a_cycle_budget_admits_that_many_and_asks_for_the_next_cycle_at_once() {
    let mut ix = ready_index();
    for i in 0..4 {
        let j = mk_job(&format!("train-{i}"), "team-a", 1, 2);
        ix.apply_job(j.clone(), T0);
        ix.apply_workload(stored_workload(&j, 0, i), T0);
    }
    ix.take_plans();
    ix.set_cycle_budget(3);
    let (plans, wake) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit", "admit", "admit"]);
    assert_eq!(wake, Some(T0 + 1000), "the fourth is decided by the next cycle, now");
    let (plans, wake) = ix.cycle(T0 + 1001);
    assert_eq!(purposes(&plans), ["admit"]);
    assert_ne!(wake, Some(T0 + 1001), "nothing left to decide now");
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 4);
}

#[test]
fn finished_states_are_handed_out_a_bounded_number_at_a_time() {
    let mut ix = ready_index_with(IndexConfig {
        explanations_per_cycle: 2,
        ..IndexConfig::default()
    });
    let mut wls = Vec::new();
    for i in 0..3 {
        let wl = workload_without_job(&format!("tool-{i}"), i);
        ix.apply_workload(wl.clone(), T0);
        wls.push(wl);
    }
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit", "admit", "admit"]);
    for (wl, plan) in wls.iter_mut().zip(&plans) {
        finished_by_its_owner(&mut ix, wl, plan);
    }
    assert!(ix.take_plans().is_empty());
    let first = ix.take_finished_states();
    assert_eq!(purposes(&first), ["finish", "finish"], "two out at most");
    assert!(ix.take_finished_states().is_empty());
    // One answered: room for the third.
    ix.feedback(&first[0], &Ok(vec![]), T0 + 2);
    let next = ix.take_finished_states();
    assert_eq!(purposes(&next), ["finish"]);
    let mut uids: Vec<String> = first
        .iter()
        .chain(&next)
        .map(|p| match &p.purpose {
            Purpose::Finish { uid } => uid.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 3, "each workload's state once");
}
mod podgroups;
mod serving;

/// A Job naming a WorkloadPriorityClass the controller has not seen yet
/// (created a moment before it, its watch event still on the way) gets no
/// Workload at priority 0, which would never preempt what its owner meant
/// it to: it is reported and waits, and is read again once the class is
/// seen; its Workload then carries the class's priority.
#[test]
fn a_job_naming_a_priority_class_not_seen_yet_waits_for_it_and_gets_its_priority() {
    let mut ix = ready_index();
    let mut j = mk_job("urgent", "team-a", 1, 1);
    j.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(sluice_api::labels::PRIORITY_CLASS.into(), "urgent".into());
    ix.apply_job(j.clone(), T0);
    assert_eq!(purposes(&ix.take_plans()), ["report"]);
    let key = (Kind::JOB, format!("{NS}/urgent"));
    assert_eq!(ix.defs.errors[&key].reason, super::classes::CLASS_MISSING);
    assert!(
        ix.defs.errors[&key]
            .message
            .contains("WorkloadPriorityClass \"urgent\""),
        "{}",
        ix.defs.errors[&key].message
    );
    // Seen again without it: nothing new.
    ix.apply_job(j.clone(), T0);
    assert!(ix.take_plans().is_empty());

    let wpc: sluice_api::v1alpha1::WorkloadPriorityClass = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "urgent"}, "value": 1000
    }))
    .unwrap();
    ix.apply_workload_priority_class(wpc);
    assert_eq!(ix.take_refetch(), [crate::plan::JobRef::job(NS, "urgent")]);
    ix.apply_job(j, T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["create_workload"]);
    let Step::ApplyWorkload(wl) = &plans[0].steps[0] else {
        panic!("not a Workload: {:?}", plans[0].steps)
    };
    assert_eq!(wl.spec.priority, Some(1000));
    assert!(!ix.defs.errors.contains_key(&key), "the report is cleared");
}

/// After a restart, an admitted workload whose pods were never ready keeps
/// its deadline (from its admission) and is evicted at it.
#[test]
fn a_restored_admission_whose_pods_never_got_ready_is_evicted_at_its_deadline() {
    let mut ix = ready_index();
    let j = mk_job("stuck", "team-a", 2, 1);
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = Some(admitted_status(2, 2));
    ix.apply_workload(wl, T0 + 1000);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    running.status = serde_json::from_value(json!({"active": 2, "ready": 1})).unwrap();
    ix.apply_job(running, T0 + 1000);
    ix.take_plans();
    assert_eq!(ix.next_pods_ready_deadline(), Some(T0 + 600_000));
    assert!(ix.cycle(T0 + 599_000).0.is_empty());
    let (plans, _) = ix.cycle(T0 + 600_000);
    assert_eq!(purposes(&plans), ["evict"]);
    assert_eq!(condition(status_step(&plans[0]), cond::EVICTED).1, "PodsReadyTimeout");
}
