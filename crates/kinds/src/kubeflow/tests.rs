use super::*;
use crate::ObjPatch;
use crate::testing::flavor;

/// A PyTorchJob as the API server returns it: a master (1 pod, its own
/// nodeSelector) and 3 workers of 8 GPUs, suspended, queued in team-a.
fn pytorchjob() -> Value {
    let pod = |gpus: &str, selector: Value| {
        json!({"spec": {"nodeSelector": selector, "containers": [{"name": "pytorch", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    };
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research", "uid": "pj-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "runPolicy": {"suspend": true, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod("1", json!({"zone": "a"}))},
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": pod("8", json!(null))}
            }
        }
    })
}

fn mpijob() -> Value {
    json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "hvd", "namespace": "research", "uid": "mj-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "slotsPerWorker": 8,
            "runPolicy": {"suspend": false},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "x"}]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}
            }
        }
    })
}

fn merge(obj: &Value, patches: &[(bool, ObjPatch)]) -> Value {
    let mut v = obj.clone();
    for (status, p) in patches {
        assert!(!status);
        match p {
            ObjPatch::Merge(m) => json_patch::merge(&mut v, m),
            ObjPatch::Json(_) => panic!("a Kubeflow job is patched by merge patches"),
        }
    }
    v
}

#[test]
fn a_pytorchjob_is_one_workload_with_a_pod_set_per_role() {
    let wl = workload(JobKind::PyTorchJob, &pytorchjob(), false, |_| None, |_| None).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("pytorchjob-bert"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("master", 1), ("worker", 3)]);
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.controller),
        ("kubeflow.org/v1", "PyTorchJob", Some(true))
    );
    use sluice_api::Validate;
    wl.check().unwrap();
    let v = view(JobKind::PyTorchJob, &pytorchjob(), false).unwrap();
    assert_eq!((v.suspended, v.pods, v.finished), (true, 4, None));
    assert!(!v.all_pods_ready(v.pods));

    let wl = workload(JobKind::MpiJob, &mpijob(), false, |_| None, |_| None).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("mpijob-hvd"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("launcher", 1), ("worker", 2)]);
    let v = view(JobKind::MpiJob, &mpijob(), false).unwrap();
    assert!(!v.suspended, "runPolicy.suspend false");
    assert_eq!(
        crate::suspend_patch(JobKind::MpiJob),
        ObjPatch::Merge(json!({"spec": {"runPolicy": {"suspend": true}}}))
    );
    assert_eq!(
        JobKind::MpiJob.pods_selector("hvd", "mj-uid"),
        "training.kubeflow.org/job-name=hvd,training.kubeflow.org/operator-name=mpi-operator"
    );
    // A role of no pods is no pod set.
    let mut idle = pytorchjob();
    idle["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(0);
    let wl = workload(JobKind::PyTorchJob, &idle, false, |_| None, |_| None).unwrap();
    assert_eq!(wl.spec.pod_sets.len(), 1);
}

