//! A trace workload's GPU utilisation profile (`utilization:` on a job or a
//! generator), and the Trace's `idleInterval`: what idle-GPU reclaim
//! (`ClusterQueue.spec.idleReclaim`) is simulated from.
//!
//! ```yaml
//! utilization:            # from the moment the pods start running
//! - {percent: 85, for: 20m}
//! - {percent: 0}          # the last segment lasts until the run ends
//! ```
//!
//! Every pod of the workload follows the same profile. A workload without
//! one is 100 % busy for its whole run, so it is never idle.

use std::sync::Arc;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Diagnostic, DocOrigin, Duration};
use crate::units::Millis;

/// The shortest `idleInterval` (and `--idle-interval`): a check builds
/// `for ÷ interval` samples per workload.
pub const MIN_IDLE_INTERVAL: Millis = 1_000;

/// `idleInterval` when neither the Trace nor the command line sets one.
pub const DEFAULT_IDLE_INTERVAL: Millis = 60_000;

/// One segment as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentEntry {
    /// GPU utilisation, percent (0–100).
    pub percent: Spanned<i64>,
    /// How long it lasts; required on every segment but the last.
    #[serde(rename = "for", default)]
    pub for_: Option<Spanned<Duration>>,
}

/// One stretch of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// GPU utilisation, percent.
    pub percent: u8,
    /// Length; `None` on the last segment (until the run ends).
    pub for_ms: Option<Millis>,
}

/// A checked profile: every segment but the last has a length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Utilization(Arc<[Segment]>);

