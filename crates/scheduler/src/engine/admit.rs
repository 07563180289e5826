//! Applying decisions to the ledger: admitting (usage added, the shared
//! assignment built once per queue, shape and flavor choice), claiming for
//! a preemptor while its victims go, starting and completing evictions,
//! and releasing what a workload held. Every change to a slot goes through
//! [`Engine::add_usage`], which keeps the cohort pool in step.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::decision::{Admission, Cycle, Explanation, PendingReason, PodSetAssignment, Preemption, PreemptionReason};
use crate::ledger;
use crate::ledger::FrKey;
use crate::model::{Amount, Millis};

use super::flavor::{Attempt, Choice};
use super::placement::Placement;
use super::state::{Holding, State};
use super::{CqId, Engine, SharedAssignment, WlId};

impl Engine {
    pub(super) fn admit(
        &mut self,
        cq: CqId,
        id: WlId,
        attempt: Attempt,
        placement: Placement,
        now: Millis,
        out: &mut Cycle,
    ) {
        for &(slot, amount) in &attempt.usage {
            self.add_usage(cq, slot, amount, 0);
            let fr = self.queues.cqs[cq].quota.slots[slot].fr;
            self.meter(id, cq, fr, amount, None);
        }
        let key = self.wl(id).key(id);
        let shape = self.wl(id).shape;
        self.queues.cqs[cq].waiting.remove_pending(&key, shape);
        let holding = self.holding(cq, id, &attempt, placement, now);
        self.admit_holding(id, holding, now, out);
    }

    pub(super) fn holding(
        &mut self,
        cq: CqId,
        id: WlId,
        attempt: &Attempt,
        placement: Placement,
        now: Millis,
    ) -> Holding {
        let q = &self.queues.cqs[cq];
        let usage: Vec<(FrKey, Amount)> = attempt.usage.iter().map(|&(s, a)| (q.quota.slots[s].fr, a)).collect();
        let shape = self.wl(id).shape;
        let cached = self
            .memo
            .assignments
            .get(&(cq, shape))
            .and_then(|list| list.iter().find(|(c, _)| *c == attempt.choice))
            .map(|(_, a)| a.clone());
        let assignment = match cached {
            Some(a) => a,
            None => {
                let a = self.build_assignment(cq, id, &attempt.choice);
                self.memo
                    .assignments
                    .entry((cq, shape))
                    .or_default()
                    .push((attempt.choice.clone(), a.clone()));
                a
            }
        };
        let assignment = self.with_domains(assignment, &placement);
        Holding {
            cq,
            usage,
            assignment,
            borrowing: attempt.borrowing,
            admitted_at: now,
            victims: Vec::new(),
            placement,
        }
    }

    /// The assignment with each pod set's topology domain (its own copy
    /// when there is one: domains differ between workloads of a shape).
    pub(super) fn with_domains(&self, assignment: SharedAssignment, placement: &Placement) -> SharedAssignment {
        if placement.domains.is_empty() {
            return assignment;
        }
        let mut own: Vec<PodSetAssignment> = assignment.to_vec();
        for (ps, domain) in &placement.domains {
            if let Some(a) = own.get_mut(*ps) {
                a.topology = Some(domain.clone());
            }
        }
        own.into()
    }

    /// The reported assignment of a flavor choice: per pod set, the flavor
    /// and total of every resource it requests. It depends only on the
    /// queue, the workload's shape and the choice.
    pub(super) fn build_assignment(&self, cq: CqId, id: WlId, choice: &Choice) -> SharedAssignment {
        let q = &self.queues.cqs[cq];
        self.wl(id)
            .pod_sets
            .iter()
            .zip(&choice.0)
            .map(|(ps, choice)| {
                let mut flavors = BTreeMap::new();
                let mut ps_usage = BTreeMap::new();
                let total = self.charged_total(q, ps, |g| choice.iter().find(|c| c.group == g).map(|c| c.flavor));
                for &(res, amount) in total.iter() {
                    let g = q.quota.group_of[&res];
                    let flavor = choice
                        .iter()
                        .find(|c| c.group == g)
                        .map(|c| c.flavor)
                        .expect("group chosen");
                    flavors.insert(
                        self.catalog.resources.name(res).to_string(),
                        self.catalog.flavor_names.name(flavor).to_string(),
                    );
                    ps_usage.insert(self.catalog.resources.name(res).to_string(), amount);
                }
                PodSetAssignment {
                    name: ps.name.to_string(),
                    count: ps.count,
                    flavors,
                    usage: ps_usage,
                    topology: None,
                }
            })
            .collect()
    }

