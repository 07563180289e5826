//! The informer cache behind [`ClusterView`]: metadata watches of
//! Namespaces, LocalQueues and RuntimeClasses, watches of Cohorts (their
//! `spec.parent`), ClusterQueues (their `spec.namespaceSelector`) and
//! LocalQueues (their `spec.clusterQueue`), and metadata watches of the owner kinds whose
//! ownerReferences exempt something ([`OwnerKind`]: DaemonSets, and the
//! queued kinds that make Jobs), feeding a [`MemoryView`]. Handlers only
//! read it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, ApiResource};
use kube::core::{DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use sluice_api::{ClusterQueue, Cohort, LocalQueue};

use crate::cache::{ClusterView, MemoryView, OwnerKind, ServingMeta};
use sluice_kinds::JobKind;

/// The cache: a [`MemoryView`] that is synced once Namespaces, LocalQueues
/// and DaemonSets are listed (the queued kinds' CRDs may not be installed,
/// so they do not gate it).
#[derive(Debug, Default)]
pub struct KubeView {
    pub view: MemoryView,
    namespaces_synced: AtomicBool,
    local_queues_synced: AtomicBool,
    daemon_sets_synced: AtomicBool,
}

impl ClusterView for KubeView {
    fn synced(&self) -> bool {
        self.namespaces_synced.load(Ordering::Acquire)
            && self.local_queues_synced.load(Ordering::Acquire)
            && self.daemon_sets_synced.load(Ordering::Acquire)
    }

    fn owner_exists(&self, kind: OwnerKind, namespace: &str, name: &str, uid: &str) -> Option<bool> {
        self.view.owner_exists(kind, namespace, name, uid)
    }

    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.view.namespace_labels(namespace)
    }

    fn local_queue_exists(&self, namespace: &str, name: &str) -> bool {
        self.view.local_queue_exists(namespace, name)
    }

    fn runtime_class_exists(&self, name: &str) -> Option<bool> {
        self.view.runtime_class_exists(name)
    }

    fn cohort_parents(&self) -> Option<BTreeMap<String, Option<String>>> {
        self.view.cohort_parents()
    }

    fn cluster_queue_selector(&self, name: &str) -> Option<Option<LabelSelector>> {
        self.view.cluster_queue_selector(name)
    }

    fn cluster_queue_exists(&self, name: &str) -> Option<bool> {
        self.view.cluster_queue_exists(name)
    }

    fn local_queues_of(&self, cluster_queue: &str) -> Option<Vec<(String, String)>> {
        self.view.local_queues_of(cluster_queue)
    }

    fn serving_object(&self, kind: JobKind, namespace: &str, name: &str) -> Option<ServingMeta> {
        self.view.serving_object(kind, namespace, name)
    }

    fn owner_named(&self, kind: OwnerKind, namespace: &str, name: &str) -> Option<bool> {
        self.view.owner_named(kind, namespace, name)
    }
}

impl KubeView {
    /// Applies one Namespace watch event.
    pub fn apply_namespace_event(
        &self,
        buffer: &mut BTreeMap<String, BTreeMap<String, String>>,
        ev: Event<PartialObjectMeta<Namespace>>,
    ) {
        let entry = |o: &PartialObjectMeta<Namespace>| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.labels.clone().unwrap_or_default(),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                let (k, v) = entry(&o);
                buffer.insert(k, v);
            }
            Event::InitDone => {
                self.view.replace_namespaces(std::mem::take(buffer));
                self.namespaces_synced.store(true, Ordering::Release);
            }
            Event::Apply(o) => {
                let (k, v) = entry(&o);
                self.view.upsert_namespace(&k, v);
            }
            Event::Delete(o) => self.view.remove_namespace(&entry(&o).0),
        }
    }

    /// Applies one LocalQueue watch event.
    pub fn apply_local_queue_event(
        &self,
        buffer: &mut BTreeSet<(String, String)>,
        ev: Event<PartialObjectMeta<LocalQueue>>,
    ) {
        let key = |o: &PartialObjectMeta<LocalQueue>| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                buffer.insert(key(&o));
            }
            Event::InitDone => {
                self.view.replace_local_queues(std::mem::take(buffer));
                self.local_queues_synced.store(true, Ordering::Release);
            }
            Event::Apply(o) => {
                let (ns, name) = key(&o);
                self.view.upsert_local_queue(&ns, &name);
            }
            Event::Delete(o) => {
                let (ns, name) = key(&o);
                self.view.remove_local_queue(&ns, &name);
            }
        }
    }
}

