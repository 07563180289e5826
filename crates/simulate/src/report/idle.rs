//! The report's `idle` section: idle-GPU reclaim's figures (present when
//! some ClusterQueue has `idleReclaim` or some workload a utilisation
//! profile).
//!
//! - *GPU-hours idle*: for every run, the workload's GPUs × the time its
//!   pods ran (start to end of the run, or of the simulation) while its
//!   profile was below its ClusterQueue's `utilizationBelow` (10 % for a
//!   queue without a policy). A workload without a profile is never idle.
//! - *GPU-hours reclaimed*: for every `Evict` or `Deactivate`, the
//!   workload's GPUs × the time from the reclaim to when that run would
//!   have ended (its start + the trace's run time).
//! - *wait saved*: over the workloads never reclaimed and admitted in both
//!   runs, time to (latest) admission with reclaim against the same
//!   scenario run without any `idleReclaim`: mean and p90 (nearest rank)
//!   of each, and their differences (positive: reclaim shortened waits).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use sluice_api::v1alpha1::idle_reclaim::DEFAULT_UTILIZATION_BELOW;
use sluice_api::v1alpha1::{IdleAction, IdlePolicy};

use super::nearest_rank;
use super::table::Table;
use crate::idle::{IdleEvent, IdleOutcome};
use crate::sim::{RunEnd, SimResult};
use crate::trace::TraceWorkload;
use crate::units::{Millis, format_duration};
use sluice_api::resources::is_gpu;

