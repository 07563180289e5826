//! Durations as people write them: command-line flags, environment
//! variables, API fields, annotations and scenario files all go through
//! [`parse`].
//!
//! The rule, everywhere:
//!
//! - one or more `<number><unit>` parts, without spaces: `90s`, `2h30m`,
//!   `1.5h`, `1m30s500ms`; units `ms`, `s`, `m`, `h`, and `d` where the
//!   field allows days ([`Units::largest`]);
//! - **a number needs its unit**: `90` is refused with a message that asks
//!   for `90s` (or `90m`, …). Only `0` may be written alone, as in Go's and
//!   Kubernetes' durations. (Bare numbers once meant seconds in the
//!   controller's flags and milliseconds in `sluice simulate`'s: the same
//!   text, a thousandfold apart. Refused, they cannot be misread.)
//!
//! Durations are non-negative and exact to the nanosecond; a value too large
//! for a [`Duration`] is an error, never a wrap-around.

use std::time::Duration;

/// A unit of time a duration may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    /// `ms`
    Millis,
    /// `s`
    Seconds,
    /// `m`
    Minutes,
    /// `h`
    Hours,
    /// `d` (24 h)
    Days,
}

impl Unit {
    const ALL: [Unit; 5] = [Unit::Millis, Unit::Seconds, Unit::Minutes, Unit::Hours, Unit::Days];

    /// How the unit is written: `ms`, `s`, `m`, `h`, `d`.
    pub const fn symbol(self) -> &'static str {
        match self {
            Unit::Millis => "ms",
            Unit::Seconds => "s",
            Unit::Minutes => "m",
            Unit::Hours => "h",
            Unit::Days => "d",
        }
    }

    /// Nanoseconds in one of this unit.
    pub const fn nanos(self) -> u128 {
        match self {
            Unit::Millis => 1_000_000,
            Unit::Seconds => 1_000_000_000,
            Unit::Minutes => 60_000_000_000,
            Unit::Hours => 3_600_000_000_000,
            Unit::Days => 86_400_000_000_000,
        }
    }
}

/// What a kind of field accepts: the largest unit it may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    /// The largest unit accepted (`ms` up to this one).
    pub largest: Unit,
}

/// The rule in one sentence, for the help of commands whose flags take a
/// [`Units::FLAGS`] duration (`after_help`).
pub const FLAGS_HELP: &str = "DURATION: a number with its unit, e.g. 250ms, 90s, 10m, 1h30m, 1.5h (units ms, s, m, h). \
A number alone (90) is refused; only 0 may be written without a unit.";

/// [`FLAGS_HELP`] for [`Units::TRACE`] durations, which may be days.
pub const TRACE_HELP: &str = "DURATION: a number with its unit, e.g. 250ms, 90s, 10m, 1h30m, 1.5h, 7d (units ms, s, m, h, d). \
A number alone (90) is refused; only 0 may be written without a unit.";

impl Units {
    /// Flags and environment variables of `sluice controller`, `webhook`
    /// and `bench`, API fields and annotations: `ms` to `h`.
    pub const FLAGS: Units = Units { largest: Unit::Hours };

    /// `sluice simulate`'s and `trace record`'s flags and scenario files,
    /// `kubectl sluice usage --since`: `ms` to `d`.
    pub const TRACE: Units = Units { largest: Unit::Days };

    fn accepted(self) -> impl Iterator<Item = Unit> {
        Unit::ALL.into_iter().filter(move |u| *u <= self.largest)
    }

    fn list(self) -> String {
        self.accepted().map(Unit::symbol).collect::<Vec<_>>().join(", ")
    }
}

/// A duration that could not be read: `"<text>": <reason>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {reason}")]
pub struct DurationError {
    /// The text as written (trimmed).
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a duration by the rule in the [module docs](self): `<number><unit>`
/// parts (`90s`, `2h30m`, `1.5h`), or `0`. Surrounding whitespace is
/// ignored; a fraction finer than a nanosecond is dropped.
///
/// ```
/// use std::time::Duration;
/// use sluice_api::duration::{Units, parse};
/// assert_eq!(parse("2h30m", Units::FLAGS), Ok(Duration::from_secs(9_000)));
/// assert_eq!(parse("0", Units::FLAGS), Ok(Duration::ZERO));
/// assert_eq!(
///     parse("90", Units::FLAGS).unwrap_err().to_string(),
///     "\"90\": needs a unit, e.g. 90s or 90m (units ms, s, m, h; only 0 may be written without one)"
/// );
/// assert!(parse("5d", Units::FLAGS).is_err());
/// ```
pub fn parse(text: &str, units: Units) -> Result<Duration, DurationError> {
    let s = text.trim();
    let fail = |reason: String| DurationError {
        text: s.to_string(),
        reason,
    };
    if s.is_empty() {
        return Err(fail("is empty".into()));
    }
    if s.contains(char::is_whitespace) {
        return Err(fail(format!(
            "write it without spaces, with units {} (e.g. 90s, 2h30m)",
            units.list()
        )));
    }
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(end);
        if number.is_empty() {
            let negative = if rest.starts_with('-') {
                ": durations are non-negative"
            } else {
                ""
            };
            return Err(fail(format!(
                "expected a number at {rest:?} (e.g. 90s, 2h30m, 150ms){negative}"
            )));
        }
        let unit_end = after.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after.len());
        let (symbol, after) = after.split_at(unit_end);
        let unit = if symbol.is_empty() && is_zero(number) && number.len() == s.len() {
            Unit::Seconds
        } else if symbol.is_empty() && number.len() == s.len() {
            scaled(number, Unit::Millis).map_err(|e| fail(e.unwrap_or_else(|| "too large".into())))?;
            return Err(fail(format!(
                "needs a unit, e.g. {number}s or {number}m (units {}; only 0 may be written without one)",
                units.list()
            )));
        } else if symbol.is_empty() {
            return Err(fail(format!("{number} needs a unit ({})", units.list())));
        } else {
            units
                .accepted()
                .find(|u| u.symbol() == symbol)
                .ok_or_else(|| fail(format!("unknown unit {symbol:?} (use {})", units.list())))?
        };
        let nanos = scaled(number, unit).map_err(|e| fail(e.unwrap_or_else(|| "too large".into())))?;
        total = total.checked_add(nanos).ok_or_else(|| fail("too large".into()))?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| fail("too large".into()))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Whether `number` is written as zero (`0`, `0.0`, `.0`).
