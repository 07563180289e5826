//! What admitted workloads hold on nodes. When the engine admits a
//! workload (or a preemptor claims room) it records where its pods would
//! go; until they are bound, that room is *reserved* so nobody else is
//! placed there. Pods that are bound count on their real node through the
//! node's usage instead: a bound pod cancels a reserved one on the same
//! node first, then on any node, latest placed first. Every pod is so
//! counted once, on one node.

use super::*;

impl Engine {
    /// Records the workload's pods bound to nodes (replacing what was said
    /// before), so its reservations shrink to the pods not bound yet.
    pub fn set_workload_pods(&mut self, uid: &str, bound: &[BoundPods]) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        let mut list: Vec<(NodeId, u32, ResVec)> = Vec::with_capacity(bound.len());
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
                res_add(&mut requested, self.resources.intern(r), a);
            }
            list.push((n, b.pods, requested));
        }
        self.wl_mut(id).bound = list;
        self.update_reservation(id);
        Ok(())
    }

    /// The pod vector of one pod of pod set `ps` (with one `pods`).
    pub(in crate::engine) fn per_pod(&self, id: WlId, ps: usize) -> ResVec {
        let p = &self.wl(id).pod_sets[ps];
        let count = p.count.max(1) as Amount;
        let mut v: ResVec = p.total.iter().map(|&(r, a)| (r, a / count)).collect();
        res_add(&mut v, self.pods_res, 1000);
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
        let mut bound_left: FastMap<NodeId, u32> = FastMap::default();
        for &(n, k, _) in &wl.bound {
            *bound_left.entry(n).or_default() += k;
        }
        let mut kept: Vec<(NodeId, usize, u32)> = placement
            .pods
            .iter()
            .map(|&(n, ps, k)| {
                let left = bound_left.entry(n).or_default();
                let m = (*left).min(k);
                *left -= m;
                (n, ps, k - m)
            })
            .collect();
        let mut extra: u32 = bound_left.values().sum();
        for e in kept.iter_mut().rev() {
            if extra == 0 {
                break;
            }
            let m = extra.min(e.2);
            e.2 -= m;
            extra -= m;
        }
        let mut out: Vec<(NodeId, ResVec)> = Vec::new();
        for (n, ps, k) in kept {
            if k == 0 {
                continue;
            }
            let per_pod = self.per_pod(id, ps);
            let i = match out.iter().position(|(m, _)| *m == n) {
                Some(i) => i,
                None => {
                    out.push((n, Vec::new()));
                    out.len() - 1
                }
            };
            for (r, a) in per_pod {
                res_add(&mut out[i].1, r, a * k as Amount);
            }
        }
        out
    }

    /// Brings the nodes' reservations for this workload in line with its
    /// state, placement and bound pods.
    pub(in crate::engine) fn update_reservation(&mut self, id: WlId) {
        if !self.placement_on() {
            return;
        }
        let wanted = self.wanted_reservation(id);
        let old = std::mem::take(&mut self.wl_mut(id).reserved);
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
            let now = wanted.iter().find(|(m, _)| m == n).map(|(_, w)| w.as_slice()).unwrap_or(&[]);
            if v.iter().any(|&(r, a)| a > res_get(now, r)) {
                self.node_gained(*n);
            }
        }
        self.wl_mut(id).reserved = wanted;
    }

    /// What the workload occupies on each node: its bound pods and its
    /// reservations (what its removal would free).
    pub(in crate::engine) fn footprint(&self, id: WlId, sign: Amount, delta: &mut NodeDelta) {
        let wl = self.wl(id);
        for (n, _, v) in &wl.bound {
            for &(r, a) in v {
                delta.add(*n, r, sign * a);
            }
        }
        for (n, v) in &wl.reserved {
            for &(r, a) in v {
                delta.add(*n, r, sign * a);
            }
        }
    }

    /// Room that terminating pods will give back.
    pub(in crate::engine) fn terminating_delta(&self, delta: &mut NodeDelta) {
        for (n, node) in self.inv.nodes.iter().enumerate() {
            for &(r, a) in &node.terminating {
                delta.add(n, r, a);
            }
        }
    }

    /// Forgets a finished workload's bound pods and takes their requests
    /// off their nodes (the forecast's stand-in for the pods going away).
    pub(crate) fn forget_bound_pods(&mut self, uid: &str) {
        let Ok(id) = self.id_of(uid) else { return };
        for (n, _, v) in std::mem::take(&mut self.wl_mut(id).bound) {
            for (r, a) in v {
                res_add(&mut self.inv.nodes[n].used, r, -a);
            }
            self.node_gained(n);
        }
    }
}
