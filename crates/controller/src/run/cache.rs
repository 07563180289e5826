//! The cache every replica keeps (warm followers), what the index is fed
//! from it, and the index a new leader builds from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use sluice_api::v1alpha1::Workload;

use super::now_ms;
use super::watches::{Msg, Obj, key_of_obj, kind_of, split_key};
use crate::index::{Index, IndexConfig, Kind};
use crate::plan::JobRef;
use sluice_kinds::JobKind;

/// Every object seen, by kind and key; what a new leader builds its index
/// from. Workloads and Jobs are kept compact (JSON, views).
#[derive(Default)]
pub(super) struct Cache {
    pub(super) kueue_compat: bool,
    pub(super) objects: BTreeMap<Kind, BTreeMap<String, Obj>>,
    pub(super) synced: BTreeSet<Kind>,
    /// Keys seen since a (re)list started, per kind.
    pub(super) relisting: HashMap<Kind, BTreeSet<String>>,
}

pub(super) fn apply_to_index(ix: &mut Index, o: &Obj, now: i64) {
    match o {
        Obj::Flavor(x) => ix.apply_flavor((**x).clone()),
        Obj::Cohort(x) => ix.apply_cohort((**x).clone()),
        Obj::ClusterQueue(x) => ix.apply_cluster_queue((**x).clone()),
        Obj::LocalQueue(x) => ix.apply_local_queue((**x).clone()),
        Obj::WorkloadClass(x) => ix.apply_workload_priority_class((**x).clone()),
        Obj::PodClass(n, v) => ix.apply_priority_class(n, *v),
        Obj::Namespace(n, labels) => ix.apply_namespace(n, labels.clone(), now),
        Obj::Workload(x) => ix.apply_workload(x.clone(), now),
        Obj::Job(x) => ix.apply_job(&**x, now),
        Obj::JobView(v) => ix.apply_job_view((**v).clone(), None, now),
        Obj::Dynamic(kind, v) => ix.apply_object(*kind, v, now),
        Obj::DynamicJson(kind, bytes) => match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(v) => ix.apply_object(*kind, &v, now),
            Err(e) => ix.report_malformed(Kind::Queued(*kind), "(cached)", &e.to_string()),
        },
        Obj::JobJson(bytes) => match serde_json::from_slice::<Job>(bytes) {
            Ok(j) => ix.apply_job(j, now),
            Err(e) => ix.report_malformed(Kind::JOB, "(cached)", &e.to_string()),
        },
        Obj::WorkloadJson(bytes) => match serde_json::from_slice::<Workload>(bytes) {
            Ok(wl) => ix.apply_workload(wl, now),
            Err(e) => ix.report_malformed(Kind::Workload, "(cached)", &e.to_string()),
        },
        Obj::Referent(r, v) => ix.apply_referent(
            *r,
            &super::watches::name_key(v["metadata"]["namespace"].as_str(), v["metadata"]["name"].as_str()),
            v.clone(),
        ),
        Obj::Node(spec) => ix.apply_node((**spec).clone()),
        Obj::Pod(key, pod) => ix.apply_pod(key, pod.clone()),
        Obj::GatedPod(key, pod) => ix.apply_gated_pod(&split_key(key), Some((**pod).clone()), now),
        Obj::Foreign(key, admission) => ix.apply_foreign(key, admission.clone()),
        Obj::Malformed(kind, key, msg) => ix.report_malformed(*kind, key, msg),
        // Only a leader's cache holds these, and no index is built from it.
        Obj::Indexed => {}
    }
}

