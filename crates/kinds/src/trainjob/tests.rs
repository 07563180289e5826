use super::*;
use crate::testing::flavor;
use crate::{restore_patches, start_patches, suspend_patch};
use serde_json::json;
use std::collections::BTreeMap;

/// A ClusterTrainingRuntime as Trainer ships them: a dataset initializer,
/// a model initializer and the trainer (`node`, 2 nodes by default).
fn runtime() -> Value {
    let job = |step: &str, container: &str, gpus: &str| {
        json!({"metadata": {"labels": {ANCESTOR_LABEL: step}},
               "spec": {"template": {"spec": {"containers": [
                   {"name": container, "image": "pytorch/pytorch:2.5.0",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}})
    };
    json!({
        "apiVersion": API_VERSION, "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed"},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "dataset-initializer", "replicas": 1, "template": job("dataset-initializer", "dataset-initializer", "0")},
                {"name": "model-initializer", "replicas": 1, "template": job("model-initializer", "model-initializer", "0")},
                {"name": "node", "replicas": 1, "template": job("trainer", "node", "1")}
            ]}}
        }
    })
}

/// A TrainJob as the API server returns it, suspended, queued in team-a,
/// with 4 nodes of 8 GPUs each and an override of its own.
fn trainjob() -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": "llama", "namespace": "research", "uid": "tj-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "suspend": true,
            "runtimeRef": {"name": "torch-distributed", "apiGroup": GROUP, "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8", "cpu": "16"}}},
            "podTemplateOverrides": [
                {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "train"}}}
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

fn wl(obj: &Value, rt: &Value) -> Workload {
    workload(obj, rt, false, |_| None, |_| None).unwrap()
}

fn pod_sets(obj: &Value, rt: &Value) -> Vec<(String, i32)> {
    wl(obj, rt)
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect()
}

#[test]
fn its_pod_sets_are_its_runtimes_jobs_with_the_trainer_taking_numnodes_and_resources_per_node() {
    let w = wl(&trainjob(), &runtime());
    assert_eq!(w.metadata.name.as_deref(), Some("trainjob-llama"));
    assert_eq!(w.spec.queue_name, "team-a");
    let owner = &w.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.api_version.as_str()),
        ("TrainJob", API_VERSION)
    );
    assert_eq!(owner.uid, "tj-uid");
    assert_eq!(
        pod_sets(&trainjob(), &runtime()),
        [
            ("dataset-initializer".into(), 1),
            ("model-initializer".into(), 1),
            ("node".into(), 4)
        ]
    );
    let node = &w.spec.pod_sets[2].template.spec.as_ref().unwrap();
    let limits = node.containers[0].resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["nvidia.com/gpu"].0, "8");
    assert_eq!(limits["cpu"].0, "16");
    // The user's override of the trainer's pods is part of what it asks for.
    assert_eq!(node.node_selector.as_ref().unwrap()["pool"], "train");
    let init = &w.spec.pod_sets[0].template.spec.as_ref().unwrap();
    assert!(init.node_selector.is_none());
    use sluice_api::Validate;
    w.check().unwrap();
}

#[test]
fn without_numnodes_the_runtimes_mlpolicy_decides_and_without_that_the_template() {
    let mut tj = trainjob();
    tj["spec"]["trainer"] = json!({});
    assert_eq!(pod_sets(&tj, &runtime())[2], ("node".into(), 2));
    let mut rt = runtime();
    rt["spec"]["mlPolicy"] = json!({});
    rt["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["parallelism"] = json!(3);
    assert_eq!(pod_sets(&tj, &rt)[2], ("node".into(), 3));
    // Without its resourcesPerNode the runtime's container resources stand.
    let w = wl(&tj, &runtime());
    let c = &w.spec.pod_sets[2].template.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["nvidia.com/gpu"].0,
        "1"
    );
}

#[test]
fn an_unlabelled_runtime_has_its_trainer_in_the_job_named_node() {
    let mut rt = runtime();
    for rj in rt["spec"]["template"]["spec"]["replicatedJobs"].as_array_mut().unwrap() {
        rj["template"]["metadata"] = json!({});
    }
    assert_eq!(pod_sets(&trainjob(), &rt)[2], ("node".into(), 4));
    assert_eq!(pod_sets(&trainjob(), &rt)[0], ("dataset-initializer".into(), 1));
}

