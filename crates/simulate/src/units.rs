//! Durations and virtual time.
//!
//! Virtual time is an integer count of milliseconds since the start of the
//! simulation ([`Millis`], the engine's own type). Durations in a trace are
//! read by the one duration rule of the project ([`sluice_api::duration`]):
//! `90s`, `2h30m`, `1.5h`, `200ms`, `1d`; a number needs its unit, only `0`
//! goes without one.

use sluice_api::duration::{self, Units};
pub use sluice_scheduler::Millis;

/// The longest duration a trace may give: 10^15 ms (about 31 700 years).
const MAX_MS: u128 = 1_000_000_000_000_000;

/// Parses a trace duration by [`duration::parse`] with [`Units::TRACE`]:
/// `<number><unit>` parts (`2h30m`, `1.5s`, `250ms`) or `0`. The result is
/// rounded to whole milliseconds.
pub fn parse_duration(text: &str) -> Result<Millis, String> {
    let d = duration::parse(text, Units::TRACE).map_err(|e| format!("invalid duration {e}"))?;
    let ms = (d.as_nanos() + 500_000) / 1_000_000;
    if ms > MAX_MS {
        return Err(format!("invalid duration {:?}: too large", text.trim()));
    }
    Ok(ms as Millis)
}

/// Formats virtual milliseconds compactly for people: `0s`, `850ms`, `12.5s`,
/// `4m05s`, `2h30m`, `1d02h`.
pub fn format_duration(ms: Millis) -> String {
    if ms < 0 {
        return format!("-{}", format_duration(-ms));
    }
    if ms < 1_000 {
        return if ms == 0 { "0s".into() } else { format!("{ms}ms") };
    }
    if ms < 60_000 {
        let tenths = (ms + 50) / 100;
        return if tenths % 10 == 0 {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        };
    }
    let secs = (ms + 500) / 1_000;
    if secs < 3_600 {
        return format!("{}m{:02}s", secs / 60, secs % 60);
    }
    let mins = (ms + 30_000) / 60_000;
    if mins < 24 * 60 {
        return format!("{}h{:02}m", mins / 60, mins % 60);
    }
    let hours = (ms + 1_800_000) / 3_600_000;
    format!("{}d{:02}h", hours / 24, hours % 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_spellings() {
        assert_eq!(parse_duration("90s"), Ok(90_000));
        assert_eq!(parse_duration("2h30m"), Ok(9_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000));
        assert_eq!(parse_duration("200ms"), Ok(200));
        assert_eq!(parse_duration("1m30s500ms"), Ok(90_500));
        assert_eq!(parse_duration("1d"), Ok(86_400_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration(" 0s "), Ok(0));
    }

    #[test]
    fn rejects_nonsense_with_a_reason() {
        assert!(parse_duration("").unwrap_err().contains("empty"));
        assert!(
            parse_duration("250")
                .unwrap_err()
                .contains("needs a unit, e.g. 250s or 250m")
        );
        assert!(parse_duration("10x").unwrap_err().contains("unknown unit \"x\""));
        assert!(parse_duration("h").unwrap_err().contains("expected a number"));
        assert!(parse_duration("-5s").unwrap_err().contains("expected a number"));
        assert!(parse_duration("-5").unwrap_err().contains("non-negative"));
        assert!(parse_duration("5m3").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("6 hours").unwrap_err().contains("without spaces"));
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_duration(0), "0s");
        assert_eq!(format_duration(850), "850ms");
        assert_eq!(format_duration(12_500), "12.5s");
        assert_eq!(format_duration(30_000), "30s");
        assert_eq!(format_duration(245_000), "4m05s");
        assert_eq!(format_duration(9_000_000), "2h30m");
        assert_eq!(format_duration(93_600_000), "1d02h");
    }
}
