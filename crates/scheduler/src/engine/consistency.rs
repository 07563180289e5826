//! The ledger's self-check, for tests and property tests: slots and pools
//! equal the sums over the workloads that hold or claim quota, and every
//! pending workload is on exactly one candidate list.

use std::collections::HashMap;

use crate::ledger;
use crate::ledger::FrKey;
use crate::model::Amount;

use super::state::State;
use super::{CqId, Engine};

impl Engine {
    /// Checks the ledger against the workloads (for tests): every slot's usage
    /// and claim equals the sum over holders, every pool equals the sum of
    /// draws, and admitted usage respects quota where `strict`.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        self.check_slots()?;
        self.check_pending_lists()?;
        self.check_pools()?;
        self.check_placement()?;
        Ok(())
    }

    /// Every slot's usage and claim equal the sums over the workloads that
    /// hold (admitted, evicting) or claim (preempting) quota.
    fn check_slots(&self) -> Result<(), String> {
        let mut usage: HashMap<(CqId, FrKey), Amount> = HashMap::new();
        let mut claimed: HashMap<(CqId, FrKey), Amount> = HashMap::new();
        for wl in self.workloads.wls.iter().flatten() {
            match &wl.state {
                State::Admitted(h) | State::Evicting(h) => {
                    for &(fr, a) in &h.usage {
                        *usage.entry((h.cq, fr)).or_default() += a;
                    }
                }
                State::Preempting(h) => {
                    for &(fr, a) in &h.usage {
                        *claimed.entry((h.cq, fr)).or_default() += a;
                    }
                }
                _ => {}
            }
        }
        for (ci, q) in self.queues.cqs.iter().enumerate() {
            for s in &q.quota.slots {
                let u = usage.remove(&(ci, s.fr)).unwrap_or(0);
                let c = claimed.remove(&(ci, s.fr)).unwrap_or(0);
                if u != s.usage || c != s.claimed {
                    return Err(format!(
                        "queue {} slot {:?}: ledger usage {} claimed {}, workloads hold {} claim {}",
                        q.name, s.fr, s.usage, s.claimed, u, c
                    ));
                }
            }
        }
        if let Some(((cq, fr), a)) = usage.into_iter().chain(claimed).find(|(_, a)| *a != 0) {
            return Err(format!(
                "queue {} holds {a} of {fr:?} with no slot",
                self.queues.cqs[cq].name
            ));
        }
        Ok(())
    }

    /// Every pending workload is on exactly one candidate list of its
    /// queue (loose, or shaped with its shape's explanation).
    fn check_pending_lists(&self) -> Result<(), String> {
        for (ci, q) in self.queues.cqs.iter().enumerate() {
            let shaped: usize = q.waiting.shaped.values().map(|s| s.len()).sum();
            let preempting = q
                .waiting
                .pending
                .iter()
                .filter(|k| matches!(self.wl(k.id).state, State::Preempting(_)))
                .count();
            if q.waiting.pending.len() != q.waiting.loose.len() + shaped + preempting
                || preempting != q.waiting.preempting
            {
                return Err(format!(
                    "queue {}: {} pending but {} loose + {} shaped + {} preempting (counter {})",
                    q.name,
                    q.waiting.pending.len(),
                    q.waiting.loose.len(),
                    shaped,
                    preempting,
                    q.waiting.preempting
                ));
            }
            for k in &q.waiting.loose {
                let wl = self.wl(k.id);
                if wl.shaped || wl.cq != Some(ci) || !q.waiting.pending.contains(k) {
                    return Err(format!("queue {}: loose {} is shaped or elsewhere", q.name, k.uid));
                }
            }
            for (shape, set) in &q.waiting.shaped {
                for k in set {
                    let wl = self.wl(k.id);
                    if !wl.shaped || wl.shape != *shape || !q.waiting.pending.contains(k) {
                        return Err(format!("queue {}: shaped {} inconsistent", q.name, k.uid));
                    }
                    if !self.memo.shape_expl.contains_key(&(ci, *shape)) {
                        return Err(format!(
                            "queue {}: shape {shape} has members but no explanation",
                            q.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every cohort pool equals the sums of its members' slots and its
    /// child cohorts' pools.
    fn check_pools(&self) -> Result<(), String> {
        for (c, cohort) in self.queues.cohorts.iter().enumerate() {
            let mut sums: Vec<(Amount, Amount, Amount)> = cohort.pools.iter().map(|p| (p.nominal, 0, 0)).collect();
            for &m in &cohort.members {
                for s in &self.queues.cqs[m].quota.slots {
                    let p = s.pool.ok_or_else(|| {
                        format!(
                            "queue {} in cohort {c} has a slot without pool",
                            self.queues.cqs[m].name
                        )
                    })?;
                    sums[p].0 += s.lendable();
                    sums[p].1 += ledger::draw(s.effective(), s.guaranteed());
                    sums[p].2 += ledger::idle(s);
                }
            }
            for &k in &cohort.children {
                for kp in &self.queues.cohorts[k].pools {
                    let p = kp.parent.ok_or_else(|| {
                        format!(
                            "cohort {} below {c} has a pool without parent",
                            self.queues.cohorts[k].name
                        )
                    })?;
                    sums[p].0 += kp.lendable();
                    sums[p].1 += ledger::draw(kp.usage, kp.guaranteed());
                    sums[p].2 += kp.idle;
                }
            }
            for (p, pool) in cohort.pools.iter().enumerate() {
                if (pool.capacity, pool.usage, pool.idle) != sums[p] {
                    return Err(format!(
                        "cohort {} pool {p}: capacity/usage/idle {}/{}/{} but children sum to {}/{}/{}",
                        cohort.name, pool.capacity, pool.usage, pool.idle, sums[p].0, sums[p].1, sums[p].2
                    ));
                }
            }
        }
        Ok(())
    }
}
