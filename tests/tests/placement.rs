//! End-to-end test of node-aware admission (`--placement=nodes`) against a
//! real API server with kube-scheduler: two hand-made GPU Nodes of 4
//! `nvidia.com/gpu` each (no kubelet; the test writes their status). A
//! single-pod 8-GPU Job fits no node ever, so it stays pending with reason
//! `NeverPlaceable` and the largest node's numbers, also once others hold
//! the quota; a 2 × 4-GPU Job is admitted and kube-scheduler binds its
//! pods, one per node; a 4-GPU Job that fits the quota left waits with
//! `NoPlacement` for room on the nodes.
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

/// Waits until kube-scheduler bound Job `job`'s 2 pods to 2 different
/// nodes; those nodes.
async fn bound_apart(c: &Cluster, job: &str) -> Result<BTreeSet<String>> {
    wait_for(
        &format!("both pods of {job} bound by kube-scheduler"),
        T,
        || async move {
            let pods = c.job_pods(job).await?;
            let on: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
                .collect();
            Ok((pods.len() == 2 && on.len() == 2).then_some(on))
        },
    )
    .await
}

/// The QuotaReserved condition of Workload `name` once its reason is
/// `reason`.
async fn waiting_with(c: &Cluster, name: &str, reason: &str) -> Result<String> {
    let wl = wait_for(&format!("{name} pending with {reason}"), T, || {
        let api = c.workloads();
        async move {
            let wl = api.get_opt(name).await?;
            Ok(wl.filter(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| s.condition("QuotaReserved"))
                    .is_some_and(|q| q.status == "False" && q.reason == reason)
            }))
        }
    })
    .await?;
    Ok(wl
        .status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .map(|q| q.message.clone())
        .unwrap_or_default())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_pod_no_node_could_hold_is_told_so_a_gang_that_fits_the_nodes_is_bound_and_one_that_fits_later_waits_for_room()
-> Result<()> {
    let mut c = Cluster::start().await?;
    let flavor = c.flavor("a100").await?;
    let allocatable = json!({"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi", "pods": "110"});
    let mut nodes = Vec::new();
    for base in ["gpu-a", "gpu-b"] {
        let labels = json!({"sluice.dev/e2e-gpu": flavor});
        nodes.push(c.node(base, labels, allocatable.clone()).await?);
    }
    let cq = c.gpu_queue("cq", &flavor, 12, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&["--placement=nodes", "--explain-after=0s"]).await?;

    // 8 GPUs in one pod: quota has 12, but no node more than 4, ever.
    c.job("big", "team", 1, 8, &[], true).await?;
    let message = waiting_with(&c, "job-big", "NeverPlaceable").await?;
    eprintln!("job-big: {message}");
    ensure!(
        message.contains("no node could ever hold it, even with nothing else running")
            && message.contains("a pod needs 8 nvidia.com/gpu; none of its 2 node(s) has that much allocatable")
            && message.contains("the largest has 4 allocatable"),
        "unexpected message: {message}"
    );
    let warned = wait_for("a NeverPlaceable Event on the Job", T, || async {
        Ok((c.events_about("Job", "big", "NeverPlaceable").await? >= 1).then_some(()))
    })
    .await;
    ensure!(warned.is_ok(), "no Warning Event NeverPlaceable on Job big");
    ensure!(c.job_suspended("big").await?, "the 8-GPU Job was started");

    // Two pods of 4: one per node.
    c.job("pair", "team", 2, 4, &[], true).await?;
    c.wait_condition("pair", "Admitted", "True", T).await?;
    let bound = bound_apart(&c, "pair").await?;
    ensure!(
        bound == nodes.iter().cloned().collect::<BTreeSet<_>>(),
        "pods bound to {bound:?}, not one on each of {nodes:?}"
    );
    for node in &nodes {
        c.node_heartbeat(node, &allocatable).await?;
    }
    // Others hold quota now (4 of 12 free): big is still told the nodes
    // can never hold it, not that it lacks quota.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let big = c.workloads().get("job-big").await?;
    let q = big
        .status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .context("job-big has no QuotaReserved condition")?;
    ensure!(
        q.status == "False" && q.reason == "NeverPlaceable",
        "job-big: {} {}: {}",
        q.status,
        q.reason,
        q.message
    );
    // One pod of 4 fits the quota left and a node, once the pair is gone.
    c.job("four", "team", 1, 4, &[], true).await?;
    let message = waiting_with(&c, "job-four", "NoPlacement").await?;
    ensure!(
        message.contains("fits quota (4 of 12 nvidia.com/gpu free)")
            && message.contains("none of its 2 node(s) has 4 nvidia.com/gpu free"),
        "unexpected message: {message}"
    );
    ensure!(c.job_suspended("big").await?, "the 8-GPU Job was started");
    c.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_gang_that_requires_one_rack_is_admitted_into_the_rack_that_holds_it_and_pinned_there() -> Result<()> {
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use sluice_api::v1alpha1::ResourceFlavor;
    let mut c = Cluster::start().await?;
    let flavor = c.flavor("h100").await?;
    let rack_key = "sluice.dev/e2e-rack";
    Api::<ResourceFlavor>::all(c.client.clone())
        .patch(
            &flavor,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"topologyKey": rack_key}})),
        )
        .await?;
    let allocatable = json!({"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi", "pods": "110"});
    // Rack r1 has one node (4 GPUs), rack r2 two (8 GPUs).
    let mut in_r2 = BTreeSet::new();
    for (base, rack) in [("r1-a", "r1"), ("r2-a", "r2"), ("r2-b", "r2")] {
        let labels = json!({"sluice.dev/e2e-gpu": flavor, rack_key: rack});
        let node = c.node(base, labels, allocatable.clone()).await?;
        if rack == "r2" {
            in_r2.insert(node);
        }
    }
    let cq = c.gpu_queue("cq", &flavor, 16, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&["--placement=nodes", "--explain-after=0s"]).await?;

    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ring", "labels": {"sluice.dev/queue": "team"},
                     "annotations": {"sluice.dev/topology": "required"}},
        "spec": {"parallelism": 2, "completions": 2, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}
    }))?;
    c.jobs().create(&PostParams::default(), &job).await?;
    let wl = c.wait_condition("ring", "Admitted", "True", T).await?;
    let domain = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .and_then(|a| a.pod_set_assignments[0].topology_domain.clone())
        .context("no topologyDomain in the admission")?;
    ensure!(
        domain.key == rack_key && domain.value == "r2",
        "admitted into {}={}",
        domain.key,
        domain.value
    );
    let started = c.wait_suspended("ring", false, T).await?;
    let selector = started
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.node_selector.clone())
        .unwrap_or_default();
    ensure!(
        selector.get(rack_key).map(String::as_str) == Some("r2"),
        "template nodeSelector {selector:?} does not pin rack r2"
    );
    let bound = bound_apart(&c, "ring").await?;
    ensure!(bound == in_r2, "pods bound to {bound:?}, not to rack r2's {in_r2:?}");
    c.cleanup().await
}

