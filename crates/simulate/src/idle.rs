//! Idle-GPU reclaim (`ClusterQueue.spec.idleReclaim`) in virtual time.
//!
//! Every `interval` of virtual time (the Trace's `spec.idleInterval`, or
//! `--idle-interval`, default 1 minute; checks fall on multiples of it), each
//! admitted workload that is watched is judged by the controller's rule
//! ([`sluice_scheduler::idle::IdleWindow`]) on samples taken from its
//! utilisation profile ([`crate::trace::Utilization`]) one `interval` apart
//! over the policy's window, then, if it is idle, by contention
//! ([`Engine::waiting_for_quota_of`]) when the policy asks for it, then
//! acted on.
//!
//! A workload is *watched* while it is admitted into a ClusterQueue with a
//! policy, requests a GPU resource and has a profile (without one it is
//! busy all along). All of a workload's pods follow its one profile, so the
//! rule is given one series for the workload (the verdict for N identical
//! pods is the same). Samples exist from the moment its pods started;
//! before that there is nothing to judge. Checks are only scheduled while
//! something is watched: a scenario without `idleReclaim` runs exactly as
//! before.
//!
//! Actions: `Warn` changes nothing and is counted once per idle stretch
//! (as the controller writes `GPUIdle=True` once, and again only after the
//! workload was found busy); `Evict` and `Deactivate` wait out the queue's
//! `minRuntimeSeconds` from admission, then evict through the simulator's
//! usual eviction path (one API write, pods gone after the eviction delay,
//! work lost). An evicted workload requeues and starts over, profile
//! included; a deactivated one leaves the engine when its pods are gone and
//! never runs again.
//!
//! A workload idle again in every run would be evicted for ever (as in a
//! cluster), so, as the controller's `--requeue-limit`, the eviction after
//! the workload's `requeue_limit`-th idle requeue deactivates it instead.
//! Unlike the controller's, the limit always exists: a simulation must end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use sluice_api::resources::is_gpu;
use sluice_api::v1alpha1::{IdleAction, IdlePolicy};
use sluice_scheduler::Engine;
use sluice_scheduler::idle::{IdleWindow, Idleness, PodSamples, Sample};
use sluice_scheduler::reclaim::{self, IdleFacts, Reclaim};

use crate::sim::{Run, Scenario, WorkloadRecord, index_of, uid_of};
use crate::trace::{TraceWorkload, Utilization};
use crate::units::Millis;

/// Idle evictions of one workload that requeue it, when the options do not
/// say: the next one deactivates it.
pub const DEFAULT_REQUEUE_LIMIT: u32 = 10;

/// One idle workload acted on.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleEvent {
    /// Index into the trace's workloads.
    pub workload: usize,
    pub cluster_queue: Arc<str>,
    pub at: Millis,
    pub action: IdleAction,
    /// The pending workload (index) that waited for its quota (`None`
    /// when the policy does not ask, `onlyWhenContended: false`).
    pub waiter: Option<usize>,
    /// Mean utilisation over the window, percent.
    pub mean_percent: f64,
    /// An `Evict` turned into `Deactivate` by the requeue limit.
    pub over_requeue_limit: bool,
}

/// What idle reclaim did in a run, for the report.
#[derive(Debug, Clone)]
pub struct IdleOutcome {
    /// Time between checks.
    pub interval: Millis,
    /// The policies, by ClusterQueue.
    pub policies: BTreeMap<String, IdlePolicy>,
    /// Warnings, evictions and deactivations, in time order.
    pub events: Vec<IdleEvent>,
    /// Per workload, its time to (latest) admission in the same scenario
    /// run again without any `idleReclaim`; `None` when no queue has one.
    pub baseline_waits: Option<Vec<Option<Millis>>>,
}

#[derive(Clone, Copy)]
struct Rule {
    policy: IdlePolicy,
    min_runtime: Millis,
}

struct Watch {
    rule: Rule,
    cluster_queue: Arc<str>,
    warned: bool,
}

