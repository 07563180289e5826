//! The write queue and its lanes. Admissions first: a plan's [`Lane`]
//! decides when it may be written.
//!
//! - [`Lane::State`]: admissions, evictions, requeues, Job start/suspend,
//!   Workload creation, deactivation, pods-ready. Written in order, each
//!   as soon as the client-side limit (`--kube-qps`) gives a token.
//! - [`Lane::Bookkeeping`]: the `Finished` state of a workload whose owner
//!   finished it (quota is released in the engine at once; the write only
//!   records it), queue status, reports. Latest wins per workload or queue.
//! - [`Lane::Explanation`]: pending explanations. Latest wins per workload;
//!   also capped by `--explain-qps`.
//!
//! The two lazy lanes (bookkeeping before explanations) are written only
//! while the state lane is empty, and only from *spare* budget: tokens the
//! bucket holds beyond a reserve kept for the state changes that come next
//! (see [`super::drain`]). A lazy plan replaced by a newer one, or dropped
//! because a state change of its workload supersedes it, is handed back to
//! the caller and counted in `sluice_dropped_writes_total{lane}`.

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
    pub const ALL: [Lane; 3] = [Lane::State, Lane::Bookkeeping, Lane::Explanation];

    /// The lane of a plan.
    pub fn of(purpose: &Purpose) -> Lane {
        match purpose {
            Purpose::Pending { .. } => Lane::Explanation,
            Purpose::Finish { .. } | Purpose::QueueStatus | Purpose::Report => Lane::Bookkeeping,
            Purpose::CreateWorkload
            | Purpose::Admit { .. }
            | Purpose::Evict { .. }
            | Purpose::Requeue { .. }
            | Purpose::ConfirmPodsGone { .. }
            | Purpose::Deactivate { .. }
            | Purpose::PodsReady { .. }
            | Purpose::SuspendJob
            | Purpose::StartJob { .. } => Lane::State,
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

#[derive(Default)]
struct QueueState {
    urgent: VecDeque<Plan>,
    bookkeeping: Latest,
    explanations: Latest,
    reports: u64,
    epoch: u64,
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
        | Purpose::Requeue { uid }
        | Purpose::ConfirmPodsGone { uid }
        | Purpose::Finish { uid }
        | Purpose::Deactivate { uid }
        | Purpose::PodsReady { uid }
        | Purpose::Pending { uid }
        | Purpose::StartJob { uid } => Some(uid),
        Purpose::CreateWorkload | Purpose::SuspendJob | Purpose::Report | Purpose::QueueStatus => None,
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
                    // A queued bookkeeping write of the workload writes its
                    // whole status as the index has it then: it stays.
                    superseded.extend(q.explanations.insert(uid, plan));
                }
                (Lane::Bookkeeping, Some(uid)) => {
                    superseded.extend(q.explanations.remove(&uid));
                    superseded.extend(q.bookkeeping.insert(uid, plan));
                }
                (Lane::Bookkeeping, None) => {
                    let key = match (&plan.purpose, plan.steps.first()) {
                        (Purpose::QueueStatus, Some(Step::ApplyQueueStatus { queue, .. })) => {
                            format!("\u{0}queue-{queue}")
                        }
                        _ => {
                            q.reports += 1;
                            format!("\u{0}report-{}", q.reports)
                        }
                    };
                    superseded.extend(q.bookkeeping.insert(key, plan));
                }
                (_, uid) => {
                    if let Some(uid) = uid {
                        superseded.extend(q.explanations.remove(&uid));
                        superseded.extend(q.bookkeeping.remove(&uid));
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

    /// The lane of the next lazy plan and the API writes it makes (what it
    /// needs from the budget), while no state change waits.
    pub fn next_lazy(&self) -> Option<(Lane, u32)> {
        let mut q = self.lock();
        if !q.urgent.is_empty() {
            return None;
        }
        let writes = |p: &Plan| p.steps.iter().filter(|s| s.is_budgeted()).count() as u32;
        if let Some(p) = q.bookkeeping.front() {
            return Some((Lane::Bookkeeping, writes(p)));
        }
        q.explanations.front().map(|p| (Lane::Explanation, writes(p)))
    }

    /// The next plan of a lazy lane.
    pub fn pop_lazy(&self, lane: Lane) -> Option<(u64, Plan)> {
        let mut q = self.lock();
        let epoch = q.epoch;
        let plan = match lane {
            Lane::State => q.urgent.pop_front(),
            Lane::Bookkeeping => q.bookkeeping.pop(),
            Lane::Explanation => q.explanations.pop(),
        };
        plan.map(|p| (epoch, p))
    }

    /// The next plan in lane order, ignoring budgets (tests look at the
    /// order this way; [`super::drain`] pops per lane).
    #[cfg(test)]
    pub fn pop(&self) -> Option<(u64, Plan)> {
        Lane::ALL.into_iter().find_map(|lane| self.pop_lazy(lane))
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
        q.urgent.len() + q.bookkeeping.len() + q.explanations.len()
    }

    /// Plans waiting in one lane.
    #[cfg(test)]
    pub fn lane_len(&self, lane: Lane) -> usize {
        let q = self.lock();
        match lane {
            Lane::State => q.urgent.len(),
            Lane::Bookkeeping => q.bookkeeping.len(),
            Lane::Explanation => q.explanations.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until something may have been queued.
    pub async fn wait(&self) {
        self.ready.notified().await;
    }
}
