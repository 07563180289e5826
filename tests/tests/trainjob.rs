//! End-to-end tests of Kubeflow Trainer v2 TrainJobs
//! (`trainer.kubeflow.org/v1alpha1`) against a real API server: the test
//! installs minimal TrainJob, TrainingRuntime and ClusterTrainingRuntime
//! CRDs (`tests/crds/trainer.kubeflow.org_*.yaml`) before the controller
//! starts (it finds the kind by discovery) and plays the Trainer
//! controller where one is needed (its status); no JobSet or pods exist.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test trainjob -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sluice_e2e::cluster::{Cluster, install_crd_file, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);
const GPU: &str = "nvidia.com/gpu";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "trainer.kubeflow.org".into(),
        version: "v1alpha1".into(),
        api_version: "trainer.kubeflow.org/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Applies the three Trainer CRDs and waits until they are served.
async fn install_trainer_crds(c: &Cluster) -> Result<()> {
    for plural in ["trainingruntimes", "clustertrainingruntimes", "trainjobs"] {
        install_crd_file(
            &c.client,
            &format!("trainer.kubeflow.org_{plural}.yaml"),
            "trainer.kubeflow.org/v1alpha1",
            plural,
        )
        .await?;
    }
    Ok(())
}

fn trainjobs(c: &Cluster) -> Api<DynamicObject> {
    Api::namespaced_with(c.client.clone(), &c.namespace, &resource("TrainJob", "trainjobs"))
}

fn cluster_runtimes(c: &Cluster) -> Api<DynamicObject> {
    Api::all_with(
        c.client.clone(),
        &resource("ClusterTrainingRuntime", "clustertrainingruntimes"),
    )
}

/// A ClusterTrainingRuntime `name`: a dataset initializer (1 pod, no
/// GPU) and the trainer `node` (1 GPU per node, 1 node by default).
async fn cluster_runtime(c: &Cluster, name: &str) -> Result<()> {
    let job = |step: &str, gpus: &str| {
        json!({"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
               "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": if step == "trainer" { "node" } else { step }, "image": "busybox",
                    "resources": {"limits": {GPU: gpus}}}]}}}})
    };
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
                 "template": {"spec": {"replicatedJobs": [
                     {"name": "dataset-initializer", "replicas": 1, "template": job("dataset-initializer", "0")},
                     {"name": "node", "replicas": 1, "template": job("trainer", "1")}]}}}
    }))?;
    cluster_runtimes(c).create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// A suspended TrainJob `name` queued in `team` on ClusterTrainingRuntime
/// `runtime`: 2 nodes of 4 GPUs each, and an override of the user's own.
async fn trainjob(c: &Cluster, name: &str, runtime: &str) -> Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"}},
        "spec": {"suspend": true,
                 "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "4"}}},
                 "podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"team": "ml"}}}]}
    }))?;
    trainjobs(c).create(&PostParams::default(), &obj).await?;
    Ok(())
}

async fn get(c: &Cluster, name: &str) -> Result<Value> {
    Ok(serde_json::to_value(trainjobs(c).get(name).await?)?)
}

async fn wait_suspended(c: &Cluster, name: &str, suspended: bool) -> Result<Value> {
    wait_for(&format!("TrainJob {name} suspend={suspended}"), T, || async {
        let tj = get(c, name).await?;
        Ok((tj["spec"]["suspend"].as_bool().unwrap_or(false) == suspended).then_some(tj))
    })
    .await
}

