//! The terminal rendering of a bench run's and a floor measurement's
//! figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{ApiWrites, FloorReport, ResourceUsage, RunReport, StallReport, VsFloor};
use crate::track::{Ms, Scope};
use sluice_simulate::report::table::Table;
use sluice_simulate::units::format_duration;

/// Above this many cluster queues the table shows cohorts instead.
const MAX_QUEUE_ROWS: usize = 40;

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.1}%", v * 100.0))
}

fn dur(ms: f64) -> String {
    format_duration(ms.round() as Ms)
}

fn amount(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The terminal summary of a run.
pub fn render(r: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice bench run: {} × {} (run {}): {}\n",
        r.scenario,
        r.scale,
        r.run_id,
        status(r)
    );
    if let Some(s) = &r.stalled {
        stall_reasons(&mut out, s);
    }
    let lines = summary(r);
    let width = lines.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    for (k, v) in &lines {
        let _ = writeln!(out, "{k:<width$}  {v}");
    }

    out.push_str("\ntime to admission per class (creation → the admission it finished in, as Kueue counts)\n");
    class_table(r).render(&mut out);

    out.push_str("\nusage (∫ admitted quota ÷ nominal × wall time)\n");
    usage_table(r).render(&mut out);

    if !r.quota_violations.is_empty() {
        out.push_str("\nquota violations (observed)\n");
        violation_table(r).render(&mut out);
    }
    out
}

/// How the run ended, and how many workloads finished.
fn status(r: &RunReport) -> String {
    if r.complete {
        "all workloads finished".to_string()
    } else if let Some(s) = &r.stalled {
        format!(
            "STALLED: nothing admitted or finished for {} while {} workloads waited and none ran; {} of {} workloads finished",
            dur(s.window_ms as f64),
            s.pending,
            r.workloads.finished,
            r.workloads.planned
        )
    } else if r.timed_out {
        format!(
            "TIMED OUT: {} of {} workloads finished",
            r.workloads.finished, r.workloads.planned
        )
    } else {
        format!(
            "INCOMPLETE: {} of {} workloads finished",
            r.workloads.finished, r.workloads.planned
        )
    }
}

/// The run's figures, one (label, value) line each.
fn summary(r: &RunReport) -> Vec<(String, String)> {
    let w = &r.workloads;
    let mut lines: Vec<(String, String)> = vec![
        ("wall time".into(), dur(r.wall_ms as f64)),
        (
            "workloads".into(),
            format!(
                "{} planned, {} created, {} admitted, {} finished; {} evictions",
                w.planned, w.created, w.admitted, w.finished, w.evictions
            ),
        ),
        (
            "admissions".into(),
            format!(
                "{} ({:.1}/s mean, {:.1}/s peak over {}s)",
                w.admissions,
                r.admission_rate.mean_per_second,
                r.admission_rate.peak_per_second,
                r.admission_rate.window_seconds
            ),
        ),
    ];
    if let Some(f) = &r.floor {
        let ratio = r.vs_floor.as_ref().map(vs_floor).unwrap_or_default();
        lines.push(("write floor".into(), format!("{}{ratio}", floor_line(f))));
    }
    lines.extend(controller_writes(r.api_writes.as_ref()));
    lines.push(match &r.controller_peak_rss {
        Some(p) => (
            "controller peak RSS".into(),
            format!("{:.1} MiB ({})", p.bytes as f64 / (1024.0 * 1024.0), p.source),
        ),
        None => ("controller peak RSS".into(), "— (no --controller-pid)".into()),
    });
    lines.push(("CPU time".into(), cpu_line(r)));
    lines.push((
        "creation lag".into(),
        format!(
            "{} mean, {} max behind the schedule",
            dur(r.creation_lag.mean_ms),
            dur(r.creation_lag.max_ms as f64)
        ),
    ));
    lines.push((
        "quota violations".into(),
        if r.quota_violations.is_empty() {
            "none".into()
        } else {
            format!("{} (listed below)", r.quota_violations.len())
        },
    ));
    if r.watch_restarts > 0 || r.create_write_errors > 0 || r.finish_write_errors > 0 {
        lines.push((
            "harness".into(),
            format!(
                "{} watch restarts, {} failed creations, {} failed Finished marks (tried again)",
                r.watch_restarts, r.create_write_errors, r.finish_write_errors
            ),
        ));
    }
    lines
}

