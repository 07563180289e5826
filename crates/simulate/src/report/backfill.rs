//! Backfill's effect: when some ClusterQueue has `backfill: Reserve`, the
//! scenario also runs with no queue reserving ([`crate::sim::SimResult::without_backfill`]),
//! and this part sets the two side by side per workload class and for the
//! cluster: the longest and p95 wait, the largest and p95 slowdown,
//! GPU-hours lost to preemption, preemptions and GPU utilisation.

use std::fmt::Write as _;

use serde::Serialize;

use super::table::Table;
use super::{Group, Report};
use crate::sim::BackfillBaseline;
use crate::units::format_duration;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackfillReport {
    /// The ClusterQueues that reserve, in file order.
    pub reserving: Vec<String>,
    /// Per workload class, in the report's class order.
    pub classes: Vec<Compared>,
    /// The whole cluster.
    pub totals: Compared,
}

/// One class's (or the cluster's) figures with and without backfill.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Compared {
    pub name: String,
    pub with_backfill: Figures,
    pub without_backfill: Figures,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub max_wait_ms: i64,
    pub p95_wait_ms: i64,
    pub max_slowdown: f64,
    pub p95_slowdown: f64,
    pub gpu_hours_lost: f64,
    pub preemptions: u64,
    /// GPU quota in use ÷ nominal over the run (cluster only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_utilisation: Option<f64>,
}

impl Figures {
    fn of(g: &Group) -> Self {
        Figures {
            max_wait_ms: g.wait.max_ms,
            p95_wait_ms: g.wait.p95_ms,
            max_slowdown: g.slowdown.max,
            p95_slowdown: g.slowdown.p95,
            gpu_hours_lost: g.gpu_hours_lost,
            preemptions: g.preemptions,
            gpu_utilisation: (g.resources.iter())
                .find(|r| r.resource == "nvidia.com/gpu")
                .and_then(|r| r.utilisation),
        }
    }
}

/// The comparison of `with` (this run's report) and `without` (the report
/// of the run with no queue reserving, `baseline`'s).
pub fn build(baseline: &BackfillBaseline, with: &Report, without: &Report) -> BackfillReport {
    let compared = |a: &Group, b: Option<&Group>| Compared {
        name: a.name.clone(),
        with_backfill: Figures::of(a),
        without_backfill: b.map_or(Figures::of(a), Figures::of),
    };
    BackfillReport {
        reserving: baseline.reserving.clone(),
        classes: (with.classes.iter())
            .map(|c| compared(c, without.classes.iter().find(|d| d.name == c.name)))
            .collect(),
        totals: compared(&with.totals, Some(&without.totals)),
    }
}

/// The terminal table: each figure as "with (without)".
pub fn render_table(b: &BackfillReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nBackfill ({} reserve; each figure with backfill, then in brackets the same run with no queue reserving)",
        b.reserving.join(", ")
    );
    let mut t = Table::new(
        [
            "class",
            "max wait",
            "p95 wait",
            "max slowdown",
            "p95 slowdown",
            "GPU-h lost",
            "preempted",
        ]
        .map(String::from)
        .to_vec(),
    );
    for c in b.classes.iter().chain(std::iter::once(&b.totals)) {
        if std::ptr::eq(c, &b.totals) {
            t.rule();
        }
        t.rows.push(row(c));
    }
    t.render(out);
    if let (Some(a), Some(z)) = (
        b.totals.with_backfill.gpu_utilisation,
        b.totals.without_backfill.gpu_utilisation,
    ) {
        let _ = writeln!(out, "GPU utilisation: {:.1}% ({:.1}%)", a * 100.0, z * 100.0);
    }
}

fn row(c: &Compared) -> Vec<String> {
    let (a, z) = (&c.with_backfill, &c.without_backfill);
    let wait = |x: i64, y: i64| format!("{} ({})", format_duration(x), format_duration(y));
    vec![
        c.name.clone(),
        wait(a.max_wait_ms, z.max_wait_ms),
        wait(a.p95_wait_ms, z.p95_wait_ms),
        format!("{:.2} ({:.2})", a.max_slowdown, z.max_slowdown),
        format!("{:.2} ({:.2})", a.p95_slowdown, z.p95_slowdown),
        format!("{:.1} ({:.1})", a.gpu_hours_lost, z.gpu_hours_lost),
        format!("{} ({})", a.preemptions, z.preemptions),
    ]
}
