use super::*;

impl Engine {
    /// Whether, on a resource this attempt borrows, another queue of the
    /// cohort has nominal quota it does not use: only then could deferring
    /// the borrower let someone admit within nominal quota.
    pub(super) fn peers_have_idle_quota(&self, cq: CqId, attempt: &Attempt) -> bool {
        let q = &self.cqs[cq];
        let Some(c) = q.cohort else { return false };
        attempt.usage.iter().any(|&(slot, amount)| {
            let s = &q.slots[slot];
            s.effective() + amount > s.nominal
                && s.pool.is_some_and(|p| self.cohorts[c].pools[p].idle > ledger::idle(s))
        })
    }
}
