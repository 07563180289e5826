//! The HTML report's placement section: the same figures as the
//! terminal's (see `report::placement`).

use std::fmt::Write as _;

use super::esc;
use crate::report::placement::{
    PlacementQueue, PlacementReport, devices_phrase, devices_text, figures, topology_text, units,
};

pub(super) fn section(out: &mut String, p: &PlacementReport) {
    let _ = write!(
        out,
        r#"<h2>Placement on nodes</h2><p class="lede">{} nodes with {}. Node wait: hours a workload was pending that fit its quota but not on the nodes (fragmentation, or nodes taken). Quota wait: hours pending for any other reason, quota mostly. Waited for nodes: the workloads that waited for room on the nodes at some point; node share: node wait ÷ (node wait + quota wait).</p>"#,
        p.nodes,
        devices_phrase(p.gpus, p.mig_slices)
    );
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th class="l">flavor</th><th>nodes</th><th>GPUs</th><th>GPU quota</th><th class="l">topology</th></tr></thead><tbody>"#);
    for f in &p.flavors {
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="l">{}</td></tr>"#,
            esc(&f.flavor),
            f.nodes,
            devices_text(f.gpus, f.mig_slices),
            units(f.gpu_quota),
            esc(&topology_text(f))
        );
    }
    out.push_str("</tbody></table></div>");
    out.push_str(r#"<div class="tablewrap"><table><thead><tr><th class="l">cluster queue</th><th>waited for nodes</th><th>node wait h</th><th>quota wait h</th><th>node share</th></tr></thead><tbody>"#);
    let row = |out: &mut String, q: &PlacementQueue, class: &str| {
        let [waited, nodes, quota, share] = figures(q);
        let _ = write!(
            out,
            r#"<tr class="{class}"><td class="l">{}</td><td>{waited}</td><td>{nodes}</td><td>{quota}</td><td>{share}</td></tr>"#,
            esc(&q.name)
        );
    };
    for q in &p.cluster_queues {
        row(out, q, "");
    }
    row(out, &p.totals(), "total");
    out.push_str("</tbody></table></div>");
}
