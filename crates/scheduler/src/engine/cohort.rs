//! Cohort trees: ClusterQueues name a cohort, a cohort may name a parent
//! (a Cohort object), and every tree shares its quota from the leaves up.
//! A cohort's pool per (flavor, resource) holds its own quota plus what its
//! children lend; a change of the tree rebuilds the pools of the trees it
//! touches from the queues' slots, and usage then moves up the chain
//! incrementally ([`Engine::add_usage`]). A queue's *domain* is the tree of
//! its root cohort, or itself alone.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::ledger;
use crate::ledger::{FrKey, Pool, ResId};
use crate::model::{Amount, CohortSpec};

use super::fast_map::FastMap;
use super::overlay::Overlay;
use super::state::Cohort;
use super::{CohortId, CqId, Engine, EngineError};

impl Engine {
    pub(super) fn cohort_id(&mut self, name: &str) -> CohortId {
        if let Some(&id) = self.queues.cohort_by_name.get(name) {
            return id;
        }
        let id = self.queues.cohorts.len();
        self.queues.cohorts.push(Cohort {
            name: Arc::from(name),
            spec: None,
            parent: None,
            children: BTreeSet::new(),
            members: BTreeSet::new(),
            pools: Vec::new(),
            pool_of: FastMap::default(),
            lendable: FastMap::default(),
            tree: Vec::new(),
        });
        self.queues.cohort_by_name.insert(name.to_string(), id);
        id
    }

    /// Creates or replaces a Cohort object: its parent, its own quota and
    /// its weight. Refused, with nothing changed, if the parent chain would
    /// lead back to the cohort.
    pub fn upsert_cohort(&mut self, spec: CohortSpec) -> Result<(), EngineError> {
        if let Some(parent) = &spec.parent {
            let mut path = vec![spec.name.clone()];
            let mut at = Some(parent.clone());
            while let Some(name) = at {
                path.push(name.clone());
                if name == spec.name {
                    return Err(EngineError::CohortCycle {
                        cohort: spec.name.clone(),
                        path: path.join(" -> "),
                    });
                }
                at = self
                    .queues
                    .cohort_by_name
                    .get(&name)
                    .and_then(|&c| self.queues.cohorts[c].parent)
                    .map(|p| self.queues.cohorts[p].name.to_string());
            }
        }
        let id = self.cohort_id(&spec.name);
        let parent = spec.parent.as_deref().map(|p| self.cohort_id(p));
        let old_root = self.root_of(id);
        self.set_parent(id, parent);
        self.queues.cohorts[id].spec = Some(spec);
        self.memo.assignments.clear();
        self.retree(&[old_root, id]);
        Ok(())
    }

    /// Deletes a Cohort object: the cohort loses its parent, quota and
    /// weight, and lives on implicitly while queues or cohorts name it.
    pub fn remove_cohort(&mut self, name: &str) {
        let Some(&id) = self.queues.cohort_by_name.get(name) else {
            return;
        };
        if self.queues.cohorts[id].spec.is_none() {
            return;
        }
        let old_root = self.root_of(id);
        self.set_parent(id, None);
        self.queues.cohorts[id].spec = None;
        self.memo.assignments.clear();
        self.retree(&[old_root, id]);
    }

    fn set_parent(&mut self, id: CohortId, parent: Option<CohortId>) {
        if let Some(old) = self.queues.cohorts[id].parent {
            self.queues.cohorts[old].children.remove(&id);
        }
        if let Some(p) = parent {
            self.queues.cohorts[p].children.insert(id);
        }
        self.queues.cohorts[id].parent = parent;
    }

    pub(super) fn root_of(&self, mut c: CohortId) -> CohortId {
        while let Some(p) = self.queues.cohorts[c].parent {
            c = p;
        }
        c
    }

