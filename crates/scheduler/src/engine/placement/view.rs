//! Read-only views of placement, for controllers' diagnostics and tests:
//! where the engine placed a workload's pods, and what it reserves on a
//! node.

use std::collections::BTreeMap;

use crate::engine::Engine;
use crate::engine::state::State;
use crate::model::{Amount, BoundPods};

use super::{NodeDelta, ResVec, res_add};

impl Engine {
    /// Where the engine placed a workload's pods (admitted, being evicted,
    /// or preempting), per node in name order: how many pods and what they
    /// request together. Pods not bound yet are reserved there. Empty in
    /// quota-only mode, in other states, and for a workload restored as
    /// admitted that found no room.
    pub fn workload_placement(&self, uid: &str) -> Vec<BoundPods> {
        let Ok(id) = self.id_of(uid) else {
            return Vec::new();
        };
        let placement = match &self.wl(id).state {
            State::Admitted(h) | State::Evicting(h) | State::Preempting(h) => &h.placement,
            _ => return Vec::new(),
        };
        let mut by_node: BTreeMap<&str, BoundPods> = BTreeMap::new();
        for &(n, ps, k) in &placement.pods {
            let name = &*self.inv.nodes[n].name;
            let e = by_node.entry(name).or_insert_with(|| BoundPods {
                node: name.to_string(),
                ..BoundPods::default()
            });
            e.pods += k;
            for (r, a) in self.per_pod(id, ps) {
                if r != self.catalog.pods_res {
                    *e.requested
                        .entry(self.catalog.resources.name(r).to_string())
                        .or_default() += a * k as Amount;
                }
            }
        }
        by_node.into_values().collect()
    }

    /// What the engine reserves on a node for admitted (evicting,
    /// preempting) workloads' pods that are not bound yet, by resource
    /// (`pods` as their number × 1000). `None` for a node it does not know.
    pub fn node_reserved(&self, name: &str) -> Option<BTreeMap<String, Amount>> {
        let &id = self.inv.by_name.get(name)?;
        Some(
            self.inv.nodes[id]
                .reserved
                .iter()
                .map(|&(r, a)| (self.catalog.resources.name(r).to_string(), a))
                .collect(),
        )
    }
}

impl Engine {
    /// Checks what nodes hold against the workloads (for tests): every
    /// node's reservations are the sum of the workloads' ones, the leaving
    /// room is the sum of the footprints of the workloads being evicted,
    /// and the count of nodes with terminating pods is right.
    pub(in crate::engine) fn check_placement(&self) -> Result<(), String> {
        let mut reserved: Vec<ResVec> = vec![Vec::new(); self.inv.nodes.len()];
        let mut leaving = NodeDelta::default();
        for (id, wl) in self.workloads.wls.iter().enumerate() {
            let Some(wl) = wl else { continue };
            for (n, v) in wl.reserved() {
                v.iter().for_each(|&(r, a)| res_add(&mut reserved[*n], r, a));
            }
            if self.placement_on() && matches!(wl.state, State::Evicting(_)) {
                self.footprint(id, 1, &mut leaving);
            }
        }
        for (n, node) in self.inv.nodes.iter().enumerate() {
            if node.reserved != reserved[n] {
                return Err(format!(
                    "node {}: reserved {:?}, workloads reserve {:?}",
                    node.name, node.reserved, reserved[n]
                ));
            }
        }
        leaving.merge_scaled(&self.inv.leaving, -1);
        if !leaving.is_empty() {
            return Err(format!("leaving room drifted by {leaving:?}"));
        }
        let terminating = self.inv.nodes.iter().filter(|n| !n.terminating.is_empty()).count();
        if terminating != self.inv.terminating_nodes || self.inv.leaving.terminating != (terminating > 0) {
            return Err(format!(
                "{terminating} nodes with terminating pods, counted {}",
                self.inv.terminating_nodes
            ));
        }
        Ok(())
    }
}
