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

use std::collections::BTreeMap;
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
    job_with(c, name, queue, pods, gpus, script, &[], 5).await
}

/// [`job`] with more labels and a termination grace period; a few pod
/// failures allowed (preempted pods may count as failed).
#[allow(clippy::too_many_arguments)]
async fn job_with(
    c: &Cluster,
    name: &str,
    queue: &str,
    pods: i32,
    gpus: u32,
    script: &str,
    labels: &[(&str, &str)],
    grace: i64,
) -> Result<Job> {
    let mut l: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    l.insert(sluice_api::labels::QUEUE.to_string(), json!(queue));
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": l},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true, "backoffLimit": 2 * pods,
            "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
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
        job_complete(&c, "train").await?;
        c.wait_condition("train", "Finished", "True", T).await?;
        Ok(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// A pod deleted: as last seen (the Deleted event's object), and the
/// grace period its deletion was asked with (the first version with a
/// deletion timestamp; the kubelet's final delete has none).
struct Deleted {
    pod: Pod,
    grace: Option<i64>,
}

/// Collects the pods matching `selector` that are deleted from now on,
/// until `count` are.
async fn watch_deletions(
    pods: Api<Pod>,
    selector: &str,
    count: usize,
) -> Result<tokio::task::JoinHandle<Result<Vec<Deleted>>>> {
    use futures::StreamExt;
    let rv = pods
        .list_metadata(&kube::api::ListParams::default().labels(selector))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut stream = pods
        .watch(&kube::api::WatchParams::default().labels(selector), &rv)
        .await?
        .boxed();
    Ok(tokio::spawn(async move {
        let mut grace: BTreeMap<String, i64> = BTreeMap::new();
        let mut deleted = Vec::new();
        let deadline = tokio::time::Instant::now() + T;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
            match ev? {
                kube::api::WatchEvent::Modified(pod) => {
                    if let (Some(name), Some(g)) = (pod.metadata.name, pod.metadata.deletion_grace_period_seconds) {
                        grace.entry(name).or_insert(g);
                    }
                }
                kube::api::WatchEvent::Deleted(pod) => {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    deleted.push(Deleted {
                        grace: grace.get(&name).copied(),
                        pod,
                    });
                    if deleted.len() == count {
                        return Ok(deleted);
                    }
                }
                _ => {}
            }
        }
        bail!("{} of {count} pods deleted within {}s", deleted.len(), T.as_secs())
    }))
}

fn workload_condition(wl: &sluice_api::v1alpha1::Workload, type_: &str) -> Option<(String, String)> {
    let c = wl.status.as_ref()?.condition(type_)?;
    Some((c.reason.clone(), c.message.clone()))
}

/// What the preempted pods run: started, then on SIGTERM "stopping", a
/// second's work and exit 42 (a SIGKILL would give 137).
const GRACEFUL: &str = "trap 'echo stopping; sleep 1; exit 42' TERM; echo started; sleep 20 & wait $!; echo done";
const GRACE: i64 = 10;

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins and root"]
async fn a_higher_priority_job_preempts_running_pods_which_stop_gracefully_then_both_complete() -> Result<()> {
    let Some(_node) = node()? else { return Ok(()) };
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        label_node(&c, &f).await?;
        // Half the node's GPUs in the queue: the two Jobs do not fit together.
        let cq = c
            .gpu_queue("cq", &f, GPUS / 2, None, json!({"withinClusterQueue": "LowerPriority"}))
            .await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&[]).await?;
        let urgent = c.priority_class("urgent", 1000).await?;

        job_with(&c, "batch", "team", 2, 2, GRACEFUL, &[], GRACE).await?;
        c.wait_condition("batch", "Admitted", "True", T).await?;
        // Both pods run and are Ready on the node before the urgent Job comes.
        let first = wait_for("batch's 2 pods Running and Ready on the node", T, || async {
            let pods = c.job_pods("batch").await?;
            let running = pods.iter().filter(|p| {
                is_ready(p)
                    && phase(p) == "Running"
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE_NAME)
            });
            Ok((running.count() == 2).then_some(pods))
        })
        .await?;
        let first: Vec<String> = first.into_iter().filter_map(|p| p.metadata.name).collect();
        let deletions = watch_deletions(c.pods(), "job-name=batch", 2).await?;
        let restored = watch_restored(c.jobs(), "batch").await?;

        job_with(
            &c,
            "urgent",
            "team",
            2,
            2,
            "echo urgent; sleep 3",
            &[(sluice_api::labels::PRIORITY_CLASS, &urgent)],
            5,
        )
        .await?;
        let batch = c.wait_condition("batch", "Preempted", "True", T).await?;
        let (reason, message) = workload_condition(&batch, "Evicted").context("batch not Evicted")?;
        ensure_eq!(reason, "Preempted");
        ensure!(message.contains("job-urgent"), "{message}");
        c.wait_suspended("batch", true, T).await?;

        // The kubelet stopped them with their grace period: the TERM
        // handler ran and chose the exit code.
        let deleted = deletions.await??;
        let mut names: Vec<String> = deleted.iter().filter_map(|d| d.pod.metadata.name.clone()).collect();
        names.sort();
        let mut expected = first.clone();
        expected.sort();
        ensure_eq!(names, expected, "the running pods were the ones deleted");
        for Deleted { pod, grace } in &deleted {
            let name = pod.metadata.name.clone().unwrap_or_default();
            ensure_eq!(*grace, Some(GRACE), "{name} deleted with its grace period");
            let exit = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|cs| cs.state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code);
            ensure_eq!(exit, Some(42), "{name} did not run its TERM handler: {:?}", pod.status);
        }

        // The urgent Job runs on the node and completes.
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        job_complete(&c, "urgent").await?;
        c.wait_condition("urgent", "Finished", "True", T).await?;

        // The preempted Job got its template back, is readmitted and completes.
        restored.await??;
        c.wait_condition("batch", "Requeued", "True", T).await?;
        c.wait_condition("batch", "Admitted", "True", T).await?;
        job_complete(&c, "batch").await?;
        let second = c.job_pods("batch").await?;
        ensure!(
            second
                .iter()
                .all(|p| p.metadata.name.as_ref().is_some_and(|n| !first.contains(n))),
            "batch completed with its first pods"
        );
        c.wait_condition("batch", "Finished", "True", T).await?;
        Ok(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// Waits for Job `name` to be Complete.
async fn job_complete(c: &Cluster, name: &str) -> Result<()> {
    wait_for(&format!("{name} complete"), T, || async {
        let j = c.jobs().get(name).await?;
        let conditions = j.status.and_then(|s| s.conditions).unwrap_or_default();
        if let Some(failed) = conditions.iter().find(|c| c.type_ == "Failed" && c.status == "True") {
            bail!("Job {name} failed: {:?}", failed.message);
        }
        Ok(conditions
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
            .then_some(()))
    })
    .await
}

/// Waits (in a task) until Job `name` is seen suspended with its original
/// template: no node selector (the flavor's was taken out again).
async fn watch_restored(jobs: Api<Job>, name: &str) -> Result<tokio::task::JoinHandle<Result<()>>> {
    use futures::StreamExt;
    let wp = kube::api::WatchParams::default().fields(&format!("metadata.name={name}"));
    let rv = jobs.get(name).await?.metadata.resource_version.unwrap_or_default();
    let mut stream = jobs.watch(&wp, &rv).await?.boxed();
    let name = name.to_string();
    Ok(tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + T;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
            if let kube::api::WatchEvent::Modified(job) = ev? {
                let spec = job.spec.unwrap_or_default();
                let no_selector = spec.template.spec.is_some_and(|p| p.node_selector.is_none());
                if spec.suspend == Some(true) && no_selector {
                    return Ok(());
                }
            }
        }
        bail!(
            "Job {name} not seen suspended with its template restored within {}s",
            T.as_secs()
        )
    }))
}

