//! Another flavor when the first does not fit the nodes. Flavor
//! assignment takes, per pod set and resource group, the first flavor in
//! the queue's order whose quota fits. When those flavors' nodes have no
//! room, the other combinations of the pod set's compatible flavors are
//! tried in the same preference order (at most 16, as for preemption):
//! the first whose quota fits now and whose nodes hold the pods is taken.
//! Only when none does is preemption tried, on the first choice.

use crate::engine::flavor::{Attempt, FlavorOption};
use crate::engine::overlay::Overlay;
use crate::engine::{CqId, Engine, WlId};
use crate::ledger::FlavorId;

use super::NodeDelta;
use super::fit::Placement;

impl Engine {
    /// A flavor choice other than `attempt`'s that fits quota and the
    /// nodes now, with where the pods go.
    pub(in crate::engine) fn placed_alternative(
        &self,
        cq: CqId,
        id: WlId,
        attempt: &Attempt,
    ) -> Option<(Attempt, Placement)> {
        let q = &self.queues.cqs[cq];
        let wl = self.wl(id);
        let mut options: Vec<FlavorOption> = Vec::new();
        for (pi, ps) in wl.pod_sets.iter().enumerate() {
            for need in self.group_needs(q, ps).ok()? {
                let group = &q.quota.groups[need.group];
                let flavors: Vec<FlavorId> = group
                    .flavors
                    .iter()
                    .map(|gf| gf.flavor)
                    .filter(|&f| self.flavor_compatible(f, ps, group).is_ok())
                    .collect();
                options.push(FlavorOption {
                    pod_set: pi,
                    group: need.group,
                    flavors,
                });
            }
        }
        if options.iter().any(|o| o.flavors.is_empty()) {
            return None;
        }
        let mut pick = vec![0usize; options.len()];
        for _ in 0..16 {
            let choice = self.choice_from_pick(wl.pod_sets.len(), &options, &pick);
            if choice != attempt.choice {
                let usage = self.option_usage(cq, id, &options, &pick);
                if self.fits_overlay(&Overlay::default(), cq, &usage, false)
                    && let Ok(p) = self.place(cq, id, &choice, &NodeDelta::default())
                {
                    let borrowing = usage.iter().any(|&(s, a)| {
                        let slot = &q.quota.slots[s];
                        slot.effective() + a > slot.nominal
                    });
                    return Some((
                        Attempt {
                            usage,
                            choice,
                            borrowing,
                        },
                        p,
                    ));
                }
            }
            // Next combination, last option fastest.
            let mut k = options.len();
            loop {
                if k == 0 {
                    return None;
                }
                k -= 1;
                pick[k] += 1;
                if pick[k] < options[k].flavors.len() {
                    break;
                }
                pick[k] = 0;
            }
        }
        None
    }
}
