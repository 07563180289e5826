//! Nodes and bound pods for the engine's placement (`--placement=nodes`).
//!
//! Every bound, unfinished pod counts on its node: the index sums their
//! requests per node and hands the sums to the engine before a cycle
//! ([`Index::flush_placement`]), only for nodes that changed. A pod whose
//! labels name the object that runs it (the first term of that kind's
//! pod selector, e.g. a Job's `controller-uid`) is also counted for that
//! object's Workload, so the engine stops reserving room for pods that
//! are bound. Terminating pods count until they are gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use sluice_scheduler as eng;

use sluice_kinds::job;

use super::{Index, Kind};
use crate::plan::{JobRef, ObjKey};

/// A bound pod as the index keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEntry {
    pub namespace: Arc<str>,
    pub node: Arc<str>,
    /// Requests (with `pods: 1000`), shared by pods that request the same.
    pub requests: Requests,
    pub terminating: bool,
    /// The owner labels it carries, (label key, value): a JobSet's pod
    /// names both its Job and its JobSet.
    pub owners: Box<[(Arc<str>, String)]>,
}

/// (namespace, label key, value) of the objects that run pods.
type OwnerKey = (Arc<str>, Arc<str>, String);

/// A pod's requests by resource, shared between pods that ask the same.
pub type Requests = Arc<[(Arc<str>, i64)]>;

/// Requests summed by resource.
type Summed = Vec<(Arc<str>, i64)>;

/// An owner's pods on one node: how many, and their requests.
type OnNode = (Arc<str>, u32, OwnerSum);

/// The requests of an owner's pods on one node: usually all alike.
#[derive(Clone, Debug)]
enum OwnerSum {
    /// Every pod asks for this.
    Uniform(Requests),
    /// Summed.
    Mixed(Vec<(Arc<str>, i64)>),
}

impl OwnerSum {
    fn add(&mut self, pods_before: u32, requests: &Requests, sign: i64) {
        if let OwnerSum::Uniform(r) = self {
            if Arc::ptr_eq(r, requests) || **r == **requests {
                return;
            }
            let mut sum = Vec::new();
            add_requests(&mut sum, r, pods_before as i64);
            *self = OwnerSum::Mixed(sum);
        }
        if let OwnerSum::Mixed(sum) = self {
            add_requests(sum, requests, sign);
        }
    }

    fn total(&self, pods: u32) -> Vec<(Arc<str>, i64)> {
        match self {
            OwnerSum::Uniform(r) => r.iter().map(|(k, a)| (k.clone(), a * pods as i64)).collect(),
            OwnerSum::Mixed(v) => v.clone(),
        }
    }
}

fn add_requests(to: &mut Vec<(Arc<str>, i64)>, requests: &[(Arc<str>, i64)], sign: i64) {
    for (r, a) in requests {
        match to.iter_mut().find(|(k, _)| k == r) {
            Some(e) => e.1 += sign * a,
            None => to.push((r.clone(), sign * a)),
        }
    }
    to.retain(|(_, a)| *a != 0);
}

/// Sums of requests by resource.
#[derive(Clone, Debug, Default)]
struct Sums(BTreeMap<Arc<str>, i64>);

impl Sums {
    fn add(&mut self, requests: &[(Arc<str>, i64)], sign: i64) {
        for (r, a) in requests {
            let e = self.0.entry(r.clone()).or_default();
            *e += sign * a;
            if *e == 0 {
                self.0.remove(r);
            }
        }
    }
    fn to_map(&self) -> BTreeMap<String, i64> {
        self.0.iter().map(|(r, a)| (r.to_string(), *a)).collect()
    }
}

#[derive(Clone, Debug, Default)]
struct NodeSums {
    requested: Sums,
    terminating: Sums,
}

/// Pods on nodes, as summed for the engine.
#[derive(Default)]
pub(super) struct Placement {
    pods: HashMap<String, Arc<PodEntry>>,
    nodes: HashMap<Arc<str>, NodeSums>,
    dirty_nodes: BTreeSet<Arc<str>>,
    /// Per owner, per node: pods and their requests.
    by_owner: HashMap<OwnerKey, Vec<OnNode>>,
    /// The object whose Workload holds the pods of an owner label.
    pub(super) owner_jobs: HashMap<OwnerKey, JobRef>,
    dirty_owners: BTreeSet<OwnerKey>,
}