/// CPU seconds over the run of the controller (and per 1 000 admissions),
/// the API server and etcd, of those measured.
fn cpu_line(r: &RunReport) -> String {
    let mut parts = Vec::new();
    if let Some(s) = r.controller_cpu_seconds {
        let per = r
            .controller_cpu_seconds_per_1000_admissions
            .map(|p| format!(" ({p:.2} s per 1 000 admissions)"))
            .unwrap_or_default();
        parts.push(format!("controller {s:.1} s{per}"));
    }
    if let Some(s) = r.apiserver_cpu_seconds {
        parts.push(format!("kube-apiserver {s:.1} s"));
    }
    if let Some(s) = r.etcd_cpu_seconds {
        parts.push(format!("etcd {s:.1} s"));
    }
    if parts.is_empty() {
        return "— (no --controller-pid, --apiserver-pid or --etcd-pid)".into();
    }
    format!("{} (user + system, over the run)", parts.join(", "))
}

/// The admission rates (and wall time) against the write floor's, after
/// the floor's own figures.
fn vs_floor(v: &VsFloor) -> String {
    let wall = match (v.wall, v.floor_wall_ms) {
        (Some(ratio), Some(t)) => format!(
            "; wall time {:.2} × its {:.1} s for these admissions",
            ratio,
            t / 1000.0
        ),
        _ => String::new(),
    };
    format!(
        "; admissions/s at {:.0}% (mean), {:.0}% (peak) of it{wall}",
        v.mean * 100.0,
        v.peak * 100.0
    )
}

/// The controller's writes (`--controller-metrics`): per admission and
/// lane, and per kind.
fn controller_writes(a: Option<&ApiWrites>) -> Vec<(String, String)> {
    let Some(a) = a else {
        return vec![("controller writes".into(), "— (no --controller-metrics)".into())];
    };
    let nonzero = |m: &BTreeMap<String, f64>| -> Vec<String> {
        m.iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect()
    };
    let (kinds, lanes) = (nonzero(&a.per_kind), nonzero(&a.per_lane));
    let per = a
        .per_admission
        .map(|p| format!(", {p:.2} per admission"))
        .unwrap_or_default();
    let mut lines = Vec::new();
    if let Some(w) = a.writes_per_admission {
        lines.push((
            "writes per admission".into(),
            format!("{w:.3} (state lane; by lane: {})", lanes.join(", ")),
        ));
    }
    lines.push((
        "controller writes".into(),
        format!("{:.0}{per} ({})", a.total, kinds.join(", ")),
    ));
    lines
}

/// Time to admission per class.
fn class_table(r: &RunReport) -> Table {
    let mut t = Table::new(
        [
            "class",
            "workloads",
            "admitted",
            "finished",
            "evictions",
            "mean",
            "p50",
            "p95",
            "max",
            "mean to 1st",
        ]
        .map(String::from)
        .to_vec(),
    );
    for c in &r.classes {
        let s = &c.time_to_admission;
        let mut row = vec![
            c.name.clone(),
            c.workloads.to_string(),
            c.admitted.to_string(),
            c.finished.to_string(),
            c.evictions.to_string(),
        ];
        if s.count == 0 {
            row.extend(std::iter::repeat_n("—".to_string(), 5));
        } else {
            row.extend([
                dur(s.mean_ms),
                format_duration(s.p50_ms),
                format_duration(s.p95_ms),
                format_duration(s.max_ms),
                dur(c.time_to_first_admission.mean_ms),
            ]);
        }
        t.rows.push(row);
    }
    t
}

/// Usage per cluster queue (per cohort above [`MAX_QUEUE_ROWS`] queues),
/// then of all together.
fn usage_table(r: &RunReport) -> Table {
    let mut t = Table::new(
        ["cluster queue", "cohort", "resource", "nominal", "used", "usage"]
            .map(String::from)
            .to_vec(),
    );
    if r.cluster_queues.len() <= MAX_QUEUE_ROWS {
        for q in &r.cluster_queues {
            for u in &q.resources {
                t.rows.push(usage_row(&q.name, q.cohort.as_deref().unwrap_or("—"), u));
            }
        }
    } else {
        t.rows.extend(cohort_usage_rows(r));
    }
    t.rule();
    for u in &r.total_usage {
        t.rows.push(usage_row("all", "", u));
    }
    t
}

fn usage_row(name: &str, cohort: &str, u: &ResourceUsage) -> Vec<String> {
    vec![
        name.to_string(),
        cohort.to_string(),
        u.resource.clone(),
        amount(u.nominal),
        format!("{:.1} {}·s", u.used_unit_seconds, short_resource(&u.resource)),
        pct(u.usage),
    ]
}

