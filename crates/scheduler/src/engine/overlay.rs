//! What-if usage: an [`Overlay`] removes (or adds back) the quota of some
//! workloads from slots and pools without touching the ledger, so
//! preemption and eviction checks can ask "would it fit if these were
//! gone?".

use crate::ledger;
use crate::ledger::{Fit, FrKey};
use crate::model::Amount;

use super::fast_map::FastMap;
use super::state::State;
use super::{CohortId, CqId, Engine, WlId};

/// change of every touched cohort pool.
#[derive(Clone, Default)]
pub(super) struct Overlay {
    pub(super) slot: FastMap<(CqId, usize), Amount>,
    pub(super) pool: FastMap<(CohortId, usize), Amount>,
}

impl Engine {
    pub(super) fn queue_borrows_any(&self, cq: CqId, frs: &[FrKey], ov: Option<&Overlay>) -> bool {
        let q = &self.queues.cqs[cq];
        frs.iter().any(|fr| {
            q.quota.slot_of.get(fr).is_some_and(|&s| {
                let d = ov.and_then(|o| o.slot.get(&(cq, s)).copied()).unwrap_or(0);
                q.quota.slots[s].effective() + d > q.quota.slots[s].nominal
            })
        })
    }

    /// The state once every eviction under way in the domain has completed.
    pub(super) fn evictions_overlay(&self, cq: CqId) -> Overlay {
        let mut ov = Overlay::default();
        if !self.evicting_in_domain(cq) {
            return ov;
        }
        for m in self.domain(cq) {
            if self.queues.cqs[m].evicting == 0 {
                continue;
            }
            for &v in &self.queues.cqs[m].admitted {
                if matches!(self.wl(v).state, State::Evicting(_)) {
                    self.overlay_holding(&mut ov, v, -1);
                }
            }
        }
        ov
    }

    pub(super) fn evicting_in_domain(&self, cq: CqId) -> bool {
        self.domain(cq).any(|m| self.queues.cqs[m].evicting > 0)
    }

    pub(super) fn overlay_holding(&self, ov: &mut Overlay, id: WlId, sign: Amount) {
        let (State::Admitted(h) | State::Evicting(h)) = &self.wl(id).state else {
            return;
        };
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.queues.cqs[h.cq].quota.slot_of.get(&fr) {
                self.overlay_add(ov, h.cq, slot, sign * amount);
            }
        }
    }

    pub(super) fn overlay_add(&self, ov: &mut Overlay, cq: CqId, slot: usize, delta: Amount) {
        let s = &self.queues.cqs[cq].quota.slots[slot];
        let d0 = ov.slot.get(&(cq, slot)).copied().unwrap_or(0);
        let d1 = d0 + delta;
        let e = s.effective();
        let mut draw = ledger::draw_change(e + d0, e + d1, s.guaranteed());
        let mut at = self.queues.cqs[cq].cohort.zip(s.pool);
        while let Some((c, p)) = at
            && draw != 0
        {
            let pool = &self.queues.cohorts[c].pools[p];
            let d = ov.pool.entry((c, p)).or_default();
            let before = pool.usage + *d;
            *d += draw;
            draw = ledger::draw_change(before, before + draw, pool.guaranteed());
            at = self.queues.cohorts[c].parent.zip(pool.parent);
        }
        ov.slot.insert((cq, slot), d1);
    }

    pub(super) fn fits_overlay(&self, ov: &Overlay, cq: CqId, usage: &[(usize, Amount)], within_nominal: bool) -> bool {
        // A queue its budget deprioritizes may not borrow, by preemption
        // either.
        let within_nominal = within_nominal || self.deprioritized(cq);
        let q = &self.queues.cqs[cq];
        usage.iter().all(|&(slot, amount)| {
            let s = &q.quota.slots[slot];
            let sd = ov.slot.get(&(cq, slot)).copied().unwrap_or(0);
            if within_nominal && s.effective() + sd + amount > s.nominal {
                return false;
            }
            matches!(
                ledger::check(s, sd, amount, self.chain(cq, slot, Some(ov))),
                Fit::Fits | Fit::Borrows
            )
        })
    }
}
