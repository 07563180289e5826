use super::*;
use crate::ObjPatch;
use crate::job::ORIGINAL_SCHEDULING;
use crate::testing::flavor;
use serde_json::json;
use std::collections::BTreeMap;

/// A RayJob as the API server returns it: a head (its own nodeSelector)
/// and two worker groups, suspended, queued in team-a.
fn rayjob() -> Value {
    let pod = |gpus: &str| {
        json!({"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    };
    let mut head = pod("0");
    head["spec"]["nodeSelector"] = json!({"pool": "cpu"});
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "research", "uid": "rj-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "suspend": true,
            "shutdownAfterJobFinishes": true,
            "entrypoint": "python tune.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": head},
                "workerGroupSpecs": [
                    {"groupName": "GPU-Small", "replicas": 2, "minReplicas": 1, "maxReplicas": 4,
                     "rayStartParams": {}, "template": pod("1")},
                    {"groupName": "gpu-big", "replicas": 1, "numOfHosts": 2, "rayStartParams": {}, "template": pod("8")}
                ]
            }
        }
    })
}

fn apply(obj: &Value, patches: &[(bool, ObjPatch)]) -> Value {
    let mut v = obj.clone();
    for (_, p) in patches {
        match p {
            ObjPatch::Merge(m) => json_patch::merge(&mut v, m),
            ObjPatch::Json(ops) => {
                let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
                json_patch::patch(&mut v, &ops).unwrap();
            }
        }
    }
    v
}

#[test]
fn a_rayjob_is_one_workload_with_the_head_and_a_pod_set_per_worker_group() {
    use sluice_api::Validate;
    let wl = workload(&rayjob(), false, |_| None, |_| None).unwrap();
    wl.check().unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("rayjob-tune"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(
        sets,
        [("head", 1), ("gpu-small", 2), ("gpu-big", 2)],
        "replicas × numOfHosts"
    );
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.api_version.as_str()),
        ("RayJob", "ray.io/v1")
    );
    let v = view(&rayjob(), false).unwrap();
    assert_eq!(
        (v.kind, v.suspended, v.pods, v.finished),
        (JobKind::RayJob, true, 5, None)
    );
    assert_eq!(
        JobKind::RayJob.pods_selector("tune", "rj-uid"),
        "ray.io/originated-from-cr-name=tune,ray.io/originated-from-crd=RayJob"
    );
}

