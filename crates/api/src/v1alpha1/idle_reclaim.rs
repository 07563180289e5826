//! `ClusterQueue.spec.idleReclaim`: what the controller does with admitted
//! GPU workloads whose GPUs sit idle (measured from DCGM metrics in
//! Prometheus), and the rules that keep it safe.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::{self, Units};
use crate::validation::Violations;

/// Default `utilizationBelow`: a GPU under 10 % is idle.
pub const DEFAULT_UTILIZATION_BELOW: i32 = 10;
/// Default `for`: idle for 30 minutes.
pub const DEFAULT_WINDOW: &str = "30m";
/// Default `gracePeriod`: nothing is judged in its first 15 minutes.
pub const DEFAULT_GRACE_PERIOD: &str = "15m";
/// The shortest `for` accepted: Prometheus needs a few scrapes to tell.
pub const MIN_WINDOW: Duration = Duration::from_secs(10);
/// Schema pattern of a duration field (`30m`, `1h30m`, `90s`, or `0`: a
/// number needs its unit, [`crate::duration`]).
pub const DURATION_PATTERN: &str = "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$|^0$";

/// Idle-GPU reclaim policy of a ClusterQueue. Absent: off.
///
/// A workload admitted through this queue is **idle** when every GPU pod
/// of it reported a utilisation below `utilizationBelow` for the whole of
/// the last `for`, and that window began after `gracePeriod` from its
/// admission. Missing data is never idle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdleReclaim {
    /// Utilisation, in percent, under which a GPU counts as idle (1–100).
    #[serde(default = "default_utilization_below")]
    #[schemars(range(min = 1, max = 100))]
    pub utilization_below: i32,
    /// How long every GPU pod must stay below the threshold, e.g. `30m`.
    /// At least 10s; units `ms`, `s`, `m`, `h` (a number needs its unit).
    #[serde(rename = "for", default = "default_window")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub window: String,
    /// `Warn` (default): condition `GPUIdle` on the Workload and an event on
    /// its job. `Evict`: evicted with reason `IdleGPU` and requeued with
    /// backoff. `Deactivate`: `spec.active` set to false (evicted, not
    /// requeued until someone sets it back).
    #[serde(default)]
    pub action: IdleAction,
    /// `true` (default): act only while some workload waits for quota this
    /// workload holds. `false`: act on every idle workload.
    #[serde(default = "default_true")]
    pub only_when_contended: bool,
    /// Time after admission during which nothing is judged (warm-up, data
    /// loading), e.g. `15m`. Units as for `for`.
    #[serde(default = "default_grace_period")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub grace_period: String,
}

impl Default for IdleReclaim {
    fn default() -> Self {
        Self {
            utilization_below: DEFAULT_UTILIZATION_BELOW,
            window: DEFAULT_WINDOW.into(),
            action: IdleAction::default(),
            only_when_contended: true,
            grace_period: DEFAULT_GRACE_PERIOD.into(),
        }
    }
}

/// What happens to an idle workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum IdleAction {
    /// Condition `GPUIdle` on the Workload, an event on its job.
    #[default]
    Warn,
    /// Evicted (reason `IdleGPU`) and requeued with backoff.
    Evict,
    /// `spec.active: false`: evicted and kept out of the queue.
    Deactivate,
}

impl IdleAction {
    /// As written in the API (`Warn`, `Evict`, `Deactivate`), also the
    /// `action` label of the reclaim metric.
    pub fn as_str(self) -> &'static str {
        match self {
            IdleAction::Warn => "Warn",
            IdleAction::Evict => "Evict",
            IdleAction::Deactivate => "Deactivate",
        }
    }
}

/// A policy with its durations read: what the controller and the simulator
/// apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Idle below this utilisation, in percent.
    pub utilization_below: i32,
    /// Window, in milliseconds.
    pub window_ms: i64,
    /// What to do.
    pub action: IdleAction,
    /// Act only while someone waits for this workload's quota.
    pub only_when_contended: bool,
    /// Grace after admission, in milliseconds.
    pub grace_period_ms: i64,
}

impl IdleReclaim {
    /// The policy with durations read, or the first field that is wrong
    /// (`validate` reports them all).
    pub fn policy(&self) -> Result<IdlePolicy, String> {
        let mut v = Violations::default();
        let p = self.read(&mut v, "spec.idleReclaim");
        match p {
            Some(p) if v.0.is_empty() => Ok(p),
            _ => Err(v
                .0
                .first()
                .map(ToString::to_string)
                .unwrap_or_else(|| "spec.idleReclaim: invalid".into())),
        }
    }

