//! The preemption notice rule, pure: where a notice stands at a time,
//! given when it began, how long it is, and when the job said it had saved
//! its state.

use k8s_openapi::jiff::Timestamp;

/// Where a preemption notice stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// No notice is given (the victim's ClusterQueue sets none): the
    /// victim is suspended at once.
    None,
    /// The victim runs until `deadline_ms`, unless it acknowledges first.
    Running { deadline_ms: i64 },
    /// The deadline passed: the victim is suspended.
    Expired,
    /// The victim acknowledged (its state is saved): it is suspended
    /// before the deadline.
    Acknowledged,
}

/// Where a notice of `notice_secs` that began at `start_ms` stands at
/// `now_ms`, the job having written an acknowledgement with the time
/// `acked_at_ms`. Only an acknowledgement at or after the notice began
/// counts: one left from an earlier preemption must not skip this notice.
/// An acknowledgement only ever shortens a notice.
pub fn notice_state(now_ms: i64, start_ms: i64, notice_secs: Option<u32>, acked_at_ms: Option<i64>) -> Notice {
    let Some(secs) = notice_secs else {
        return Notice::None;
    };
    if acked_at_ms.is_some_and(|at| at >= start_ms) {
        return Notice::Acknowledged;
    }
    let deadline_ms = deadline(start_ms, secs);
    if now_ms >= deadline_ms {
        Notice::Expired
    } else {
        Notice::Running { deadline_ms }
    }
}

/// The end of a notice of `secs` that began at `start_ms`.
pub fn deadline(start_ms: i64, secs: u32) -> i64 {
    start_ms.saturating_add(i64::from(secs).saturating_mul(1000))
}

/// The time an acknowledgement annotation states (RFC 3339), in epoch
/// milliseconds; `None` when it is not a time (it acknowledges nothing).
pub fn ack_time(value: &str) -> Option<i64> {
    value.trim().parse::<Timestamp>().ok().map(|t| t.as_millisecond())
}

/// Epoch milliseconds as RFC 3339 (seconds precision, UTC), as the notice
/// annotation and condition state the deadline.
pub fn rfc3339(ms: i64) -> String {
    Timestamp::from_millisecond(ms.div_euclid(1000).saturating_mul(1000))
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
mod tests;