fn overrides(tj: &Value) -> Vec<Value> {
    tj["spec"]["podTemplateOverrides"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_trainjob_waits_for_its_runtime_then_is_admitted_on_it_preempted_restored_and_finished() -> Result<()> {
    let mut c = Cluster::start().await?;
    install_trainer_crds(&c).await?;
    let f = c.flavor("a100").await?;
    let cq = c
        .gpu_queue("cq", &f, 16, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    let runtime = c.name("torch");
    let result = async {
        // Its runtime does not exist yet: reported, no Workload.
        trainjob(&c, "llama", &runtime).await?;
        wait_for("a RuntimeMissing Event on the TrainJob", T, || async {
            Ok((c.events_about("TrainJob", "llama", "RuntimeMissing").await? > 0).then_some(()))
        })
        .await?;
        ensure!(
            c.workloads().get_opt("trainjob-llama").await?.is_none(),
            "a Workload was made without the runtime"
        );

        // The runtime appears: the TrainJob is queued and admitted.
        cluster_runtime(&c, &runtime).await?;
        let wl = c
            .wait_workload_condition("trainjob-llama", "Admitted", "True", T)
            .await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(
            sets,
            vec![("dataset-initializer".to_string(), 1), ("node".to_string(), 2)]
        );
        let owner = wl
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("no owner")?;
        ensure_eq!((owner.kind.as_str(), owner.controller), ("TrainJob", Some(true)));
        let adm = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .context("no admission")?;
        let node = adm
            .pod_set_assignments
            .iter()
            .find(|a| a.name == "node")
            .context("no node assignment")?;
        ensure_eq!(node.resource_usage[GPU].0, "8");

        // Unsuspended, with Sluice's override for the trainer's pods after
        // the user's.
        let tj = wait_suspended(&c, "llama", false).await?;
        let o = overrides(&tj);
        ensure_eq!(
            o[0],
            json!({"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"team": "ml"}}})
        );
        let mine = o
            .iter()
            .find(|e| e["targetJobs"] == json!([{"name": "node"}]) && !e["metadata"]["annotations"].is_null())
            .context("no Sluice override for node")?;
        ensure_eq!(mine["spec"]["nodeSelector"], json!({"sluice.dev/e2e-gpu": f}));
        ensure_eq!(
            mine["metadata"]["annotations"]["sluice.dev/admission-override"],
            json!("node")
        );

        // A higher-priority Job of 10 GPUs: 8 + 10 > 16, the TrainJob is
        // preempted, suspended, and left with the user's override only.
        c.urgent_job(5, 2).await?;
        ensure_eq!(c.wait_reason("trainjob-llama", "Evicted", T).await?, "Preempted");
        wait_suspended(&c, "llama", true).await?;
        wait_for("TrainJob overrides restored", T, || async {
            let tj = get(&c, "llama").await?;
            Ok((overrides(&tj).len() == 1).then_some(()))
        })
        .await?;
        ensure_eq!(
            overrides(&get(&c, "llama").await?),
            vec![json!({"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"team": "ml"}}})]
        );
        c.wait_condition("urgent", "Admitted", "True", T).await?;

        // The urgent Job finishes: the TrainJob is admitted again; then it
        // completes (the test plays Trainer).
        c.wait_suspended("urgent", false, T).await?;
        c.mark_pods("urgent", 5, "Succeeded").await?;
        c.wait_condition("urgent", "Finished", "True", T).await?;
        c.wait_workload_condition("trainjob-llama", "Admitted", "True", T)
            .await?;
        wait_suspended(&c, "llama", false).await?;
        trainjobs(&c)
            .patch_status(
                "llama",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [{"type": "Complete", "status": "True",
                    "reason": "JobsCompleted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
            )
            .await?;
        ensure_eq!(c.wait_reason("trainjob-llama", "Finished", T).await?, "Succeeded");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let _ = cluster_runtimes(&c).delete(&runtime, &DeleteParams::default()).await;
    c.cleanup().await?;
    result
}

fn jobsets(c: &Cluster) -> Api<DynamicObject> {
    Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &ApiResource {
            group: "jobset.x-k8s.io".into(),
            version: "v1alpha2".into(),
            api_version: "jobset.x-k8s.io/v1alpha2".into(),
            kind: "JobSet".into(),
            plural: "jobsets".into(),
        },
    )
}

/// A running JobSet `name` with the queue label (1 pod, 1 GPU) controlled
/// by TrainJob `llama` with `uid`, as Trainer makes it.
async fn jobset_of(c: &Cluster, name: &str, uid: &str) -> Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"},
                     "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                          "name": "llama", "uid": uid, "controller": true}]},
        "spec": {"suspend": false, "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
            "parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "node", "image": "busybox", "resources": {"limits": {GPU: "1"}}}]}}}}}]}
    }))?;
    jobsets(c).create(&PostParams::default(), &obj).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_trainjobs_jobset_is_left_to_it_and_one_naming_a_trainjob_that_does_not_exist_is_queued() -> Result<()> {
    let mut c = Cluster::start().await?;
    install_trainer_crds(&c).await?;
    install_crd_file(
        &c.client,
        "jobset.x-k8s.io_jobsets.yaml",
        "jobset.x-k8s.io/v1alpha2",
        "jobsets",
    )
    .await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 16, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    let runtime = c.name("torch");
    cluster_runtime(&c, &runtime).await?;
    c.start_controller(&[]).await?;
    let result = async {
        trainjob(&c, "llama", &runtime).await?;
        c.wait_workload_condition("trainjob-llama", "Admitted", "True", T)
            .await?;
        let uid = get(&c, "llama").await?["metadata"]["uid"]
            .as_str()
            .context("no uid")?
            .to_string();
        // Trainer's JobSet for it: left running, no Workload of its own.
        jobset_of(&c, "llama", &uid).await?;
        // One naming a TrainJob uid that does not exist: queued on its
        // own (held, and given a Workload).
        jobset_of(&c, "forged", "no-such-uid").await?;
        c.wait_workload_condition("jobset-forged", "Admitted", "True", T)
            .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(
            c.workloads().get_opt("jobset-llama").await?.is_none(),
            "the TrainJob's JobSet got a Workload of its own"
        );
        let js = serde_json::to_value(jobsets(&c).get("llama").await?)?;
        ensure_eq!(js["spec"]["suspend"], json!(false));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let _ = cluster_runtimes(&c).delete(&runtime, &DeleteParams::default()).await;
    c.cleanup().await?;
    result
}
