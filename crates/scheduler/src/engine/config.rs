//! Configuration objects: flavors, ClusterQueues and LocalQueues. An upsert
//! rebuilds a queue's slots (keeping the usage of what it admitted, also
//! for flavors it no longer lists), starts a drain when a stop policy turns
//! to HoldAndDrain, and wakes the queues whose chances changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::ledger::{FrKey, ResId, Slot};
use crate::model::{ClusterQueueSpec, FlavorSpec, LocalQueueSpec, StopPolicy};

use super::fast_map::FastMap;
use super::state::{Cq, Group, GroupFlavor, OrderKey, Quota, State, Waiting};
use super::{CqId, Engine, WlId};

impl Engine {
    /// Creates or replaces a flavor. Every queue may now fit differently, so
    /// all are retried.
    pub fn upsert_flavor(&mut self, spec: FlavorSpec) {
        let id = self.catalog.flavor_names.intern(&spec.name);
        self.catalog.flavors.insert(id, spec);
        self.refresh_flavor_membership(id);
        self.wake_all();
    }

    /// Removes a flavor: queues that name it can no longer admit into it.
    pub fn remove_flavor(&mut self, name: &str) {
        if let Some(id) = self.catalog.flavor_names.get(name) {
            self.catalog.flavors.remove(&id);
            self.refresh_flavor_membership(id);
        }
    }

    /// Creates or replaces a ClusterQueue. Usage of admitted workloads is kept,
    /// also for flavors the new spec no longer lists.
    pub fn upsert_cluster_queue(&mut self, spec: ClusterQueueSpec) {
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let id = match self.queues.cq_by_name.get(&name) {
            Some(&id) => {
                self.wake_domain(id);
                id
            }
            None => {
                let id = self.queues.cqs.len();
                self.queues.cqs.push(Cq {
                    name: name.clone(),
                    spec: ClusterQueueSpec::default(),
                    deleted: false,
                    cohort: None,
                    quota: Quota::default(),
                    waiting: Waiting::default(),
                    admitted: BTreeSet::new(),
                    admitted_now: 0,
                    evicting: 0,
                });
                self.queues.cq_by_name.insert(name, id);
                id
            }
        };
        let old_stop = self.queues.cqs[id].spec.stop_policy;
        self.rebuild_slots(id, &spec);
        let cohort = spec.cohort.as_ref().map(|c| self.cohort_id(c));
        let cq = &mut self.queues.cqs[id];
        cq.spec = spec;
        cq.deleted = false;
        self.set_queue_cohort(id, cohort);
        self.wake_domain(id);
        let stop = self.queues.cqs[id].spec.stop_policy;
        if stop == StopPolicy::HoldAndDrain && old_stop != StopPolicy::HoldAndDrain {
            self.drain(id, None);
        }
        self.resolve_unresolved();
    }

    /// Deletes a ClusterQueue. Its pending workloads wait with reason
    /// `ClusterQueueMissing`; quota of its admitted workloads stays accounted
    /// until they finish or are evicted.
    pub fn remove_cluster_queue(&mut self, name: &str) {
        let Some(&id) = self.queues.cq_by_name.get(name) else {
            return;
        };
        if self.queues.cqs[id].deleted {
            return;
        }
        self.wake_domain(id);
        self.queues.cqs[id].deleted = true;
        let pending: Vec<OrderKey> = std::mem::take(&mut self.queues.cqs[id].waiting.pending)
            .into_iter()
            .collect();
        self.queues.cqs[id].waiting.fresh.clear();
        self.queues.cqs[id].waiting.loose.clear();
        self.queues.cqs[id].waiting.shaped.clear();
        for key in &pending {
            self.wl_mut(key.id).shaped = false;
        }
        for key in pending {
            self.wl_mut(key.id).cq = None;
            self.enqueue(key.id);
        }
        let preempting: Vec<OrderKey> = self
            .claims
            .preempting
            .iter()
            .filter(|k| matches!(&self.wl(k.id).state, State::Preempting(h) if h.cq == id))
            .cloned()
            .collect();
        for key in preempting {
            self.drop_claim(key.id);
            self.wl_mut(key.id).cq = None;
            self.enqueue(key.id);
        }
        self.collect_deleted(id);
    }

    /// Creates or replaces a LocalQueue.
    pub fn upsert_local_queue(&mut self, spec: LocalQueueSpec) {
        let key: Arc<str> = Arc::from(spec.key.as_str());
        let old = self.queues.lqs.insert(key.clone(), spec.clone());
        self.queues.stopped_local_queues += (spec.stop_policy != StopPolicy::None) as usize;
        self.queues.stopped_local_queues -= old.as_ref().is_some_and(|o| o.stop_policy != StopPolicy::None) as usize;
        let retarget = old.as_ref().is_some_and(|o| o.cluster_queue != spec.cluster_queue);
        if retarget {
            // Pending workloads follow the queue to its new ClusterQueue.
            self.requeue_local_queue(&key);
        }
        if let Some(&cq) = self.queues.cq_by_name.get(spec.cluster_queue.as_str()) {
            self.wake_queue(cq);
            if spec.stop_policy == StopPolicy::HoldAndDrain
                && old.is_none_or(|o| o.stop_policy != StopPolicy::HoldAndDrain)
            {
                self.drain(cq, Some(key));
            }
        }
        self.resolve_unresolved();
    }

