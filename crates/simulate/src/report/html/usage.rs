//! The HTML report's "GPU-hours by queue" section: the same figures as
//! the terminal's (see `report::usage`).

use std::fmt::Write as _;

use super::esc;
use crate::report::usage::{UsageReport, action_text, budget_text, sample_points, used_by};
use crate::units::format_duration;

pub(super) fn section(out: &mut String, u: &UsageReport) {
    let over_time = u.half_life_ms.map_or(String::new(), |h| {
        format!(
            " Fair sharing over time: usage half-life {}; each queue's decayed average use above its nominal quota counted as borrowed.",
            format_duration(h)
        )
    });
    let _ = write!(
        out,
        r#"<h2>GPU-hours by queue</h2><p class="lede">GPU-hours each cluster queue used over the run, its budget and what it spent in the period the run ends in, and when each budget action fired.{}</p>"#,
        esc(&over_time)
    );
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th class="l">cluster queue</th><th>GPU-h</th><th class="l">budget</th><th>spent at end</th><th class="l">actions</th></tr></thead><tbody>"#);
    for q in &u.cluster_queues {
        let (budget, spent) = match &q.budget {
            Some(b) => (budget_text(b), format!("{} ({}%)", b.spent_hours, b.percent)),
            None => ("—".into(), "—".into()),
        };
        let actions: Vec<String> = q.actions.iter().map(action_text).collect();
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td>{:.1}</td><td class="l">{}</td><td>{}</td><td class="l">{}</td></tr>"#,
            esc(&q.name),
            q.gpu_hours,
            esc(&budget),
            esc(&spent),
            if actions.is_empty() {
                "—".into()
            } else {
                esc(&actions.join(", "))
            }
        );
    }
    out.push_str("</tbody></table></div>");
    let points = sample_points(u);
    if points.is_empty() {
        return;
    }
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th class="l">GPU-h used by</th>"#);
    for &p in &points {
        let _ = write!(out, "<th>{}</th>", format_duration(p));
    }
    out.push_str("</tr></thead><tbody>");
    for q in &u.cluster_queues {
        let _ = write!(out, r#"<tr><td class="l">{}</td>"#, esc(&q.name));
        for &p in &points {
            let _ = write!(out, "<td>{:.1}</td>", used_by(q, p));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}
