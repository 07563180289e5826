//! What the handlers may know about the cluster: read from in-memory stores
//! fed by watches, never from an API call on the request path.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sluice_kinds::JobKind;

/// Read-only view of the cluster state the handlers need.
pub trait ClusterView: Send + Sync {
    /// Whether the stores have finished their initial list (before that,
    /// "not found" means "not known yet").
    fn synced(&self) -> bool;
    /// The labels of a namespace, if the namespace is known.
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>>;
    /// Whether a LocalQueue exists.
    fn local_queue_exists(&self, namespace: &str, name: &str) -> bool;
    /// Whether a RuntimeClass exists; `None` until RuntimeClasses have been
    /// listed (or when the webhook does not watch the cluster).
    fn runtime_class_exists(&self, name: &str) -> Option<bool>;
    /// Every Cohort object's name and `spec.parent`; `None` until Cohorts
    /// have been listed (or when the webhook does not watch the cluster).
    fn cohort_parents(&self) -> Option<BTreeMap<String, Option<String>>>;
    /// Whether an object of `kind` named `name` with this `uid` exists in
    /// `namespace`: the check behind every exemption an ownerReference
    /// claims. `None` while that kind has not been listed (or is not
    /// watched): unknown, which callers treat as "not verified".
    fn owner_exists(&self, kind: OwnerKind, namespace: &str, name: &str, uid: &str) -> Option<bool>;
    /// A ClusterQueue's `spec.namespaceSelector` (inner `None`: unset); `None`
    /// when the ClusterQueue is not known (not listed yet, or absent).
    fn cluster_queue_selector(&self, _name: &str) -> Option<Option<LabelSelector>> {
        None
    }
    /// Whether a ClusterQueue of this name exists; `None` until
    /// ClusterQueues have been listed.
    fn cluster_queue_exists(&self, _name: &str) -> Option<bool> {
        None
    }
    /// The LocalQueues `(namespace, name)` pointing at a ClusterQueue;
    /// `None` until LocalQueues' targets are listed.
    fn local_queues_of(&self, _cluster_queue: &str) -> Option<Vec<(String, String)>> {
        None
    }

    /// What the cache knows of a serving object (a Deployment,
    /// StatefulSet or LeaderWorkerSet: a kind with a `scale` subresource,
    /// whose Scale carries no labels); `None` when its kind has not been
    /// listed or it is not known.
    fn serving_object(&self, _kind: JobKind, _namespace: &str, _name: &str) -> Option<ServingMeta> {
        None
    }
    /// Whether an object of a queued kind named `name` exists in
    /// `namespace` (an owner named by a label, whose uid is not known);
    /// `None` while that kind has not been listed.
    fn owner_named(&self, kind: OwnerKind, namespace: &str, name: &str) -> Option<bool> {
        let _ = (kind, namespace, name);
        None
    }

    /// Whether the namespace opted in to default queueing.
    fn default_queue_enabled(&self, namespace: &str) -> bool {
        self.namespace_labels(namespace)
            .and_then(|l| l.get(sluice_api::labels::DEFAULT_QUEUE).cloned())
            .is_some_and(|v| v == sluice_api::labels::DEFAULT_QUEUE_ENABLED)
    }
}

/// A kind of object whose ownerReferences exempt something, and which the
/// cache therefore lists (name and uid) to verify them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnerKind {
    /// apps/v1 DaemonSet: its pods are node agents (GPU exemption, only
    /// in trusted namespaces).
    DaemonSet,
    /// An object of a queued kind that makes objects of another queued
    /// kind ([`JobKind::controls_others`]): those it controls are left to
    /// it.
    Queued(JobKind),
}

impl OwnerKind {
    /// Every kind the cache lists for verification: DaemonSets, and each
    /// queued kind that makes objects of a queued kind.
    pub fn all() -> impl Iterator<Item = OwnerKind> {
        std::iter::once(OwnerKind::DaemonSet).chain(
            JobKind::ALL
                .into_iter()
                .filter(|k| k.controls_others())
                .map(OwnerKind::Queued),
        )
    }

    /// (group, version, kind, plural) as the API serves it.
    pub fn resource(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            OwnerKind::DaemonSet => ("apps", "v1", "DaemonSet", "daemonsets"),
            OwnerKind::Queued(q) => {
                let (group, version, kind) = q.gvk();
                (group, version, kind, q.plural())
            }
        }
    }

    pub fn kind(self) -> &'static str {
        self.resource().2
    }
}

/// What the cache keeps of a serving object: its labels and the replicas
/// it asked for while held ([`sluice_api::labels::HELD_REPLICAS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServingMeta {
    pub labels: BTreeMap<String, String>,
    pub held_replicas: Option<String>,
}