impl KubeView {
    /// Applies one RuntimeClass watch event. RuntimeClasses do not gate
    /// [`ClusterView::synced`]: until they are listed, `auto` writes none.
    pub fn apply_runtime_class_event(&self, buffer: &mut BTreeSet<String>, ev: Event<PartialObjectMeta<RuntimeClass>>) {
        let name = |o: &PartialObjectMeta<RuntimeClass>| o.metadata.name.clone().unwrap_or_default();
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                buffer.insert(name(&o));
            }
            Event::InitDone => self.view.replace_runtime_classes(std::mem::take(buffer)),
            Event::Apply(o) => self.view.upsert_runtime_class(&name(&o)),
            Event::Delete(o) => self.view.remove_runtime_class(&name(&o)),
        }
    }
}

impl KubeView {
    /// Applies one Cohort watch event. Cohorts do not gate
    /// [`ClusterView::synced`]: until they are listed, a Cohort's parent
    /// chain is not checked (the review says so in a warning). Objects are
    /// read as JSON, so one that does not decode cannot stop the watch.
    pub fn apply_cohort_event(&self, buffer: &mut BTreeMap<String, Option<String>>, ev: Event<DynamicObject>) {
        let entry = |o: &DynamicObject| {
            let parent = o.data.pointer("/spec/parent").and_then(|p| p.as_str());
            (
                o.metadata.name.clone().unwrap_or_default(),
                parent.filter(|p| !p.is_empty()).map(str::to_owned),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                let (k, v) = entry(&o);
                buffer.insert(k, v);
            }
            Event::InitDone => self.view.replace_cohorts(std::mem::take(buffer)),
            Event::Apply(o) => {
                let (k, v) = entry(&o);
                self.view.upsert_cohort(&k, v);
            }
            Event::Delete(o) => self.view.remove_cohort(&entry(&o).0),
        }
    }
}

impl KubeView {
    /// Applies one metadata watch event of an owner kind: (namespace,
    /// name) → uid. DaemonSets gate [`ClusterView::synced`].
    pub fn apply_owner_event<K>(
        &self,
        kind: OwnerKind,
        buffer: &mut BTreeMap<(String, String), String>,
        ev: Event<PartialObjectMeta<K>>,
    ) {
        let entry = |o: &PartialObjectMeta<K>| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.uid.clone().unwrap_or_default(),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                let (ns, name, uid) = entry(&o);
                buffer.insert((ns, name), uid);
            }
            Event::InitDone => {
                self.view.replace_owners(kind, std::mem::take(buffer));
                if kind == OwnerKind::DaemonSet {
                    self.daemon_sets_synced.store(true, Ordering::Release);
                }
            }
            Event::Apply(o) => {
                let (ns, name, uid) = entry(&o);
                self.view.upsert_owner(kind, &ns, &name, &uid);
            }
            Event::Delete(o) => {
                let (ns, name, _) = entry(&o);
                self.view.remove_owner(kind, &ns, &name);
            }
        }
    }
}

impl KubeView {
    /// Applies one metadata watch event of a serving kind: (namespace,
    /// name) → its labels and held replicas. Does not gate
    /// [`ClusterView::synced`]: until listed, a scale is not checked.
    pub fn apply_serving_event(
        &self,
        kind: JobKind,
        buffer: &mut BTreeMap<(String, String), ServingMeta>,
        ev: Event<PartialObjectMeta<DynamicObject>>,
    ) {
        let key = |o: &PartialObjectMeta<DynamicObject>| {
            (
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                buffer.insert(key(&o), ServingMeta::of(&o.metadata));
            }
            Event::InitDone => self.view.replace_serving(kind, std::mem::take(buffer)),
            Event::Apply(o) => {
                let (ns, name) = key(&o);
                self.view.upsert_serving(kind, &ns, &name, ServingMeta::of(&o.metadata));
            }
            Event::Delete(o) => {
                let (ns, name) = key(&o);
                self.view.remove_serving(kind, &ns, &name);
            }
        }
    }

