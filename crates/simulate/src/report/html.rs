//! The HTML report: one self-contained file, inline SVG drawn by hand, no
//! scripts, no network.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Column, Group, Report, resource_order};
use crate::sim::{QueueSeries, RunEnd, SimResult};
use crate::units::{Millis, format_duration};

const PALETTE: [&str; 10] = [
    "#2563eb", "#e8590c", "#0f9d58", "#9333ea", "#d6336c", "#0891b2", "#ca8a04", "#4b5563", "#65a30d", "#7c3aed",
];
/// At most this many queues get their own chart or line; the rest are named.
const MAX_QUEUES: usize = 8;
const MAX_GANTT: usize = 16;
const BINS: usize = 480;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Time axis unit chosen from the run's length.
#[derive(Clone, Copy)]
struct TimeUnit {
    ms: f64,
    label: &'static str,
}

fn time_unit(span: Millis) -> TimeUnit {
    if span <= 3 * 60_000 {
        TimeUnit {
            ms: 1_000.0,
            label: "s",
        }
    } else if span <= 5 * 3_600_000 {
        TimeUnit {
            ms: 60_000.0,
            label: "min",
        }
    } else {
        TimeUnit {
            ms: 3_600_000.0,
            label: "h",
        }
    }
}

/// About `target` round tick values covering [0, max].
fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut ticks = Vec::new();
    let mut v = 0.0;
    while v <= max + step * 1e-9 {
        ticks.push(v);
        v += step;
    }
    if *ticks.last().unwrap_or(&0.0) < max {
        ticks.push(v);
    }
    ticks
}

fn fmt_tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else if (v * 10.0 - (v * 10.0).round()).abs() < 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A plot area inside an SVG with linear scales.
struct Plot {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x_max: f64,
    y_max: f64,
}

impl Plot {
    fn x(&self, v: f64) -> f64 {
        self.left + (v / self.x_max).clamp(0.0, 1.0) * (self.w - self.left - self.right)
    }
    fn y(&self, v: f64) -> f64 {
        self.h - self.bottom - (v / self.y_max).clamp(0.0, 1.05) * (self.h - self.top - self.bottom)
    }

    /// Grid, axes, tick labels and axis titles.
    fn axes(
        &self,
        out: &mut String,
        x_ticks: &[f64],
        y_ticks: &[f64],
        x_title: &str,
        y_title: &str,
        y_fmt: &dyn Fn(f64) -> String,
    ) {
        // Never label past the end of the data.
        let x_ticks: Vec<f64> = x_ticks.iter().copied().filter(|t| *t <= self.x_max * 1.0001).collect();
        let (x0, x1) = (self.left, self.w - self.right);
        let (y0, y1) = (self.h - self.bottom, self.top);
        for &t in y_ticks {
            let y = self.y(t);
            let _ = write!(
                out,
                r#"<line x1="{x0:.1}" y1="{y:.1}" x2="{x1:.1}" y2="{y:.1}" class="grid"/>"#
            );
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
                x0 - 6.0,
                y + 4.0,
                esc(&y_fmt(t))
            );
        }
        for &t in &x_ticks {
            let x = self.x(t);
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{:.1}" class="axis"/>"#,
                y0 + 4.0
            );
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
                y0 + 17.0,
                fmt_tick(t)
            );
        }
        let _ = write!(
            out,
            r#"<line x1="{x0:.1}" y1="{y0:.1}" x2="{x1:.1}" y2="{y0:.1}" class="axis"/>"#
        );
        let _ = write!(
            out,
            r#"<line x1="{x0:.1}" y1="{y0:.1}" x2="{x0:.1}" y2="{y1:.1}" class="axis"/>"#
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="axis-title" text-anchor="middle">{}</text>"#,
            (x0 + x1) / 2.0,
            self.h - 4.0,
            esc(x_title)
        );
        let _ = write!(
            out,
            r#"<text transform="translate(13 {:.1}) rotate(-90)" class="axis-title" text-anchor="middle">{}</text>"#,
            (y0 + y1) / 2.0,
            esc(y_title)
        );
    }
}

