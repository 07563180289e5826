//! The run's bookkeeping: each workload's life (where it is, [`State`];
//! its record for the report; the quota it holds; how long it has waited
//! and for what, [`WaitClock`]) and, kept in step with it, each
//! ClusterQueue's usage and counts ([`Queues`]): a workload's transition
//! updates its queue.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use sluice_scheduler::{Admission, Explanation};

use super::checkpoint::Victim;
use super::queues::{Held, Queues};
use super::{Run, RunEnd, Scenario, WorkloadRecord, index_of};
use crate::placement::WaitClock;
use crate::units::Millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    NotArrived,
    Pending,
    Admitted,
    Evicting,
    Done,
}

/// The book of every workload of the scenario, by index.
pub(super) struct Book {
    pub(super) records: Vec<WorkloadRecord>,
    state: Vec<State>,
    /// Bumped at each admission and eviction: an event of an older epoch
    /// is stale.
    epoch: Vec<u32>,
    /// Work each workload has kept from runs cut short (checkpoints).
    kept: Vec<Millis>,
    held: Vec<Vec<Held>>,
    pub(super) waits: WaitClock,
    /// Workloads that will never run again (finished, rejected,
    /// deactivated).
    pub(super) done: usize,
    pub(super) queues: Queues,
    /// Serving objects removed while evicted: they leave once their pods
    /// are gone.
    removing: std::collections::BTreeSet<usize>,
}

impl Book {
    /// Every workload not yet arrived, its record naming the ClusterQueue
    /// of its LocalQueue.
    pub(super) fn new(scenario: &Scenario) -> Self {
        let lq_to_cq: HashMap<&str, &str> = (scenario.local_queues.iter())
            .map(|lq| (lq.key.as_str(), lq.cluster_queue.as_str()))
            .collect();
        let n = scenario.workloads.len();
        let records = (scenario.workloads.iter())
            .map(|w| WorkloadRecord {
                cluster_queue: Arc::from(lq_to_cq.get(w.local_queue.as_str()).copied().unwrap_or("")),
                runs: Vec::new(),
                preempted: 0,
                evicted: 0,
                rejected: None,
                last_pending: None,
                deactivated: false,
                removed: false,
            })
            .collect();
        Book {
            records,
            state: vec![State::NotArrived; n],
            epoch: vec![0; n],
            kept: vec![0; n],
            held: vec![Vec::new(); n],
            waits: WaitClock::new(n),
            done: 0,
            queues: Queues::new(&scenario.cluster_queues),
            removing: Default::default(),
        }
    }

    /// Whether an event of epoch `e` about workload `i` still applies: `i`
    /// is in `state` and nothing happened to it since the event was made.
    pub(super) fn is_current(&self, i: usize, e: u32, state: State) -> bool {
        self.epoch[i] == e && self.state[i] == state
    }

    pub(super) fn is_admitted(&self, i: usize) -> bool {
        self.state[i] == State::Admitted
    }

    /// `i` arrived at `t`: it waits in its queue.
    pub(super) fn pending(&mut self, i: usize, t: Millis) {
        self.state[i] = State::Pending;
        self.waits.pending(i, t);
        self.queues.pending_added(&self.records[i].cluster_queue);
    }

    /// The engine refused `i` at its arrival.
    pub(super) fn rejected(&mut self, i: usize, why: String) {
        self.state[i] = State::Done;
        self.done += 1;
        self.records[i].rejected = Some(why);
    }

    /// `i` was admitted at `t` (`a`): it holds its quota in its queue.
    /// Returns the epoch of this admission.
    pub(super) fn admitted(&mut self, i: usize, t: Millis, a: &Admission) -> Result<u32> {
        let (held, flavors) = self.queues.admit(a)?;
        self.epoch[i] += 1;
        self.state[i] = State::Admitted;
        self.waits.admitted(i, t);
        self.held[i].extend(held);
        let record = &mut self.records[i];
        record.cluster_queue = a.cluster_queue.clone();
        record.runs.push(Run {
            admitted_at: t,
            started_at: None,
            ended_at: None,
            end: RunEnd::Running,
            ran_on_ms: 0,
            kept_ms: 0,
            borrowing: a.borrowing,
            flavors,
        });
        record.last_pending = None;
        Ok(self.epoch[i])
    }