impl Utilization {
    /// A profile from segments; `None` unless every segment but the last
    /// has a positive length and the last has none.
    pub fn new(segments: Vec<Segment>) -> Option<Self> {
        let (last, rest) = segments.split_last()?;
        let ok = last.for_ms.is_none() && rest.iter().all(|s| s.for_ms.is_some_and(|d| d > 0));
        ok.then(|| Self(segments.into()))
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Utilisation `offset` ms after the pods started (a segment's end
    /// belongs to the next one).
    pub fn at(&self, offset: Millis) -> u8 {
        let mut from: Millis = 0;
        for s in self.0.iter() {
            match s.for_ms {
                Some(d) if offset >= from.saturating_add(d) => from = from.saturating_add(d),
                _ => return s.percent,
            }
        }
        self.0.last().map_or(100, |s| s.percent)
    }

    /// How much of the first `len` ms after the pods started is below
    /// `threshold` percent.
    pub fn below_ms(&self, len: Millis, threshold: f64) -> Millis {
        let mut from: Millis = 0;
        let mut total: Millis = 0;
        for s in self.0.iter() {
            if from >= len {
                break;
            }
            let to = s.for_ms.map_or(len, |d| from.saturating_add(d).min(len));
            if f64::from(s.percent) < threshold {
                total += to - from;
            }
            from = to;
        }
        total
    }
}

/// Reads `utilization` at `path` (`spec.jobs[3].utilization`), adding an
/// error for every bad segment; `owner` locates an empty list (the job's
/// name, the generator's class).
pub fn read(
    entries: &[SegmentEntry],
    path: &str,
    owner: serde_saphyr::Location,
    origin: DocOrigin<'_>,
    errors: &mut Vec<Diagnostic>,
) -> Option<Utilization> {
    if entries.is_empty() {
        errors.push(origin.at(
            owner,
            path,
            "a utilization profile needs at least one segment, e.g. [{percent: 0}]",
        ));
        return None;
    }
    let before = errors.len();
    let last = entries.len() - 1;
    let mut segments = Vec::with_capacity(entries.len());
    for (k, e) in entries.iter().enumerate() {
        let p = format!("{path}[{k}]");
        let percent = e.percent.value;
        if !(0..=100).contains(&percent) {
            errors.push(origin.at(
                e.percent.referenced,
                format!("{p}.percent"),
                format!("percent must be from 0 to 100, got {percent}"),
            ));
        }
        match (&e.for_, k == last) {
            (None, false) => errors.push(origin.at(
                e.percent.referenced,
                format!("{p}.for"),
                "every segment but the last needs `for` (how long it lasts)",
            )),
            (Some(d), true) => errors.push(origin.at(
                d.referenced,
                format!("{p}.for"),
                "the last segment lasts until the run ends: leave out `for`",
            )),
            (Some(d), false) if d.value.0 == 0 => {
                errors.push(origin.at(d.referenced, format!("{p}.for"), "a segment must last longer than 0"))
            }
            _ => {}
        }
        segments.push(Segment {
            percent: percent.clamp(0, 100) as u8,
            for_ms: e.for_.as_ref().map(|d| d.value.0),
        });
    }
    if errors.len() > before {
        return None;
    }
    Utilization::new(segments)
}

/// Checks an idle-check interval (the Trace's `spec.idleInterval` or
/// `--idle-interval`).
pub fn check_interval(ms: Millis) -> Result<Millis, String> {
    if ms < MIN_IDLE_INTERVAL {
        return Err(format!(
            "the idle-check interval must be at least {}s, got {ms} ms",
            MIN_IDLE_INTERVAL / 1000
        ));
    }
    Ok(ms)
}

/// The Trace's `spec.idleInterval`, checked.
pub fn idle_interval(value: Option<&Spanned<Duration>>, origin: DocOrigin<'_>) -> Result<Option<Millis>, Diagnostic> {
    let Some(v) = value else { return Ok(None) };
    check_interval(v.value.0)
        .map(Some)
        .map_err(|e| origin.at(v.referenced, "spec.idleInterval", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Millis = 60_000;

    fn notebook() -> Utilization {
        Utilization::new(vec![
            Segment {
                percent: 85,
                for_ms: Some(20 * MIN),
            },
            Segment {
                percent: 5,
                for_ms: Some(10 * MIN),
            },
            Segment {
                percent: 0,
                for_ms: None,
            },
        ])
        .unwrap()
    }

    #[test]
    fn segments_follow_each_other_and_the_last_lasts() {
        let u = notebook();
        assert_eq!(u.at(0), 85);
        assert_eq!(u.at(20 * MIN - 1), 85);
        assert_eq!(u.at(20 * MIN), 5, "a segment's end belongs to the next");
        assert_eq!(u.at(30 * MIN), 0);
        assert_eq!(u.at(100 * 24 * MIN), 0);
    }

    #[test]
    fn time_below_a_threshold_is_cut_at_the_run_length() {
        let u = notebook();
        // Below 10 %: 20m..len.
        assert_eq!(u.below_ms(60 * MIN, 10.0), 40 * MIN);
        assert_eq!(u.below_ms(25 * MIN, 10.0), 5 * MIN);
        assert_eq!(u.below_ms(15 * MIN, 10.0), 0);
        // Below 5 %: only the 0 % tail, from 30m.
        assert_eq!(u.below_ms(60 * MIN, 5.0), 30 * MIN);
        // Below 90 %: all of it.
        assert_eq!(u.below_ms(60 * MIN, 90.0), 60 * MIN);
    }

    #[test]
    fn only_well_formed_profiles_are_made() {
        let seg = |percent, for_ms| Segment { percent, for_ms };
        assert!(Utilization::new(vec![]).is_none());
        assert!(
            Utilization::new(vec![seg(1, Some(MIN))]).is_none(),
            "last with a length"
        );
        assert!(Utilization::new(vec![seg(1, None), seg(2, None)]).is_none());
        assert!(Utilization::new(vec![seg(1, Some(0)), seg(2, None)]).is_none());
        assert!(Utilization::new(vec![seg(1, None)]).is_some());
    }

    #[test]
    fn intervals_under_a_second_are_refused() {
        assert_eq!(check_interval(60_000), Ok(60_000));
        assert!(check_interval(999).unwrap_err().contains("at least 1s"));
    }
}