/// Time-weighted mean of a step function over `bins` equal bins of [0, end].
fn bin_steps(points: &[(Millis, f64)], end: Millis, bins: usize) -> Vec<f64> {
    let end = end.max(1) as f64;
    let width = end / bins as f64;
    let mut acc = vec![0.0; bins];
    for (k, &(t, v)) in points.iter().enumerate() {
        let t0 = t as f64;
        let t1 = points.get(k + 1).map_or(end, |p| p.0 as f64).min(end);
        if t1 <= t0 || v == 0.0 {
            continue;
        }
        let mut b = ((t0 / width) as usize).min(bins - 1);
        let mut cur = t0;
        while cur < t1 && b < bins {
            let bin_end = ((b + 1) as f64 * width).min(t1);
            acc[b] += v * (bin_end - cur);
            cur = bin_end;
            b += 1;
        }
    }
    acc.iter().map(|a| a / width).collect()
}

fn step_path(p: &Plot, values: &[f64], end: Millis, unit: TimeUnit) -> String {
    let n = values.len();
    let mut d = String::new();
    for (b, v) in values.iter().enumerate() {
        let x0 = p.x(b as f64 * end as f64 / n as f64 / unit.ms);
        let x1 = p.x((b + 1) as f64 * end as f64 / n as f64 / unit.ms);
        let y = p.y(*v);
        if b == 0 {
            let _ = write!(d, "M{x0:.1},{y:.1}");
        } else {
            let _ = write!(d, "L{x0:.1},{y:.1}");
        }
        let _ = write!(d, "L{x1:.1},{y:.1}");
    }
    d
}

fn area_path(p: &Plot, lower: &[f64], upper: &[f64], end: Millis, unit: TimeUnit) -> String {
    let top = step_path(p, upper, end, unit);
    let n = lower.len();
    let mut d = top;
    for b in (0..n).rev() {
        let x1 = p.x((b + 1) as f64 * end as f64 / n as f64 / unit.ms);
        let x0 = p.x(b as f64 * end as f64 / n as f64 / unit.ms);
        let y = p.y(lower[b]);
        let _ = write!(d, "L{x1:.1},{y:.1}L{x0:.1},{y:.1}");
    }
    d.push('Z');
    d
}

/// The resource a queue's charts show: GPUs if it has any quota of them.
fn primary_resource(q: &QueueSeries) -> Option<String> {
    let mut names: Vec<&str> = q.slots.iter().map(|s| s.resource.as_str()).collect();
    names.sort_by(|a, b| resource_order(a, b));
    names.first().map(|s| s.to_string())
}