    /// Moves a queue into a cohort (or out of any), rebuilding the trees.
    pub(super) fn set_queue_cohort(&mut self, cq: CqId, cohort: Option<CohortId>) {
        let old = self.queues.cqs[cq].cohort;
        if let Some(c) = old {
            self.queues.cohorts[c].members.remove(&cq);
        }
        for s in &mut self.queues.cqs[cq].quota.slots {
            s.pool = None;
        }
        if let Some(c) = cohort {
            self.queues.cohorts[c].members.insert(cq);
        }
        self.queues.cqs[cq].cohort = cohort;
        let roots: Vec<CohortId> = old.into_iter().chain(cohort).map(|c| self.root_of(c)).collect();
        self.retree(&roots);
    }

    /// Rebuilds the trees of these cohorts (each once) and wakes their
    /// queues: capacities and shares may have changed.
    pub(super) fn retree(&mut self, cohorts: &[CohortId]) {
        let mut roots: Vec<CohortId> = cohorts.iter().map(|&c| self.root_of(c)).collect();
        roots.sort_unstable();
        roots.dedup();
        for root in roots {
            self.rebuild_tree(root);
            for m in self.queues.cohorts[root].tree.clone() {
                self.wake_queue(m);
            }
        }
    }

    /// Recomputes every pool of a tree from its queues' slots and its
    /// cohorts' own quota, children before parents, then the lendable
    /// amounts shares are measured against, parents before children.
    fn rebuild_tree(&mut self, root: CohortId) {
        let mut order = Vec::new();
        self.post_order(root, &mut order);
        let mut tree = Vec::new();
        for &c in &order {
            tree.extend(self.queues.cohorts[c].members.iter().copied());
            self.rebuild_pools(c);
        }
        self.rebuild_lendable(&order);
        tree.sort_unstable();
        self.queues.cohorts[root].tree = tree;
    }

    /// Cohort `c`'s pools, one per (flavor, resource): its own quota, what
    /// its member queues' slots lend and draw, and its child cohorts'
    /// pools (linked to their parent pool). Children come first.
    fn rebuild_pools(&mut self, c: CohortId) {
        let mut pools: Vec<Pool> = Vec::new();
        let mut pool_of: FastMap<FrKey, usize> = FastMap::default();
        let mut pool_for = |pools: &mut Vec<Pool>, fr: FrKey| {
            *pool_of.entry(fr).or_insert_with(|| {
                pools.push(Pool::default());
                pools.len() - 1
            })
        };
        let own = self.own_quota(c);
        for (fr, nominal, b, l) in own {
            let p = pool_for(&mut pools, fr);
            let pool = &mut pools[p];
            pool.nominal += nominal;
            pool.capacity += nominal;
            pool.borrowing_limit = b;
            pool.lending_limit = l;
        }
        let members: Vec<CqId> = self.queues.cohorts[c].members.iter().copied().collect();
        for m in members {
            for s in &mut self.queues.cqs[m].quota.slots {
                let p = pool_for(&mut pools, s.fr);
                let pool = &mut pools[p];
                pool.capacity += s.lendable();
                pool.usage += ledger::draw(s.effective(), s.guaranteed());
                pool.idle += ledger::idle(s);
                s.pool = Some(p);
            }
        }
        let children: Vec<CohortId> = self.queues.cohorts[c].children.iter().copied().collect();
        for k in children {
            let links: Vec<(usize, FrKey)> = self.queues.cohorts[k]
                .pool_of
                .iter()
                .map(|(&fr, &kp)| (kp, fr))
                .collect();
            for (kp, fr) in links {
                let p = pool_for(&mut pools, fr);
                let child = &mut self.queues.cohorts[k].pools[kp];
                child.parent = Some(p);
                let (lend, draw, idle) = (
                    child.lendable(),
                    ledger::draw(child.usage, child.guaranteed()),
                    child.idle,
                );
                let pool = &mut pools[p];
                pool.capacity += lend;
                pool.usage += draw;
                pool.idle += idle;
            }
        }
        let cohort = &mut self.queues.cohorts[c];
        cohort.pools = pools;
        cohort.pool_of = pool_of;
        cohort.tree.clear();
    }

