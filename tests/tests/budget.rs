//! End-to-end test of usage accounting and budgets against a real API
//! server: a ClusterQueue with a tiny GPU budget is warned, then
//! deprioritized (the other queue of its cohort is served first and
//! takes its idle quota), then stopped (a new job waits, saying what was
//! spent), while its running job runs on. The controller is killed
//! and a new one started in the middle: the usage it reports afterwards
//! is the usage reported before plus the time in between, within one
//! flush interval.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test budget -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use serde_json::json;
use sluice_api::v1alpha1::{ClusterQueue, UsageStatus};
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const GPU: &str = "nvidia.com/gpu";
/// Usage is flushed into status this often.
const FLUSH_S: f64 = 2.0;

fn queue_spec(flavor: &str, cohort: &str, gpus: u32) -> serde_json::Value {
    json!({
        "cohort": cohort,
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": flavor, "resources": [{"name": GPU, "nominalQuota": gpus.to_string()}]}]}]
    })
}

async fn cluster_queue(c: &Cluster, name: &str) -> Result<ClusterQueue> {
    Ok(Api::<ClusterQueue>::all(c.client.clone()).get(name).await?)
}

/// The queue's `WithinBudget` condition once its reason is `reason`.
async fn wait_budget(c: &Cluster, cq: &str, reason: &str, timeout: Duration) -> Result<Condition> {
    wait_for(&format!("{cq} WithinBudget {reason}"), timeout, || async {
        let q = cluster_queue(c, cq).await?;
        Ok(q.status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "WithinBudget"))
            .filter(|c| c.reason == reason))
    })
    .await
}

/// GPU-hours in a `status.usage`, and when it was flushed (seconds).
fn gpu_hours(u: &UsageStatus) -> Result<(f64, f64)> {
    let hours = u
        .resources
        .iter()
        .filter(|r| r.resource == GPU)
        .map(|r| r.total.parse::<f64>().context("total"))
        .sum::<Result<f64>>()?;
    Ok((hours, u.flushed_at.0.as_millisecond() as f64 / 1000.0))
}

