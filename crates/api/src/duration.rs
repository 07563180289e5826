//! Durations as the command line and environment give them.

use std::time::Duration;

/// `90`, `90s`, `10m`, `1h`, `500ms`. A value too large for a
/// [`Duration`] is an error, not an overflow.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number with a unit (s, m, h, ms)"))?;
    let too_large = || format!("{s:?}: too large");
    Ok(match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(too_large)?),
        "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(too_large)?),
        other => return Err(format!("{s:?}: unknown unit {other:?} (s, m, h, ms)")),
    })
}

/// Milliseconds as the index counts them (`i64`), saturating.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
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
}
