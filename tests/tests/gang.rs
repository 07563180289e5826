//! End-to-end tests of multi-Job gangs (`sluice.dev/gang`,
//! `sluice.dev/gang-size`) against a real API server: Jobs of one gang are
//! one Workload, made once all of them exist, admitted in one status
//! write, and evicted together when one of them is deleted.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test gang -- --ignored --test-threads=1
//! ```
//!
//! Like `controller.rs`: no webhook (Jobs are created suspended), no
//! kubelet (the harness writes pod statuses).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use sluice_api::labels::{GANG, GANG_SIZE};
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

/// One flavor, one ClusterQueue of `gpus`, LocalQueue `team` → it, controller running.
async fn queue_of(gpus: u32) -> Result<(Cluster, String)> {
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let cq = c
        .gpu_queue("cq", &f, gpus, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    Ok((c, f))
}

/// A Job of gang `gang` (of `size` Jobs): `pods` pods of `gpus` GPUs each.
async fn member(c: &Cluster, name: &str, gang: &str, size: &str, pods: i32, gpus: u32) -> Result<()> {
    c.job(name, "team", pods, gpus, &[(GANG, gang), (GANG_SIZE, size)], true)
        .await?;
    Ok(())
}

/// Watches Workload `name` from now until it is admitted: every distinct
/// status it had (a status write each), in order.
async fn watch_statuses(c: &Cluster, name: &str) -> Result<tokio::task::JoinHandle<Result<Vec<serde_json::Value>>>> {
    use futures::StreamExt;
    let api = c.workloads();
    let wp = kube::api::WatchParams::default().fields(&format!("metadata.name={name}"));
    let rv = api
        .list_metadata(&kube::api::ListParams::default())
        .await?
        .metadata
        .resource_version;
    let mut stream = api.watch(&wp, rv.as_deref().unwrap_or("0")).await?.boxed();
    let name = name.to_string();
    Ok(tokio::spawn(async move {
        let mut seen: Vec<serde_json::Value> = Vec::new();
        let deadline = tokio::time::Instant::now() + T;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
            let wl = match ev? {
                kube::api::WatchEvent::Added(w) | kube::api::WatchEvent::Modified(w) => w,
                _ => continue,
            };
            let Some(status) = wl.status.as_ref() else { continue };
            let v = serde_json::to_value(status)?;
            if seen.last() != Some(&v) {
                seen.push(v);
            }
            if status.condition("Admitted").is_some_and(|c| c.status == "True") {
                return Ok(seen);
            }
        }
        anyhow::bail!("{name} not admitted within {}s; statuses seen: {seen:?}", T.as_secs())
    }))
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn two_jobs_of_a_gang_wait_for_each_other_then_start_together_and_stop_together() -> Result<()> {
    let (mut c, flavor) = queue_of(8).await?;
    let result = async {
        // Half a gang: no Workload, the Job is told why and stays suspended.
        member(&c, "workers", "ft", "2", 2, 2).await?;
        wait_for("WaitingForGang on workers", T, || async {
            Ok((c.events_about("Job", "workers", "WaitingForGang").await? > 0).then_some(()))
        })
        .await?;
        ensure!(
            c.workloads().get_opt("gang-ft").await?.is_none(),
            "a Workload for half a gang"
        );
        ensure!(c.job_suspended("workers").await?);
        // The other half: one Workload with a pod set per Job, admitted
        // whole in one status write (every version of it is watched).
        let versions = watch_statuses(&c, "gang-ft").await?;
        member(&c, "launcher", "ft", "2", 2, 2).await?;
        let wl = c.wait_workload_condition("gang-ft", "Admitted", "True", T).await?;
        let statuses = versions.await??;
        ensure_eq!(statuses.len(), 1, "status versions before admission: {statuses:?}");
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("launcher".to_string(), 2), ("workers".to_string(), 2)]);
        let adm = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .context("no admission")?;
        ensure_eq!(adm.pod_set_assignments.len(), 2);
        for a in &adm.pod_set_assignments {
            ensure_eq!(a.flavors["nvidia.com/gpu"], flavor);
            ensure_eq!(a.resource_usage["nvidia.com/gpu"].0, "4");
        }
        // In one status write: the only Workload status write so far.
        for job in ["launcher", "workers"] {
            let j = c.wait_suspended(job, false, T).await?;
            let sel = j
                .spec
                .and_then(|s| s.template.spec)
                .and_then(|p| p.node_selector)
                .context("no nodeSelector")?;
            ensure_eq!(sel.get("sluice.dev/e2e-gpu"), Some(&flavor));
        }
        c.mark_pods("workers", 2, "Running").await?;
        c.mark_pods("launcher", 2, "Running").await?;
        // One member deleted: the other is suspended, the quota released,
        // the Workload deleted.
        c.jobs()
            .delete("launcher", &kube::api::DeleteParams::background())
            .await?;
        wait_for("gang-ft deleted", T, || async {
            // No kubelet: finish the pods the job controller deleted.
            c.reap_terminating_pods("workers").await?;
            c.reap_terminating_pods("launcher").await?;
            Ok(c.workloads().get_opt("gang-ft").await?.is_none().then_some(()))
        })
        .await?;
        // Evicted first (its pods stopped before the quota went), and the
        // remaining Job says why.
        c.wait_suspended("workers", true, T).await?;
        wait_for("GangIncomplete on workers", T, || async {
            Ok((c.events_about("Job", "workers", "GangIncomplete").await? > 0).then_some(()))
        })
        .await?;
        // The template the user wrote is back.
        let j = c.jobs().get("workers").await?;
        let sel = j.spec.and_then(|s| s.template.spec).and_then(|p| p.node_selector);
        ensure!(
            sel.as_ref().is_none_or(|s| !s.contains_key("sluice.dev/e2e-gpu")),
            "{sel:?}"
        );
        // The quota is free: an 8-GPU Job is admitted.
        c.job("solo", "team", 4, 2, &[], true).await?;
        c.wait_condition("solo", "Admitted", "True", T).await?;
        ensure!(c.job_suspended("workers").await?, "half a gang must not run");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_gang_larger_than_its_queue_never_runs_and_conflicting_labels_are_reported() -> Result<()> {
    let (mut c, _) = queue_of(6).await?;
    let result = async {
        member(&c, "a", "big", "2", 2, 2).await?;
        member(&c, "b", "big", "2", 2, 2).await?;
        let wl = c
            .wait_workload_condition("gang-big", "QuotaReserved", "False", T)
            .await?;
        let pending = wl
            .status
            .as_ref()
            .and_then(|s| s.pending.as_ref())
            .context("not explained")?;
        ensure_eq!(pending.reason, "ExceedsQuota");
        for job in ["a", "b"] {
            ensure!(c.job_suspended(job).await?, "{job} runs");
            ensure!(c.job_pods(job).await?.is_empty(), "{job} has pods");
        }
        // Sizes that disagree: a Warning on each Job, no Workload.
        member(&c, "x", "odd", "2", 1, 1).await?;
        member(&c, "y", "odd", "3", 1, 1).await?;
        for job in ["x", "y"] {
            wait_for(&format!("GangConflict on {job}"), T, || async {
                Ok((c.events_about("Job", job, "GangConflict").await? > 0).then_some(()))
            })
            .await?;
        }
        ensure!(c.workloads().get_opt("gang-odd").await?.is_none());
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
