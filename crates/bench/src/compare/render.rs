//! The terminal rendering of a comparison: one table, figure | real |
//! simulated | ratio.

use std::fmt::Write as _;

use super::figures::{Comparison, Figures, Row, Unit};
use sluice_simulate::report::table::Table;

/// A value in its unit: times in seconds (one decimal), rates with one,
/// writes per admission with three, counts whole; `—` when missing.
pub fn value(unit: Unit, v: Option<f64>) -> String {
    let Some(v) = v else {
        return "—".into();
    };
    match unit {
        Unit::Ms => format!("{:.1} s", v / 1000.0),
        Unit::PerSecond => format!("{v:.1}"),
        Unit::Count => format!("{v:.0}"),
        Unit::WritesPerAdmission => format!("{v:.3}"),
    }
}

/// simulated ÷ real, three decimals; `—` when there is none.
pub fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| format!("{r:.3}"))
}

fn table_row(r: &Row) -> Vec<String> {
    vec![
        r.figure.clone(),
        value(r.unit, r.real),
        value(r.unit, r.simulated),
        ratio(r.ratio),
    ]
}

/// The comparison as printed: what was compared, the table, and a warning
/// for a side that did not finish every workload.
pub fn render(comparison: &Comparison) -> String {
    let c = &comparison.setting;
    let mut out = String::new();
    let limit = if c.kube_qps > 0.0 {
        format!("--kube-qps {} --kube-burst {}", c.kube_qps, c.kube_burst)
    } else {
        "no client limit".to_string()
    };
    let _ = writeln!(
        out,
        "sluice bench compare: {} × {}, {limit}, fair sharing {}\nreal: {}; simulated: sluice simulate's engine in virtual time, eviction delay 0, finish lag {} ms, write latency {} ms\n",
        c.scenario,
        c.scale,
        if c.fair_sharing { "on" } else { "off" },
        c.real_source,
        c.finish_lag_ms,
        c.api_latency_ms,
    );
    let mut t = Table::new(["figure", "real", "simulated", "ratio"].map(String::from).to_vec());
    t.rows.extend(comparison.rows.iter().map(table_row));
    t.render(&mut out);
    for (side, f) in [("real", &comparison.real), ("simulated", &comparison.simulated)] {
        out.push_str(&incomplete(side, f));
    }
    out
}

fn incomplete(side: &str, f: &Figures) -> String {
    if f.complete {
        String::new()
    } else {
        format!("warning: the {side} side did not finish every workload: its figures are of a partial run\n")
    }
}
