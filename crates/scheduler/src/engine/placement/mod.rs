//! Placement: with [`PlacementMode::Nodes`], a workload is admitted only if
//! all its pods fit on the nodes of their flavors at the same time.
//!
//! ```text
//!   inventory.rs   nodes: upserts, usage of bound pods, flavor membership, wakeups
//!   fit.rs         the rule: best fit of identical pods, largest pod sets first
//!   fallback.rs    another flavor when the first one's nodes have no room
//!   reserve.rs     what admitted workloads hold on nodes (virtual until bound)
//!   verdict.rs     placement as the cycle asks for it, and its explanation
//!   never.rs       pod sets no node could ever hold, even empty
//!   view.rs        read-only views: a workload's placement, a node's reservations
//! ```
//!
//! A node's free capacity is its allocatable minus the requests of every
//! pod bound to it (reported by the caller) minus *reservations*: the pods
//! of admitted workloads that are not bound yet, counted where the engine
//! placed them when it admitted the workload.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::ledger::{FlavorId, ResId};
use crate::model::{Amount, PlacementMode, Taint};

use super::fast_map::FastMap;
use super::{Engine, WlId};

mod fallback;
mod fit;
mod inventory;
mod never;
mod reserve;
mod verdict;
mod view;

pub(super) use fit::{NoRoom, Placement};
pub(super) use verdict::{ClaimPlacement, Unplaced};

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

    /// Allocatable amount of `r`: what is free with nothing on the node.
    pub(super) fn capacity(&self, r: ResId, pods: ResId) -> Amount {
        if r == pods && !self.pod_limit {
            return Amount::MAX / 4;
        }
        res_get(&self.alloc, r)
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
    /// Per flavor whose nodes share their GPUs, the fewest replicas per
    /// GPU among them ([`crate::sharing`]); absent: whole GPUs.
    pub(super) flavor_replicas: FastMap<FlavorId, u32>,
    /// Largest allocatable of each resource over all nodes: the scale on
    /// which pods' requests are compared.
    pub(super) max_alloc: FastMap<ResId, Amount>,
    /// Flavors some of whose nodes gained free capacity since the last
    /// cycle: their queues are woken by the next one.
    pub(super) freed: BTreeSet<FlavorId>,
    /// How many nodes have terminating pods.
    pub(super) terminating_nodes: usize,
    /// Room that evictions under way and terminating pods give back (see
    /// [`Engine::leaving_delta`]), kept up to date: the footprint of every
    /// workload being evicted, as added.
    pub(super) leaving: NodeDelta,
    pub(super) leaving_of: FastMap<WlId, NodeDelta>,
}

/// A what-if on nodes: room gained per node (negative for room taken),
/// and the requests of bound pods counted as gone. With `terminating`,
/// terminating pods count as gone too. An evicted workload's bound pods
/// are usually among the terminating ones, so a node gains the larger of
/// the two, never their sum (which may underestimate, never overestimate,
/// the room that comes back).
#[derive(Clone, Default, Debug)]
pub(super) struct NodeDelta {
    extra: FastMap<NodeId, ResVec>,
    bound: FastMap<NodeId, ResVec>,
    pub(super) terminating: bool,
}

impl NodeDelta {
    /// Room gained (taken when negative) on node `n`.
    pub(super) fn add(&mut self, n: NodeId, r: ResId, amount: Amount) {
        add_to(&mut self.extra, n, r, amount);
    }
    /// Bound pods on node `n` counted as gone (back when negative).
    pub(super) fn add_bound(&mut self, n: NodeId, r: ResId, amount: Amount) {
        add_to(&mut self.bound, n, r, amount);
    }
    /// Room gained on `node` (id `n`), with `extra` and `bound` more.
    pub(super) fn gain(&self, node: &Node, n: NodeId, r: ResId, extra: Amount, bound: Amount) -> Amount {
        if self.is_empty() {
            return extra + bound;
        }
        let e = self.extra.get(&n).map_or(0, |v| res_get(v, r)) + extra;
        let b = self.bound.get(&n).map_or(0, |v| res_get(v, r)) + bound;
        if self.terminating {
            e + b.max(res_get(&node.terminating, r))
        } else {
            e + b
        }
    }
    /// Changes nothing.
    pub(super) fn is_empty(&self) -> bool {
        !self.terminating && self.extra.is_empty() && self.bound.is_empty()
    }
    /// Adds another what-if to this one.
    pub(super) fn merge(&mut self, other: &NodeDelta) {
        self.merge_scaled(other, 1);
        self.terminating |= other.terminating;
    }
    /// Adds (`sign` 1) or takes away (-1) another what-if's amounts.
    pub(super) fn merge_scaled(&mut self, other: &NodeDelta, sign: Amount) {
        for (&n, v) in &other.extra {
            for &(r, a) in v {
                self.add(n, r, sign * a);
            }
        }
        for (&n, v) in &other.bound {
            for &(r, a) in v {
                self.add_bound(n, r, sign * a);
            }
        }
    }
}

/// Adds to a node's amounts, dropping the node when nothing is left.
fn add_to(map: &mut FastMap<NodeId, ResVec>, n: NodeId, r: ResId, amount: Amount) {
    let v = map.entry(n).or_default();
    res_add(v, r, amount);
    if v.is_empty() {
        map.remove(&n);
    }
}

impl Engine {
    pub(super) fn placement_on(&self) -> bool {
        self.catalog.config.placement == PlacementMode::Nodes
    }

    /// Free `r` on node `n` under `delta`.
    pub(super) fn node_free(&self, n: NodeId, r: ResId, delta: &NodeDelta) -> Amount {
        let node = &self.inv.nodes[n];
        node.free(r, self.catalog.pods_res) + delta.gain(node, n, r, 0, 0)
    }
}
