//! The figures `bench compare` puts side by side, defined once for both
//! sides, and their ratios. No I/O.
//!
//! | figure | real (a `bench run` report) | simulated (a `SimResult`) |
//! |--------|-----------------------------|---------------------------|
//! | wall time | `wallMs`: `t = 0` (the schedule's start) → the last `Finished` seen | schedule's 0 → the last finish (the run's end if some never finish) |
//! | admissions | `workloads.admissions`: every start of running seen (re-admissions included) | every run: each admission is written, one preempted before its write too |
//! | admissions/s | admissions ÷ wall time | the same |
//! | time to admission per class | `classes[].timeToAdmissionFromSchedule`: the schedule's arrival → the admission it finished in (its latest); `timeToAdmission` (from creation) in reports without it | arrival → its latest admission write (`latest_start`) |
//! | writes per admission | `apiWrites.writesPerAdmission`: state-lane writes ÷ admissions | the simulator's API writes (admissions and evictions) ÷ admissions |
//! | evictions | `workloads.evictions`: times seen newly `Evicted` | runs that ended preempted or evicted |
//!
//! The class is the trace's workload class on both sides (`bench run`
//! groups by the Workload's `sluice.dev/bench-class`, set from it).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sluice_simulate::report::wait_stats;
use sluice_simulate::sim::{RunEnd, SimResult, WorkloadRecord};
use sluice_simulate::units::Millis;

use crate::report::{FORMAT, RunReport};
use crate::track::Ms;

/// Why a report cannot be the real side.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("not a `bench run` JSON report: {0}")]
    NotAReport(#[source] serde_json::Error),
    #[error("a report of format {found}; this sluice reads format {FORMAT}")]
    Format { found: u32 },
    #[error(
        "the report is of scenario {report:?} at scale {report_scale}, not of {scenario:?} at scale {scale}: pass the --scenario and --scale it was run with"
    )]
    Mismatch {
        report: String,
        report_scale: f64,
        scenario: String,
        scale: f64,
    },
}

/// One side's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Every workload finished (else the figures are of a partial run).
    pub complete: bool,
    pub wall_ms: Ms,
    pub admissions: u64,
    /// Admissions ÷ wall time; 0 for a wall time of 0.
    pub admissions_per_second: f64,
    /// By class name.
    pub classes: Vec<ClassWait>,
    /// `None` when not measured (no `--controller-metrics`) or without
    /// admissions.
    pub writes_per_admission: Option<f64>,
    pub evictions: u64,
}

/// Time to admission of one class, over its workloads admitted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassWait {
    pub name: String,
    pub admitted: u64,
    pub mean_ms: f64,
    pub p95_ms: Ms,
}

/// Admissions ÷ wall time in seconds.
pub fn per_second(admissions: u64, wall_ms: Ms) -> f64 {
    if wall_ms > 0 {
        admissions as f64 / (wall_ms as f64 / 1000.0)
    } else {
        0.0
    }
}

/// The fields of a `bench run` report the comparison reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Saved {
    format: u32,
    scenario: String,
    scale: f64,
    complete: bool,
    wall_ms: Ms,
    workloads: SavedCounts,
    classes: Vec<SavedClass>,
    api_writes: Option<SavedWrites>,
}

