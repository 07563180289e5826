//! `kubectl sluice top`: usage against quota per queue and flavor, with a
//! bar per row, like `kubectl top`.

use serde::Serialize;
use sluice_api::quantity::{parse_amount, to_milli};

use super::queues::QueueView;
use crate::quantity;
use crate::table::{Colour, Table, paint};

/// Width of the bar, in characters.
const BAR: usize = 20;

/// One (queue, flavor, resource) row, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    pub queue: String,
    pub flavor: String,
    pub resource: String,
    /// In milli-units.
    pub used_milli: i128,
    pub nominal_milli: i128,
    pub borrowed_milli: i128,
    /// Used ÷ nominal, percent (over 100 when borrowing); `None` for a
    /// nominal quota of 0.
    pub percent: Option<f64>,
    /// The queue's `Active` cell, as `kubectl sluice queues` shows it
    /// (`True`, `False (Reason)`, `-`): an inactive queue's numbers are
    /// not in effect.
    pub active: String,
}

/// A quantity of `resource` in milli-units (a GPU-equivalent to the
/// nearest thousandth).
fn milli(resource: &str, q: &str) -> i128 {
    parse_amount(resource, "quantity", q).map_or(0, |a| to_milli(resource, a))
}

/// Rows from the queues' views (ClusterQueues, or LocalQueues' summaries;
/// a ClusterQueue seen through several LocalQueues once).
pub fn usage(queues: &[QueueView]) -> Vec<UsageView> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for q in queues {
        if !seen.insert(q.cluster_queue.clone()) {
            continue;
        }
        for r in &q.resources {
            let (used, nominal) = (milli(&r.resource, &r.in_use), milli(&r.resource, &r.nominal));
            out.push(UsageView {
                queue: q.cluster_queue.clone(),
                flavor: r.flavor.clone(),
                resource: r.resource.clone(),
                used_milli: used,
                nominal_milli: nominal,
                borrowed_milli: r.borrowed.as_deref().map_or(0, |b| milli(&r.resource, b)),
                percent: (nominal > 0).then(|| used as f64 * 100.0 / nominal as f64),
                active: q.active_cell(),
            });
        }
    }
    out
}

/// `[████████░░░░]`: the used share of nominal (full past 100 %).
pub fn bar(percent: Option<f64>, colour: bool) -> String {
    let Some(p) = percent else {
        return format!("[{}]", " ".repeat(BAR));
    };
    let filled = ((p / 100.0) * BAR as f64).round().clamp(0.0, BAR as f64) as usize;
    let body = format!("{}{}", "█".repeat(filled), "░".repeat(BAR - filled));
    let c = if p > 100.0 {
        Colour::Red
    } else if p >= 90.0 {
        Colour::Yellow
    } else {
        Colour::Green
    };
    format!("[{}]", paint(&body, c, colour))
}

pub fn table(rows: &[UsageView], colour: bool) -> Table {
    let mut t = Table::new(vec![
        "CLUSTERQUEUE",
        "ACTIVE",
        "FLAVOR",
        "RESOURCE",
        "USAGE",
        "USED/NOMINAL",
        "%",
        "BORROWED",
    ]);
    let mut last = String::new();
    for r in rows {
        let first = r.queue != last;
        last = r.queue.clone();
        t.rows.push(vec![
            if first { r.queue.clone() } else { String::new() },
            if first { r.active.clone() } else { String::new() },
            r.flavor.clone(),
            r.resource.clone(),
            bar(r.percent, colour),
            format!(
                "{}/{}",
                quantity::display(&r.resource, r.used_milli),
                quantity::display(&r.resource, r.nominal_milli)
            ),
            r.percent.map_or_else(|| "-".into(), |p| format!("{p:.0}%")),
            quantity::display(&r.resource, r.borrowed_milli),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_with_the_share_of_nominal() {
        assert_eq!(bar(Some(0.0), false), format!("[{}]", "░".repeat(20)));
        assert_eq!(
            bar(Some(50.0), false),
            format!("[{}{}]", "█".repeat(10), "░".repeat(10))
        );
        assert_eq!(bar(Some(150.0), false), format!("[{}]", "█".repeat(20)));
        assert!(bar(Some(150.0), true).contains("\u{1b}[31m"), "borrowing is red");
        assert_eq!(bar(None, false), format!("[{}]", " ".repeat(20)));
    }
}
