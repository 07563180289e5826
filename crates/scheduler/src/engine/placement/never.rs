//! Never placeable: a pod set that no node of any flavor it may use could
//! hold even with nothing else running (too few nodes, none large enough,
//! or none its labels, selector and taints allow). Waiting for quota never
//! helps such a workload, so it is told so instead of "insufficient
//! quota". Decided on the nodes as they are: a node that joins, grows or
//! is uncordoned wakes its flavors' queues (and a node that leaves or
//! shrinks does too), so the verdict is looked at again.

use crate::decision::{Explanation, FlavorVerdict, NeverOnNodes, PendingReason, Verdict};
use crate::engine::{CqId, Engine, WlId};

use super::fit::NoRoom;
use crate::engine::flavor::GroupChoice;

/// At most this many choices of flavors (one per resource group) are
/// tried for one pod set; beyond, it is not called never placeable.
const MAX_CHOICES: usize = 64;

impl Engine {
    /// Why the workload (with its pod counts as they are) could never be
    /// placed, or `None` when every pod set fits on the empty nodes of
    /// some choice of flavors (or placement is off): for the first pod set
    /// that fits under no choice, each incompatible flavor's verdict and
    /// each choice's, named by the flavor of its main resource.
    pub(in crate::engine) fn never_placeable(&self, cq: CqId, id: WlId) -> Option<Explanation> {
        if !self.placement_on() {
            return None;
        }
        (0..self.wl(id).pod_sets.len()).find_map(|pi| {
            self.pod_set_never_placeable(cq, id, pi).map(|flavors| Explanation {
                reason: PendingReason::NeverPlaceable,
                flavors,
            })
        })
    }

    /// The verdicts when no choice of one compatible flavor per resource
    /// group holds pod set `pi` on empty nodes; `None` when one does. The
    /// groups are placed together, as admission places them: a GPU
    /// flavor's tolerations and labels apply to the pod's CPU and memory
    /// too.
    fn pod_set_never_placeable(&self, cq: CqId, id: WlId, pi: usize) -> Option<Vec<FlavorVerdict>> {
        let q = &self.queues.cqs[cq];
        let ps = &self.wl(id).pod_sets[pi];
        let needs = self.group_needs(q, ps).ok()?;
        let mut verdicts = Vec::new();
        let mut usable: Vec<Vec<GroupChoice>> = Vec::with_capacity(needs.len());
        for need in &needs {
            let mut group = Vec::new();
            let g = &q.quota.groups[need.group];
            for gf in &g.flavors {
                match self.flavor_compatible(gf.flavor, ps, g) {
                    Ok(()) => group.push(GroupChoice {
                        group: need.group,
                        flavor: gf.flavor,
                    }),
                    Err(v) => verdicts.push(self.verdict(ps, gf.flavor, v)),
                }
            }
            usable.push(group);
        }
        let choices = choices(&usable)?;
        for choice in &choices {
            match self.fits_empty_nodes(cq, id, pi, choice) {
                Ok(()) => return None,
                Err(room) => {
                    let v = Verdict::NeverOnNodes(Box::new(self.never_on_nodes(&room)));
                    verdicts.push(self.verdict(ps, room.flavor, v));
                }
            }
        }
        Some(verdicts)
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

/// Every choice of one entry per group, first groups varying slowest;
/// `None` when there are more than [`MAX_CHOICES`].
fn choices(groups: &[Vec<GroupChoice>]) -> Option<Vec<Vec<GroupChoice>>> {
    let total = groups.iter().try_fold(1usize, |n, g| n.checked_mul(g.len()))?;
    if total > MAX_CHOICES {
        return None;
    }
    let mut out: Vec<Vec<GroupChoice>> = vec![Vec::new()];
    for g in groups {
        out = out
            .iter()
            .flat_map(|prefix| {
                g.iter().map(move |&c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
    }
    Some(out)
}
