//! `kubectl sluice usage`: resource-hours per queue, flavor and resource
//! over a window (`--since`) and since accounting began, from the queues'
//! `status.usage`, with the budget of their ClusterQueue: spent, limit,
//! left, projection, the action reached. Admins (who may read
//! ClusterQueues) get a row per ClusterQueue, and per LocalQueue in scope;
//! namespaced users a row per LocalQueue, with the budget their
//! LocalQueue's status carries.

use serde::Serialize;
use sluice_api::quantity::to_milli;
use sluice_api::v1alpha1::{BudgetStatus, UsageStatus};
use sluice_convert::usage::record;
use sluice_scheduler::usage::hours;

use crate::snapshot::Snapshot;
use crate::table::Table;

/// One row, as `-o json` prints it. Hours are resource-hours (GPU-hours
/// for GPUs).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// `ClusterQueue` or `LocalQueue`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub cluster_queue: String,
    pub flavor: String,
    pub resource: String,
    /// Used within the window (`--since`).
    pub used_hours: f64,
    /// Used since accounting began.
    pub total_hours: f64,
    /// When the controller last wrote the figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// The ClusterQueue's budget, on the rows of the resource (and
    /// flavor) it counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetView>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub spent_hours: f64,
    pub limit_hours: f64,
    /// What is left of the limit (never below 0).
    pub left_hours: f64,
    pub percent: i64,
    pub projected_hours: f64,
    pub period_start: String,
    pub period_end: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A queue whose `status.usage` or budget could not be read: reported, its rows
/// left out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unreadable {
    pub queue: String,
    pub error: String,
}

/// The rows, and the queues whose usage could not be read.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    pub since_seconds: i64,
    pub rows: Vec<UsageRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<Unreadable>,
}

/// One queue as the view reads it.
struct Queue<'a> {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    cluster_queue: String,
    usage: Option<&'a UsageStatus>,
    budget: Option<&'a BudgetStatus>,
    /// Where the budget is in the object, for errors.
    budget_field: &'static str,
}

/// The usage of the queues in `s` within the last `since_seconds`.
pub fn usage(s: &Snapshot, since_seconds: i64) -> UsageView {
    let now = s.now.as_millisecond();
    let from = now - since_seconds.saturating_mul(1000);
    let mut view = UsageView {
        since_seconds,
        ..Default::default()
    };
    for q in queues(s) {
        let label = match &q.namespace {
            Some(ns) => format!("LocalQueue {ns}/{}", q.name),
            None => format!("ClusterQueue {}", q.name),
        };
        match rows_of(&q, from, now) {
            Ok(rows) => view.rows.extend(rows),
            Err(error) => view.unreadable.push(Unreadable { queue: label, error }),
        }
    }
    view
}

/// ClusterQueues (if readable), then LocalQueues, each in name order.
fn queues(s: &Snapshot) -> Vec<Queue<'_>> {
    let mut out = Vec::new();
    for cq in s.cluster_queues.iter().flatten() {
        let name = cq.metadata.name.clone().unwrap_or_default();
        let status = cq.status.as_ref();
        out.push(Queue {
            kind: "ClusterQueue",
            namespace: None,
            cluster_queue: name.clone(),
            name,
            usage: status.and_then(|s| s.usage.as_deref()),
            budget: status.and_then(|s| s.budget.as_deref()),
            budget_field: "status.budget",
        });
    }
    for lq in &s.local_queues {
        let status = lq.status.as_ref();
        out.push(Queue {
            kind: "LocalQueue",
            namespace: lq.metadata.namespace.clone(),
            name: lq.metadata.name.clone().unwrap_or_default(),
            cluster_queue: lq.spec.cluster_queue.clone(),
            usage: status.and_then(|s| s.usage.as_deref()),
            budget: (status.and_then(|s| s.cluster_queue.as_ref())).and_then(|c| c.budget.as_deref()),
            budget_field: "status.clusterQueue.budget",
        });
    }
    out.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    out
}

/// A queue's rows: one per flavor and resource it used, and one for its
/// budget's resource if it used none of it yet.
fn rows_of(q: &Queue<'_>, from: i64, now: i64) -> Result<Vec<UsageRow>, String> {
    let mut rows = Vec::new();
    if let Some(u) = q.usage {
        let rec = record(u).map_err(|e| e.to_string())?;
        for m in &rec.meters {
            rows.push(UsageRow {
                kind: q.kind,
                namespace: q.namespace.clone(),
                name: q.name.clone(),
                cluster_queue: q.cluster_queue.clone(),
                flavor: m.flavor.to_string(),
                resource: m.resource.to_string(),
                used_hours: round(hours(to_milli(&m.resource, m.buckets.within(from, now)))),
                total_hours: round(hours(to_milli(&m.resource, m.total))),
                as_of: Some(u.flushed_at.0.to_string()),
                budget: None,
            });
        }
    }
    let Some(b) = q.budget else { return Ok(rows) };
    let budget = budget_view(b, q.budget_field)?;
    let counted = |r: &UsageRow| r.resource == b.resource && b.flavor.as_ref().is_none_or(|f| *f == r.flavor);
    if !rows.iter().any(counted) {
        rows.push(UsageRow {
            kind: q.kind,
            namespace: q.namespace.clone(),
            name: q.name.clone(),
            cluster_queue: q.cluster_queue.clone(),
            flavor: b.flavor.clone().unwrap_or_else(|| "-".into()),
            resource: b.resource.clone(),
            used_hours: 0.0,
            total_hours: 0.0,
            as_of: q.usage.map(|u| u.flushed_at.0.to_string()),
            budget: None,
        });
    }
    for r in rows.iter_mut().filter(|r| counted(r)) {
        r.budget = Some(budget.clone());
    }
    Ok(rows)
}

