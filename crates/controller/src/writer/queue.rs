//! The write queue and its lanes. Admissions first: a plan's [`Lane`]
//! decides when it may be written.
//!
//! - [`Lane::State`]: admissions, evictions, requeues, Job start/suspend,
//!   Workload creation, deactivation, pods-ready, and the `Finished` write
//!   of a workload that held quota (its Jobs finished): the quota is reused
//!   by admissions queued after it, so the Workloads never show more
//!   admitted than the quota. Written in order, each as soon as the
//!   client-side limit (`--kube-qps`) gives a token.
//! - [`Lane::Bookkeeping`]: queue status and reports (latest wins per
//!   queue), and the `status.state` of a workload whose owner wrote its
//!   `Finished` condition (the API shows it finished already; the write
//!   only follows it). Latest wins per workload or queue.
//! - [`Lane::Explanation`]: pending explanations. Latest wins per workload.
//!
//! The lazy lanes are written from budget the state lane leaves unused
//! (while it is empty) or from their own small share (`--explain-qps`),
//! also in the gaps while a state change waits for its token (see
//! [`super::drain`]). They take turns, so that a backlog of one (hundreds
//! of finished states, which the index hands out a bounded number at a
//! time) never starves the others: queue status and reports,
//! explanations, finished states. A lazy plan replaced by a newer one, or dropped because a state change of its
//! workload supersedes it, is handed back to the caller and counted in
//! `sluice_dropped_writes_total{lane}`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use crate::plan::{Plan, Purpose, Step};

/// When a plan may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    State,
    Bookkeeping,
    Explanation,
}

impl Lane {
    /// The lane of a plan.
    pub fn of(purpose: &Purpose) -> Lane {
        match purpose {
            Purpose::Pending { .. } => Lane::Explanation,
            Purpose::Finish { .. } | Purpose::QueueStatus | Purpose::Report | Purpose::IdleGpu { .. } => {
                Lane::Bookkeeping
            }
            Purpose::CreateWorkload
            | Purpose::Admit { .. }
            | Purpose::Evict { .. }
            | Purpose::Notice { .. }
            | Purpose::Requeue { .. }
            | Purpose::Release { .. }
            | Purpose::RetireGang { .. }
            | Purpose::Reshape { .. }
            | Purpose::ConfirmPodsGone { .. }
            | Purpose::Deactivate { .. }
            | Purpose::PodsReady { .. }
            | Purpose::SuspendJob
            | Purpose::StartJob { .. }
            | Purpose::GpuQuota => Lane::State,
        }
    }

    /// Label of `sluice_dropped_writes_total{lane}` and logs.
    pub fn label(self) -> &'static str {
        match self {
            Lane::State => "state",
            Lane::Bookkeeping => "bookkeeping",
            Lane::Explanation => "explanation",
        }
    }
}

/// Plans waiting to be written, so that the loop never waits on the API.
#[derive(Default)]
pub struct WriteQueue {
    state: Mutex<QueueState>,
    ready: tokio::sync::Notify,
}

/// A lazy queue: where a lazy plan waits for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lazy {
    /// Queue status and reports (bookkeeping).
    Queues,
    /// Pending explanations.
    Explanations,
    /// `Finished` states (bookkeeping).
    Finished,
}

impl Lazy {
    const TURNS: [Lazy; 3] = [Lazy::Queues, Lazy::Explanations, Lazy::Finished];

    fn index(self) -> usize {
        match self {
            Lazy::Queues => 0,
            Lazy::Explanations => 1,
            Lazy::Finished => 2,
        }
    }
}

#[derive(Default)]
struct QueueState {
    urgent: VecDeque<Plan>,
    /// By [`Lazy::index`].
    lazy: [Latest; 3],
    /// The lazy queue whose turn is next.
    turn: usize,
    reports: u64,
    epoch: u64,
}

impl QueueState {
    fn lazy(&mut self, which: Lazy) -> &mut Latest {
        &mut self.lazy[which.index()]
    }

