//! Plain Pods where GPUs are queued. A bare pod has no suspend flag and
//! its spec cannot be changed once it runs, so how one is held depends on
//! the API server:
//!
//! - with pod scheduling gates (Kubernetes 1.27+; 1.26 behind a feature
//!   gate), Kueue's protocol: the webhook adds the gate
//!   [`sluice_api::labels::ADMISSION_GATE`] at create, and at admission
//!   the flavor's node selector and tolerations are written (allowed while
//!   a pod is gated) and the gate removed;
//! - without them (1.24), a bare pod that would wait is refused at create
//!   with how to run it.

/// Whether an API server of this version (`/version`'s `major`, `minor`,
/// as `"1"`, `"27+"`) has pod scheduling gates on by default: 1.27 and
/// later.
pub fn has_scheduling_gates(major: &str, minor: &str) -> bool {
    let num = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
    match (num(major), num(minor)) {
        (Some(1), Some(minor)) => minor >= 27,
        (Some(major), _) => major > 1,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduling_gates_come_with_1_27() {
        assert!(!has_scheduling_gates("1", "24"));
        assert!(!has_scheduling_gates("1", "26"));
        assert!(has_scheduling_gates("1", "27"));
        assert!(has_scheduling_gates("1", "30+"));
        assert!(has_scheduling_gates("2", "0"));
        assert!(!has_scheduling_gates("", ""));
    }
}
