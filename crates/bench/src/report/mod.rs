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
use super::scrape::{PeakRss, WriteCounts};
use super::track::{Closed, Ms, Scope};
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
    /// From the first creation to the last Finished seen (or the timeout).
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
    pub writes: Option<WriteCounts>,
    pub rss: Option<PeakRss>,
    pub floor: Option<FloorReport>,
    pub watch_restarts: u64,
    pub create_write_errors: u64,
    pub finish_write_errors: u64,
}

/// The figures of a run.
pub fn build(plan: &Plan, closed: &Closed, extras: Extras) -> RunReport {
    let wall = closed.end.max(0);
    let records = &closed.records;
    let count = |f: &dyn Fn(&super::track::WorkloadRecord) -> bool| records.iter().filter(|r| f(r)).count() as u64;
    let workloads = Counts {
        planned: records.len() as u64,
        created: count(&|r| r.created_at.is_some()),
        admitted: count(&|r| r.first_admitted_at.is_some()),
        finished: count(&|r| r.finished_at.is_some()),
        admissions: records.iter().map(|r| u64::from(r.admissions)).sum(),
        evictions: records.iter().map(|r| u64::from(r.evictions)).sum(),
    };

    let lags: Vec<Ms> = plan
        .workloads
        .iter()
        .zip(records)
        .filter_map(|(w, r)| r.created_at.map(|c| (c - w.arrival).max(0)))
        .collect();
    let creation_lag = Lag {
        mean_ms: if lags.is_empty() {
            0.0
        } else {
            lags.iter().sum::<Ms>() as f64 / lags.len() as f64
        },
        max_ms: lags.iter().copied().max().unwrap_or(0),
    };

    let mut by_class: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, w) in plan.workloads.iter().enumerate() {
        by_class.entry(w.class.as_str()).or_default().push(i);
    }
    let classes = by_class
        .into_iter()
        .map(|(name, idx)| {
            let rs: Vec<_> = idx.iter().filter_map(|&i| records.get(i)).collect();
            ClassFigures {
                name: name.to_string(),
                workloads: rs.len() as u64,
                admitted: rs.iter().filter(|r| r.first_admitted_at.is_some()).count() as u64,
                finished: rs.iter().filter(|r| r.finished_at.is_some()).count() as u64,
                evictions: rs.iter().map(|r| u64::from(r.evictions)).sum(),
                time_to_admission: wait_stats(rs.iter().filter_map(|r| r.time_to_admission()).collect()),
                time_to_first_admission: wait_stats(rs.iter().filter_map(|r| r.time_to_first_admission()).collect()),
            }
        })
        .collect();

    // Usage per queue and resource, summed over flavors.
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
    let total_usage = resource_usages(totals, wall);

    let admission_rate = admission_rate(&closed.admissions, wall, RATE_WINDOW_MS);
    let per_admission = |n: f64| (workloads.admissions > 0).then(|| n / workloads.admissions as f64);
    let api_writes = extras.writes.map(|w| ApiWrites {
        per_admission: per_admission(w.total),
        writes_per_admission: w.per_lane.get("state").copied().and_then(per_admission),
        total: w.total,
        per_kind: w.per_kind,
        per_lane: w.per_lane,
    });
    let vs_floor = extras.floor.as_ref().and_then(|f| {
        (f.patches_per_second > 0.0).then(|| VsFloor {
            mean: admission_rate.mean_per_second / f.patches_per_second,
            peak: admission_rate.peak_per_second / f.patches_per_second,
        })
    });
    let units = |milli: i64| milli as f64 / 1000.0;
    let quota_violations = closed
        .violations
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
        .collect();

    RunReport {
        format: FORMAT,
        scenario: plan.scenario.clone(),
        scale: plan.scale,
        run_id: plan.run_id.clone(),
        complete: workloads.finished == workloads.planned,
        timed_out: extras.timed_out,
        wall_ms: wall,
        workloads,
        creation_lag,
        classes,
        cluster_queues,
        total_usage,
        admission_rate,
        api_writes,
        controller_peak_rss: extras.rss,
        floor: extras.floor,
        vs_floor,
        quota_violations,
        watch_restarts: extras.watch_restarts,
        create_write_errors: extras.create_write_errors,
        finish_write_errors: extras.finish_write_errors,
    }
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
mod tests {
    use super::*;
    use crate::plan::PlannedWorkload;
    use crate::track::{Holding, Limit, Observation, QueueQuota, QuotaModel, Slot, Tracker};

