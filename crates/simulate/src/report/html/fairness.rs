//! The HTML report's fair-sharing section: the terminal's tables (see
//! `report::fairness`; the queue table up to 40 queues) and the weighted
//! share over time of the first queues in a cohort.

use std::fmt::Write as _;

use super::charts::{BINS, StepChart};
use super::plot::{TimeUnit, bin_steps};
use super::{MAX_QUEUES, esc};
use crate::report::fairness::{FairnessReport, QUEUE_HEADER, TREE_HEADER, queue_row, tree_row};
use crate::report::table::MAX_QUEUE_ROWS;
use crate::sim::SimResult;
use crate::units::Millis;

pub(super) fn section(out: &mut String, f: &FairnessReport, r: &SimResult, unit: TimeUnit) {
    let _ = write!(
        out,
        r#"<h2>Fair sharing</h2><p class="lede">Fair sharing was {}. A queue's weighted share is what it borrows above its nominal quota, in thousandths of what its parent cohort can lend, divided by its weight (0 within nominal quota; ∞ for weight 0 while borrowing). Mean use and time share are of the tree's resource: the queue's mean quota in use (in the resource's units, e.g. GPUs), and its part of what the whole tree used. Jain's index is over mean use ÷ weight of the tree's queues that had work and a weight above 0 (the counted ones): 1 is an equal split, 1/n one queue taking everything. Contended: the time during which all those queues had work pending at once; use and Jain's index when contended are over that time only, and show how the tree was split while nobody's demand was met.</p>"#,
        if f.enabled { "on" } else { "off" }
    );
    table(out, &TREE_HEADER, f.trees.iter().map(|t| tree_row(t).to_vec()));
    // As in the terminal: hundreds of queues are for the JSON output.
    if f.cluster_queues.len() <= MAX_QUEUE_ROWS {
        let rows = f.cluster_queues.iter().map(|q| queue_row(q).to_vec());
        table(out, &QUEUE_HEADER, rows);
    }
    share_chart(out, r, unit);
}

fn table(out: &mut String, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    out.push_str(r#"<div class="tablewrap"><table><thead><tr>"#);
    for (k, h) in header.iter().enumerate() {
        let class = if k == 0 { r#" class="l""# } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for (k, cell) in row.iter().enumerate() {
            let class = if k == 0 { r#" class="l""# } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

/// Weighted share over time of the first queues in a cohort (∞ drawn at
/// the top of the chart).
fn share_chart(out: &mut String, r: &SimResult, unit: TimeUnit) {
    let Some(fair) = &r.fairness else { return };
    let chosen: Vec<usize> = (fair.queues.iter().enumerate())
        .filter_map(|(i, s)| s.as_ref().map(|_| i))
        .take(MAX_QUEUES)
        .collect();
    let finite_max = (chosen.iter())
        .flat_map(|&i| fair.queues[i].iter().flat_map(|s| s.samples.iter()))
        .map(|s| s.share)
        .filter(|&s| s != i64::MAX)
        .max()
        .unwrap_or(0);
    let top = (finite_max as f64).max(1.0);
    let end = r.end.max(1);
    let series: Vec<Vec<f64>> = (chosen.iter())
        .map(|&i| {
            let samples = fair.queues[i].iter().flat_map(|s| s.samples.iter());
            let pts: Vec<(Millis, f64)> = samples
                .map(|s| (s.at, if s.share == i64::MAX { top } else { s.share as f64 }))
                .collect();
            bin_steps(&pts, end, BINS)
        })
        .collect();
    let names: Vec<&str> = chosen.iter().map(|&i| r.queues[i].name.as_str()).collect();
    let chart = StepChart {
        aria: "weighted share over time",
        y_label: "weighted share",
        y_top: top,
        end,
        unit,
    };
    chart.write(out, &series, &names);
}
