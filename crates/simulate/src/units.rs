//! Durations and virtual time.
//!
//! Virtual time is an integer count of milliseconds since the start of the
//! simulation ([`Millis`], the engine's own type). Durations in a trace are
//! written the way people write them: `90s`, `2h30m`, `1.5h`, `200ms`, or a
//! bare number of milliseconds.

pub use sluice_scheduler::Millis;

/// Parses a duration: one or more `<number><unit>` parts with units `ms`,
/// `s`, `m`, `h` and `d` (`2h30m`, `1.5s`), or a bare non-negative number of
/// milliseconds (`250`). The result is rounded to whole milliseconds.
pub fn parse_duration(text: &str) -> Result<Millis, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(ms) = s.parse::<f64>() {
        return ms_from_f64(ms, text);
    }
    if s.contains(char::is_whitespace) {
        return Err(format!(
            "invalid duration {text:?}: write it without spaces, with units ms, s, m, h, d (e.g. 90s, 2h30m)"
        ));
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total = 0.0f64;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        if start == i {
            return Err(format!(
                "invalid duration {text:?}: expected a number at {:?} (use e.g. 90s, 2h30m, 150ms)",
                &s[start..]
            ));
        }
        let number: f64 = s[start..i]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: bad number {:?}", &s[start..i]))?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let scale = match &s[unit_start..i] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            "" => {
                return Err(format!(
                    "invalid duration {text:?}: {number} needs a unit (ms, s, m, h, d)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h, d)"
                ));
            }
        };
        total += number * scale;
    }
    ms_from_f64(total, text)
}

fn ms_from_f64(ms: f64, text: &str) -> Result<Millis, String> {
    if !ms.is_finite() || ms < 0.0 {
        return Err(format!("invalid duration {text:?}: must be a non-negative time"));
    }
    if ms > 1e15 {
        return Err(format!("invalid duration {text:?}: too large"));
    }
    Ok(ms.round() as Millis)
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
        assert_eq!(parse_duration("250"), Ok(250));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration(" 0s "), Ok(0));
    }

    #[test]
    fn rejects_nonsense_with_a_reason() {
        assert!(parse_duration("").unwrap_err().contains("empty"));
        assert!(parse_duration("10").is_ok());
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
