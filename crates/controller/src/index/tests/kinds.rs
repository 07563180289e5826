//! Objects of the other queued kinds in the index, and the Jobs they make.

use super::*;
use sluice_kinds::JobKind;

/// An MPIJob's launcher Job, with the queue label (e.g. copied from a
/// template by its operator).
fn launcher() -> Job {
    let mut j = mk_job("hvd-launcher", "team-a", 1, 0);
    j.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "kubeflow.org/v2beta1".into(),
        kind: "MPIJob".into(),
        name: "hvd".into(),
        uid: "mj-uid".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    j.spec.as_mut().unwrap().suspend = Some(false);
    j
}

/// The MPIJob `launcher()` names as its owner.
fn mpijob() -> Value {
    json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "hvd", "namespace": NS, "uid": "mj-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"runPolicy": {"suspend": true}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "x"}]}}}}}
    })
}

#[test]
fn a_job_made_by_a_queued_kind_is_left_to_its_owner_only_while_that_kind_is_queued() {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::MpiJob);
    let mut ix = ready_index_with(config);
    ix.apply_object(JobKind::MpiJob, &mpijob(), T0);
    ix.take_plans();
    ix.apply_job(launcher(), T0);
    assert!(ix.take_plans().is_empty(), "neither suspended nor given a Workload");
    // MPIJobs not queued: the Job is queued on its own, as any labelled Job.
    let mut ix = ready_index();
    ix.apply_job(launcher(), T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
}

#[test]
fn a_forged_owner_reference_does_not_take_a_job_out_of_its_queue() {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::MpiJob);
    // No MPIJob "hvd" with uid mj-uid exists: the Job is queued on its own.
    let mut ix = ready_index_with(config.clone());
    ix.apply_job(launcher(), T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
    // An MPIJob of that name but another uid does not vouch for it either.
    let mut ix = ready_index_with(config.clone());
    let mut other = mpijob();
    other["metadata"]["uid"] = json!("another-uid");
    ix.apply_object(JobKind::MpiJob, &other, T0);
    ix.take_plans();
    ix.apply_job(launcher(), T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
    // Before MPIJobs are listed, the owner is given the benefit of the doubt.
    let mut ix = Index::new(config);
    ix.apply_job(launcher(), T0);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn a_rayjobs_pods_are_looked_up_by_its_last_cluster_name() {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::RayJob);
    let mut ix = ready_index_with(config);
    let mut rj = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": NS, "uid": "rj-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": false, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
            "workerGroupSpecs": []}},
        "status": {"jobDeploymentStatus": "Running", "rayClusterName": "tune-rc-1"}
    });
    ix.apply_object(JobKind::RayJob, &rj, T0);
    let key = crate::plan::JobRef::new(JobKind::RayJob, NS, "tune");
    // The status loses the name (the cluster is being deleted): the last
    // one seen is kept.
    rj["status"] = json!({"jobDeploymentStatus": "Suspending"});
    ix.apply_object(JobKind::RayJob, &rj, T0 + 1000);
    let view = &ix.queued.jobs[&key];
    assert_eq!(sluice_kinds::pods_selector_of(view), "ray.io/cluster=tune-rc-1");
    assert_eq!(view.live, 1);
}

/// A RayCluster with the queue label, running (KubeRay copies a RayJob's
/// labels onto the cluster it makes), controlled by RayJob `tune` with
/// `owner_uid` when given.
fn raycluster(owner_uid: Option<&str>) -> Value {
    let mut rc = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tune-rc-1", "namespace": NS, "uid": "rc-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": false,
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": {"spec": {"containers": [
                {"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]}
    });
    if let Some(uid) = owner_uid {
        rc["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune", "uid": uid, "controller": true}]);
    }
    rc
}

/// The RayJob `tune` (uid rj-uid), queued and suspended.
fn rayjob() -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": NS, "uid": "rj-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
            "workerGroupSpecs": []}}
    })
}

#[test]
fn a_raycluster_is_queued_on_its_own_unless_its_rayjob_holds_it() {
    let mut config = IndexConfig::default();
    config.integrations.extend([JobKind::RayJob, JobKind::RayCluster]);
    // Its own: suspended, and a Workload raycluster-<name> is created.
    let mut ix = ready_index_with(config.clone());
    ix.apply_object(JobKind::RayCluster, &raycluster(None), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job", "create_workload"]);
    let wl = plans
        .iter()
        .flat_map(|p| &p.steps)
        .find_map(|s| match s {
            Step::ApplyWorkload(wl) => Some(wl),
            _ => None,
        })
        .unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("raycluster-tune-rc-1"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("head", 1), ("gpu", 2)]);
    // Made by its (existing) RayJob: the RayJob is what is queued.
    let mut ix = ready_index_with(config.clone());
    ix.apply_object(JobKind::RayJob, &rayjob(), T0);
    ix.take_plans();
    ix.apply_object(JobKind::RayCluster, &raycluster(Some("rj-uid")), T0);
    assert!(ix.take_plans().is_empty(), "neither suspended nor given a Workload");
    // A RayJob of that name with another uid does not vouch for it.
    let mut ix = ready_index_with(config.clone());
    ix.apply_object(JobKind::RayJob, &rayjob(), T0);
    ix.take_plans();
    ix.apply_object(JobKind::RayCluster, &raycluster(Some("forged")), T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
    // RayJobs not queued (their integration off): queued on its own.
    let mut only_clusters = IndexConfig::default();
    only_clusters.integrations.insert(JobKind::RayCluster);
    let mut ix = ready_index_with(only_clusters);
    ix.apply_object(JobKind::RayCluster, &raycluster(Some("rj-uid")), T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
}

#[test]
fn an_autoscaled_raycluster_seen_running_is_held_with_no_workload_and_the_field_named() {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::RayCluster);
    let mut ix = ready_index_with(config);
    let mut rc = raycluster(None);
    rc["spec"]["enableInTreeAutoscaling"] = json!(true);
    ix.apply_object(JobKind::RayCluster, &rc, T0);
    let plans = ix.take_plans();
    assert!(purposes(&plans).contains(&"suspend_job"), "{:?}", purposes(&plans));
    assert!(!purposes(&plans).contains(&"create_workload"));
    let e = &ix.defs.errors[&(Kind::Queued(JobKind::RayCluster), format!("{NS}/tune-rc-1"))];
    assert_eq!(e.reason, "job_invalid");
    assert!(
        e.message
            .starts_with("spec.enableInTreeAutoscaling: must not be true for a queued RayCluster"),
        "{}",
        e.message
    );
}
