//! End-to-end tests of `sluice bench` against a real API server and the
//! harness's controller.
//!
//! ```text
//! cargo build -p sluice-cli
//! SLUICE_E2E_KUBECONFIG=~/.kube/config cargo test -p sluice-e2e --test bench -- --ignored --test-threads=1
//! # or, with a control plane of its own (see sluice_e2e::envtest):
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test bench -- --ignored --test-threads=1
//! ```
//!
//! The binary runs as a user would run it (`sluice bench run … --json`);
//! the test reads its JSON report. Needs kube-apiserver only (bench
//! Workloads have no Jobs and no pods).

use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use serde_json::Value;
use sluice_api::v1alpha1::{ClusterQueue, ResourceFlavor};
use sluice_e2e::cluster::{Cluster, kubeconfig_path, sluice_bin};
use sluice_e2e::ensure_eq;

/// Runs `sluice bench ARGS` with the test kubeconfig; stderr goes to the
/// test's output.
async fn bench(args: Vec<String>) -> Result<Output> {
    let bin = sluice_bin();
    ensure!(
        bin.exists(),
        "{} not found: run `cargo build -p sluice-cli` or set SLUICE_BIN",
        bin.display()
    );
    tokio::task::spawn_blocking(move || {
        Command::new(&bin)
            .arg("bench")
            .args(&args)
            .env("KUBECONFIG", kubeconfig_path())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {} bench", bin.display()))
    })
    .await?
}

/// Whatever the test's outcome: `sluice bench cleanup --run-id` (a run
/// that failed or was killed midway may have left objects; after a clean
/// run this deletes nothing).
async fn cleanup_run(run_id: &str) {
    let args = ["cleanup", "--run-id", run_id].map(String::from).to_vec();
    match bench(args).await {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "e2e: `sluice bench cleanup --run-id {run_id}` exited {:?}",
            out.status.code()
        ),
        Err(e) => eprintln!("e2e: `sluice bench cleanup --run-id {run_id}`: {e:#}"),
    }
}

/// Nothing labelled with the run is left but namespaces already terminating.
async fn nothing_left(c: &Cluster, run_id: &str) -> Result<()> {
    let lp = ListParams::default().labels(&format!("sluice.dev/bench-run={run_id}"));
    let queues = Api::<ClusterQueue>::all(c.client.clone()).list(&lp).await?;
    ensure_eq!(queues.items.len(), 0, "ClusterQueues of run {run_id} left");
    let flavors = Api::<ResourceFlavor>::all(c.client.clone()).list(&lp).await?;
    ensure_eq!(flavors.items.len(), 0, "ResourceFlavors of run {run_id} left");
    let namespaces = Api::<Namespace>::all(c.client.clone()).list(&lp).await?;
    for ns in &namespaces.items {
        ensure!(
            ns.metadata.deletion_timestamp.is_some(),
            "namespace {:?} of run {run_id} is not being deleted",
            ns.metadata.name
        );
    }
    Ok(())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn kueue_baseline_at_2_percent_is_admitted_and_finished_within_quota() -> Result<()> {
    let mut c = Cluster::start().await?;
    let run_id = format!("e2e-{}", c.suffix);
    let result = async {
        // As Kueue's harness runs its controller.
        let i = c.start_controller(&["--kube-qps", "50", "--kube-burst", "100"]).await?;
        let (pid, port) = (c.controllers[i].child.id(), c.controllers[i].metrics_port);
        let out = bench(
            [
                "run",
                "--scenario",
                "kueue-baseline",
                "--scale",
                "0.02",
                "--timeout",
                "10m",
                "--with-floor",
                "--floor-count",
                "100",
                "--json",
                "--quiet",
                "--run-id",
                &run_id,
                "--controller-metrics",
                &format!("http://127.0.0.1:{port}/metrics"),
                "--controller-pid",
                &pid.to_string(),
            ]
            .map(String::from)
            .to_vec(),
        )
        .await?;
        let report: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("the report is not JSON: {}", String::from_utf8_lossy(&out.stdout)))?;
        ensure_eq!(out.status.code(), Some(0), "exit status; report: {report:#}");

        // 5 cohorts × 6 queues × (7 small + 2 medium + 1 large) = 300.
        let w = &report["workloads"];
        ensure_eq!(w["planned"], 300);
        ensure_eq!(w["created"], 300);
        ensure_eq!(w["admitted"], 300, "every workload admitted: {report:#}");
        ensure_eq!(w["finished"], 300, "every workload finished: {report:#}");
        ensure_eq!(report["complete"], true);
        ensure_eq!(report["timedOut"], false);
        ensure_eq!(
            report["quotaViolations"].as_array().map(Vec::len),
            Some(0),
            "no cluster queue or cohort over quota at any observed moment: {report:#}"
        );
        let classes: Vec<&str> = report["classes"]
            .as_array()
            .context("classes")?
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        ensure_eq!(classes, vec!["large", "medium", "small"]);
        ensure_eq!(report["clusterQueues"].as_array().map(Vec::len), Some(30));
        ensure!(
            report["apiWrites"]["total"].as_f64().unwrap_or(0.0) > 0.0,
            "controller writes counted"
        );
        ensure!(
            report["controllerPeakRss"]["bytes"].as_u64().unwrap_or(0) > 0,
            "peak RSS read"
        );
        ensure!(
            report["floor"]["patchesPerSecond"].as_f64().unwrap_or(0.0) > 0.0,
            "floor measured"
        );
        ensure!(report["vsFloor"]["mean"].as_f64().is_some());
        ensure_eq!(report["createWriteErrors"], 0, "{report:#}");
        nothing_left(&c, &run_id).await
    }
    .await;
    cleanup_run(&run_id).await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn the_floor_patches_every_workload_once() -> Result<()> {
    let mut c = Cluster::start().await?;
    let run_id = format!("e2f-{}", c.suffix);
    let result = async {
        let out = bench(
            [
                "floor",
                "--count",
                "200",
                "--concurrency",
                "2",
                "--json",
                "--quiet",
                "--run-id",
                &run_id,
            ]
            .map(String::from)
            .to_vec(),
        )
        .await?;
        ensure_eq!(out.status.code(), Some(0));
        let report: Value = serde_json::from_slice(&out.stdout).context("the report is JSON")?;
        ensure_eq!(report["patches"], 200);
        ensure_eq!(report["failed"], 0);
        // 200 patches with a burst of 100 then 50/s: about 2 s at least.
        ensure!(report["elapsedMs"].as_f64().unwrap_or(0.0) >= 1_900.0, "{report:#}");
        ensure!(
            report["patchesPerSecond"].as_f64().unwrap_or(0.0) <= 110.0,
            "{report:#}"
        );
        nothing_left(&c, &run_id).await
    }
    .await;
    cleanup_run(&run_id).await;
    c.cleanup().await?;
    result
}