/// `b`, found at `place` in its object (`status.budget`, or a
/// LocalQueue's `status.clusterQueue.budget`).
fn budget_view(b: &BudgetStatus, place: &str) -> Result<BudgetView, String> {
    let h = |field: &str, text: &str| -> Result<f64, String> {
        sluice_convert::usage::parse_hours(&b.resource, &format!("{place}.{field}"), text)
            .map(|v| round(hours(to_milli(&b.resource, v))))
            .map_err(|e| e.to_string())
    };
    let (spent, limit) = (h("spent", &b.spent)?, h("limit", &b.limit)?);
    Ok(BudgetView {
        spent_hours: spent,
        limit_hours: limit,
        left_hours: round((limit - spent).max(0.0)),
        percent: b.percent,
        projected_hours: h("projected", &b.projected)?,
        period_start: b.period_start.0.to_string(),
        period_end: b.period_end.0.to_string(),
        action: b.action.map(|a| format!("{a:?}")),
    })
}

/// Hours to a thousandth.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Hours as the table prints them: up to three decimals.
fn cell(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The table.
pub fn table(v: &UsageView) -> Table {
    let mut t = Table::new(vec![
        "QUEUE",
        "FLAVOR",
        "RESOURCE",
        "USED",
        "TOTAL",
        "BUDGET",
        "LEFT",
        "PROJECTED",
        "PERIOD END",
        "ACTION",
    ]);
    for r in &v.rows {
        let queue = match &r.namespace {
            Some(ns) => format!("{ns}/{}", r.name),
            None => format!("clusterqueue/{}", r.name),
        };
        let (budget, left, projected, end, action) = match &r.budget {
            Some(b) => (
                format!("{}/{} ({}%)", cell(b.spent_hours), cell(b.limit_hours), b.percent),
                cell(b.left_hours),
                cell(b.projected_hours),
                b.period_end.clone(),
                b.action.clone().unwrap_or_else(|| "-".into()),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        t.rows.push(vec![
            queue,
            r.flavor.clone(),
            r.resource.clone(),
            cell(r.used_hours),
            cell(r.total_hours),
            budget,
            left,
            projected,
            end,
            action,
        ]);
    }
    t
}

/// Notes under the table: the window, and queues whose usage or budget
/// could not be read (the error names the field).
pub fn notes(v: &UsageView) -> String {
    let mut out = format!(
        "USED: resource-hours (GPU-hours for GPUs) in the last {}; TOTAL: since accounting began; BUDGET: spent/limit this period.\n",
        super::short_duration(v.since_seconds)
    );
    for u in &v.unreadable {
        out.push_str(&format!("{}: left out: {}\n", u.queue, u.error));
    }
    out
}

/// `-o csv`: RFC 4180, a header naming units, plain numbers.
pub fn csv(v: &UsageView) -> String {
    let mut out = String::from(
        "kind,namespace,name,cluster_queue,flavor,resource,used_hours,total_hours,as_of,budget_spent_hours,budget_limit_hours,budget_left_hours,budget_percent,budget_projected_hours,period_start,period_end,action\r\n",
    );
    for r in &v.rows {
        let b = r.budget.as_ref();
        let num = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
        let fields = [
            r.kind.to_string(),
            r.namespace.clone().unwrap_or_default(),
            r.name.clone(),
            r.cluster_queue.clone(),
            r.flavor.clone(),
            r.resource.clone(),
            r.used_hours.to_string(),
            r.total_hours.to_string(),
            r.as_of.clone().unwrap_or_default(),
            num(b.map(|b| b.spent_hours)),
            num(b.map(|b| b.limit_hours)),
            num(b.map(|b| b.left_hours)),
            b.map(|b| b.percent.to_string()).unwrap_or_default(),
            num(b.map(|b| b.projected_hours)),
            b.map(|b| b.period_start.clone()).unwrap_or_default(),
            b.map(|b| b.period_end.clone()).unwrap_or_default(),
            b.and_then(|b| b.action.clone()).unwrap_or_default(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_fields_are_quoted_as_rfc_4180_says() {
        assert_eq!(csv_field("a100"), "a100");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(""), "");
    }
}