    /// Applies one ClusterQueue watch event (its namespaceSelector, for the
    /// warnings about LocalQueues it does not serve). Does not gate
    /// [`ClusterView::synced`]: until listed, nothing is warned. Read as
    /// JSON: a selector that does not decode counts as unset.
    pub fn apply_cluster_queue_event(
        &self,
        buffer: &mut BTreeMap<String, Option<LabelSelector>>,
        ev: Event<DynamicObject>,
    ) {
        let entry = |o: &DynamicObject| {
            let selector = o
                .data
                .pointer("/spec/namespaceSelector")
                .filter(|s| !s.is_null())
                .and_then(|s| serde_json::from_value(s.clone()).ok());
            (o.metadata.name.clone().unwrap_or_default(), selector)
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                let (k, v) = entry(&o);
                buffer.insert(k, v);
            }
            Event::InitDone => self.view.replace_cluster_queues(std::mem::take(buffer)),
            Event::Apply(o) => {
                let (k, v) = entry(&o);
                self.view.upsert_cluster_queue(&k, v);
            }
            Event::Delete(o) => self.view.remove_cluster_queue(&entry(&o).0),
        }
    }

    /// Applies one event of the LocalQueue watch that reads their
    /// `spec.clusterQueue` (the other LocalQueue watch reads metadata only).
    pub fn apply_local_queue_target_event(
        &self,
        buffer: &mut BTreeMap<(String, String), String>,
        ev: Event<DynamicObject>,
    ) {
        let entry = |o: &DynamicObject| {
            let cq = o.data.pointer("/spec/clusterQueue").and_then(|c| c.as_str());
            (
                (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                ),
                cq.unwrap_or_default().to_owned(),
            )
        };
        match ev {
            Event::Init => buffer.clear(),
            Event::InitApply(o) => {
                let (k, v) = entry(&o);
                buffer.insert(k, v);
            }
            Event::InitDone => self.view.replace_local_queue_targets(std::mem::take(buffer)),
            Event::Apply(o) => {
                let ((ns, name), cq) = entry(&o);
                self.view.upsert_local_queue_target(&ns, &name, &cq);
            }
            Event::Delete(o) => {
                let ((ns, name), _) = entry(&o);
                self.view.remove_local_queue_target(&ns, &name);
            }
        }
    }
}

/// The API resource of an owner kind, for a dynamic metadata watch.
fn owner_resource(kind: OwnerKind) -> ApiResource {
    let (group, version, k, plural) = kind.resource();
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: format!("{group}/{version}"),
        kind: k.to_owned(),
        plural: plural.to_owned(),
    }
}

/// Starts the watches (with kube-runtime's default backoff on errors) and
/// returns the cache they fill: Namespaces, RuntimeClasses, Cohorts, the
/// owner kinds, what namespaceSelector warnings need, LocalQueues.
pub fn spawn(client: Client) -> Arc<KubeView> {
    let view = Arc::new(KubeView::default());
    let v = view.clone();
    watch(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        BTreeMap::new(),
        move |buffer, ev| v.apply_namespace_event(buffer, ev),
        |e| tracing::warn!(error = %e, "namespace watch failed; retrying"),
    );
    let v = view.clone();
    watch(
        Api::<PartialObjectMeta<RuntimeClass>>::all(client.clone()),
        BTreeSet::new(),
        move |buffer, ev| v.apply_runtime_class_event(buffer, ev),
        |e| tracing::warn!(error = %e, "RuntimeClass watch failed (no runtimeClassName is set until it lists); retrying"),
    );
    let v = view.clone();
    watch(
        Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<Cohort>(&())),
        BTreeMap::new(),
        move |buffer, ev| v.apply_cohort_event(buffer, ev),
        |e| tracing::warn!(error = %e, "Cohort watch failed (Cohort parent chains are not checked until it lists); retrying"),
    );
    for kind in OwnerKind::all() {
        spawn_owner_watch(&client, &view, kind);
    }
    for kind in JobKind::ALL
        .into_iter()
        .filter(|k| k.integration().hold() == sluice_kinds::Hold::Replicas)
    {
        spawn_serving_watch(&client, &view, kind);
    }
    spawn_selection_watches(&client, &view);
    let v = view.clone();
    watch(
        Api::<PartialObjectMeta<LocalQueue>>::all(client),
        BTreeSet::new(),
        move |buffer, ev| v.apply_local_queue_event(buffer, ev),
        |e| tracing::warn!(error = %e, "LocalQueue watch failed; retrying"),
    );
    view
}

