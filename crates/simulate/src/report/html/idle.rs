//! The HTML report's idle-GPU section: the same figures as the terminal's
//! (see `report::idle`).

use std::fmt::Write as _;

use super::esc;
use crate::report::idle::{Figures, IdleReport, policy_text, wait_text};
use crate::units::format_duration;

/// Reclaims listed one by one, at most.
const MAX_EVENTS: usize = 200;

pub(super) fn section(out: &mut String, idle: &IdleReport) {
    let _ = write!(
        out,
        r#"<h2>Idle GPUs</h2><p class="lede">Checked every {}. Idle: GPU-hours of running workloads whose utilisation profile was below their queue's threshold (10% without a policy). Reclaimed: GPU-hours from an eviction or deactivation to the end its run would have had.</p>"#,
        format_duration(idle.interval_ms)
    );
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th class="l">cluster queue</th><th class="l">policy</th><th>GPU-h idle</th><th>reclaimed</th><th>warned</th><th>evicted</th><th>deactivated</th></tr></thead><tbody>"#);
    let row = |out: &mut String, class: &str, name: &str, policy: &str, f: Figures| {
        let _ = write!(
            out,
            r#"<tr class="{class}"><td class="l">{}</td><td class="l">{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(name),
            esc(policy),
            f.0,
            f.1,
            f.2,
            f.3,
            f.4
        );
    };
    for q in &idle.cluster_queues {
        let policy = q.policy.as_ref().map_or("—".into(), policy_text);
        let f = q.figures();
        row(out, "", &q.name, &policy, f);
    }
    row(out, "total", "cluster", "", idle.totals());
    out.push_str("</tbody></table></div>");
    if let Some(s) = &idle.wait_saved {
        let _ = write!(out, r#"<p class="lede">{}</p>"#, esc(&wait_text(s)));
    }
    if idle.events.is_empty() {
        return;
    }
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th>at</th><th class="l">action</th><th class="l">workload</th><th class="l">cluster queue</th><th class="l">waiting for its quota</th><th>mean use</th><th>GPU-h reclaimed</th></tr></thead><tbody>"#);
    for e in idle.events.iter().take(MAX_EVENTS) {
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{:.0}%</td><td>{:.1}</td></tr>"#,
            format_duration(e.at_ms),
            if e.over_requeue_limit {
                "Deactivate (requeue limit)"
            } else {
                e.action
            },
            esc(&e.workload),
            esc(&e.cluster_queue),
            esc(e.waiter.as_deref().unwrap_or("—")),
            e.mean_percent,
            e.gpu_hours_reclaimed
        );
    }
    out.push_str("</tbody></table></div>");
    if idle.events.len() > MAX_EVENTS {
        let _ = write!(
            out,
            r#"<p class="muted">… and {} more (all are in the JSON output).</p>"#,
            idle.events.len() - MAX_EVENTS
        );
    }
}
