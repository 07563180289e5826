//! Nodes: upserts and removals, the requests of the pods bound to them,
//! which flavors they belong to, and waking the queues of a flavor whose
//! nodes gained room.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Node;
use crate::engine::Engine;
use crate::engine::state::PodSet;
use crate::ledger::FlavorId;
use crate::model::{FlavorSpec, NodeSpec, NodeUsage, Taint, TaintEffect};

use super::{NodeId, ResVec, res_add, res_get};

impl Engine {
    /// Creates or replaces a node (labels, taints, allocatable,
    /// schedulability). What is bound to it and reserved on it is kept.
    pub fn upsert_node(&mut self, spec: NodeSpec) {
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let mut alloc: ResVec = Vec::with_capacity(spec.allocatable.len());
        for (r, &a) in &spec.allocatable {
            res_add(&mut alloc, self.catalog.resources.intern(r), a.max(0));
        }
        let pod_limit = spec.allocatable.contains_key("pods");
        for &(r, a) in &alloc {
            let m = self.inv.max_alloc.entry(r).or_default();
            *m = (*m).max(a);
        }
        let taints: Vec<Taint> = spec
            .taints
            .into_iter()
            .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
            .collect();
        let mut sharing_changed = crate::sharing::replicas(&spec.labels).is_some();
        let id = match self.inv.by_name.get(&name) {
            Some(&id) => {
                let n = &mut self.inv.nodes[id];
                sharing_changed = crate::sharing::replicas(&n.labels) != crate::sharing::replicas(&spec.labels);
                // Gained room, or lost some (a workload only it could
                // hold is told that no node can): its flavors' queues look again.
                let gained = !n.live
                    || spec.schedulable != n.schedulable
                    || alloc != n.alloc
                    || n.labels != spec.labels
                    || n.taints != taints;
                n.labels = spec.labels;
                n.taints = taints;
                n.alloc = alloc;
                n.pod_limit = pod_limit;
                n.schedulable = spec.schedulable;
                n.live = true;
                if gained {
                    self.node_gained(id);
                }
                id
            }
            None => {
                let id = self.inv.nodes.len();
                self.inv.nodes.push(Node {
                    name: name.clone(),
                    labels: spec.labels,
                    taints,
                    alloc,
                    pod_limit,
                    schedulable: spec.schedulable,
                    live: true,
                    used: Vec::new(),
                    terminating: Vec::new(),
                    reserved: Vec::new(),
                });
                self.inv.by_name.insert(name, id);
                self.node_gained(id);
                id
            }
        };
        self.refresh_node_membership(id, sharing_changed);
    }

    /// Removes a node: nothing is placed on it any more. Reservations on it
    /// stay counted there until their workloads' pods are bound elsewhere
    /// or the workloads release them.
    pub fn remove_node(&mut self, name: &str) {
        let Some(&id) = self.inv.by_name.get(name) else {
            return;
        };
        // Its flavors' queues look again: a workload only it could hold
        // is now told that no node can.
        self.node_gained(id);
        let n = &mut self.inv.nodes[id];
        n.live = false;
        n.schedulable = false;
        n.used.clear();
        if !n.terminating.is_empty() {
            n.terminating.clear();
            self.inv.terminating_nodes -= 1;
            self.inv.leaving.terminating = self.inv.terminating_nodes > 0;
        }
        self.refresh_node_membership(id, false);
    }

    /// Sets what the pods bound to a node request. A node not known yet is
    /// created unschedulable (its spec follows).
    pub fn set_node_usage(&mut self, name: &str, usage: &NodeUsage) {
        let id = match self.inv.by_name.get(name) {
            Some(&id) => id,
            None => {
                self.upsert_node(NodeSpec {
                    name: name.to_string(),
                    ..NodeSpec::default()
                });
                self.inv.by_name[name]
            }
        };
        let mut used: ResVec = Vec::with_capacity(usage.requested.len());
        for (r, &a) in &usage.requested {
            res_add(&mut used, self.catalog.resources.intern(r), a);
        }
        let mut terminating: ResVec = Vec::new();
        for (r, &a) in &usage.terminating {
            res_add(&mut terminating, self.catalog.resources.intern(r), a);
        }
        let n = &mut self.inv.nodes[id];
        let freed = n.used.iter().any(|&(r, a)| a > res_get(&used, r));
        let had_terminating = !n.terminating.is_empty();
        n.used = used;
        n.terminating = terminating;
        match (had_terminating, n.terminating.is_empty()) {
            (false, false) => self.inv.terminating_nodes += 1,
            (true, true) => self.inv.terminating_nodes -= 1,
            _ => {}
        }
        self.inv.leaving.terminating = self.inv.terminating_nodes > 0;
        if freed {
            self.node_gained(id);
        }
    }

    /// The node's flavors: their queues look again (they may fit now, or
    /// never).
    pub(in crate::engine) fn node_gained(&mut self, id: NodeId) {
        if !self.placement_on() {
            return;
        }
        let flavors: Vec<FlavorId> = self
            .catalog
            .flavors
            .iter()
            .filter(|(_, spec)| {
                self.inv.nodes[id].live && labels_include(&self.inv.nodes[id].labels, &spec.node_labels)
            })
            .map(|(&f, _)| f)
            .collect();
        self.inv.freed.extend(flavors);
    }

