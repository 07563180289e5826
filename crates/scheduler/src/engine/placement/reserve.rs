//! What admitted workloads hold on nodes. When the engine admits a
//! workload (or a preemptor claims room) it records where its pods would
//! go; until they are bound, that room is *reserved* so nobody else is
//! placed there. Pods that are bound count on their real node through the
//! node's usage instead: a bound pod cancels a reserved pod like it (a pod
//! of a pod set whose requests its own cover) on the same node first,
//! then on any node, latest placed first. Every pod is so counted once,
//! on one node. Bound pods are those of the current admission: pods
//! reported while a workload holds nothing, and those of an admission
//! that ended, are left to the nodes' usage.

use crate::engine::state::State;
use crate::engine::{Engine, EngineError, WlId};
use crate::model::{Amount, BoundPods, NodeUsage};

use super::{NodeDelta, NodeId, ResVec, res_add, res_get};

impl Engine {
    /// Records the workload's pods bound to nodes (replacing what was said
    /// before), so its reservations shrink to the pods not bound yet. Only
    /// an admitted (evicting, preempting) workload's pods are recorded.
    pub fn set_workload_pods(&mut self, uid: &str, bound: &[BoundPods]) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        let mut list: Vec<(NodeId, u32, ResVec)> = Vec::with_capacity(bound.len());
        if self.holds(id) {
            for b in bound {
                let n = match self.inv.by_name.get(b.node.as_str()) {
                    Some(&n) => n,
                    None => {
                        self.set_node_usage(&b.node, &NodeUsage::default());
                        self.inv.by_name[b.node.as_str()]
                    }
                };
                let mut requested: ResVec = Vec::new();
                for (r, &a) in &b.requested {
                    res_add(&mut requested, self.catalog.resources.intern(r), a);
                }
                list.push((n, b.pods, requested));
            }
        }
        self.wl_mut(id).set_bound(list);
        self.update_reservation(id);
        Ok(())
    }

    /// Whether the workload is admitted, evicting or preempting.
    fn holds(&self, id: WlId) -> bool {
        matches!(
            self.wl(id).state,
            State::Admitted(_) | State::Evicting(_) | State::Preempting(_)
        )
    }

    /// The pod vector of one pod of pod set `ps` (with one `pods`).
    pub(in crate::engine) fn per_pod(&self, id: WlId, ps: usize) -> ResVec {
        let p = &self.wl(id).pod_sets[ps];
        let count = p.count.max(1) as Amount;
        let mut v: ResVec = p.requested().iter().map(|&(r, a)| (r, a / count)).collect();
        res_add(&mut v, self.catalog.pods_res, 1000);
        v
    }

    /// What the workload should hold on nodes now: its placement minus
    /// the pods already bound.
    fn wanted_reservation(&self, id: WlId) -> Vec<(NodeId, ResVec)> {
        let wl = self.wl(id);
        let placement = match &wl.state {
            State::Admitted(h) | State::Evicting(h) | State::Preempting(h) => &h.placement,
            _ => return Vec::new(),
        };
        if placement.pods.is_empty() {
            return Vec::new();
        }
        let per_pod: Vec<ResVec> = (0..wl.pod_sets.len()).map(|ps| self.per_pod(id, ps)).collect();
        // Unbound pods per placed entry, and bound pods not matched yet.
        let mut left: Vec<u32> = placement.pods.iter().map(|&(_, _, k)| k).collect();
        let mut unmatched = wl.bound().to_vec();
        let cancel = |i: usize, b: &mut (NodeId, u32, ResVec), left: &mut [u32]| {
            let pod = &per_pod[placement.pods[i].1];
            let mut m = left[i].min(b.1);
            for &(r, a) in pod {
                if r != self.catalog.pods_res && a > 0 {
                    m = m.min((res_get(&b.2, r) / a).clamp(0, u32::MAX as Amount) as u32);
                }
            }
            left[i] -= m;
            b.1 -= m;
            for &(r, a) in pod {
                if r != self.catalog.pods_res {
                    res_add(&mut b.2, r, -a * m as Amount);
                }
            }
        };
        // Same node first, in placement order (largest pods first); then
        // anywhere, latest placed first.
        for i in 0..left.len() {
            for b in unmatched.iter_mut().filter(|b| b.0 == placement.pods[i].0) {
                cancel(i, b, &mut left);
            }
        }
        for i in (0..left.len()).rev() {
            for b in unmatched.iter_mut() {
                if left[i] == 0 {
                    break;
                }
                cancel(i, b, &mut left);
            }
        }
        let mut out: Vec<(NodeId, ResVec)> = Vec::new();
        for (i, &(n, ps, _)) in placement.pods.iter().enumerate() {
            let k = left[i];
            if k == 0 {
                continue;
            }
            let i = match out.iter().position(|(m, _)| *m == n) {
                Some(i) => i,
                None => {
                    out.push((n, Vec::new()));
                    out.len() - 1
                }
            };
            for &(r, a) in &per_pod[ps] {
                res_add(&mut out[i].1, r, a * k as Amount);
            }
        }
        out
    }

    /// Brings the nodes' reservations for this workload in line with its
    /// state, placement and bound pods.
    pub(in crate::engine) fn update_reservation(&mut self, id: WlId) {
        if !self.holds(id) {
            // The admission ended: so did its pods.
            self.wl_mut(id).set_bound(Vec::new());
        }
        if !self.placement_on() {
            return;
        }
        self.update_reservation_only(id);
        self.refresh_leaving(id);
    }

    fn update_reservation_only(&mut self, id: WlId) {
        let wanted = self.wanted_reservation(id);
        let old = self.wl_mut(id).set_reserved(Vec::new());
        for (n, v) in &old {
            for &(r, a) in v {
                res_add(&mut self.inv.nodes[*n].reserved, r, -a);
            }
        }
        for (n, v) in &wanted {
            for &(r, a) in v {
                res_add(&mut self.inv.nodes[*n].reserved, r, a);
            }
        }
        for (n, v) in &old {
            let now = wanted
                .iter()
                .find(|(m, _)| m == n)
                .map(|(_, w)| w.as_slice())
                .unwrap_or(&[]);
            if v.iter().any(|&(r, a)| a > res_get(now, r)) {
                self.node_gained(*n);
            }
        }
        self.wl_mut(id).set_reserved(wanted);
    }

    /// What the workload occupies on each node: its bound pods and its
    /// reservations (what its removal would free).
    pub(in crate::engine) fn footprint(&self, id: WlId, sign: Amount, delta: &mut NodeDelta) {
        let wl = self.wl(id);
        for (n, _, v) in wl.bound() {
            for &(r, a) in v {
                delta.add_bound(*n, r, sign * a);
            }
        }
        for (n, v) in wl.reserved() {
            for &(r, a) in v {
                delta.add(*n, r, sign * a);
            }
        }
    }

    /// The nodes a workload occupies (bound pods or reservations).
    pub(in crate::engine) fn footprint_nodes(&self, id: WlId) -> impl Iterator<Item = NodeId> + '_ {
        let wl = self.wl(id);
        wl.bound().iter().map(|b| b.0).chain(wl.reserved().iter().map(|r| r.0))
    }

    /// Forgets a finished workload's bound pods and takes their requests
    /// off their nodes (the forecast's stand-in for the pods going away).
    pub(crate) fn forget_bound_pods(&mut self, uid: &str) {
        let Ok(id) = self.id_of(uid) else { return };
        for (n, _, v) in self.wl_mut(id).set_bound(Vec::new()) {
            for (r, a) in v {
                res_add(&mut self.inv.nodes[n].used, r, -a);
            }
            self.node_gained(n);
        }
        self.refresh_leaving(id);
    }
}
