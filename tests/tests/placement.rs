//! End-to-end test of node-aware admission (`--placement=nodes`) against a
//! real API server with kube-scheduler: two hand-made GPU Nodes of 4
//! `nvidia.com/gpu` each (no kubelet; the test writes their status). A
//! single-pod 8-GPU Job fits its ClusterQueue's quota but no node, so it
//! stays pending with reason `NoPlacement` and the numbers; a 2 × 4-GPU
//! Job is admitted and kube-scheduler binds its pods, one per node.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test placement -- --ignored --test-threads=1
//! ```
//!
//! The folder must hold `kube-scheduler` (and `kube-controller-manager`).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use sluice_e2e::cluster::{Cluster, wait_for};

const T: Duration = Duration::from_secs(30);

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_gang_that_fits_quota_but_no_node_waits_while_one_that_fits_the_nodes_is_bound() -> Result<()> {
    let mut c = Cluster::start().await?;
    let flavor = c.flavor("a100").await?;
    let allocatable = json!({"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi", "pods": "110"});
    let mut nodes = Vec::new();
    for base in ["gpu-a", "gpu-b"] {
        let labels = json!({"sluice.dev/e2e-gpu": flavor});
        nodes.push(c.node(base, labels, allocatable.clone()).await?);
    }
    let cq = c.gpu_queue("cq", &flavor, 16, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&["--placement=nodes", "--explain-after=0s"]).await?;

    // 8 GPUs in one pod: quota has 16 free, but each node only 4.
    c.job("big", "team", 1, 8, &[], true).await?;
    let wl = wait_for("job-big pending with NoPlacement", T, || {
        let api = c.workloads();
        async move {
            let wl = api.get_opt("job-big").await?;
            Ok(wl.filter(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| s.condition("QuotaReserved"))
                    .is_some_and(|q| q.status == "False" && q.reason == "NoPlacement")
            }))
        }
    })
    .await?;
    let message = wl
        .status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .map(|q| q.message.clone())
        .unwrap_or_default();
    ensure!(
        message.contains("fits quota (16 of 16 nvidia.com/gpu free)")
            && message.contains("none of its 2 node(s) has 8 nvidia.com/gpu free")
            && message.contains("largest free block: 4 on"),
        "unexpected message: {message}"
    );
    ensure!(c.job_suspended("big").await?, "the 8-GPU Job was started");

    // Two pods of 4: one per node.
    c.job("pair", "team", 2, 4, &[], true).await?;
    c.wait_condition("pair", "Admitted", "True", T).await?;
    let bound = wait_for("both pods of pair bound by kube-scheduler", T, || {
        let c = &c;
        async move {
            let pods = c.job_pods("pair").await?;
            let on: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
                .collect();
            Ok((pods.len() == 2 && on.len() == 2).then_some(on))
        }
    })
    .await?;
    ensure!(
        bound == nodes.iter().cloned().collect::<BTreeSet<_>>(),
        "pods bound to {bound:?}, not one on each of {nodes:?}"
    );
    // Still pending: the nodes are now full, and the reason says so.
    for node in &nodes {
        c.node_heartbeat(node, &allocatable).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let big = c.workloads().get("job-big").await?;
    let q = big
        .status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .context("job-big has no QuotaReserved condition")?;
    ensure!(
        q.status == "False" && q.reason == "NoPlacement",
        "job-big: {} {}",
        q.status,
        q.reason
    );
    ensure!(c.job_suspended("big").await?, "the 8-GPU Job was started");
    c.cleanup().await
}