/// Runs a watch for as long as the process: each event into `apply`
/// (with `buffer`, where a list in progress is gathered), each error to
/// `failed` (the watch retries with its backoff).
fn watch<K, B>(
    api: Api<K>,
    mut buffer: B,
    apply: impl Fn(&mut B, Event<K>) + Send + 'static,
    failed: impl Fn(&watcher::Error) + Send + 'static,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    B: Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => apply(&mut buffer, ev),
                Err(e) => failed(&e),
            }
        }
    });
}

/// The metadata watch of one owner kind. A queued kind whose CRD is not
/// installed fails on every retry: said once, not every backoff.
fn spawn_owner_watch(client: &Client, view: &Arc<KubeView>, kind: OwnerKind) {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &owner_resource(kind));
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeMap::new();
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut failing = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    // Every retry starts with Init: only a finished
                    // list (or a later event) means it works again.
                    if !matches!(ev, Event::Init) {
                        failing = false;
                    }
                    v.apply_owner_event(kind, &mut buffer, ev);
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, kind = kind.kind(), "owner watch failed (ownerReferences of this kind exempt nothing until it lists); retrying");
                }
                Err(e) => tracing::debug!(error = %e, kind = kind.kind(), "owner watch still failing"),
            }
        }
    });
}

/// The metadata watch of one serving kind (for its `scale`). A kind whose
/// CRD is not installed fails on every retry: said once.
fn spawn_serving_watch(client: &Client, view: &Arc<KubeView>, kind: JobKind) {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &kind.api_resource());
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeMap::new();
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut failing = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if !matches!(ev, Event::Init) {
                        failing = false;
                    }
                    v.apply_serving_event(kind, &mut buffer, ev);
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, kind = kind.kind(), "watch of a serving kind failed (its scale is not checked until it lists); retrying");
                }
                Err(e) => tracing::debug!(error = %e, kind = kind.kind(), "serving watch still failing"),
            }
        }
    });
}