#[derive(Deserialize)]
struct SavedCounts {
    admissions: u64,
    evictions: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedClass {
    name: String,
    time_to_admission: SavedWait,
    /// Reports made before it was measured do not have it.
    time_to_admission_from_schedule: Option<SavedWait>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedWait {
    count: u64,
    mean_ms: f64,
    p95_ms: Ms,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedWrites {
    writes_per_admission: Option<f64>,
}

/// The real side: a report's scenario (the Trace's name), scale and
/// figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Real {
    pub scenario: String,
    pub scale: f64,
    pub figures: Figures,
}

impl Real {
    /// From a `bench run --json` report, as saved.
    pub fn from_json(json: &str) -> Result<Real, CompareError> {
        let saved: Saved = serde_json::from_str(json).map_err(CompareError::NotAReport)?;
        Self::from_saved(saved)
    }

    /// From a run just made: read as its saved JSON is, so that both paths
    /// are one.
    pub fn from_report(report: &RunReport) -> Result<Real, CompareError> {
        let value = serde_json::to_value(report).map_err(CompareError::NotAReport)?;
        Self::from_saved(serde_json::from_value(value).map_err(CompareError::NotAReport)?)
    }

    fn from_saved(s: Saved) -> Result<Real, CompareError> {
        if s.format != FORMAT {
            return Err(CompareError::Format { found: s.format });
        }
        let admissions = s.workloads.admissions;
        let classes = s
            .classes
            .into_iter()
            .map(|c| {
                // From the schedule's arrival, as the simulator counts.
                let wait = c.time_to_admission_from_schedule.unwrap_or(c.time_to_admission);
                ClassWait {
                    name: c.name,
                    admitted: wait.count,
                    mean_ms: wait.mean_ms,
                    p95_ms: wait.p95_ms,
                }
            })
            .collect();
        let figures = Figures {
            complete: s.complete,
            wall_ms: s.wall_ms,
            admissions,
            admissions_per_second: per_second(admissions, s.wall_ms),
            classes,
            writes_per_admission: s.api_writes.and_then(|w| w.writes_per_admission),
            evictions: s.workloads.evictions,
        };
        Ok(Real {
            scenario: s.scenario,
            scale: s.scale,
            figures,
        })
    }

    /// An error unless the report is of `scenario` (the Trace's name) at
    /// `scale`.
    pub fn check_matches(&self, scenario: &str, scale: f64) -> Result<(), CompareError> {
        if self.scenario == scenario && self.scale == scale {
            return Ok(());
        }
        Err(CompareError::Mismatch {
            report: self.scenario.clone(),
            report_scale: self.scale,
            scenario: scenario.to_string(),
            scale,
        })
    }
}

/// The simulated side of a run of the simulator. Writes are
/// `SimResult::api_writes` (each admission and each eviction, the
/// simulator's one write model so far).
pub fn simulated(result: &SimResult) -> Figures {
    let workloads = result.workloads.iter().map(|w| (w.class.as_str(), w.arrival));
    sim_figures(workloads, &result.records, result.end, result.api_writes)
}

/// The simulated figures from each workload's (class, arrival), in the
/// records' order, its record, the simulation's end and its writes.
pub fn sim_figures<'a>(
    workloads: impl IntoIterator<Item = (&'a str, Millis)>,
    records: &[WorkloadRecord],
    end: Millis,
    writes: u64,
) -> Figures {
    let mut waits: BTreeMap<&str, Vec<Millis>> = BTreeMap::new();
    for ((class, arrival), r) in workloads.into_iter().zip(records) {
        let class_waits = waits.entry(class).or_default();
        if let Some(start) = r.latest_start() {
            class_waits.push((start - arrival).max(0));
        }
    }
    // Every admission is written, in order, even one preempted before its
    // write went out (the eviction is written after it): a watch sees it
    // admitted, then evicted.
    let admissions = records.iter().map(|r| r.runs.len() as u64).sum();
    let evictions = records
        .iter()
        .flat_map(|r| &r.runs)
        .filter(|run| ended_by_eviction(run.end))
        .count() as u64;
    let complete = records.iter().all(|r| r.finished_at().is_some());
    let last_finish = records.iter().filter_map(WorkloadRecord::finished_at).max();
    let wall_ms = if complete { last_finish.unwrap_or(0) } else { end };
    let classes = waits
        .into_iter()
        .map(|(name, w)| {
            let s = wait_stats(w);
            ClassWait {
                name: name.to_string(),
                admitted: s.count,
                mean_ms: s.mean_ms,
                p95_ms: s.p95_ms,
            }
        })
        .collect();
    Figures {
        complete,
        wall_ms,
        admissions,
        admissions_per_second: per_second(admissions, wall_ms),
        classes,
        writes_per_admission: (admissions > 0).then(|| writes as f64 / admissions as f64),
        evictions,
    }
}

fn ended_by_eviction(end: RunEnd) -> bool {
    matches!(end, RunEnd::Preempted | RunEnd::Evicted | RunEnd::IdleReclaimed)
}

/// What a row's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unit {
    Ms,
    PerSecond,
    Count,
    WritesPerAdmission,
}

/// One line of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub figure: String,
    pub unit: Unit,
    pub real: Option<f64>,
    pub simulated: Option<f64>,
    /// simulated ÷ real; `None` when either is missing or real is 0.
    pub ratio: Option<f64>,
}