#[test]
fn a_rayjob_kuberay_would_not_suspend_is_refused_and_empty_groups_are_no_pod_sets() {
    let mut keeps = rayjob();
    keeps["spec"]["shutdownAfterJobFinishes"] = json!(false);
    assert!(
        view(&keeps, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.shutdownAfterJobFinishes: must be true")
    );
    let mut shared = rayjob();
    shared["spec"]["clusterSelector"] = json!({"ray.io/cluster": "shared"});
    assert!(
        view(&shared, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.clusterSelector")
    );
    // A group KubeRay runs no pod of (replicas and minReplicas unset: 0)
    // is no pod set, but keeps its place for the patches.
    let mut idle = rayjob();
    let group = idle["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
        .as_object_mut()
        .unwrap();
    group.remove("replicas");
    group.remove("minReplicas");
    let wl = workload(&idle, false, |_| None, |_| None).unwrap();
    let sets: Vec<&str> = wl.spec.pod_sets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(sets, ["head", "gpu-big"]);
    assert_eq!(view(&idle, false).unwrap().templates.len(), 3);
}

/// KubeRay runs a worker group's `replicas` clamped to [`minReplicas`,
/// `maxReplicas`]: the quota taken is for that many pods, never fewer
/// than will run (replicas below the minimum, or unset, count the
/// minimum).
#[test]
fn a_worker_groups_pods_are_its_replicas_within_min_and_max_as_kuberay_runs_them() {
    let pods_of = |replicas: Option<i64>| {
        let mut rj = rayjob();
        let group = rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
            .as_object_mut()
            .unwrap();
        match replicas {
            Some(r) => group.insert("replicas".into(), json!(r)),
            None => group.remove("replicas"),
        };
        let wl = workload(&rj, false, |_| None, |_| None).unwrap();
        wl.spec.pod_sets.iter().find(|p| p.name == "gpu-small").map(|p| p.count)
    };
    // GPU-Small: minReplicas 1, maxReplicas 4.
    assert_eq!(pods_of(Some(2)), Some(2));
    assert_eq!(pods_of(Some(0)), Some(1));
    assert_eq!(pods_of(None), Some(1));
    assert_eq!(pods_of(Some(9)), Some(4));
}

#[test]
fn its_pods_are_its_clusters_and_not_gone_while_suspending() {
    let mut rj = rayjob();
    rj["status"] = json!({"jobDeploymentStatus": "Suspending", "rayClusterName": "tune-raycluster-x7"});
    let v = view(&rj, false).unwrap();
    assert_eq!(crate::pods_selector_of(&v), "ray.io/cluster=tune-raycluster-x7");
    assert_eq!(v.live, 1, "KubeRay is still deleting the cluster");
    rj["status"] = json!({"jobDeploymentStatus": "Suspended"});
    assert_eq!(view(&rj, false).unwrap().live, 0);
    rj["status"] = json!({"jobDeploymentStatus": "ValidationFailed"});
    assert_eq!(view(&rj, false).unwrap().finished, Some(false));
}

#[test]
fn malformed_rayjobs_name_the_field() {
    let mut bad = rayjob();
    bad["spec"].as_object_mut().unwrap().remove("rayClusterSpec");
    assert!(
        view(&bad, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.rayClusterSpec: must be set")
    );
    let mut bad = rayjob();
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["groupName"] = json!("head");
    assert!(
        view(&bad, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.rayClusterSpec.workerGroupSpecs[1].groupName: \"head\"")
    );
}

#[test]
fn each_group_gets_its_flavor_and_eviction_puts_back_what_was_written() {
    let rj = rayjob();
    let v = view(&rj, false).unwrap();
    let a100 = flavor("a100");
    let h100 = flavor("h100");
    let flavors = BTreeMap::from([
        ("head".to_string(), vec![]),
        ("gpu-small".to_string(), vec![&a100]),
        ("gpu-big".to_string(), vec![&h100]),
    ]);
    let started = apply(&rj, &crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap());
    let head = |o: &Value| o["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].clone();
    let worker = |o: &Value, i: usize| o["spec"]["rayClusterSpec"]["workerGroupSpecs"][i]["template"]["spec"].clone();
    assert_eq!(started["spec"]["suspend"], json!(false));
    assert_eq!(head(&started)["nodeSelector"], json!({"pool": "cpu"}));
    assert_eq!(worker(&started, 0)["nodeSelector"], json!({"gpu": "a100"}));
    assert_eq!(worker(&started, 1)["nodeSelector"], json!({"gpu": "h100"}));
    // A retry from the started object changes nothing.
    let again = view(&started, false).unwrap();
    assert_eq!(
        apply(
            &started,
            &crate::start_patches(&again, &flavors, &BTreeMap::new()).unwrap()
        ),
        started
    );
    // Worker groups reordered meanwhile: the patch is refused.
    let ObjPatch::Json(ops) = &crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap()[1].1 else {
        panic!()
    };
    let mut swapped = rj.clone();
    swapped["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        .as_array_mut()
        .unwrap()
        .swap(0, 1);
    let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
    assert!(json_patch::patch(&mut swapped, &ops).is_err());
    // Evicted: suspended, then restored exactly.
    let mut suspended = started.clone();
    json_patch::merge(&mut suspended, &crate::job::suspend_patch());
    let sv = view(&suspended, false).unwrap();
    let restored = apply(&suspended, &crate::restore_patches(&sv).unwrap());
    assert_eq!(head(&restored), head(&rj));
    assert_eq!(worker(&restored, 0), worker(&rj, 0));
    assert_eq!(worker(&restored, 1), worker(&rj, 1));
    assert!(restored["metadata"]["annotations"].get(ORIGINAL_SCHEDULING).is_none());
}

#[test]
fn finished_and_ready_come_from_the_deployment_status() {
    let mut rj = rayjob();
    rj["status"] = json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"});
    let v = view(&rj, false).unwrap();
    assert!(v.all_pods_ready(v.pods));
    rj["status"] = json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"});
    assert_eq!(view(&rj, false).unwrap().finished, Some(true));
    rj["status"] = json!({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"});
    assert_eq!(view(&rj, false).unwrap().finished, Some(false));
    rj["status"] = json!({"jobDeploymentStatus": "Failed"});
    assert_eq!(view(&rj, false).unwrap().finished, Some(false));
}

#[test]
fn the_shipped_example_is_a_valid_workload_the_engine_can_take() {
    use sluice_api::Validate;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/jobs/rayjob-tune.yaml");
    let mut obj: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    obj["metadata"]["uid"] = json!("uid-1");
    let wl = workload(&obj, false, |n| (n == "experiment").then_some(10), |_| None).unwrap();
    wl.check().unwrap();
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("head", 1), ("gpu", 4)]);
    assert_eq!(sluice_convert::adapter::workload(&wl, 10, 0).unwrap().pod_sets.len(), 2);
}

/// An autoscaled worker group's minReplicas is not a minCount: the
/// controller does not scale a RayJob's cluster down, so a partial
/// admission would run more pods than it holds quota for.
#[test]
fn an_autoscaled_worker_group_is_admitted_whole() {
    // GPU-Small: replicas 2, minReplicas 1; gpu-big has no minimum.
    let wl = workload(&rayjob(), false, |_| None, |_| None).unwrap();
    let mins: Vec<(&str, Option<i32>)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.min_count))
        .collect();
    assert_eq!(mins, [("head", None), ("gpu-small", None), ("gpu-big", None)]);
}

/// A RayJob's cluster is a KubeRay cluster like a RayCluster's own: the
/// same rules hold for a queued one (no autoscaler growing it past its
/// admission, worker group names that are pod set names).
#[test]
fn a_queued_rayjobs_cluster_is_refused_what_a_queued_raycluster_is() {
    let mut autoscaled = rayjob();
    autoscaled["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = json!(true);
    let refusals = RayJobKind.refusals(&autoscaled);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0].starts_with(
            "spec.rayClusterSpec.enableInTreeAutoscaling: must not be true for a queued RayJob: the Ray autoscaler"
        ),
        "{refusals:?}"
    );
    assert!(RayJobKind.refusals(&rayjob()).is_empty());
}