#[test]
fn malformed_kubeflow_jobs_name_the_field() {
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"] = json!({});
    assert_eq!(
        view(JobKind::PyTorchJob, &bad, false).unwrap_err().to_string(),
        "spec.pytorchReplicaSpecs: must name at least one role"
    );
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(-1);
    assert_eq!(
        view(JobKind::PyTorchJob, &bad, false).unwrap_err().to_string(),
        "spec.pytorchReplicaSpecs.Worker.replicas: -1 must not be negative"
    );
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"] = json!(["Master"]);
    assert!(
        view(JobKind::PyTorchJob, &bad, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.pytorchReplicaSpecs: must map each role")
    );
}

#[test]
fn each_role_gets_its_flavor_and_eviction_puts_back_what_was_written() {
    let pj = pytorchjob();
    let v = view(JobKind::PyTorchJob, &pj, false).unwrap();
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("worker".to_string(), vec![&a100]), ("master".to_string(), vec![])]);
    let started = merge(&pj, &crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap());
    let pod = |o: &Value, role: &str| o["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"].clone();
    assert_eq!(started["spec"]["runPolicy"]["suspend"], json!(false));
    assert_eq!(
        started["spec"]["runPolicy"]["cleanPodPolicy"],
        json!("None"),
        "the rest kept"
    );
    assert_eq!(pod(&started, "Worker")["nodeSelector"], json!({"gpu": "a100"}));
    assert_eq!(
        pod(&started, "Worker")["tolerations"][0]["key"],
        json!("nvidia.com/gpu")
    );
    assert_eq!(pod(&started, "Master")["nodeSelector"], json!({"zone": "a"}));
    assert_eq!(started["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], json!(3));
    // Again from the started object: the same object.
    let again = view(JobKind::PyTorchJob, &started, false).unwrap();
    assert_eq!(
        merge(
            &started,
            &crate::start_patches(&again, &flavors, &BTreeMap::new()).unwrap()
        ),
        started
    );
    // Evicted: suspended, then restored exactly.
    let mut suspended = started.clone();
    json_patch::merge(&mut suspended, &suspend_patch());
    let sv = view(JobKind::PyTorchJob, &suspended, false).unwrap();
    let restored = merge(&suspended, &crate::restore_patches(&sv).unwrap());
    assert_eq!(pod(&restored, "Master"), pod(&pj, "Master"));
    assert_eq!(pod(&restored, "Worker")["nodeSelector"], Value::Null);
    assert!(pod(&restored, "Worker").get("tolerations").is_none());
    assert!(restored["metadata"]["annotations"].get(ORIGINAL_SCHEDULING).is_none());
    assert!(crate::restore_patches(&v).unwrap().is_empty());
}

#[test]
fn finished_and_ready_come_from_the_conditions() {
    let mut pj = pytorchjob();
    pj["status"] = json!({"conditions": [{"type": "Running", "status": "True"}]});
    let v = view(JobKind::PyTorchJob, &pj, false).unwrap();
    assert!(v.all_pods_ready(v.pods));
    pj["status"]["conditions"] = json!([{"type": "Succeeded", "status": "True"}]);
    assert_eq!(view(JobKind::PyTorchJob, &pj, false).unwrap().finished, Some(true));
    pj["status"]["conditions"] = json!([{"type": "Failed", "status": "True"}]);
    assert_eq!(view(JobKind::PyTorchJob, &pj, false).unwrap().finished, Some(false));
}

#[test]
fn the_shipped_example_is_a_valid_workload_the_engine_can_take() {
    use sluice_api::Validate;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/jobs/pytorchjob-finetune.yaml"
    );
    let mut obj: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    obj["metadata"]["uid"] = json!("uid-1");
    let wl = workload(
        JobKind::PyTorchJob,
        &obj,
        false,
        |n| (n == "training").then_some(100),
        |_| None,
    )
    .unwrap();
    wl.check().unwrap();
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("master", 1), ("worker", 3)]);
    assert_eq!(wl.spec.priority, Some(100));
    assert_eq!(
        sluice_convert::adapter::workload(&wl, 100, 0).unwrap().pod_sets.len(),
        2
    );
}

#[test]
fn the_shipped_mpijob_example_is_a_valid_workload_the_engine_can_take() {
    use sluice_api::Validate;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/jobs/mpijob-horovod.yaml");
    let mut obj: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    obj["metadata"]["uid"] = json!("uid-1");
    let wl = workload(JobKind::MpiJob, &obj, false, |_| None, |_| None).unwrap();
    wl.check().unwrap();
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("launcher", 1), ("worker", 2)]);
    assert_eq!(sluice_convert::adapter::workload(&wl, 0, 0).unwrap().pod_sets.len(), 2);
}

/// Its workers' minimum is not a minCount: the controller does not scale a
/// PyTorchJob down, so a partial admission would run more pods than it
/// holds quota for.
#[test]
fn an_elastic_pytorchjob_is_admitted_whole() {
    let mut pj = pytorchjob();
    pj["spec"]["elasticPolicy"] = json!({"minReplicas": 2, "maxReplicas": 3});
    let wl = workload(JobKind::PyTorchJob, &pj, false, |_| None, |_| None).unwrap();
    let mins: Vec<(&str, Option<i32>)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.min_count))
        .collect();
    assert_eq!(mins, [("master", None), ("worker", None)]);
    use sluice_api::Validate;
    wl.check().unwrap();
}