/// A queued Job of one pod of `gpus` GPUs at WorkloadPriorityClass
/// `class`, with a template `nodeSelector` (empty: none).
async fn pinned_job(c: &Cluster, name: &str, gpus: u32, class: &str, node: Option<&str>) -> Result<()> {
    use k8s_openapi::api::batch::v1::Job;
    let selector = node.map(|n| json!({"kubernetes.io/hostname": n}));
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team", "sluice.dev/priority-class": class}},
        "spec": {"parallelism": 1, "completions": 1, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "nodeSelector": selector,
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}
    }))?;
    c.jobs().create(&kube::api::PostParams::default(), &job).await?;
    Ok(())
}

/// The node Job `job`'s one pod is bound to, once it is.
async fn bound_to(c: &Cluster, job: &str) -> Result<String> {
    wait_for(&format!("{job}'s pod bound by kube-scheduler"), T, || async move {
        let pods = c.job_pods(job).await?;
        Ok(pods
            .iter()
            .find_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())))
    })
    .await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn preemption_frees_one_node_for_the_pod_rather_than_the_cheapest_quota() -> Result<()> {
    let mut c = Cluster::start().await?;
    let flavor = c.flavor("a100").await?;
    let allocatable = json!({"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi", "pods": "110"});
    let mut nodes = Vec::new();
    for base in ["gpu-a", "gpu-b"] {
        let name = c.name(base);
        let labels = json!({"sluice.dev/e2e-gpu": flavor, "kubernetes.io/hostname": name});
        nodes.push(c.node(base, labels, allocatable.clone()).await?);
    }
    let (a, b) = (nodes[0].clone(), nodes[1].clone());
    let low = c.priority_class("low", 1).await?;
    let mid = c.priority_class("mid", 5).await?;
    let high = c.priority_class("high", 10).await?;
    let cq = c
        .gpu_queue("cq", &flavor, 8, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&["--placement=nodes", "--explain-after=0s"]).await?;

    // Node a: two 2-GPU pods of the lowest priority; node b: one of a
    // higher one, and 2 GPUs free. 6 of 8 GPUs of quota are used.
    pinned_job(&c, "low-a1", 2, &low, Some(&a)).await?;
    pinned_job(&c, "low-a2", 2, &low, Some(&a)).await?;
    pinned_job(&c, "mid-b", 2, &mid, Some(&b)).await?;
    for (job, node) in [("low-a1", &a), ("low-a2", &a), ("mid-b", &b)] {
        c.wait_condition(job, "Admitted", "True", T).await?;
        ensure!(bound_to(&c, job).await? == *node, "{job} not bound to {node}");
    }
    // 4 GPUs in one pod: quota needs one 2-GPU victim, the lowest priority
    // first; but a low pod gone from node a leaves 2 + 2 free on two nodes.
    // The one victim that makes room on one node is mid-b.
    pinned_job(&c, "urgent", 4, &high, None).await?;
    let victim = c.wait_condition("mid-b", "Preempted", "True", T).await?;
    let message = victim
        .status
        .as_ref()
        .and_then(|s| s.condition("Evicted"))
        .map(|e| e.message.clone())
        .unwrap_or_default();
    ensure!(message.contains("job-urgent"), "{message}");
    for job in ["low-a1", "low-a2"] {
        ensure!(!c.has_condition(job, "Preempted").await?, "{job} was preempted too");
    }
    c.wait_suspended("mid-b", true, T).await?;
    wait_for("mid-b's pod gone", T, || async {
        c.reap_terminating_pods("mid-b").await?;
        Ok(c.job_pods("mid-b").await?.is_empty().then_some(()))
    })
    .await?;
    c.wait_condition("urgent", "Admitted", "True", T).await?;
    ensure!(bound_to(&c, "urgent").await? == b, "urgent not bound to {b}");
    for job in ["low-a1", "low-a2"] {
        ensure!(!c.has_condition(job, "Preempted").await?, "{job} was preempted");
    }
    c.cleanup().await
}
