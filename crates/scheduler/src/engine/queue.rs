//! Queues and waking: a pending workload goes into the ClusterQueue its
//! LocalQueue points at, or waits *unresolved* with the reason it cannot;
//! a queue whose chances changed is *woken*, and only dirty queues are
//! visited by the next cycle.

use crate::decision::{Explanation, PendingReason};
use crate::model::QueueingStrategy;

use super::{CqId, Engine, WlId};

impl Engine {
    /// Puts a pending workload into its ClusterQueue, or parks it as
    /// unresolved with the reason.
    pub(super) fn enqueue(&mut self, id: WlId) {
        // Back in a queue, a partially admitted workload asks for all its pods.
        self.restore_full(id);
        let lq_key = self.wl(id).lq.clone();
        let target = match self.queues.lqs.get(&lq_key) {
            None => Err(PendingReason::LocalQueueMissing {
                local_queue: lq_key.to_string(),
            }),
            Some(lq) => match self.queues.cq_by_name.get(lq.cluster_queue.as_str()) {
                Some(&cq) if !self.queues.cqs[cq].deleted => Ok(cq),
                _ => Err(PendingReason::ClusterQueueMissing {
                    cluster_queue: lq.cluster_queue.clone(),
                }),
            },
        };
        match target {
            Ok(cq) => {
                self.workloads.unresolved.remove(&id);
                let key = self.wl(id).key(id);
                let wl = self.wl_mut(id);
                wl.cq = Some(cq);
                wl.shaped = false;
                self.queues.cqs[cq].waiting.insert_pending(key);
                self.turn.dirty.insert(cq);
                if self.queues.cqs[cq].spec.strategy == QueueingStrategy::StrictFifo {
                    // The head may be parked: it must be looked at (and block)
                    // before a newcomer behind it.
                    self.queues.cqs[cq].waiting.woken = true;
                }
            }
            Err(reason) => {
                self.workloads.unresolved.insert(id);
                self.note(id, Explanation::new(reason));
            }
        }
    }

    /// Takes a pending workload out of its queue.
    pub(super) fn unqueue(&mut self, id: WlId) {
        let key = self.wl(id).key(id);
        if let Some(cq) = self.wl(id).cq {
            let shape = self.wl(id).shape;
            let q = &mut self.queues.cqs[cq];
            q.waiting.remove_pending(&key, shape);
            if q.spec.strategy == QueueingStrategy::StrictFifo {
                self.wake_queue(cq);
            }
        }
        let wl = self.wl_mut(id);
        wl.cq = None;
        wl.shaped = false;
        self.workloads.unresolved.remove(&id);
    }

    pub(super) fn resolve_unresolved(&mut self) {
        if self.workloads.unresolved.is_empty() {
            return;
        }
        let ids: Vec<WlId> = self.workloads.unresolved.iter().copied().collect();
        for id in ids {
            self.enqueue(id);
        }
    }

    pub(super) fn wake_queue(&mut self, cq: CqId) {
        self.queues.cqs[cq].waiting.woken = true;
        self.turn.dirty.insert(cq);
    }

    pub(super) fn wake_domain(&mut self, cq: CqId) {
        let members: Vec<CqId> = self.domain(cq).collect();
        for m in members {
            self.wake_queue(m);
        }
    }

    pub(super) fn wake_all(&mut self) {
        for cq in 0..self.queues.cqs.len() {
            self.wake_queue(cq);
        }
    }
}
