use super::*;
use crate::JobKind;
use crate::ObjPatch;
use crate::job::ORIGINAL_SCHEDULING;
use crate::testing::flavor;
use std::collections::BTreeMap;

/// A JobSet as the API server returns it: a driver (1 Job × 1 pod) and
/// workers (2 Jobs × 4 pods, 8 GPUs each), suspended, queued in team-a.
fn jobset() -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "pretrain", "namespace": "research", "uid": "js-uid-1",
                     "labels": {"sluice.dev/queue": "team-a", "sluice.dev/priority-class": "training"}},
        "spec": {
            "suspend": true,
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {
                    "parallelism": 1, "completions": 1, "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never",
                        "nodeSelector": {"zone": "a"},
                        "containers": [{"name": "d", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {
                    "parallelism": 4, "completions": 4,
                    "template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}
            ]
        },
        "status": {"replicatedJobsStatus": [
            {"name": "driver", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1},
            {"name": "workers", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 2}
        ]}
    })
}

/// Applies a JSON patch (RFC 6902) as the API server would.
fn apply_json(obj: &Value, ops: &Value) -> Result<Value, json_patch::PatchError> {
    let mut v = obj.clone();
    let p: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
    json_patch::patch(&mut v, &p)?;
    Ok(v)
}

fn apply(obj: &Value, patches: &[(bool, ObjPatch)]) -> Value {
    let mut v = obj.clone();
    for (status, p) in patches {
        assert!(!status, "a JobSet has no status patch");
        match p {
            ObjPatch::Merge(m) => json_patch::merge(&mut v, m),
            ObjPatch::Json(ops) => v = apply_json(&v, ops).unwrap(),
        }
    }
    v
}

#[test]
fn a_jobset_is_one_workload_with_a_pod_set_per_replicated_job() {
    let wl = workload(&jobset(), false, |n| (n == "training").then_some(500), |_| None).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("jobset-pretrain"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(
        sets,
        [("driver", 1), ("workers", 8)],
        "replicas × min(parallelism, completions)"
    );
    assert_eq!(wl.spec.queue_name, "team-a");
    assert_eq!(wl.spec.priority, Some(500));
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "js-uid-1", Some(true))
    );
    let limits = wl.spec.pod_sets[1].template.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .as_ref()
        .unwrap();
    assert_eq!(limits["nvidia.com/gpu"].0, "8");
    assert_eq!(
        crate::job::owner_of(&wl).map(|(k, n, _)| (k, n)),
        Some((JobKind::JobSet, "pretrain"))
    );

    let v = view(&jobset(), false).unwrap();
    assert_eq!(
        (v.kind, v.suspended, v.finished, v.pods),
        (JobKind::JobSet, true, None, 3)
    );
    assert_eq!(v.queue.as_deref(), Some("team-a"));
    assert!(!v.all_pods_ready(v.pods));
}

#[test]
fn malformed_jobsets_name_the_field() {
    let mut bad = jobset();
    bad["spec"]["replicatedJobs"][1]["replicas"] = json!(0);
    let err = view(&bad, false).unwrap_err();
    assert_eq!(err.to_string(), "spec.replicatedJobs[1].replicas: 0 must be at least 1");
    let mut bad = jobset();
    bad["spec"]["replicatedJobs"] = json!([]);
    assert_eq!(
        view(&bad, false).unwrap_err().to_string(),
        "spec.replicatedJobs: must list at least one replicated Job"
    );
    let mut bad = jobset();
    bad["spec"]["replicatedJobs"][0]["template"] = json!("nope");
    let err = view(&bad, false).unwrap_err();
    assert_eq!(err.metric_label(), "job_invalid");
}

