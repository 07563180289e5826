//! End-to-end tests of `sluice controller` against a real API server.
//!
//! ```text
//! cargo build -p sluice-cli
//! SLUICE_E2E_KUBECONFIG=~/.kube/config cargo test -p sluice-e2e --test controller -- --ignored --test-threads=1
//! # or, with a control plane of its own (see sluice_e2e::envtest):
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test controller -- --ignored --test-threads=1
//! ```
//!
//! Needs kube-apiserver and kube-controller-manager (the job controller
//! makes the pods and the Job status); no kubelet or scheduler is needed:
//! the harness (`sluice_e2e::cluster`) writes pod statuses itself. No
//! webhook runs here, so Jobs are created suspended, as the webhook would
//! make them. See the harness docs for what each helper does.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use sluice_api::v1alpha1::{Workload, WorkloadStatus};
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

/// A Workload's status (an error, not a panic, when there is none).
fn status(wl: &Workload) -> Result<&WorkloadStatus> {
    wl.status.as_ref().context("Workload has no status")
}

fn lower_priority() -> serde_json::Value {
    json!({"withinClusterQueue": "LowerPriority"})
}

/// One flavor, one ClusterQueue of `gpus`, LocalQueue `team` → it, controller running.
async fn simple(gpus: u32) -> Result<(Cluster, String)> {
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, gpus, None, lower_priority()).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    Ok((c, f))
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn admits_a_job_that_fits_onto_its_flavor() -> Result<()> {
    let (mut c, flavor) = simple(8).await?;
    let result = async {
        c.job("train", "team", 4, 2, &[], true).await?;
        let wl = c.wait_condition("train", "Admitted", "True", T).await?;
        let adm = status(&wl)?.admission.as_ref().context("no admission")?;
        ensure_eq!(adm.pod_set_assignments[0].flavors["nvidia.com/gpu"], flavor);
        ensure_eq!(adm.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "8");
        // Owned by the Job (deleting the Job deletes it).
        let owner = wl
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("no owner")?;
        ensure_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
        let job = c.wait_suspended("train", false, T).await?;
        let sel = job
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|p| p.node_selector)
            .context("no nodeSelector")?;
        ensure_eq!(sel.get("sluice.dev/e2e-gpu"), Some(&flavor));
        c.mark_pods("train", 4, "Running").await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_queued_job_created_unsuspended_is_suspended_then_admitted() -> Result<()> {
    // Quota for nothing: the Job must be held.
    let (mut c, _) = simple(1).await?;
    let result = async {
        c.job("eager", "team", 2, 1, &[], false).await?;
        c.wait_suspended("eager", true, T).await?;
        let wl = c.workload_of("eager").await?;
        ensure_eq!(wl.spec.pod_sets[0].count, 2);
        c.wait_condition("eager", "QuotaReserved", "False", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn queues_when_full_and_admits_when_the_first_finishes() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("first", "team", 4, 2, &[], true).await?;
        c.wait_condition("first", "Admitted", "True", T).await?;
        c.job("second", "team", 4, 2, &[], true).await?;
        let created = std::time::Instant::now();
        // No explanation within the grace period (--explain-after, 5 s by
        // default, from the Workload's creation); its reason within grace + 5 s.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let early = c.workloads().get_opt("job-second").await?;
        ensure!(
            early
                .as_ref()
                .and_then(|w| w.status.as_ref())
                .and_then(|s| s.pending.as_ref())
                .is_none(),
            "explained within the grace period: {early:?}"
        );
        let wl = c.wait_condition("second", "QuotaReserved", "False", T).await?;
        let waited = created.elapsed();
        ensure!(
            waited <= Duration::from_secs(10),
            "explained after {waited:?} (grace 5 s + 5 s)"
        );
        let pending = status(&wl)?.pending.as_ref().context("not explained")?;
        ensure_eq!(pending.reason, "InsufficientQuota");
        ensure!(c.job_suspended("second").await?);
        c.wait_suspended("first", false, T).await?;
        c.mark_pods("first", 4, "Succeeded").await?;
        c.wait_condition("first", "Finished", "True", T).await?;
        c.wait_condition("second", "Admitted", "True", T).await?;
        c.wait_suspended("second", false, T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_gang_is_admitted_whole_or_not_at_all() -> Result<()> {
    // 6 GPUs; a 4-pod gang of 2 GPUs each needs 8.
    let (mut c, _) = simple(6).await?;
    let result = async {
        c.job("gang", "team", 4, 2, &[], true).await?;
        let wl = c.wait_condition("gang", "QuotaReserved", "False", T).await?;
        ensure_eq!(
            status(&wl)?.pending.as_ref().context("not explained")?.reason,
            "ExceedsQuota"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        ensure!(c.job_suspended("gang").await?, "no part of the gang runs");
        ensure!(c.job_pods("gang").await?.is_empty());
        // A 3-pod gang fits in 6.
        c.job("small", "team", 3, 2, &[], true).await?;
        c.wait_condition("small", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_higher_priority_job_preempts_within_its_queue() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        let urgent = c.priority_class("urgent", 1000).await?;
        c.job("low", "team", 4, 2, &[], true).await?;
        c.wait_suspended("low", false, T).await?;
        c.mark_pods("low", 4, "Running").await?;
        c.job(
            "high",
            "team",
            4,
            2,
            &[(sluice_api::labels::PRIORITY_CLASS, &urgent)],
            true,
        )
        .await?;
        let low = c.wait_condition("low", "Preempted", "True", T).await?;
        let evicted = status(&low)?.condition("Evicted").context("no Evicted")?;
        ensure_eq!(evicted.reason, "Preempted");
        ensure!(evicted.message.contains("job-high"), "{}", evicted.message);
        c.wait_suspended("low", true, T).await?;
        // No kubelet: finish the pods the job controller deleted.
        wait_for("low's pods gone", T, || async {
            c.reap_terminating_pods("low").await?;
            let left = c
                .pods()
                .list(&kube::api::ListParams::default().labels("job-name=low"))
                .await?;
            Ok(left.items.is_empty().then_some(()))
        })
        .await?;
        c.wait_condition("high", "Admitted", "True", T).await?;
        let low = c.wait_condition("low", "Requeued", "True", T).await?;
        ensure!(status(&low)?.admission.is_none(), "admission kept after requeue");
        // The original template is back (no flavor node selector). The
        // restore patch follows the Requeued status write: poll for it.
        wait_for("low's template restored", T, || async {
            let job = c.jobs().get("low").await?;
            let restored = job
                .spec
                .and_then(|s| s.template.spec)
                .is_some_and(|p| p.node_selector.is_none());
            Ok(restored.then_some(()))
        })
        .await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// A Job that names a WorkloadPriorityClass which does not exist yet
/// (applied in one `kubectl apply` with it, or before it) waits, told why
/// (a `PriorityClassMissing` Event), instead of being queued at priority 0
/// for good; once the class exists it is queued at its priority and
/// preempts what runs.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_job_created_before_its_priority_class_waits_for_it_then_preempts() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("low", "team", 4, 2, &[], true).await?;
        c.wait_suspended("low", false, T).await?;
        c.mark_pods("low", 4, "Running").await?;
        let class = c.name("late");
        c.job(
            "high",
            "team",
            4,
            2,
            &[(sluice_api::labels::PRIORITY_CLASS, &class)],
            true,
        )
        .await?;
        wait_for("high told its class is missing", T, || async {
            Ok((c.events_about("Job", "high", "PriorityClassMissing").await? > 0).then_some(()))
        })
        .await?;
        ensure!(
            c.workloads().get_opt("job-high").await?.is_none(),
            "a Workload was made without its priority class"
        );
        ensure_eq!(c.priority_class("late", 1000).await?, class);
        let low = c.wait_condition("low", "Preempted", "True", T).await?;
        ensure!(status(&low)?.condition("Evicted").is_some(), "low not evicted");
        let high = c.workloads().get("job-high").await?;
        ensure_eq!(high.spec.priority, Some(1000));
        ensure_eq!(high.spec.priority_class_name.as_deref(), Some(class.as_str()));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn borrowing_in_a_cohort_and_reclaim() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let reclaim = json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"});
        let a = c.gpu_queue("a", &f, 4, Some("pool"), reclaim.clone()).await?;
        let b = c.gpu_queue("b", &f, 4, Some("pool"), reclaim).await?;
        c.local_queue("qa", &a).await?;
        c.local_queue("qb", &b).await?;
        // Classic reclaim; with fair sharing (the default) the reason is
        // InCohortFairSharing (tests/fair_sharing.rs).
        c.start_controller(&["--fair-sharing=off"]).await?;
        // a borrows b's idle quota: 8 GPUs.
        c.job("borrower", "qa", 4, 2, &[], true).await?;
        c.wait_condition("borrower", "Admitted", "True", T).await?;
        c.mark_pods("borrower", 4, "Running").await?;
        // b wants its own 4 back.
        c.job("owner", "qb", 2, 2, &[], true).await?;
        let wl = c.wait_condition("borrower", "Preempted", "True", T).await?;
        ensure_eq!(
            status(&wl)?.condition("Preempted").context("no Preempted")?.reason,
            "InCohortReclamation"
        );
        wait_for("borrower's pods gone", T, || async {
            c.reap_terminating_pods("borrower").await?;
            let left = c
                .pods()
                .list(&kube::api::ListParams::default().labels("job-name=borrower"))
                .await?;
            Ok(left.items.is_empty().then_some(()))
        })
        .await?;
        c.wait_condition("owner", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn deleting_a_job_releases_its_quota() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("doomed", "team", 4, 2, &[], true).await?;
        c.wait_condition("doomed", "Admitted", "True", T).await?;
        c.job("next", "team", 4, 2, &[], true).await?;
        c.wait_condition("next", "QuotaReserved", "False", T).await?;
        c.jobs()
            .delete("doomed", &kube::api::DeleteParams::background())
            .await?;
        c.wait_condition("next", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_killed_and_restarted_controller_neither_admits_twice_nor_loses_work() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("running", "team", 4, 2, &[], true).await?;
        c.wait_condition("running", "Admitted", "True", T).await?;
        c.wait_suspended("running", false, T).await?;
        c.mark_pods("running", 4, "Running").await?;
        c.job("waiting", "team", 2, 2, &[], true).await?;
        c.wait_condition("waiting", "QuotaReserved", "False", T).await?;
        // SIGKILL: no graceful anything. Then a new process (new identity)
        // takes the Lease once it expires.
        c.controllers[0].kill();
        let i = c.start_controller(&[]).await?;
        let identity = c.controllers[i].identity.clone();
        wait_for("the new process holds the lease", T, || async {
            Ok(c.lease_holder().await?.filter(|h| *h == identity))
        })
        .await?;
        // Leading, its ledger rebuilt (/readyz) and at least one admission
        // cycle run: whatever it would admit, it has admitted by now.
        wait_for("a cycle of the new leader", T, || async {
            let (code, _) = c.controllers[i].get("/readyz")?;
            let cycles = c.controllers[i].metric("sluice_admission_cycle_duration_seconds_count")?;
            Ok((code == 200 && cycles.is_some_and(|n| n >= 1.0)).then_some(()))
        })
        .await?;
        ensure_eq!(
            c.controllers[i].metric("sluice_admitted_workloads_total")?,
            Some(0.0),
            "the new process admitted nothing"
        );
        ensure_eq!(
            c.events_about("Workload", "job-running", "Admitted").await?,
            1,
            "one Admitted Event: not admitted a second time"
        );
        let after = c.workloads().get("job-running").await?;
        ensure!(
            after.status.as_ref().is_some_and(|s| s.admission.is_some()),
            "still admitted"
        );
        ensure!(!c.job_suspended("running").await?, "still running");
        ensure!(
            !c.has_condition("waiting", "Admitted").await?,
            "the ledger counts the running one"
        );
        c.mark_pods("running", 4, "Succeeded").await?;
        c.wait_condition("waiting", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn when_the_leader_dies_the_other_replica_takes_over() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let cq = c.gpu_queue("cq", &f, 8, None, lower_priority()).await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&[]).await?;
        c.start_controller(&[]).await?;
        let holder = wait_for("a lease holder", T, || async { c.lease_holder().await }).await?;
        c.job("one", "team", 1, 1, &[], true).await?;
        c.wait_condition("one", "Admitted", "True", T).await?;
        let leader = c
            .controllers
            .iter()
            .position(|x| x.identity == holder)
            .context("the holder is not one of ours")?;
        c.controllers[leader].kill();
        let other = c.controllers[1 - leader].identity.clone();
        wait_for("the other replica holds the lease", T, || async {
            Ok(c.lease_holder().await?.filter(|h| *h == other))
        })
        .await?;
        c.job("two", "team", 1, 1, &[], true).await?;
        c.wait_condition("two", "Admitted", "True", T).await?;
        // The survivor's metrics show it wrote.
        let (code, metrics) = c.controllers[1 - leader].get("/metrics")?;
        ensure_eq!(code, 200);
        ensure!(metrics.contains("sluice_api_writes_total"), "{metrics}");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_missing_local_queue_is_explained() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("lost", "nowhere", 1, 1, &[], true).await?;
        let wl = c.wait_condition("lost", "QuotaReserved", "False", T).await?;
        let cond = status(&wl)?
            .condition("QuotaReserved")
            .context("no QuotaReserved")?
            .clone();
        ensure_eq!(cond.reason, "LocalQueueMissing");
        ensure!(cond.message.contains("nowhere"), "{}", cond.message);
        ensure!(c.job_suspended("lost").await?);
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_malformed_cluster_queue_does_not_stop_the_controller() -> Result<()> {
    let (mut c, f) = simple(8).await?;
    let result = async {
        // Valid for the schema (and its CEL rules, where the server runs
        // them), invalid for validate(): a lendingLimit above nominalQuota.
        let cohort = c.name("lonely");
        let bad = c
            .cluster_queue(
                "bad",
                json!({"cohort": cohort, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                    {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4", "lendingLimit": "6"}]}]}]}),
            )
            .await?;
        c.local_queue("bad-team", &bad).await?;
        c.job("fine", "team", 1, 1, &[], true).await?;
        c.wait_condition("fine", "Admitted", "True", T).await?;
        c.job("stuck", "bad-team", 1, 1, &[], true).await?;
        let wl = c.wait_condition("stuck", "QuotaReserved", "False", T).await?;
        ensure_eq!(
            status(&wl)?.condition("QuotaReserved").context("no QuotaReserved")?.reason,
            "ClusterQueueMissing"
        );
        let (code, _) = c.controllers[0].get("/readyz")?;
        ensure_eq!(code, 200, "still serving");
        let (_, metrics) = c.controllers[0].get("/metrics")?;
        ensure!(
            metrics.contains("sluice_reconcile_errors_total{kind=\"ClusterQueue\",reason=\"InvalidClusterQueue\"}"),
            "{metrics}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// The `Active` condition of a ClusterQueue (`namespace` None) or of a
/// LocalQueue of the test namespace, once it has one: (status, reason, message).
async fn active(c: &Cluster, namespace: Option<&str>, name: &str) -> Result<Option<(String, String, String)>> {
    use kube::Api;
    use sluice_api::v1alpha1::{ClusterQueue, LocalQueue};
    let conditions = match namespace {
        None => Api::<ClusterQueue>::all(c.client.clone())
            .get(name)
            .await?
            .status
            .map(|s| s.conditions),
        Some(ns) => Api::<LocalQueue>::namespaced(c.client.clone(), ns)
            .get(name)
            .await?
            .status
            .map(|s| s.conditions),
    };
    Ok(conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Active")
        .map(|c| (c.status, c.reason, c.message)))
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn queues_say_why_they_cannot_admit_until_their_flavor_exists() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        // The flavor is named before it exists.
        let late = c.name("late");
        let cq = c.gpu_queue("waiting", &late, 4, None, lower_priority()).await?;
        c.local_queue("team", &cq).await?;
        c.local_queue("orphan", &c.name("nowhere")).await?;
        c.start_controller(&[]).await?;
        let ns = c.namespace.clone();
        let want = |status: &'static str, reason: &'static str| {
            move |got: Option<(String, String, String)>| got.filter(|(s, r, _)| s == status && r == reason)
        };
        let (_, _, msg) = wait_for("ClusterQueue Active=False/FlavorNotFound", T, || async {
            Ok(want("False", "FlavorNotFound")(active(&c, None, &cq).await?))
        })
        .await?;
        ensure!(msg.contains(&late), "{msg}");
        wait_for("LocalQueue team Active=False/ClusterQueueIsInactive", T, || async {
            Ok(want("False", "ClusterQueueIsInactive")(
                active(&c, Some(&ns), "team").await?,
            ))
        })
        .await?;
        wait_for("LocalQueue orphan Active=False/ClusterQueueDoesNotExist", T, || async {
            Ok(want("False", "ClusterQueueDoesNotExist")(
                active(&c, Some(&ns), "orphan").await?,
            ))
        })
        .await?;
        // The flavor appears: both become active and a Job is admitted.
        ensure_eq!(c.flavor("late").await?, late);
        wait_for("ClusterQueue Active=True", T, || async {
            Ok(want("True", "Ready")(active(&c, None, &cq).await?))
        })
        .await?;
        wait_for("LocalQueue team Active=True", T, || async {
            Ok(want("True", "Ready")(active(&c, Some(&ns), "team").await?))
        })
        .await?;
        c.job("first", "team", 1, 1, &[], true).await?;
        c.wait_condition("first", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn pods_never_ready_are_evicted_requeued_then_deactivated_past_the_requeue_limit() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let cq = c.gpu_queue("gpu", &f, 8, None, lower_priority()).await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&[
            "--pods-ready-timeout",
            "5s",
            "--requeue-backoff-base",
            "1s",
            "--requeue-limit",
            "1",
        ])
        .await?;
        // Nobody marks its pods ready (no kubelet here).
        c.job("stuck", "team", 2, 1, &[], true).await?;
        let wl = c.wait_condition("stuck", "Evicted", "True", T).await?;
        let evicted = status(&wl)?.condition("Evicted").context("no Evicted")?.clone();
        ensure_eq!(evicted.reason, "PodsReadyTimeout");
        // Pods gone (unscheduled pods go at once; reap any still terminating),
        // requeued after the backoff, admitted again, timed out again: now
        // past the limit of 1 requeue, deactivated instead.
        wait_for("Workload deactivated", Duration::from_secs(120), || async {
            c.reap_terminating_pods("stuck").await?;
            let wl = c.workload_of("stuck").await?;
            Ok((!wl.spec.active).then_some(()))
        })
        .await?;
        let wl = wait_for("Requeued=False/Deactivated", T, || async {
            c.reap_terminating_pods("stuck").await?;
            let wl = c.workload_of("stuck").await?;
            let done = wl
                .status
                .as_ref()
                .and_then(|s| s.condition("Requeued"))
                .is_some_and(|r| r.status == "False" && r.reason == "Deactivated");
            Ok(done.then_some(wl))
        })
        .await?;
        ensure_eq!(status(&wl)?.requeue_state.as_ref().map(|r| r.count), Some(2));
        ensure!(status(&wl)?.admission.is_none(), "quota released");
        ensure!(c.job_suspended("stuck").await?, "its Job stays suspended");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// Issue 39: a ClusterQueue serves the namespaces its `namespaceSelector`
/// selects, and none without one (Kueue's meaning). A LocalQueue in the
/// test namespace (another team's) points at each kind of ClusterQueue.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_cluster_queue_serves_only_the_namespaces_it_selects() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let gpus = |selector: serde_json::Value| {
            json!({"namespaceSelector": selector, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]})
        };
        let ns = c.namespace.clone();
        let unset = c.cluster_queue("team-a", gpus(json!(null))).await?;
        let all = c.cluster_queue("everyone", gpus(json!({}))).await?;
        let mine = c
            .cluster_queue(
                "mine",
                gpus(json!({"matchLabels": {"kubernetes.io/metadata.name": ns}})),
            )
            .await?;
        let others = c
            .cluster_queue(
                "others",
                gpus(json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})),
            )
            .await?;
        for (lq, cq) in [
            ("borrowed", &unset),
            ("open", &all),
            ("own", &mine),
            ("elsewhere", &others),
        ] {
            c.local_queue(lq, cq).await?;
        }
        c.start_controller(&[]).await?;
        for (job, lq) in [
            ("sneaky", "borrowed"),
            ("open", "open"),
            ("own", "own"),
            ("stray", "elsewhere"),
        ] {
            c.job(job, lq, 1, 4, &[], true).await?;
        }
        // `{}` and a matching selector: admitted.
        c.wait_condition("open", "Admitted", "True", T).await?;
        c.wait_condition("own", "Admitted", "True", T).await?;
        // No selector: held, and told why (status, Event).
        let wl = c.wait_condition("sneaky", "QuotaReserved", "False", T).await?;
        let held = wait_for("sneaky held with NamespaceNotSelected", T, || async {
            let wl = c.workload_of("sneaky").await?;
            let s = wl.status.clone().unwrap_or_default();
            Ok(s.pending.filter(|p| p.reason == "NamespaceNotSelected"))
        })
        .await?;
        ensure_eq!(
            held.message,
            format!(
                "namespace {ns} is not selected by ClusterQueue {unset}: it has no namespaceSelector, which selects \
                 no namespace (set namespaceSelector: {{}} to serve every namespace)"
            )
        );
        let name = wl.metadata.name.clone().context("no name")?;
        wait_for("a NamespaceNotSelected Event", T, || async {
            Ok((c.events_about("Workload", &name, "NamespaceNotSelected").await? > 0).then_some(()))
        })
        .await?;
        ensure!(c.job_suspended("sneaky").await?, "held Job runs");
        // A selector that does not match: held, the selector named.
        let stray = wait_for("stray held", T, || async {
            let wl = c.workload_of("stray").await?;
            Ok(wl
                .status
                .and_then(|s| s.pending)
                .filter(|p| p.reason == "NamespaceNotSelected"))
        })
        .await?;
        ensure!(
            stray
                .message
                .contains("its namespaceSelector {matchLabels: kubernetes.io/metadata.name=team-a} does not match"),
            "{}",
            stray.message
        );
        // The ClusterQueue without selector says so, naming the LocalQueue.
        let cqs: kube::Api<sluice_api::ClusterQueue> = kube::Api::all(c.client.clone());
        let selected = wait_for("NamespacesSelected=False on the ClusterQueue", T, || async {
            let q = cqs.get(&unset).await?;
            Ok(q.status
                .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "NamespacesSelected")))
        })
        .await?;
        ensure_eq!(
            (selected.status.as_str(), selected.reason.as_str()),
            ("False", "NoNamespaceSelector")
        );
        ensure!(
            selected.message.contains(&format!("{ns}/borrowed")),
            "{}",
            selected.message
        );
        // The upgrade fix: `{}` lets it in.
        cqs.patch(
            &unset,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"namespaceSelector": {}}})),
        )
        .await?;
        c.wait_condition("sneaky", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
