//! End-to-end tests of JobSets (`jobset.x-k8s.io/v1alpha2`) against a real
//! API server: the test installs a minimal JobSet CRD
//! (`tests/crds/jobset.x-k8s.io_jobsets.yaml`) before the controller
//! starts (it finds the kind by discovery) and plays the JobSet controller
//! where one is needed (its status); no JobSet pods exist.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test jobset -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sluice_e2e::cluster::{Cluster, install_crd_file, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);
const GPU: &str = "nvidia.com/gpu";

fn jobset_resource() -> ApiResource {
    ApiResource {
        group: "jobset.x-k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        plural: "jobsets".into(),
    }
}

/// Applies the JobSet CRD and waits until it is served.
async fn install_jobset_crd(c: &Cluster) -> Result<()> {
    install_crd_file(
        &c.client,
        "jobset.x-k8s.io_jobsets.yaml",
        "jobset.x-k8s.io/v1alpha2",
        "jobsets",
    )
    .await
}

fn jobsets(c: &Cluster) -> Api<DynamicObject> {
    Api::namespaced_with(c.client.clone(), &c.namespace, &jobset_resource())
}

/// A suspended JobSet queued in `team`: a driver (1 Job × 1 pod, 1 GPU)
/// and workers (2 Jobs × 2 pods, 2 GPUs each): 9 GPUs.
async fn jobset(c: &Cluster, name: &str, labels: Value) -> Result<()> {
    let mut l = json!({"sluice.dev/queue": "team"});
    l.as_object_mut()
        .unwrap()
        .extend(labels.as_object().cloned().unwrap_or_default());
    let pod = |gpus: u32, selector: Value| {
        json!({"spec": {"restartPolicy": "Never", "nodeSelector": selector,
            "containers": [{"name": "main", "image": "busybox",
                "resources": {"limits": {GPU: gpus.to_string()}}}]}})
    };
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": l},
        "spec": {"suspend": true, "replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1,
                "template": pod(1, json!({"team": "ml"}))}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "completions": 2,
                "template": pod(2, json!(null))}}}
        ]}
    }))?;
    jobsets(c).create(&PostParams::default(), &obj).await?;
    Ok(())
}

async fn get(c: &Cluster, name: &str) -> Result<Value> {
    Ok(serde_json::to_value(jobsets(c).get(name).await?)?)
}

fn pod_spec(js: &Value, i: usize) -> &Value {
    &js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]
}

