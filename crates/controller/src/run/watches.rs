//! The watches: one stream of [`Msg`]s for every kind the controller
//! follows, decoded per object (a malformed one is reported, not fatal).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use sluice_api::v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};

use super::RunConfig;
use crate::index::Kind;
use crate::plan::ObjKey;
use sluice_kinds::JobKind;

/// A decoded watch event.
pub(super) enum Msg {
    Apply(Obj),
    Delete(Kind, String),
    Init(Kind),
    InitDone(Kind),
}

#[derive(Clone)]
pub(super) enum Obj {
    Flavor(Box<ResourceFlavor>),
    Cohort(Box<Cohort>),
    ClusterQueue(Box<ClusterQueue>),
    LocalQueue(Box<LocalQueue>),
    WorkloadClass(Box<WorkloadPriorityClass>),
    PodClass(String, i32),
    /// A Namespace: its name and labels.
    Namespace(String, BTreeMap<String, String>),
    Workload(Arc<Workload>),
    Job(Arc<Job>),
    /// How a follower's cache keeps a Workload: compact JSON (slim
    /// templates), what a new leader builds its index from.
    WorkloadJson(Arc<[u8]>),
    /// How the leader's cache keeps a Workload: its key only (the index has
    /// what it needs; a replica that stops leading lists everything again).
    Indexed,
    /// How the cache keeps a Job: what the index needs of it.
    JobView(Box<sluice_kinds::job::JobView>),
    /// A Job without a Workload yet: compact JSON of the whole Job, which
    /// its Workload is created from.
    JobJson(Arc<[u8]>),
    /// An object of another kind Sluice queues (a JobSet, a Kubeflow job),
    /// its JSON as observed.
    Dynamic(JobKind, Arc<serde_json::Value>),
    /// Such an object without a Workload yet, as the cache keeps it:
    /// compact JSON.
    DynamicJson(JobKind, Arc<[u8]>),
    /// An object a queued kind reads its pod sets from (a TrainJob's
    /// training runtime), its JSON as observed.
    Referent(sluice_kinds::Resource, Arc<serde_json::Value>),
    /// A Node as placement sees it.
    Node(Box<sluice_scheduler::NodeSpec>),
    /// A pod bound to a node (`None`: it holds nothing any more), by key.
    Pod(String, Option<Arc<crate::index::PodEntry>>),
    /// A pod the webhook gated, as the index keeps it, by key.
    GatedPod(String, Arc<sluice_kinds::pod::GatedPod>),
    /// A Kueue Workload: the admission it holds (`None`: none), by key.
    Foreign(String, Option<Arc<sluice_convert::foreign::ForeignAdmission>>),
    /// Could not be decoded: kept so that it is reported, never applied.
    Malformed(Kind, String, String),
}

pub(super) fn kind_of(o: &Obj) -> Kind {
    match o {
        Obj::Flavor(_) => Kind::ResourceFlavor,
        Obj::Cohort(_) => Kind::Cohort,
        Obj::ClusterQueue(_) => Kind::ClusterQueue,
        Obj::LocalQueue(_) => Kind::LocalQueue,
        Obj::WorkloadClass(_) => Kind::WorkloadPriorityClass,
        Obj::PodClass(..) => Kind::PriorityClass,
        Obj::Namespace(..) => Kind::Namespace,
        Obj::Workload(_) | Obj::WorkloadJson(_) | Obj::Indexed => Kind::Workload,
        Obj::Job(_) | Obj::JobJson(_) => Kind::JOB,
        Obj::JobView(v) => Kind::Queued(v.kind),
        Obj::Dynamic(k, _) | Obj::DynamicJson(k, _) => Kind::Queued(*k),
        Obj::Referent(r, _) => Kind::Referent(*r),
        Obj::Node(_) => Kind::Node,
        Obj::Pod(..) => Kind::Pod,
        Obj::GatedPod(..) => Kind::GatedPod,
        Obj::Foreign(..) => Kind::KueueWorkload,
        Obj::Malformed(k, ..) => *k,
    }
}

