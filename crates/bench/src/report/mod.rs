//! The figures of a bench run, computed from what [`super::track`] recorded
//! (no I/O); their terminal rendering is in `render.rs`. `docs/benchmarks.md` defines each
//! figure; the JSON field names below are stable (`format` changes only on
//! incompatible changes).
//!
//! - **time to admission**: the admission a workload finished in (its
//!   latest) − creation, as Kueue's recorder measures it; mean, p50, p95
//!   and max per class over the workloads admitted. The same to the first
//!   admission beside it (they differ for preempted workloads).
//!   Percentiles are nearest rank (as in `sluice simulate`): p of n sorted
//!   values is the value at rank ⌈p·n⌉.
//! - **usage** of a ClusterQueue: ∫ admitted usage dt ÷ (nominal × wall
//!   time), summed over its flavors, per resource; the total is the same
//!   over all queues (Σ∫ ÷ (Σ nominal × wall)).
//! - **admissions per second**: admissions (re-admissions included) ÷ wall
//!   time; peak: the most admissions in any window of 10 s (or of the wall
//!   time, if shorter), ÷ that window.

use std::collections::BTreeMap;

use serde::Serialize;

use super::plan::Plan;
use super::scrape::{CpuSeconds, PeakRss, WriteCounts};
use super::stall::ReasonCount;
use super::track::{Closed, Ms, Scope, Violation, WorkloadRecord};
use sluice_simulate::report::{WaitStats, nearest_rank, resource_order, wait_stats};

mod render;

pub use render::{render, render_floor};

/// Window of the peak admission rate.
pub const RATE_WINDOW_MS: Ms = 10_000;

/// Version of the JSON layout.
pub const FORMAT: u32 = 1;

/// Everything `sluice bench run` reports.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    pub format: u32,
    pub scenario: String,
    pub scale: f64,
    pub run_id: String,
    /// Every workload was seen finished.
    pub complete: bool,
    /// The run stopped at `--timeout`.
    pub timed_out: bool,
    /// The run stopped because nothing moved for `--stall-window`
    /// ([`crate::stall`]); `null` otherwise.
    pub stalled: Option<StallReport>,
    /// From the first creation to the last Finished seen (or the timeout,
    /// or the stall).
    pub wall_ms: Ms,
    pub workloads: Counts,
    /// How late creations were against the schedule (API latency, or the
    /// harness's --concurrency).
    pub creation_lag: Lag,
    pub classes: Vec<ClassFigures>,
    pub cluster_queues: Vec<QueueFigures>,
    /// All cluster queues together, per resource.
    pub total_usage: Vec<ResourceUsage>,
    pub admission_rate: AdmissionRate,
    /// From `--controller-metrics`; `null` without it.
    pub api_writes: Option<ApiWrites>,
    /// From `--controller-pid`; `null` without it.
    pub controller_peak_rss: Option<PeakRss>,
    /// The controller's CPU time (user + system) from the start of the run
    /// to its end, seconds (`--controller-pid`); `null` without it.
    pub controller_cpu_seconds: Option<f64>,
    /// `controllerCpuSeconds` ÷ admissions × 1 000; `null` without it or
    /// without admissions.
    pub controller_cpu_seconds_per_1000_admissions: Option<f64>,
    /// The API server's CPU time over the same span (`--apiserver-pid`).
    pub apiserver_cpu_seconds: Option<f64>,
    /// etcd's CPU time over the same span (`--etcd-pid`).
    pub etcd_cpu_seconds: Option<f64>,
    /// From `--with-floor`; `null` without it.
    pub floor: Option<FloorReport>,
    /// Admission rates ÷ the floor's patches per second.
    pub vs_floor: Option<VsFloor>,
    /// Empty when the quota held at every observed moment.
    pub quota_violations: Vec<ViolationReport>,
    /// Times the Workload watch had to list again (moments may have been missed).
    pub watch_restarts: u64,
    /// Creations that failed after retries (each tried again later).
    pub create_write_errors: u64,
    /// Finished marks that failed after retries (each tried again later).
    pub finish_write_errors: u64,
}