async fn wait_suspended(c: &Cluster, name: &str, suspended: bool) -> Result<Value> {
    wait_for(&format!("JobSet {name} suspend={suspended}"), T, || async {
        let js = get(c, name).await?;
        Ok((js["spec"]["suspend"].as_bool().unwrap_or(false) == suspended).then_some(js))
    })
    .await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_jobset_is_admitted_whole_injected_per_pod_set_preempted_restored_and_finished() -> Result<()> {
    let mut c = Cluster::start().await?;
    install_jobset_crd(&c).await?;
    let f = c.flavor("a100").await?;
    let cq = c
        .gpu_queue("cq", &f, 16, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    let result = async {
        jobset(&c, "pretrain", json!({})).await?;
        let wl = c
            .wait_workload_condition("jobset-pretrain", "Admitted", "True", T)
            .await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("driver".to_string(), 1), ("workers".to_string(), 4)]);
        let owner = wl
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("no owner")?;
        ensure_eq!((owner.kind.as_str(), owner.controller), ("JobSet", Some(true)));
        let adm = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .context("no admission")?;
        let usage: Vec<String> = adm
            .pod_set_assignments
            .iter()
            .map(|a| a.resource_usage[GPU].0.clone())
            .collect();
        ensure_eq!(usage, vec!["1".to_string(), "8".to_string()]);
        // Unsuspended with the flavor's node selector in every pod template,
        // on top of what the user wrote.
        let js = wait_suspended(&c, "pretrain", false).await?;
        ensure_eq!(
            pod_spec(&js, 0)["nodeSelector"],
            json!({"team": "ml", "sluice.dev/e2e-gpu": f})
        );
        ensure_eq!(pod_spec(&js, 1)["nodeSelector"], json!({"sluice.dev/e2e-gpu": f}));

        // A higher-priority Job of 8 GPUs: 9 + 8 > 16, the JobSet is preempted.
        c.urgent_job(4, 2).await?;
        ensure_eq!(c.wait_reason("jobset-pretrain", "Evicted", T).await?, "Preempted");
        wait_suspended(&c, "pretrain", true).await?;
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        // No JobSet pods exist: the quota is released and what the user
        // wrote is back.
        let restored = wait_for("JobSet templates restored", T, || async {
            let js = get(&c, "pretrain").await?;
            let done = js["metadata"]["annotations"]
                .get("sluice.dev/original-scheduling")
                .is_none();
            Ok(done.then_some(js))
        })
        .await?;
        ensure_eq!(pod_spec(&restored, 0)["nodeSelector"], json!({"team": "ml"}));
        ensure!(
            pod_spec(&restored, 1).get("nodeSelector").is_none_or(Value::is_null),
            "{}",
            pod_spec(&restored, 1)
        );
        c.wait_workload_condition("jobset-pretrain", "Requeued", "True", T)
            .await?;

        // The urgent Job finishes: the JobSet is admitted again; then it
        // completes (the test plays the JobSet controller).
        c.wait_suspended("urgent", false, T).await?;
        c.mark_pods("urgent", 4, "Succeeded").await?;
        c.wait_condition("urgent", "Finished", "True", T).await?;
        c.wait_workload_condition("jobset-pretrain", "Admitted", "True", T)
            .await?;
        wait_suspended(&c, "pretrain", false).await?;
        jobsets(&c)
            .patch_status(
                "pretrain",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [{"type": "Completed", "status": "True",
                    "reason": "AllJobsCompleted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
            )
            .await?;
        ensure_eq!(c.wait_reason("jobset-pretrain", "Finished", T).await?, "Succeeded");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_jobset_larger_than_its_queue_is_never_partly_admitted() -> Result<()> {
    let mut c = Cluster::start().await?;
    install_jobset_crd(&c).await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 8, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    let result = async {
        // 9 GPUs in an 8-GPU queue.
        jobset(&c, "big", json!({})).await?;
        let wl = c
            .wait_workload_condition("jobset-big", "QuotaReserved", "False", T)
            .await?;
        let pending = wl
            .status
            .as_ref()
            .and_then(|s| s.pending.as_ref())
            .context("not explained")?;
        ensure_eq!(pending.reason, "ExceedsQuota");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let js = get(&c, "big").await?;
        ensure_eq!(js["spec"]["suspend"], json!(true));
        ensure!(
            js["metadata"]["annotations"]
                .get("sluice.dev/original-scheduling")
                .is_none(),
            "nothing injected"
        );
        // Created running (no webhook here): suspended by the controller.
        let mut eager: DynamicObject = jobsets(&c).get("big").await?;
        eager.metadata = kube::api::ObjectMeta {
            name: Some("eager".into()),
            labels: eager.metadata.labels.clone(),
            ..Default::default()
        };
        eager.data["spec"]["suspend"] = json!(false);
        jobsets(&c).create(&PostParams::default(), &eager).await?;
        wait_suspended(&c, "eager", true).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_running_jobset_scaled_past_its_queue_is_suspended_and_waits_with_its_new_shape() -> Result<()> {
    let mut c = Cluster::start().await?;
    install_jobset_crd(&c).await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 16, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    let result = async {
        // 9 GPUs admitted of 16.
        jobset(&c, "grow", json!({})).await?;
        c.wait_workload_condition("jobset-grow", "Admitted", "True", T).await?;
        let running = wait_suspended(&c, "grow", false).await?;
        let old_uid = c.workloads().get("jobset-grow").await?.metadata.uid;
        // The tenant (no webhook here) raises the workers to 5 Jobs: 21 GPUs.
        let mut rjs = running["spec"]["replicatedJobs"].clone();
        rjs[1]["replicas"] = json!(5);
        jobsets(&c)
            .patch(
                "grow",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicatedJobs": rjs}})),
            )
            .await?;
        wait_suspended(&c, "grow", true).await?;
        ensure!(c.events_about("JobSet", "grow", "WorkloadShapeChanged").await? >= 1);
        let wl = wait_for("a new Workload for 5 worker Jobs", T, || async {
            let wl = c.workloads().get_opt("jobset-grow").await?;
            Ok(wl.filter(|w| w.metadata.uid != old_uid))
        })
        .await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("driver".to_string(), 1), ("workers".to_string(), 10)]);
        let pending = c
            .wait_workload_condition("jobset-grow", "QuotaReserved", "False", T)
            .await?;
        let msg = pending
            .status
            .as_ref()
            .and_then(|s| s.condition("QuotaReserved"))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        eprintln!("the grown JobSet waits: {msg}");
        ensure!(msg.contains("21 nvidia.com/gpu") || msg.contains("needs 2"), "{msg}");
        ensure!(get(&c, "grow").await?["spec"]["suspend"] == json!(true));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
