//! The HTML report: one self-contained file, inline SVG drawn by hand, no
//! scripts, no network. This file lays out the page and its tables; the
//! charts are in `charts.rs` and `gantt.rs`, their drawing primitives in
//! `plot.rs`, the style sheet in `report.css`.

mod charts;
mod fairness;
mod forecast;
mod gantt;
mod idle;
mod placement;
mod plot;

use std::fmt::Write as _;

use super::{Column, Group, Report};
use crate::sim::SimResult;
use crate::units::format_duration;
use charts::{depth_chart, short_label, utilisation_charts, wait_chart};
use gantt::gantt;
use plot::time_unit;

/// Line colours, one per queue (repeating past ten).
const PALETTE: [&str; 10] = [
    "#2563eb", "#e8590c", "#0f9d58", "#9333ea", "#d6336c", "#0891b2", "#ca8a04", "#4b5563", "#65a30d", "#7c3aed",
];
/// At most this many queues get their own chart or line; the rest are named.
const MAX_QUEUES: usize = 8;
/// Never-admitted workloads listed in the HTML report.
const MAX_NEVER_ADMITTED: usize = 200;
const CSS: &str = include_str!("html/report.css");

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

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
    if let Some(x) = &report.placement {
        placement::section(&mut out, x);
    }
    if let Some(x) = &report.fairness {
        fairness::section(&mut out, x, r, unit);
    }
    if let Some(x) = &report.idle {
        idle::section(&mut out, x);
    }
    if let Some(x) = &report.forecast {
        forecast::section(&mut out, x);
    }
    never_admitted(&mut out, report);

    let _ = write!(
        out,
        r#"<footer>Generated by <code>sluice simulate</code>. The same figures are available with <code>--json</code> (see docs/simulate.md).</footer></main></body></html>"#
    );
    out
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

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc(r#"<a & "b">"#), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