    pub(super) fn admit_holding(&mut self, id: WlId, mut holding: Holding, now: Millis, out: &mut Cycle) {
        let cq = holding.cq;
        holding.admitted_at = now;
        holding.victims.clear();
        holding.borrowing = self.is_borrowing(cq, &holding.usage);
        let wl = self.workloads.wls[id].as_mut().expect("live workload");
        wl.explanation = None;
        wl.shaped = false;
        self.turn.admitted_now.insert(id, out.admitted.len());
        self.queues.cqs[cq].admitted_now += 1;
        out.admitted.push(Admission {
            uid: wl.uid.clone(),
            cluster_queue: self.queues.cqs[cq].name.clone(),
            pod_sets: holding.assignment.clone(),
            borrowing: holding.borrowing,
            backfill: None,
        });
        wl.state = State::Admitted(Box::new(holding));
        self.queues.cqs[cq].admitted.insert(id);
        self.update_reservation(id);
    }

    pub(super) fn is_borrowing(&self, cq: CqId, usage: &[(FrKey, Amount)]) -> bool {
        let q = &self.queues.cqs[cq];
        usage.iter().any(|(fr, _)| {
            q.quota
                .slot_of
                .get(fr)
                .is_some_and(|&s| q.quota.slots[s].usage > q.quota.slots[s].nominal)
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_claim(
        &mut self,
        cq: CqId,
        id: WlId,
        victims: Vec<(WlId, PreemptionReason)>,
        attempt: Attempt,
        placement: Placement,
        now: Millis,
        out: &mut Cycle,
    ) {
        // Admission time is set when the claim completes.
        let mut holding = self.holding(cq, id, &attempt, placement, 0);
        holding.victims = victims.iter().map(|(v, _)| (*v, self.wl(*v).uid.clone())).collect();
        for &(slot, amount) in &attempt.usage {
            self.add_usage(cq, slot, 0, amount);
        }
        let (preemptor_uid, preemptor_name, preemptor_priority) = {
            let w = self.wl(id);
            (w.uid.clone(), w.name.clone(), w.priority)
        };
        let preemptor_cq = self.queues.cqs[cq].name.clone();
        let mut retracted = Vec::new();
        for (v, reason) in &victims {
            if let Some(index) = self.turn.admitted_now.remove(v) {
                if let State::Admitted(h) = &self.wl(*v).state {
                    let q = h.cq;
                    self.queues.cqs[q].admitted_now -= 1;
                }
                self.turn.withdrawn.push(index);
                // Admitted earlier in this same cycle: nothing was applied
                // yet, so the admission is withdrawn instead of evicted.
                retracted.push(*v);
                continue;
            }
            let _ = self.start_eviction(*v);
            self.wl_mut(*v).last_preempted = Some(now);
            let w = self.wl(*v);
            out.preempted.push(Preemption {
                victim: w.uid.clone(),
                preemptor: preemptor_uid.clone(),
                preemptor_name: preemptor_name.clone(),
                preemptor_cluster_queue: preemptor_cq.clone(),
                reason: *reason,
                preemptor_priority,
                victim_priority: w.priority,
            });
        }
        for v in retracted {
            self.release(v);
            self.wl_mut(v).state = State::Pending;
            self.enqueue(v);
        }
        let key = self.wl(id).key(id);
        let shape = self.wl(id).shape;
        self.queues.cqs[cq].waiting.take_off_lists(&key, shape);
        self.wl_mut(id).shaped = false;
        self.queues.cqs[cq].waiting.preempting += 1;
        self.claims.preempting.insert(key.clone());
        let n = out.preempted.iter().filter(|p| p.preemptor == preemptor_uid).count();
        self.wl_mut(id).state = State::Preempting(Box::new(holding));
        self.update_reservation(id);
        if n == 0 {
            self.try_complete_claim(key, now, out);
        } else {
            let e = Explanation::new(PendingReason::WaitingForPreemption { victims: n });
            self.explain(id, Arc::new(e), out);
        }
    }

    /// Releases a preemptor's claim; it goes back to plain pending.
    pub(super) fn drop_claim(&mut self, id: WlId) {
        let State::Preempting(h) = std::mem::replace(&mut self.wl_mut(id).state, State::Pending) else {
            return;
        };
        let key = self.wl(id).key(id);
        self.claims.preempting.remove(&key);
        self.queues.cqs[h.cq].waiting.preempting -= 1;
        if self.queues.cqs[h.cq].waiting.pending.contains(&key) {
            self.queues.cqs[h.cq].waiting.loose.insert(key.clone());
            self.queues.cqs[h.cq].waiting.fresh.insert(key.clone());
        }
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.queues.cqs[h.cq].quota.slot_of.get(&fr) {
                self.add_usage(h.cq, slot, 0, -amount);
            }
        }
        self.update_reservation(id);
        self.wake_domain(h.cq);
    }

    pub(super) fn start_eviction(&mut self, id: WlId) -> Result<(), &'static str> {
        if self.foreign_id(id) {
            return Err("foreign (admitted by another controller)");
        }
        let wl = self.wl_mut(id);
        match std::mem::replace(&mut wl.state, State::Finished) {
            State::Admitted(h) => {
                let cq = h.cq;
                wl.state = State::Evicting(h);
                self.queues.cqs[cq].evicting += 1;
                self.refresh_leaving(id);
                Ok(())
            }
            other => {
                let name = other.name();
                wl.state = other;
                Err(name)
            }
        }
    }

    /// Releases what an admitted or evicting workload holds.
    pub(super) fn release(&mut self, id: WlId) {
        let state = std::mem::replace(&mut self.wl_mut(id).state, State::Pending);
        let (State::Admitted(h) | State::Evicting(h)) = &state else {
            self.wl_mut(id).state = state;
            return;
        };
        let cq = h.cq;
        if matches!(state, State::Evicting(_)) {
            self.queues.cqs[cq].evicting -= 1;
        }
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.queues.cqs[cq].quota.slot_of.get(&fr) {
                self.add_usage(cq, slot, -amount, 0);
                self.meter(id, cq, fr, -amount, None);
            }
        }
        self.queues.cqs[cq].admitted.remove(&id);
        self.update_reservation(id);
        self.wake_domain(cq);
        self.collect_deleted(cq);
    }

    /// Adds to a slot's usage and claim, keeping the pools above it in step:
    /// each level passes on the change of its draw, and the change of idle
    /// nominal quota goes to every level.
    pub(super) fn add_usage(&mut self, cq: CqId, slot: usize, usage: Amount, claimed: Amount) {
        let q = &mut self.queues.cqs[cq];
        let s = &mut q.quota.slots[slot];
        let g = s.guaranteed();
        let (before, idle_before) = (s.effective(), ledger::idle(s));
        s.usage += usage;
        s.claimed += claimed;
        let mut draw = ledger::draw_change(before, s.effective(), g);
        let idle = ledger::idle(s) - idle_before;
        let mut at = q.cohort.zip(s.pool);
        while let Some((c, p)) = at {
            let pool = &mut self.queues.cohorts[c].pools[p];
            let before = pool.usage;
            pool.usage += draw;
            pool.idle += idle;
            draw = ledger::draw_change(before, pool.usage, pool.guaranteed());
            let up = pool.parent;
            at = self.queues.cohorts[c].parent.zip(up);
        }
    }
}
