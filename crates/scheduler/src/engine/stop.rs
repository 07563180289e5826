//! Stop policies: `Hold` (on a ClusterQueue or a LocalQueue) admits
//! nothing new, preemptors included; `HoldAndDrain` also evicts what the
//! queue admitted, reported by the next cycle.

use super::*;

impl Engine {
    #[inline(always)]
    pub(super) fn held(&self, cq: CqId, id: WlId) -> Option<Arc<Explanation>> {
        if self.cqs[cq].spec.stop_policy != StopPolicy::None {
            return Some(self.held_expl[0].clone());
        }
        if self.stopped_local_queues == 0 {
            return None;
        }
        let lq = self.lqs.get(&self.wl(id).lq)?;
        (lq.stop_policy != StopPolicy::None).then(|| self.held_expl[1].clone())
    }

    /// Evicts every admitted workload of a queue (or of one of its local queues).
    pub(super) fn drain(&mut self, cq: CqId, lq: Option<Arc<str>>) {
        let ids: Vec<WlId> = self.cqs[cq]
            .admitted
            .iter()
            .copied()
            .filter(|&v| !self.foreign_id(v) && lq.as_ref().is_none_or(|l| self.wl(v).lq == *l))
            .collect();
        let (reason, queue) = match &lq {
            None => (EvictionReason::ClusterQueueStopped, self.cqs[cq].name.clone()),
            Some(l) => (EvictionReason::LocalQueueStopped, l.clone()),
        };
        for v in ids {
            if self.start_eviction(v).is_ok() {
                self.buffered_evictions.push(Eviction {
                    uid: self.wl(v).uid.clone(),
                    reason,
                    queue: queue.clone(),
                });
            }
        }
        let claims: Vec<WlId> = self
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