/// Per cohort: its queues' sums, a row per resource.
fn cohort_usage_rows(r: &RunReport) -> Vec<Vec<String>> {
    let mut cohorts: BTreeMap<&str, BTreeMap<&str, (f64, f64, usize)>> = BTreeMap::new();
    for q in &r.cluster_queues {
        for u in &q.resources {
            let e = cohorts
                .entry(q.cohort.as_deref().unwrap_or("(no cohort)"))
                .or_default()
                .entry(u.resource.as_str())
                .or_default();
            e.0 += u.nominal;
            e.1 += u.used_unit_seconds;
            e.2 += 1;
        }
    }
    let mut rows = Vec::new();
    for (cohort, resources) in cohorts {
        for (resource, (nominal, used, n)) in resources {
            let usage = (nominal > 0.0 && r.wall_ms > 0).then(|| used / (nominal * r.wall_ms as f64 / 1000.0));
            let u = ResourceUsage {
                resource: resource.to_string(),
                nominal,
                used_unit_seconds: used,
                usage,
            };
            rows.push(usage_row(&format!("{n} queues"), cohort, &u));
        }
    }
    rows
}

/// The quota violations observed.
fn violation_table(r: &RunReport) -> Table {
    let mut t = Table::new(
        ["scope", "name", "flavor", "resource", "limit", "peak", "from", "to"]
            .map(String::from)
            .to_vec(),
    );
    for v in &r.quota_violations {
        t.rows.push(vec![
            match v.scope {
                Scope::ClusterQueue => "clusterQueue".into(),
                Scope::Cohort => "cohort".into(),
            },
            v.name.clone(),
            v.flavor.clone(),
            v.resource.clone(),
            amount(v.limit),
            amount(v.peak),
            dur(v.from_ms as f64),
            dur(v.to_ms as f64),
        ]);
    }
    t
}

/// Reasons shown of a stalled run (`--json` has them all).
const MAX_REASONS: usize = 5;

/// Why the workloads of a stalled run wait, most common first.
fn stall_reasons(out: &mut String, s: &StallReport) {
    if s.reasons.is_empty() {
        out.push_str("their reasons could not be read (see the warning above)\n\n");
        return;
    }
    out.push_str("why they wait (the Workloads' status, as the controller wrote it):\n");
    let width = s
        .reasons
        .iter()
        .map(|r| r.workloads.to_string().len())
        .max()
        .unwrap_or(0);
    for r in s.reasons.iter().take(MAX_REASONS) {
        let reason = r.reason.as_deref().unwrap_or("no reason written by the controller yet");
        let _ = writeln!(out, "  {:>width$}  {reason}", r.workloads);
    }
    let rest = &s.reasons[s.reasons.len().min(MAX_REASONS)..];
    if !rest.is_empty() {
        let _ = writeln!(
            out,
            "  … {} more workloads, {} other reasons (--json lists them all)",
            rest.iter().map(|r| r.workloads).sum::<u64>(),
            rest.len()
        );
    }
    let placement = s
        .reasons
        .iter()
        .filter_map(|r| r.reason.as_deref())
        .any(|r| r.starts_with("NeverPlaceable") || r.starts_with("NoPlacement"));
    if placement {
        out.push_str(
            "they wait for room on Nodes, and a bench run makes none: run the controller with --placement=quota-only (docs/benchmarks.md)\n",
        );
    }
    out.push('\n');
}

fn short_resource(r: &str) -> &str {
    r.strip_prefix("nvidia.com/").unwrap_or(r)
}

fn floor_line(f: &FloorReport) -> String {
    let limit = if f.kube_qps > 0.0 {
        format!("--kube-qps {} --kube-burst {}", f.kube_qps, f.kube_burst)
    } else {
        "no client limit".to_string()
    };
    format!(
        "{:.1} patches/s (p50 {:.1} ms, p95 {:.1} ms; {limit}, concurrency {}{})",
        f.patches_per_second,
        f.latency.p50_ms,
        f.latency.p95_ms,
        f.concurrency,
        if f.failed > 0 {
            format!(", {} failed", f.failed)
        } else {
            String::new()
        }
    )
}

/// The terminal summary of a floor measurement.
pub fn render_floor(f: &FloorReport) -> String {
    format!(
        "sluice bench floor (run {}): {} Workload status patches in {}\n{}\nlatency: mean {:.1} ms, p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms\n",
        f.run_id,
        f.patches,
        dur(f.elapsed_ms),
        floor_line(f),
        f.latency.mean_ms,
        f.latency.p50_ms,
        f.latency.p95_ms,
        f.latency.max_ms
    )
}
