//! Placement as the cycle asks for it: whether an admission that fits
//! quota also fits the nodes (or will once evictions and terminating pods
//! are gone), the explanation when it does not, and a best-effort
//! placement for workloads restored as admitted.

use crate::decision::{Explanation, FlavorVerdict, PendingReason, PodSetAssignment, Verdict};
use crate::engine::flavor::{Choice, GroupChoice};
use crate::engine::state::State;
use crate::engine::{CqId, Engine, WlId};
use crate::ledger;

use super::NodeDelta;
use super::{NoRoom, Placement};

/// Why a quota-fitting attempt does not fit the nodes now.
pub(in crate::engine) struct Unplaced {
    pub(in crate::engine) room: Box<NoRoom>,
    /// It would once evictions under way and terminating pods are gone.
    pub(in crate::engine) after_evictions: bool,
}

/// A preemptor whose victims are gone: where it goes now.
pub(in crate::engine) enum ClaimPlacement {
    Placed(Placement),
    /// Not yet: terminating pods or evictions still hold the room.
    Wait,
    /// The room is gone (taken by pods Sluice does not admit).
    Lost,
}

impl Engine {
    /// Places an attempt (always succeeds, empty, in quota-only mode).
    pub(in crate::engine) fn try_place(&self, cq: CqId, id: WlId, choice: &Choice) -> Result<Placement, Unplaced> {
        if !self.placement_on() {
            return Ok(Placement::default());
        }
        self.place(cq, id, choice, &NodeDelta::default()).map_err(|room| {
            let later = self.leaving_delta();
            Unplaced {
                room,
                after_evictions: !later.is_empty() && self.place(cq, id, choice, later).is_ok(),
            }
        })
    }

    /// Room that terminating pods and workloads being evicted give back.
    pub(in crate::engine) fn leaving_delta(&self) -> &NodeDelta {
        &self.inv.leaving
    }

    /// Brings the leaving room in line with a workload's state and
    /// footprint (call after either changes).
    pub(in crate::engine) fn refresh_leaving(&mut self, id: WlId) {
        if !self.placement_on() {
            return;
        }
        if let Some(old) = self.inv.leaving_of.remove(&id) {
            self.inv.leaving.merge_scaled(&old, -1);
        }
        if matches!(self.wl(id).state, State::Evicting(_)) {
            let mut own = NodeDelta::default();
            self.footprint(id, 1, &mut own);
            self.inv.leaving.merge_scaled(&own, 1);
            self.inv.leaving_of.insert(id, own);
        }
    }

    /// Why a workload that fits quota does not fit the nodes, in numbers.
    pub(in crate::engine) fn no_room_explanation(&self, cq: CqId, id: WlId, room: &NoRoom) -> Explanation {
        let q = &self.queues.cqs[cq];
        let (quota_free, nominal) = q
            .quota
            .slot_of
            .get(&(room.flavor, room.resource))
            .map(|&s| {
                let slot = &q.quota.slots[s];
                // Within nominal, plus what the cohort tree lends now.
                let (available, _) = ledger::headroom(slot, 0, self.chain(cq, s, None));
                (available, slot.nominal)
            })
            .unwrap_or((0, 0));
        let ps = &self.wl(id).pod_sets[room.pod_set];
        Explanation {
            reason: PendingReason::NoPlacement,
            flavors: vec![FlavorVerdict {
                pod_set: ps.name.to_string(),
                flavor: self.catalog.flavor_names.name(room.flavor).to_string(),
                verdict: Verdict::NoNodeFits {
                    resource: self.catalog.resources.name(room.resource).to_string(),
                    per_pod: room.per_pod,
                    pods: room.pods,
                    placeable: room.placeable,
                    quota_free,
                    nominal,
                    nodes: room.nodes,
                    largest_free: room.largest_free,
                    largest_node: room.largest_node.map(|n| self.inv.nodes[n].name.to_string()),
                    topology: room.topology.clone(),
                },
            }],
        }
    }

    /// Where a preemptor goes once its victims are gone: placed again on
    /// the nodes as they are, without its own reservation.
    pub(in crate::engine) fn claim_placement(&self, cq: CqId, id: WlId) -> ClaimPlacement {
        if !self.placement_on() {
            return ClaimPlacement::Placed(Placement::default());
        }
        let State::Preempting(h) = &self.wl(id).state else {
            return ClaimPlacement::Lost;
        };
        let choice = self.choice_of(cq, id, &h.assignment);
        let mut delta = NodeDelta::default();
        self.footprint(id, 1, &mut delta);
        if let Ok(p) = self.place(cq, id, &choice, &delta) {
            return ClaimPlacement::Placed(p);
        }
        delta.merge(self.leaving_delta());
        match self.place(cq, id, &choice, &delta) {
            Ok(_) => ClaimPlacement::Wait,
            Err(_) => ClaimPlacement::Lost,
        }
    }

    /// Where a workload restored as admitted would be placed now, within
    /// the topology domains its admission names, or nowhere (its pods are
    /// then only counted once bound).
    pub(in crate::engine) fn restored_placement(
        &self,
        cq: CqId,
        id: WlId,
        assignments: &[PodSetAssignment],
    ) -> Placement {
        if !self.placement_on() {
            return Placement::default();
        }
        let choice = self.choice_of(cq, id, assignments);
        let pinned: Vec<(usize, &str)> = self
            .wl(id)
            .pod_sets
            .iter()
            .enumerate()
            .filter_map(|(pi, ps)| {
                let a = assignments.iter().find(|a| a.name == *ps.name)?;
                Some((pi, a.topology.as_ref()?.value.as_str()))
            })
            .collect();
        self.place_pinned(cq, id, &choice, &NodeDelta::default(), &pinned)
            .unwrap_or_default()
    }

    /// The flavor choice an assignment records.
    pub(in crate::engine) fn choice_of(&self, cq: CqId, id: WlId, assignments: &[PodSetAssignment]) -> Choice {
        let q = &self.queues.cqs[cq];
        let wl = self.wl(id);
        let mut choice = Vec::with_capacity(wl.pod_sets.len());
        for ps in &wl.pod_sets {
            let Some(a) = assignments.iter().find(|a| a.name == *ps.name) else {
                choice.push(Vec::new());
                continue;
            };
            let mut groups: Vec<GroupChoice> = Vec::new();
            for &(r, _) in &ps.total {
                let (Some(&g), Some(f)) = (
                    q.quota.group_of.get(&r),
                    a.flavors
                        .get(self.catalog.resources.name(r).as_ref())
                        .and_then(|f| self.catalog.flavor_names.get(f)),
                ) else {
                    continue;
                };
                if !groups.iter().any(|c| c.group == g) {
                    groups.push(GroupChoice { group: g, flavor: f });
                }
            }
            choice.push(groups);
        }
        Choice(choice)
    }
}