pub(super) fn delete_from_index(ix: &mut Index, kind: Kind, key: &str, now: i64) {
    let split = split_key(key);
    match kind {
        Kind::ResourceFlavor => ix.delete_flavor(key),
        Kind::Cohort => ix.delete_cohort(key),
        Kind::ClusterQueue => ix.delete_cluster_queue(key),
        Kind::LocalQueue => ix.delete_local_queue(&split_key(key)),
        Kind::WorkloadPriorityClass => ix.delete_workload_priority_class(key),
        Kind::PriorityClass => ix.delete_priority_class(key),
        Kind::Namespace => ix.delete_namespace(key),
        Kind::KueueWorkload => ix.delete_foreign(key),
        Kind::Workload => ix.delete_workload(&split_key(key), now),
        Kind::Queued(k) => ix.delete_job(&JobRef::new(k, split.namespace, split.name), now),
        Kind::Referent(r) => ix.delete_referent(r, key),
        Kind::Node => ix.delete_node(key),
        Kind::Pod => ix.delete_pod(key),
        Kind::GatedPod => ix.apply_gated_pod(&split, None, now),
    }
}

/// A new index from the cache: configuration first, then Workloads (the
/// ledger is restored from their statuses), then Jobs.
pub(super) fn build_index(cache: &Cache, cfg: &IndexConfig) -> Index {
    let mut ix = Index::new(cfg.clone());
    let now = now_ms();
    for kind in Kind::all() {
        for o in cache.objects.get(&kind).into_iter().flat_map(|m| m.values()) {
            apply_to_index(&mut ix, o, now);
        }
    }
    for k in &cache.synced {
        ix.mark_synced(*k);
    }
    ix
}

impl Cache {
    /// A cache that lists everything again (a replica that stops leading:
    /// its cache kept Workloads as keys only).
    pub(super) fn empty(kueue_compat: bool) -> Self {
        Self {
            kueue_compat,
            ..Self::default()
        }
    }

    /// The index holds what it needs of every Workload now: the cache
    /// keeps their keys only (for deletions missed during a relist).
    pub(super) fn keep_workload_keys_only(&mut self) {
        if let Some(wls) = self.objects.get_mut(&Kind::Workload) {
            for o in wls.values_mut() {
                *o = Obj::Indexed;
            }
        }
    }
}

pub(super) fn handle(cache: &mut Cache, ix: Option<&mut Index>, msg: Msg, now: i64) {
    match msg {
        Msg::Init(kind) => {
            cache.relisting.insert(kind, BTreeSet::new());
        }
        Msg::InitDone(kind) => listed(cache, ix, kind, now),
        Msg::Apply(o) => {
            let kind = kind_of(&o);
            let key = match &o {
                Obj::Malformed(_, k, _) => k.clone(),
                _ => key_of_obj(&o),
            };
            if let Some(seen) = cache.relisting.get_mut(&kind) {
                seen.insert(key.clone());
            }
            let leading = ix.is_some();
            if let Some(ix) = ix {
                apply_to_index(ix, &o, now);
            }
            let o = cache.as_kept(o, &key, leading);
            cache.objects.entry(kind).or_default().insert(key, o);
        }
        Msg::Delete(kind, key) => {
            cache.objects.entry(kind).or_default().remove(&key);
            if let Some(ix) = ix {
                delete_from_index(ix, kind, &key, now);
            }
        }
    }
}

/// A kind listed (again): objects gone while we were not watching get no
/// Delete event, so those the list did not bring are deleted here.
fn listed(cache: &mut Cache, ix: Option<&mut Index>, kind: Kind, now: i64) {
    if let Some(seen) = cache.relisting.remove(&kind) {
        let known = cache.objects.entry(kind).or_default();
        let gone: Vec<String> = known.keys().filter(|k| !seen.contains(*k)).cloned().collect();
        for k in &gone {
            known.remove(k);
        }
        if let Some(ix) = ix {
            for k in &gone {
                delete_from_index(ix, kind, k, now);
            }
            ix.mark_synced(kind);
        }
    }
    cache.synced.insert(kind);
}