    /// The requeue of a workload without a Job (nothing to stop) is queued
    /// while its eviction's status write still waits: that write is
    /// dropped (returned as a plan of its own), since the requeue writes
    /// the whole status, evicted and requeued, in one write at its later
    /// place in the lane. The eviction's Events stay. Quota stays safe:
    /// the API sees the release no earlier than before, and everything
    /// admitted with that quota is queued after the requeue.
    fn merge_eviction(&mut self, uid: &str) -> Option<Plan> {
        let evict = self.urgent.iter_mut().find(|p| {
            matches!(&p.purpose, Purpose::Evict { uid: u } if u == uid)
                && !p
                    .steps
                    .iter()
                    .any(|s| matches!(s, Step::PatchJob { .. } | Step::PatchJobStatus { .. }))
        })?;
        let at = evict
            .steps
            .iter()
            .position(|s| matches!(s, Step::ApplyWorkloadStatus { .. }))?;
        Some(Plan {
            purpose: evict.purpose.clone(),
            steps: vec![evict.steps.remove(at)],
        })
    }

    /// Drops the queued lazy plans of a workload (a newer write of it
    /// supersedes them).
    fn remove_lazy(&mut self, uid: &str, out: &mut Vec<Plan>) {
        for which in [Lazy::Explanations, Lazy::Finished] {
            out.extend(self.lazy(which).remove(uid));
        }
    }
}

/// Plans by key, latest wins, in the order their keys were first queued.
#[derive(Default)]
struct Latest {
    plans: BTreeMap<String, Plan>,
    order: VecDeque<String>,
}

impl Latest {
    fn insert(&mut self, key: String, plan: Plan) -> Option<Plan> {
        let old = self.plans.insert(key.clone(), plan);
        if old.is_none() {
            self.order.push_back(key);
        }
        old
    }

    fn remove(&mut self, key: &str) -> Option<Plan> {
        // Its key stays in `order` and is skipped when reached.
        self.plans.remove(key)
    }

    fn pop(&mut self) -> Option<Plan> {
        while let Some(key) = self.order.pop_front() {
            if let Some(p) = self.plans.remove(&key) {
                return Some(p);
            }
        }
        None
    }

    fn front(&mut self) -> Option<&Plan> {
        while let Some(key) = self.order.front() {
            if self.plans.contains_key(key) {
                return self.plans.get(key);
            }
            self.order.pop_front();
        }
        None
    }

    fn len(&self) -> usize {
        self.plans.len()
    }
}

fn plan_uid(p: &Plan) -> Option<&str> {
    match &p.purpose {
        Purpose::Admit { uid }
        | Purpose::Evict { uid }
        | Purpose::Notice { uid }
        | Purpose::Requeue { uid }
        | Purpose::RetireGang { uid }
        | Purpose::Reshape { uid }
        | Purpose::ConfirmPodsGone { uid }
        | Purpose::Finish { uid }
        | Purpose::Release { uid }
        | Purpose::Deactivate { uid }
        | Purpose::PodsReady { uid }
        | Purpose::Pending { uid }
        | Purpose::StartJob { uid } => Some(uid),
        // Not keyed by workload: a warning must not replace its `Finished`.
        Purpose::IdleGpu { .. }
        | Purpose::CreateWorkload
        | Purpose::SuspendJob
        | Purpose::Report
        | Purpose::QueueStatus
        | Purpose::GpuQuota => None,
    }
}

