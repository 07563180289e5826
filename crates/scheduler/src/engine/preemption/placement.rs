//! Placement-aware victims. When a workload fits quota (or will, once its
//! quota victims are gone) but not the nodes, more victims are chosen node
//! by node: for the pod that does not fit, the node where the fewest
//! allowed victims (then the lowest-priority ones) make room for one more
//! of it, so whole nodes are freed rather than slivers on many. Victims
//! are allowed by the same policies as for quota, minimum runtime
//! included. The set is then made minimal (a victim whose room is not
//! needed is given back, latest chosen first), and nothing is preempted
//! when even every allowed victim would not make the workload placeable.

use super::*;

impl Engine {
    /// `quota_victims` plus the victims that make the workload placeable
    /// with `choice`, and where it goes; `None` when no allowed set does.
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
        let mut delta = self.leaving_delta();
        for (v, _) in &quota_victims {
            self.footprint(*v, 1, &mut delta);
        }
        if let Ok(p) = self.place(cq, id, choice, &delta) {
            return Some((quota_victims, p));
        }
        let me = self.wl(id);
        let policy = self.cqs[cq].spec.preemption;
        let frs: Vec<FrKey> = usage.iter().map(|&(s, _)| self.cqs[cq].slots[s].fr).collect();
        let (mut protected, mut until) = (0, None);
        let mut candidates: Vec<Candidate> = Vec::new();
        if policy.within_cluster_queue != WithinClusterQueue::Never {
            self.collect_candidates(cq, cq, me, &frs, now, &mut candidates, &mut protected, &mut until);
        }
        if let Some(c) = self.cqs[cq].cohort {
            for &m in &self.cohorts[c].members {
                if m != cq && self.queue_borrows_any(m, &frs, None) {
                    self.collect_candidates(m, cq, me, &frs, now, &mut candidates, &mut protected, &mut until);
                }
            }
        }
        candidates.retain(|c| {
            !quota_victims.iter().any(|(v, _)| *v == c.id) && (c.cq == cq || if borrowing { c.borrow_ok } else { c.reclaim_ok })
        });
        candidates.sort_by(|a, b| {
            order::VictimOrder::new(a.in_borrowing_queue, a.priority, a.admitted_at, a.uid, 0).cmp(
                &order::VictimOrder::new(b.in_borrowing_queue, b.priority, b.admitted_at, b.uid, 0),
            )
        });
        // Which candidates occupy which node.
        let mut on_node: FastMap<NodeId, Vec<usize>> = FastMap::default();
        for (i, c) in candidates.iter().enumerate() {
            let mut d = NodeDelta::default();
            self.footprint(c.id, 1, &mut d);
            for n in d.0.keys() {
                on_node.entry(*n).or_default().push(i);
            }
        }
        let mut chosen: Vec<usize> = Vec::new();
        let placement = loop {
            let room = match self.place(cq, id, choice, &delta) {
                Ok(p) => break p,
                Err(room) => room,
            };
            let per_pod = self.per_pod(id, room.pod_set);
            let ps = &me.pod_sets[room.pod_set];
            let mut flavors: Vec<FlavorId> = choice.0[room.pod_set].iter().map(|g| g.flavor).collect();
            flavors.dedup();
            let mut best: Option<((usize, i32, NodeId), Vec<usize>)> = None;
            for n in self.candidate_nodes(&flavors, ps) {
                let Some(here) = on_node.get(&n) else { continue };
                let k = self.fit_count(n, &per_pod, &delta) as Amount;
                let mut need: Vec<(ResId, Amount)> = per_pod
                    .iter()
                    .filter(|(_, a)| *a > 0)
                    .map(|&(r, a)| (r, (k + 1) * a - self.node_free(n, r, &delta)))
                    .collect();
                let mut taken = Vec::new();
                for &i in here {
                    if need.iter().all(|(_, a)| *a <= 0) {
                        break;
                    }
                    if chosen.contains(&i) {
                        continue;
                    }
                    let mut d = NodeDelta::default();
                    self.footprint(candidates[i].id, 1, &mut d);
                    for (r, a) in need.iter_mut() {
                        *a -= d.get(n, *r);
                    }
                    taken.push(i);
                }
                if taken.is_empty() || need.iter().any(|(_, a)| *a > 0) {
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
            let (_, taken) = best?;
            for i in taken {
                self.footprint(candidates[i].id, 1, &mut delta);
                chosen.push(i);
            }
        };
        // Minimal: give back, latest chosen first, every victim not needed.
        let mut placement = placement;
        for k in (0..chosen.len()).rev() {
            let v = candidates[chosen[k]].id;
            self.footprint(v, -1, &mut delta);
            match self.place(cq, id, choice, &delta) {
                Ok(p) => {
                    placement = p;
                    chosen.remove(k);
                }
                Err(_) => self.footprint(v, 1, &mut delta),
            }
        }
        let mut victims = quota_victims;
        victims.extend(chosen.into_iter().map(|i| {
            let c = &candidates[i];
            let reason = if c.cq == cq {
                PreemptionReason::InClusterQueue
            } else if borrowing {
                PreemptionReason::InCohortReclaimWhileBorrowing
            } else {
                PreemptionReason::InCohortReclamation
            };
            (c.id, reason)
        }));
        Some((victims, placement))
    }
}