impl Placement {
    fn count(&mut self, p: &PodEntry, sign: i64) {
        let n = self.nodes.entry(p.node.clone()).or_default();
        n.requested.add(&p.requests, sign);
        if p.terminating {
            n.terminating.add(&p.requests, sign);
        }
        self.dirty_nodes.insert(p.node.clone());
        // A terminating pod is leaving: it stands for none of its owner's
        // pods (a replacement is still to be placed), only for the room it
        // holds on its node until it is gone.
        let owners: &[(Arc<str>, String)] = if p.terminating { &[] } else { &p.owners };
        for (key, value) in owners {
            let ok = (p.namespace.clone(), key.clone(), value.clone());
            let per_node = self.by_owner.entry(ok.clone()).or_default();
            let i = match per_node.iter().position(|(n, ..)| *n == p.node) {
                Some(i) => i,
                None => {
                    per_node.push((p.node.clone(), 0, OwnerSum::Uniform(p.requests.clone())));
                    per_node.len() - 1
                }
            };
            let e = &mut per_node[i];
            e.2.add(e.1, &p.requests, sign);
            e.1 = (e.1 as i64 + sign).max(0) as u32;
            if e.1 == 0 {
                per_node.swap_remove(i);
            }
            if per_node.is_empty() {
                self.by_owner.remove(&ok);
            }
            self.dirty_owners.insert(ok);
        }
    }
}

/// One copy of each distinct value, shared by every pod that has it. A
/// value no pod holds any more is dropped whenever the set has doubled
/// since the last sweep, so names of nodes that are long gone do not pile up.
struct Shared<T: ?Sized> {
    set: std::collections::HashSet<Arc<T>>,
    sweep_at: usize,
}

impl<T: ?Sized + Eq + std::hash::Hash> Shared<T> {
    fn get(&mut self, value: &T, make: impl FnOnce() -> Arc<T>) -> Arc<T> {
        if let Some(v) = self.set.get(value) {
            return v.clone();
        }
        if self.set.len() >= self.sweep_at {
            self.set.retain(|v| Arc::strong_count(v) > 1);
            self.sweep_at = (self.set.len() * 2).max(64);
        }
        let v = make();
        self.set.insert(v.clone());
        v
    }
}

/// Where a [`Shared`] set lives.
type SharedCell<T> = std::sync::OnceLock<std::sync::Mutex<Shared<T>>>;

