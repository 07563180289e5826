//! Start-time estimates: when is each pending workload expected to be
//! admitted? [`Engine::forecast`] runs a copy of the engine forward in
//! virtual time with expected run times and reads off the first admission
//! of every workload pending at the call.
//!
//! ```text
//!   copy = engine.clone()                       (the original is not touched)
//!   t = now
//!   loop:
//!     schedule(t)            admitted: start t (first admission only), ends at t + runtime(uid)
//!                            victims and drains: evicted at once, requeued
//!     t = next event         the earliest expected end (an overdue one: now),
//!                            the cycle's next_wakeup (backoffs, protections),
//!                            or t again after evictions
//!     release what ends at t (finish; an eviction under way completes)
//!   until every workload pending at the call has an estimate,
//!   nothing is left to happen, t passes now + horizon, or max_cycles cycles ran
//! ```
//!
//! The estimate is exactly what the engine would do if every run time were
//! as expected and nothing else arrived. It is wrong when run times are
//! (they are rarely known: the controller's rule is an annotation, else the
//! Job's `activeDeadlineSeconds`, else the queue's median), when
//! higher-priority work arrives later and goes first, and by the time
//! evictions really take (the copy evicts instantly).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::engine::{Engine, WorkloadState};
use crate::model::Millis;

/// Expected run time when nothing better is known: no expected-runtime
/// annotation, no `activeDeadlineSeconds`, no run observed in the queue yet.
pub const DEFAULT_EXPECTED_RUNTIME_MS: Millis = 3_600_000;

/// How far [`Engine::forecast`] looks, and how much work it may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForecastSettings {
    /// Admissions later than `now + horizon_ms` are not estimated.
    pub horizon_ms: Millis,
    /// At most this many cycles of the copy (a bound on work).
    pub max_cycles: usize,
}

impl Default for ForecastSettings {
    /// A week ahead, at most 100 000 cycles.
    fn default() -> Self {
        Self {
            horizon_ms: 7 * 24 * 3_600_000,
            max_cycles: 100_000,
        }
    }
}

impl Engine {
    /// Expected admission time of each pending workload (also backing off,
    /// or waiting for its victims), by running a copy of the engine forward.
    ///
    /// - `ends(uid)`: when an admitted (or evicting) workload is expected to
    ///   release its quota, absolute ms. A time at or before `now` means "any
    ///   moment": released at `now`, right after the first cycle (which is
    ///   the cycle the real engine would run at `now`); `None` (unknown):
    ///   never.
    /// - `runtime(uid)`: expected run time of a workload once admitted, ms.
    ///
    /// Returns, for the workloads pending at the call that the copy admits
    /// within the horizon, the time of their first admission (a workload
    /// preempted in the copy and admitted again keeps its first time).
    /// Absent: not admitted within the horizon or `max_cycles` (never fits,
    /// held by a stop policy, or behind work whose end is unknown).
    pub fn forecast(
        &self,
        now: Millis,
        ends: impl Fn(&str) -> Option<Millis>,
        runtime: impl Fn(&str) -> Millis,
        settings: ForecastSettings,
    ) -> BTreeMap<Arc<str>, Millis> {
        self.clone().into_forecast(now, ends, runtime, settings)
    }

    /// [`Engine::forecast`] run on this engine itself, which it uses up: for
    /// a caller that already holds a copy (one copy of a large engine, not
    /// two).
    pub fn into_forecast(
        self,
        now: Millis,
        ends: impl Fn(&str) -> Option<Millis>,
        runtime: impl Fn(&str) -> Millis,
        settings: ForecastSettings,
    ) -> BTreeMap<Arc<str>, Millis> {
        let mut estimates = BTreeMap::new();
        let mut waiting: HashSet<Arc<str>> = HashSet::new();
        let mut releases = Releases::default();
        for (uid, state) in self.workload_states() {
            match state {
                WorkloadState::Pending | WorkloadState::Preempting => {
                    waiting.insert(uid.clone());
                }
                WorkloadState::Admitted | WorkloadState::Evicting => {
                    if let Some(end) = ends(uid) {
                        releases.insert(uid.clone(), end.max(now));
                    }
                }
                WorkloadState::Finished => {}
            }
        }
        if waiting.is_empty() {
            return estimates;
        }
        let limit = now.saturating_add(settings.horizon_ms.max(0));
        let mut copy = self;
        let mut t = now;
        for _ in 0..settings.max_cycles {
            let cycle = copy.schedule(t);
            for a in &cycle.admitted {
                if waiting.remove(&a.uid) {
                    estimates.insert(a.uid.clone(), t);
                }
                releases.insert(a.uid.clone(), t.saturating_add(runtime(&a.uid).max(0)));
            }
            // The copy's evictions are instant: quota is free at once and
            // the victims requeue.
            let mut evicted = false;
            let victims = cycle.preempted.iter().map(|p| &p.victim);
            for uid in victims.chain(cycle.evicted.iter().map(|e| &e.uid)) {
                releases.remove(uid);
                copy.forget_bound_pods(uid);
                evicted |= copy.eviction_complete(uid, t).is_ok();
            }
            if waiting.is_empty() {
                break;
            }
            let wakeup = cycle.next_wakeup.filter(|&w| w >= t);
            let next = [releases.first(), wakeup, evicted.then_some(t)]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|&n| n <= limit) else {
                break;
            };
            t = next;
            for uid in releases.due(t) {
                // Only admitted and evicting workloads have a release.
                match copy.workload_state(&uid) {
                    Some(WorkloadState::Admitted) => {
                        copy.forget_bound_pods(&uid);
                        let _ = copy.finish(&uid);
                    }
                    Some(WorkloadState::Evicting) => {
                        copy.forget_bound_pods(&uid);
                        let _ = copy.eviction_complete(&uid, t);
                    }
                    _ => {}
                }
            }
        }
        estimates
    }
}

/// Expected releases of quota, by time (then UID, for determinism).
#[derive(Default)]
struct Releases {
    by_time: BTreeSet<(Millis, Arc<str>)>,
    of: HashMap<Arc<str>, Millis>,
}

impl Releases {
    fn insert(&mut self, uid: Arc<str>, at: Millis) {
        self.remove(&uid);
        self.by_time.insert((at, uid.clone()));
        self.of.insert(uid, at);
    }

    fn remove(&mut self, uid: &Arc<str>) {
        if let Some(at) = self.of.remove(uid) {
            self.by_time.remove(&(at, uid.clone()));
        }
    }

    fn first(&self) -> Option<Millis> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Takes out every release due at or before `t`, in order.
    fn due(&mut self, t: Millis) -> Vec<Arc<str>> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.by_time.first()
            && *at <= t
        {
            let (_, uid) = self.by_time.pop_first().expect("checked above");
            self.of.remove(&uid);
            out.push(uid);
        }
        out
    }
}
