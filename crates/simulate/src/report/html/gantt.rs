//! The largest gangs as lanes over time: waiting, running, preempted.

use std::fmt::Write as _;

use super::plot::{Plot, TimeUnit, bar, fmt_tick, nice_ticks};
use super::{PALETTE, esc};
use crate::report::resource_order;
use crate::sim::{RunEnd, SimResult, WorkloadRecord};
use crate::trace::TraceWorkload;
use crate::units::Millis;
use std::collections::BTreeMap;

use super::charts::{chosen_queues, scale_for, unit_name};

/// At most this many gangs get a lane.
const MAX_GANTT: usize = 16;

/// The largest gangs: waiting, running, preempted, per workload.
pub(super) fn gantt(out: &mut String, r: &SimResult, unit: TimeUnit) {
    let primary = primary_resource(r);
    let lanes = largest(r, &primary);
    let queue_color: BTreeMap<&str, &str> = chosen_queues(r)
        .iter()
        .enumerate()
        .map(|(n, &qi)| (r.queues[qi].name.as_str(), PALETTE[n % PALETTE.len()]))
        .collect();
    let end = r.end.max(1);
    let row_h = 26.0;
    let label_w = 430.0;
    let h = 40.0 + row_h * lanes.len() as f64 + 20.0;
    let p = Plot {
        w: 1300.0,
        h,
        left: label_w,
        right: 16.0,
        top: 10.0,
        bottom: 40.0,
        x_max: end as f64 / unit.ms,
        y_max: 1.0,
    };
    let _ = write!(
        out,
        r#"<figure class="card wide"><svg viewBox="0 0 {} {h}" role="img" aria-label="largest gangs over time">"#,
        p.w
    );
    p.axes(
        out,
        &nice_ticks(p.x_max, 12),
        &[],
        &format!("time ({})", unit.label),
        "",
        &fmt_tick,
    );
    for (row, &i) in lanes.iter().enumerate() {
        let y = p.top + row as f64 * row_h + 4.0;
        lane_label(out, &p, y, &r.workloads[i], &primary);
        let rec = &r.records[i];
        let color = queue_color.get(&*rec.cluster_queue).copied().unwrap_or("#4b5563");
        lane_bars(out, &p, unit, y, r.workloads[i].arrival, rec, color, end);
    }
    out.push_str("</svg>");
    out.push_str(r#"<p class="legend"><span class="sw wait"></span>waiting <span class="sw" style="background:#2563eb"></span>running (colour = cluster queue) <span class="sw lost"></span>run lost to preemption <b class="xmark">✕</b> preempted</p>"#);
    out.push_str("</figure>");
}

/// The first resource of any queue in report order (GPUs first); empty
/// when there is none.
fn primary_resource(r: &SimResult) -> String {
    let mut all: Vec<&str> = r
        .queues
        .iter()
        .flat_map(|q| q.slots.iter().map(|s| s.resource.as_str()))
        .collect();
    all.sort_by(|a, b| resource_order(a, b));
    all.first().map(|s| s.to_string()).unwrap_or_default()
}

/// The workloads (not rejected) asking the most of `primary`, then with
/// the most pods, at most [`MAX_GANTT`], in arrival order.
fn largest(r: &SimResult, primary: &str) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..r.workloads.len())
        .filter(|&i| r.records[i].rejected.is_none())
        .collect();
    idx.sort_by(|&a, &b| {
        let (wa, wb) = (&r.workloads[a], &r.workloads[b]);
        wb.total(primary)
            .cmp(&wa.total(primary))
            .then(wb.pods().cmp(&wa.pods()))
            .then(wa.arrival.cmp(&wb.arrival))
            .then(a.cmp(&b))
    });
    idx.truncate(MAX_GANTT);
    idx.sort_by_key(|&i| (r.workloads[i].arrival, i));
    idx
}

/// A lane's name, its size in `primary` and its pods.
fn lane_label(out: &mut String, p: &Plot, y: f64, w: &TraceWorkload, primary: &str) {
    let size = if primary.is_empty() {
        String::new()
    } else {
        let total = w.total(primary) as f64 / scale_for(primary);
        format!(" · {} {}", fmt_tick(total), unit_name(primary))
    };
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" class="lane" text-anchor="end">{}<tspan class="muted">{} · {}</tspan></text>"#,
        p.left - 8.0,
        y + 13.0,
        esc(&w.name),
        esc(&size),
        if w.pods() == 1 {
            "1 pod".to_string()
        } else {
            format!("{} pods", w.pods())
        }
    );
}

/// A lane's bars: waiting from arrival (or the previous eviction) to
/// each start, each run (crossed out where it was lost), and the wait
/// left at the end.
#[allow(clippy::too_many_arguments)]
fn lane_bars(
    out: &mut String,
    p: &Plot,
    unit: TimeUnit,
    y: f64,
    arrival: Millis,
    rec: &WorkloadRecord,
    color: &str,
    end: Millis,
) {
    let mut wait_from = arrival;
    for run in &rec.runs {
        let start = run.started_at.unwrap_or(run.admitted_at);
        bar(out, p, unit, wait_from, start, y, "wait", None);
        let stop = run.ended_at.unwrap_or(end);
        let cls = match run.end {
            RunEnd::Finished | RunEnd::Running => "run",
            RunEnd::Preempted | RunEnd::Evicted | RunEnd::IdleReclaimed => "run lost",
        };
        bar(out, p, unit, start, stop, y, cls, Some(color));
        if matches!(run.end, RunEnd::Preempted | RunEnd::Evicted | RunEnd::IdleReclaimed) {
            let x = p.x(stop as f64 / unit.ms);
            let _ = write!(
                out,
                r#"<path d="M{:.1},{:.1}l8,8m0,-8l-8,8" class="x"/>"#,
                x - 4.0,
                y + 5.0
            );
        }
        wait_from = stop;
    }
    if rec.finished_at().is_none() && !rec.deactivated && rec.runs.last().is_none_or(|x| x.end != RunEnd::Running) {
        bar(out, p, unit, wait_from, end, y, "wait", None);
    }
}