impl Cache {
    /// How the cache keeps an object it was just given: compact (the index
    /// had the full object to create a Workload from), whole only while
    /// its Workload is still to be made from it; what the leader's index
    /// holds, by key only.
    fn as_kept(&mut self, o: Obj, key: &str, leading: bool) -> Obj {
        match o {
            Obj::Job(j) => self.job_as_kept(&j, key),
            Obj::Dynamic(jk, v) => self.dynamic_as_kept(jk, v, key),
            Obj::Workload(w) => {
                self.no_longer_whole(&w);
                if leading {
                    // The leader's index has it.
                    Obj::Indexed
                } else {
                    match serde_json::to_vec(&*w) {
                        Ok(bytes) => Obj::WorkloadJson(bytes.into()),
                        Err(_) => Obj::Workload(w),
                    }
                }
            }
            // The leader's index (its engine) has them, as for Workloads.
            Obj::Pod(..) | Obj::Node(_) if leading => Obj::Indexed,
            other => other,
        }
    }

    fn has_workload(&self, wl_key: &str) -> bool {
        self.objects
            .get(&Kind::Workload)
            .is_some_and(|m| m.contains_key(wl_key))
    }

    /// A Job: its view, or while its Workload is still to be created from
    /// it, compact JSON of the whole Job.
    fn job_as_kept(&self, j: &Job, key: &str) -> Obj {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let gang = sluice_kinds::gang::Labels::of(&j.metadata);
        let wl_key = format!("{ns}/{}", sluice_kinds::gang::workload_name_of(name, gang.as_ref()));
        let view = || Obj::JobView(Box::new(sluice_kinds::job::JobView::of(j, self.kueue_compat)));
        if self.has_workload(&wl_key) {
            return view();
        }
        let mut slim = j.clone();
        slim.metadata.managed_fields = None;
        match serde_json::to_vec(&slim) {
            Ok(bytes) => Obj::JobJson(bytes.into()),
            Err(_) => view(),
        }
    }

    /// Another queued kind: its view, or while its Workload is still to be
    /// made from it, compact JSON; one the kind cannot read is malformed.
    fn dynamic_as_kept(&self, jk: JobKind, v: Arc<serde_json::Value>, key: &str) -> Obj {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let wl_key = format!("{ns}/{}", jk.workload_name(name));
        let has_workload = self.has_workload(&wl_key);
        match sluice_kinds::view(jk, &v, self.kueue_compat) {
            Ok(view) if has_workload => Obj::JobView(Box::new(view)),
            Ok(_) => match serde_json::to_vec(&*v) {
                Ok(bytes) => Obj::DynamicJson(jk, bytes.into()),
                Err(_) => Obj::Dynamic(jk, v),
            },
            Err(e) => Obj::Malformed(Kind::Queued(jk), key.to_string(), e.to_string()),
        }
    }

    /// Workload `w` exists: its Job (or its gang's Jobs, or its JobSet)
    /// no longer need to be kept whole, only as views.
    fn no_longer_whole(&mut self, w: &Workload) {
        let ns = w.metadata.namespace.as_deref().unwrap_or_default();
        let compat = self.kueue_compat;
        for o in w.metadata.owner_references.iter().flatten() {
            let Some(kind) = JobKind::ALL
                .into_iter()
                .find(|k| o.kind == k.kind() && o.api_version == k.api_version())
            else {
                continue;
            };
            let Some(cached) = self
                .objects
                .get_mut(&Kind::Queued(kind))
                .and_then(|m| m.get_mut(&format!("{ns}/{}", o.name)))
            else {
                continue;
            };
            let view = match cached {
                Obj::JobJson(bytes) => serde_json::from_slice::<Job>(bytes)
                    .ok()
                    .map(|j| sluice_kinds::job::JobView::of(&j, compat)),
                Obj::DynamicJson(jk, bytes) => serde_json::from_slice::<serde_json::Value>(bytes)
                    .ok()
                    .and_then(|v| sluice_kinds::view(*jk, &v, compat).ok()),
                _ => None,
            };
            if let Some(view) = view {
                *cached = Obj::JobView(Box::new(view));
            }
        }
    }
}
