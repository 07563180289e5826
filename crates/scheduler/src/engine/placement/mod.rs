//! Placement: with [`PlacementMode::Nodes`], a workload is admitted only if
//! all its pods fit on the nodes of their flavors at the same time.
//!
//! ```text
//!   inventory.rs   nodes: upserts, usage of bound pods, flavor membership, wakeups
//!   fit.rs         the rule: best fit of identical pods, largest pod sets first
//!   reserve.rs     what admitted workloads hold on nodes (virtual until bound)
//!   verdict.rs     placement as the cycle asks for it, and its explanation
//! ```
//!
//! A node's free capacity is its allocatable minus the requests of every
//! pod bound to it (reported by the caller) minus *reservations*: the pods
//! of admitted workloads that are not bound yet, counted where the engine
//! placed them when it admitted the workload.

use super::*;

mod fit;
mod inventory;
mod reserve;
mod verdict;

pub(super) use fit::{NoRoom, Placement};
pub(super) use verdict::{ClaimPlacement, Placed};

pub(super) type NodeId = usize;

/// Amounts by resource, sorted by resource id (a node has a handful).
pub(super) type ResVec = Vec<(ResId, Amount)>;

pub(super) fn res_get(v: &[(ResId, Amount)], r: ResId) -> Amount {
    v.iter().find(|(k, _)| *k == r).map(|(_, a)| *a).unwrap_or(0)
}

pub(super) fn res_add(v: &mut ResVec, r: ResId, delta: Amount) {
    match v.binary_search_by_key(&r, |(k, _)| *k) {
        Ok(i) => {
            v[i].1 += delta;
            if v[i].1 == 0 {
                v.remove(i);
            }
        }
        Err(i) if delta != 0 => v.insert(i, (r, delta)),
        Err(_) => {}
    }
}

/// A node as the engine keeps it.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) name: Arc<str>,
    pub(super) labels: BTreeMap<String, String>,
    /// `NoSchedule` and `NoExecute` taints only.
    pub(super) taints: Vec<Taint>,
    pub(super) alloc: ResVec,
    /// Whether `alloc` limits the number of pods.
    pub(super) pod_limit: bool,
    pub(super) schedulable: bool,
    /// Removed: kept so that reservations naming it stay valid.
    pub(super) live: bool,
    /// Requests of the bound pods, and the terminating part of them.
    pub(super) used: ResVec,
    pub(super) terminating: ResVec,
    /// Admitted workloads' pods not bound yet.
    pub(super) reserved: ResVec,
}

impl Node {
    /// Free amount of `r` (`pods` is unlimited when the node does not say).
    pub(super) fn free(&self, r: ResId, pods: ResId) -> Amount {
        if r == pods && !self.pod_limit {
            return Amount::MAX / 4;
        }
        res_get(&self.alloc, r) - res_get(&self.used, r) - res_get(&self.reserved, r)
    }
}

/// The engine's nodes.
#[derive(Clone, Default)]
pub(super) struct Inventory {
    pub(super) nodes: Vec<Node>,
    pub(super) by_name: HashMap<Arc<str>, NodeId>,
    /// Per flavor, the live nodes whose labels include the flavor's node
    /// labels, in id order.
    pub(super) flavor_nodes: FastMap<FlavorId, Vec<NodeId>>,
    /// Largest allocatable of each resource over all nodes: the scale on
    /// which pods' requests are compared.
    pub(super) max_alloc: FastMap<ResId, Amount>,
    /// Flavors some of whose nodes gained free capacity since the last
    /// cycle: their queues are woken by the next one.
    pub(super) freed: BTreeSet<FlavorId>,
}

/// Extra free capacity per node in a what-if (victims gone, claims not
/// counted); negative for capacity taken.
#[derive(Clone, Default, Debug)]
pub(super) struct NodeDelta(pub(super) FastMap<NodeId, ResVec>);

impl NodeDelta {
    pub(super) fn add(&mut self, n: NodeId, r: ResId, amount: Amount) {
        res_add(self.0.entry(n).or_default(), r, amount);
    }
    pub(super) fn get(&self, n: NodeId, r: ResId) -> Amount {
        self.0.get(&n).map_or(0, |v| res_get(v, r))
    }
}

impl Engine {
    pub(super) fn placement_on(&self) -> bool {
        self.config.placement == PlacementMode::Nodes
    }

    /// Free `r` on node `n` under `delta`.
    pub(super) fn node_free(&self, n: NodeId, r: ResId, delta: &NodeDelta) -> Amount {
        self.inv.nodes[n].free(r, self.pods_res) + delta.get(n, r)
    }
}
