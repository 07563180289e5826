use super::*;
use crate::ObjPatch;
use crate::job::ORIGINAL_SCHEDULING;
use crate::testing::flavor;
use serde_json::json;
use std::collections::BTreeMap;

/// A RayCluster as the API server returns it: a head (its own
/// nodeSelector) and two worker groups, suspended, queued in team-a.
fn raycluster() -> Value {
    let pod = |gpus: &str| {
        json!({"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    };
    let mut head = pod("0");
    head["spec"]["nodeSelector"] = json!({"pool": "cpu"});
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "lab", "namespace": "research", "uid": "rc-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "suspend": true,
            "headGroupSpec": {"rayStartParams": {}, "template": head},
            "workerGroupSpecs": [
                {"groupName": "GPU-Small", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                 "rayStartParams": {}, "template": pod("1")},
                {"groupName": "gpu-big", "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "numOfHosts": 2,
                 "rayStartParams": {}, "template": pod("8")}
            ]
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

fn pod_sets(obj: &Value) -> Vec<(String, i32)> {
    workload(obj, false, |_| None, |_| None)
        .unwrap()
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect()
}

#[test]
fn a_raycluster_is_one_workload_with_the_head_and_a_pod_set_per_worker_group() {
    use sluice_api::Validate;
    let wl = workload(&raycluster(), false, |_| None, |_| None).unwrap();
    wl.check().unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("raycluster-lab"));
    assert_eq!(
        pod_sets(&raycluster()),
        [("head".into(), 1), ("gpu-small".into(), 2), ("gpu-big".into(), 2)],
        "replicas × numOfHosts"
    );
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.api_version.as_str(), owner.uid.as_str()),
        ("RayCluster", "ray.io/v1", "rc-uid")
    );
    let v = view(&raycluster(), false).unwrap();
    assert_eq!(
        (v.kind, v.suspended, v.pods, v.finished, v.ready),
        (JobKind::RayCluster, true, 5, None, Some(0))
    );
    assert_eq!(JobKind::RayCluster.pods_selector("lab", "rc-uid"), "ray.io/cluster=lab");
    assert_eq!(JobKind::RayCluster.workload_name("lab"), "raycluster-lab");
}

#[test]
fn a_worker_group_counts_the_pods_kuberay_runs_for_it() {
    // (group fields, pods): KubeRay's GetWorkerGroupDesiredReplicas.
    let table = [
        (json!({"replicas": 3}), 3),
        (json!({"replicas": 3, "numOfHosts": 4}), 12),
        (json!({}), 0),
        (json!({"minReplicas": 2}), 2),
        (json!({"replicas": 1, "minReplicas": 3, "maxReplicas": 5}), 3),
        (json!({"replicas": 9, "minReplicas": 3, "maxReplicas": 5}), 5),
        (json!({"replicas": 9, "maxReplicas": 5, "numOfHosts": 2}), 10),
        (json!({"replicas": 4, "suspend": true}), 0),
        (json!({"replicas": 4, "suspend": false}), 4),
    ];
    for (fields, pods) in table {
        assert_eq!(cluster::worker_pods(&fields), pods, "{fields}");
        let mut rc = raycluster();
        let mut g = json!({"groupName": "w", "template": {"spec": {"containers": []}}});
        g.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        rc["spec"]["workerGroupSpecs"] = json!([g]);
        let expected: Vec<(String, i32)> = std::iter::once(("head".to_owned(), 1))
            .chain((pods > 0).then(|| ("w".to_owned(), pods as i32)))
            .collect();
        assert_eq!(pod_sets(&rc), expected, "{fields}: a group of no pods is no pod set");
        assert_eq!(view(&rc, false).unwrap().pods, 1 + pods as i32, "{fields}");
        assert_eq!(RayClusterKind.counts(&rc)[0].value, pods, "{fields}");
    }
}

#[test]
fn a_raycluster_sluice_cannot_hold_to_its_admission_is_refused_and_gets_no_workload() {
    let problems = |f: &dyn Fn(&mut Value)| {
        let mut rc = raycluster();
        f(&mut rc);
        let refusals = RayClusterKind.refusals(&rc);
        let err = workload(&rc, false, |_| None, |_| None)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert_eq!(
            refusals.first(),
            Some(&err),
            "the webhook and the controller refuse it alike"
        );
        // The view stays readable: an unqueued RayCluster is no error.
        view(&rc, false).unwrap();
        refusals
    };
    assert!(RayClusterKind.refusals(&raycluster()).is_empty());
    let r = problems(&|rc| rc["spec"]["enableInTreeAutoscaling"] = json!(true));
    assert_eq!(r.len(), 1);
    assert!(
        r[0].starts_with("spec.enableInTreeAutoscaling: must not be true for a queued RayCluster: the Ray autoscaler")
    );
    let r = problems(&|rc| rc["spec"]["workerGroupSpecs"][1]["groupName"] = json!("Head"));
    assert_eq!(
        r,
        [
            "spec.workerGroupSpecs[1].groupName: \"Head\" is the head's pod set; a queued RayCluster's worker group must have another name"
        ]
    );
    let r = problems(&|rc| rc["spec"]["workerGroupSpecs"][1]["groupName"] = json!("gpu-SMALL"));
    assert!(r[0].starts_with(
        "spec.workerGroupSpecs[1].groupName: \"gpu-SMALL\" names pod set \"gpu-small\", as an earlier worker group does"
    ));
    let r = problems(&|rc| rc["spec"]["workerGroupSpecs"][0]["groupName"] = json!("gpu_small"));
    assert!(r[0].starts_with("spec.workerGroupSpecs[0].groupName: \"gpu_small\" must be letters, digits and '-'"));
    // Seven worker groups and the head: the most a Workload holds.
    let groups = |n: usize| {
        (0..n)
            .map(|i| json!({"groupName": format!("g{i}"), "replicas": 1, "template": {"spec": {"containers": []}}}))
            .collect::<Vec<_>>()
    };
    let mut seven = raycluster();
    seven["spec"]["workerGroupSpecs"] = json!(groups(7));
    assert!(RayClusterKind.refusals(&seven).is_empty());
    assert_eq!(pod_sets(&seven).len(), 8);
    let r = problems(&|rc| rc["spec"]["workerGroupSpecs"] = json!(groups(8)));
    assert_eq!(
        r,
        [
            "spec.workerGroupSpecs: has 8 worker groups: with the head that is 9 pod sets, and a queued RayCluster may have at most 8 (the head and 7 worker groups), the most a Workload holds"
        ]
    );
}

#[test]
fn malformed_rayclusters_name_the_field() {
    let mut bad = raycluster();
    bad["spec"].as_object_mut().unwrap().remove("headGroupSpec");
    assert!(view(&bad, false).unwrap_err().to_string().contains("headGroupSpec"));
    let mut bad = raycluster();
    bad["spec"]["workerGroupSpecs"][1]["replicas"] = json!(-1);
    assert_eq!(
        view(&bad, false).unwrap_err().to_string(),
        "spec.workerGroupSpecs[1].replicas: -1 must not be negative"
    );
    let mut bad = raycluster();
    bad["spec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(0);
    assert_eq!(
        view(&bad, false).unwrap_err().to_string(),
        "spec.workerGroupSpecs[0].numOfHosts: 0 must be at least 1"
    );
}

#[test]
fn it_never_finishes_and_is_ready_when_kuberay_says_so() {
    let mut rc = raycluster();
    rc["status"] = json!({"state": "ready"});
    let v = view(&rc, false).unwrap();
    assert_eq!((v.finished, v.ready), (None, Some(5)));
    assert_eq!(RayClusterKind.finished(&rc), None);
    rc["status"] = json!({"state": "failed"});
    assert_eq!(
        view(&rc, false).unwrap().finished,
        None,
        "failed pods are KubeRay's to replace"
    );
}

#[test]
fn a_raycluster_is_held_by_the_rayjob_that_controls_it_only() {
    assert_eq!(JobKind::RayCluster.made_by(), [JobKind::RayJob]);
    assert!(JobKind::RayJob.controls_others());
    assert!(!JobKind::RayCluster.controls_others());
    let with_owner = |owner: Value| {
        let mut rc = raycluster();
        rc["metadata"]["ownerReferences"] = json!([owner]);
        view(&rc, false).unwrap().managed_by
    };
    let rayjob = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune", "uid": "rj", "controller": true});
    assert_eq!(
        with_owner(rayjob.clone()),
        Some(crate::job::ManagedBy {
            kind: JobKind::RayJob,
            name: "tune".into(),
            uid: "rj".into()
        })
    );
    let mut not_controller = rayjob.clone();
    not_controller["controller"] = json!(false);
    assert_eq!(with_owner(not_controller), None, "only a controller reference holds it");
    let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "x", "uid": "js", "controller": true});
    assert_eq!(with_owner(jobset), None, "a JobSet makes no RayClusters");
}