pub(super) fn key_of_obj(o: &Obj) -> String {
    match o {
        Obj::Flavor(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::Cohort(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::ClusterQueue(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::LocalQueue(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::WorkloadClass(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::PodClass(n, _) | Obj::Namespace(n, _) => n.clone(),
        Obj::Workload(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::Job(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::JobView(v) => format!("{}/{}", v.namespace, v.name),
        Obj::Dynamic(_, v) | Obj::Referent(_, v) => {
            name_key(v["metadata"]["namespace"].as_str(), v["metadata"]["name"].as_str())
        }
        Obj::Node(n) => n.name.clone(),
        Obj::Pod(key, _) | Obj::Foreign(key, _) | Obj::GatedPod(key, _) => key.clone(),
        Obj::WorkloadJson(_) | Obj::Indexed | Obj::JobJson(_) | Obj::DynamicJson(..) | Obj::Malformed(..) => {
            String::new()
        }
    }
}

pub(super) fn name_key(ns: Option<&str>, name: Option<&str>) -> String {
    match ns {
        Some(ns) => format!("{ns}/{}", name.unwrap_or_default()),
        None => name.unwrap_or_default().to_string(),
    }
}

pub(super) fn split_key(key: &str) -> ObjKey {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    ObjKey::new(ns, name)
}

pub(super) type MsgStream = Pin<Box<dyn Stream<Item = Msg> + Send>>;

/// A watch of a Sluice kind, decoded per object (a malformed object is
/// reported instead of breaking the watch).
pub(super) fn sluice_watch<K>(client: &Client, kind: Kind, wrap: fn(K) -> Obj) -> MsgStream
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
{
    let ar = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let decode = move |o: DynamicObject| -> (String, Obj) {
        let key = name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref());
        let value = serde_json::to_value(&o).unwrap_or_default();
        match serde_json::from_value::<K>(value) {
            Ok(k) => (key, wrap(k)),
            Err(e) => (key.clone(), Obj::Malformed(kind, key, e.to_string())),
        }
    };
    Box::pin(events(
        watcher(api, watcher::Config::default()),
        kind,
        move |o| decode(o).1,
        |o: &DynamicObject| name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref()),
    ))
}

pub(super) fn events<K, S>(
    stream: S,
    kind: Kind,
    decode: impl Fn(K) -> Obj + Send + 'static,
    key: impl Fn(&K) -> String + Send + 'static,
) -> impl Stream<Item = Msg> + Send
where
    K: Resource + Clone + std::fmt::Debug + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    stream.backoff(WatchBackoff::default()).filter_map(move |ev| {
        let msg = match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => Some(Msg::Apply(decode(o))),
            Ok(watcher::Event::Delete(o)) => Some(Msg::Delete(kind, key(&o))),
            Ok(watcher::Event::Init) => Some(Msg::Init(kind)),
            Ok(watcher::Event::InitDone) => Some(Msg::InitDone(kind)),
            Err(e) => {
                watch_failed(kind.as_str(), &e);
                None
            }
        };
        futures::future::ready(msg)
    })
}

/// How long a failed watch waits before it tries again: 0.5 s, doubling
/// up to 5 s, back to 0.5 s once an event arrives. kube-runtime's default
/// goes up to 30 s, so after an outage of a few seconds the watches (and
/// with them the controller) could stay deaf for half a minute after the
/// API server was back; at 5 s, the controller's ~15 watches retry at 3
/// requests a second at most while it is down.
#[derive(Debug)]
pub(crate) struct WatchBackoff {
    next: std::time::Duration,
}

impl WatchBackoff {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(500);
    const MOST: std::time::Duration = std::time::Duration::from_secs(5);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        let now = self.next;
        self.next = (now * 2).min(Self::MOST);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// A watch of `kind` failed (kube-runtime retries it with backoff): an
/// unavailable server is one outage however many watches fail; an expired
/// resourceVersion (410) is routine, the watch lists again; anything else
/// is logged.
pub(crate) fn watch_failed(kind: &str, e: &watcher::Error) {
    match e {
        watcher::Error::InitialListFailed(k) | watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k)
            if crate::outage::unavailable(k) =>
        {
            crate::outage::failed("watch", e)
        }
        watcher::Error::WatchError(s) if crate::outage::unavailable_code(s.code) => crate::outage::failed("watch", e),
        watcher::Error::WatchError(s) if s.code == 410 => {
            tracing::debug!(kind, error = %e, "watch expired; listing again")
        }
        _ => tracing::warn!(kind, error = %e, "watch error; retrying"),
    }
}

pub(super) fn full_job(j: Job) -> Obj {
    Obj::Job(Arc::new(j))
}

pub(super) fn all_watches(client: &Client, cfg: &RunConfig) -> MsgStream {
    let jobs: Api<Job> = Api::all(client.clone());
    // Every Job, labelled or not: in a namespace that queues every object
    // (`sluice.dev/default-queue: enabled`) an unlabelled Job is queued
    // too, and a label taken off must not hide a Job from Sluice.
    let job_cfg = watcher::Config::default();
    let pcs: Api<PriorityClass> = Api::all(client.clone());
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let mut streams: Vec<MsgStream> = vec![
        sluice_watch::<ResourceFlavor>(client, Kind::ResourceFlavor, |o| Obj::Flavor(Box::new(o))),
        sluice_watch::<Cohort>(client, Kind::Cohort, |o| Obj::Cohort(Box::new(o))),
        sluice_watch::<ClusterQueue>(client, Kind::ClusterQueue, |o| Obj::ClusterQueue(Box::new(o))),
        sluice_watch::<LocalQueue>(client, Kind::LocalQueue, |o| Obj::LocalQueue(Box::new(o))),
        sluice_watch::<WorkloadPriorityClass>(client, Kind::WorkloadPriorityClass, |o| Obj::WorkloadClass(Box::new(o))),
        sluice_watch::<Workload>(client, Kind::Workload, |mut o| {
            o.metadata.managed_fields = None;
            for ps in &mut o.spec.pod_sets {
                sluice_kinds::job::slim_template(&mut ps.template);
            }
            Obj::Workload(Arc::new(o))
        }),
        Box::pin(events(watcher(jobs, job_cfg), Kind::JOB, full_job, |o: &Job| {
            name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref())
        })),
        Box::pin(events(
            watcher(pcs, watcher::Config::default()),
            Kind::PriorityClass,
            |o: PriorityClass| Obj::PodClass(o.metadata.name.unwrap_or_default(), o.value),
            |o: &PriorityClass| o.metadata.name.clone().unwrap_or_default(),
        )),
        // Labels only, for ClusterQueue namespaceSelectors.
        Box::pin(events(
            watcher(namespaces, watcher::Config::default()),
            Kind::Namespace,
            |o: k8s_openapi::api::core::v1::Namespace| {
                Obj::Namespace(
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.labels.unwrap_or_default(),
                )
            },
            |o: &k8s_openapi::api::core::v1::Namespace| o.metadata.name.clone().unwrap_or_default(),
        )),
    ];
    if cfg.index.placement == sluice_scheduler::PlacementMode::Nodes {
        streams.extend(placement_watches(client));
    }
    if cfg.index.pod_gates {
        streams.push(gated_pod_watch(client, cfg.index.kueue_compat));
    }
    if let Some(ar) = &cfg.kueue_workloads {
        streams.push(kueue_watch(client, ar));
    }
    for kind in cfg.index.integrations.iter().copied().filter(|k| *k != JobKind::Job) {
        let ar = kind.api_resource();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        // Every object, as for Jobs.
        let obj_cfg = watcher::Config::default();
        streams.push(Box::pin(events(
            watcher(api, obj_cfg),
            Kind::Queued(kind),
            move |o: DynamicObject| Obj::Dynamic(kind, Arc::new(serde_json::to_value(o).unwrap_or_default())),
            |o: &DynamicObject| name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref()),
        )));
    }
    for r in crate::index::referent_kinds().filter(|r| cfg.index.watches(Kind::Referent(*r))) {
        streams.push(referent_watch(client, r));
    }
    Box::pin(futures::stream::select_all(streams))
}

/// Objects of a kind a queued kind reads its pod sets from (a TrainJob's
/// training runtimes), as JSON without managed fields.
fn referent_watch(client: &Client, r: sluice_kinds::Resource) -> MsgStream {
    let ar = ApiResource {
        group: r.group.into(),
        version: r.version.into(),
        api_version: r.api_version.into(),
        kind: r.kind.into(),
        plural: r.plural.into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    Box::pin(events(
        watcher(api, watcher::Config::default()),
        Kind::Referent(r),
        move |mut o: DynamicObject| {
            o.metadata.managed_fields = None;
            Obj::Referent(r, Arc::new(serde_json::to_value(o).unwrap_or_default()))
        },
        |o: &DynamicObject| name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref()),
    ))
}

/// Nodes, and the pods bound to nodes that have not finished (a field
/// selector: a pod that finishes or is deleted leaves the watch). Each
/// object is reduced on arrival to what placement needs.
fn placement_watches(client: &Client) -> Vec<MsgStream> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let pod_cfg = watcher::Config::default().fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed");
    vec![
        Box::pin(events(
            watcher(nodes, watcher::Config::default()),
            Kind::Node,
            |n: Node| {
                let name = n.metadata.name.clone().unwrap_or_default();
                match sluice_convert::nodes::node(&n) {
                    Ok(spec) => Obj::Node(Box::new(spec)),
                    Err(e) => Obj::Malformed(Kind::Node, name, e.to_string()),
                }
            },
            |n: &Node| n.metadata.name.clone().unwrap_or_default(),
        )),
        Box::pin(events(
            watcher(pods, pod_cfg),
            Kind::Pod,
            |p: Pod| {
                let key = name_key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref());
                match sluice_convert::nodes::bound_pod(&p) {
                    Ok(bound) => {
                        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                        let entry =
                            bound.map(|b| Arc::new(crate::index::PodEntry::new(ns, p.metadata.labels.as_ref(), b)));
                        Obj::Pod(key, entry)
                    }
                    Err(e) => Obj::Malformed(Kind::Pod, key, e.to_string()),
                }
            },
            |p: &Pod| name_key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref()),
        )),
    ]
}

