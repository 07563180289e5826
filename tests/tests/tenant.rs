//! End-to-end: what a tenant who pushes can do to an admitted Job without
//! the webhook (the controller never relies on it).
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test tenant -- --ignored --test-threads=1
//! ```

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

/// One flavor, a ClusterQueue of `gpus`, LocalQueue `team`, controller running.
async fn queue_of(gpus: u32) -> Result<Cluster> {
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, gpus, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    Ok(c)
}

/// Pods of the Job that hold a GPU now: not being deleted, not finished.
async fn live_pods(c: &Cluster, job: &str) -> Result<usize> {
    Ok(c.job_pods(job)
        .await?
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .count())
}

/// A suspended Job in LocalQueue `team`: `parallelism` pods of 1 GPU at
/// once, 16 completions (the issue's shape).
async fn long_job(c: &Cluster, name: &str, parallelism: i32) -> Result<()> {
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"}},
        "spec": {"parallelism": parallelism, "completions": 16, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    }))?;
    c.jobs().create(&Default::default(), &job).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_job_scaled_past_its_queue_waits_suspended_with_that_reason() -> Result<()> {
    let mut c = queue_of(4).await?;
    let result = async {
        long_job(&c, "wide", 2).await?;
        c.wait_condition("wide", "Admitted", "True", T).await?;
        c.wait_suspended("wide", false, T).await?;
        c.mark_pods("wide", 2, "Running").await?;
        let old_uid = c.workloads().get("job-wide").await?.metadata.uid;
        // The tenant scales the running Job to 8 on a 4-GPU queue.
        c.jobs()
            .patch(
                "wide",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"parallelism": 8}})),
            )
            .await?;
        // Sampled every 0.3 s for 30 s: pods that exist and are not being
        // deleted (the job controller makes the 6 new ones before anyone
        // can react; none of them runs, and they go with the suspension).
        let (mut above, mut most, start) = (0usize, 0usize, Instant::now());
        while start.elapsed() < Duration::from_secs(30) {
            c.reap_terminating_pods("wide").await?;
            let n = live_pods(&c, "wide").await?;
            most = most.max(n);
            above += usize::from(n > 4);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        eprintln!("scaled to 8 on a 4-GPU queue: at most {most} pods at once, {above} samples of 100 above 4");
        ensure!(above <= 1, "more pods than the quota for {above} samples of 0.3 s");
        ensure!(c.job_suspended("wide").await?, "the scaled Job is suspended");
        ensure!(c.events_about("Job", "wide", "WorkloadShapeChanged").await? >= 1);
        // Evicted with the reason, then made again for 8 pods, which never
        // fit the 4 GPUs: it waits suspended.
        let wl = wait_for("a new Workload for 8 pods", T, || async {
            c.reap_terminating_pods("wide").await?;
            let wl = c.workloads().get_opt("job-wide").await?;
            Ok(wl.filter(|w| w.metadata.uid != old_uid && w.spec.pod_sets[0].count == 8))
        })
        .await?;
        let _ = wl;
        let reserved = c.wait_condition("wide", "QuotaReserved", "False", T).await?;
        let msg = reserved
            .status
            .as_ref()
            .and_then(|s| s.condition("QuotaReserved"))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        eprintln!("the 8-pod Workload waits: {msg}");
        ensure!(msg.contains("8 nvidia.com/gpu") || msg.contains("needs 8"), "{msg}");
        ensure!(c.job_suspended("wide").await?);
        ensure_eq!(live_pods(&c, "wide").await?, 0);
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_scaled_down_job_frees_its_quota_once_its_pods_are_gone() -> Result<()> {
    let mut c = queue_of(4).await?;
    let result = async {
        c.job("big", "team", 4, 1, &[], true).await?;
        c.wait_condition("big", "Admitted", "True", T).await?;
        c.wait_suspended("big", false, T).await?;
        c.mark_pods("big", 4, "Running").await?;
        c.job("next", "team", 2, 1, &[], true).await?;
        c.wait_condition("next", "QuotaReserved", "False", T).await?;
        c.jobs()
            .patch(
                "big",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"parallelism": 2}})),
            )
            .await?;
        // The job controller deletes 2 pods; once they are gone, the
        // admission holds 2 GPUs and the waiting Job gets the other 2.
        wait_for("next admitted", T, || async {
            c.reap_terminating_pods("big").await?;
            Ok(c.has_condition("next", "Admitted").await?.then_some(()))
        })
        .await?;
        let wl = c.workload_of("big").await?;
        let adm = wl.status.and_then(|s| s.admission).context("big keeps its admission")?;
        ensure_eq!(adm.pod_set_assignments[0].count, 2);
        ensure!(!c.job_suspended("big").await?, "big keeps running");
        ensure!(c.events_about("Job", "big", "AdmissionReduced").await? >= 1);
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn in_a_namespace_that_queues_every_job_an_unlabelled_job_is_held() -> Result<()> {
    let mut c = queue_of(0).await?;
    let result = async {
        c.local_queue("default", &c.name("cq")).await?;
        Api::<Namespace>::all(c.client.clone())
            .patch(
                &c.namespace,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"sluice.dev/default-queue": "enabled"}}})),
            )
            .await?;
        // The two-step escape, as the webhook would have let it through:
        // a Job without a queue label, running.
        let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "escape"},
            "spec": {"parallelism": 1, "completions": 1, "suspend": false, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
        }))?;
        c.jobs().create(&Default::default(), &job).await?;
        c.wait_suspended("escape", true, T).await?;
        let wl = c.workload_of("escape").await?;
        ensure_eq!(wl.spec.queue_name, "default");
        wait_for("no pod left", T, || async {
            c.reap_terminating_pods("escape").await?;
            Ok((live_pods(&c, "escape").await? == 0).then_some(()))
        })
        .await?;
        wait_for("the QueuedByNamespace event", T, || async {
            Ok((c.events_about("Job", "escape", "QueuedByNamespace").await? >= 1).then_some(()))
        })
        .await?;
        c.wait_condition("escape", "QuotaReserved", "False", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