#[test]
fn each_group_gets_its_flavor_and_eviction_puts_back_what_was_written() {
    let rc = raycluster();
    let v = view(&rc, false).unwrap();
    let a100 = flavor("a100");
    let h100 = flavor("h100");
    let flavors = BTreeMap::from([
        ("head".to_string(), vec![]),
        ("gpu-small".to_string(), vec![&a100]),
        ("gpu-big".to_string(), vec![&h100]),
    ]);
    let started = apply(&rc, &crate::start_patches(&v, &flavors, &BTreeMap::new()).unwrap());
    let head = |o: &Value| o["spec"]["headGroupSpec"]["template"]["spec"].clone();
    let worker = |o: &Value, i: usize| o["spec"]["workerGroupSpecs"][i]["template"]["spec"].clone();
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
    let mut swapped = rc.clone();
    swapped["spec"]["workerGroupSpecs"].as_array_mut().unwrap().swap(0, 1);
    let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
    assert!(json_patch::patch(&mut swapped, &ops).is_err());
    // Evicted: suspended, then restored exactly.
    let mut suspended = started.clone();
    match crate::suspend_patch(&view(&started, false).unwrap()) {
        ObjPatch::Merge(p) => json_patch::merge(&mut suspended, &p),
        other => panic!("{other:?}"),
    }
    assert_eq!(suspended["spec"]["suspend"], json!(true));
    let sv = view(&suspended, false).unwrap();
    let restored = apply(&suspended, &crate::restore_patches(&sv).unwrap());
    assert_eq!(head(&restored), head(&rc));
    assert_eq!(worker(&restored, 0), worker(&rc, 0));
    assert_eq!(worker(&restored, 1), worker(&rc, 1));
    assert!(restored["metadata"]["annotations"].get(ORIGINAL_SCHEDULING).is_none());
}

#[test]
fn the_shipped_example_is_a_valid_workload() {
    use sluice_api::Validate;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/jobs/raycluster-notebook.yaml"
    );
    let mut rc: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(RayClusterKind.refusals(&rc).is_empty());
    rc["metadata"]["uid"] = json!("u");
    let wl = workload(&rc, false, |_| None, |_| None).unwrap();
    wl.check().unwrap();
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("head", 1), ("gpu", 2)]);
}