#[test]
fn admission_injects_each_pod_set_its_flavor_and_eviction_puts_back_what_was_written() {
    let js = jobset();
    let v = view(&js, false).unwrap();
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("workers".to_string(), vec![&a100]), ("driver".to_string(), vec![])]);
    let start = crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap();
    // The originals first (a merge patch: the object may have no
    // annotations), then one JSON patch guarded by the names.
    assert!(matches!(start[0].1, ObjPatch::Merge(_)));
    let ObjPatch::Json(ops) = &start[1].1 else {
        panic!("{start:?}")
    };
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/spec/replicatedJobs/0/name", "value": "driver"})
    );
    assert_eq!(
        ops[1],
        json!({"op": "test", "path": "/spec/replicatedJobs/1/name", "value": "workers"})
    );
    let started = apply(&js, &start);
    let pod = |v: &Value, i: usize| v["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"].clone();
    assert_eq!(started["spec"]["suspend"], json!(false));
    assert_eq!(pod(&started, 1)["nodeSelector"], json!({"gpu": "a100"}));
    assert_eq!(pod(&started, 1)["tolerations"][0]["key"], json!("nvidia.com/gpu"));
    // The driver's pod set got no flavor: its own selector stays.
    assert_eq!(pod(&started, 0)["nodeSelector"], json!({"zone": "a"}));
    assert!(pod(&started, 0).get("tolerations").is_none());

    // Starting again from the started object (a retry) changes nothing.
    let again = view(&started, false).unwrap();
    assert_eq!(
        apply(
            &started,
            &crate::start_patches(&again, &flavors, &BTreeMap::new()).unwrap()
        ),
        started
    );

    // Evicted: suspended, then restored exactly.
    let mut suspended = started.clone();
    json_patch::merge(&mut suspended, &crate::job::suspend_patch());
    let sv = view(&suspended, false).unwrap();
    let restored = apply(&suspended, &crate::restore_patches(&sv).unwrap());
    assert_eq!(pod(&restored, 0), pod(&js, 0));
    assert_eq!(pod(&restored, 1), pod(&js, 1));
    assert!(restored["metadata"]["annotations"].get(ORIGINAL_SCHEDULING).is_none());
    // The restored object's Workload is the same as the original's.
    assert_eq!(
        workload(&started, false, |_| None, |_| None).unwrap().spec.pod_sets,
        workload(&js, false, |_| None, |_| None).unwrap().spec.pod_sets
    );
    // Nothing recorded: nothing to restore.
    assert!(crate::restore_patches(&v).unwrap().is_empty());
}

#[test]
fn a_reordered_jobset_is_not_patched_in_the_wrong_place() {
    let js = jobset();
    let v = view(&js, false).unwrap();
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("workers".to_string(), vec![&a100])]);
    let start = crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap();
    let ObjPatch::Json(ops) = &start[1].1 else { panic!() };
    let mut swapped = js.clone();
    let rjs = swapped["spec"]["replicatedJobs"].as_array_mut().unwrap();
    rjs.swap(0, 1);
    assert!(apply_json(&swapped, ops).is_err(), "the name tests fail");
}

#[test]
fn finished_and_ready_come_from_the_jobset_status() {
    let mut js = jobset();
    js["status"]["replicatedJobsStatus"] = json!([
        {"name": "driver", "ready": 1, "succeeded": 0},
        {"name": "workers", "ready": 1, "succeeded": 1}
    ]);
    let v = view(&js, false).unwrap();
    assert!(v.all_pods_ready(v.pods), "every child Job ready or succeeded");
    js["status"]["replicatedJobsStatus"][1]["succeeded"] = json!(0);
    assert!(!view(&js, false).unwrap().all_pods_ready(3));
    js["status"]["conditions"] = json!([{"type": "Completed", "status": "True"}]);
    assert_eq!(view(&js, false).unwrap().finished, Some(true));
    js["status"]["conditions"] = json!([{"type": "Failed", "status": "True"}]);
    assert_eq!(view(&js, false).unwrap().finished, Some(false));
    assert_eq!(
        JobKind::JobSet.pods_selector("pretrain", "js-uid-1"),
        "jobset.sigs.k8s.io/jobset-uid=js-uid-1"
    );
}

#[test]
fn the_shipped_example_is_a_valid_workload_the_engine_can_take() {
    use sluice_api::Validate;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/jobs/jobset-pretrain.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut obj: Value = serde_saphyr::from_str(&text).unwrap();
    obj["metadata"]["uid"] = json!("uid-1");
    let wl = workload(&obj, false, |n| (n == "training").then_some(100), |_| None).unwrap();
    wl.check().unwrap();
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("coordinator", 1), ("workers", 4)]);
    assert_eq!(wl.spec.queue_name, "team-a");
    assert_eq!(wl.spec.priority, Some(100));
    let spec = sluice_convert::adapter::workload(&wl, 100, 0).unwrap();
    assert_eq!(spec.pod_sets.len(), 2);
}

/// Only batch/v1 Jobs take `sluice.dev/min-parallelism`: on another kind
/// it is refused, not ignored.
#[test]
fn the_min_parallelism_annotation_is_refused() {
    let mut js = jobset();
    js["metadata"]["annotations"] = json!({"sluice.dev/min-parallelism": "2"});
    let err = workload(&js, false, |_| None, |_| None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata.annotations[sluice.dev/min-parallelism]: only a batch/v1 Job takes this annotation, not a JobSet; remove it"
    );
}
