//! Read-only views for controllers and reports: a workload's state,
//! explanation, position and admission; a ClusterQueue's usage and counts.

use std::sync::Arc;

use crate::decision::{Admission, Explanation};
use crate::model::Amount;

use super::Engine;
use super::state::State;

/// Usage of one (flavor, resource) in a ClusterQueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceUsage {
    pub flavor: String,
    pub resource: String,
    /// Held by admitted workloads (including ones being evicted).
    pub used: Amount,
    pub nominal: Amount,
    /// Part of `used` above nominal: borrowed from the cohort.
    pub borrowed: Amount,
    /// Reserved by preemptors waiting for their victims.
    pub reserved: Amount,
}

/// A ClusterQueue's counts and usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueUsage {
    pub name: String,
    pub cohort: Option<String>,
    pub pending: usize,
    pub admitted: usize,
    pub resources: Vec<ResourceUsage>,
}

/// A pending workload's place in line (0 is next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePosition {
    pub in_cluster_queue: usize,
    pub in_local_queue: usize,
}

/// A workload's lifecycle state, as seen from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadState {
    Pending,
    /// Waiting for its victims to release quota.
    Preempting,
    Admitted,
    Evicting,
    Finished,
}

impl Engine {
    pub fn workload_state(&self, uid: &str) -> Option<WorkloadState> {
        let id = *self.workloads.by_uid.get(uid)?;
        Some(outside(&self.wl(id).state))
    }

    /// Every workload the engine tracks with its state, in no useful order
    /// (for [`Engine::forecast`]).
    pub(crate) fn workload_states(&self) -> impl Iterator<Item = (&Arc<str>, WorkloadState)> {
        self.workloads
            .wls
            .iter()
            .flatten()
            .map(|wl| (&wl.uid, outside(&wl.state)))
    }

    /// A workload as it was added (pod sets whole); `None` for an unknown
    /// or finished one.
    pub fn workload_spec(&self, uid: &str) -> Option<crate::WorkloadSpec> {
        let pod_sets = self.requested(uid)?;
        let wl = self.wl(*self.workloads.by_uid.get(uid)?);
        Some(crate::WorkloadSpec {
            uid: wl.uid.to_string(),
            name: wl.name.to_string(),
            local_queue: wl.lq.to_string(),
            priority: wl.priority,
            queue_order_time: wl.ts,
            pod_sets,
            expected_runtime: wl.expected_runtime,
        })
    }

    /// The pod sets a workload asks for, whole (before any partial
    /// admission), with requests per pod; `None` for an unknown or
    /// finished one.
    pub fn requested(&self, uid: &str) -> Option<Vec<crate::PodSetSpec>> {
        let wl = self.wl(*self.workloads.by_uid.get(uid)?);
        let pod_sets = wl.full.as_ref().map_or(&wl.pod_sets, |f| &f.0);
        if matches!(wl.state, State::Finished) {
            return None;
        }
        Some(
            pod_sets
                .iter()
                .map(|p| crate::PodSetSpec {
                    name: p.name.to_string(),
                    count: p.count,
                    requests: p
                        .requested()
                        .iter()
                        .map(|&(r, t)| {
                            (
                                self.catalog.resources.name(r).to_string(),
                                t / Amount::from(p.count.max(1)),
                            )
                        })
                        .collect(),
                    node_selector: p.node_selector.clone(),
                    tolerations: p.tolerations.clone(),
                    require_single_domain: p.require_single_domain,
                    min_count: p.min_count,
                })
                .collect(),
        )
    }

    /// The latest explanation of a pending workload, with current numbers.
    pub fn explanation(&self, uid: &str) -> Option<&Explanation> {
        let id = *self.workloads.by_uid.get(uid)?;
        self.current_explanation(id).map(|e| &**e)
    }

    /// Where a pending workload stands in its ClusterQueue and LocalQueue.
    /// Costs O(pending in its ClusterQueue); meant for views, not cycles.
    pub fn position(&self, uid: &str) -> Option<QueuePosition> {
        let id = *self.workloads.by_uid.get(uid)?;
        let wl = self.wl(id);
        let cq = &self.queues.cqs[wl.cq?];
        let key = wl.key(id);
        if !cq.waiting.pending.contains(&key) {
            return None;
        }
        let mut pos = QueuePosition {
            in_cluster_queue: 0,
            in_local_queue: 0,
        };
        for k in cq.waiting.pending.range(..key) {
            pos.in_cluster_queue += 1;
            if self.wl(k.id).lq == wl.lq {
                pos.in_local_queue += 1;
            }
        }
        Some(pos)
    }

    /// UIDs of a ClusterQueue's pending workloads, in queue order.
    pub fn pending_in_order(&self, cluster_queue: &str) -> Vec<Arc<str>> {
        self.queues
            .cq_by_name
            .get(cluster_queue)
            .map(|&id| {
                self.queues.cqs[id]
                    .waiting
                    .pending
                    .iter()
                    .map(|k| k.uid.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Counts and per (flavor, resource) usage of a ClusterQueue.
    pub fn cluster_queue_usage(&self, name: &str) -> Option<QueueUsage> {
        let &id = self.queues.cq_by_name.get(name)?;
        let cq = &self.queues.cqs[id];
        let resources = cq
            .quota
            .slots
            .iter()
            .map(|s| ResourceUsage {
                flavor: self.catalog.flavor_names.name(s.fr.0).to_string(),
                resource: self.catalog.resources.name(s.fr.1).to_string(),
                used: s.usage,
                nominal: s.nominal,
                borrowed: (s.usage - s.nominal).max(0),
                reserved: s.claimed,
            })
            .collect();
        Some(QueueUsage {
            name: name.to_string(),
            cohort: cq.spec.cohort.clone(),
            pending: cq.waiting.pending.len(),
            admitted: cq.admitted.len(),
            resources,
        })
    }

    /// Names of all ClusterQueues, sorted.
    pub fn cluster_queue_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<Arc<str>> = self
            .queues
            .cqs
            .iter()
            .filter(|c| !c.deleted)
            .map(|c| c.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The admission of an admitted (or evicting) workload.
    pub fn admission(&self, uid: &str) -> Option<Admission> {
        let id = *self.workloads.by_uid.get(uid)?;
        match &self.wl(id).state {
            State::Admitted(h) | State::Evicting(h) => Some(Admission {
                uid: self.wl(id).uid.clone(),
                cluster_queue: self.queues.cqs[h.cq].name.clone(),
                pod_sets: h.assignment.clone(),
                borrowing: h.borrowing,
                backfill: None,
            }),
            _ => None,
        }
    }

    /// Number of workloads the engine tracks, in any state.
    pub fn workload_count(&self) -> usize {
        self.workloads.by_uid.len()
    }
}

/// A state as seen from outside (a backoff is pending).
fn outside(state: &State) -> WorkloadState {
    match state {
        State::Pending | State::Backoff(_) => WorkloadState::Pending,
        State::Preempting(_) => WorkloadState::Preempting,
        State::Admitted(_) => WorkloadState::Admitted,
        State::Evicting(_) => WorkloadState::Evicting,
        State::Finished => WorkloadState::Finished,
    }
}
