//! The notice rule, one row per case.

use super::*;

const START: i64 = 1_000_000;

/// What the row says; now; the notice's seconds; the acknowledgement's
/// time; where the notice stands.
type Case = (&'static str, i64, Option<u32>, Option<i64>, Notice);

#[test]
fn where_a_notice_stands() {
    let cases: &[Case] = &[
        (
            "no notice configured: suspended at once",
            START,
            None,
            None,
            Notice::None,
        ),
        (
            "no notice configured, even with an acknowledgement",
            START,
            None,
            Some(START),
            Notice::None,
        ),
        (
            "just begun",
            START,
            Some(300),
            None,
            Notice::Running {
                deadline_ms: START + 300_000,
            },
        ),
        (
            "a millisecond before the deadline",
            START + 299_999,
            Some(300),
            None,
            Notice::Running {
                deadline_ms: START + 300_000,
            },
        ),
        (
            "at the deadline: expired",
            START + 300_000,
            Some(300),
            None,
            Notice::Expired,
        ),
        (
            "long after the deadline",
            START + 10_000_000,
            Some(300),
            None,
            Notice::Expired,
        ),
        (
            "acknowledged early",
            START + 20_000,
            Some(300),
            Some(START + 15_000),
            Notice::Acknowledged,
        ),
        (
            "acknowledged the moment it began",
            START,
            Some(300),
            Some(START),
            Notice::Acknowledged,
        ),
        (
            "an acknowledgement from before the notice began does not count",
            START + 20_000,
            Some(300),
            Some(START - 1),
            Notice::Running {
                deadline_ms: START + 300_000,
            },
        ),
        (
            "a stale acknowledgement does not count after the deadline either: expired",
            START + 300_000,
            Some(300),
            Some(START - 60_000),
            Notice::Expired,
        ),
        (
            "acknowledged after the deadline: over either way",
            START + 400_000,
            Some(300),
            Some(START + 350_000),
            Notice::Acknowledged,
        ),
    ];
    for (what, now, secs, acked, want) in cases {
        assert_eq!(notice_state(*now, START, *secs, *acked), *want, "{what}");
    }
}

#[test]
fn a_notice_cannot_overflow() {
    assert_eq!(
        notice_state(i64::MAX - 1, i64::MAX - 10, Some(3600), None),
        Notice::Running { deadline_ms: i64::MAX }
    );
}

#[test]
fn acknowledgements_are_rfc3339_times() {
    assert_eq!(ack_time("1970-01-01T00:16:40Z"), Some(1_000_000));
    assert_eq!(ack_time(" 1970-01-01T01:16:40+01:00 "), Some(1_000_000));
    assert_eq!(ack_time("1970-01-01T00:16:40.5Z"), Some(1_000_500));
    for bad in ["", "true", "yes", "1000000", "2026-13-01T00:00:00Z"] {
        assert_eq!(ack_time(bad), None, "{bad:?}");
    }
}

#[test]
fn deadlines_are_written_in_rfc3339_seconds() {
    assert_eq!(rfc3339(1_000_999), "1970-01-01T00:16:40Z");
    assert_eq!(ack_time(&rfc3339(START + 300_000)), Some(START + 300_000));
}
