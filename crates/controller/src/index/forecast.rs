//! Estimated start times: a copy of the engine run forward
//! ([`sluice_scheduler::Engine::forecast`]) with each workload's expected
//! run time. The rule, in order:
//! 1. the `sluice.dev/expected-runtime` annotation of its object (a Job,
//!    JobSet, …; a gang: the longest of its Jobs');
//! 2. a Job's `spec.activeDeadlineSeconds`;
//! 3. the median run time of the last [`OBSERVED_RUNS`] workloads that
//!    finished in its ClusterQueue (as seen by this process);
//! 4. [`DEFAULT_EXPECTED_RUNTIME_MS`] (1 h).
//!
//! An admitted workload is expected to release its quota at admission +
//! expected run time (at once, if that time has passed).
//! [`Index::forecast_job`] takes what the forecast needs under the index's
//! lock (a copy of the engine); [`ForecastJob::run`] runs without it.

use std::collections::{HashMap, VecDeque};

use sluice_scheduler::forecast::{DEFAULT_EXPECTED_RUNTIME_MS, ForecastSettings};
use sluice_scheduler::{Engine, WorkloadState};

use super::Index;
use super::reference;
use crate::plan::{EventSpec, JobRef, Plan, Purpose, Step};
use sluice_kinds::job::JobView;

/// Run times kept per ClusterQueue for the median.
pub const OBSERVED_RUNS: usize = 101;

/// A forecast to run off the index's lock.
pub struct ForecastJob {
    engine: Engine,
    now_ms: i64,
    /// Admitted workloads: expected release time.
    ends: HashMap<String, i64>,
    /// Pending workloads: expected run time.
    runtimes: HashMap<String, i64>,
}

impl ForecastJob {
    /// Estimated admission time per pending workload (uid), within a week.
    pub fn run(self) -> HashMap<String, i64> {
        let Self {
            engine,
            now_ms,
            ends,
            runtimes,
        } = self;
        engine
            .into_forecast(
                now_ms,
                |uid| ends.get(uid).copied(),
                |uid| runtimes.get(uid).copied().unwrap_or(DEFAULT_EXPECTED_RUNTIME_MS),
                ForecastSettings::default(),
            )
            .into_iter()
            .map(|(uid, t)| (uid.to_string(), t))
            .collect()
    }
}

/// Records a finished workload's run time for its ClusterQueue's median.
pub(super) fn observe_run_time(runs: &mut HashMap<String, VecDeque<i64>>, cluster_queue: &str, ms: i64) {
    let q = runs.entry(cluster_queue.to_string()).or_default();
    if q.len() == OBSERVED_RUNS {
        q.pop_front();
    }
    q.push_back(ms.max(0));
}

fn median(runs: &VecDeque<i64>) -> Option<i64> {
    let mut v: Vec<i64> = runs.iter().copied().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

impl Index {
    /// A malformed `sluice.dev/expected-runtime` annotation: a Warning
    /// event on the object, once per value (the rule falls back to the
    /// next source; nothing else changes).
    pub(super) fn warn_bad_expected_runtime(&mut self, key: &JobRef, view: &JobView) {
        let Err(message) = &view.expected_runtime else { return };
        let seen = self
            .queued
            .jobs
            .get(key)
            .is_some_and(|old| old.expected_runtime == view.expected_runtime);
        if seen {
            return;
        }
        tracing::warn!(object = %key, "{message}");
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: reference(key.kind.api_version(), key.kind.kind(), &key.key, Some(&view.uid)),
                type_: "Warning",
                reason: "InvalidExpectedRuntime".to_string(),
                action: "Estimate",
                note: format!("{message}; start-time estimates use the next source instead"),
            })],
        });
    }

    /// A workload's expected run time by the rule in the module docs.
    fn expected_runtime_ms(&self, wk: &super::ObjKey, cluster_queue: Option<&str>) -> i64 {
        let own = self
            .member_keys(wk)
            .iter()
            .filter_map(|jk| self.queued.jobs.get(jk))
            .filter_map(|j| j.expected_runtime.clone().ok().flatten())
            .max();
        own.or_else(|| median(self.table.run_times.get(cluster_queue?)?))
            .unwrap_or(DEFAULT_EXPECTED_RUNTIME_MS)
    }

    /// What a forecast at `now_ms` needs: a copy of the engine, when each
    /// admitted workload is expected to end, each pending one's run time.
    pub fn forecast_job(&self, now_ms: i64) -> ForecastJob {
        let mut ends = HashMap::new();
        let mut runtimes = HashMap::new();
        for (wk, e) in &self.table.workloads {
            if !e.run.in_engine {
                continue;
            }
            match self.engine.workload_state(&e.uid) {
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    let cq = self.engine.admission(&e.uid).map(|a| a.cluster_queue.to_string());
                    let run = self.expected_runtime_ms(wk, cq.as_deref());
                    let start = e.run.admitted_at.unwrap_or(now_ms);
                    ends.insert(e.uid.clone(), start.saturating_add(run).max(now_ms));
                }
                Some(WorkloadState::Pending | WorkloadState::Preempting) => {
                    let lq = super::ObjKey::new(wk.namespace.clone(), e.observed.queue_name.clone());
                    let cq = self.local_queue_target(&lq).map(str::to_string);
                    runtimes.insert(e.uid.clone(), self.expected_runtime_ms(wk, cq.as_deref()));
                }
                _ => {}
            }
        }
        ForecastJob {
            engine: self.engine.clone(),
            now_ms,
            ends,
            runtimes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_the_last_runs() {
        let mut runs = HashMap::new();
        assert_eq!(runs.get("q").and_then(median), None);
        for ms in [30, 10, 20] {
            observe_run_time(&mut runs, "q", ms);
        }
        assert_eq!(median(&runs["q"]), Some(20));
        for _ in 0..OBSERVED_RUNS {
            observe_run_time(&mut runs, "q", 99);
        }
        assert_eq!(runs["q"].len(), OBSERVED_RUNS);
        assert_eq!(median(&runs["q"]), Some(99), "the oldest runs are forgotten");
    }
}
