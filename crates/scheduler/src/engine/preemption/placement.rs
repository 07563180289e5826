//! Placement-aware victims. When a workload fits quota (or will, once its
//! quota victims are gone) and its quota victims also make room for its
//! pods, they are the victims. Otherwise victims are chosen node by node:
//! for the pod that does not fit, the node where the fewest allowed
//! victims (then the lowest-priority ones) make room for one more of it,
//! so whole nodes are freed rather than slivers on many. The quota
//! victims are candidates like the others, and are added (in their order)
//! only while the chosen ones do not free enough quota. Victims are
//! allowed by the same policies as for quota, minimum runtime included;
//! victims in other queues of the cohort by `borrowWithinCohort` when the
//! preemptor borrows, by `reclaimWithinCohort` when it then fits within
//! its nominal quota (and it must stay so). The set is then made minimal
//! (a victim whose quota and room are not needed is given back, latest
//! chosen first), and nothing is preempted when even every allowed
//! victim would not make the workload placeable.

use crate::decision::PreemptionReason;
use crate::engine::fast_map::FastMap;
use crate::engine::flavor::Choice;
use crate::engine::overlay::Overlay;
use crate::engine::placement::{NoRoom, Placement};
use crate::engine::placement::{NodeDelta, NodeId, ResVec, res_add, res_get};
use crate::engine::state::State;
use crate::engine::{CqId, Engine, WlId};
use crate::ledger::{FlavorId, FrKey};
use crate::model::{Amount, Millis, WithinClusterQueue};

use super::order::{VictimCost, VictimOrder};
use super::{Candidate, Pool};

/// How quota judges a victim set: `check` whether it must (there are
/// quota victims), whether the preemptor must end within its nominal
/// quota, and the usage with the evictions in flight and the victims
/// taken so far gone (`ov`).
struct QuotaSide {
    check: bool,
    within_nominal: bool,
    ov: Overlay,
}

/// A victim set as it is chosen: the candidates taken (`chosen`, indices
/// into `candidates`), the node room they give back (`delta`) and the
/// quota they free (`quota.ov`).
struct Taking<'c, 'a> {
    candidates: &'c [Candidate<'a>],
    quota: QuotaSide,
    chosen: Vec<usize>,
    delta: NodeDelta,
}

