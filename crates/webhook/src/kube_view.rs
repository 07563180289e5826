//! The informer cache behind [`ClusterView`]: metadata watches of
//! Namespaces, LocalQueues and RuntimeClasses feeding a [`MemoryView`].
//! Handlers only read it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use sluice_api::LocalQueue;

use crate::cache::{ClusterView, MemoryView};

/// The cache: a [`MemoryView`] that is synced once both watches listed.
#[derive(Debug, Default)]
pub struct KubeView {
    pub view: MemoryView,
    namespaces_synced: AtomicBool,
    local_queues_synced: AtomicBool,
}

impl ClusterView for KubeView {
    fn synced(&self) -> bool {
        self.namespaces_synced.load(Ordering::Acquire) && self.local_queues_synced.load(Ordering::Acquire)
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

/// Starts the watches (with kube-runtime's default backoff on errors) and
/// returns the cache they fill.
pub fn spawn(client: Client) -> Arc<KubeView> {
    let view = Arc::new(KubeView::default());
    let ns_api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeMap::new();
        let mut stream = watcher::watcher(ns_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => v.apply_namespace_event(&mut buffer, ev),
                Err(e) => tracing::warn!(error = %e, "namespace watch failed; retrying"),
            }
        }
    });
    let rc_api: Api<PartialObjectMeta<RuntimeClass>> = Api::all(client.clone());
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeSet::new();
        let mut stream = watcher::watcher(rc_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => v.apply_runtime_class_event(&mut buffer, ev),
                Err(e) => {
                    tracing::warn!(error = %e, "RuntimeClass watch failed (no runtimeClassName is set until it lists); retrying")
                }
            }
        }
    });
    let lq_api: Api<PartialObjectMeta<LocalQueue>> = Api::all(client);
    let v = view.clone();
    tokio::spawn(async move {
        let mut buffer = BTreeSet::new();
        let mut stream = watcher::watcher(lq_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => v.apply_local_queue_event(&mut buffer, ev),
                Err(e) => tracing::warn!(error = %e, "LocalQueue watch failed; retrying"),
            }
        }
    });
    view
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
        assert!(v.synced());
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
}