/// Queues to chart: largest nominal quota of their primary resource first.
fn chosen_queues(r: &SimResult) -> Vec<usize> {
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

fn unit_name(resource: &str) -> String {
    match resource {
        "nvidia.com/gpu" => "GPUs".into(),
        "cpu" => "CPU cores".into(),
        "memory" => "GiB".into(),
        other => other.to_string(),
    }
}

fn short_label(resource: &str) -> &str {
    match resource {
        "nvidia.com/gpu" => "GPU",
        "cpu" => "CPU",
        other => other,
    }
}

fn scale_for(resource: &str) -> f64 {
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
fn utilisation_charts(out: &mut String, r: &SimResult, unit: TimeUnit) {
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
    {
        let res = q.slots[slot].resource.clone();
        let flavor = q.slots[slot].flavor.clone();
        let scale = scale_for(&res);
        let slots = [slot];
        let nominal: f64 = slots.iter().map(|&s| q.slots[s].nominal as f64).sum::<f64>() / scale;
        let mut own_pts = Vec::new();
        let mut borrowed_pts = Vec::new();
        for s in &q.samples {
            let mut own = 0i64;
            let mut borrowed = 0i64;
            for &slot in &slots {
                let used = s.used[slot];
                let nom = q.slots[slot].nominal;
                own += used.min(nom);
                borrowed += (used - nom).max(0);
            }
            own_pts.push((s.at, own as f64 / scale));
            borrowed_pts.push((s.at, borrowed as f64 / scale));
        }
        let own = bin_steps(&own_pts, end, BINS);
        let borrowed = bin_steps(&borrowed_pts, end, BINS);
        let total: Vec<f64> = own.iter().zip(&borrowed).map(|(a, b)| a + b).collect();
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
        let color = PALETTE[n % PALETTE.len()];
        let mean_util = if nominal > 0.0 {
            total.iter().sum::<f64>() / total.len() as f64 / nominal * 100.0
        } else {
            0.0
        };
        let _ = write!(
            out,
            r#"<figure class="card"><figcaption><b>{}</b>{} <span class="muted">· {} on {} · nominal {} · mean {:.0}% of nominal</span></figcaption><svg viewBox="0 0 {} {}" role="img" aria-label="{} use of {} over time">"#,
            esc(&q.name),
            q.cohort
                .as_ref()
                .map(|c| format!(r#" <span class="pill">cohort {}</span>"#, esc(c)))
                .unwrap_or_default(),
            esc(&res),
            esc(&flavor),
            fmt_tick((nominal * 100.0).round() / 100.0),
            mean_util,
            p.w,
            p.h,
            esc(&q.name),
            esc(&res)
        );
        p.axes(
            out,
            &nice_ticks(p.x_max, 8),
            &y_ticks,
            &format!("time ({})", unit.label),
            &unit_name(&res),
            &fmt_tick,
        );
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
        out.push_str("</svg></figure>");
    }
}

/// One line per queue: workloads waiting (pending) over time.
fn depth_chart(out: &mut String, r: &SimResult, unit: TimeUnit) {
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
    let y_ticks = nice_ticks(peak * 1.05, 5);
    let p = Plot {
        w: 1300.0,
        h: 300.0,
        left: 58.0,
        right: 16.0,
        top: 14.0,
        bottom: 40.0,
        x_max: end as f64 / unit.ms,
        y_max: *y_ticks.last().unwrap_or(&1.0),
    };
    let _ = write!(
        out,
        r#"<figure class="card wide"><svg viewBox="0 0 {} {}" role="img" aria-label="queue depth over time">"#,
        p.w, p.h
    );
    p.axes(
        out,
        &nice_ticks(p.x_max, 12),
        &y_ticks,
        &format!("time ({})", unit.label),
        "workloads pending",
        &fmt_tick,
    );
    for (n, values) in series.iter().enumerate() {
        let _ = write!(
            out,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.6" stroke-linejoin="round"/>"#,
            step_path(&p, values, end, unit),
            PALETTE[n % PALETTE.len()]
        );
    }
    out.push_str("</svg>");
    legend(out, chosen.iter().map(|&qi| r.queues[qi].name.as_str()));
    out.push_str("</figure>");
}

fn legend<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    out.push_str(r#"<p class="legend">"#);
    for (n, name) in names.enumerate() {
        let _ = write!(
            out,
            r#"<span class="sw" style="background:{}"></span>{} "#,
            PALETTE[n % PALETTE.len()],
            esc(name)
        );
    }
    out.push_str("</p>");
}

/// Per class, the share of workloads admitted within a given wait (ECDF).
fn wait_chart(out: &mut String, r: &SimResult, report: &Report) {
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
    let p = Plot {
        w: 1300.0,
        h: 300.0,
        left: 58.0,
        right: 16.0,
        top: 14.0,
        bottom: 40.0,
        x_max: *x_ticks.last().unwrap_or(&1.0),
        y_max: 1.0,
    };
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

/// The largest gangs: waiting, running, preempted, per workload.
fn gantt(out: &mut String, r: &SimResult, unit: TimeUnit) {
    let primary = {
        let mut all: Vec<&str> = r
            .queues
            .iter()
            .flat_map(|q| q.slots.iter().map(|s| s.resource.as_str()))
            .collect();
        all.sort_by(|a, b| resource_order(a, b));
        all.first().map(|s| s.to_string()).unwrap_or_default()
    };
    let mut idx: Vec<usize> = (0..r.workloads.len())
        .filter(|&i| r.records[i].rejected.is_none())
        .collect();
    idx.sort_by(|&a, &b| {
        let (wa, wb) = (&r.workloads[a], &r.workloads[b]);
        wb.total(&primary)
            .cmp(&wa.total(&primary))
            .then(wb.pods().cmp(&wa.pods()))
            .then(wa.arrival.cmp(&wb.arrival))
            .then(a.cmp(&b))
    });
    idx.truncate(MAX_GANTT);
    idx.sort_by_key(|&i| (r.workloads[i].arrival, i));
    let queue_color: BTreeMap<&str, &str> = chosen_queues(r)
        .iter()
        .enumerate()
        .map(|(n, &qi)| (r.queues[qi].name.as_str(), PALETTE[n % PALETTE.len()]))
        .collect();
    let end = r.end.max(1);
    let row_h = 26.0;
    let label_w = 430.0;
    let h = 40.0 + row_h * idx.len() as f64 + 20.0;
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
    let scale = scale_for(&primary);
    for (row, &i) in idx.iter().enumerate() {
        let w = &r.workloads[i];
        let rec = &r.records[i];
        let y = p.top + row as f64 * row_h + 4.0;
        let size = if primary.is_empty() {
            String::new()
        } else {
            format!(
                " · {} {}",
                fmt_tick(w.total(&primary) as f64 / scale),
                unit_name(&primary)
            )
        };
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="lane" text-anchor="end">{}<tspan class="muted">{} · {}</tspan></text>"#,
            p.left - 8.0,
            y + 13.0,
            esc(short_name(&w.name)),
            esc(&size),
            if w.pods() == 1 {
                "1 pod".to_string()
            } else {
                format!("{} pods", w.pods())
            }
        );
        let color = queue_color.get(&*rec.cluster_queue).copied().unwrap_or("#4b5563");
        // Waiting from arrival (or the previous eviction) to the next start.
        let mut wait_from = w.arrival;
        for run in &rec.runs {
            let start = run.started_at.unwrap_or(run.admitted_at);
            bar(out, &p, unit, wait_from, start, y, "wait", None);
            let stop = run.ended_at.unwrap_or(end);
            let cls = match run.end {
                RunEnd::Finished | RunEnd::Running => "run",
                RunEnd::Preempted | RunEnd::Evicted => "run lost",
            };
            bar(out, &p, unit, start, stop, y, cls, Some(color));
            if matches!(run.end, RunEnd::Preempted | RunEnd::Evicted) {
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
        if rec.finished_at().is_none() && rec.runs.last().is_none_or(|x| x.end != RunEnd::Running) {
            bar(out, &p, unit, wait_from, end, y, "wait", None);
        }
    }
    out.push_str("</svg>");
    out.push_str(r#"<p class="legend"><span class="sw wait"></span>waiting <span class="sw" style="background:#2563eb"></span>running (colour = cluster queue) <span class="sw lost"></span>run lost to preemption <b class="xmark">✕</b> preempted</p>"#);
    out.push_str("</figure>");
}

fn short_name(name: &str) -> &str {
    name
}

#[allow(clippy::too_many_arguments)]
fn bar(out: &mut String, p: &Plot, unit: TimeUnit, from: Millis, to: Millis, y: f64, class: &str, fill: Option<&str>) {
    if to <= from {
        return;
    }
    let x0 = p.x(from as f64 / unit.ms);
    let x1 = p.x(to as f64 / unit.ms).max(x0 + 1.0);
    let style = fill.map(|f| format!(r#" style="fill:{f}""#)).unwrap_or_default();
    let _ = write!(
        out,
        r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="18" rx="3" class="{class}"{style}/>"#,
        x1 - x0
    );
}

/// The workloads never admitted, with the engine's reason for each.
fn never_admitted(out: &mut String, report: &Report) {
    let pending = &report.pending_at_end;
    if pending.is_empty() {
        return;
    }
    let _ = write!(
        out,
        r#"<h2>Never admitted ({})</h2><p class="lede">Still waiting when the run ended, with nothing left to free quota for them, and the engine's last word on why.</p><div class="tablewrap"><table><thead><tr><th class="l">workload</th><th class="l">class</th><th class="l">cluster queue</th><th class="l">why</th></tr></thead><tbody>"#,
        pending.len()
    );
    for p in pending.iter().take(MAX_NEVER_ADMITTED) {
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td></tr>"#,
            esc(&p.name),
            esc(&p.class),
            esc(&p.cluster_queue),
            esc(p.reason.as_deref().unwrap_or("no explanation"))
        );
    }
    out.push_str("</tbody></table></div>");
    if pending.len() > MAX_NEVER_ADMITTED {
        let _ = write!(
            out,
            r#"<p class="muted">… and {} more (all are in the JSON output).</p>"#,
            pending.len() - MAX_NEVER_ADMITTED
        );
    }
}

/// Never-admitted workloads listed in the HTML report.
const MAX_NEVER_ADMITTED: usize = 200;

fn table(out: &mut String, first: &str, groups: &[Group], totals: Option<&Group>, resources: &[Column]) {
    let _ = write!(
        out,
        r#"<div class="tablewrap"><table><thead><tr><th class="l">{}</th><th>workloads</th><th>admitted</th><th>finished</th><th>preempted</th><th>pending</th><th>wait mean</th><th>p50</th><th>p95</th><th>max</th>"#,
        esc(first)
    );
    for col in resources {
        let _ = write!(out, r#"<th title="{}">{}</th>"#, esc(&col.resource), esc(&col.label()));
    }
    if !resources.is_empty() {
        out.push_str("<th>borrowed</th>");
    }
    out.push_str("</tr></thead><tbody>");
    let row = |out: &mut String, g: &Group, class: &str| {
        let _ = write!(
            out,
            r#"<tr class="{class}"><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"#,
            esc(&g.name),
            g.workloads,
            g.admitted,
            g.finished,
            g.preemptions + g.evictions,
            g.never_admitted + g.rejected
        );
        if g.wait.count == 0 {
            out.push_str("<td>—</td><td>—</td><td>—</td><td>—</td>");
        } else {
            let _ = write!(
                out,
                "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                format_duration(g.wait.mean_ms.round() as i64),
                format_duration(g.wait.p50_ms),
                format_duration(g.wait.p95_ms),
                format_duration(g.wait.max_ms)
            );
        }
        for (k, col) in resources.iter().enumerate() {
            let u = col.of(g).and_then(|x| x.utilisation);
            match u {
                // A meter for the first (GPU) resource only keeps the table narrow.
                Some(u) if k > 0 => {
                    let _ = write!(out, "<td>{:.0}%</td>", u * 100.0);
                }
                Some(u) => {
                    let w = (u * 100.0).clamp(0.0, 100.0);
                    let _ = write!(
                        out,
                        r#"<td><span class="meter"><i style="width:{w:.0}%"></i></span>{:.0}%</td>"#,
                        u * 100.0
                    );
                }
                None => out.push_str("<td>—</td>"),
            }
        }
        if !resources.is_empty() {
            let b = g
                .resources
                .iter()
                .find(|x| x.borrowed_share.is_some())
                .and_then(|x| x.borrowed_share);
            if class == "total" {
                out.push_str("<td>—</td>");
            } else {
                let _ = write!(
                    out,
                    "<td>{}</td>",
                    b.map_or("—".into(), |b| format!("{:.0}%", b * 100.0))
                );
            }
        }
        out.push_str("</tr>");
    };
    for g in groups {
        row(out, g, "");
    }
    if let Some(t) = totals {
        row(out, t, "total");
    }
    out.push_str("</tbody></table></div>");
}

const CSS: &str = r#"
:root{--ink:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1360px;margin:0 auto;padding:28px 28px 60px}
h1{font-size:26px;margin:0 0 4px;letter-spacing:-.01em}
h2{font-size:18px;margin:34px 0 4px}
.sub{color:var(--muted);margin:0 0 20px}
.muted{color:var(--muted);font-weight:400}
p.lede{color:var(--muted);margin:0 0 12px;max-width:900px}
.kpis{display:grid;grid-template-columns:repeat(6,1fr);gap:12px}
.kpi{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.kpi b{display:block;font-size:24px;font-variant-numeric:tabular-nums;letter-spacing:-.01em}
.kpi span{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 14px;margin:0}
.card svg{display:block;width:100%;height:auto}
figcaption{font-size:14px;margin-bottom:6px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.pill{display:inline-block;font-size:11px;color:#1e40af;background:#dbeafe;border-radius:99px;padding:1px 8px;margin-left:6px;vertical-align:1px}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:10px}
table{border-collapse:collapse;width:100%;background:#fff;font-variant-numeric:tabular-nums}
th,td{padding:7px 9px;text-align:right;border-bottom:1px solid var(--line);white-space:nowrap}
th{font-size:12px;color:var(--muted);font-weight:600;background:#f9fafb}
.l{text-align:left}
tr.total td{font-weight:600;background:#f9fafb}
.meter{display:inline-block;width:32px;height:6px;border-radius:3px;background:#e5e7eb;margin-right:8px;vertical-align:2px;overflow:hidden}
.meter i{display:block;height:100%;background:#2563eb}
.legend{color:#374151;font-size:13px;margin:8px 2px 0}
.sw{display:inline-block;width:14px;height:10px;border-radius:2px;margin:0 5px 0 12px;vertical-align:0}
.sw:first-child{margin-left:0}
.sw.hatch{background:repeating-linear-gradient(45deg,#9ca3af 0 2px,#fff 2px 5px);border:1px solid #9ca3af}
.sw.dash{height:0;border-top:2px dashed #111827;border-radius:0}
.sw.wait{background:#e5e7eb}
.sw.lost{background:repeating-linear-gradient(45deg,#f87171 0 2px,#fee2e2 2px 5px)}
.xmark{color:#dc2626;margin-left:12px}
svg text{font-family:inherit}
.grid{stroke:#eef0f3}
.axis{stroke:#9ca3af}
.tick{font-size:11px;fill:#6b7280;font-variant-numeric:tabular-nums}
.axis-title{font-size:12px;fill:#374151}
.note{font-size:11px;fill:#111827}
.nominal{stroke:#111827;stroke-width:1.3;stroke-dasharray:5 4}
.lane{font-size:12px;fill:#111827}
rect.wait{fill:#e5e7eb}
rect.run{fill-opacity:.85}
rect.lost{fill-opacity:.35!important}
path.x{stroke:#dc2626;stroke-width:2;fill:none}
footer{color:var(--muted);font-size:12px;margin-top:36px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}.kpis{grid-template-columns:repeat(3,1fr)}}
"#;

/// Renders the full report.
pub fn render(report: &Report, r: &SimResult) -> String {
    let unit = time_unit(r.end);
    let mut out = String::with_capacity(256 * 1024);
    let _ = write!(
        out,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Sluice simulation — {}</title><style>{CSS}</style></head><body><main>"#,
        esc(&report.scenario)
    );
    let _ = write!(
        out,
        r#"<h1>Sluice simulation <span class="muted">— {}</span></h1><p class="sub">{} workloads in {} cluster queues over {} of virtual time · {} scheduling cycles · {} API writes{} · eviction delay {}</p>"#,
        esc(&report.scenario),
        report.totals.workloads,
        report.cluster_queues.len(),
        format_duration(report.makespan_ms),
        report.cycles,
        report.api_writes.count,
        match report.options.api_qps {
            Some(q) => format!(
                " at {q} qps (mean delay {})",
                format_duration(report.api_writes.mean_delay_ms.round() as i64)
            ),
            None => " (unthrottled)".into(),
        },
        format_duration(report.options.eviction_delay_ms)
    );

    let t = &report.totals;
    let primary = t.resources.first();
    out.push_str(r#"<div class="kpis">"#);
    let kpi = |out: &mut String, value: String, label: &str| {
        let _ = write!(
            out,
            r#"<div class="kpi"><b>{}</b><span>{}</span></div>"#,
            esc(&value),
            esc(label)
        );
    };
    kpi(&mut out, format!("{}/{}", t.admitted, t.workloads), "admitted");
    kpi(&mut out, t.finished.to_string(), "finished");
    kpi(&mut out, t.preemptions.to_string(), "preemptions");
    kpi(
        &mut out,
        if t.wait.count > 0 {
            format_duration(t.wait.p50_ms)
        } else {
            "—".into()
        },
        "median wait",
    );
    kpi(
        &mut out,
        if t.wait.count > 0 {
            format_duration(t.wait.p95_ms)
        } else {
            "—".into()
        },
        "p95 wait",
    );
    kpi(
        &mut out,
        primary
            .and_then(|p| p.utilisation)
            .map_or("—".into(), |u| format!("{:.0}%", u * 100.0)),
        &format!("{} utilisation", primary.map_or("quota", |p| short_label(&p.resource))),
    );
    out.push_str("</div>");

    // A hatch pattern shared by every chart.
    out.push_str(r##"<svg width="0" height="0" style="position:absolute"><defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff" fill-opacity="0.2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#6b7280" stroke-width="2.2"/></pattern></defs></svg>"##);

    out.push_str(r#"<h2>Quota in use per cluster queue</h2><p class="lede">Quota reserved by admitted workloads over time, against each queue's nominal quota. Use above the dashed line is borrowed from other queues of the cohort.</p>"#);
    utilisation_charts(&mut out, r, unit);

    out.push_str(r#"<h2>Queue depth</h2><p class="lede">Workloads waiting for admission in each cluster queue (including preempted workloads waiting to run again).</p>"#);
    depth_chart(&mut out, r, unit);

    out.push_str(r#"<h2>Time to admission per workload class</h2><p class="lede">Share of each class admitted within a given wait, from arrival to the admission write of its latest admission.</p>"#);
    wait_chart(&mut out, r, report);

    out.push_str(r#"<h2>The largest gangs</h2><p class="lede">Each lane is one of the largest workloads, admitted whole or not at all: grey while waiting, coloured while running.</p>"#);
    gantt(&mut out, r, unit);

    let resources = Column::all(t);
    let by_cohort = report.cluster_queues.len() > 40 && !report.cohorts.is_empty();
    let _ = write!(
        out,
        r#"<h2>{}</h2><p class="lede">Utilisation is mean use ÷ nominal quota over the run (above 100% means borrowing); borrowed is the share of use above nominal.{}</p>"#,
        if by_cohort { "Cohorts" } else { "Cluster queues" },
        if by_cohort {
            format!(
                " {} cluster queues are grouped by cohort here; per-queue figures are in the JSON output.",
                report.cluster_queues.len()
            )
        } else {
            String::new()
        }
    );
    table(
        &mut out,
        if by_cohort { "cohort" } else { "cluster queue" },
        if by_cohort {
            &report.cohorts
        } else {
            &report.cluster_queues
        },
        Some(&report.totals),
        &resources,
    );
    out.push_str(r#"<h2>Workload classes</h2>"#);
    table(&mut out, "class", &report.classes, None, &[]);
    never_admitted(&mut out, report);

    let _ = write!(
        out,
        r#"<footer>Generated by <code>sluice simulate</code>. The same figures are available with <code>--json</code> (see docs/simulate.md).</footer></main></body></html>"#
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_time_weighted_means_of_the_steps() {
        // 4 from 0 to 25, 0 from 25 to 100 ms: over 4 bins of 25 ms the first
        // bin is 4, the rest 0; 2 held over [60, 90) covers 15 of the 25 ms of
        // both the third and the fourth bin: 2 × 15/25 = 1.2 each.
        assert_eq!(bin_steps(&[(0, 4.0), (25, 0.0)], 100, 4), vec![4.0, 0.0, 0.0, 0.0]);
        assert_eq!(
            bin_steps(&[(0, 0.0), (60, 2.0), (90, 0.0)], 100, 4),
            vec![0.0, 0.0, 1.2, 1.2]
        );
        // The last value holds until the end.
        assert_eq!(bin_steps(&[(50, 3.0)], 100, 2), vec![0.0, 3.0]);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(23.3, 4), vec![0.0, 10.0, 20.0, 30.0]);
        assert_eq!(nice_ticks(0.9, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r#"<a & "b">"#), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
