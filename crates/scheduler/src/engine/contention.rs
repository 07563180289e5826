//! Contention: does some pending workload wait for quota an admitted one
//! holds? Idle-GPU reclaim acts (by default) only then.

use std::sync::Arc;

use crate::decision::PendingReason;
use crate::ledger::{FrKey, ResId};

use super::state::State;
use super::{CqId, Engine};

impl Engine {
    /// A pending workload that waits for quota the admitted workload `uid`
    /// holds, if any: the first in queue order, first in `uid`'s own
    /// ClusterQueue, then in the other queues of its cohort (by name).
    ///
    /// It *waits for that quota* when its latest explanation is that it
    /// does not fit now (`NoFit`, or StrictFIFO's `BlockedByHead`) and it
    /// requests a resource of which `uid` holds some in a flavor its own
    /// ClusterQueue has quota for. Workloads that can never fit, are held,
    /// backing off, or already have victims are not waiting for it.
    ///
    /// Costs O(pending workloads of the domain); meant for the few
    /// workloads found idle, not for cycles.
    pub fn waiting_for_quota_of(&self, uid: &str) -> Option<Arc<str>> {
        let id = *self.workloads.by_uid.get(uid)?;
        let State::Admitted(h) = &self.wl(id).state else {
            return None;
        };
        let held: Vec<FrKey> = h.usage.iter().filter(|(_, a)| *a > 0).map(|(fr, _)| *fr).collect();
        let mut queues = vec![h.cq];
        let mut others: Vec<CqId> = self.domain(h.cq).filter(|&q| q != h.cq).collect();
        others.sort_by(|a, b| self.queues.cqs[*a].name.cmp(&self.queues.cqs[*b].name));
        queues.extend(others);
        queues.into_iter().find_map(|q| self.waiter_in(q, &held))
    }

    fn waiter_in(&self, q: CqId, held: &[FrKey]) -> Option<Arc<str>> {
        let cq = &self.queues.cqs[q];
        // (flavor, resource) pairs this queue could use that `held` frees.
        let usable: Vec<ResId> = held
            .iter()
            .filter(|fr| cq.quota.slot_of.contains_key(fr))
            .map(|fr| fr.1)
            .collect();
        if usable.is_empty() {
            return None;
        }
        cq.waiting.pending.iter().find_map(|k| {
            let wl = self.wl(k.id);
            if !matches!(wl.state, State::Pending) {
                return None;
            }
            let waiting = self
                .current_explanation(k.id)
                .is_some_and(|e| matches!(e.reason, PendingReason::NoFit | PendingReason::BlockedByHead));
            let wants = wl
                .pod_sets
                .iter()
                .any(|ps| ps.total.iter().any(|(r, a)| *a > 0 && usable.contains(r)));
            (waiting && wants).then(|| wl.uid.clone())
        })
    }
}