    /// Adds every violation under `path` to `v`.
    pub(crate) fn validate_into(&self, v: &mut Violations, path: &str) {
        let _ = self.read(v, path);
    }

    fn read(&self, v: &mut Violations, path: &str) -> Option<IdlePolicy> {
        if !(1..=100).contains(&self.utilization_below) {
            v.push(
                format!("{path}.utilizationBelow"),
                format!("must be a percentage from 1 to 100, got {}", self.utilization_below),
            );
        }
        let window = read_duration(v, &format!("{path}.for"), &self.window);
        if let Some(w) = window
            && w < MIN_WINDOW
        {
            v.push(
                format!("{path}.for"),
                format!(
                    "must be at least {}s (Prometheus needs several scrapes to tell), got {:?}",
                    MIN_WINDOW.as_secs(),
                    self.window
                ),
            );
        }
        let grace = read_duration(v, &format!("{path}.gracePeriod"), &self.grace_period);
        Some(IdlePolicy {
            utilization_below: self.utilization_below,
            window_ms: millis(window?),
            action: self.action,
            only_when_contended: self.only_when_contended,
            grace_period_ms: millis(grace?),
        })
    }
}

fn read_duration(v: &mut Violations, path: &str, text: &str) -> Option<Duration> {
    match duration::parse(text, Units::FLAGS) {
        Ok(d) => Some(d),
        Err(e) => {
            v.push(path, format!("expected a duration such as 30m, 1h30m or 90s; {e}"));
            None
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn default_utilization_below() -> i32 {
    DEFAULT_UTILIZATION_BELOW
}
fn default_window() -> String {
    DEFAULT_WINDOW.into()
}
fn default_grace_period() -> String {
    DEFAULT_GRACE_PERIOD.into()
}
fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: serde_json::Value) -> Result<IdlePolicy, String> {
        serde_json::from_value::<IdleReclaim>(json).unwrap().policy()
    }

    #[test]
    fn defaults_are_warn_below_ten_percent_for_thirty_minutes_after_fifteen() {
        let p = policy(serde_json::json!({})).unwrap();
        assert_eq!(
            p,
            IdlePolicy {
                utilization_below: 10,
                window_ms: 30 * 60_000,
                action: IdleAction::Warn,
                only_when_contended: true,
                grace_period_ms: 15 * 60_000,
            }
        );
    }

    #[test]
    fn fields_are_read() {
        let p = policy(serde_json::json!({
            "utilizationBelow": 5, "for": "1h30m", "action": "Evict",
            "onlyWhenContended": false, "gracePeriod": "0s"
        }))
        .unwrap();
        assert_eq!(p.utilization_below, 5);
        assert_eq!(p.window_ms, 90 * 60_000);
        assert_eq!(p.action, IdleAction::Evict);
        assert!(!p.only_when_contended);
        assert_eq!(p.grace_period_ms, 0);
    }

    #[test]
    fn every_bad_field_is_named() {
        let spec: IdleReclaim = serde_json::from_value(serde_json::json!({
            "utilizationBelow": 0, "for": "5s", "gracePeriod": "soon"
        }))
        .unwrap();
        let mut v = Violations::default();
        spec.validate_into(&mut v, "spec.idleReclaim");
        let paths: Vec<&str> = v.0.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.idleReclaim.utilizationBelow",
                "spec.idleReclaim.for",
                "spec.idleReclaim.gracePeriod"
            ]
        );
        assert!(v.0[1].message.contains("at least 10s"), "{}", v.0[1]);
        assert!(v.0[2].message.contains("expected a duration"), "{}", v.0[2]);
        assert!(
            spec.policy()
                .unwrap_err()
                .starts_with("spec.idleReclaim.utilizationBelow")
        );
    }

    #[test]
    fn a_cluster_queue_reports_its_policy_violations() {
        use crate::validation::Validate;
        let cq: crate::v1alpha1::ClusterQueue = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"idleReclaim": {"utilizationBelow": 150, "gracePeriod": "-1m"}}
        }))
        .unwrap();
        let paths: Vec<String> = cq.validate().into_iter().map(|v| v.path).collect();
        assert_eq!(
            paths,
            ["spec.idleReclaim.utilizationBelow", "spec.idleReclaim.gracePeriod"]
        );
    }

    #[test]
    fn unknown_action_is_refused_by_serde() {
        let err = serde_json::from_value::<IdleReclaim>(serde_json::json!({"action": "Kill"})).unwrap_err();
        assert!(err.to_string().contains("unknown variant `Kill`"), "{err}");
    }
}