impl ServingMeta {
    /// From an object's metadata.
    pub fn of(meta: &kube::core::ObjectMeta) -> Self {
        Self {
            labels: meta.labels.clone().unwrap_or_default(),
            held_replicas: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(sluice_api::labels::HELD_REPLICAS))
                .cloned(),
        }
    }
}

/// A view held in memory and filled by hand (tests) or by watch events.
#[derive(Debug, Default)]
pub struct MemoryView {
    inner: RwLock<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    synced: bool,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    local_queues: BTreeSet<(String, String)>,
    /// `None` until the first list.
    runtime_classes: Option<BTreeSet<String>>,
    /// Cohort name → its parent; `None` until the first list.
    cohorts: Option<BTreeMap<String, Option<String>>>,
    /// Per owner kind, (namespace, name) → uid; a kind is absent until
    /// its first list.
    owners: BTreeMap<OwnerKind, BTreeMap<(String, String), String>>,
    /// ClusterQueue name → its namespaceSelector; `None` until the first list.
    cluster_queues: Option<BTreeMap<String, Option<LabelSelector>>>,
    /// (namespace, LocalQueue) → its ClusterQueue; `None` until the first list.
    local_queue_targets: Option<BTreeMap<(String, String), String>>,
    /// Per serving kind, (namespace, name) → what is kept of it; a kind is
    /// absent until its first list.
    serving: BTreeMap<JobKind, BTreeMap<(String, String), ServingMeta>>,
}

impl MemoryView {
    /// An empty view that reports itself synced (for tests).
    pub fn synced_empty() -> Self {
        let v = Self::default();
        v.set_synced(true);
        v
    }

    /// A synced view of a GPU cluster with the NVIDIA RuntimeClass `nvidia`
    /// (as the cluster the recorded fixtures come from), for tests.
    pub fn synced_with_nvidia_runtime_class() -> Self {
        let v = Self::synced_empty();
        v.replace_runtime_classes(BTreeSet::from(["nvidia".to_owned()]));
        v
    }

    pub fn set_synced(&self, synced: bool) {
        self.write().synced = synced;
    }

    /// Adds or replaces a namespace and its labels.
    pub fn upsert_namespace(&self, name: &str, labels: BTreeMap<String, String>) {
        self.write().namespaces.insert(name.to_owned(), labels);
    }

    pub fn remove_namespace(&self, name: &str) {
        self.write().namespaces.remove(name);
    }

    /// Replaces all namespaces (a re-list).
    pub fn replace_namespaces(&self, all: BTreeMap<String, BTreeMap<String, String>>) {
        self.write().namespaces = all;
    }

    pub fn upsert_local_queue(&self, namespace: &str, name: &str) {
        self.write()
            .local_queues
            .insert((namespace.to_owned(), name.to_owned()));
    }

