//! GPU-hours by queue: what each ClusterQueue used over the run against
//! its budget, when each budget action fired, and with a usage half-life,
//! that fair sharing weighed usage over time. Only when the run accounts
//! usage ([`crate::sim::SimResult::usage`]).

use std::fmt::Write as _;

use serde::Serialize;
use sluice_api::quantity::to_milli;
use sluice_scheduler::usage;

use super::table::Table;
use crate::sim::UsageOutcome;
use crate::units::{Millis, format_duration};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// Fair sharing over time with this half-life (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_life_ms: Option<Millis>,
    pub cluster_queues: Vec<QueueOut>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOut {
    pub name: String,
    /// GPU-hours over the whole run.
    pub gpu_hours: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetOut>,
    /// When the budget's action changed; `action` absent: within again.
    pub actions: Vec<ActionOut>,
    /// GPU-hours used so far, every virtual hour and at the end.
    pub series: Vec<PointOut>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetOut {
    pub resource: String,
    /// `7d calendar`, `30d rolling`.
    pub period: String,
    pub limit_hours: f64,
    /// Spent in the period the run ends in.
    pub spent_hours: f64,
    pub percent: i64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionOut {
    pub at_ms: Millis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PointOut {
    pub at_ms: Millis,
    pub gpu_hours: f64,
}

pub fn build(u: &UsageOutcome) -> UsageReport {
    let cluster_queues = (u.queues.iter())
        .map(|q| QueueOut {
            name: q.name.clone(),
            gpu_hours: round3(q.gpu_hours),
            budget: q.budget.as_ref().map(|(b, s)| BudgetOut {
                resource: b.resource.to_string(),
                period: format!("{} {}", b.period, b.window),
                limit_hours: round3(usage::hours(to_milli(&b.resource, s.limit))),
                spent_hours: round3(usage::hours(to_milli(&b.resource, s.spent))),
                percent: i64::try_from(s.percent()).unwrap_or(i64::MAX),
            }),
            actions: (q.actions.iter())
                .map(|e| ActionOut {
                    at_ms: e.at_ms,
                    action: e.action.map(|a| format!("{a:?}")),
                })
                .collect(),
            series: (q.series.iter())
                .map(|&(at_ms, h)| PointOut {
                    at_ms,
                    gpu_hours: round3(h),
                })
                .collect(),
        })
        .collect();
    UsageReport {
        half_life_ms: u.half_life,
        cluster_queues,
    }
}

/// Budget actions a queue's row lists.
const SHOWN_ACTIONS: usize = 4;

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The terminal table: per queue its GPU-hours, its budget and actions,
/// and its usage at eight points of the run.
pub fn render_table(u: &UsageReport, out: &mut String) {
    let title = match u.half_life_ms {
        Some(h) => format!(
            "\nGPU-hours by queue (fair sharing over time: usage half-life {})",
            format_duration(h)
        ),
        None => "\nGPU-hours by queue".to_string(),
    };
    let _ = writeln!(out, "{title}");
    let mut t = Table::new(
        ["queue", "GPU-h", "budget", "spent at end", "actions"]
            .map(String::from)
            .to_vec(),
    );
    for q in &u.cluster_queues {
        let (budget, spent) = match &q.budget {
            Some(b) => (budget_text(b), format!("{} ({}%)", b.spent_hours, b.percent)),
            None => ("-".into(), "-".into()),
        };
        let mut actions: Vec<String> = q.actions.iter().take(SHOWN_ACTIONS).map(action_text).collect();
        if q.actions.len() > SHOWN_ACTIONS {
            actions.push(format!("… {} more (in --json)", q.actions.len() - SHOWN_ACTIONS));
        }
        t.rows.push(vec![
            q.name.clone(),
            format!("{:.1}", q.gpu_hours),
            budget,
            spent,
            if actions.is_empty() {
                "-".into()
            } else {
                actions.join(", ")
            },
        ]);
    }
    t.render(out);
    series_table(u, out);
}

/// GPU-hours used so far by each queue at eight evenly spaced points.
fn series_table(u: &UsageReport, out: &mut String) {
    let points = sample_points(u);
    if points.is_empty() {
        return;
    }
    let mut header = vec!["GPU-h used by".to_string()];
    header.extend(points.iter().map(|&p| format_duration(p)));
    let mut t = Table::new(header);
    for q in &u.cluster_queues {
        let mut row = vec![q.name.clone()];
        row.extend(points.iter().map(|&p| format!("{:.1}", used_by(q, p))));
        t.rows.push(row);
    }
    t.render(out);
}

/// Eight evenly spaced points of the run, its end the last; none when
/// nothing was sampled.
pub(crate) fn sample_points(u: &UsageReport) -> Vec<Millis> {
    let end = (u.cluster_queues.iter())
        .filter_map(|q| q.series.last())
        .map(|p| p.at_ms)
        .max();
    end.map_or_else(Vec::new, |end| (1..=8).map(|k| end * k / 8).collect())
}

/// GPU-hours a queue had used by `t`.
pub(crate) fn used_by(q: &QueueOut, t: Millis) -> f64 {
    (q.series.iter())
        .take_while(|s| s.at_ms <= t)
        .last()
        .map_or(0.0, |s| s.gpu_hours)
}

/// `Warn at 9h10m`; `WithinBudget at 1d00h` when the action was lifted.
pub fn action_text(a: &ActionOut) -> String {
    format!(
        "{} at {}",
        a.action.as_deref().unwrap_or("WithinBudget"),
        format_duration(a.at_ms)
    )
}

/// `150 GPU-h / 1d calendar`.
pub(crate) fn budget_text(b: &BudgetOut) -> String {
    format!("{} {}-h / {}", b.limit_hours, short(&b.resource), b.period)
}

fn short(resource: &str) -> &str {
    match resource {
        "nvidia.com/gpu" => "GPU",
        r => r,
    }
}
