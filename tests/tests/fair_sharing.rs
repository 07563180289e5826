//! End-to-end tests of fair sharing in a cohort and of partial admission
//! (`sluice.dev/min-parallelism`) against a real API server.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test fair_sharing -- --ignored --test-threads=1
//! ```
//!
//! Like `controller.rs`: no webhook (Jobs are created suspended), no
//! kubelet (the harness writes pod statuses and reaps terminating pods).
//! The controller runs with its default `--fair-sharing=on`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ClusterQueue, Cohort};
use sluice_e2e::cluster::{Cluster, GPU, metric_value, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

/// A ClusterQueue of `cohort` with no GPUs of its own (everything it runs
/// is borrowed from the Cohort), weight 1, reclaiming from any peer.
fn borrowing_queue(cohort: &str, flavor: &str) -> Value {
    json!({
        "cohort": cohort,
        "fairSharing": {"weight": "1"},
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": flavor, "resources": [{"name": GPU, "nominalQuota": "0"}]}]}]
    })
}

/// Names of the Jobs among `jobs` whose Workload holds `type_=True`.
async fn with_condition(c: &Cluster, jobs: &[String], type_: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for j in jobs {
        if c.has_condition(j, type_).await? {
            out.push(j.clone());
        }
    }
    Ok(out)
}

/// A ClusterQueue's `status.fairSharing.weightedShare`, once written.
async fn weighted_share(c: &Cluster, name: &str) -> Result<Option<i64>> {
    let cq = Api::<ClusterQueue>::all(c.client.clone()).get(name).await?;
    Ok(cq.status.and_then(|s| s.fair_sharing).map(|f| f.weighted_share))
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn two_queues_of_equal_weight_end_with_equal_halves_of_their_cohort() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        // The 4 GPUs belong to the Cohort; the queues hold none of their own.
        let pool = c
            .cohort(
                "pool",
                json!({"fairSharing": {"weight": "1"}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": f, "resources": [{"name": GPU, "nominalQuota": "4"}]}]}]}),
            )
            .await?;
        let a = c.cluster_queue("a", borrowing_queue(&pool, &f)).await?;
        let b = c.cluster_queue("b", borrowing_queue(&pool, &f)).await?;
        c.local_queue("qa", &a).await?;
        c.local_queue("qb", &b).await?;
        c.start_controller(&[]).await?;

        // a floods first: all 4 of its Jobs fit in the idle cohort.
        let a_jobs: Vec<String> = (0..4).map(|i| format!("a{i}")).collect();
        for j in &a_jobs {
            c.job(j, "qa", 1, 1, &[], true).await?;
        }
        for j in &a_jobs {
            c.wait_condition(j, "Admitted", "True", T).await?;
            c.wait_suspended(j, false, T).await?;
            c.mark_pods(j, 1, "Running").await?;
        }
        // It borrows all 4 GPUs its cohort can lend: share 1000.
        wait_for("a's share 1000", T, || async {
            Ok((weighted_share(&c, &a).await? == Some(1000)).then_some(()))
        })
        .await?;

        // b asks for 4 too: fair sharing preempts a down to its half.
        let b_jobs: Vec<String> = (0..4).map(|i| format!("b{i}")).collect();
        for j in &b_jobs {
            c.job(j, "qb", 1, 1, &[], true).await?;
        }
        wait_for("two of b's Jobs admitted", Duration::from_secs(120), || async {
            // No kubelet: finish the pods the job controller deletes.
            for j in &a_jobs {
                c.reap_terminating_pods(j).await?;
            }
            let admitted = with_condition(&c, &b_jobs, "Admitted").await?;
            Ok((admitted.len() >= 2).then_some(()))
        })
        .await?;
        // Settled: 2 and 2, and it stays so (a third of b's would leave b
        // above a; a Job of a taking one back would do the same to a).
        tokio::time::sleep(Duration::from_secs(5)).await;
        for j in &a_jobs {
            c.reap_terminating_pods(j).await?;
        }
        let a_running = with_condition(&c, &a_jobs, "Admitted").await?;
        let b_running = with_condition(&c, &b_jobs, "Admitted").await?;
        ensure_eq!(
            (a_running.len(), b_running.len()),
            (2, 2),
            "a: {a_running:?}, b: {b_running:?}"
        );
        for j in &b_running {
            ensure!(!c.job_suspended(j).await?, "{j} admitted but suspended");
        }
        // a's other two were preempted by the share rule.
        let victims: Vec<&String> = a_jobs.iter().filter(|j| !a_running.contains(j)).collect();
        for j in victims {
            let wl = c.workloads().get(&format!("job-{j}")).await?;
            let preempted = wl
                .status
                .as_ref()
                .and_then(|s| s.condition("Preempted"))
                .with_context(|| format!("{j}: no Preempted condition"))?;
            ensure_eq!(preempted.reason, "InCohortFairSharing", "{j}");
            ensure!(c.job_suspended(j).await?, "{j} preempted but running");
        }
        // Equal halves: equal weighted shares, in status and in metrics.
        wait_for("a and b at share 500", T, || async {
            let shares = (weighted_share(&c, &a).await?, weighted_share(&c, &b).await?);
            Ok((shares == (Some(500), Some(500))).then_some(()))
        })
        .await?;
        let (_, metrics) = c.controllers[0].get("/metrics")?;
        for q in [&a, &b] {
            let sample = format!("sluice_cluster_queue_weighted_share{{cluster_queue=\"{q}\"}}");
            ensure_eq!(metric_value(&metrics, &sample), Some(500.0), "{sample}");
        }
        // The Cohort itself: a root, share 0, and Active.
        let status = wait_for("the Cohort's status", T, || async {
            let co = Api::<Cohort>::all(c.client.clone()).get(&pool).await?;
            Ok(co.status.filter(|s| s.fair_sharing.is_some()))
        })
        .await?;
        ensure_eq!(status.fair_sharing.map(|f| f.weighted_share), Some(0));
        let active = status
            .conditions
            .iter()
            .find(|cond| cond.type_ == "Active")
            .context("no Active condition")?;
        ensure_eq!(active.status, "True");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// A Job of `pods` pods of 1 GPU in LocalQueue `team` that may run with
/// `min` (`sluice.dev/min-parallelism`), created suspended.
async fn min_parallelism_job(c: &Cluster, name: &str, pods: i32, min: i32) -> Result<Job> {
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {sluice_api::labels::QUEUE: "team"},
                     "annotations": {sluice_api::labels::MIN_PARALLELISM: min.to_string()}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {GPU: "1"}}}]}}}
    }))?;
    Ok(c.jobs().create(&PostParams::default(), &job).await?)
}