    #[test]
    fn usage_is_the_integral_over_nominal_times_elapsed() {
        // 13 CPU·s used of 20 CPU over 4 s: 13 / (20 × 4) = 0.1625.
        // In milli-CPU·ms: 13 000 000 / (20 000 × 4 000) = 0.1625.
        assert_eq!(usage_fraction(13_000_000.0, 20_000, 4_000), Some(0.1625));
        // Borrowing: 30 CPU for 2 s in a 20-CPU queue = 60 / 40 = 1.5.
        assert_eq!(usage_fraction(60_000_000.0, 20_000, 2_000), Some(1.5));
        assert_eq!(usage_fraction(1.0, 0, 4_000), None);
        assert_eq!(usage_fraction(1.0, 20_000, 0), None);
    }

    #[test]
    fn admission_rates_mean_and_peak() {
        // 30 admissions over a 20 s run: mean 30 / 20 = 1.5 /s. 25 of them
        // within 1 s (at 5 000..5 960 ms, every 40 ms): the best 10-s window
        // [5 000, 15 000) holds those 25 and the 3 at 12 000, 13 000, 14 000
        // = 28 → 2.8 /s; the 2 at 19 000 and 19 500 fall outside.
        let mut a: Vec<Ms> = (0..25).map(|i| 5_000 + 40 * i).collect();
        a.extend([12_000, 13_000, 14_000, 19_000, 19_500]);
        a.sort_unstable();
        let r = admission_rate(&a, 20_000, 10_000);
        assert_eq!(r.mean_per_second, 1.5);
        assert!((r.peak_per_second - 2.8).abs() < 1e-9, "{}", r.peak_per_second);
        assert_eq!(r.window_seconds, 10.0);
        // A run shorter than the window: the window is the run (4 in 2 s → 2 /s
        // both ways), so the peak is never below the mean.
        let short = admission_rate(&[0, 500, 1_000, 1_999], 2_000, 10_000);
        assert_eq!(
            (short.mean_per_second, short.peak_per_second, short.window_seconds),
            (2.0, 2.0, 2.0)
        );
        let none = admission_rate(&[], 0, 10_000);
        assert_eq!((none.mean_per_second, none.peak_per_second), (0.0, 0.0));
    }

    #[test]
    fn floor_figures_from_latencies() {
        // 4 patches of 2, 4, 6 and 20 ms in 100 ms, one more failed:
        // 4 / 0.1 s = 40 patches/s; mean (2 + 4 + 6 + 20) / 4 = 8 ms;
        // p50 at rank ⌈2⌉ = 4 ms; p95 at rank ⌈3.8⌉ = 4 → 20 ms.
        let f = floor_figures("r", (50.0, 100, 1), vec![6_000, 2_000, 20_000, 4_000], 1, 100.0);
        assert_eq!((f.patches, f.failed), (5, 1));
        assert_eq!(f.patches_per_second, 40.0);
        assert_eq!(
            f.latency,
            Latency {
                mean_ms: 8.0,
                p50_ms: 4.0,
                p95_ms: 20.0,
                max_ms: 20.0
            }
        );
        assert!(render_floor(&f).contains("40.0 patches/s"));
    }

