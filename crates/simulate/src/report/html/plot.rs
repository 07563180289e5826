//! Drawing primitives of the HTML report: the time axis, round ticks, a
//! plot area with linear scales, step and area paths over time bins,
//! legends and bars.

use std::fmt::Write as _;

use super::{PALETTE, esc};
use crate::units::Millis;

/// Time axis unit chosen from the run's length.
#[derive(Clone, Copy)]
pub(super) struct TimeUnit {
    pub(super) ms: f64,
    pub(super) label: &'static str,
}

pub(super) fn time_unit(span: Millis) -> TimeUnit {
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
pub(super) fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
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

pub(super) fn fmt_tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else if (v * 10.0 - (v * 10.0).round()).abs() < 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A plot area inside an SVG with linear scales.
pub(super) struct Plot {
    pub(super) w: f64,
    pub(super) h: f64,
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
    pub(super) x_max: f64,
    pub(super) y_max: f64,
}

impl Plot {
    /// A full-width chart, 1300 × 300, with room for the axes' labels.
    pub(super) fn wide(x_max: f64, y_max: f64) -> Self {
        Self {
            w: 1300.0,
            h: 300.0,
            left: 58.0,
            right: 16.0,
            top: 14.0,
            bottom: 40.0,
            x_max,
            y_max,
        }
    }

    pub(super) fn x(&self, v: f64) -> f64 {
        self.left + (v / self.x_max).clamp(0.0, 1.0) * (self.w - self.left - self.right)
    }
    pub(super) fn y(&self, v: f64) -> f64 {
        self.h - self.bottom - (v / self.y_max).clamp(0.0, 1.05) * (self.h - self.top - self.bottom)
    }

    /// Grid, axes, tick labels and axis titles.
    pub(super) fn axes(
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
pub(super) fn bin_steps(points: &[(Millis, f64)], end: Millis, bins: usize) -> Vec<f64> {
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

pub(super) fn step_path(p: &Plot, values: &[f64], end: Millis, unit: TimeUnit) -> String {
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

pub(super) fn area_path(p: &Plot, lower: &[f64], upper: &[f64], end: Millis, unit: TimeUnit) -> String {
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

pub(super) fn legend<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
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

#[allow(clippy::too_many_arguments)]
pub(super) fn bar(
    out: &mut String,
    p: &Plot,
    unit: TimeUnit,
    from: Millis,
    to: Millis,
    y: f64,
    class: &str,
    fill: Option<&str>,
) {
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
}
