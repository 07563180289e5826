//! Never placeable: a pod set that no node of any flavor it may use could
//! hold even with nothing else running (too few nodes, none large enough,
//! or none its labels, selector and taints allow). Waiting for quota never
//! helps such a workload, so it is told so instead of "insufficient
//! quota". Decided on the nodes as they are: a node that joins, grows or
//! is uncordoned wakes its flavors' queues (and a node that leaves or
//! shrinks does too), so the verdict is looked at again.

use crate::decision::{Explanation, NeverOnNodes, PendingReason, Verdict};
use crate::engine::{CqId, Engine, WlId};

use super::fit::NoRoom;

impl Engine {
    /// Why the workload (with its pod counts as they are) could never be
    /// placed, or `None` when every pod set fits on the empty nodes of
    /// some flavor (or placement is off). Per flavor of the first resource
    /// group that no flavor can hold, its verdict.
    pub(in crate::engine) fn never_placeable(&self, cq: CqId, id: WlId) -> Option<Explanation> {
        if !self.placement_on() {
            return None;
        }
        let q = &self.queues.cqs[cq];
        for (pi, ps) in self.wl(id).pod_sets.iter().enumerate() {
            let needs = self.group_needs(q, ps).ok()?;
            for need in needs {
                let mut verdicts = Vec::new();
                let mut some_fit = false;
                for gf in &q.quota.groups[need.group].flavors {
                    if let Err(v) = self.flavor_compatible(gf.flavor, ps) {
                        verdicts.push(self.verdict(ps, gf.flavor, v));
                        continue;
                    }
                    match self.fits_empty_nodes(cq, id, pi, need.group, gf.flavor) {
                        Ok(()) => {
                            some_fit = true;
                            break;
                        }
                        Err(room) => {
                            let v = Verdict::NeverOnNodes(Box::new(self.never_on_nodes(&room)));
                            verdicts.push(self.verdict(ps, gf.flavor, v));
                        }
                    }
                }
                if !some_fit {
                    return Some(Explanation {
                        reason: PendingReason::NeverPlaceable,
                        flavors: verdicts,
                    });
                }
            }
        }
        None
    }

    fn never_on_nodes(&self, room: &NoRoom) -> NeverOnNodes {
        NeverOnNodes {
            resource: self.catalog.resources.name(room.resource).to_string(),
            per_pod: room.per_pod,
            pods: room.pods,
            placeable: room.placeable,
            nodes: room.nodes,
            largest: room.largest_free,
            largest_node: room.largest_node.map(|n| self.inv.nodes[n].name.to_string()),
            topology: room.topology.clone(),
        }
    }
}
