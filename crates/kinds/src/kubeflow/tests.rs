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
    let wl = JobKind::PyTorchJob
        .integration()
        .workload(&pytorchjob(), false, &|_| None, &|_| None)
        .unwrap();
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
    let v = JobKind::PyTorchJob.integration().view(&pytorchjob(), false).unwrap();
    assert_eq!((v.suspended, v.pods, v.finished), (true, 4, None));
    assert!(!v.all_pods_ready(v.pods));

    let wl = JobKind::MpiJob
        .integration()
        .workload(&mpijob(), false, &|_| None, &|_| None)
        .unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("mpijob-hvd"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("launcher", 1), ("worker", 2)]);
    let v = JobKind::MpiJob.integration().view(&mpijob(), false).unwrap();
    assert!(!v.suspended, "runPolicy.suspend false");
    assert_eq!(
        crate::suspend_patch(&v),
        ObjPatch::Merge(json!({"spec": {"runPolicy": {"suspend": true}}}))
    );
    assert_eq!(
        JobKind::MpiJob.pods_selector("hvd", "mj-uid"),
        "training.kubeflow.org/job-name=hvd,training.kubeflow.org/operator-name=mpi-operator"
    );
    // A role of no pods is no pod set.
    let mut idle = pytorchjob();
    idle["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(0);
    let wl = JobKind::PyTorchJob
        .integration()
        .workload(&idle, false, &|_| None, &|_| None)
        .unwrap();
    assert_eq!(wl.spec.pod_sets.len(), 1);
}

#[test]
fn malformed_kubeflow_jobs_name_the_field() {
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"] = json!({});
    assert_eq!(
        JobKind::PyTorchJob
            .integration()
            .view(&bad, false)
            .unwrap_err()
            .to_string(),
        "spec.pytorchReplicaSpecs: must name at least one role"
    );
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(-1);
    assert_eq!(
        JobKind::PyTorchJob
            .integration()
            .view(&bad, false)
            .unwrap_err()
            .to_string(),
        "spec.pytorchReplicaSpecs.Worker.replicas: -1 must not be negative"
    );
    let mut bad = pytorchjob();
    bad["spec"]["pytorchReplicaSpecs"] = json!(["Master"]);
    assert!(
        JobKind::PyTorchJob
            .integration()
            .view(&bad, false)
            .unwrap_err()
            .to_string()
            .starts_with("spec.pytorchReplicaSpecs: must map each role")
    );
}