/// A Job of `pods` pods of `gpus` GPUs whose containers run `script` and
/// are Ready only once `/tmp/ready` exists (the kubelet's exec probe,
/// every second), created suspended in `queue`.
async fn probed_job(c: &Cluster, name: &str, queue: &str, pods: i32, gpus: u32, script: &str) -> Result<Job> {
    let mut main = container(script, gpus);
    main["readinessProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1});
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {sluice_api::labels::QUEUE: queue}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true, "backoffLimit": 2 * pods,
            "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [main]}}}
    }))?;
    Ok(c.jobs().create(&PostParams::default(), &job).await?)
}

fn pods_ready_true(wl: &sluice_api::v1alpha1::Workload) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| s.condition("PodsReady"))
        .is_some_and(|c| c.status == "True")
}

/// Pods-ready gating reads the kubelet's readiness: a gang whose pods run
/// but are not Ready yet (their probe fails for 6 s) is not `PodsReady`
/// until the kubelet says they are; a gang whose pods never become Ready
/// is evicted when the timeout passes, its pods stopped, its quota
/// released, and it waits out its requeue backoff.
#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins and root"]
async fn pods_ready_follows_the_kubelets_readiness_and_a_gang_never_ready_is_evicted_at_the_timeout() -> Result<()> {
    let Some(_node) = node()? else { return Ok(()) };
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        label_node(&c, &f).await?;
        let cq = c.gpu_queue("cq", &f, GPUS, None, json!({})).await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&["--pods-ready-timeout=25s", "--requeue-backoff-base=300s"])
            .await?;

        probed_job(&c, "slow", "team", 2, 2, "sleep 6; touch /tmp/ready; sleep 6").await?;
        c.wait_condition("slow", "Admitted", "True", T).await?;
        // Sampled until PodsReady: the Workload first, then the pods (a
        // pod only goes from Ready to finished, never back).
        let (mut unready_running, start) = (0usize, std::time::Instant::now());
        loop {
            ensure!(start.elapsed() < T, "slow never became PodsReady");
            let wl = c.workloads().get("job-slow").await?;
            let pods = c.job_pods("slow").await?;
            let ready = pods.iter().filter(|p| is_ready(p) || phase(p) == "Succeeded").count();
            let running = pods.iter().filter(|p| phase(p) == "Running").count();
            if pods_ready_true(&wl) {
                ensure!(
                    pods.len() == 2 && ready == 2,
                    "PodsReady while {ready} of {} pods were Ready",
                    pods.len()
                );
                break;
            }
            unready_running += usize::from(running == 2 && ready < 2);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        eprintln!(
            "slow: PodsReady after {:?}; {unready_running} samples with both pods Running, not Ready",
            start.elapsed()
        );
        ensure!(
            unready_running > 0,
            "the pods were never seen Running and not yet Ready"
        );
        job_complete(&c, "slow").await?;
        c.wait_condition("slow", "Finished", "True", T).await?;

        // Never Ready: evicted at the timeout, pods stopped, requeued.
        probed_job(&c, "stuck", "team", 2, 2, "sleep 3600").await?;
        c.wait_condition("stuck", "Admitted", "True", T).await?;
        wait_for("stuck's pods Running on the node", T, || async {
            let pods = c.job_pods("stuck").await?;
            Ok((pods.iter().filter(|p| phase(p) == "Running").count() == 2).then_some(()))
        })
        .await?;
        let admitted_at = std::time::Instant::now();
        let wl = c
            .wait_condition("stuck", "Evicted", "True", Duration::from_secs(90))
            .await?;
        let waited = admitted_at.elapsed();
        let (reason, message) = workload_condition(&wl, "Evicted").context("no Evicted condition")?;
        eprintln!("stuck: evicted after {waited:?}: {reason}: {message}");
        ensure_eq!(reason, "PodsReadyTimeout");
        ensure!(!pods_ready_true(&wl), "stuck was PodsReady");
        c.wait_suspended("stuck", true, T).await?;
        wait_for("stuck's pods gone", T, || async {
            Ok(c.job_pods("stuck").await?.is_empty().then_some(()))
        })
        .await?;
        // Quota released; back in the queue after its backoff.
        let wl = c.wait_condition("stuck", "Requeued", "False", T).await?;
        let requeued = workload_condition(&wl, "Requeued").map(|(r, _)| r);
        ensure_eq!(requeued.as_deref(), Some("Backoff"));
        ensure!(
            wl.status.as_ref().is_some_and(|s| s.admission.is_none()),
            "stuck still holds its admission"
        );
        Ok(())
    }
    .await;
    c.cleanup().await?;
    result
}
