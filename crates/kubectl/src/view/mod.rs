//! The commands' views: pure functions from a [`crate::Snapshot`] to
//! serializable rows (the `-o json|yaml` schema) and to text.

pub mod queues;
pub mod top;
pub mod usage;
pub mod why;
pub mod workloads;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// A duration as kubectl prints ages: `45s`, `12m`, `3h20m`, `2d5h`.
pub fn short_duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => {
            let (h, m) = (s / 3600, s % 3600 / 60);
            if m == 0 { format!("{h}h") } else { format!("{h}h{m}m") }
        }
        _ => {
            let (d, h) = (s / 86_400, s % 86_400 / 3600);
            if h == 0 { format!("{d}d") } else { format!("{d}d{h}h") }
        }
    }
}

/// Seconds from `t` to `now` (negative: `t` is in the future).
pub fn seconds_since(t: &Time, now: Timestamp) -> i64 {
    now.as_second() - t.0.as_second()
}

/// An estimated start as people read it: `now`, `in 25m`, `overdue 3m`.
pub fn relative_start(t: &Time, now: Timestamp) -> String {
    let ahead = -seconds_since(t, now);
    match ahead {
        i64::MIN..=-60 => format!("overdue {}", short_duration(-ahead)),
        -59..=59 => "now".into(),
        _ => format!("in {}", short_duration(ahead)),
    }
}

/// 1st, 2nd, 3rd, 4th … (positions start at 1, in the API too).
pub fn ordinal(pos: i32) -> String {
    let n = i64::from(pos);
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl_ages() {
        assert_eq!(short_duration(45), "45s");
        assert_eq!(short_duration(12 * 60 + 5), "12m");
        assert_eq!(short_duration(3 * 3600), "3h");
        assert_eq!(short_duration(3 * 3600 + 20 * 60), "3h20m");
        assert_eq!(short_duration(2 * 86_400 + 5 * 3600), "2d5h");
        assert_eq!(short_duration(-5), "0s");
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101]
            .iter()
            .map(|&p| ordinal(p))
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }
}
