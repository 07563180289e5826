//! The terminal summary: plain aligned columns, no dependencies.

use std::fmt::Write as _;

use super::{Column, Group, Report};
use crate::units::format_duration;

/// Above this many cluster queues the table shows cohorts instead.
pub(crate) const MAX_QUEUE_ROWS: usize = 40;

/// Right-aligned columns except the first; two spaces between columns.
/// (Also used by `sluice bench`'s terminal report.)
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Index of rows after which a rule is drawn.
    rules: Vec<usize>,
}

impl Table {
    pub fn new(header: Vec<String>) -> Self {
        Self {
            header,
            rows: Vec::new(),
            rules: Vec::new(),
        }
    }

    pub fn rule(&mut self) {
        self.rules.push(self.rows.len());
    }

    pub fn render(&self, out: &mut String) {
        let cols = self.header.len();
        let mut widths = vec![0usize; cols];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |out: &mut String, row: &[String]| {
            let mut text = String::new();
            for (c, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if c > 0 {
                    text.push_str("  ");
                }
                let pad = w - cell.chars().count();
                if c == 0 {
                    text.push_str(cell);
                    text.extend(std::iter::repeat_n(' ', pad));
                } else {
                    text.extend(std::iter::repeat_n(' ', pad));
                    text.push_str(cell);
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        line(out, &self.header);
        out.push_str(&"─".repeat(total));
        out.push('\n');
        for (i, row) in self.rows.iter().enumerate() {
            if self.rules.contains(&i) {
                out.push_str(&"─".repeat(total));
                out.push('\n');
            }
            line(out, row);
        }
    }
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("{:.0}%", v * 100.0),
        None => "—".into(),
    }
}

fn counts(g: &Group) -> Vec<String> {
    vec![
        g.workloads.to_string(),
        g.admitted.to_string(),
        g.finished.to_string(),
        (g.preemptions + g.evictions).to_string(),
        (g.never_admitted + g.rejected).to_string(),
    ]
}

fn waits(g: &Group) -> Vec<String> {
    if g.wait.count == 0 {
        return vec!["—".into(); 4];
    }
    vec![
        format_duration(g.wait.mean_ms.round() as i64),
        format_duration(g.wait.p50_ms),
        format_duration(g.wait.p95_ms),
        format_duration(g.wait.max_ms),
    ]
}

/// Renders the summary printed after a run.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    headline(r, &mut out);
    out.push('\n');
    queue_table(r, &mut out);
    out.push('\n');
    class_table(r, &mut out);
    out.push('\n');
    flavor_table(r, &mut out);
    if let Some(p) = &r.placement {
        super::placement::render_table(p, &mut out);
    }
    if let Some(f) = &r.fairness {
        super::fairness::render_table(f, &mut out);
    }
    if let Some(idle) = &r.idle {
        super::idle::render_table(idle, &mut out);
    }
    if let Some(f) = &r.forecast {
        super::forecast::render_table(f, &mut out);
    }
    if let Some(b) = &r.backfill {
        super::backfill::render_table(b, &mut out);
    }
    if let Some(u) = &r.usage {
        super::usage::render_table(u, &mut out);
    }
    never_admitted(r, &mut out);
    out
}

const COUNT_COLUMNS: [&str; 5] = ["workloads", "admitted", "finished", "preempted", "pending"];
const WAIT_COLUMNS: [&str; 4] = ["wait mean", "p50", "p95", "max"];

/// What was run: the scenario, its size, virtual time, cycles and API
/// writes (with their delay when throttled).
fn headline(r: &Report, out: &mut String) {
    let _ = writeln!(
        out,
        "Simulated {}: {} workloads over {} of virtual time ({} cycles, {} API writes{}).",
        r.scenario,
        r.totals.workloads,
        format_duration(r.makespan_ms),
        r.cycles,
        r.api_writes.count,
        match r.options.api_qps {
            Some(q) => format!(
                " at {q} qps: mean delay {}, max {}",
                format_duration(r.api_writes.mean_delay_ms.round() as i64),
                format_duration(r.api_writes.max_delay_ms)
            ),
            None => String::new(),
        }
    );
}

/// A row per ClusterQueue (per cohort when there are too many queues),
/// then the cluster's totals.
fn queue_table(r: &Report, out: &mut String) {
    let columns = Column::all(&r.totals);
    // Hundreds of queues do not make a readable table: show cohorts then.
    let by_cohort = r.cluster_queues.len() > MAX_QUEUE_ROWS && !r.cohorts.is_empty();
    let (title, first, groups) = if by_cohort {
        (
            format!(
                "Cohorts ({} cluster queues: per-queue figures are in --json; utilisation = mean use ÷ nominal quota; borrowed = share of use above nominal)\n",
                r.cluster_queues.len()
            ),
            "cohort",
            &r.cohorts,
        )
    } else {
        (
            "Cluster queues (utilisation = mean use ÷ nominal quota; borrowed = share of use above nominal)\n"
                .to_string(),
            "cluster queue",
            &r.cluster_queues,
        )
    };
    out.push_str(&title);
    let mut header: Vec<String> = vec![first.into()];
    header.extend(COUNT_COLUMNS.iter().map(|s| s.to_string()));
    header.extend(WAIT_COLUMNS.iter().map(|s| s.to_string()));
    header.extend(columns.iter().map(Column::label));
    header.push("borrowed".into());
    let mut t = Table::new(header);
    for g in groups {
        t.rows.push(queue_row(g, &columns));
    }
    t.rule();
    let mut total = queue_row(&r.totals, &columns);
    total[0] = "cluster".into();
    let last = total.len() - 1;
    total[last] = "—".into();
    t.rows.push(total);
    t.render(out);
}

/// A queue's (or cohort's) counts, waits, utilisation per column and
/// borrowed share.
fn queue_row(g: &Group, columns: &[Column]) -> Vec<String> {
    let mut row = vec![g.name.clone()];
    row.extend(counts(g));
    row.extend(waits(g));
    for col in columns {
        row.push(pct(col.of(g).and_then(|x| x.utilisation)));
    }
    // Borrowed share of the first resource the group uses, GPUs first.
    let borrowed = (g.resources.iter())
        .find(|x| x.borrowed_share.is_some())
        .and_then(|x| x.borrowed_share);
    row.push(pct(borrowed));
    row
}

/// A row per workload class: counts and waits.
fn class_table(r: &Report, out: &mut String) {
    out.push_str("Workload classes\n");
    let mut header: Vec<String> = vec!["class".into()];
    header.extend(COUNT_COLUMNS.iter().map(|s| s.to_string()));
    header.extend(WAIT_COLUMNS.iter().map(|s| s.to_string()));
    let mut t = Table::new(header);
    for g in &r.classes {
        let mut row = vec![g.name.clone()];
        row.extend(counts(g));
        row.extend(waits(g));
        t.rows.push(row);
    }
    t.render(out);
}

/// A row per resource and flavor: nominal, peak in use, utilisation.
fn flavor_table(r: &Report, out: &mut String) {
    out.push_str("Cluster capacity per flavor (nominal, peak in use, mean utilisation)\n");
    let mut t = Table::new(vec![
        "resource".into(),
        "flavor".into(),
        "nominal".into(),
        "peak".into(),
        "utilisation".into(),
    ]);
    for x in &r.totals.flavors {
        t.rows.push(vec![
            x.resource.clone(),
            x.flavor.clone().unwrap_or_default(),
            amount(&x.resource, x.nominal),
            amount(&x.resource, x.peak),
            pct(x.utilisation),
        ]);
    }
    t.render(out);
}

/// The workloads never admitted, the first few by name with why (and
/// how many serving objects were removed while they waited).
fn never_admitted(r: &Report, out: &mut String) {
    let withdrawn = r.totals.withdrawn;
    if withdrawn > 0 {
        let _ = writeln!(
            out,
            "\n{withdrawn} serving object{} removed by {} owner{} while {} waited (never admitted, not left waiting).",
            if withdrawn == 1 { " was" } else { "s were" },
            if withdrawn == 1 { "its" } else { "their" },
            if withdrawn == 1 { "" } else { "s" },
            if withdrawn == 1 { "it" } else { "they" },
        );
    }
    if r.pending_at_end.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} workload{} never admitted (the run ended with nothing left to free quota for them):",
        r.pending_at_end.len(),
        if r.pending_at_end.len() == 1 { " was" } else { "s were" }
    );
    for p in r.pending_at_end.iter().take(MAX_PENDING_LINES) {
        let _ = writeln!(
            out,
            "  {} ({}): {}",
            p.name,
            p.cluster_queue,
            p.reason.as_deref().unwrap_or("no explanation")
        );
    }
    if r.pending_at_end.len() > MAX_PENDING_LINES {
        let _ = writeln!(
            out,
            "  … and {} more (all are in --json)",
            r.pending_at_end.len() - MAX_PENDING_LINES
        );
    }
}

/// Never-admitted workloads listed by name in the table.
const MAX_PENDING_LINES: usize = 10;

/// An amount in a resource's units for people: bytes as Gi/Ti, the rest as numbers.
fn amount(resource: &str, units: f64) -> String {
    use sluice_api::quantity::{Format, format_for_resource};
    if format_for_resource(resource) == Format::BinarySi {
        let gi = units / (1u64 << 30) as f64;
        return if gi >= 1024.0 {
            format!("{}Ti", trim_num((gi / 1024.0 * 10.0).round() / 10.0))
        } else {
            format!("{}Gi", trim_num((gi * 10.0).round() / 10.0))
        };
    }
    trim_num(units)
}

fn trim_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