fn is_zero(number: &str) -> bool {
    number.chars().any(|c| c.is_ascii_digit()) && number.chars().all(|c| c == '0' || c == '.')
}

/// `number` (digits with at most one `.`) of `unit`, in nanoseconds.
/// `Err(None)` when too large, `Err(Some(reason))` when not a number.
fn scaled(number: &str, unit: Unit) -> Result<u128, Option<String>> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(Some(format!("bad number {number:?}")));
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| None)?
    };
    // Digits past the 18th are below a nanosecond of any unit (at most 1 d).
    let frac = &frac[..frac.len().min(18)];
    let frac_nanos = if frac.is_empty() {
        0
    } else {
        let digits: u128 = frac.parse().map_err(|_| None)?;
        digits * unit.nanos() / 10u128.pow(frac.len() as u32)
    };
    int.checked_mul(unit.nanos())
        .and_then(|n| n.checked_add(frac_nanos))
        .ok_or(None)
}

/// [`parse`] with [`Units::FLAGS`], the error as text: the `value_parser`
/// of duration flags.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse(s, Units::FLAGS).map_err(|e| e.to_string())
}

/// Milliseconds as the controller counts them (`i64`), saturating.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn huge_durations_are_errors_or_saturate_not_overflows() {
        let max = u64::MAX.to_string();
        assert_eq!(
            parse_duration(&format!("{max}m")),
            Err(format!("\"{max}m\": too large"))
        );
        assert_eq!(
            parse_duration(&format!("{max}h")),
            Err(format!("\"{max}h\": too large"))
        );
        assert_eq!(parse_duration(&format!("{max}s")), Ok(Duration::from_secs(u64::MAX)));
        assert!(parse_duration("99999999999999999999999s").is_err());
        assert_eq!(millis(Duration::from_secs(u64::MAX)), i64::MAX);
        assert_eq!(millis(Duration::from_secs(60)), 60_000);
    }

    #[test]
    fn a_number_needs_its_unit_everywhere_but_zero() {
        for units in [Units::FLAGS, Units::TRACE] {
            for text in ["90", "1.5", "250", " 7 "] {
                let e = parse(text, units).unwrap_err();
                assert!(e.reason.starts_with("needs a unit, e.g. "), "{text}: {e}");
            }
            for text in ["0", "0.0", " 0 ", "0s", "0ms"] {
                assert_eq!(parse(text, units), Ok(Duration::ZERO), "{text}");
            }
        }
        assert_eq!(
            parse("90", Units::FLAGS).unwrap_err().reason,
            "needs a unit, e.g. 90s or 90m (units ms, s, m, h; only 0 may be written without one)"
        );
        // Written with a unit, the same text means the same everywhere.
        for text in ["90s", "2h30m", "1.5h", "1m30s500ms", "250ms"] {
            assert_eq!(parse(text, Units::FLAGS), parse(text, Units::TRACE), "{text}");
        }
        assert_eq!(parse("1d", Units::TRACE), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn the_help_names_the_units_each_kind_accepts() {
        for (help, units) in [(FLAGS_HELP, Units::FLAGS), (TRACE_HELP, Units::TRACE)] {
            assert!(help.contains(&format!("(units {})", units.list())), "{help}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let reason = |text: &str| parse(text, Units::TRACE).unwrap_err().reason;
        assert_eq!(reason(" "), "is empty");
        assert!(reason("6 hours").starts_with("write it without spaces"));
        assert!(reason("-5s").contains("non-negative"));
        assert!(reason("5m3").contains("3 needs a unit"));
        assert!(reason("1.2.3s").contains("bad number"));
        assert_eq!(reason("5w"), "unknown unit \"w\" (use ms, s, m, h, d)");
        assert_eq!(
            parse("5d", Units::FLAGS).unwrap_err().to_string(),
            "\"5d\": unknown unit \"d\" (use ms, s, m, h)"
        );
    }
}