    /// Deletes a LocalQueue: its pending workloads wait with reason
    /// `LocalQueueMissing`; admitted ones keep running.
    pub fn remove_local_queue(&mut self, key: &str) {
        let Some(old) = self.queues.lqs.remove(key) else { return };
        self.queues.stopped_local_queues -= (old.stop_policy != StopPolicy::None) as usize;
        self.requeue_local_queue(key);
    }

    /// Takes every pending workload of a LocalQueue out of its ClusterQueue
    /// and queues it again where the LocalQueue now points (or parks it with
    /// the reason it cannot be queued).
    pub(super) fn requeue_local_queue(&mut self, key: &str) {
        let moving: Vec<WlId> = self
            .queues
            .cqs
            .iter()
            .flat_map(|cq| cq.waiting.pending.iter())
            .filter(|k| &*self.wl(k.id).lq == key)
            .map(|k| k.id)
            .collect();
        for id in moving {
            self.drop_claim(id);
            self.unqueue(id);
            self.enqueue(id);
        }
    }

    /// Builds a queue's groups and slots from its spec, carrying over usage
    /// and claims by (flavor, resource). Must run while detached from its cohort.
    pub(super) fn rebuild_slots(&mut self, cq: CqId, spec: &ClusterQueueSpec) {
        // Group indices change meaning: cached assignments are stale.
        self.memo.assignments.retain(|&(c, _), _| c != cq);
        let old: Vec<Slot> = std::mem::take(&mut self.queues.cqs[cq].quota.slots);
        let mut slots: Vec<Slot> = Vec::new();
        let mut slot_of: FastMap<FrKey, usize> = FastMap::default();
        let mut groups = Vec::with_capacity(spec.resource_groups.len());
        let mut group_of = FastMap::default();
        for (gi, g) in spec.resource_groups.iter().enumerate() {
            let resources: Vec<ResId> = g
                .covered_resources
                .iter()
                .map(|r| self.catalog.resources.intern(r))
                .collect();
            for &r in &resources {
                group_of.entry(r).or_insert(gi);
            }
            let mut flavors = Vec::with_capacity(g.flavors.len());
            for f in &g.flavors {
                let flavor = self.catalog.flavor_names.intern(&f.flavor);
                let mut fslots = Vec::with_capacity(resources.len());
                for &r in &resources {
                    let fr = (flavor, r);
                    let quota = f
                        .resources
                        .iter()
                        .find(|q| self.catalog.resources.get(&q.resource) == Some(r));
                    let slot = *slot_of.entry(fr).or_insert_with(|| {
                        let (nominal, b, l) = quota
                            .map(|q| (q.nominal, q.borrowing_limit, q.lending_limit))
                            .unwrap_or((0, None, None));
                        slots.push(Slot::new(
                            fr,
                            nominal.max(0),
                            b.map(|b| b.max(0)),
                            l.map(|l| l.clamp(0, nominal.max(0))),
                        ));
                        slots.len() - 1
                    });
                    fslots.push(slot);
                }
                flavors.push(GroupFlavor { flavor, slots: fslots });
            }
            groups.push(Group { resources, flavors });
        }
        for o in old {
            if o.usage == 0 && o.claimed == 0 {
                continue;
            }
            let slot = *slot_of.entry(o.fr).or_insert_with(|| {
                // No longer in the spec: keep accounting with no quota.
                slots.push(Slot::new(o.fr, 0, Some(0), None));
                slots.len() - 1
            });
            slots[slot].usage += o.usage;
            slots[slot].claimed += o.claimed;
        }
        let q = &mut self.queues.cqs[cq];
        q.quota.slots = slots;
        q.quota.slot_of = slot_of;
        q.quota.groups = groups;
        q.quota.group_of = group_of;
    }

    /// The slot for (flavor, resource) in a queue, created with no quota when
    /// the spec does not list it (only for restored admissions).
    pub(super) fn slot_for(&mut self, cq: CqId, fr: FrKey) -> usize {
        if let Some(&s) = self.queues.cqs[cq].quota.slot_of.get(&fr) {
            return s;
        }
        let q = &mut self.queues.cqs[cq];
        q.quota.slots.push(Slot::new(fr, 0, Some(0), None));
        let s = q.quota.slots.len() - 1;
        q.quota.slot_of.insert(fr, s);
        if let Some(c) = q.cohort {
            self.retree(&[c]);
        }
        s
    }
}
