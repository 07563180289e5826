//! The report's charts over time: quota in use per queue and flavor, queue
//! depth, and the time-to-admission distribution per class.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::plot::{Plot, TimeUnit, area_path, bin_steps, fmt_tick, legend, nice_ticks, step_path, time_unit};
use super::{MAX_QUEUES, PALETTE, esc};
use crate::report::{Group, Report, resource_order};
use crate::sim::{QueueSeries, SimResult};
use crate::units::{Millis, format_duration};

/// Time bins of a chart over the run.
pub(super) const BINS: usize = 480;

/// The resource a queue's charts show: GPUs if it has any quota of them.
fn primary_resource(q: &QueueSeries) -> Option<String> {
    let mut names: Vec<&str> = q.slots.iter().map(|s| s.resource.as_str()).collect();
    names.sort_by(|a, b| resource_order(a, b));
    names.first().map(|s| s.to_string())
}

/// Queues to chart: largest nominal quota of their primary resource first.
pub(super) fn chosen_queues(r: &SimResult) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..r.queues.len()).collect();
    let weight = |q: &QueueSeries| -> i64 {
        let p = primary_resource(q);
        q.slots
            .iter()
            .filter(|s| Some(&s.resource) == p.as_ref())
            .map(|s| s.nominal)
            .sum()
    };
    if idx.len() > MAX_QUEUES {
        idx.sort_by(|&a, &b| weight(&r.queues[b]).cmp(&weight(&r.queues[a])).then(a.cmp(&b)));
        idx.truncate(MAX_QUEUES);
        idx.sort_unstable();
    }
    idx
}

pub(super) fn unit_name(resource: &str) -> String {
    match resource {
        "nvidia.com/gpu" => "GPUs".into(),
        "cpu" => "CPU cores".into(),
        "memory" => "GiB".into(),
        other => other.to_string(),
    }
}

pub(super) fn short_label(resource: &str) -> &str {
    match resource {
        "nvidia.com/gpu" => "GPU",
        "cpu" => "CPU",
        other => other,
    }
}

pub(super) fn scale_for(resource: &str) -> f64 {
    if resource == "memory" {
        1000.0 * 1024.0 * 1024.0 * 1024.0
    } else {
        1000.0
    }
}

