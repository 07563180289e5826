//! End-to-end tests on a real node ([`sluice_e2e::node`]): kube-scheduler
//! binds the pods, the kubelet runs them with containerd and runc, and
//! they finish. Skipped (with a message) when `KUBEBUILDER_ASSETS` has no
//! `kubelet`.
//!
//! ```text
//! cargo build -p sluice-cli
//! sudo KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test node -- --ignored --test-threads=1
//! ```
//!
//! No webhook here: Jobs are created suspended, as the webhook would.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sluice_e2e::cluster::{Cluster, GPU, wait_for};
use sluice_e2e::ensure_eq;
use sluice_e2e::node::{BUSYBOX_IMAGE, GPUS, MIG, MIGS, NODE_NAME, Node};

/// Pods start in seconds; the first one also waits for the node.
const T: Duration = Duration::from_secs(120);

/// The node, or `None` (and a message) when this machine has none.
fn node() -> Result<Option<&'static Node>> {
    match sluice_e2e::envtest::node() {
        Some(node) => Ok(Some(node?)),
        None => {
            eprintln!("skipped: KUBEBUILDER_ASSETS is not set or has no kubelet, so there is no e2e node");
            Ok(None)
        }
    }
}

/// A container of the busybox image running `script`, with `gpus` GPUs.
fn container(script: &str, gpus: u32) -> Value {
    json!({"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
           "command": ["sh", "-c", script],
           "resources": {"limits": {GPU: gpus.to_string()}}})
}

/// What a pod went through, from polling it until it ended.
#[derive(Debug, Default)]
struct Seen {
    node: Option<String>,
    ready: bool,
    running: bool,
    phase: String,
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn phase(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

/// Polls pod `name` until it is Succeeded or Failed.
async fn follow(pods: &Api<Pod>, name: &str) -> Result<Seen> {
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        if let Some(pod) = pods.get_opt(name).await? {
            seen.node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).or(seen.node);
            seen.ready |= is_ready(&pod);
            seen.phase = phase(&pod);
            seen.running |= seen.phase == "Running";
            if matches!(seen.phase.as_str(), "Succeeded" | "Failed") {
                if seen.phase == "Failed" {
                    bail!("pod {name} failed: {:?}", pod.status);
                }
                return Ok(seen);
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!("pod {name} did not finish within {}s: {seen:?}", T.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins and root"]
async fn a_gpu_pod_is_scheduled_onto_the_node_runs_and_succeeds() -> Result<()> {
    let Some(_node) = node()? else { return Ok(()) };
    let mut c = Cluster::start().await?;
    let result = async {
        let n = Api::<KubeNode>::all(c.client.clone()).get(NODE_NAME).await?;
        let alloc = n.status.and_then(|s| s.allocatable).context("no allocatable")?;
        ensure_eq!(alloc.get(GPU).map(|q| q.0.clone()), Some(GPUS.to_string()));
        ensure_eq!(alloc.get(MIG).map(|q| q.0.clone()), Some(MIGS.to_string()));

        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "gpu"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [container("echo started; sleep 5", 1)]}
        }))?;
        c.pods().create(&PostParams::default(), &pod).await?;
        let seen = follow(&c.pods(), "gpu").await?;
        ensure_eq!(seen.node.as_deref(), Some(NODE_NAME), "bound by kube-scheduler");
        ensure!(seen.running && seen.ready, "never seen Running and Ready: {seen:?}");
        ensure_eq!(seen.phase, "Succeeded");
        // The kubelet serves the container's log.
        let log = c.pods().logs("gpu", &Default::default()).await?;
        ensure_eq!(log.trim(), "started");
        Ok(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// A Job of `pods` pods with `gpus` GPUs each, running `script`, queued in
/// `queue` and created suspended (what the webhook would do).
async fn job(c: &Cluster, name: &str, queue: &str, pods: i32, gpus: u32, script: &str) -> Result<Job> {
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {sluice_api::labels::QUEUE: queue}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [container(script, gpus)]}}}
    }))?;
    Ok(c.jobs().create(&PostParams::default(), &job).await?)
}

/// Labels the node as flavor `flavor`'s (its `nodeLabels`).
async fn label_node(c: &Cluster, flavor: &str) -> Result<()> {
    let patch = json!({"metadata": {"labels": {"sluice.dev/e2e-gpu": flavor}}});
    Api::<KubeNode>::all(c.client.clone())
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins and root"]
async fn an_admitted_gpu_job_runs_on_the_node_and_its_workload_finishes() -> Result<()> {
    let Some(_node) = node()? else { return Ok(()) };
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        label_node(&c, &f).await?;
        let cq = c
            .gpu_queue("cq", &f, GPUS, None, json!({"withinClusterQueue": "LowerPriority"}))
            .await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&[]).await?;

        job(&c, "train", "team", 2, 2, "echo training; sleep 5").await?;
        c.wait_condition("train", "Admitted", "True", T).await?;
        c.wait_suspended("train", false, T).await?;
        let pods = wait_for("2 pods of train", T, || async {
            let pods = c.job_pods("train").await?;
            Ok((pods.len() == 2).then_some(pods))
        })
        .await?;
        for pod in &pods {
            let name = pod.metadata.name.clone().context("a pod without a name")?;
            let seen = follow(&c.pods(), &name).await?;
            ensure_eq!(seen.node.as_deref(), Some(NODE_NAME), "{name} bound by kube-scheduler");
            ensure_eq!(seen.phase, "Succeeded", "{name}");
        }
        wait_for("train complete", T, || async {
            let j = c.jobs().get("train").await?;
            let done = j
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Complete" && c.status == "True");
            Ok(done.then_some(()))
        })
        .await?;
        c.wait_condition("train", "Finished", "True", T).await?;
        Ok(())
    }
    .await;
    c.cleanup().await?;
    result
}