    /// Wakes the queues that use a flavor whose nodes gained room.
    pub(in crate::engine) fn wake_freed_flavors(&mut self) {
        if self.inv.freed.is_empty() {
            return;
        }
        let freed = std::mem::take(&mut self.inv.freed);
        for cq in 0..self.queues.cqs.len() {
            let uses = self.queues.cqs[cq]
                .quota
                .groups
                .iter()
                .any(|g| g.flavors.iter().any(|gf| freed.contains(&gf.flavor)));
            if uses && !self.queues.cqs[cq].waiting.pending.is_empty() {
                self.wake_queue(cq);
            }
        }
    }

    /// Recomputes which flavors a node belongs to, and the GPU replicas
    /// of those it joined or left (or of all its flavors when its own
    /// replicas changed).
    pub(in crate::engine) fn refresh_node_membership(&mut self, id: NodeId, sharing_changed: bool) {
        let live = self.inv.nodes[id].live;
        let mut touched = Vec::new();
        for (&f, spec) in &self.catalog.flavors {
            let member = live && labels_include(&self.inv.nodes[id].labels, &spec.node_labels);
            let list = self.inv.flavor_nodes.entry(f).or_default();
            match (list.binary_search(&id), member) {
                (Err(i), true) => {
                    list.insert(i, id);
                    touched.push(f);
                }
                (Ok(i), false) => {
                    list.remove(i);
                    touched.push(f);
                }
                (Ok(_), true) if sharing_changed => touched.push(f),
                _ => {}
            }
        }
        for f in touched {
            self.refresh_flavor_replicas(f);
        }
    }

    /// Recomputes a flavor's nodes (the flavor changed).
    pub(in crate::engine) fn refresh_flavor_membership(&mut self, f: FlavorId) {
        let nodes: Vec<NodeId> = match self.catalog.flavors.get(&f) {
            Some(spec) => (0..self.inv.nodes.len())
                .filter(|&n| self.inv.nodes[n].live && labels_include(&self.inv.nodes[n].labels, &spec.node_labels))
                .collect(),
            None => Vec::new(),
        };
        self.inv.flavor_nodes.insert(f, nodes);
        self.refresh_flavor_replicas(f);
    }

    /// Recomputes how many replicas of each GPU a flavor's nodes advertise:
    /// the fewest among them (a node without the label counts as one, so a
    /// flavor that mixes shared and whole GPUs is charged as whole). A
    /// change is a change of what its workloads are charged: every queue
    /// looks again.
    fn refresh_flavor_replicas(&mut self, f: FlavorId) {
        let members = self.inv.flavor_nodes.get(&f).map_or(&[][..], Vec::as_slice);
        let fewest = members
            .iter()
            .map(|&n| crate::sharing::replicas(&self.inv.nodes[n].labels).unwrap_or(1))
            .min()
            .filter(|&r| r > 1);
        let before = match fewest {
            Some(r) => self.inv.flavor_replicas.insert(f, r),
            None => self.inv.flavor_replicas.remove(&f),
        };
        if before != fewest {
            self.memo.assignments.clear();
            self.wake_all();
        }
    }

    /// The nodes a pod set may use with these flavors: members of every
    /// flavor, schedulable, matching its node selector, with every
    /// `NoSchedule`/`NoExecute` taint tolerated by the pod set or one of
    /// the flavors.
    pub(in crate::engine) fn candidate_nodes(&self, flavors: &[FlavorId], ps: &PodSet) -> Vec<NodeId> {
        self.nodes_for(flavors, ps, false)
    }

    /// Like [`Engine::candidate_nodes`], cordoned ones too when
    /// `cordoned` (a cordon is lifted; a node's size is not).
    pub(in crate::engine) fn nodes_for(&self, flavors: &[FlavorId], ps: &PodSet, cordoned: bool) -> Vec<NodeId> {
        let Some(&first) = flavors
            .iter()
            .min_by_key(|f| self.inv.flavor_nodes.get(f).map_or(0, Vec::len))
        else {
            return Vec::new();
        };
        let (Some(list), Some(first_spec)) = (self.inv.flavor_nodes.get(&first), self.catalog.flavors.get(&first))
        else {
            return Vec::new();
        };
        // Nodes of `first` have its labels; the others' are checked.
        let others: Vec<&FlavorSpec> = flavors
            .iter()
            .filter(|&&f| f != first)
            .filter_map(|f| self.catalog.flavors.get(f))
            .collect();
        let tolerated = |t: &Taint| {
            ps.tolerations
                .iter()
                .chain(first_spec.tolerations.iter())
                .chain(others.iter().flat_map(|s| s.tolerations.iter()))
                .any(|tol| tol.tolerates(t))
        };
        let mut out = Vec::with_capacity(list.len());
        for &n in list {
            let node = &self.inv.nodes[n];
            if (node.schedulable || cordoned)
                && node.taints.iter().all(tolerated)
                && labels_include(&node.labels, &ps.node_selector)
                && others.iter().all(|s| labels_include(&node.labels, &s.node_labels))
            {
                out.push(n);
            }
        }
        out
    }

    /// How many nodes the engine knows (live ones).
    pub fn node_count(&self) -> usize {
        self.inv.nodes.iter().filter(|n| n.live).count()
    }
}

/// Whether `labels` has every entry of `wanted`.
pub(in crate::engine) fn labels_include(labels: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}