    /// `i`'s pods started at `t`.
    pub(super) fn started(&mut self, i: usize, t: Millis) {
        let run = self.records[i].runs.last_mut().expect("admitted workload has a run");
        run.started_at = Some(t);
    }

    /// `i` ran to its end at `t`: its quota is free. Returns when its pods
    /// had started.
    pub(super) fn finished(&mut self, i: usize, t: Millis) -> Option<Millis> {
        let run = self.records[i].runs.last_mut().expect("admitted workload has a run");
        run.ended_at = Some(t);
        run.end = RunEnd::Finished;
        let started = run.started_at;
        self.queues.release(&mut self.held[i]);
        self.queues.admitted_removed(&self.records[i].cluster_queue);
        self.state[i] = State::Done;
        self.done += 1;
        started
    }

    /// Work `i` has left to do, of `duration`.
    pub(super) fn left(&self, i: usize, duration: Millis) -> Millis {
        (duration - self.kept[i]).max(0)
    }

    /// When `i`'s current run started, if it has.
    pub(super) fn run_started(&self, i: usize) -> Option<Millis> {
        self.records[i].runs.last().and_then(|r| r.started_at)
    }

    /// `i`'s run ends at `t` (`why`), and its eviction begins, the run
    /// going on for `victim.runs_on` and keeping `victim.kept` of its
    /// work; returns the epoch of this eviction.
    pub(super) fn evicting(&mut self, i: usize, why: RunEnd, t: Millis, victim: Victim) -> u32 {
        self.epoch[i] += 1;
        self.state[i] = State::Evicting;
        self.kept[i] += victim.kept;
        let record = &mut self.records[i];
        if let Some(run) = record.runs.last_mut() {
            run.ended_at = Some(t);
            run.end = why;
            run.ran_on_ms = victim.runs_on;
            run.kept_ms = victim.kept;
        }
        match why {
            RunEnd::Evicted => record.evicted += 1,
            RunEnd::Preempted => record.preempted += 1,
            _ => {}
        }
        self.queues.admitted_removed(&record.cluster_queue);
        self.epoch[i]
    }

    /// `i`'s pods are gone at `t`: its quota is free, and it waits in its
    /// queue again.
    pub(super) fn requeued(&mut self, i: usize, t: Millis) {
        self.queues.release(&mut self.held[i]);
        self.pending(i, t);
    }

    /// Where `i` stands.
    pub(super) fn state(&self, i: usize) -> State {
        self.state[i]
    }

    /// Serving object `i` is removed while it is evicted: it leaves once
    /// its pods are gone.
    pub(super) fn remove_when_gone(&mut self, i: usize) {
        self.removing.insert(i);
    }

    /// Whether `i` leaves once its pods are gone ([`Book::remove_when_gone`]).
    pub(super) fn removing(&self, i: usize) -> bool {
        self.removing.contains(&i)
    }

    /// Serving object `i` was removed: its quota (if it held any) is free,
    /// and it is out of its queue.
    pub(super) fn removed(&mut self, i: usize) {
        self.queues.release(&mut self.held[i]);
        self.removing.remove(&i);
        self.records[i].removed = true;
        if self.state[i] == State::Pending {
            self.queues.pending_removed(&self.records[i].cluster_queue);
        }
        self.state[i] = State::Done;
        self.done += 1;
    }

    /// `i`'s pods are gone: its quota is free, and it is out of its queue
    /// for good (deactivated by idle reclaim).
    pub(super) fn deactivated(&mut self, i: usize) {
        self.queues.release(&mut self.held[i]);
        self.records[i].deactivated = true;
        self.state[i] = State::Done;
        self.done += 1;
    }

    /// The engine's new reasons why workloads wait, from `t`.
    pub(super) fn explained(&mut self, changed: &[(Arc<str>, Arc<Explanation>)], t: Millis) {
        for (uid, explanation) in changed {
            if let Some(i) = index_of(uid) {
                self.records[i].last_pending = Some(sluice_convert::text::explanation(explanation));
                self.waits.explained(i, t, explanation);
            }
        }
    }

    /// Anything still admitted when events ran out cannot happen (every
    /// admission schedules its finish), but keep the record honest.
    pub(super) fn close_running(&mut self) {
        for (i, s) in self.state.iter().enumerate() {
            if *s == State::Admitted
                && let Some(run) = self.records[i].runs.last_mut()
            {
                run.end = RunEnd::Running;
            }
        }
    }
}
