//! TrainJobs in the index: their Workload is made from their training
//! runtime, and one whose runtime is missing waits for it.

use super::*;
use crate::plan::JobRef;
use sluice_kinds::JobKind;
use sluice_kinds::trainjob::{CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME};
use std::sync::Arc;

fn trainjob(suspend: bool) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": NS, "uid": "tj-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": suspend, "runtimeRef": {"name": "torch"},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}}}
    })
}

fn runtime() -> Arc<Value> {
    Arc::new(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch"},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [
            {"name": "node", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": [
                {"name": "node", "image": "pytorch/pytorch"}]}}}}}]}}}
    }))
}

fn index() -> Index {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::TrainJob);
    ready_index_with(config)
}

#[test]
fn a_trainjob_whose_runtime_is_missing_is_held_reported_and_queued_once_the_runtime_appears() {
    let mut ix = index();
    assert!(ix.watches(Kind::Referent(CLUSTER_TRAINING_RUNTIME)));
    assert!(ix.watches(Kind::Referent(TRAINING_RUNTIME)));
    assert!(!ready_index().watches(Kind::Referent(TRAINING_RUNTIME)));
    // Running without admission: held, and reported, with no Workload.
    ix.apply_object(JobKind::TrainJob, &trainjob(false), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job", "report"]);
    let key = (Kind::Queued(JobKind::TrainJob), format!("{NS}/llama"));
    let e = &ix.defs.errors[&key];
    assert_eq!(e.reason, "RuntimeMissing");
    assert!(e.message.contains("ClusterTrainingRuntime \"torch\""), "{}", e.message);
    // Seen again without it: nothing new (reported once).
    ix.apply_object(JobKind::TrainJob, &trainjob(true), T0);
    assert!(ix.take_plans().is_empty());
    assert!(ix.take_refetch().is_empty());

    // Another runtime does not help; its own is read and the TrainJob read again.
    ix.apply_referent(TRAINING_RUNTIME, &format!("{NS}/torch"), runtime());
    assert!(ix.take_refetch().is_empty());
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    assert_eq!(ix.take_refetch(), [JobRef::new(JobKind::TrainJob, NS, "llama")]);
    ix.apply_object(JobKind::TrainJob, &trainjob(true), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["create_workload"]);
    let Step::ApplyWorkload(wl) = &plans[0].steps[0] else {
        panic!("not a Workload: {:?}", plans[0].steps)
    };
    assert_eq!(wl.metadata.name.as_deref(), Some("trainjob-llama"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("node", 2)]);
    assert!(!ix.defs.errors.contains_key(&key), "the report is cleared");
}

#[test]
fn a_trainjob_whose_runtime_is_known_gets_its_workload_at_once_and_a_deleted_runtime_is_forgotten() {
    let mut ix = index();
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    ix.apply_object(JobKind::TrainJob, &trainjob(true), T0);
    assert_eq!(purposes(&ix.take_plans()), ["create_workload"]);

    let mut ix = index();
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    ix.delete_referent(CLUSTER_TRAINING_RUNTIME, "torch");
    ix.apply_object(JobKind::TrainJob, &trainjob(true), T0);
    assert_eq!(purposes(&ix.take_plans()), ["report"]);
    // Deleted while it waited: the runtime's arrival reads nothing again.
    ix.delete_job(&JobRef::new(JobKind::TrainJob, NS, "llama"), T0);
    assert!(ix.queued.readers.is_empty());
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    assert!(ix.take_refetch().is_empty());
}

/// The runtime with one more replicated Job, `extra`, of one pod with 4
/// GPUs.
fn runtime_with_extra() -> Arc<Value> {
    let mut r = (*runtime()).clone();
    r["spec"]["template"]["spec"]["replicatedJobs"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"name": "extra", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}}}),
        );
    Arc::new(r)
}

#[test]
fn an_admitted_trainjob_whose_runtime_is_edited_to_ask_for_more_is_evicted_and_an_unchanged_one_is_left() {
    let mut ix = index();
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    ix.apply_object(JobKind::TrainJob, &trainjob(true), T0);
    let plans = ix.take_plans();
    let Step::ApplyWorkload(wl) = &plans[0].steps[0] else {
        panic!("not a Workload: {:?}", plans[0].steps)
    };
    let mut wl = (**wl).clone();
    wl.metadata.uid = Some("wl-uid-llama".into());
    wl.metadata.generation = Some(1);
    wl.metadata.creation_timestamp = Some(time_of(T0));
    ix.apply_workload(wl, T0);
    assert_eq!(purposes(&ix.cycle(T0 + 1000).0), ["admit"]);
    ix.apply_object(JobKind::TrainJob, &trainjob(false), T0 + 2000);
    ix.take_plans();
    let llama = JobRef::new(JobKind::TrainJob, NS, "llama");

    // The same runtime seen again (a resync): nothing is read again.
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime());
    assert!(ix.take_refetch().is_empty());

    // Edited to run 4 more GPUs: the TrainJob is read again, compared with
    // what its runtime says now, and evicted.
    ix.apply_referent(CLUSTER_TRAINING_RUNTIME, "torch", runtime_with_extra());
    assert_eq!(ix.take_refetch(), [llama]);
    ix.apply_object(JobKind::TrainJob, &trainjob(false), T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    assert_eq!(
        ix.engine().workload_state("wl-uid-llama"),
        Some(WorkloadState::Evicting)
    );
}