/// Why a run stopped early: workloads waited with nothing running and
/// nothing admitted or finished for `window_ms`, since `since_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StallReport {
    pub window_ms: Ms,
    pub since_ms: Ms,
    /// Workloads waiting when the stall was found.
    pub pending: u64,
    /// Their reasons, as the controller wrote them on the Workloads
    /// (listed once stalled), grouped: most workloads first, those without
    /// a reason yet last. Empty if the list failed.
    pub reasons: Vec<ReasonCount>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub planned: u64,
    pub created: u64,
    pub admitted: u64,
    pub finished: u64,
    /// Admissions, re-admissions after preemption included.
    pub admissions: u64,
    pub evictions: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lag {
    pub mean_ms: f64,
    pub max_ms: Ms,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassFigures {
    pub name: String,
    pub workloads: u64,
    pub admitted: u64,
    pub finished: u64,
    pub evictions: u64,
    /// Creation → the admission it finished in (its latest), as Kueue
    /// measures it.
    pub time_to_admission: WaitStats,
    /// Creation → its first admission (the same without preemption).
    pub time_to_first_admission: WaitStats,
    /// The schedule's arrival → the admission it finished in: the time to
    /// admission with the harness's creation lag, as the simulator counts
    /// it (`bench compare`).
    pub time_to_admission_from_schedule: WaitStats,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueFigures {
    /// The scenario's name.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    pub resources: Vec<ResourceUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    pub resource: String,
    /// Nominal quota in the resource's units, summed over flavors.
    pub nominal: f64,
    /// ∫ usage dt, unit·seconds (e.g. CPU·s).
    pub used_unit_seconds: f64,
    /// used ÷ (nominal × wall time); above 1 means it borrowed; `null` when
    /// nominal or the wall time is 0.
    pub usage: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRate {
    pub mean_per_second: f64,
    pub peak_per_second: f64,
    pub window_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiWrites {
    pub total: f64,
    pub per_kind: BTreeMap<String, f64>,
    /// total ÷ admissions; `null` without admissions.
    pub per_admission: Option<f64>,
    /// Per lane of the controller's write queue (`state`, `bookkeeping`,
    /// `explanation`; Events are in none).
    pub per_lane: BTreeMap<String, f64>,
    /// State-lane writes (admissions, evictions, requeues, Job start and
    /// suspend, Workload creation) ÷ admissions: what admitting costs;
    /// `null` without admissions or an older controller.
    pub writes_per_admission: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VsFloor {
    pub mean: f64,
    pub peak: f64,
    /// What the floor needs for this run's admissions ([`floor_time_ms`]);
    /// `None` when the floor measurement cannot tell its sustained rate.
    pub floor_wall_ms: Option<f64>,
    /// Wall time ÷ `floor_wall_ms`.
    pub wall: Option<f64>,
}

/// The time the write floor needs for `writes` patches: with a client-side
/// limit, its burst at once and the rest at the rate the floor sustained
/// after its burst ((successful patches − burst) ÷ elapsed); without one,
/// all at its measured rate. `None` when the floor made no more patches
/// than its burst (no sustained rate to go by).
pub fn floor_time_ms(f: &FloorReport, writes: u64) -> Option<f64> {
    let ok = f.patches.saturating_sub(f.failed) as f64;
    let burst = if f.kube_qps > 0.0 { f64::from(f.kube_burst) } else { 0.0 };
    if ok <= burst || f.elapsed_ms <= 0.0 {
        return None;
    }
    let per_ms = (ok - burst) / f.elapsed_ms;
    Some((writes as f64 - burst).max(0.0) / per_ms)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ViolationReport {
    pub scope: Scope,
    /// ClusterQueue or cohort, the scenario's name.
    pub name: String,
    pub flavor: String,
    pub resource: String,
    /// What the rule allows, in the resource's units.
    pub limit: f64,
    /// The most seen while broken.
    pub peak: f64,
    pub from_ms: Ms,
    pub to_ms: Ms,
}

/// What `sluice bench floor` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FloorReport {
    pub format: u32,
    pub run_id: String,
    pub kube_qps: f64,
    pub kube_burst: u32,
    pub concurrency: u32,
    /// Patches sent (one per Workload).
    pub patches: u64,
    pub failed: u64,
    /// From the first patch sent to the last answer.
    pub elapsed_ms: f64,
    /// Successful patches ÷ elapsed.
    pub patches_per_second: f64,
    /// Per patch, from sending (token taken) to the answer.
    pub latency: Latency,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
}

/// ∫ usage ÷ (nominal × elapsed); `None` when the denominator is 0.
pub fn usage_fraction(integral_milli_ms: f64, nominal_milli: i64, elapsed_ms: Ms) -> Option<f64> {
    let denominator = nominal_milli as f64 * elapsed_ms as f64;
    (denominator > 0.0).then(|| integral_milli_ms / denominator)
}

/// Mean and peak admissions per second (see the module docs). `admissions`
/// must be sorted.
pub fn admission_rate(admissions: &[Ms], wall_ms: Ms, window_ms: Ms) -> AdmissionRate {
    let window = window_ms.min(wall_ms).max(1);
    let mean = if wall_ms > 0 {
        admissions.len() as f64 / (wall_ms as f64 / 1000.0)
    } else {
        0.0
    };
    // Two pointers: the most admissions within [t, t + window) for a t at
    // an admission.
    let mut most = 0usize;
    let mut j = 0usize;
    for i in 0..admissions.len() {
        while j < admissions.len() && admissions[j] < admissions[i] + window {
            j += 1;
        }
        most = most.max(j - i);
    }
    AdmissionRate {
        mean_per_second: mean,
        peak_per_second: most as f64 / (window as f64 / 1000.0),
        window_seconds: window as f64 / 1000.0,
    }
}

/// Floor figures from per-patch latencies (microseconds).
pub fn floor_figures(
    run_id: &str,
    (kube_qps, kube_burst, concurrency): (f64, u32, u32),
    mut latencies_us: Vec<i64>,
    failed: u64,
    elapsed_ms: f64,
) -> FloorReport {
    latencies_us.sort_unstable();
    let n = latencies_us.len();
    let ms = |us: Option<i64>| us.map_or(0.0, |v| v as f64 / 1000.0);
    let latency = if n == 0 {
        Latency::default()
    } else {
        Latency {
            mean_ms: latencies_us.iter().map(|&v| v as f64).sum::<f64>() / n as f64 / 1000.0,
            p50_ms: ms(nearest_rank(&latencies_us, 0.50)),
            p95_ms: ms(nearest_rank(&latencies_us, 0.95)),
            max_ms: ms(latencies_us.last().copied()),
        }
    };
    FloorReport {
        format: FORMAT,
        run_id: run_id.to_string(),
        kube_qps,
        kube_burst,
        concurrency,
        patches: n as u64 + failed,
        failed,
        elapsed_ms,
        patches_per_second: if elapsed_ms > 0.0 {
            n as f64 / (elapsed_ms / 1000.0)
        } else {
            0.0
        },
        latency,
    }
}

/// What the run loop gathered besides the tracker.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    pub timed_out: bool,
    pub stalled: Option<StallReport>,
    pub writes: Option<WriteCounts>,
    pub rss: Option<PeakRss>,
    /// CPU seconds of the processes asked for, over the run.
    pub cpu: CpuSeconds,
    pub floor: Option<FloorReport>,
    pub watch_restarts: u64,
    pub create_write_errors: u64,
    pub finish_write_errors: u64,
}

/// The figures of a run.
pub fn build(plan: &Plan, closed: &Closed, extras: Extras) -> RunReport {
    let wall = closed.end.max(0);
    let workloads = counts(&closed.records);
    let (cluster_queues, total_usage) = queue_usage(plan, closed, wall);
    let admission_rate = admission_rate(&closed.admissions, wall, RATE_WINDOW_MS);
    let api_writes = extras.writes.map(|w| api_writes(w, workloads.admissions));
    let cpu_per_1000 = per_1000(extras.cpu.controller, workloads.admissions);
    let vs_floor = extras
        .floor
        .as_ref()
        .and_then(|f| vs_floor(f, &admission_rate, workloads.admissions, wall));
    RunReport {
        format: FORMAT,
        scenario: plan.scenario.clone(),
        scale: plan.scale,
        run_id: plan.run_id.clone(),
        complete: workloads.finished == workloads.planned,
        timed_out: extras.timed_out,
        stalled: extras.stalled,
        wall_ms: wall,
        workloads,
        creation_lag: creation_lag(plan, &closed.records),
        classes: class_figures(plan, &closed.records),
        cluster_queues,
        total_usage,
        admission_rate,
        api_writes,
        controller_peak_rss: extras.rss,
        controller_cpu_seconds: extras.cpu.controller,
        controller_cpu_seconds_per_1000_admissions: cpu_per_1000,
        apiserver_cpu_seconds: extras.cpu.apiserver,
        etcd_cpu_seconds: extras.cpu.etcd,
        floor: extras.floor,
        vs_floor,
        quota_violations: violation_reports(plan, &closed.violations),
        watch_restarts: extras.watch_restarts,
        create_write_errors: extras.create_write_errors,
        finish_write_errors: extras.finish_write_errors,
    }
}

/// `seconds` per 1 000 admissions; `None` without either.
pub fn per_1000(seconds: Option<f64>, admissions: u64) -> Option<f64> {
    seconds
        .filter(|_| admissions > 0)
        .map(|s| s / admissions as f64 * 1000.0)
}

/// Workloads planned, created, admitted and finished; admissions and
/// evictions.
fn counts(records: &[WorkloadRecord]) -> Counts {
    let count = |f: &dyn Fn(&WorkloadRecord) -> bool| records.iter().filter(|r| f(r)).count() as u64;
    Counts {
        planned: records.len() as u64,
        created: count(&|r| r.created_at.is_some()),
        admitted: count(&|r| r.first_admitted_at.is_some()),
        finished: count(&|r| r.finished_at.is_some()),
        admissions: records.iter().map(|r| u64::from(r.admissions)).sum(),
        evictions: records.iter().map(|r| u64::from(r.evictions)).sum(),
    }
}

/// How late the creations were against the plan's arrivals.
fn creation_lag(plan: &Plan, records: &[WorkloadRecord]) -> Lag {
    let lags: Vec<Ms> = plan
        .workloads
        .iter()
        .zip(records)
        .filter_map(|(w, r)| r.created_at.map(|c| (c - w.arrival).max(0)))
        .collect();
    Lag {
        mean_ms: if lags.is_empty() {
            0.0
        } else {
            lags.iter().sum::<Ms>() as f64 / lags.len() as f64
        },
        max_ms: lags.iter().copied().max().unwrap_or(0),
    }
}

/// The figures of each class of workloads, by class name.
fn class_figures(plan: &Plan, records: &[WorkloadRecord]) -> Vec<ClassFigures> {
    let mut by_class: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, w) in plan.workloads.iter().enumerate() {
        by_class.entry(w.class.as_str()).or_default().push(i);
    }
    by_class
        .into_iter()
        .map(|(name, idx)| {
            let rs: Vec<_> = idx.iter().filter_map(|&i| records.get(i)).collect();
            let from_schedule = (idx.iter())
                .filter_map(|&i| Some((records.get(i)?.last_admitted_at? - plan.workloads[i].arrival).max(0)))
                .collect();
            ClassFigures {
                name: name.to_string(),
                workloads: rs.len() as u64,
                admitted: rs.iter().filter(|r| r.first_admitted_at.is_some()).count() as u64,
                finished: rs.iter().filter(|r| r.finished_at.is_some()).count() as u64,
                evictions: rs.iter().map(|r| u64::from(r.evictions)).sum(),
                time_to_admission: wait_stats(rs.iter().filter_map(|r| r.time_to_admission()).collect()),
                time_to_first_admission: wait_stats(rs.iter().filter_map(|r| r.time_to_first_admission()).collect()),
                time_to_admission_from_schedule: wait_stats(from_schedule),
            }
        })
        .collect()
}

/// Usage per queue and resource, summed over flavors; and of all queues
/// together.
fn queue_usage(plan: &Plan, closed: &Closed, wall: Ms) -> (Vec<QueueFigures>, Vec<ResourceUsage>) {
    let mut cluster_queues = Vec::new();
    let mut totals: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    for (queue, q) in &closed.quotas.queues {
        let mut per_resource: BTreeMap<String, (i64, f64)> = BTreeMap::new();
        for (slot, limit) in &q.limits {
            let e = per_resource.entry(slot.1.clone()).or_default();
            e.0 += limit.nominal;
        }
        if let Some(integrals) = closed.usage.get(queue) {
            for (slot, v) in integrals {
                per_resource.entry(slot.1.clone()).or_default().1 += v;
            }
        }
        for (r, (n, v)) in &per_resource {
            let t = totals.entry(r.clone()).or_default();
            t.0 += n;
            t.1 += v;
        }
        cluster_queues.push(QueueFigures {
            name: plan.scenario_name(queue).to_string(),
            cohort: q.cohort.as_deref().map(|c| plan.scenario_name(c).to_string()),
            resources: resource_usages(per_resource, wall),
        });
    }
    (cluster_queues, resource_usages(totals, wall))
}

/// The controller's writes, per admission overall and of the state lane.
fn api_writes(w: WriteCounts, admissions: u64) -> ApiWrites {
    let per_admission = |n: f64| (admissions > 0).then(|| n / admissions as f64);
    ApiWrites {
        per_admission: per_admission(w.total),
        writes_per_admission: w.per_lane.get("state").copied().and_then(per_admission),
        total: w.total,
        per_kind: w.per_kind,
        per_lane: w.per_lane,
    }
}

/// The admission rates and wall time against the write floor; `None` when
/// the floor made no patch.
fn vs_floor(f: &FloorReport, rate: &AdmissionRate, admissions: u64, wall: Ms) -> Option<VsFloor> {
    (f.patches_per_second > 0.0).then(|| {
        let floor_wall_ms = floor_time_ms(f, admissions);
        VsFloor {
            mean: rate.mean_per_second / f.patches_per_second,
            peak: rate.peak_per_second / f.patches_per_second,
            floor_wall_ms,
            wall: floor_wall_ms.filter(|t| *t > 0.0).map(|t| wall as f64 / t),
        }
    })
}

/// The quota violations, with the scenario's names and in the resources'
/// units.
fn violation_reports(plan: &Plan, violations: &[Violation]) -> Vec<ViolationReport> {
    let units = |milli: i64| milli as f64 / 1000.0;
    violations
        .iter()
        .map(|v| ViolationReport {
            scope: v.scope,
            name: plan.scenario_name(&v.name).to_string(),
            flavor: plan.scenario_name(&v.flavor).to_string(),
            resource: v.resource.clone(),
            limit: units(v.limit),
            peak: units(v.peak),
            from_ms: v.from_ms,
            to_ms: v.to_ms,
        })
        .collect()
}

fn resource_usages(per_resource: BTreeMap<String, (i64, f64)>, wall: Ms) -> Vec<ResourceUsage> {
    let mut out: Vec<ResourceUsage> = per_resource
        .into_iter()
        .map(|(resource, (nominal, integral))| ResourceUsage {
            nominal: nominal as f64 / 1000.0,
            // milli-unit·ms → unit·s: ÷ 1 000 000.
            used_unit_seconds: integral / 1e6,
            usage: usage_fraction(integral, nominal, wall),
            resource,
        })
        .collect();
    out.sort_by(|a, b| resource_order(&a.resource, &b.resource));
    out
}

#[cfg(test)]
mod tests;