impl WriteQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a plan; returns the queued plans it supersedes (the index
    /// must hear of a status write that will not be made).
    #[must_use = "a superseded plan must be reported to the index"]
    pub fn push(&self, plan: Plan) -> Vec<Plan> {
        let mut superseded = Vec::new();
        {
            let mut q = self.lock();
            let uid = plan_uid(&plan).map(str::to_owned);
            match (Lane::of(&plan.purpose), uid) {
                (Lane::Explanation, Some(uid)) => {
                    // A queued `Finished` state of the workload is another
                    // field: it stays.
                    superseded.extend(q.lazy(Lazy::Explanations).insert(uid, plan));
                }
                (Lane::Bookkeeping, Some(uid)) => {
                    // A finished workload needs no explanation.
                    superseded.extend(q.lazy(Lazy::Explanations).remove(&uid));
                    superseded.extend(q.lazy(Lazy::Finished).insert(uid, plan));
                }
                (_, None) if Lane::of(&plan.purpose) != Lane::State => {
                    let key = match (&plan.purpose, plan.steps.first()) {
                        (Purpose::QueueStatus, Some(Step::ApplyQueueStatus { queue, .. })) => {
                            format!("\u{0}queue-{queue}")
                        }
                        _ => {
                            q.reports += 1;
                            format!("\u{0}report-{}", q.reports)
                        }
                    };
                    superseded.extend(q.lazy(Lazy::Queues).insert(key, plan));
                }
                (_, uid) => {
                    if let Some(uid) = uid {
                        q.remove_lazy(&uid, &mut superseded);
                    }
                    if let Purpose::Requeue { uid } = &plan.purpose {
                        superseded.extend(q.merge_eviction(uid));
                    }
                    q.urgent.push_back(plan);
                }
            }
        }
        self.ready.notify_one();
        superseded
    }

    /// The next state change, with the epoch it was queued in.
    pub fn pop_state(&self) -> Option<(u64, Plan)> {
        let mut q = self.lock();
        let epoch = q.epoch;
        q.urgent.pop_front().map(|p| (epoch, p))
    }

    /// The lazy queue whose turn it is (the next non-empty one from the
    /// turn on) and the API writes its next plan makes (what it needs from
    /// the budget), while no state change waits.
    pub fn next_lazy(&self) -> Option<(Lazy, u32)> {
        if !self.lock().urgent.is_empty() {
            return None;
        }
        self.peek_lazy()
    }

    /// [`WriteQueue::next_lazy`], whether or not a state change waits.
    pub fn peek_lazy(&self) -> Option<(Lazy, u32)> {
        let mut q = self.lock();
        let writes = |p: &Plan| p.steps.iter().filter(|s| s.is_budgeted()).count() as u32;
        let turn = q.turn;
        (0..Lazy::TURNS.len())
            .map(|i| Lazy::TURNS[(turn + i) % Lazy::TURNS.len()])
            .find_map(|which| q.lazy(which).front().map(|p| (which, writes(p))))
    }

    /// The next plan of a lazy queue; the turn passes to the queue after it.
    pub fn pop_lazy(&self, which: Lazy) -> Option<(u64, Plan)> {
        let mut q = self.lock();
        let epoch = q.epoch;
        let plan = q.lazy(which).pop()?;
        q.turn = (which.index() + 1) % Lazy::TURNS.len();
        Some((epoch, plan))
    }

    /// The next plan, state changes first, then the lazy queues in turn,
    /// ignoring budgets (tests look at the order this way).
    #[cfg(test)]
    pub fn pop(&self) -> Option<(u64, Plan)> {
        if let Some(p) = self.pop_state() {
            return Some(p);
        }
        let (which, _) = self.next_lazy()?;
        self.pop_lazy(which)
    }

    /// Forgets everything queued (leadership lost) and starts a new epoch:
    /// feedback about plans of an earlier epoch is for an index that is gone.
    pub fn clear(&self) {
        let mut q = self.lock();
        let epoch = q.epoch + 1;
        *q = QueueState::default();
        q.epoch = epoch;
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    pub fn len(&self) -> usize {
        let q = self.lock();
        q.urgent.len() + q.lazy.iter().map(Latest::len).sum::<usize>()
    }

    /// Plans waiting in one lane.
    #[cfg(test)]
    pub fn lane_len(&self, lane: Lane) -> usize {
        let mut q = self.lock();
        match lane {
            Lane::State => q.urgent.len(),
            Lane::Bookkeeping => q.lazy(Lazy::Queues).len() + q.lazy(Lazy::Finished).len(),
            Lane::Explanation => q.lazy(Lazy::Explanations).len(),
        }
    }

    /// State changes waiting (the writer's backlog of decisions).
    pub fn state_len(&self) -> usize {
        self.lock().urgent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until something may have been queued.
    pub async fn wait(&self) {
        self.ready.notified().await;
    }
}

#[cfg(test)]
mod tests;
