//! Stop policies: `Hold` (on a ClusterQueue or a LocalQueue) admits
//! nothing new, preemptors included; `HoldAndDrain` also evicts what the
//! queue admitted, reported by the next cycle. A budget's `Stop`
//! ([`super::budget`]) holds the queue as `Hold` does.

use std::sync::Arc;

use crate::decision::{Eviction, EvictionReason, Explanation};
use crate::model::StopPolicy;

use super::state::State;
use super::{CqId, Engine, WlId};

impl Engine {
    #[inline(always)]
    pub(super) fn held(&self, cq: CqId, id: WlId) -> Option<Arc<Explanation>> {
        if self.queues.cqs[cq].spec.stop_policy != StopPolicy::None {
            return Some(self.memo.held_expl[0].clone());
        }
        if let Some(spent) = self.budget_stopped(cq) {
            return Some(spent);
        }
        if self.queues.stopped_local_queues == 0 {
            return None;
        }
        let lq = self.queues.lqs.get(&self.wl(id).lq)?;
        (lq.stop_policy != StopPolicy::None).then(|| self.memo.held_expl[1].clone())
    }

    /// Evicts every admitted workload of a queue (or of one of its local queues).
    pub(super) fn drain(&mut self, cq: CqId, lq: Option<Arc<str>>) {
        let ids: Vec<WlId> = self.queues.cqs[cq]
            .admitted
            .iter()
            .copied()
            .filter(|&v| !self.foreign_id(v) && lq.as_ref().is_none_or(|l| self.wl(v).lq == *l))
            .collect();
        let (reason, queue) = match &lq {
            None => (EvictionReason::ClusterQueueStopped, self.queues.cqs[cq].name.clone()),
            Some(l) => (EvictionReason::LocalQueueStopped, l.clone()),
        };
        for v in ids {
            if self.start_eviction(v).is_ok() {
                self.turn.buffered_evictions.push(Eviction {
                    uid: self.wl(v).uid.clone(),
                    reason,
                    queue: queue.clone(),
                });
            }
        }
        let claims: Vec<WlId> = self
            .claims
            .preempting
            .iter()
            .map(|k| k.id)
            .filter(|&p| {
                matches!(&self.wl(p).state, State::Preempting(h) if h.cq == cq)
                    && lq.as_ref().is_none_or(|l| self.wl(p).lq == *l)
            })
            .collect();
        for p in claims {
            self.drop_claim(p);
        }
    }
}
