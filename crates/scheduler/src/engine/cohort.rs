//! Cohort membership: a ClusterQueue's slots put their lendable quota into
//! the cohort's pool per (flavor, resource) on attach and take it back on
//! detach; a deleted queue leaves its cohort once nothing it admitted is
//! left. A queue's *domain* is its cohort, or itself alone.

use super::*;

impl Engine {
    pub(super) fn cohort_id(&mut self, name: &str) -> CohortId {
        if let Some(&id) = self.cohort_by_name.get(name) {
            return id;
        }
        let id = self.cohorts.len();
        self.cohorts.push(Cohort {
            members: BTreeSet::new(),
            pools: Vec::new(),
            pool_of: FastMap::default(),
        });
        self.cohort_by_name.insert(name.to_string(), id);
        id
    }

    pub(super) fn detach_from_cohort(&mut self, cq: CqId) {
        let Some(c) = self.cqs[cq].cohort else { return };
        let cohort = &mut self.cohorts[c];
        cohort.members.remove(&cq);
        for s in &mut self.cqs[cq].slots {
            if let Some(p) = s.pool.take() {
                let pool = &mut cohort.pools[p];
                pool.capacity -= s.lendable();
                pool.usage -= ledger::draw(s.effective(), s.guaranteed());
                pool.idle -= ledger::idle(s);
            }
        }
        self.cqs[cq].cohort = None;
    }

    pub(super) fn attach_to_cohort(&mut self, cq: CqId) {
        let Some(c) = self.cqs[cq].cohort else { return };
        let cohort = &mut self.cohorts[c];
        cohort.members.insert(cq);
        for s in &mut self.cqs[cq].slots {
            let p = *cohort.pool_of.entry(s.fr).or_insert_with(|| {
                cohort.pools.push(Pool::default());
                cohort.pools.len() - 1
            });
            let pool = &mut cohort.pools[p];
            pool.capacity += s.lendable();
            pool.usage += ledger::draw(s.effective(), s.guaranteed());
            pool.idle += ledger::idle(s);
            s.pool = Some(p);
        }
    }

    pub(super) fn detach_from_cohort_keep(&mut self, cq: CqId) {
        let cohort = self.cqs[cq].cohort;
        self.detach_from_cohort(cq);
        self.cqs[cq].cohort = cohort;
    }

    /// A deleted queue with nothing admitted is forgotten by its cohort.
    pub(super) fn collect_deleted(&mut self, cq: CqId) {
        let q = &self.cqs[cq];
        if q.deleted && q.admitted.is_empty() && q.preempting == 0 {
            self.detach_from_cohort(cq);
            let q = &mut self.cqs[cq];
            q.slots.clear();
            q.slot_of.clear();
            q.groups.clear();
            q.group_of.clear();
        }
    }

    pub(super) fn domain(&self, cq: CqId) -> impl Iterator<Item = CqId> + '_ {
        let members = self.cqs[cq].cohort.map(|c| &self.cohorts[c].members);
        let single = members.is_none().then_some(cq);
        members.into_iter().flat_map(|m| m.iter().copied()).chain(single)
    }
}