    #[test]
    fn many_queues_are_shown_per_cohort() {
        // The large-scale shape: 10 cohorts × 100 queues of 20 CPU. Nothing
        // admitted over 1 s: every queue at 0 %, all 1 000 in the JSON, the
        // table one row per cohort (100 × 20 = 2 000 CPU nominal each).
        use sluice_simulate::scenario::{LoadOptions, load_with};
        let src = crate::plan::scenario_text("kueue-large-scale").expect("built in");
        let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale: 0.01 }).expect("loads");
        let plan = crate::plan::build("sb-ls", &s, &m, 0.01).expect("plans");
        // 35 → round(0.35) = 0 → at least 1; likewise 11 and 4: 3 per queue.
        assert_eq!(plan.workloads.len(), 3_000);
        let t = Tracker::new(plan.quotas.clone(), plan.workloads.iter().map(|w| (w.key(), w.runtime)));
        let r = build(&plan, &t.close(1_000), Extras::default());
        assert!(!r.complete);
        assert_eq!(r.cluster_queues.len(), 1_000);
        assert_eq!(r.total_usage[0].nominal, 20_000.0);
        assert_eq!(r.total_usage[0].usage, Some(0.0));
        let text = render(&r);
        assert!(text.contains("INCOMPLETE: 0 of 3000 workloads finished"), "{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("100 queues")).collect();
        assert_eq!(rows.len(), 10, "{text}");
        assert!(rows[0].contains("cohort-0") && rows[0].contains("2000"), "{}", rows[0]);
    }

    #[test]
    fn a_preempted_workload_counts_until_the_admission_it_finished_in() {
        // Kueue's recorder: created at 0, admitted at 100, preempted at 200
        // (released at 250), admitted again at 400, finished at 1 400: time
        // to admission 400 ms (Kueue's), 100 ms to the first admission.
        let slot: Slot = ("r-rf".into(), "cpu".into());
        let limits = BTreeMap::from([(slot.clone(), Limit::default())]);
        let quotas = QuotaModel::new(BTreeMap::from([(
            "r-cq".to_string(),
            QueueQuota { cohort: None, limits },
        )]));
        let plan = Plan {
            run_id: "r".into(),
            scenario: "hand".into(),
            scale: 1.0,
            namespaces: Vec::new(),
            flavors: Vec::new(),
            cluster_queues: Vec::new(),
            local_queues: Vec::new(),
            workloads: vec![PlannedWorkload {
                namespace: "r-ns".into(),
                name: "w".into(),
                class: "small".into(),
                queue: "lq".into(),
                priority: 0,
                arrival: 0,
                runtime: 1_000,
                pod_sets: Vec::new(),
            }],
            quotas: quotas.clone(),
        };
        let mut t = Tracker::new(quotas, [("r-ns/w".to_string(), 1_000)]);
        let admitted = Observation {
            admitted: true,
            ..Observation::default()
        };
        t.created(0, 0);
        t.observe(0, 100, admitted.clone());
        t.observe(
            0,
            200,
            Observation {
                evicted: true,
                ..admitted.clone()
            },
        );
        t.observe(
            0,
            250,
            Observation {
                evicted: true,
                ..Observation::default()
            },
        );
        t.observe(0, 400, admitted.clone());
        t.observe(
            0,
            1_400,
            Observation {
                finished: true,
                ..admitted
            },
        );
        let r = build(&plan, &t.close(1_400), Extras::default());
        let c = &r.classes[0];
        assert_eq!((c.evictions, r.workloads.admissions), (1, 2));
        assert_eq!((c.time_to_admission.mean_ms, c.time_to_admission.max_ms), (400.0, 400));
        assert_eq!(c.time_to_first_admission.mean_ms, 100.0);
        assert!(render(&r).contains("mean to 1st"));
    }

    /// One queue `r-cq` (cohort `r-co`, 10 CPU of flavor `r-rf`) and three
    /// workloads of two classes, observed by hand.
    #[test]
    fn a_run_report_from_observations() {
        let slot: Slot = ("r-rf".into(), "cpu".into());
        let quotas = QuotaModel::new(BTreeMap::from([(
            "r-cq".to_string(),
            QueueQuota {
                cohort: Some("r-co".into()),
                limits: BTreeMap::from([(
                    slot.clone(),
                    Limit {
                        nominal: 10_000,
                        borrowing_limit: Some(0),
                        lending_limit: None,
                    },
                )]),
            },
        )]));
        let wl = |name: &str, class: &str, arrival: Ms| PlannedWorkload {
            namespace: "r-ns".into(),
            name: name.into(),
            class: class.into(),
            queue: "lq".into(),
            priority: 0,
            arrival,
            runtime: 1_000,
            pod_sets: Vec::new(),
        };
        let plan = Plan {
            run_id: "r".into(),
            scenario: "hand".into(),
            scale: 1.0,
            namespaces: vec!["r-ns".into()],
            flavors: Vec::new(),
            cluster_queues: Vec::new(),
            local_queues: Vec::new(),
            workloads: vec![wl("a", "small", 0), wl("b", "small", 0), wl("c", "large", 100)],
            quotas: quotas.clone(),
        };
        let mut t = Tracker::new(quotas, plan.workloads.iter().map(|w| (w.key(), w.runtime)));
        let hold = |cpu: i64| Observation {
            admitted: true,
            holding: Some(Holding {
                cluster_queue: "r-cq".into(),
                usage: BTreeMap::from([(slot.clone(), cpu)]),
            }),
            ..Observation::default()
        };
        let done = Observation {
            admitted: true,
            finished: true,
            ..Observation::default()
        };
        // a: created 10 (10 ms late), admitted 110, finished 1 110, 4 CPU.
        // b: created 20, admitted 520, finished 1 520, 4 CPU.
        // c: created 150 (50 ms late), admitted 1 200, finished 2 200, 10 CPU.
        t.created(0, 10);
        t.created(1, 20);
        t.created(2, 150);
        t.observe(0, 110, hold(4_000));
        t.observe(1, 520, hold(4_000));
        t.observe(0, 1_110, done.clone());
        t.observe(2, 1_200, hold(10_000)); // 4 + 10 = 14 > 10 + 0 until b finishes
        t.observe(1, 1_520, done.clone());
        t.observe(2, 2_200, done);
        let closed = t.close(2_200);
        let floor = floor_figures("r", (50.0, 100, 1), vec![10_000; 100], 0, 2_000.0); // 50 /s
        let r = build(
            &plan,
            &closed,
            Extras {
                writes: Some(WriteCounts {
                    total: 9.0,
                    per_kind: BTreeMap::from([("workload_status".into(), 6.0), ("event".into(), 3.0)]),
                    per_lane: BTreeMap::from([("state".into(), 3.0), ("bookkeeping".into(), 3.0)]),
                }),
                floor: Some(floor),
                ..Extras::default()
            },
        );
        assert!(r.complete && !r.timed_out);
        assert_eq!(r.wall_ms, 2_200);
        assert_eq!(
            r.workloads,
            Counts {
                planned: 3,
                created: 3,
                admitted: 3,
                finished: 3,
                admissions: 3,
                evictions: 0
            }
        );
        // Lag: a 10 − 0, b 20 − 0, c 150 − 100: mean (10 + 20 + 50) / 3 ≈ 26.7, max 50.
        assert!((r.creation_lag.mean_ms - 80.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.creation_lag.max_ms, 50);
        // small: a 110 − 10 = 100, b 520 − 20 = 500: mean 300, p50 rank ⌈1⌉ = 100,
        // p95 rank ⌈1.9⌉ = 2 → 500. large: c 1 200 − 150 = 1 050.
        let small = &r.classes[1];
        assert_eq!(small.name, "small");
        let s = &small.time_to_admission;
        assert_eq!((s.count, s.mean_ms, s.p50_ms, s.p95_ms), (2, 300.0, 100, 500));
        assert_eq!(r.classes[0].time_to_admission.p95_ms, 1_050);
        // Usage: 4 CPU 110–520, 8 CPU 520–1 110, 4 CPU 1 110–1 200, 14 CPU
        // 1 200–1 520, 10 CPU 1 520–2 200:
        // 4·410 + 8·590 + 4·90 + 14·320 + 10·680 = 1 640 + 4 720 + 360 + 4 480
        // + 6 800 = 18 000 CPU·ms = 18 CPU·s; ÷ (10 CPU × 2.2 s) = 0.8181…
        let u = &r.cluster_queues[0].resources[0];
        assert_eq!(r.cluster_queues[0].name, "cq");
        assert_eq!(r.cluster_queues[0].cohort.as_deref(), Some("co"));
        assert!((u.used_unit_seconds - 18.0).abs() < 1e-9, "{}", u.used_unit_seconds);
        assert!((u.usage.unwrap_or(0.0) - 18.0 / 22.0).abs() < 1e-9);
        assert_eq!(r.total_usage, r.cluster_queues[0].resources);
        // Rates: 3 admissions in 2.2 s → 1.3636… /s; peak window = the whole
        // 2.2 s run (shorter than 10 s) → the same. Floor 50 /s.
        assert!((r.admission_rate.mean_per_second - 3.0 / 2.2).abs() < 1e-9);
        let vs = r.vs_floor.as_ref().expect("with a floor");
        assert!((vs.mean - 3.0 / 2.2 / 50.0).abs() < 1e-9);
        // Writes: 9 for 3 admissions = 3 per admission.
        assert_eq!(r.api_writes.as_ref().and_then(|a| a.per_admission), Some(3.0));
        assert_eq!(r.api_writes.as_ref().and_then(|a| a.writes_per_admission), Some(1.0));
        // The queue held 14 > 10 CPU from 1 200 to 1 520 ms; the cohort (one
        // queue, pool 10) too.
        let v: Vec<(Scope, &str, f64, f64, Ms, Ms)> = r
            .quota_violations
            .iter()
            .map(|v| (v.scope, v.name.as_str(), v.limit, v.peak, v.from_ms, v.to_ms))
            .collect();
        assert_eq!(
            v,
            vec![
                (Scope::ClusterQueue, "cq", 10.0, 14.0, 1_200, 1_520),
                (Scope::Cohort, "co", 10.0, 14.0, 1_200, 1_520)
            ]
        );
        let text = render(&r);
        assert!(text.contains("all workloads finished"), "{text}");
        assert!(text.contains("3.00 per admission"), "{text}");
        assert!(text.contains("quota violations (observed)"), "{text}");
        let json = serde_json::to_value(&r).expect("serializes");
        assert_eq!(json["quotaViolations"][0]["scope"], "clusterQueue");
        assert_eq!(json["classes"][1]["timeToAdmission"]["p95Ms"], 500);
        // Nobody was preempted: to the first admission is the same.
        assert_eq!(
            json["classes"][1]["timeToFirstAdmission"],
            json["classes"][1]["timeToAdmission"]
        );
        assert_eq!(json["controllerPeakRss"], serde_json::Value::Null);
    }
}