/// simulated ÷ real.
pub fn ratio(real: Option<f64>, simulated: Option<f64>) -> Option<f64> {
    let (r, s) = (real?, simulated?);
    (r != 0.0).then(|| s / r)
}

fn row(figure: impl Into<String>, unit: Unit, real: Option<f64>, simulated: Option<f64>) -> Row {
    Row {
        figure: figure.into(),
        unit,
        real,
        simulated,
        ratio: ratio(real, simulated),
    }
}

/// The rows of the comparison: wall time, admissions, admissions/s, mean
/// and p95 time to admission per class (every class of either side, by
/// name; `None` where a side admitted none of it), writes per admission,
/// evictions.
pub fn rows(real: &Figures, simulated: &Figures) -> Vec<Row> {
    let count = |n: u64| Some(n as f64);
    let mut rows = vec![
        row(
            "wall time",
            Unit::Ms,
            Some(real.wall_ms as f64),
            Some(simulated.wall_ms as f64),
        ),
        row(
            "admissions",
            Unit::Count,
            count(real.admissions),
            count(simulated.admissions),
        ),
        row(
            "admissions/s (mean over wall)",
            Unit::PerSecond,
            Some(real.admissions_per_second),
            Some(simulated.admissions_per_second),
        ),
    ];
    let names: BTreeSet<&str> = (real.classes.iter().chain(&simulated.classes))
        .map(|c| c.name.as_str())
        .collect();
    let find = |f: &Figures, name: &str| f.classes.iter().find(|c| c.name == name && c.admitted > 0).cloned();
    for name in names {
        let (r, s) = (find(real, name), find(simulated, name));
        let mean = |c: &Option<ClassWait>| c.as_ref().map(|c| c.mean_ms);
        let p95 = |c: &Option<ClassWait>| c.as_ref().map(|c| c.p95_ms as f64);
        rows.push(row(
            format!("time to admission {name}, mean"),
            Unit::Ms,
            mean(&r),
            mean(&s),
        ));
        rows.push(row(
            format!("time to admission {name}, p95"),
            Unit::Ms,
            p95(&r),
            p95(&s),
        ));
    }
    rows.push(row(
        "writes per admission",
        Unit::WritesPerAdmission,
        real.writes_per_admission,
        simulated.writes_per_admission,
    ));
    rows.push(row(
        "evictions",
        Unit::Count,
        count(real.evictions),
        count(simulated.evictions),
    ));
    rows
}

/// The comparison `bench compare` prints and writes (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub format: u32,
    #[serde(flatten)]
    pub setting: Setting,
    pub real: Figures,
    pub simulated: Figures,
    pub rows: Vec<Row>,
}

/// How the comparison was made: scenario, scale, limit, fair sharing, the
/// simulator's lags, and where the real side comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Setting {
    /// The Trace's name.
    pub scenario: String,
    pub scale: f64,
    pub kube_qps: f64,
    pub kube_burst: u32,
    pub fair_sharing: bool,
    /// The simulator's `Finished` round trip and write latency.
    pub finish_lag_ms: i64,
    pub api_latency_ms: i64,
    /// Where the real side comes from: `run <id>` or `report <file>`.
    pub real_source: String,
}

impl Comparison {
    pub fn new(setting: Setting, real: Figures, simulated: Figures) -> Self {
        let rows = rows(&real, &simulated);
        Comparison {
            format: FORMAT,
            setting,
            real,
            simulated,
            rows,
        }
    }
}