impl Watch {
    /// The mean GPU use of `w`'s pods over the rule's window at `t`, when
    /// the rule finds them idle (`step`: the check interval, between
    /// `samples`). `None`: not running yet or finishing now, warming up,
    /// busy (a new idle stretch warns again) or unknown.
    fn idle_mean(
        &mut self,
        t: Millis,
        w: &TraceWorkload,
        profile: &Utilization,
        run: &Run,
        step: Millis,
        samples: &mut Vec<Sample>,
    ) -> Option<f64> {
        // Not started yet (no pods to measure), or finishing at this instant.
        let started = run.started_at.filter(|s| s.saturating_add(w.duration) > t)?;
        let p = self.rule.policy;
        let not_before = run.admitted_at.saturating_add(p.grace_period_ms);
        if t.saturating_sub(p.window_ms) < not_before {
            return None; // warming up: the rule would say so too
        }
        let rule = IdleWindow {
            below_percent: f64::from(p.utilization_below),
            window_ms: p.window_ms,
            step_ms: step,
        };
        fill_samples(samples, profile, started, t, p.window_ms, step);
        let pods = [PodSamples {
            pod: &w.name,
            samples: Some(&*samples),
        }];
        match rule.judge(t, not_before, &pods) {
            Idleness::Idle { mean_percent, .. } => Some(mean_percent),
            Idleness::Busy { .. } => {
                self.warned = false; // GPUIdle=False: a new idle stretch warns again
                None
            }
            Idleness::Unknown(_) => None,
        }
    }

    /// What the policy does about an idle workload (`facts`), and whether
    /// it is past the requeue limit; `None`: hold.
    fn action(&mut self, facts: &IdleFacts) -> Option<(IdleAction, bool)> {
        match reclaim::decide(sluice_convert::reclaim_policy(&self.rule.policy), facts) {
            Reclaim::Hold(_) => None,
            Reclaim::Warn => {
                self.warned = true;
                Some((IdleAction::Warn, false))
            }
            Reclaim::Evict => Some((IdleAction::Evict, false)),
            Reclaim::Deactivate { over_requeue_limit } => Some((IdleAction::Deactivate, over_requeue_limit)),
        }
    }
}

/// The reclaimer's state during one run.
pub struct Reclaimer {
    interval: Millis,
    requeue_limit: u32,
    /// Idle evictions so far, per workload.
    evictions: HashMap<usize, u32>,
    rules: HashMap<String, Rule>,
    watched: BTreeMap<usize, Watch>,
    due: Option<Millis>,
    deactivated: BTreeSet<usize>,
    events: Vec<IdleEvent>,
}

impl Reclaimer {
    /// `None` when no ClusterQueue has a policy: nothing is ever checked.
    pub fn new(scenario: &Scenario, interval: Millis, requeue_limit: u32) -> Option<Self> {
        if scenario.idle_reclaim.is_empty() {
            return None;
        }
        let rules = scenario
            .cluster_queues
            .iter()
            .filter_map(|cq| {
                let policy = *scenario.idle_reclaim.get(&cq.name)?;
                Some((
                    cq.name.clone(),
                    Rule {
                        policy,
                        min_runtime: cq.min_runtime,
                    },
                ))
            })
            .collect();
        Some(Self {
            interval: interval.max(1),
            requeue_limit,
            evictions: HashMap::new(),
            rules,
            watched: BTreeMap::new(),
            due: None,
            deactivated: BTreeSet::new(),
            events: Vec::new(),
        })
    }

    /// When the next check is due, if anything is watched.
    pub fn due(&self) -> Option<Millis> {
        self.due
    }

    /// Workload `i` was admitted into `cluster_queue` at `t`.
    pub fn admitted(&mut self, i: usize, w: &TraceWorkload, cluster_queue: &Arc<str>, t: Millis) {
        let Some(rule) = self.rules.get(&**cluster_queue) else {
            return;
        };
        if w.utilization.is_none() || !requests_gpus(w) {
            return;
        }
        self.watched.insert(
            i,
            Watch {
                rule: *rule,
                cluster_queue: cluster_queue.clone(),
                warned: false,
            },
        );
        if self.due.is_none() {
            self.due = Some((t / self.interval + 1) * self.interval);
        }
    }

    /// Workload `i` stopped running (finished, preempted, evicted).
    pub fn released(&mut self, i: usize) {
        self.watched.remove(&i);
        if self.watched.is_empty() {
            self.due = None;
        }
    }

