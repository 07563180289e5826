//! Start-time estimates in virtual time (`--forecast`): what the controller
//! would publish for a workload when it is submitted, kept to be compared
//! with its actual first admission ([`crate::report::forecast`]).
//!
//! Right after the cycle at a workload's arrival instant, if it is still
//! pending, [`Engine::forecast`] runs on the engine's state with the
//! controller's expected-runtime rule:
//! - the trace's `expectedRuntime` (the `sluice.dev/expected-runtime`
//!   annotation's counterpart; the trace has no `activeDeadlineSeconds`),
//! - else the median run time of the workloads seen to finish so far in
//!   its ClusterQueue (nearest rank: the lower middle of an even count),
//! - else [`DEFAULT_EXPECTED_RUNTIME_MS`] (1 hour).
//!
//! An admitted workload is expected to release its quota at its admission
//! + that expected run time (the forecaster does not know the true one),
//!   an evicting one at any moment (it cannot know when the pods are gone).
//!
//! A second forecast, *with exact run times*, is given every true duration,
//! true end and eviction completion: what remains is the model's own error
//! (work that arrives later, instant evictions in the copy).

use std::collections::HashMap;
use std::sync::Arc;

use sluice_scheduler::{DEFAULT_EXPECTED_RUNTIME_MS, Engine, ForecastSettings, WorkloadState};

use super::{WorkloadRecord, index_of, uid_of};
use crate::trace::TraceWorkload;
use crate::units::Millis;

/// The estimates made for one workload at its submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// With the expected-runtime rule; `None`: not within the horizon.
    pub model: Option<Millis>,
    /// With every run time and end known exactly; `None`: not within it.
    pub exact: Option<Millis>,
}

/// Every workload's estimates, in trace order.
#[derive(Debug, Clone)]
pub struct ForecastOutcome {
    pub settings: ForecastSettings,
    /// `None` for workloads admitted by the first cycle after their arrival (or
    /// refused by the engine): nothing to estimate.
    pub estimates: Vec<Option<Estimate>>,
}

/// What the simulation loop tells the forecaster, and what it keeps.
pub(super) struct Forecaster {
    settings: ForecastSettings,
    /// The ClusterQueue of each workload's LocalQueue.
    queue_of: Vec<Arc<str>>,
    expected: Vec<Option<Millis>>,
    durations: Vec<Millis>,
    /// Run times of the workloads seen to finish, per ClusterQueue, sorted.
    observed: HashMap<Arc<str>, Vec<Millis>>,
    /// Of the latest admission: the cycle's time and when its pods start.
    admitted_at: Vec<Millis>,
    starts_at: Vec<Millis>,
    /// When the eviction under way completes (for exact run times).
    evicted_by: Vec<Millis>,
    /// Arrived at the current instant, not yet looked at.
    arrived: Vec<usize>,
    estimates: Vec<Option<Estimate>>,
}

impl Forecaster {
    pub(super) fn new(workloads: &[TraceWorkload], records: &[WorkloadRecord]) -> Self {
        let n = workloads.len();
        Self {
            settings: ForecastSettings::default(),
            queue_of: records.iter().map(|r| r.cluster_queue.clone()).collect(),
            expected: workloads.iter().map(|w| w.expected_runtime).collect(),
            durations: workloads.iter().map(|w| w.duration).collect(),
            observed: HashMap::new(),
            admitted_at: vec![0; n],
            starts_at: vec![0; n],
            evicted_by: vec![0; n],
            arrived: Vec::new(),
            estimates: vec![None; n],
        }
    }

    pub(super) fn arrived(&mut self, i: usize) {
        self.arrived.push(i);
    }

    /// Admitted by the cycle at `at`; its pods start at `starts_at`.
    pub(super) fn admitted(&mut self, i: usize, at: Millis, starts_at: Millis) {
        self.admitted_at[i] = at;
        self.starts_at[i] = starts_at;
    }

    /// Its eviction started; its quota is free at `done_at`.
    pub(super) fn evicting(&mut self, i: usize, done_at: Millis) {
        self.evicted_by[i] = done_at;
    }

    /// Finished after running `run_time`.
    pub(super) fn finished(&mut self, i: usize, run_time: Millis) {
        let runs = self.observed.entry(self.queue_of[i].clone()).or_default();
        let at = runs.partition_point(|&r| r <= run_time);
        runs.insert(at, run_time);
    }

    /// After the cycle at `now`: estimates the workloads that arrived at
    /// `now` and are still pending.
    pub(super) fn after_cycle(&mut self, engine: &Engine, now: Millis) {
        let pending = |i: &usize| {
            matches!(
                engine.workload_state(&uid_of(*i)),
                Some(WorkloadState::Pending | WorkloadState::Preempting)
            )
        };
        let fresh: Vec<usize> = std::mem::take(&mut self.arrived).into_iter().filter(pending).collect();
        if fresh.is_empty() {
            return;
        }
        let medians: HashMap<&Arc<str>, Millis> = (self.observed.iter())
            .filter(|(_, runs)| !runs.is_empty())
            .map(|(q, runs)| (q, runs[(runs.len() - 1) / 2]))
            .collect();
        let expected = |i: usize| {
            self.expected[i]
                .or_else(|| medians.get(&self.queue_of[i]).copied())
                .unwrap_or(DEFAULT_EXPECTED_RUNTIME_MS)
        };
        let state = |uid: &str| Some((index_of(uid)?, engine.workload_state(uid)?));
        let model = engine.forecast(
            now,
            |uid| match state(uid)? {
                (i, WorkloadState::Admitted) => Some(self.admitted_at[i] + expected(i)),
                (_, WorkloadState::Evicting) => Some(now),
                _ => None,
            },
            |uid| index_of(uid).map_or(DEFAULT_EXPECTED_RUNTIME_MS, expected),
            self.settings,
        );
        let exact = engine.forecast(
            now,
            |uid| match state(uid)? {
                (i, WorkloadState::Admitted) => Some(self.starts_at[i] + self.durations[i]),
                (i, WorkloadState::Evicting) => Some(self.evicted_by[i]),
                _ => None,
            },
            |uid| index_of(uid).map_or(DEFAULT_EXPECTED_RUNTIME_MS, |i| self.durations[i]),
            self.settings,
        );
        for i in fresh {
            let uid = uid_of(i);
            self.estimates[i] = Some(Estimate {
                model: model.get(uid.as_str()).copied(),
                exact: exact.get(uid.as_str()).copied(),
            });
        }
    }

    pub(super) fn into_outcome(self) -> ForecastOutcome {
        ForecastOutcome {
            settings: self.settings,
            estimates: self.estimates,
        }
    }
}