fn parallelism_of(job: &Job) -> (Option<i32>, Option<i32>, Option<String>) {
    let spec = job.spec.as_ref();
    let recorded = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a: &BTreeMap<String, String>| a.get("sluice.dev/original-parallelism"))
        .cloned();
    (
        spec.and_then(|s| s.parallelism),
        spec.and_then(|s| s.completions),
        recorded,
    )
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_job_admitted_with_fewer_pods_runs_with_them_and_gets_its_parallelism_back_when_evicted() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let cq = c
            .gpu_queue("cq", &f, 2, None, json!({"withinClusterQueue": "LowerPriority"}))
            .await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&[]).await?;
        // 4 pods asked for, 2 GPUs in the queue, at least 2 pods.
        min_parallelism_job(&c, "sweep", 4, 2).await?;
        let wl = c.wait_condition("sweep", "Admitted", "True", T).await?;
        let adm = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .context("no admission")?;
        ensure_eq!(adm.pod_set_assignments[0].count, 2);
        ensure_eq!(wl.spec.pod_sets[0].count, 4);
        ensure_eq!(wl.spec.pod_sets[0].min_count, Some(2));
        let started = c.wait_suspended("sweep", false, T).await?;
        ensure_eq!(
            parallelism_of(&started),
            (Some(2), Some(4), Some("4".to_string())),
            "parallelism lowered, completions untouched, the original recorded"
        );
        c.mark_pods("sweep", 2, "Running").await?;
        ensure_eq!(c.job_pods("sweep").await?.len(), 2, "the job controller runs 2 pods");

        // A higher-priority Job takes the 2 GPUs: sweep is preempted.
        c.urgent_job(2, 1).await?;
        c.wait_condition("sweep", "Preempted", "True", T).await?;
        c.wait_suspended("sweep", true, T).await?;
        wait_for("sweep's pods gone", T, || async {
            c.reap_terminating_pods("sweep").await?;
            Ok(c.job_pods("sweep").await?.is_empty().then_some(()))
        })
        .await?;
        c.wait_condition("sweep", "Requeued", "True", T).await?;
        // Suspended again: it asks for its 4 pods as written.
        let restored = wait_for("sweep's parallelism restored", T, || async {
            let j = c.jobs().get("sweep").await?;
            Ok((parallelism_of(&j).0 == Some(4)).then_some(j))
        })
        .await?;
        ensure_eq!(parallelism_of(&restored), (Some(4), Some(4), None));
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