/// The pods the webhook gated (labelled [`sluice_api::labels::MANAGED_POD`]),
/// each reduced on arrival to what the index keeps.
fn gated_pod_watch(client: &Client, kueue_compat: bool) -> MsgStream {
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::all(client.clone());
    let cfg = watcher::Config::default().labels(&format!("{}=true", sluice_api::labels::MANAGED_POD));
    Box::pin(events(
        watcher(pods, cfg),
        Kind::GatedPod,
        move |p: Pod| {
            let key = name_key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref());
            let value = serde_json::to_value(&p).unwrap_or_default();
            match sluice_kinds::pod::gated_pod(&value, kueue_compat) {
                Ok(g) => Obj::GatedPod(key, Arc::new(g)),
                Err(e) => Obj::Malformed(Kind::GatedPod, key, e.to_string()),
            }
        },
        |p: &Pod| name_key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref()),
    ))
}

/// Kueue's Workloads, each reduced on arrival to the admission it holds.
fn kueue_watch(client: &Client, ar: &ApiResource) -> MsgStream {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    Box::pin(events(
        watcher(api, watcher::Config::default()),
        Kind::KueueWorkload,
        |o: DynamicObject| {
            let key = name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref());
            let value = serde_json::to_value(&o).unwrap_or_default();
            match sluice_convert::foreign::kueue_workload(&value) {
                Ok(admission) => Obj::Foreign(key, admission.map(Arc::new)),
                Err(e) => Obj::Malformed(Kind::KueueWorkload, key, e.to_string()),
            }
        },
        |o: &DynamicObject| name_key(o.metadata.namespace.as_deref(), o.metadata.name.as_deref()),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::utils::Backoff;

    use super::WatchBackoff;

    #[test]
    fn a_failing_watch_retries_within_five_seconds_and_starts_over_after_an_event() {
        let mut b = WatchBackoff::default();
        let waits: Vec<Duration> = b.by_ref().take(6).collect();
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(500)));
    }
}