/// Threshold for the idle GPU-hours of a queue without a policy, percent:
/// the policy's default.
pub const DEFAULT_IDLE_BELOW: f64 = DEFAULT_UTILIZATION_BELOW as f64;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleReport {
    /// Time between idle checks, ms.
    pub interval_ms: Millis,
    pub gpu_hours_idle: f64,
    pub gpu_hours_reclaimed: f64,
    /// Workload runs warned (`Warn`), once per run.
    pub warnings: u64,
    pub evictions: u64,
    pub deactivations: u64,
    /// Queues with a policy or with idle GPU-hours, in file order.
    pub cluster_queues: Vec<IdleQueue>,
    /// `null` when no ClusterQueue has `idleReclaim`.
    pub wait_saved: Option<WaitSaved>,
    /// Every warning, eviction and deactivation, in time order.
    pub events: Vec<IdleEventOut>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleQueue {
    pub name: String,
    /// `null`: no `idleReclaim` (idle counted below 10 %).
    pub policy: Option<PolicyOut>,
    pub gpu_hours_idle: f64,
    pub gpu_hours_reclaimed: f64,
    pub warnings: u64,
    pub evictions: u64,
    pub deactivations: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyOut {
    pub action: &'static str,
    pub utilization_below: i32,
    pub for_ms: Millis,
    pub grace_period_ms: Millis,
    pub only_when_contended: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitSaved {
    /// Workloads compared: never reclaimed, admitted in both runs.
    pub workloads: u64,
    pub mean_ms_with_reclaim: f64,
    pub mean_ms_without_reclaim: f64,
    pub p90_ms_with_reclaim: Millis,
    pub p90_ms_without_reclaim: Millis,
    /// Without − with.
    pub mean_saved_ms: f64,
    pub p90_saved_ms: Millis,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleEventOut {
    pub workload: String,
    pub cluster_queue: String,
    pub at_ms: Millis,
    pub action: &'static str,
    /// The workload that waited for its quota; `null` when the policy
    /// acts without contention.
    pub waiter: Option<String>,
    /// Mean utilisation over the window, percent.
    pub mean_percent: f64,
    /// A `Deactivate` that was an `Evict` past the requeue limit.
    pub over_requeue_limit: bool,
    /// 0 for a warning.
    pub gpu_hours_reclaimed: f64,
}

const MS_PER_HOUR: f64 = 3_600_000.0;

/// GPUs of a workload (MIG slices count as units).
fn gpus(w: &TraceWorkload) -> f64 {
    let milli: i64 = w
        .pod_sets
        .iter()
        .flat_map(|ps| ps.requests.iter().map(move |(r, &a)| (r, a * i64::from(ps.count))))
        .filter(|(r, _)| is_gpu(r))
        .map(|(_, a)| a)
        .sum();
    milli as f64 / 1000.0
}

fn policy_out(p: &IdlePolicy) -> PolicyOut {
    PolicyOut {
        action: p.action.as_str(),
        utilization_below: p.utilization_below,
        for_ms: p.window_ms,
        grace_period_ms: p.grace_period_ms,
        only_when_contended: p.only_when_contended,
    }
}

/// A row's figures: GPU-hours idle and reclaimed, warnings, evictions,
/// deactivations (the terminal and HTML tables show the same).
pub(crate) type Figures = (f64, f64, u64, u64, u64);

impl IdleQueue {
    pub(crate) fn figures(&self) -> Figures {
        (
            self.gpu_hours_idle,
            self.gpu_hours_reclaimed,
            self.warnings,
            self.evictions,
            self.deactivations,
        )
    }
}

impl IdleReport {
    /// The cluster's row.
    pub(crate) fn totals(&self) -> Figures {
        (
            self.gpu_hours_idle,
            self.gpu_hours_reclaimed,
            self.warnings,
            self.evictions,
            self.deactivations,
        )
    }
}

/// The section's figures from a run.
pub fn build(o: &IdleOutcome, r: &SimResult) -> IdleReport {
    let mut queues = idle_hours(o, r);
    let mut reclaimed_ids = vec![false; r.workloads.len()];
    let mut events = Vec::with_capacity(o.events.len());
    for e in &o.events {
        let hours = count_event(e, r, queues.entry(&e.cluster_queue).or_default());
        if e.action != IdleAction::Warn {
            reclaimed_ids[e.workload] = true;
        }
        events.push(IdleEventOut {
            workload: r.workloads[e.workload].name.clone(),
            cluster_queue: e.cluster_queue.to_string(),
            at_ms: e.at,
            action: e.action.as_str(),
            waiter: e.waiter.map(|i| r.workloads[i].name.clone()),
            mean_percent: e.mean_percent,
            over_requeue_limit: e.over_requeue_limit,
            gpu_hours_reclaimed: hours,
        });
    }
    let cluster_queues = in_file_order(o, r, queues);
    let sum = |f: fn(&IdleQueue) -> f64| cluster_queues.iter().map(f).sum::<f64>();
    let count = |f: fn(&IdleQueue) -> u64| cluster_queues.iter().map(f).sum::<u64>();
    IdleReport {
        interval_ms: o.interval,
        gpu_hours_idle: sum(|q| q.gpu_hours_idle),
        gpu_hours_reclaimed: sum(|q| q.gpu_hours_reclaimed),
        warnings: count(|q| q.warnings),
        evictions: count(|q| q.evictions),
        deactivations: count(|q| q.deactivations),
        wait_saved: o.baseline_waits.as_ref().map(|b| wait_saved(r, b, &reclaimed_ids)),
        cluster_queues,
        events,
    }
}

/// Per ClusterQueue, the GPU hours its workloads' runs spent below its
/// idle threshold (only queues with some).
fn idle_hours<'a>(o: &'a IdleOutcome, r: &'a SimResult) -> BTreeMap<&'a str, IdleQueue> {
    let mut queues: BTreeMap<&str, IdleQueue> = BTreeMap::new();
    for (w, rec) in r.workloads.iter().zip(&r.records) {
        let Some(profile) = &w.utilization else { continue };
        let below = o
            .policies
            .get(&*rec.cluster_queue)
            .map_or(DEFAULT_IDLE_BELOW, |p| f64::from(p.utilization_below));
        let idle_ms: Millis = rec
            .runs
            .iter()
            .filter_map(|run| {
                let start = run.started_at?;
                Some(profile.below_ms(run.ended_at.unwrap_or(r.end) - start, below))
            })
            .sum();
        if idle_ms > 0 {
            queues.entry(&rec.cluster_queue).or_default().gpu_hours_idle += gpus(w) * idle_ms as f64 / MS_PER_HOUR;
        }
    }
    queues
}

/// Counts idle event `e` in its queue `q`; returns the GPU hours it
/// reclaimed: what was left of the run it cut short.
fn count_event(e: &IdleEvent, r: &SimResult, q: &mut IdleQueue) -> f64 {
    let (w, rec) = (&r.workloads[e.workload], &r.records[e.workload]);
    let mut hours = 0.0;
    match e.action {
        IdleAction::Warn => q.warnings += 1,
        IdleAction::Evict | IdleAction::Deactivate => {
            if e.action == IdleAction::Evict {
                q.evictions += 1;
            } else {
                q.deactivations += 1;
            }
            // The run it cut short, and when that run would have ended.
            let start = rec
                .runs
                .iter()
                .find(|run| run.end == RunEnd::IdleReclaimed && run.ended_at == Some(e.at))
                .and_then(|run| run.started_at);
            if let Some(start) = start {
                hours = gpus(w) * (start + w.duration - e.at).max(0) as f64 / MS_PER_HOUR;
            }
            q.gpu_hours_reclaimed += hours;
        }
    }
    hours
}

/// Queues in file order: those with a policy, and any other with idle GPUs.
fn in_file_order(o: &IdleOutcome, r: &SimResult, mut queues: BTreeMap<&str, IdleQueue>) -> Vec<IdleQueue> {
    (r.queues.iter())
        .filter_map(|q| {
            let figures = queues.remove(q.name.as_str());
            let policy = o.policies.get(&q.name);
            if figures.is_none() && policy.is_none() {
                return None;
            }
            Some(IdleQueue {
                name: q.name.clone(),
                policy: policy.map(policy_out),
                ..figures.unwrap_or_default()
            })
        })
        .collect()
}

fn wait_saved(r: &SimResult, baseline: &[Option<Millis>], reclaimed: &[bool]) -> WaitSaved {
    let (mut with, mut without): (Vec<Millis>, Vec<Millis>) = r
        .workloads
        .iter()
        .zip(&r.records)
        .zip(baseline)
        .zip(reclaimed)
        .filter(|(_, reclaimed)| !**reclaimed)
        .filter_map(|(((w, rec), base), _)| Some((rec.latest_start()? - w.arrival, (*base)?)))
        .unzip();
    with.sort_unstable();
    without.sort_unstable();
    let mean = |v: &[Millis]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
        }
    };
    let p90 = |v: &[Millis]| nearest_rank(v, 0.90).unwrap_or(0);
    WaitSaved {
        workloads: with.len() as u64,
        mean_ms_with_reclaim: mean(&with),
        mean_ms_without_reclaim: mean(&without),
        p90_ms_with_reclaim: p90(&with),
        p90_ms_without_reclaim: p90(&without),
        mean_saved_ms: mean(&without) - mean(&with),
        p90_saved_ms: p90(&without) - p90(&with),
    }
}

/// `Evict <10% for 30m after 15m, when contended`.
pub fn policy_text(p: &PolicyOut) -> String {
    format!(
        "{} <{}% for {} after {}{}",
        p.action,
        p.utilization_below,
        format_duration(p.for_ms),
        format_duration(p.grace_period_ms),
        if p.only_when_contended { ", when contended" } else { "" }
    )
}

/// The wait comparison in one sentence.
pub fn wait_text(s: &WaitSaved) -> String {
    let d = |ms: f64| format_duration(ms.round() as Millis);
    format!(
        "Time to admission of the {} workloads never reclaimed, without → with idle reclaim: mean {} → {} ({} saved), p90 {} → {} ({} saved).",
        s.workloads,
        d(s.mean_ms_without_reclaim),
        d(s.mean_ms_with_reclaim),
        d(s.mean_saved_ms),
        format_duration(s.p90_ms_without_reclaim),
        format_duration(s.p90_ms_with_reclaim),
        format_duration(s.p90_saved_ms),
    )
}

/// The terminal table.
pub fn render_table(idle: &IdleReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nIdle GPUs (checked every {}; idle = GPU-hours running below the queue's threshold, 10% without a policy; reclaimed = GPU-hours from a reclaim to the end its run would have had)",
        format_duration(idle.interval_ms)
    );
    let mut t = Table::new(
        [
            "cluster queue",
            "GPU-h idle",
            "reclaimed",
            "warned",
            "evicted",
            "deactivated",
        ]
        .map(String::from)
        .to_vec(),
    );
    let row = |name: &str, q: Figures| {
        vec![
            name.to_string(),
            format!("{:.1}", q.0),
            format!("{:.1}", q.1),
            q.2.to_string(),
            q.3.to_string(),
            q.4.to_string(),
        ]
    };
    for q in &idle.cluster_queues {
        t.rows.push(row(&q.name, q.figures()));
    }
    t.rule();
    t.rows.push(row("cluster", idle.totals()));
    t.render(out);
    for q in &idle.cluster_queues {
        if let Some(p) = &q.policy {
            let _ = writeln!(out, "  {}: {}", q.name, policy_text(p));
        }
    }
    if let Some(s) = &idle.wait_saved {
        out.push_str(&wait_text(s));
        out.push('\n');
    }
}