/// The ClusterQueue and LocalQueue-target watches behind the
/// namespaceSelector warnings.
fn spawn_selection_watches(client: &Client, view: &Arc<KubeView>) {
    let cq_api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<ClusterQueue>(&()));
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeMap::new();
        let mut stream = watcher::watcher(cq_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => v.apply_cluster_queue_event(&mut buffer, ev),
                Err(e) => {
                    tracing::warn!(error = %e, "ClusterQueue watch failed (no namespaceSelector warnings until it lists); retrying")
                }
            }
        }
    });
    let lq_api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<LocalQueue>(&()));
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeMap::new();
        let mut stream = watcher::watcher(lq_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => v.apply_local_queue_target_event(&mut buffer, ev),
                Err(e) => {
                    tracing::warn!(error = %e, "LocalQueue target watch failed (no namespaceSelector warnings on ClusterQueue updates until it lists); retrying")
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn ns(name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<Namespace> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    fn lq(namespace: &str, name: &str) -> PartialObjectMeta<LocalQueue> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn relist_replaces_and_events_update() {
        let v = KubeView::default();
        let mut nsb = BTreeMap::new();
        let mut lqb = BTreeSet::new();
        assert!(!v.synced());
        v.apply_namespace_event(&mut nsb, Event::Init);
        v.apply_namespace_event(
            &mut nsb,
            Event::InitApply(ns("ml", &[("sluice.dev/default-queue", "enabled")])),
        );
        v.apply_namespace_event(&mut nsb, Event::InitDone);
        assert!(!v.synced(), "LocalQueues not listed yet");
        v.apply_local_queue_event(&mut lqb, Event::Init);
        v.apply_local_queue_event(&mut lqb, Event::InitApply(lq("ml", "default")));
        v.apply_local_queue_event(&mut lqb, Event::InitDone);
        assert!(!v.synced(), "DaemonSets not listed yet");
        let mut dsb = BTreeMap::new();
        v.apply_owner_event::<DynamicObject>(OwnerKind::DaemonSet, &mut dsb, Event::Init);
        v.apply_owner_event::<DynamicObject>(OwnerKind::DaemonSet, &mut dsb, Event::InitDone);
        assert!(v.synced(), "Cohorts and the queued kinds do not gate it");
        assert!(v.default_queue_enabled("ml"));
        assert!(v.local_queue_exists("ml", "default"));

        v.apply_namespace_event(&mut nsb, Event::Apply(ns("ml", &[])));
        assert!(!v.default_queue_enabled("ml"));
        v.apply_local_queue_event(&mut lqb, Event::Delete(lq("ml", "default")));
        assert!(!v.local_queue_exists("ml", "default"));

        // A re-list drops what is gone.
        v.apply_local_queue_event(&mut lqb, Event::Apply(lq("a", "q")));
        v.apply_local_queue_event(&mut lqb, Event::Init);
        v.apply_local_queue_event(&mut lqb, Event::InitApply(lq("b", "q")));
        v.apply_local_queue_event(&mut lqb, Event::InitDone);
        assert!(!v.local_queue_exists("a", "q"));
        assert!(v.local_queue_exists("b", "q"));
    }

    #[test]
    fn runtime_classes_follow_their_watch() {
        let v = KubeView::default();
        let mut b = BTreeSet::new();
        let rc = |name: &str| PartialObjectMeta::<RuntimeClass> {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        };
        assert_eq!(v.runtime_class_exists("nvidia"), None);
        v.apply_runtime_class_event(&mut b, Event::Init);
        v.apply_runtime_class_event(&mut b, Event::InitApply(rc("nvidia")));
        assert_eq!(v.runtime_class_exists("nvidia"), None, "not before the list is done");
        v.apply_runtime_class_event(&mut b, Event::InitDone);
        assert_eq!(v.runtime_class_exists("nvidia"), Some(true));
        v.apply_runtime_class_event(&mut b, Event::Delete(rc("nvidia")));
        assert_eq!(v.runtime_class_exists("nvidia"), Some(false));
        v.apply_runtime_class_event(&mut b, Event::Apply(rc("kata")));
        assert_eq!(v.runtime_class_exists("kata"), Some(true));
    }

    #[test]
    fn cohort_parents_follow_their_watch() {
        let v = KubeView::default();
        let mut b = BTreeMap::new();
        let cohort = |name: &str, spec: serde_json::Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort",
                "metadata": {"name": name}, "spec": spec
            }))
            .unwrap()
        };
        let parents = |pairs: &[(&str, Option<&str>)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, p)| ((*k).to_owned(), p.map(str::to_owned)))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        assert_eq!(v.cohort_parents(), None);
        v.apply_cohort_event(&mut b, Event::Init);
        v.apply_cohort_event(
            &mut b,
            Event::InitApply(cohort("research", serde_json::json!({"parent": "company"}))),
        );
        v.apply_cohort_event(&mut b, Event::InitApply(cohort("company", serde_json::json!({}))));
        assert_eq!(v.cohort_parents(), None, "not before the list is done");
        v.apply_cohort_event(&mut b, Event::InitDone);
        assert_eq!(
            v.cohort_parents(),
            parents(&[("company", None), ("research", Some("company"))])
        );
        // A parent that is not a string (a broken object) reads as none.
        v.apply_cohort_event(
            &mut b,
            Event::Apply(cohort("company", serde_json::json!({"parent": 7}))),
        );
        v.apply_cohort_event(&mut b, Event::Delete(cohort("research", serde_json::json!({}))));
        assert_eq!(v.cohort_parents(), parents(&[("company", None)]));
    }

    #[test]
    fn owners_follow_their_watch_by_namespace_name_and_uid() {
        let v = KubeView::default();
        let mut b = BTreeMap::new();
        let kind = OwnerKind::Queued(sluice_kinds::JobKind::JobSet);
        let js = |ns: &str, name: &str, uid: &str| PartialObjectMeta::<DynamicObject> {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(ns.to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        };
        v.apply_owner_event::<DynamicObject>(kind, &mut b, Event::Init);
        v.apply_owner_event(kind, &mut b, Event::InitApply(js("ml", "pretrain", "u1")));
        assert_eq!(
            v.owner_exists(kind, "ml", "pretrain", "u1"),
            None,
            "not before the list is done"
        );
        v.apply_owner_event::<DynamicObject>(kind, &mut b, Event::InitDone);
        assert_eq!(v.owner_exists(kind, "ml", "pretrain", "u1"), Some(true));
        assert!(
            !v.daemon_sets_synced.load(Ordering::Acquire),
            "a queued kind does not gate readiness"
        );
        // Deleted and re-created under the same name: a new uid.
        v.apply_owner_event(kind, &mut b, Event::Delete(js("ml", "pretrain", "u1")));
        assert_eq!(v.owner_exists(kind, "ml", "pretrain", "u1"), Some(false));
        v.apply_owner_event(kind, &mut b, Event::Apply(js("ml", "pretrain", "u2")));
        assert_eq!(v.owner_exists(kind, "ml", "pretrain", "u1"), Some(false));
        assert_eq!(v.owner_exists(kind, "ml", "pretrain", "u2"), Some(true));
    }

    #[test]
    fn cluster_queue_selectors_and_local_queue_targets_follow_their_watches() {
        let v = KubeView::default();
        let obj = |namespace: Option<&str>, name: &str, spec: serde_json::Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "X",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec
            }))
            .unwrap()
        };
        let mut cqb = BTreeMap::new();
        assert_eq!(v.cluster_queue_selector("gpus"), None);
        v.apply_cluster_queue_event(&mut cqb, Event::Init);
        v.apply_cluster_queue_event(&mut cqb, Event::InitApply(obj(None, "gpus", serde_json::json!({}))));
        v.apply_cluster_queue_event(
            &mut cqb,
            Event::InitApply(obj(None, "open", serde_json::json!({"namespaceSelector": {}}))),
        );
        assert_eq!(v.cluster_queue_selector("gpus"), None, "not before the list is done");
        v.apply_cluster_queue_event(&mut cqb, Event::InitDone);
        assert_eq!(v.cluster_queue_selector("gpus"), Some(None), "unset");
        assert_eq!(v.cluster_queue_selector("open"), Some(Some(LabelSelector::default())));
        v.apply_cluster_queue_event(&mut cqb, Event::Delete(obj(None, "open", serde_json::json!({}))));
        assert_eq!(v.cluster_queue_selector("open"), None);

        let mut lqb = BTreeMap::new();
        assert_eq!(v.local_queues_of("gpus"), None);
        v.apply_local_queue_target_event(&mut lqb, Event::Init);
        v.apply_local_queue_target_event(
            &mut lqb,
            Event::InitApply(obj(Some("a"), "q", serde_json::json!({"clusterQueue": "gpus"}))),
        );
        v.apply_local_queue_target_event(&mut lqb, Event::InitDone);
        v.apply_local_queue_target_event(
            &mut lqb,
            Event::Apply(obj(Some("b"), "q", serde_json::json!({"clusterQueue": "cpus"}))),
        );
        assert_eq!(v.local_queues_of("gpus"), Some(vec![("a".to_owned(), "q".to_owned())]));
        v.apply_local_queue_target_event(&mut lqb, Event::Delete(obj(Some("a"), "q", serde_json::json!({}))));
        assert_eq!(v.local_queues_of("gpus"), Some(vec![]));
    }
}
