//! End-to-end tests of `sluice controller` against a real API server.
//!
//! ```text
//! cargo build -p sluice-cli
//! SLUICE_E2E_KUBECONFIG=~/.kube/config cargo test -p sluice-e2e --test controller -- --ignored --test-threads=1
//! ```
//!
//! Needs kube-apiserver and kube-controller-manager (the job controller
//! makes the pods and the Job status); no kubelet or scheduler is needed:
//! the harness (`sluice_e2e::cluster`) writes pod statuses itself. No
//! webhook runs here, so Jobs are created suspended, as the webhook would
//! make them. See the harness docs for what each helper does.

use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use sluice_e2e::cluster::{Cluster, wait_for};

const T: Duration = Duration::from_secs(60);

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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn admits_a_job_that_fits_onto_its_flavor() -> Result<()> {
    let (mut c, flavor) = simple(8).await?;
    let result = async {
        c.job("train", "team", 4, 2, &[], true).await?;
        let wl = c.wait_condition("train", "Admitted", "True", T).await?;
        let adm = wl.status.as_ref().unwrap().admission.as_ref().unwrap();
        assert_eq!(adm.pod_set_assignments[0].flavors["nvidia.com/gpu"], flavor);
        assert_eq!(adm.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "8");
        // Owned by the Job (deleting the Job deletes it).
        let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
        let job = c.wait_suspended("train", false, T).await?;
        let sel = job.spec.unwrap().template.spec.unwrap().node_selector.unwrap();
        assert_eq!(sel.get("sluice.dev/e2e-gpu"), Some(&flavor));
        c.mark_pods("train", 4, "Running").await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn a_queued_job_created_unsuspended_is_suspended_then_admitted() -> Result<()> {
    // Quota for nothing: the Job must be held.
    let (mut c, _) = simple(1).await?;
    let result = async {
        c.job("eager", "team", 2, 1, &[], false).await?;
        c.wait_suspended("eager", true, T).await?;
        let wl = c.workload_of("eager").await?;
        assert_eq!(wl.spec.pod_sets[0].count, 2);
        c.wait_condition("eager", "QuotaReserved", "False", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn queues_when_full_and_admits_when_the_first_finishes() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("first", "team", 4, 2, &[], true).await?;
        c.wait_condition("first", "Admitted", "True", T).await?;
        c.job("second", "team", 4, 2, &[], true).await?;
        let wl = c.wait_condition("second", "QuotaReserved", "False", T).await?;
        let pending = wl.status.as_ref().unwrap().pending.as_ref().expect("explained");
        assert_eq!(pending.reason, "InsufficientQuota");
        assert!(c.job_suspended("second").await?);
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn a_gang_is_admitted_whole_or_not_at_all() -> Result<()> {
    // 6 GPUs; a 4-pod gang of 2 GPUs each needs 8.
    let (mut c, _) = simple(6).await?;
    let result = async {
        c.job("gang", "team", 4, 2, &[], true).await?;
        let wl = c.wait_condition("gang", "QuotaReserved", "False", T).await?;
        assert_eq!(
            wl.status.as_ref().unwrap().pending.as_ref().unwrap().reason,
            "ExceedsQuota"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(c.job_suspended("gang").await?, "no part of the gang runs");
        assert!(c.job_pods("gang").await?.is_empty());
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
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
        let evicted = low.status.as_ref().unwrap().condition("Evicted").unwrap();
        assert_eq!(evicted.reason, "Preempted");
        assert!(evicted.message.contains("job-high"), "{}", evicted.message);
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
        assert!(low.status.as_ref().unwrap().admission.is_none());
        // The original template is back (no flavor node selector).
        let job = c.jobs().get("low").await?;
        assert!(job.spec.unwrap().template.spec.unwrap().node_selector.is_none());
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn borrowing_in_a_cohort_and_reclaim() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let reclaim = json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"});
        let a = c.gpu_queue("a", &f, 4, Some("pool"), reclaim.clone()).await?;
        let b = c.gpu_queue("b", &f, 4, Some("pool"), reclaim).await?;
        c.local_queue("qa", &a).await?;
        c.local_queue("qb", &b).await?;
        c.start_controller(&[]).await?;
        // a borrows b's idle quota: 8 GPUs.
        c.job("borrower", "qa", 4, 2, &[], true).await?;
        c.wait_condition("borrower", "Admitted", "True", T).await?;
        c.mark_pods("borrower", 4, "Running").await?;
        // b wants its own 4 back.
        c.job("owner", "qb", 2, 2, &[], true).await?;
        let wl = c.wait_condition("borrower", "Preempted", "True", T).await?;
        assert_eq!(
            wl.status.as_ref().unwrap().condition("Preempted").unwrap().reason,
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn a_killed_and_restarted_controller_neither_admits_twice_nor_loses_work() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("running", "team", 4, 2, &[], true).await?;
        let before = c.wait_condition("running", "Admitted", "True", T).await?;
        c.wait_suspended("running", false, T).await?;
        c.mark_pods("running", 4, "Running").await?;
        c.job("waiting", "team", 2, 2, &[], true).await?;
        c.wait_condition("waiting", "QuotaReserved", "False", T).await?;
        // SIGKILL: no graceful anything. Then a new process (new identity)
        // takes the Lease once it expires.
        c.controllers[0].kill();
        c.start_controller(&[]).await?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = c.workloads().get("job-running").await?;
        let t = |w: &sluice_api::v1alpha1::Workload| {
            w.status
                .as_ref()
                .unwrap()
                .condition("Admitted")
                .unwrap()
                .last_transition_time
                .clone()
        };
        assert_eq!(t(&before), t(&after), "not admitted a second time");
        assert!(!c.job_suspended("running").await?, "still running");
        assert!(
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
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
            .expect("holder is ours");
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
        assert_eq!(code, 200);
        assert!(metrics.contains("sluice_api_writes_total"), "{metrics}");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
async fn a_missing_local_queue_is_explained() -> Result<()> {
    let (mut c, _) = simple(8).await?;
    let result = async {
        c.job("lost", "nowhere", 1, 1, &[], true).await?;
        let wl = c.wait_condition("lost", "QuotaReserved", "False", T).await?;
        let cond = wl.status.as_ref().unwrap().condition("QuotaReserved").unwrap().clone();
        assert_eq!(cond.reason, "LocalQueueMissing");
        assert!(cond.message.contains("nowhere"), "{}", cond.message);
        assert!(c.job_suspended("lost").await?);
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs SLUICE_E2E_KUBECONFIG"]
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
        assert_eq!(
            wl.status.as_ref().unwrap().condition("QuotaReserved").unwrap().reason,
            "ClusterQueueMissing"
        );
        let (code, _) = c.controllers[0].get("/readyz")?;
        assert_eq!(code, 200, "still serving");
        let (_, metrics) = c.controllers[0].get("/metrics")?;
        assert!(
            metrics.contains("sluice_reconcile_errors_total{kind=\"ClusterQueue\",reason=\"InvalidClusterQueue\"}"),
            "{metrics}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