    /// Whether `i` was deactivated: it leaves the engine once evicted.
    pub fn is_deactivated(&self, i: usize) -> bool {
        self.deactivated.contains(&i)
    }

    /// The check at `t`: the workloads to evict now (`Evict` or
    /// `Deactivate`). Warnings are only recorded.
    pub fn check(
        &mut self,
        t: Millis,
        engine: &Engine,
        workloads: &[TraceWorkload],
        records: &[WorkloadRecord],
    ) -> Vec<usize> {
        self.due = None;
        let mut evict = Vec::new();
        let mut samples: Vec<Sample> = Vec::new();
        for (&i, watch) in self.watched.iter_mut() {
            let w = &workloads[i];
            let (Some(run), Some(profile)) = (records[i].runs.last(), &w.utilization) else {
                continue;
            };
            let Some(mean_percent) = watch.idle_mean(t, w, profile, run, self.interval, &mut samples) else {
                continue;
            };
            // Who waits for its quota, asked only when the policy needs it.
            let p = watch.rule.policy;
            let waiting = p.only_when_contended.then(|| engine.waiting_for_quota_of(&uid_of(i)));
            let waiter = waiting.clone().flatten().and_then(|uid| index_of(&uid));
            let facts = IdleFacts {
                now: t,
                contended: waiting.is_some_and(|w| w.is_some()),
                warned: watch.warned,
                admitted_at: run.admitted_at,
                min_runtime_ms: watch.rule.min_runtime,
                idle_evictions: self.evictions.get(&i).copied().unwrap_or(0),
                requeue_limit: Some(self.requeue_limit),
            };
            let Some((action, over_requeue_limit)) = watch.action(&facts) else {
                continue;
            };
            if action != IdleAction::Warn {
                *self.evictions.entry(i).or_default() += 1;
                if action == IdleAction::Deactivate {
                    self.deactivated.insert(i);
                }
                evict.push(i);
            }
            self.events.push(IdleEvent {
                workload: i,
                cluster_queue: watch.cluster_queue.clone(),
                at: t,
                action,
                waiter,
                mean_percent,
                over_requeue_limit,
            });
        }
        if !self.watched.is_empty() {
            self.due = Some(t + self.interval);
        }
        evict
    }

    /// What happened, for [`IdleOutcome::events`].
    pub fn into_events(self) -> Vec<IdleEvent> {
        self.events
    }
}

/// Whether a workload requests any GPU resource (as the report counts GPUs).
pub fn requests_gpus(w: &TraceWorkload) -> bool {
    w.pod_sets
        .iter()
        .any(|ps| ps.requests.iter().any(|(r, &a)| a > 0 && is_gpu(r)))
}

/// Samples of `profile` for pods started at `started`, one every `step`
/// back from `end` over the window (and half a step before it), none
/// before the pods started; in time order.
fn fill_samples(
    out: &mut Vec<Sample>,
    profile: &Utilization,
    started: Millis,
    end: Millis,
    window: Millis,
    step: Millis,
) {
    out.clear();
    let from = end.saturating_sub(window).saturating_sub(step / 2).max(started);
    let mut at = end;
    while at >= from {
        out.push((at, f64::from(profile.at(at - started))));
        at -= step;
    }
    out.reverse();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::profile::Segment;

    const MIN: Millis = 60_000;

    #[test]
    fn samples_cover_the_window_from_the_pods_start() {
        let u = Utilization::new(vec![
            Segment {
                percent: 80,
                for_ms: Some(20 * MIN),
            },
            Segment {
                percent: 0,
                for_ms: None,
            },
        ])
        .unwrap();
        let mut s = Vec::new();
        // Started at 10m; the window 35m..65m, one sample a minute.
        fill_samples(&mut s, &u, 10 * MIN, 65 * MIN, 30 * MIN, MIN);
        assert_eq!(s.len(), 31);
        assert_eq!(s[0], (35 * MIN, 0.0));
        assert_eq!(s[30], (65 * MIN, 0.0));
        // Started at 50m: nothing before it.
        fill_samples(&mut s, &u, 50 * MIN, 65 * MIN, 30 * MIN, MIN);
        assert_eq!(s.first(), Some(&(50 * MIN, 80.0)));
        assert_eq!(s.len(), 16);
    }
}