    /// What each pool could obtain at most, worked out parents first
    /// (`order` lists children before parents), and so what each cohort
    /// can lend per resource.
    fn rebuild_lendable(&mut self, order: &[CohortId]) {
        let mut potential: FastMap<(CohortId, usize), Amount> = FastMap::default();
        for &c in order.iter().rev() {
            let parent = self.queues.cohorts[c].parent;
            let mut lendable: FastMap<ResId, Amount> = FastMap::default();
            for (&fr, &p) in &self.queues.cohorts[c].pool_of {
                let pool = &self.queues.cohorts[c].pools[p];
                let most = match (parent, pool.parent) {
                    (Some(pc), Some(pp)) => pool
                        .ceiling()
                        .min(pool.guaranteed().saturating_add(potential[&(pc, pp)])),
                    _ => pool.capacity,
                };
                potential.insert((c, p), most);
                *lendable.entry(fr.1).or_default() += most;
            }
            self.queues.cohorts[c].lendable = lendable;
        }
    }

    fn post_order(&self, c: CohortId, out: &mut Vec<CohortId>) {
        for &k in &self.queues.cohorts[c].children {
            self.post_order(k, out);
        }
        out.push(c);
    }

    /// A cohort's own quota per (flavor, resource), from its Cohort object.
    fn own_quota(&mut self, c: CohortId) -> Vec<(FrKey, Amount, Option<Amount>, Option<Amount>)> {
        let Some(spec) = self.queues.cohorts[c].spec.clone() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for g in &spec.resource_groups {
            for f in &g.flavors {
                let flavor = self.catalog.flavor_names.intern(&f.flavor);
                for q in &f.resources {
                    let r = self.catalog.resources.intern(&q.resource);
                    let nominal = q.nominal.max(0);
                    out.push((
                        (flavor, r),
                        nominal,
                        q.borrowing_limit.map(|b| b.max(0)),
                        q.lending_limit.map(|l| l.clamp(0, nominal)),
                    ));
                }
            }
        }
        out
    }

    /// A deleted queue with nothing admitted is forgotten by its cohort.
    pub(super) fn collect_deleted(&mut self, cq: CqId) {
        let q = &self.queues.cqs[cq];
        if q.deleted && q.admitted.is_empty() && q.waiting.preempting == 0 {
            let q = &mut self.queues.cqs[cq];
            q.quota.slots.clear();
            q.quota.slot_of.clear();
            q.quota.groups.clear();
            q.quota.group_of.clear();
            self.set_queue_cohort(cq, None);
        }
    }

    /// Every queue that shares quota with `cq` (its whole cohort tree).
    pub(super) fn domain(&self, cq: CqId) -> impl Iterator<Item = CqId> + '_ {
        let members = self.queues.cqs[cq]
            .cohort
            .map(|c| &self.queues.cohorts[self.root_of(c)].tree);
        let single = members.is_none().then_some(cq);
        members.into_iter().flat_map(|m| m.iter().copied()).chain(single)
    }

    /// The pools above a queue's slot, its cohort's first, with the what-if
    /// change of each pool's usage from `ov`.
    pub(super) fn chain<'a>(
        &'a self,
        cq: CqId,
        slot: usize,
        ov: Option<&'a Overlay>,
    ) -> impl Iterator<Item = (&'a Pool, Amount)> + 'a {
        let mut at = self.queues.cqs[cq]
            .cohort
            .zip(self.queues.cqs[cq].quota.slots[slot].pool);
        std::iter::from_fn(move || {
            let (c, p) = at?;
            let pool = &self.queues.cohorts[c].pools[p];
            at = self.queues.cohorts[c].parent.zip(pool.parent);
            let delta = ov.and_then(|o| o.pool.get(&(c, p)).copied()).unwrap_or(0);
            Some((pool, delta))
        })
    }

    /// The root pool above a queue's slot.
    pub(super) fn root_pool(&self, cq: CqId, slot: usize) -> Option<&Pool> {
        self.chain(cq, slot, None).last().map(|(p, _)| p)
    }
}