    pub fn remove_local_queue(&self, namespace: &str, name: &str) {
        self.write()
            .local_queues
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Replaces all LocalQueues (a re-list).
    pub fn replace_local_queues(&self, all: BTreeSet<(String, String)>) {
        self.write().local_queues = all;
    }

    pub fn upsert_runtime_class(&self, name: &str) {
        self.write()
            .runtime_classes
            .get_or_insert_with(BTreeSet::new)
            .insert(name.to_owned());
    }

    pub fn remove_runtime_class(&self, name: &str) {
        if let Some(classes) = self.write().runtime_classes.as_mut() {
            classes.remove(name);
        }
    }

    /// Replaces all RuntimeClasses (a (re-)list).
    pub fn replace_runtime_classes(&self, all: BTreeSet<String>) {
        self.write().runtime_classes = Some(all);
    }

    /// Adds or replaces a Cohort and its parent.
    pub fn upsert_cohort(&self, name: &str, parent: Option<String>) {
        self.write()
            .cohorts
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), parent);
    }

    pub fn remove_cohort(&self, name: &str) {
        if let Some(cohorts) = self.write().cohorts.as_mut() {
            cohorts.remove(name);
        }
    }

    /// Replaces all Cohorts (a (re-)list).
    pub fn replace_cohorts(&self, all: BTreeMap<String, Option<String>>) {
        self.write().cohorts = Some(all);
    }

    /// Adds or replaces an object of an owner kind. Ignored before that
    /// kind's first list (the list brings it), so a kind is never
    /// reported as listed from a partial set.
    pub fn upsert_owner(&self, kind: OwnerKind, namespace: &str, name: &str, uid: &str) {
        if let Some(objects) = self.write().owners.get_mut(&kind) {
            objects.insert((namespace.to_owned(), name.to_owned()), uid.to_owned());
        }
    }

    pub fn remove_owner(&self, kind: OwnerKind, namespace: &str, name: &str) {
        if let Some(objects) = self.write().owners.get_mut(&kind) {
            objects.remove(&(namespace.to_owned(), name.to_owned()));
        }
    }

    /// Replaces every object of an owner kind (a (re-)list): from now on
    /// the kind is known.
    pub fn replace_owners(&self, kind: OwnerKind, all: BTreeMap<(String, String), String>) {
        self.write().owners.insert(kind, all);
    }

    /// Adds or replaces a serving object.
    pub fn upsert_serving(&self, kind: JobKind, namespace: &str, name: &str, meta: ServingMeta) {
        if let Some(objects) = self.write().serving.get_mut(&kind) {
            objects.insert((namespace.to_owned(), name.to_owned()), meta);
        }
    }

    pub fn remove_serving(&self, kind: JobKind, namespace: &str, name: &str) {
        if let Some(objects) = self.write().serving.get_mut(&kind) {
            objects.remove(&(namespace.to_owned(), name.to_owned()));
        }
    }

    /// Replaces every serving object of a kind (a (re-)list).
    pub fn replace_serving(&self, kind: JobKind, all: BTreeMap<(String, String), ServingMeta>) {
        self.write().serving.insert(kind, all);
    }

    /// Adds or replaces a ClusterQueue's namespaceSelector.
    pub fn upsert_cluster_queue(&self, name: &str, selector: Option<LabelSelector>) {
        self.write()
            .cluster_queues
            .get_or_insert_with(BTreeMap::new)
            .insert(name.to_owned(), selector);
    }

    pub fn remove_cluster_queue(&self, name: &str) {
        if let Some(cqs) = self.write().cluster_queues.as_mut() {
            cqs.remove(name);
        }
    }

    /// Replaces all ClusterQueues (a (re-)list).
    pub fn replace_cluster_queues(&self, all: BTreeMap<String, Option<LabelSelector>>) {
        self.write().cluster_queues = Some(all);
    }

    /// Adds or replaces the ClusterQueue a LocalQueue points at.
    pub fn upsert_local_queue_target(&self, namespace: &str, name: &str, cluster_queue: &str) {
        self.write()
            .local_queue_targets
            .get_or_insert_with(BTreeMap::new)
            .insert((namespace.to_owned(), name.to_owned()), cluster_queue.to_owned());
    }

    pub fn remove_local_queue_target(&self, namespace: &str, name: &str) {
        if let Some(t) = self.write().local_queue_targets.as_mut() {
            t.remove(&(namespace.to_owned(), name.to_owned()));
        }
    }

    /// Replaces all LocalQueue targets (a (re-)list).
    pub fn replace_local_queue_targets(&self, all: BTreeMap<(String, String), String>) {
        self.write().local_queue_targets = Some(all);
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, MemoryState> {
        // A poisoned lock only means a writer panicked mid-update; the
        // maps are still usable.
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, MemoryState> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClusterView for MemoryView {
    fn synced(&self) -> bool {
        self.read().synced
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.read().namespaces.get(namespace).cloned()
    }

    fn local_queue_exists(&self, namespace: &str, name: &str) -> bool {
        self.read()
            .local_queues
            .contains(&(namespace.to_owned(), name.to_owned()))
    }

    fn runtime_class_exists(&self, name: &str) -> Option<bool> {
        self.read().runtime_classes.as_ref().map(|c| c.contains(name))
    }

    fn cohort_parents(&self) -> Option<BTreeMap<String, Option<String>>> {
        self.read().cohorts.clone()
    }

    fn serving_object(&self, kind: JobKind, namespace: &str, name: &str) -> Option<ServingMeta> {
        self.read()
            .serving
            .get(&kind)?
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn owner_named(&self, kind: OwnerKind, namespace: &str, name: &str) -> Option<bool> {
        let state = self.read();
        let objects = state.owners.get(&kind)?;
        Some(objects.contains_key(&(namespace.to_owned(), name.to_owned())))
    }

    fn owner_exists(&self, kind: OwnerKind, namespace: &str, name: &str, uid: &str) -> Option<bool> {
        let state = self.read();
        let objects = state.owners.get(&kind)?;
        Some(
            objects
                .get(&(namespace.to_owned(), name.to_owned()))
                .is_some_and(|u| !uid.is_empty() && u == uid),
        )
    }

    fn cluster_queue_selector(&self, name: &str) -> Option<Option<LabelSelector>> {
        self.read().cluster_queues.as_ref()?.get(name).cloned()
    }

    fn cluster_queue_exists(&self, name: &str) -> Option<bool> {
        Some(self.read().cluster_queues.as_ref()?.contains_key(name))
    }

    fn local_queues_of(&self, cluster_queue: &str) -> Option<Vec<(String, String)>> {
        let state = self.read();
        let targets = state.local_queue_targets.as_ref()?;
        Some(
            targets
                .iter()
                .filter(|(_, cq)| *cq == cluster_queue)
                .map(|(k, _)| k.clone())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_queue_opt_in_needs_the_exact_label_value() {
        let v = MemoryView::synced_empty();
        v.upsert_namespace(
            "ml",
            BTreeMap::from([(sluice_api::labels::DEFAULT_QUEUE.to_owned(), "enabled".to_owned())]),
        );
        v.upsert_namespace(
            "web",
            BTreeMap::from([(sluice_api::labels::DEFAULT_QUEUE.to_owned(), "true".to_owned())]),
        );
        assert!(v.default_queue_enabled("ml"));
        assert!(!v.default_queue_enabled("web"));
        assert!(!v.default_queue_enabled("unknown"));
        v.upsert_local_queue("ml", "default");
        assert!(v.local_queue_exists("ml", "default"));
        v.remove_local_queue("ml", "default");
        assert!(!v.local_queue_exists("ml", "default"));
    }

    #[test]
    fn runtime_classes_are_unknown_until_listed() {
        let v = MemoryView::synced_empty();
        assert_eq!(v.runtime_class_exists("nvidia"), None);
        v.upsert_runtime_class("nvidia");
        assert_eq!(
            v.runtime_class_exists("nvidia"),
            Some(true),
            "an event before the list is kept"
        );
        v.replace_runtime_classes(BTreeSet::from(["kata".to_owned()]));
        assert_eq!(v.runtime_class_exists("nvidia"), Some(false));
        assert_eq!(v.runtime_class_exists("kata"), Some(true));
        v.remove_runtime_class("kata");
        assert_eq!(v.runtime_class_exists("kata"), Some(false));
    }

    #[test]
    fn cohorts_are_unknown_until_listed() {
        let v = MemoryView::synced_empty();
        assert_eq!(v.cohort_parents(), None);
        v.upsert_cohort("research", Some("company".to_owned()));
        assert_eq!(
            v.cohort_parents(),
            Some(BTreeMap::from([("research".to_owned(), Some("company".to_owned()))])),
            "an event before the list is kept"
        );
        v.replace_cohorts(BTreeMap::from([("company".to_owned(), None)]));
        assert_eq!(v.cohort_parents(), Some(BTreeMap::from([("company".to_owned(), None)])));
        v.remove_cohort("company");
        assert_eq!(v.cohort_parents(), Some(BTreeMap::new()));
    }

    #[test]
    fn owners_are_unknown_until_listed_and_match_on_namespace_name_and_uid() {
        let v = MemoryView::synced_empty();
        let ds = OwnerKind::DaemonSet;
        assert_eq!(v.owner_exists(ds, "gpu-infra", "dcgm", "u1"), None);
        v.upsert_owner(ds, "gpu-infra", "dcgm", "u1");
        assert_eq!(
            v.owner_exists(ds, "gpu-infra", "dcgm", "u1"),
            None,
            "an event before the list does not make the kind known"
        );
        v.replace_owners(
            ds,
            BTreeMap::from([(("gpu-infra".to_owned(), "dcgm".to_owned()), "u1".to_owned())]),
        );
        let table = [
            ("gpu-infra", "dcgm", "u1", Some(true)),
            ("gpu-infra", "dcgm", "u2", Some(false)),
            ("gpu-infra", "dcgm", "", Some(false)),
            ("team-a", "dcgm", "u1", Some(false)),
            ("gpu-infra", "other", "u1", Some(false)),
        ];
        for (ns, name, uid, want) in table {
            assert_eq!(v.owner_exists(ds, ns, name, uid), want, "{ns}/{name} {uid:?}");
        }
        // Another kind with the same name and uid is not it.
        assert_eq!(
            v.owner_exists(OwnerKind::Queued(JobKind::JobSet), "gpu-infra", "dcgm", "u1"),
            None
        );
        v.remove_owner(ds, "gpu-infra", "dcgm");
        assert_eq!(v.owner_exists(ds, "gpu-infra", "dcgm", "u1"), Some(false));
        v.upsert_owner(ds, "gpu-infra", "dcgm", "u3");
        assert_eq!(v.owner_exists(ds, "gpu-infra", "dcgm", "u3"), Some(true));
    }
}