fn lock<T: ?Sized>(cell: &'static SharedCell<T>) -> std::sync::MutexGuard<'static, Shared<T>> {
    cell.get_or_init(|| {
        std::sync::Mutex::new(Shared {
            set: Default::default(),
            sweep_at: 64,
        })
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

/// A shared name (a node, a resource, a namespace, a label key).
fn shared(name: &str) -> Arc<str> {
    static NAMES: SharedCell<str> = std::sync::OnceLock::new();
    lock(&NAMES).get(name, || Arc::from(name))
}

/// A shared request list.
fn shared_requests(v: Vec<(Arc<str>, i64)>) -> Requests {
    static LISTS: SharedCell<[(Arc<str>, i64)]> = std::sync::OnceLock::new();
    lock(&LISTS).get(&v, || Arc::from(v.clone()))
}

/// The labels that say which object runs a pod: the first term of each
/// queued kind's pod selector (a Job's `controller-uid`, …).
fn owner_label_keys() -> &'static [String] {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys: Vec<String> = sluice_kinds::JobKind::ALL
            .into_iter()
            .filter_map(|k| {
                let s = k.pods_selector("name", "uid");
                s.split(',').next()?.split_once('=').map(|(k, _)| k.to_string())
            })
            .collect();
        // A RayJob's pods are selected by their RayCluster once it is known.
        keys.push(sluice_kinds::ray::CLUSTER_LABEL.to_string());
        keys.sort();
        keys.dedup();
        keys
    })
}

impl PodEntry {
    /// What the index keeps of a bound pod.
    pub fn new(
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        pod: sluice_convert::nodes::BoundPod,
    ) -> Self {
        let owners = labels
            .map(|l| {
                owner_label_keys()
                    .iter()
                    .filter_map(|k| l.get(k).map(|v| (shared(k), v.clone())))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            namespace: shared(namespace),
            node: shared(&pod.node),
            requests: shared_requests(pod.requests.iter().map(|(r, a)| (shared(r), *a)).collect()),
            terminating: pod.terminating,
            owners,
        }
    }
}

/// The owner key of an object's pods: the first term of its pod selector.
pub(super) fn owner_key(view: &job::JobView) -> Option<OwnerKey> {
    let selector = sluice_kinds::pods_selector_of(view);
    let first = selector.split(',').next()?;
    let (k, v) = first.split_once('=')?;
    Some((shared(&view.namespace), shared(k), v.to_string()))
}

impl Index {
    /// A Node, added or changed.
    pub fn apply_node(&mut self, spec: eng::NodeSpec) {
        self.clear_error(Kind::Node, &spec.name);
        self.engine.upsert_node(spec);
    }

    pub fn delete_node(&mut self, name: &str) {
        self.clear_error(Kind::Node, name);
        self.engine.remove_node(name);
    }

    /// A bound pod (`key`: namespace/name), added or changed; `None` when
    /// it no longer holds anything (finished or unbound).
    pub fn apply_pod(&mut self, key: &str, pod: Option<Arc<PodEntry>>) {
        self.clear_error(Kind::Pod, key);
        let old = match &pod {
            Some(p) => self.placement.pods.insert(key.to_string(), p.clone()),
            None => self.placement.pods.remove(key),
        };
        if old.as_deref() == pod.as_deref() {
            return;
        }
        self.note_unqueued(key, pod.as_deref());
        if let Some(o) = old {
            self.placement.count(&o, -1);
        }
        if let Some(p) = pod {
            self.placement.count(&p, 1);
        }
    }

    /// A bound pod as last seen (`key`: namespace/name).
    pub(super) fn bound_pod(&self, key: &str) -> Option<&Arc<PodEntry>> {
        self.placement.pods.get(key)
    }

    /// Whether one of a bound pod's owner labels names a queued object the
    /// index knows.
    pub(super) fn runs_for_a_queued_object(&self, p: &PodEntry) -> bool {
        p.owners.iter().any(|(k, v)| {
            self.placement
                .owner_jobs
                .contains_key(&(p.namespace.clone(), k.clone(), v.clone()))
        })
    }

    pub fn delete_pod(&mut self, key: &str) {
        self.apply_pod(key, None);
    }

    /// An object's pods can be told apart from now on (or no more).
    pub(super) fn note_pod_owner(&mut self, key: &JobRef, view: Option<&job::JobView>) {
        if self.config.placement != sluice_scheduler::PlacementMode::Nodes {
            return;
        }
        // An object its owner holds (a RayJob's RayCluster) has no Workload
        // of its own: its pods, by the same label, are its owner's.
        match view.filter(|v| !self.queued_with_owner(v)).and_then(owner_key) {
            Some(ok) => {
                self.placement.owner_jobs.insert(ok.clone(), key.clone());
                self.placement.dirty_owners.insert(ok);
            }
            None => self.placement.owner_jobs.retain(|_, j| j != key),
        }
    }

    /// The pods of a workload's objects are told to the engine again at
    /// the next flush (it entered the engine holding quota).
    pub(super) fn pods_changed(&mut self, wk: &ObjKey) {
        if self.config.placement != sluice_scheduler::PlacementMode::Nodes {
            return;
        }
        for jk in self.member_keys(wk) {
            if let Some(ok) = self.queued.jobs.get(&jk).and_then(owner_key) {
                self.placement.dirty_owners.insert(ok);
            }
        }
    }

    /// Hands the engine what changed on nodes since the last call.
    pub(super) fn flush_placement(&mut self) {
        if self.config.placement != sluice_scheduler::PlacementMode::Nodes {
            return;
        }
        for node in std::mem::take(&mut self.placement.dirty_nodes) {
            let usage = match self.placement.nodes.get(&node) {
                Some(s) => eng::NodeUsage {
                    requested: s.requested.to_map(),
                    terminating: s.terminating.to_map(),
                },
                None => eng::NodeUsage::default(),
            };
            if usage.requested.is_empty() {
                self.placement.nodes.remove(&node);
            }
            self.engine.set_node_usage(&node, &usage);
        }
        let mut workloads: BTreeSet<ObjKey> = BTreeSet::new();
        for ok in std::mem::take(&mut self.placement.dirty_owners) {
            if let Some(jk) = self.placement.owner_jobs.get(&ok)
                && let Some(view) = self.queued.jobs.get(jk)
            {
                workloads.insert(self.workload_key_of(jk, view));
            }
        }
        for wk in workloads {
            let Some(uid) = self
                .table
                .workloads
                .get(&wk)
                .filter(|e| e.run.in_engine)
                .map(|e| e.uid.clone())
            else {
                continue;
            };
            let mut per_node: BTreeMap<Arc<str>, (u32, Summed)> = BTreeMap::new();
            for jk in self.member_keys(&wk) {
                let Some(ok) = self.queued.jobs.get(&jk).and_then(owner_key) else {
                    continue;
                };
                for (node, pods, sum) in self.placement.by_owner.get(&ok).into_iter().flatten() {
                    let e = per_node.entry(node.clone()).or_default();
                    e.0 += pods;
                    add_requests(&mut e.1, &sum.total(*pods), 1);
                }
            }
            let bound: Vec<eng::BoundPods> = per_node
                .into_iter()
                .map(|(node, (pods, requests))| eng::BoundPods {
                    node: node.to_string(),
                    pods,
                    requested: requests.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
                })
                .collect();
            // Unknown to the engine (finished and removed): nothing to hold.
            let _ = self.engine.set_workload_pods(&uid, &bound);
        }
    }

    /// Bound pods known, and nodes with pods (for the memory measurement
    /// and tests).
    pub fn placement_counts(&self) -> (usize, usize) {
        (self.placement.pods.len(), self.placement.nodes.len())
    }
}