async fn usage_of(c: &Cluster, cq: &str) -> Result<Option<UsageStatus>> {
    Ok(cluster_queue(c, cq).await?.status.and_then(|s| s.usage.map(|u| *u)))
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_tiny_budget_warns_then_deprioritizes_then_stops_its_queue_across_a_controller_restart() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let f = c.flavor("a100").await?;
        let pool = c.name("pool");
        // Team A: 4 GPUs and 0.04 GPU-hours a day (144 GPU-seconds):
        // warned at 25 % (36 GPU-s), deprioritized at 50 %, stopped at 100 %.
        let mut a_spec = queue_spec(&f, &pool, 4);
        a_spec["budget"] = json!({"hours": "40m", "period": "1d", "actions": [
            {"atPercent": 25, "action": "Warn"},
            {"atPercent": 50, "action": "Deprioritize"},
            {"atPercent": 100, "action": "Stop"}]});
        let a = c.cluster_queue("team-a", a_spec).await?;
        let b = c.cluster_queue("team-b", queue_spec(&f, &pool, 4)).await?;
        c.local_queue("a", &a).await?;
        c.local_queue("b", &b).await?;
        let flush = format!("--usage-flush-interval={FLUSH_S}s");
        c.start_controller(&[&flush]).await?;

        // 1. A job of 2 GPUs runs; within budget at first.
        c.job("run", "a", 1, 2, &[], true).await?;
        c.wait_suspended("run", false, Duration::from_secs(30)).await?;
        let ok = wait_budget(&c, &a, "WithinBudget", Duration::from_secs(30)).await?;
        ensure_eq!(ok.status, "True", "{}", ok.message);

        // 2. 36 GPU-seconds in (~18 s): warned, with an Event. Team B's
        //    `blocker` (6 GPUs) borrows team A's 2 idle ones; team A's
        //    `a-next` (2 GPUs, within its nominal quota) waits for them.
        let warn = wait_budget(&c, &a, "Warn", Duration::from_secs(60)).await?;
        ensure!(warn.status == "False" && warn.message.starts_with("Budget warning"), "{warn:?}");
        wait_for("BudgetWarn event", Duration::from_secs(30), || async {
            Ok((c.events_about_in("default", "ClusterQueue", &a, "BudgetWarn").await? > 0).then_some(()))
        })
        .await?;
        c.job("blocker", "b", 3, 2, &[], true).await?;
        c.wait_suspended("blocker", false, Duration::from_secs(30)).await?;
        c.job("a-next", "a", 1, 2, &[], true).await?;
        c.workload_of("a-next").await?;

        // 3. 72 GPU-seconds in: deprioritized. Team B's `b-next` (6 GPUs:
        //    its 4 and team A's 2) arrives after `a-next`. When `blocker`
        //    ends, one cycle sees both: `b-next` is served first and takes
        //    team A's idle GPUs, `a-next` waits. (Within budget, `a-next`
        //    fits its nominal quota and would be admitted first.)
        wait_budget(&c, &a, "Deprioritize", Duration::from_secs(60)).await?;
        ensure_eq!(c.events_about_in("default", "ClusterQueue", &a, "BudgetDeprioritize").await?, 1);
        c.job("b-next", "b", 3, 2, &[], true).await?;
        c.workload_of("b-next").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        c.mark_pods("blocker", 3, "Succeeded").await?;
        c.wait_suspended("b-next", false, Duration::from_secs(30)).await?;
        let message = wait_for("a-next waits", Duration::from_secs(30), || async {
            let wl = c.workload_of("a-next").await?;
            let cond = wl.status.as_ref().and_then(|s| s.condition("QuotaReserved")).cloned();
            Ok(cond.filter(|c| c.status == "False" && c.reason == "InsufficientQuota").map(|c| c.message))
        })
        .await?;
        ensure!(c.job_suspended("a-next").await?, "a-next was admitted before b-next");
        ensure!(message.contains("0 borrowable"), "{message}");

        // 4. The controller is killed mid-way and a new one started.
        let before = wait_for("a flushed usage", Duration::from_secs(30), || async {
            usage_of(&c, &a).await
        })
        .await?;
        let (hours_before, at_before) = gpu_hours(&before)?;
        c.controllers[0].kill();
        tokio::time::sleep(Duration::from_secs(3)).await;
        c.start_controller(&[&flush]).await?;
        let after = wait_for("a usage flushed by the new controller", Duration::from_secs(30), || async {
            let u = usage_of(&c, &a).await?;
            Ok(u.filter(|u| u.flushed_at.0.as_millisecond() as f64 / 1000.0 > at_before + 3.0))
        })
        .await?;
        let (hours_after, at_after) = gpu_hours(&after)?;
        // The new controller does not tell again what the status says.
        ensure_eq!(c.events_about_in("default", "ClusterQueue", &a, "BudgetDeprioritize").await?, 1);
        // `run` held 2 GPUs all along (`a-next` never ran).
        let expected = hours_before + 2.0 * (at_after - at_before) / 3600.0;
        let tolerance = 2.0 * FLUSH_S / 3600.0;
        eprintln!(
            "usage across the restart: {hours_before} GPU-h at {at_before}, {hours_after} at {at_after}, expected {expected} ± {tolerance}"
        );
        ensure!(
            (hours_after - expected).abs() <= tolerance,
            "after the restart {hours_after} GPU-hours at {at_after}, expected {expected} (before: {hours_before} at {at_before})"
        );

        // 5. 144 GPU-seconds in: stopped. A new job waits, told what was
        // spent; `run` runs on.
        let stop = wait_budget(&c, &a, "Stop", Duration::from_secs(90)).await?;
        ensure!(stop.message.contains("nothing new is admitted"), "{stop:?}");
        c.job("late", "a", 1, 1, &[], true).await?;
        let message = wait_for("late waits for the budget", Duration::from_secs(30), || async {
            let wl = c.workload_of("late").await?;
            let cond = wl.status.as_ref().and_then(|s| s.condition("QuotaReserved")).cloned();
            Ok(cond.filter(|c| c.reason == "BudgetSpent").map(|c| c.message))
        })
        .await?;
        ensure!(message.contains("the ClusterQueue's budget stops new admissions"), "{message}");
        ensure!(!c.job_suspended("run").await?, "the running job was stopped");
        let status = cluster_queue(&c, &a).await?.status.context("status")?;
        let budget = status.budget.context("status.budget")?;
        ensure!(budget.percent >= 100, "{budget:?}");
        ensure_eq!(budget.limit, "0.04");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
