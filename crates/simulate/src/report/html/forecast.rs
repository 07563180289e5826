//! The HTML report's start-time estimates: the same figures as the
//! terminal's (see `report::forecast`).

use std::fmt::Write as _;

use super::esc;
use crate::report::forecast::{Accuracy, COLUMNS, ForecastReport, cells, lede};

pub(super) fn section(out: &mut String, f: &ForecastReport) {
    let _ = write!(
        out,
        r#"<h2>Start-time estimates</h2><p class="lede">{}. Expected run times: the trace's <code>expectedRuntime</code>, else the queue's median so far, else 1h; exact: every run time and end known.</p>"#,
        esc(&lede(f))
    );
    let rows = [("expected", &f.expected_run_times), ("exact", &f.exact_run_times)];
    table(out, "run times", rows.into_iter());
    let classes = f.classes.iter().map(|c| (c.class.as_str(), &c.accuracy));
    table(out, "class (expected)", classes);
}

fn table<'a>(out: &mut String, first: &str, rows: impl Iterator<Item = (&'a str, &'a Accuracy)>) {
    let _ = write!(
        out,
        r#"<div class="tablewrap"><table><thead><tr><th class="l">{}</th>"#,
        esc(first)
    );
    for c in COLUMNS {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead><tbody>");
    for (name, a) in rows {
        let _ = write!(out, r#"<tr><td class="l">{}</td>"#, esc(name));
        for cell in cells(a) {
            let _ = write!(out, "<td>{}</td>", esc(&cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}