#[test]
fn each_role_gets_its_flavor_and_eviction_puts_back_what_was_written() {
    let pj = pytorchjob();
    let v = JobKind::PyTorchJob.integration().view(&pj, false).unwrap();
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
    let again = JobKind::PyTorchJob.integration().view(&started, false).unwrap();
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
    let sv = JobKind::PyTorchJob.integration().view(&suspended, false).unwrap();
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
    let v = JobKind::PyTorchJob.integration().view(&pj, false).unwrap();
    assert!(v.all_pods_ready(v.pods));
    pj["status"]["conditions"] = json!([{"type": "Succeeded", "status": "True"}]);
    assert_eq!(
        JobKind::PyTorchJob.integration().view(&pj, false).unwrap().finished,
        Some(true)
    );
    pj["status"]["conditions"] = json!([{"type": "Failed", "status": "True"}]);
    assert_eq!(
        JobKind::PyTorchJob.integration().view(&pj, false).unwrap().finished,
        Some(false)
    );
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
    let wl = JobKind::PyTorchJob
        .integration()
        .workload(&obj, false, &|n| (n == "training").then_some(100), &|_| None)
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
    let wl = JobKind::MpiJob
        .integration()
        .workload(&obj, false, &|_| None, &|_| None)
        .unwrap();
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
    let wl = JobKind::PyTorchJob
        .integration()
        .workload(&pj, false, &|_| None, &|_| None)
        .unwrap();
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

/// A job of a training-operator kind as a user writes it (no `runPolicy`):
/// roles `roles` (name, replicas, GPUs each).
fn training_job(kind: JobKind, roles: &[(&str, i32, &str)]) -> Value {
    let (_, version, k) = kind.gvk();
    let specs: Map<String, Value> = roles
        .iter()
        .map(|(role, replicas, gpus)| {
            let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
            (role.to_string(), json!({"replicas": replicas, "template": pod}))
        })
        .collect();
    let field = match kind {
        JobKind::TfJob => "tfReplicaSpecs",
        JobKind::XgBoostJob => "xgbReplicaSpecs",
        JobKind::PaddleJob => "paddleReplicaSpecs",
        JobKind::JaxJob => "jaxReplicaSpecs",
        other => panic!("{other:?} is not a training-operator kind"),
    };
    json!({
        "apiVersion": format!("kubeflow.org/{version}"), "kind": k,
        "metadata": {"name": "run", "namespace": "research", "uid": "run-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {field: specs}
    })
}

/// The four kinds added as one file each read, patch and end as a
/// PyTorchJob does, each through its own map of roles and operator label.
#[test]
fn each_training_operator_kind_is_a_gang_of_its_roles() {
    type Case<'a> = (JobKind, &'a [(&'a str, i32, &'a str)], &'a str, &'a str);
    let cases: [Case; 4] = [
        (
            JobKind::TfJob,
            &[("Chief", 1, "1"), ("PS", 2, "0"), ("Worker", 3, "4")],
            "tfReplicaSpecs",
            "tfjob-controller",
        ),
        (
            JobKind::XgBoostJob,
            &[("Master", 1, "1"), ("Worker", 2, "1")],
            "xgbReplicaSpecs",
            "xgboostjob-controller",
        ),
        (
            JobKind::PaddleJob,
            &[("Worker", 2, "8")],
            "paddleReplicaSpecs",
            "paddlejob-controller",
        ),
        (
            JobKind::JaxJob,
            &[("Worker", 4, "8")],
            "jaxReplicaSpecs",
            "jaxjob-controller",
        ),
    ];
    for (kind, roles, field, operator) in cases {
        let k = kind.integration();
        let obj = training_job(kind, roles);
        // Its Workload: one pod set per role, lower case, in role order.
        let wl = k.workload(&obj, false, &|_| None, &|_| None).unwrap();
        let prefix = format!("{}-", kind.kind().to_ascii_lowercase());
        assert_eq!(wl.metadata.name, Some(format!("{prefix}run")), "{kind:?}");
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        let mut want: Vec<(String, i32)> = roles.iter().map(|(r, n, _)| (r.to_ascii_lowercase(), *n)).collect();
        want.sort();
        assert_eq!(sets, want, "{kind:?}");
        // What the webhook reads: its suspend field, templates and counts.
        assert_eq!(k.hold().field(), "spec.runPolicy.suspend", "{kind:?}");
        let templates = k.templates(&obj);
        assert_eq!(templates.len(), roles.len(), "{kind:?}");
        assert!(
            templates.iter().all(|t| obj.pointer(&t.spec).is_some()),
            "{kind:?}: {templates:?}"
        );
        let counts: Vec<i64> = k.counts(&obj).iter().map(|c| c.value).collect();
        assert_eq!(
            counts.iter().sum::<i64>(),
            roles.iter().map(|r| i64::from(r.1)).sum::<i64>(),
            "{kind:?}"
        );
        // Suspended through runPolicy (created when missing).
        let mut held = obj.clone();
        match k.suspend_patch(&k.view(&obj, false).unwrap()) {
            ObjPatch::Merge(m) => json_patch::merge(&mut held, &m),
            ObjPatch::Json(_) => panic!("{kind:?}: a merge patch suspends it"),
        }
        let v = k.view(&held, false).unwrap();
        assert!(v.suspended, "{kind:?}");
        assert_eq!(v.kind, kind);
        // Started on a flavor, then put back exactly.
        let a100 = flavor("a100");
        let flavors: BTreeMap<String, Vec<&ResourceFlavor>> =
            wl.spec.pod_sets.iter().map(|p| (p.name.clone(), vec![&a100])).collect();
        let started = merge(&held, &crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap());
        assert_eq!(started["spec"]["runPolicy"]["suspend"], json!(false), "{kind:?}");
        for (role, _, _) in roles {
            assert_eq!(
                started["spec"][field][role]["template"]["spec"]["nodeSelector"],
                json!({"gpu": "a100"}),
                "{kind:?} {role}"
            );
        }
        let mut evicted = started.clone();
        json_patch::merge(&mut evicted, &suspend_patch());
        let ev = k.view(&evicted, false).unwrap();
        let restored = merge(&evicted, &crate::restore_patches(&ev).unwrap());
        assert_eq!(restored["spec"][field], held["spec"][field], "{kind:?}");
        // Finished by its conditions; its pods by its operator's label.
        let mut done = started.clone();
        done["status"] = json!({"conditions": [{"type": "Succeeded", "status": "True"}]});
        assert_eq!(k.finished(&done), Some(true), "{kind:?}");
        assert_eq!(k.view(&done, false).unwrap().finished, Some(true), "{kind:?}");
        assert_eq!(k.finished(&started), None, "{kind:?}");
        assert_eq!(
            kind.pods_selector("run", "run-uid"),
            format!("training.kubeflow.org/job-name=run,training.kubeflow.org/operator-name={operator}")
        );
        assert_eq!(JobKind::from_flag(kind.flag_name()), Some(kind));
    }
}