/// Small multiples: per queue and flavor, use of the queue's primary
/// resource (within nominal and borrowed) against that flavor's nominal
/// quota. Per flavor, because borrowing is: summed over flavors, work
/// borrowed on one flavor could be drawn below a nominal line that another,
/// idle flavor holds up.
pub(super) fn utilisation_charts(out: &mut String, r: &SimResult, unit: TimeUnit) {
    let chosen = chosen_queues(r);
    let end = r.end.max(1);
    out.push_str(r#"<div class="grid2">"#);
    let mut n = 0;
    for &qi in &chosen {
        let q = &r.queues[qi];
        let Some(res) = primary_resource(q) else { continue };
        for slot in (0..q.slots.len()).filter(|&s| q.slots[s].resource == res) {
            flavor_chart(out, q, slot, n, end, unit);
            n += 1;
        }
    }
    out.push_str("</div>");
    let _ = write!(
        out,
        r#"<p class="legend"><span class="sw" style="background:#2563eb;opacity:.55"></span>in use within nominal quota <span class="sw hatch"></span>borrowed from the cohort (above nominal) <span class="sw dash"></span>nominal quota{}</p>"#,
        if r.queues.len() > chosen.len() {
            format!(
                " · showing the {} queues with the most quota of {}",
                chosen.len(),
                r.queues.len()
            )
        } else {
            String::new()
        }
    );
}

/// One queue's use of one (flavor, resource) slot over time.
fn flavor_chart(out: &mut String, q: &QueueSeries, slot: usize, n: usize, end: Millis, unit: TimeUnit) {
    let res = &q.slots[slot].resource;
    let scale = scale_for(res);
    let nominal = q.slots[slot].nominal as f64 / scale;
    let (own, total) = slot_use(q, slot, end, scale);
    let peak = total.iter().cloned().fold(0.0, f64::max).max(nominal).max(1e-9);
    let y_ticks = nice_ticks(peak * 1.08, 4);
    let p = Plot {
        w: 640.0,
        h: 230.0,
        left: 54.0,
        right: 14.0,
        top: 14.0,
        bottom: 40.0,
        x_max: end as f64 / unit.ms,
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    let mean_util = if nominal > 0.0 {
        total.iter().sum::<f64>() / total.len() as f64 / nominal * 100.0
    } else {
        0.0
    };
    flavor_caption(out, q, slot, nominal, mean_util, &p);
    p.axes(
        out,
        &nice_ticks(p.x_max, 8),
        &y_ticks,
        &format!("time ({})", unit.label),
        &unit_name(res),
        &fmt_tick,
    );
    let color = PALETTE[n % PALETTE.len()];
    let zero = vec![0.0; own.len()];
    let _ = write!(
        out,
        r#"<path d="{}" fill="{color}" fill-opacity="0.55" stroke="none"/>"#,
        area_path(&p, &zero, &own, end, unit)
    );
    let _ = write!(
        out,
        r#"<path d="{}" fill="url(#hatch)" stroke="none"/>"#,
        area_path(&p, &own, &total, end, unit)
    );
    let _ = write!(
        out,
        r#"<path d="{}" fill="none" stroke="{color}" stroke-width="1.4"/>"#,
        step_path(&p, &total, end, unit)
    );
    nominal_line(out, &p, nominal);
    out.push_str("</svg></figure>");
}

/// A slot's use over time in [`BINS`] bins, in the resource's units
/// (`scale`): within nominal quota, and in all (with what is borrowed).
fn slot_use(q: &QueueSeries, slot: usize, end: Millis, scale: f64) -> (Vec<f64>, Vec<f64>) {
    let nominal = q.slots[slot].nominal;
    let (own_pts, borrowed_pts): (Vec<_>, Vec<_>) = (q.samples.iter())
        .map(|s| {
            let used = s.used[slot];
            let own = used.min(nominal);
            let borrowed = (used - nominal).max(0);
            ((s.at, own as f64 / scale), (s.at, borrowed as f64 / scale))
        })
        .unzip();
    let own = bin_steps(&own_pts, end, BINS);
    let borrowed = bin_steps(&borrowed_pts, end, BINS);
    let total: Vec<f64> = own.iter().zip(&borrowed).map(|(a, b)| a + b).collect();
    (own, total)
}

/// The card's caption (queue, cohort, resource on flavor, nominal, mean
/// use) and the chart's opening.
fn flavor_caption(out: &mut String, q: &QueueSeries, slot: usize, nominal: f64, mean_util: f64, p: &Plot) {
    let (res, flavor) = (&q.slots[slot].resource, &q.slots[slot].flavor);
    let _ = write!(
        out,
        r#"<figure class="card"><figcaption><b>{}</b>{} <span class="muted">· {} on {} · nominal {} · mean {:.0}% of nominal</span></figcaption><svg viewBox="0 0 {} {}" role="img" aria-label="{} use of {} over time">"#,
        esc(&q.name),
        q.cohort
            .as_ref()
            .map(|c| format!(r#" <span class="pill">cohort {}</span>"#, esc(c)))
            .unwrap_or_default(),
        esc(res),
        esc(flavor),
        fmt_tick((nominal * 100.0).round() / 100.0),
        mean_util,
        p.w,
        p.h,
        esc(&q.name),
        esc(res)
    );
}

/// The dashed nominal-quota line, labelled.
fn nominal_line(out: &mut String, p: &Plot, nominal: f64) {
    let y = p.y(nominal);
    let _ = write!(
        out,
        r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" class="nominal"/><text x="{:.1}" y="{:.1}" class="note" text-anchor="end">nominal {}</text>"#,
        p.left,
        p.w - p.right,
        p.w - p.right - 2.0,
        y - 4.0,
        fmt_tick((nominal * 100.0).round() / 100.0)
    );
}

/// One line per queue: workloads waiting (pending) over time.
pub(super) fn depth_chart(out: &mut String, r: &SimResult, unit: TimeUnit) {
    let chosen = chosen_queues(r);
    let end = r.end.max(1);
    let series: Vec<Vec<f64>> = chosen
        .iter()
        .map(|&qi| {
            let pts: Vec<(Millis, f64)> = r.queues[qi]
                .samples
                .iter()
                .map(|s| (s.at, f64::from(s.pending)))
                .collect();
            bin_steps(&pts, end, BINS)
        })
        .collect();
    let peak = series.iter().flatten().cloned().fold(0.0, f64::max).max(1.0);
    let names: Vec<&str> = chosen.iter().map(|&qi| r.queues[qi].name.as_str()).collect();
    let chart = StepChart {
        aria: "queue depth over time",
        y_label: "workloads pending",
        y_top: peak,
        end,
        unit,
    };
    chart.write(out, &series, &names);
}

/// A wide chart of one step line per queue over the run.
pub(super) struct StepChart<'a> {
    pub(super) aria: &'a str,
    pub(super) y_label: &'a str,
    /// The largest value (the axis goes a little above it).
    pub(super) y_top: f64,
    pub(super) end: Millis,
    pub(super) unit: TimeUnit,
}

impl StepChart<'_> {
    pub(super) fn write(&self, out: &mut String, series: &[Vec<f64>], names: &[&str]) {
        let y_ticks = nice_ticks(self.y_top * 1.05, 5);
        let p = Plot::wide(self.end as f64 / self.unit.ms, *y_ticks.last().unwrap_or(&1.0));
        let _ = write!(
            out,
            r#"<figure class="card wide"><svg viewBox="0 0 {} {}" role="img" aria-label="{}">"#,
            p.w, p.h, self.aria
        );
        p.axes(
            out,
            &nice_ticks(p.x_max, 12),
            &y_ticks,
            &format!("time ({})", self.unit.label),
            self.y_label,
            &fmt_tick,
        );
        for (n, values) in series.iter().enumerate() {
            let _ = write!(
                out,
                r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.6" stroke-linejoin="round"/>"#,
                step_path(&p, values, self.end, self.unit),
                PALETTE[n % PALETTE.len()]
            );
        }
        out.push_str("</svg>");
        legend(out, names.iter().copied());
        out.push_str("</figure>");
    }
}

/// Per class, the share of workloads admitted within a given wait (ECDF).
pub(super) fn wait_chart(out: &mut String, r: &SimResult, report: &Report) {
    let mut by_class: BTreeMap<&str, Vec<Millis>> = BTreeMap::new();
    for (w, rec) in r.workloads.iter().zip(&r.records) {
        // Time to the latest admission, as the tables count it.
        if let Some(s) = rec.runs.iter().rev().find_map(|run| run.started_at) {
            by_class.entry(w.class.as_str()).or_default().push(s - w.arrival);
        }
    }
    // Classes in the report's order; at most MAX_QUEUES lines, biggest first.
    let mut classes: Vec<&Group> = report.classes.iter().filter(|g| g.wait.count > 0).collect();
    classes.sort_by(|a, b| b.workloads.cmp(&a.workloads).then(a.name.cmp(&b.name)));
    classes.truncate(MAX_QUEUES);
    classes.sort_by(|a, b| a.name.cmp(&b.name));
    let max_wait = classes.iter().map(|g| g.wait.max_ms).max().unwrap_or(0).max(1);
    let unit = time_unit(max_wait);
    let x_ticks = nice_ticks(max_wait as f64 / unit.ms, 10);
    let p = Plot::wide(*x_ticks.last().unwrap_or(&1.0), 1.0);
    let _ = write!(
        out,
        r#"<figure class="card wide"><svg viewBox="0 0 {} {}" role="img" aria-label="time to admission distribution per class">"#,
        p.w, p.h
    );
    p.axes(
        out,
        &x_ticks,
        &[0.0, 0.25, 0.5, 0.75, 1.0],
        &format!("time to admission ({})", unit.label),
        "share admitted",
        &|v| format!("{:.0}%", v * 100.0),
    );
    for (n, g) in classes.iter().enumerate() {
        let mut waits = by_class.remove(g.name.as_str()).unwrap_or_default();
        waits.sort_unstable();
        let total = waits.len() as f64;
        let mut d = format!("M{:.1},{:.1}", p.x(0.0), p.y(0.0));
        let mut k = 0;
        while k < waits.len() {
            let v = waits[k];
            let before = k;
            while k < waits.len() && waits[k] == v {
                k += 1;
            }
            let x = p.x(v as f64 / unit.ms);
            let _ = write!(
                d,
                "L{x:.1},{:.1}L{x:.1},{:.1}",
                p.y(before as f64 / total),
                p.y(k as f64 / total)
            );
        }
        let _ = write!(d, "L{:.1},{:.1}", p.x(p.x_max), p.y(1.0));
        let color = PALETTE[n % PALETTE.len()];
        let _ = write!(
            out,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"/>"#
        );
        // Mark p95.
        let x = p.x(g.wait.p95_ms as f64 / unit.ms);
        let _ = write!(
            out,
            r#"<circle cx="{x:.1}" cy="{:.1}" r="3.5" fill="white" stroke="{color}" stroke-width="2"/>"#,
            p.y(0.95)
        );
    }
    out.push_str("</svg>");
    out.push_str(r#"<p class="legend">"#);
    for (n, g) in classes.iter().enumerate() {
        let _ = write!(
            out,
            r#"<span class="sw" style="background:{}"></span>{} <span class="muted">(p50 {}, p95 {})</span> "#,
            PALETTE[n % PALETTE.len()],
            esc(&g.name),
            format_duration(g.wait.p50_ms),
            format_duration(g.wait.p95_ms)
        );
    }
    out.push_str(r#"<span class="muted">· circles mark p95</span></p></figure>"#);
}
