//! The report's `forecast` section (`--forecast`): how close the start-time
//! estimates made at submission came to the actual first admission.
//!
//! - *forecast*: workloads still pending after the first cycle after their arrival
//!   (the others were admitted at once: nothing to estimate).
//! - *estimated*: given an estimate (admitted in the forecast within its
//!   horizon); *not estimated*: the rest.
//! - *error* = estimate − actual first admission (the cycle that admitted
//!   it), over the estimated workloads that were admitted: negative means
//!   the estimate was too early (the workload started later than said).
//!   `|error|` is its absolute value. Percentiles by nearest rank.
//! - *wait*: actual first admission − arrival over the same workloads, for
//!   scale.
//! - two rows: the controller's rule for expected run times, and every run
//!   time and end known exactly (what is left is the model's own error).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::nearest_rank;
use super::table::Table;
use crate::sim::{Estimate, SimResult};
use crate::units::{Millis, format_duration};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForecastReport {
    /// How far each forecast looked, ms.
    pub horizon_ms: Millis,
    /// Admitted by the first cycle after their arrival: not estimated.
    pub admitted_on_arrival: u64,
    /// Still pending after that cycle: a forecast ran for them.
    pub forecast: u64,
    /// With the expected-runtime rule (the controller's).
    pub expected_run_times: Accuracy,
    /// With every run time and end known exactly.
    pub exact_run_times: Accuracy,
    /// Per workload class (expected run times), by name.
    pub classes: Vec<ClassAccuracy>,
    /// Every forecast workload, in trace order.
    pub workloads: Vec<WorkloadEstimate>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadEstimate {
    pub name: String,
    pub class: String,
    pub arrival_ms: Millis,
    /// Estimated admission, expected run times (`null`: not estimated).
    pub estimate_ms: Option<Millis>,
    /// Estimated admission, exact run times.
    pub exact_estimate_ms: Option<Millis>,
    /// Actual first admission (`null`: never admitted).
    pub admitted_ms: Option<Millis>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accuracy {
    pub estimated: u64,
    /// Not admitted within the forecast's horizon.
    pub not_estimated: u64,
    /// Estimated but never admitted in the run (not in the errors).
    pub never_admitted: u64,
    /// Estimated and admitted: the errors are over these.
    pub compared: u64,
    pub abs_error_p50_ms: Millis,
    pub abs_error_p90_ms: Millis,
    pub abs_error_max_ms: Millis,
    /// estimate − actual (negative: too early).
    pub error_p10_ms: Millis,
    pub error_p50_ms: Millis,
    pub error_p90_ms: Millis,
    pub error_mean_ms: f64,
    /// Estimates too early (admitted later) and too late.
    pub too_early: u64,
    pub too_late: u64,
    /// Actual wait to first admission of the compared workloads.
    pub wait_p50_ms: Millis,
    pub wait_p90_ms: Millis,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassAccuracy {
    pub class: String,
    #[serde(flatten)]
    pub accuracy: Accuracy,
}

/// Estimates and what happened, gathered for one row.
#[derive(Default)]
struct Tally {
    not_estimated: u64,
    never_admitted: u64,
    /// (estimate − actual, wait).
    pairs: Vec<(Millis, Millis)>,
}

impl Tally {
    fn add(&mut self, estimate: Option<Millis>, actual: Option<Millis>, arrival: Millis) {
        match (estimate, actual) {
            (None, _) => self.not_estimated += 1,
            (Some(_), None) => self.never_admitted += 1,
            (Some(e), Some(a)) => self.pairs.push((e - a, a - arrival)),
        }
    }

    fn accuracy(self) -> Accuracy {
        let compared = self.pairs.len() as u64;
        let mut signed: Vec<Millis> = self.pairs.iter().map(|p| p.0).collect();
        let mut abs: Vec<Millis> = signed.iter().map(|e| e.abs()).collect();
        let mut waits: Vec<Millis> = self.pairs.iter().map(|p| p.1).collect();
        signed.sort_unstable();
        abs.sort_unstable();
        waits.sort_unstable();
        let rank = |v: &[Millis], p: f64| nearest_rank(v, p).unwrap_or_default();
        Accuracy {
            estimated: compared + self.never_admitted,
            not_estimated: self.not_estimated,
            never_admitted: self.never_admitted,
            compared,
            abs_error_p50_ms: rank(&abs, 0.5),
            abs_error_p90_ms: rank(&abs, 0.9),
            abs_error_max_ms: abs.last().copied().unwrap_or_default(),
            error_p10_ms: rank(&signed, 0.1),
            error_p50_ms: rank(&signed, 0.5),
            error_p90_ms: rank(&signed, 0.9),
            error_mean_ms: if signed.is_empty() {
                0.0
            } else {
                signed.iter().map(|&e| e as f64).sum::<f64>() / signed.len() as f64
            },
            too_early: signed.iter().filter(|&&e| e < 0).count() as u64,
            too_late: signed.iter().filter(|&&e| e > 0).count() as u64,
            wait_p50_ms: rank(&waits, 0.5),
            wait_p90_ms: rank(&waits, 0.9),
        }
    }
}

/// The section, if the run made forecasts.
pub fn build(r: &SimResult) -> Option<ForecastReport> {
    let outcome = r.forecast.as_ref()?;
    let mut model = Tally::default();
    let mut exact = Tally::default();
    let mut classes: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut admitted_on_arrival = 0;
    let mut forecast = 0;
    let mut workloads = Vec::new();
    for ((w, rec), estimate) in r.workloads.iter().zip(&r.records).zip(&outcome.estimates) {
        let actual = rec.runs.first().map(|run| run.admitted_at);
        let Some(Estimate { model: m, exact: x }) = *estimate else {
            // Not estimated: admitted by the first cycle after its arrival
            // (within the 50 ms the cycle gathers events for), or refused.
            admitted_on_arrival += u64::from(rec.rejected.is_none() && actual.is_some());
            continue;
        };
        forecast += 1;
        workloads.push(WorkloadEstimate {
            name: w.name.clone(),
            class: w.class.clone(),
            arrival_ms: w.arrival,
            estimate_ms: m,
            exact_estimate_ms: x,
            admitted_ms: actual,
        });
        model.add(m, actual, w.arrival);
        exact.add(x, actual, w.arrival);
        classes.entry(&w.class).or_default().add(m, actual, w.arrival);
    }
    Some(ForecastReport {
        horizon_ms: outcome.settings.horizon_ms,
        admitted_on_arrival,
        forecast,
        expected_run_times: model.accuracy(),
        exact_run_times: exact.accuracy(),
        classes: classes
            .into_iter()
            .map(|(class, t)| ClassAccuracy {
                class: class.to_string(),
                accuracy: t.accuracy(),
            })
            .collect(),
        workloads,
    })
}

/// Column headers of the accuracy tables (after the first column).
pub const COLUMNS: [&str; 9] = [
    "estimated",
    "not",
    "|error| p50",
    "p90",
    "error p10",
    "p50",
    "p90",
    "early/late",
    "wait p50",
];

/// One row's cells, shared by the terminal and HTML tables.
pub fn cells(a: &Accuracy) -> Vec<String> {
    vec![
        a.estimated.to_string(),
        a.not_estimated.to_string(),
        format_duration(a.abs_error_p50_ms),
        format_duration(a.abs_error_p90_ms),
        format_duration(a.error_p10_ms),
        format_duration(a.error_p50_ms),
        format_duration(a.error_p90_ms),
        format!("{}/{}", a.too_early, a.too_late),
        format_duration(a.wait_p50_ms),
    ]
}

/// The one-line summary above the tables.
pub fn lede(f: &ForecastReport) -> String {
    format!(
        "estimated at submission for the {} workloads still pending after their arrival's cycle ({} admitted at once); error = estimate − actual admission, negative = too early",
        f.forecast, f.admitted_on_arrival
    )
}

pub fn render_table(f: &ForecastReport, out: &mut String) {
    let _ = writeln!(out, "\nStart-time estimates ({})", lede(f));
    let header = |first: &str| {
        let mut h = vec![first.to_string()];
        h.extend(COLUMNS.iter().map(|c| c.to_string()));
        h
    };
    let mut t = Table::new(header("run times"));
    for (name, a) in [("expected", &f.expected_run_times), ("exact", &f.exact_run_times)] {
        let mut row = vec![name.to_string()];
        row.extend(cells(a));
        t.rows.push(row);
    }
    t.render(out);
    let mut t = Table::new(header("class (expected)"));
    for c in &f.classes {
        let mut row = vec![c.class.clone()];
        row.extend(cells(&c.accuracy));
        t.rows.push(row);
    }
    t.render(out);
}