#[test]
fn its_runtime_is_the_cluster_runtime_by_default_and_a_namespaced_one_in_its_namespace() {
    let k = TrainJobKind;
    let r = k.referent(&trainjob()).unwrap().unwrap();
    assert_eq!(
        (r.resource, r.namespace.clone(), r.key()),
        (CLUSTER_TRAINING_RUNTIME, None, "torch-distributed".into())
    );
    let mut tj = trainjob();
    tj["spec"]["runtimeRef"] = json!({"name": "mine", "kind": "TrainingRuntime"});
    let r = k.referent(&tj).unwrap().unwrap();
    assert_eq!(r.resource, TRAINING_RUNTIME);
    assert_eq!(r.key(), "research/mine");
    assert_eq!(r.describe(), "TrainingRuntime \"research/mine\"");
    tj["spec"]["runtimeRef"] = json!({"name": "x", "kind": "Runtime"});
    assert!(k.referent(&tj).is_err());
    tj["spec"]["runtimeRef"] = json!({"name": "x", "apiGroup": "example.com"});
    assert!(k.referent(&tj).is_err());
}

#[test]
fn without_its_runtime_there_is_no_workload_and_the_error_names_the_runtime() {
    let err = crate::Full::Dynamic(JobKind::TrainJob, &trainjob())
        .workload(false, |_| None, |_| None)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("ClusterTrainingRuntime \"torch-distributed\" not found"),
        "{err}"
    );
    let rt = runtime();
    let w = crate::Full::Resolved(JobKind::TrainJob, &trainjob(), &rt)
        .workload(false, |_| None, |_| None)
        .unwrap();
    assert_eq!(w.spec.pod_sets.len(), 3);
    let mut bad = runtime();
    bad["spec"]["template"]["spec"]["replicatedJobs"] = json!([]);
    assert!(workload(&trainjob(), &bad, false, |_| None, |_| None).is_err());
}

#[test]
fn a_started_trainjob_gets_one_override_per_pod_set_and_a_restored_one_loses_only_those() {
    let tj = trainjob();
    let v = view(&tj, false).unwrap();
    assert!(v.suspended);
    assert_eq!(v.templates.len(), 1);
    let a100 = flavor("a100");
    let cpu = flavor("cpu");
    let flavors = BTreeMap::from([
        ("node".to_string(), vec![&a100]),
        ("dataset-initializer".to_string(), vec![&cpu]),
    ]);
    let patches = start_patches(&v, &flavors, &BTreeMap::new()).unwrap();
    let started = apply(&tj, &patches);
    assert_eq!(started["spec"]["suspend"], json!(false));
    let overrides = started["spec"]["podTemplateOverrides"].as_array().unwrap();
    assert_eq!(overrides.len(), 3);
    // The user's entry is untouched and first.
    assert_eq!(overrides[0], tj["spec"]["podTemplateOverrides"][0]);
    assert_eq!(overrides[1]["targetJobs"], json!([{"name": "dataset-initializer"}]));
    assert_eq!(overrides[2]["targetJobs"], json!([{"name": "node"}]));
    assert_eq!(overrides[2]["metadata"]["annotations"][OVERRIDE_MARK], json!("node"));
    assert_eq!(overrides[2]["spec"]["nodeSelector"], json!({"gpu": "a100"}));
    assert_eq!(overrides[2]["spec"]["tolerations"][0]["key"], json!("nvidia.com/gpu"));
    // Sluice's entries are not part of what it asks for.
    let mut rt_view = started.clone();
    rt_view["spec"]["suspend"] = json!(true);
    let w = wl(&rt_view, &runtime());
    assert_eq!(
        w.spec.pod_sets[2].template.spec.as_ref().unwrap().node_selector,
        Some(BTreeMap::from([("pool".to_string(), "train".to_string())]))
    );

    // Started again (a restart before it was seen): Sluice's entries are
    // replaced, not added to.
    let v2 = view(&rt_view, false).unwrap();
    assert_eq!(v2.templates.iter().filter(|t| t.key == OWNED).count(), 2);
    let again = apply(&rt_view, &start_patches(&v2, &flavors, &BTreeMap::new()).unwrap());
    assert_eq!(again["spec"]["podTemplateOverrides"].as_array().unwrap().len(), 3);

    // Suspended, then restored: only the user's entry is left.
    let suspended = apply(&again, &[(false, suspend_patch(&view(&again, false).unwrap()))]);
    assert_eq!(suspended["spec"]["suspend"], json!(true));
    let restored = apply(&suspended, &restore_patches(&view(&suspended, false).unwrap()).unwrap());
    assert_eq!(
        restored["spec"]["podTemplateOverrides"],
        tj["spec"]["podTemplateOverrides"]
    );
    // Nothing to restore on a TrainJob Sluice never started.
    assert!(restore_patches(&view(&tj, false).unwrap()).unwrap().is_empty());
}