impl Engine {
    /// Victims that make the workload fit quota and placeable with
    /// `choice` (`quota_victims` make it fit quota), and where it goes;
    /// `None` when no allowed set does.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::engine) fn placement_victims(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        usage: &[(usize, Amount)],
        borrowing: bool,
        quota_victims: Vec<(WlId, PreemptionReason)>,
        now: Millis,
    ) -> Option<(Vec<(WlId, PreemptionReason)>, Placement)> {
        let mut delta = self.leaving_delta().clone();
        let quota_ids: Vec<WlId> = quota_victims.iter().map(|(v, _)| *v).collect();
        if let Some(p) = self.place_without(cq, id, choice, &quota_ids, &mut delta) {
            return Some((quota_victims, p));
        }
        let mut candidates = self.placement_candidates(cq, id, usage, &quota_victims, now);
        // Even every candidate gone leaves no room: nothing to preempt.
        let all: Vec<WlId> = candidates.iter().map(|c| c.id).collect();
        self.place_without(cq, id, choice, &all, &mut delta)?;
        let quota = self.quota_side(cq, usage, borrowing, &quota_victims);
        let is_quota_victim = |v: WlId| quota_victims.iter().any(|(q, _)| *q == v);
        let borrowing = !quota.within_nominal;
        candidates
            .retain(|c| is_quota_victim(c.id) || c.cq == cq || if borrowing { c.borrow_ok } else { c.reclaim_ok });
        let mut taking = Taking {
            candidates: &candidates,
            quota,
            chosen: Vec::new(),
            delta,
        };
        let placement = self.take_until_placed(cq, id, choice, usage, &quota_victims, &mut taking)?;
        let placement = self.give_back_unneeded(cq, id, choice, usage, &mut taking, placement);
        let quota_reason = |v: WlId| quota_victims.iter().find(|(q, _)| *q == v).map(|(_, r)| *r);
        let victims = taking
            .chosen
            .iter()
            .map(|&i| {
                let c = &candidates[i];
                let reason = quota_reason(c.id).unwrap_or(if c.cq == cq {
                    PreemptionReason::InClusterQueue
                } else if borrowing {
                    PreemptionReason::InCohortReclaimWhileBorrowing
                } else {
                    PreemptionReason::InCohortReclamation
                });
                (c.id, reason)
            })
            .collect();
        Some((victims, placement))
    }

    /// Where the workload's pods go once `gone` have left (their room
    /// counted in `delta` only for the attempt).
    fn place_without(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        gone: &[WlId],
        delta: &mut NodeDelta,
    ) -> Option<Placement> {
        for &v in gone {
            self.footprint(v, 1, delta);
        }
        let placed = self.place(cq, id, choice, delta).ok();
        for &v in gone {
            self.footprint(v, -1, delta);
        }
        placed
    }

    /// How quota judges a victim set. Without quota victims the workload
    /// fits quota already (within nominal unless `borrowing`); with them,
    /// within nominal if they leave it so, and every set is checked.
    fn quota_side(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        borrowing: bool,
        quota_victims: &[(WlId, PreemptionReason)],
    ) -> QuotaSide {
        if quota_victims.is_empty() {
            return QuotaSide {
                check: false,
                within_nominal: !borrowing,
                ov: Overlay::default(),
            };
        }
        let ov = self.evictions_overlay(cq);
        let mut after = ov.clone();
        for (v, _) in quota_victims {
            self.overlay_holding(&mut after, *v, -1);
        }
        QuotaSide {
            check: true,
            within_nominal: self.fits_overlay(&after, cq, usage, true),
            ov,
        }
    }

    /// Takes candidates until the workload's pods are placed and its quota
    /// fits: for each pod set without room, the candidates of the cheapest
    /// node; when there is room but quota is short, the next quota victim.
    /// `None` when nothing more can be taken.
    fn take_until_placed(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        usage: &[(usize, Amount)],
        quota_victims: &[(WlId, PreemptionReason)],
        t: &mut Taking<'_, '_>,
    ) -> Option<Placement> {
        let candidates = t.candidates;
        let is_quota_victim = |v: WlId| quota_victims.iter().any(|(q, _)| *q == v);
        // Which candidates occupy which node, in victim order.
        let mut on_node: FastMap<NodeId, Vec<usize>> = FastMap::default();
        for (i, c) in candidates.iter().enumerate() {
            for n in self.footprint_nodes(c.id) {
                let list = on_node.entry(n).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        loop {
            let room = match self.place(cq, id, choice, &t.delta) {
                Ok(p) if self.quota_fits(cq, usage, &t.quota) => return Some(p),
                Ok(_) => {
                    // Room enough, quota short: the quota victims make it fit.
                    let i =
                        (0..candidates.len()).find(|&i| !t.chosen.contains(&i) && is_quota_victim(candidates[i].id))?;
                    self.take(i, t);
                    continue;
                }
                Err(room) => room,
            };
            let taken = self.cheapest_node(id, choice, &room, candidates, &on_node, &t.chosen, &t.delta)?;
            for i in taken {
                self.take(i, t);
            }
        }
    }

    /// Makes the victim set minimal: gives back, latest chosen first,
    /// every victim whose room and quota are not needed. Returns the
    /// placement without them.
    fn give_back_unneeded(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        usage: &[(usize, Amount)],
        t: &mut Taking<'_, '_>,
        mut placement: Placement,
    ) -> Placement {
        for k in (0..t.chosen.len()).rev() {
            let v = t.candidates[t.chosen[k]].id;
            self.footprint(v, -1, &mut t.delta);
            if t.quota.check {
                self.overlay_holding(&mut t.quota.ov, v, 1);
            }
            let placed = if self.quota_fits(cq, usage, &t.quota) {
                self.place(cq, id, choice, &t.delta).ok()
            } else {
                None
            };
            match placed {
                Some(p) => {
                    placement = p;
                    t.chosen.remove(k);
                }
                None => {
                    self.footprint(v, 1, &mut t.delta);
                    if t.quota.check {
                        self.overlay_holding(&mut t.quota.ov, v, -1);
                    }
                }
            }
        }
        placement
    }

    fn quota_fits(&self, cq: CqId, usage: &[(usize, Amount)], quota: &QuotaSide) -> bool {
        !quota.check || self.fits_overlay(&quota.ov, cq, usage, quota.within_nominal)
    }

    /// The victims the policy may allow, in victim order: admitted
    /// workloads of the own queue and of cohort queues that borrow what
    /// the preemptor uses (reclaiming or borrowing: the caller narrows
    /// them), and the quota victims.
    fn placement_candidates(
        &self,
        cq: CqId,
        id: WlId,
        usage: &[(usize, Amount)],
        quota_victims: &[(WlId, PreemptionReason)],
        now: Millis,
    ) -> Vec<Candidate<'_>> {
        let me = self.wl(id);
        let policy = self.queues.cqs[cq].spec.preemption;
        let frs: Vec<FrKey> = usage
            .iter()
            .map(|&(s, _)| self.queues.cqs[cq].quota.slots[s].fr)
            .collect();
        let mut pool = Pool {
            candidates: Vec::new(),
            protected: 0,
            until: None,
        };
        if policy.within_cluster_queue != WithinClusterQueue::Never {
            self.collect_candidates(cq, cq, me, &frs, now, &mut pool);
        }
        for m in self.domain(cq) {
            if m != cq && self.queue_borrows_any(m, &frs, None) {
                self.collect_candidates(m, cq, me, &frs, now, &mut pool);
            }
        }
        let mut candidates = pool.candidates;
        // Quota victims the collection above does not list (it looks at
        // every resource the preemptor uses, quota only at the short ones).
        for &(v, _) in quota_victims {
            if candidates.iter().any(|c| c.id == v) {
                continue;
            }
            let w = self.wl(v);
            if let State::Admitted(h) = &w.state {
                candidates.push(Candidate {
                    id: v,
                    cq: h.cq,
                    priority: w.priority,
                    admitted_at: h.admitted_at,
                    uid: &w.uid,
                    in_borrowing_queue: h.cq != cq,
                    reclaim_ok: true,
                    borrow_ok: true,
                    held: &h.usage,
                    last_preempted: w.last_preempted,
                    cost: VictimCost::default(),
                });
            }
        }
        // Node room is short of everything the preemptor asks for.
        if self.prices_victims(cq) {
            let contested = self.contested(cq, usage, |_| true);
            self.price_candidates(cq, &contested, now, &mut candidates);
        }
        candidates.sort_by_key(|c| VictimOrder::new(c.in_borrowing_queue, c.priority, c.cost, c.admitted_at, c.uid, 0));
        candidates
    }

    /// Counts candidate `i` as gone.
    fn take(&self, i: usize, t: &mut Taking<'_, '_>) {
        let v = t.candidates[i].id;
        self.footprint(v, 1, &mut t.delta);
        if t.quota.check {
            self.overlay_holding(&mut t.quota.ov, v, -1);
        }
        t.chosen.push(i);
    }

    /// For the pod set that does not fit, the node where the fewest
    /// candidates not chosen yet (then the lowest-priority ones, then the
    /// first node) make room for one more of its pods, and those
    /// candidates; `None` when no node can gain one.
    #[allow(clippy::too_many_arguments)]
    fn cheapest_node(
        &self,
        id: WlId,
        choice: &Choice,
        room: &NoRoom,
        candidates: &[Candidate<'_>],
        on_node: &FastMap<NodeId, Vec<usize>>,
        chosen: &[usize],
        delta: &NodeDelta,
    ) -> Option<Vec<usize>> {
        let per_pod = self.per_pod(id, room.pod_set);
        let ps = &self.wl(id).pod_sets[room.pod_set];
        let mut flavors: Vec<FlavorId> = choice.0[room.pod_set].iter().map(|g| g.flavor).collect();
        flavors.sort_unstable();
        flavors.dedup();
        let mut best: Option<((usize, i32, NodeId), Vec<usize>)> = None;
        for n in self.candidate_nodes(&flavors, ps) {
            let Some(here) = on_node.get(&n) else { continue };
            let node = &self.inv.nodes[n];
            let k = self.fit_count(n, &per_pod, delta) as Amount;
            // What the victims taken so far on this node give back.
            let (mut extra, mut bound): (ResVec, ResVec) = (Vec::new(), Vec::new());
            let short = |extra: &ResVec, bound: &ResVec| {
                per_pod.iter().any(|&(r, a)| {
                    a > 0
                        && node.free(r, self.catalog.pods_res)
                            + delta.gain(node, n, r, res_get(extra, r), res_get(bound, r))
                            < (k + 1) * a
                })
            };
            let mut taken = Vec::new();
            for &i in here {
                if !short(&extra, &bound) {
                    break;
                }
                if chosen.contains(&i) {
                    continue;
                }
                let wl = self.wl(candidates[i].id);
                for (m, _, v) in wl.bound() {
                    if *m == n {
                        v.iter().for_each(|&(r, a)| res_add(&mut bound, r, a));
                    }
                }
                for (m, v) in wl.reserved() {
                    if *m == n {
                        v.iter().for_each(|&(r, a)| res_add(&mut extra, r, a));
                    }
                }
                taken.push(i);
            }
            if taken.is_empty() || short(&extra, &bound) {
                continue;
            }
            let cost = (
                taken.len(),
                taken.iter().map(|&i| candidates[i].priority).max().unwrap_or(i32::MIN),
                n,
            );
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, taken));
            }
        }
        best.map(|(_, taken)| taken)
    }
}
