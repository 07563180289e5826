//! End-to-end test of preemption with a notice (ClusterQueue
//! `spec.preemption.noticeSeconds`) against a real API server: the victim
//! is told, keeps running and holds its quota for the preemptor; once it
//! acknowledges (`sluice.dev/checkpoint-done`) it is suspended, long
//! before the deadline, and the preemptor is admitted.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test preemption_notice -- --ignored --test-threads=1
//! ```
//!
//! Same harness as `tests/controller.rs` (kube-apiserver and
//! kube-controller-manager; the harness writes pod statuses).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::labels::{CHECKPOINT_DONE, PREEMPTION_NOTICE};
use sluice_api::v1alpha1::Workload;
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);
const NOTICE_SECS: i64 = 300;

/// Whether the Workload's condition `type_` is `True`.
fn is_true(wl: &Workload, type_: &str) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| s.condition(type_))
        .is_some_and(|c| c.status == "True")
}

/// The deadline a `PreemptionNotice` message states ("… it is suspended
/// at <time>, or as soon as …").
fn stated_deadline(message: &str) -> Result<Timestamp> {
    let text = message
        .split("it is suspended at ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .with_context(|| format!("no deadline in {message:?}"))?;
    Ok(text.parse()?)
}

/// A ClusterQueue of 8 GPUs giving a notice of `secs`, the controller
/// running, `low` (8 GPUs) admitted with its pods running, then `high`
/// (8 GPUs, higher priority) created: it preempts `low`.
async fn low_preempted_by_high(c: &mut Cluster, secs: i64) -> Result<()> {
    let f = c.flavor("a100").await?;
    let policy = json!({"withinClusterQueue": "LowerPriority", "noticeSeconds": secs});
    let cq = c.gpu_queue("cq", &f, 8, None, policy).await?;
    c.local_queue("team", &cq).await?;
    // Before the controller starts: its initial list has it, so `high`'s
    // priority cannot depend on how soon a watch event arrives.
    let urgent = c.priority_class("urgent", 1000).await?;
    c.start_controller(&[]).await?;
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
    Ok(())
}

/// Waits for `job`'s pods to go (no kubelet: the harness finishes them).
async fn pods_gone(c: &Cluster, job: &str) -> Result<()> {
    wait_for(&format!("{job}'s pods gone"), T, || async {
        c.reap_terminating_pods(job).await?;
        Ok(c.job_pods(job).await?.is_empty().then_some(()))
    })
    .await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn preemption_notice_ack() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        low_preempted_by_high(&mut c, NOTICE_SECS).await?;

        // 1. The notice: a deadline NOTICE_SECS after its start, on the
        // Workload and on each running pod.
        let low = c.wait_condition("low", "PreemptionNotice", "True", T).await?;
        let notice = low
            .status
            .as_ref()
            .and_then(|s| s.condition("PreemptionNotice"))
            .context("no PreemptionNotice")?;
        ensure_eq!(notice.reason, "Preempted");
        ensure!(notice.message.contains("job-high"), "{}", notice.message);
        let deadline = stated_deadline(&notice.message)?;
        let start = notice.last_transition_time.0;
        ensure_eq!(deadline.duration_since(start), SignedDuration::from_secs(NOTICE_SECS));
        let ahead = deadline.duration_since(Timestamp::now());
        ensure!(
            ahead > SignedDuration::from_secs(NOTICE_SECS - 60),
            "the deadline is {ahead} ahead"
        );
        wait_for("low's pods annotated with the deadline", T, || async {
            let pods = c.job_pods("low").await?;
            let annotated = pods.iter().all(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(PREEMPTION_NOTICE))
                    .is_some_and(|d| d.parse::<Timestamp>().is_ok_and(|d| d == deadline))
            });
            Ok((pods.len() == 4 && annotated).then_some(()))
        })
        .await?;

        // 2. Meanwhile the victim runs and holds its quota: neither the
        // preemptor nor a small job that would fit in what it frees is
        // admitted.
        c.job("small", "team", 1, 2, &[], true).await?;
        c.wait_condition("small", "QuotaReserved", "False", T).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        ensure!(
            !c.job_suspended("low").await?,
            "the victim is suspended during its notice"
        );
        let low = c.workload_of("low").await?;
        ensure!(!is_true(&low, "Evicted"), "evicted during its notice");
        ensure!(is_true(&low, "QuotaReserved"), "the victim holds its quota");
        for job in ["high", "small"] {
            ensure!(
                !is_true(&c.workload_of(job).await?, "QuotaReserved"),
                "{job} was admitted during the notice"
            );
        }

        // 3. The victim saved its state: suspended at once.
        let acked = Instant::now();
        let ack = json!({"metadata": {"annotations": {CHECKPOINT_DONE: Timestamp::now().to_string()}}});
        c.jobs()
            .patch("low", &PatchParams::default(), &Patch::Merge(&ack))
            .await?;
        c.wait_suspended("low", true, T).await?;
        ensure!(
            acked.elapsed() < Duration::from_secs(30),
            "suspended {:?} after the acknowledgement",
            acked.elapsed()
        );
        ensure!(Timestamp::now() < deadline, "not before the deadline");
        let low = c.wait_condition("low", "PreemptionNotice", "False", T).await?;
        let status = low.status.as_ref().context("no status")?;
        ensure_eq!(
            status.condition("PreemptionNotice").map(|c| c.reason.as_str()),
            Some("Suspended")
        );
        ensure_eq!(
            status.condition("Evicted").map(|c| c.reason.as_str()),
            Some("Preempted")
        );

        // 4. Its pods gone, the preemptor gets the capacity, the small job
        // still none.
        pods_gone(&c, "low").await?;
        c.wait_condition("high", "Admitted", "True", T).await?;
        ensure!(
            Timestamp::now() < deadline,
            "the preemptor was admitted only after the deadline"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(
            !is_true(&c.workload_of("small").await?, "QuotaReserved"),
            "small took capacity the preemptor claimed"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// Without an acknowledgement the victim runs until the deadline, then is
/// suspended and the preemptor admitted.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn preemption_notice_expires() -> Result<()> {
    const SHORT: i64 = 8;
    let mut c = Cluster::start().await?;
    let result = async {
        low_preempted_by_high(&mut c, SHORT).await?;
        let low = c.wait_condition("low", "PreemptionNotice", "True", T).await?;
        let notice = low
            .status
            .as_ref()
            .and_then(|s| s.condition("PreemptionNotice"))
            .context("no PreemptionNotice")?;
        let deadline = stated_deadline(&notice.message)?;
        ensure_eq!(
            deadline.duration_since(notice.last_transition_time.0),
            SignedDuration::from_secs(SHORT)
        );
        c.wait_suspended("low", true, T).await?;
        let suspended_at = Timestamp::now();
        ensure!(
            suspended_at >= deadline,
            "suspended at {suspended_at}, before the deadline {deadline}"
        );
        ensure!(
            suspended_at.duration_since(deadline) < SignedDuration::from_secs(10),
            "suspended at {suspended_at}, long after the deadline {deadline}"
        );
        let low = c.wait_condition("low", "PreemptionNotice", "False", T).await?;
        let ended = low
            .status
            .as_ref()
            .and_then(|s| s.condition("PreemptionNotice"))
            .context("no PreemptionNotice")?;
        ensure_eq!(ended.reason, "Suspended");
        ensure!(ended.message.contains("notice ended"), "{}", ended.message);
        pods_gone(&c, "low").await?;
        c.wait_condition("high", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
