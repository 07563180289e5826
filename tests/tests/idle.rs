//! End-to-end tests of idle-GPU reclaim with a **real Prometheus**: the
//! `prometheus` binary (Debian's package, or `PROMETHEUS_BIN`) scrapes an
//! exporter the test serves in dcgm-exporter's format, labelled with the
//! namespace and pod names of the test's pods.
//!
//! ```text
//! apt-get install prometheus          # or PROMETHEUS_BIN=/path/to/prometheus
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test idle -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use sluice_api::v1alpha1::ClusterQueue;
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;
use sluice_e2e::prometheus::{GpuExporter, PrometheusServer};

const T: Duration = Duration::from_secs(60);

/// A queue of 2 GPUs with `idle` as its idleReclaim; LocalQueue `team`.
async fn queue(c: &mut Cluster, idle: serde_json::Value) -> Result<String> {
    let f = c.flavor("a100").await?;
    let cq = c
        .cluster_queue(
            "idle",
            json!({
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]}],
                "idleReclaim": idle
            }),
        )
        .await?;
    c.local_queue("team", &cq).await?;
    Ok(cq)
}

/// The controller, checking every 2 s against `prometheus`.
async fn controller(c: &mut Cluster, prometheus: &str) -> Result<()> {
    c.start_controller(&["--prometheus-url", prometheus, "--idle-interval", "2s"])
        .await?;
    Ok(())
}

/// Admits Job `name` (1 pod, 2 GPUs), runs its pod, and reports `percent`
/// for it; waits until Prometheus has its series. Returns the pod's name.
async fn running(
    c: &Cluster,
    exporter: &GpuExporter,
    prom: &PrometheusServer,
    name: &str,
    percent: f64,
) -> Result<String> {
    c.job(name, "team", 1, 2, &[], true).await?;
    c.wait_suspended(name, false, T).await?;
    c.mark_pods(name, 1, "Running").await?;
    let pod = c
        .job_pods(name)
        .await?
        .first()
        .and_then(|p| p.metadata.name.clone())
        .context("no pod")?;
    exporter.set(&c.namespace, &pod, percent);
    wait_for("Prometheus has the pod's series", T, || async {
        Ok(prom.has_series(&c.namespace, &pod)?.then_some(()))
    })
    .await?;
    Ok(pod)
}

/// The ClusterQueue's IdleCheckUnavailable condition: (status, reason, message).
async fn idle_check(c: &Cluster, cq: &str) -> Result<Option<(String, String, String)>> {
    let q = Api::<ClusterQueue>::all(c.client.clone()).get(cq).await?;
    Ok(q.status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "IdleCheckUnavailable"))
        .map(|c| (c.status, c.reason, c.message)))
}

#[tokio::test]
#[ignore = "needs a real API server (SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS) and the prometheus binary"]
async fn an_idle_workload_is_warned_then_evicted_only_while_another_waits() -> Result<()> {
    let mut c = Cluster::start().await?;
    let exporter = GpuExporter::start()?;
    let mut prom = PrometheusServer::start(exporter.port).await?;
    let result = async {
        let cq = queue(
            &mut c,
            json!({"utilizationBelow": 10, "for": "10s", "gracePeriod": "0s", "action": "Warn"}),
        )
        .await?;
        controller(&mut c, &prom.url).await?;
        let pod = running(&c, &exporter, &prom, "notebook", 85.0).await?;
        // Busy: the checks run and succeed, nothing is said.
        wait_for("IdleCheckUnavailable=False", T, || async {
            Ok(idle_check(&c, &cq).await?.filter(|s| s.0 == "False").map(|_| ()))
        })
        .await?;
        exporter.set(&c.namespace, &pod, 2.0);
        // Idle for a whole window, but nobody waits: no warning.
        tokio::time::sleep(Duration::from_secs(20)).await;
        ensure!(
            !c.has_condition("notebook", "GPUIdle").await?,
            "warned without contention"
        );
        // Someone waits for its GPUs: warned, with the numbers, and an event on the Job.
        c.job("batch", "team", 1, 2, &[], true).await?;
        let wl = c.wait_condition("notebook", "GPUIdle", "True", T).await?;
        let idle = wl
            .status
            .as_ref()
            .and_then(|s| s.condition("GPUIdle"))
            .context("GPUIdle")?;
        ensure_eq!(idle.reason, "IdleGPU");
        ensure!(
            idle.message.contains("utilisation 2.0 % on average")
                && idle.message.contains("below 10 %")
                && idle.message.contains("job-batch waits for its quota"),
            "{}",
            idle.message
        );
        // Events have a lane of their own: the condition may come first.
        wait_for("an IdleGPU Event on the Job", Duration::from_secs(10), || async {
            Ok((c.events_about("Job", "notebook", "IdleGPU").await? >= 1).then_some(()))
        })
        .await
        .context("no event on the Job")?;
        ensure!(!c.job_suspended("notebook").await?, "warned, still running");
        // The admin turns Evict on: evicted with reason IdleGPU, the waiter admitted.
        Api::<ClusterQueue>::all(c.client.clone())
            .patch(
                &cq,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"idleReclaim": {"action": "Evict"}}})),
            )
            .await?;
        let reason = c.wait_reason("job-notebook", "Evicted", T).await?;
        ensure_eq!(reason, "IdleGPU");
        wait_for("the waiting Job admitted", T, || async {
            c.reap_terminating_pods("notebook").await?;
            Ok((!c.job_suspended("batch").await?).then_some(()))
        })
        .await?;
        let wl = c.workload_of("notebook").await?;
        let rq = wl
            .status
            .as_ref()
            .and_then(|s| s.requeue_state.as_ref())
            .context("requeueState")?;
        ensure_eq!(rq.count, 1, "requeued with backoff like any eviction");
        let metrics = c.controllers[0].get("/metrics")?.1;
        ensure!(
            metrics.contains(&format!(
                "sluice_idle_reclaims_total{{cluster_queue=\"{cq}\",action=\"Evict\"}} 1"
            )),
            "{metrics}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    prom.stop();
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server (SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS) and the prometheus binary"]
async fn with_prometheus_down_nothing_is_evicted_and_the_queue_says_why() -> Result<()> {
    let mut c = Cluster::start().await?;
    let exporter = GpuExporter::start()?;
    let mut prom = PrometheusServer::start(exporter.port).await?;
    let result = async {
        let cq = queue(
            &mut c,
            json!({"for": "10s", "gracePeriod": "0s", "action": "Evict", "onlyWhenContended": false}),
        )
        .await?;
        controller(&mut c, &prom.url).await?;
        running(&c, &exporter, &prom, "notebook", 1.0).await?;
        // Down before a whole window of idle data could be judged.
        prom.stop();
        let (_, reason, message) = wait_for("IdleCheckUnavailable=True", T, || async {
            Ok(idle_check(&c, &cq).await?.filter(|s| s.0 == "True"))
        })
        .await?;
        ensure_eq!(reason, "PrometheusUnavailable");
        ensure!(message.contains("cannot reach Prometheus"), "{message}");
        // Idle by every number it last had, and no one could tell: not evicted.
        tokio::time::sleep(Duration::from_secs(20)).await;
        ensure!(!c.has_condition("notebook", "Evicted").await?, "evicted while blind");
        ensure!(!c.job_suspended("notebook").await?);
        let metrics = c.controllers[0].get("/metrics")?.1;
        ensure!(
            metrics.contains("sluice_idle_check_failures_total{reason=\"unreachable\"}"),
            "{metrics}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    prom.stop();
    c.cleanup().await?;
    result
}