#[test]
fn a_trainjob_without_overrides_gets_the_list_and_a_restore_is_guarded_by_the_mark() {
    let mut tj = trainjob();
    tj["spec"].as_object_mut().unwrap().remove("podTemplateOverrides");
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("node".to_string(), vec![&a100])]);
    let started = apply(
        &tj,
        &start_patches(&view(&tj, false).unwrap(), &flavors, &BTreeMap::new()).unwrap(),
    );
    assert_eq!(started["spec"]["podTemplateOverrides"].as_array().unwrap().len(), 1);
    // The user replaced the entry meanwhile: the restore is refused rather
    // than removing theirs.
    let v = view(&started, false).unwrap();
    let mut edited = started.clone();
    edited["spec"]["podTemplateOverrides"][0]["metadata"] = json!({});
    let ObjPatch::Json(ops) = &restore_patches(&v).unwrap()[0].1 else {
        panic!()
    };
    let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
    assert!(json_patch::patch(&mut edited, &ops).is_err());
}

#[test]
fn it_finishes_on_complete_or_failed_and_its_pods_are_its_jobsets() {
    let mut tj = trainjob();
    assert_eq!(TrainJobKind.finished(&tj), None);
    tj["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    assert_eq!(view(&tj, false).unwrap().finished, Some(true));
    tj["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}]});
    assert_eq!(TrainJobKind.finished(&tj), Some(false));
    assert_eq!(
        JobKind::TrainJob.pods_selector("llama", "u"),
        "jobset.sigs.k8s.io/jobset-name=llama"
    );
    assert_eq!(JobKind::TrainJob.workload_name("llama"), "trainjob-llama");
}

#[test]
fn the_webhook_counts_its_nodes_and_its_jobset_is_left_to_it() {
    let k = TrainJobKind;
    assert_eq!(k.counts(&trainjob())[0].value, 4);
    let mut tj = trainjob();
    tj["spec"]["trainer"] = json!({});
    assert_eq!(k.counts(&tj)[0].value, 1);
    assert!(k.templates(&tj).is_empty());
    assert_eq!(JobKind::JobSet.made_by(), [JobKind::TrainJob]);
    assert!(JobKind::TrainJob.controls_others());
    let access = JobKind::TrainJob.controller_access();
    let resources: Vec<&str> = access.iter().map(|a| a.resource.as_str()).collect();
    assert_eq!(
        resources,
        [
            "trainjobs",
            "trainjobs/finalizers",
            "trainingruntimes",
            "clustertrainingruntimes"
        ]
    );
    assert_eq!(access[2].verbs, ["get", "list", "watch"]);
    assert_eq!(
        JobKind::from_flag("trainer.kubeflow.org/trainjob"),
        Some(JobKind::TrainJob)
    );
}

#[test]
fn a_malformed_trainjob_is_refused_with_its_field() {
    let mut tj = trainjob();
    tj["spec"]["trainer"]["numNodes"] = json!(0);
    assert!(
        view(&tj, false)
            .unwrap_err()
            .to_string()
            .contains("spec.trainer.numNodes")
    );
    let mut tj = trainjob();
    tj["spec"].as_object_mut().unwrap().remove("runtimeRef");
    assert!(
        TrainJobKind
            .referent(&tj)
            .unwrap_err()
            .to_string()
            .contains("spec.runtimeRef")
    );
}

#[test]
fn the_shipped_example_is_a_valid_workload() {
    use sluice_api::Validate;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/jobs/trainjob-llama-sft.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let (rt, tj) = text.split_once("\n---\n").unwrap();
    let rt: Value = serde_saphyr::from_str(rt).unwrap();
    let mut tj: Value = serde_saphyr::from_str(tj).unwrap();
    tj["metadata"]["uid"] = json!("u");
    let r = TrainJobKind.referent(&tj).unwrap().unwrap();
    assert_eq!(
        (r.resource.kind, r.key()),
        (
            "ClusterTrainingRuntime",
            rt["metadata"]["name"].as_str().unwrap().to_string()
        )
    );
    let w = wl(&tj, &rt);
    w.check().unwrap();
    assert_eq!(
        pod_sets(&tj, &rt),
        [("dataset-initializer".into(), 1), ("node".into(), 4)]
    );
}
