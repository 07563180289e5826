//! The run loop of `sluice controller`.
//!
//! ```text
//!  watchers (kube-runtime; bookmarks and 410 relists handled there)
//!     │ Msg
//!     ▼
//!  cache (every object, every replica: warm followers)
//!     │  leader only
//!     ▼
//!  Index ──cycle (coalesced events, next_wakeup)──► plans ──► write queue ──► Writer ──► API server
//!     ▲                                                                                │
//!     └──── acks (resourceVersions), failures, pods-gone answers, read-backs ◄────────┘
//! ```
//!
//! Leadership (`--leader-elect`, a coordination.k8s.io Lease): every replica
//! watches and caches; the holder builds an [`Index`] from the cache (which
//! restores the ledger from Workload statuses before the first cycle) and
//! writes. Losing the lease drops the index and stops writes at once (the
//! writer checks the lease before every call, and is fenced by the Lease as
//! the API server shows it). If the lease task dies, the loop ends with an
//! error.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;
use sluice_api::v1alpha1::{
    ClusterQueue, FlavorUsage, LocalQueue, ResourceFlavor, ResourceUsage, Workload, WorkloadPriorityClass,
};
use tokio::sync::{Mutex, watch};

use crate::index::{Index, IndexConfig, Kind};
use crate::metrics::Metrics;
use crate::plan::{ObjKey, Plan, Purpose, QueueRef, Step};
use crate::writer::{self, FIELD_MANAGER, Writer};

/// Settings of the run loop (one field per command-line flag).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Sustained API writes per second.
    pub kube_qps: f64,
    /// Burst of API writes above `kube_qps`.
    pub kube_burst: u32,
    pub index: IndexConfig,
    /// `None`: this replica always writes (no leader election).
    pub lease: Option<LeaseConfig>,
    /// Name of this replica (Event `reportingInstance`, Lease holder).
    pub identity: String,
    pub metrics_addr: SocketAddr,
    /// Minimum time between two status writes of one ClusterQueue or LocalQueue.
    pub queue_status_interval: Duration,
}

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub duration_seconds: u64,
    pub grace_seconds: u64,
}

/// Why the loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
}

/// Readiness and metrics, shared with the HTTP server.
pub struct Shared {
    pub metrics: Metrics,
    /// Every watch listed once.
    pub synced: AtomicBool,
    /// Ready to work: synced, and (as leader) the ledger rebuilt.
    pub ready: AtomicBool,
}

/// A decoded watch event.
enum Msg {
    Apply(Obj),
    Delete(Kind, String),
    Init(Kind),
    InitDone(Kind),
}

#[derive(Clone)]
enum Obj {
    Flavor(Box<ResourceFlavor>),
    ClusterQueue(Box<ClusterQueue>),
    LocalQueue(Box<LocalQueue>),
    WorkloadClass(Box<WorkloadPriorityClass>),
    PodClass(String, i32),
    /// A Namespace: its name and labels.
    Namespace(String, BTreeMap<String, String>),
    Workload(Arc<Workload>),
    Job(Arc<Job>),
    /// How the cache keeps a Workload: compact JSON (slim templates).
    WorkloadJson(Arc<[u8]>),
    /// How the cache keeps a Job: what the index needs of it.
    JobView(Box<crate::job::JobView>),
    /// A Job without a Workload yet: compact JSON of the whole Job, which
    /// its Workload is created from.
    JobJson(Arc<[u8]>),
    /// Could not be decoded: kept so that it is reported, never applied.
    Malformed(Kind, String, String),
}

fn kind_of(o: &Obj) -> Kind {
    match o {
        Obj::Flavor(_) => Kind::ResourceFlavor,
        Obj::ClusterQueue(_) => Kind::ClusterQueue,
        Obj::LocalQueue(_) => Kind::LocalQueue,
        Obj::WorkloadClass(_) => Kind::WorkloadPriorityClass,
        Obj::PodClass(..) => Kind::PriorityClass,
        Obj::Namespace(..) => Kind::Namespace,
        Obj::Workload(_) | Obj::WorkloadJson(_) => Kind::Workload,
        Obj::Job(_) | Obj::JobView(_) | Obj::JobJson(_) => Kind::Job,
        Obj::Malformed(k, ..) => *k,
    }
}

fn name_key(ns: Option<&str>, name: Option<&str>) -> String {
    match ns {
        Some(ns) => format!("{ns}/{}", name.unwrap_or_default()),
        None => name.unwrap_or_default().to_string(),
    }
}

fn split_key(key: &str) -> ObjKey {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    ObjKey::new(ns, name)
}

type MsgStream = Pin<Box<dyn Stream<Item = Msg> + Send>>;

/// A watch of a Sluice kind, decoded per object (a malformed object is
/// reported instead of breaking the watch).
fn sluice_watch<K>(client: &Client, kind: Kind, wrap: fn(K) -> Obj) -> MsgStream
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

fn events<K, S>(
    stream: S,
    kind: Kind,
    decode: impl Fn(K) -> Obj + Send + 'static,
    key: impl Fn(&K) -> String + Send + 'static,
) -> impl Stream<Item = Msg> + Send
where
    K: Resource + Clone + std::fmt::Debug + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    stream.default_backoff().filter_map(move |ev| {
        let msg = match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => Some(Msg::Apply(decode(o))),
            Ok(watcher::Event::Delete(o)) => Some(Msg::Delete(kind, key(&o))),
            Ok(watcher::Event::Init) => Some(Msg::Init(kind)),
            Ok(watcher::Event::InitDone) => Some(Msg::InitDone(kind)),
            Err(e) => {
                tracing::warn!(kind = kind.as_str(), error = %e, "watch error; retrying");
                None
            }
        };
        futures::future::ready(msg)
    })
}

fn full_job(j: Job) -> Obj {
    Obj::Job(Arc::new(j))
}

fn all_watches(client: &Client, cfg: &RunConfig) -> MsgStream {
    let jobs: Api<Job> = Api::all(client.clone());
    let job_cfg = if cfg.index.kueue_compat {
        watcher::Config::default()
    } else {
        // Only queued Jobs: unlabelled ones are none of Sluice's business.
        watcher::Config::default().labels(sluice_api::labels::QUEUE)
    };
    let pcs: Api<PriorityClass> = Api::all(client.clone());
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let streams: Vec<MsgStream> = vec![
        sluice_watch::<ResourceFlavor>(client, Kind::ResourceFlavor, |o| Obj::Flavor(Box::new(o))),
        sluice_watch::<ClusterQueue>(client, Kind::ClusterQueue, |o| Obj::ClusterQueue(Box::new(o))),
        sluice_watch::<LocalQueue>(client, Kind::LocalQueue, |o| Obj::LocalQueue(Box::new(o))),
        sluice_watch::<WorkloadPriorityClass>(client, Kind::WorkloadPriorityClass, |o| Obj::WorkloadClass(Box::new(o))),
        sluice_watch::<Workload>(client, Kind::Workload, |mut o| {
            o.metadata.managed_fields = None;
            for ps in &mut o.spec.pod_sets {
                crate::job::slim_template(&mut ps.template);
            }
            Obj::Workload(Arc::new(o))
        }),
        Box::pin(events(watcher(jobs, job_cfg), Kind::Job, full_job, |o: &Job| {
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
    Box::pin(futures::stream::select_all(streams))
}

/// Every object seen, by kind and key; what a new leader builds its index
/// from. Workloads and Jobs are kept compact (JSON, views).
#[derive(Default)]
struct Cache {
    kueue_compat: bool,
    objects: BTreeMap<Kind, BTreeMap<String, Obj>>,
    synced: BTreeSet<Kind>,
    /// Keys seen since a (re)list started, per kind.
    relisting: HashMap<Kind, BTreeSet<String>>,
}

fn key_of_obj(o: &Obj) -> String {
    match o {
        Obj::Flavor(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::ClusterQueue(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::LocalQueue(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::WorkloadClass(x) => name_key(None, x.metadata.name.as_deref()),
        Obj::PodClass(n, _) | Obj::Namespace(n, _) => n.clone(),
        Obj::Workload(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::Job(x) => name_key(x.metadata.namespace.as_deref(), x.metadata.name.as_deref()),
        Obj::JobView(v) => format!("{}/{}", v.namespace, v.name),
        Obj::WorkloadJson(_) | Obj::JobJson(_) | Obj::Malformed(..) => String::new(),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn apply_to_index(ix: &mut Index, o: &Obj, now: i64) {
    match o {
        Obj::Flavor(x) => ix.apply_flavor((**x).clone()),
        Obj::ClusterQueue(x) => ix.apply_cluster_queue((**x).clone()),
        Obj::LocalQueue(x) => ix.apply_local_queue((**x).clone()),
        Obj::WorkloadClass(x) => ix.apply_workload_priority_class((**x).clone()),
        Obj::PodClass(n, v) => ix.apply_priority_class(n, *v),
        Obj::Namespace(n, labels) => ix.apply_namespace(n, labels.clone(), now),
        Obj::Workload(x) => ix.apply_workload(x.clone(), now),
        Obj::Job(x) => ix.apply_job(&**x, now),
        Obj::JobView(v) => ix.apply_job_view((**v).clone(), None, now),
        Obj::JobJson(bytes) => match serde_json::from_slice::<Job>(bytes) {
            Ok(j) => ix.apply_job(j, now),
            Err(e) => ix.report_malformed(Kind::Job, "(cached)", &e.to_string()),
        },
        Obj::WorkloadJson(bytes) => match serde_json::from_slice::<Workload>(bytes) {
            Ok(wl) => ix.apply_workload(wl, now),
            Err(e) => ix.report_malformed(Kind::Workload, "(cached)", &e.to_string()),
        },
        Obj::Malformed(kind, key, msg) => ix.report_malformed(*kind, key, msg),
    }
}

fn delete_from_index(ix: &mut Index, kind: Kind, key: &str, now: i64) {
    match kind {
        Kind::ResourceFlavor => ix.delete_flavor(key),
        Kind::ClusterQueue => ix.delete_cluster_queue(key),
        Kind::LocalQueue => ix.delete_local_queue(&split_key(key)),
        Kind::WorkloadPriorityClass => ix.delete_workload_priority_class(key),
        Kind::PriorityClass => ix.delete_priority_class(key),
        Kind::Namespace => ix.delete_namespace(key),
        Kind::Workload => ix.delete_workload(&split_key(key), now),
        Kind::Job => ix.delete_job(&split_key(key), now),
    }
}

/// A new index from the cache: configuration first, then Workloads (the
/// ledger is restored from their statuses), then Jobs.
fn build_index(cache: &Cache, cfg: &IndexConfig) -> Index {
    let mut ix = Index::new(cfg.clone());
    let now = now_ms();
    for kind in Kind::ALL {
        for o in cache.objects.get(&kind).into_iter().flat_map(|m| m.values()) {
            apply_to_index(&mut ix, o, now);
        }
    }
    for k in &cache.synced {
        ix.mark_synced(*k);
    }
    ix
}

/// Runs the controller until `shutdown` completes.
pub async fn run(client: Client, cfg: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let shared = Arc::new(Shared {
        metrics: Metrics::new(),
        synced: AtomicBool::new(false),
        ready: AtomicBool::new(false),
    });
    let listener = tokio::net::TcpListener::bind(cfg.metrics_addr)
        .await
        .map_err(|source| RunError::Metrics {
            addr: cfg.metrics_addr,
            source,
        })?;
    let server = tokio::spawn(serve_http(listener, shared.clone()));

    // Without leader election this replica always leads; the sender lives
    // as long as the loop, so the receiver never reports a closed channel.
    let (_always_leader, always) = watch::channel(true);
    let (leader_rx, mut lease_task) = match &cfg.lease {
        None => (always, None),
        Some(l) => {
            let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &l.name)
                .with_namespace(&l.namespace)
                .with_identity(&cfg.identity)
                .with_duration(l.duration_seconds)
                .with_grace(l.grace_seconds)
                .with_field_manager(format!("{FIELD_MANAGER}-lease"))
                .build()
                .await
                .map_err(|e| RunError::Lease(e.to_string()))?;
            let (rx, task) = manager.watch().await;
            (rx, Some(task))
        }
    };
    let mut writer = Writer::new(client.clone(), cfg.identity.clone())
        .with_rate_limit(cfg.kube_qps, cfg.kube_burst)
        .with_leader(leader_rx.clone());
    // Renewals come every (duration - grace) seconds; a write is refused
    // from `margin` before the last renewal seen runs out: 1 s, or half the
    // grace when that is shorter, so that a renewal lands before the fence
    // closes.
    let fence = cfg.lease.as_ref().map(|l| {
        let margin = Duration::from_millis((l.grace_seconds.saturating_mul(1000) / 2).clamp(1, 1000));
        Arc::new(writer::LeaseFence::new(cfg.identity.clone(), margin))
    });
    let fence_task = cfg.lease.as_ref().zip(fence.clone()).map(|(l, f)| {
        writer = writer.clone().with_fence(f.clone());
        tokio::spawn(watch_lease(client.clone(), l.clone(), f))
    });
    let queue = Arc::new(writer::WriteQueue::default());
    let (failed_tx, failed_rx) = tokio::sync::mpsc::unbounded_channel();
    // Events: a lane of their own (own rate limit, bounded, never waited on).
    let (events_tx, events_rx) = tokio::sync::mpsc::channel(writer::EVENT_LANE_CAPACITY);
    let event_writer = writer.clone().with_rate_limit(cfg.kube_qps, cfg.kube_burst);
    let mut events = tokio::spawn(writer::event_lane(event_writer, events_rx, shared.clone()));
    let writer = writer.with_event_lane(events_tx);
    let drainer = tokio::spawn(writer::drain(writer, queue.clone(), failed_tx, shared.clone()));
    let io = LoopIo {
        queue,
        fence,
        failed: failed_rx,
    };
    let result = event_loop(client, &cfg, io, leader_rx, &mut lease_task, &shared, shutdown).await;
    if let Some(t) = fence_task {
        t.abort();
    }
    // The writer holds a lease receiver too.
    drainer.abort();
    let _ = drainer.await;
    // The drainer held the lane's sender: the lane writes what it holds,
    // for a few seconds at most (a lost Event is only an Event).
    if tokio::time::timeout(Duration::from_secs(3), &mut events).await.is_err() {
        tracing::warn!("events still queued at shutdown were dropped");
        events.abort();
    }
    // Every receiver is gone with the loop: the lease task stops and hands
    // the manager back, and the Lease is released so that another replica
    // takes over now rather than when it expires.
    if result.is_ok()
        && let Some(task) = lease_task
    {
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(Ok(manager))) => {
                if let Err(e) = manager.release().await {
                    tracing::warn!(error = %e, "could not release the Lease");
                } else {
                    tracing::info!("Lease released");
                }
            }
            _ => tracing::warn!("the lease task did not stop; the Lease will expire"),
        }
    }
    server.abort();
    result
}

/// Keeps the writer's [`writer::LeaseFence`] up to date with the Lease as
/// the API server shows it. While this watch is down the fence runs out and
/// writes stop (fail closed) until it is back.
async fn watch_lease(client: Client, l: LeaseConfig, fence: Arc<writer::LeaseFence>) {
    use k8s_openapi::api::coordination::v1::Lease;
    let api: Api<Lease> = Api::namespaced(client, &l.namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", l.name));
    let mut stream = std::pin::pin!(watcher(api, cfg).default_backoff());
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => fence.observe(Some(&lease)),
            Ok(watcher::Event::Delete(_)) => fence.observe(None),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "watching the Lease"),
        }
    }
}

async fn serve_http(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    use axum::http::StatusCode;
    use axum::routing::get;
    let m = shared.clone();
    let r = shared.clone();
    let app = axum::Router::new()
        .route("/metrics", get(move || async move { m.metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if r.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ready")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "caches not synced or ledger not rebuilt",
                    )
                }
            }),
        );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics server stopped");
    }
}

impl AsRef<Metrics> for Shared {
    fn as_ref(&self) -> &Metrics {
        &self.metrics
    }
}

/// The loop's side of the writer: where plans go, and what comes back.
struct LoopIo {
    queue: Arc<writer::WriteQueue>,
    /// The writer's Lease fence (with leader election): no index is built
    /// and no cycle runs while it refuses writes.
    fence: Option<Arc<writer::LeaseFence>>,
    failed: tokio::sync::mpsc::UnboundedReceiver<(u64, crate::plan::Plan, writer::Feedback)>,
}

#[allow(clippy::too_many_arguments)]
async fn event_loop(
    client: Client,
    cfg: &RunConfig,
    mut io: LoopIo,
    mut leader_rx: watch::Receiver<bool>,
    lease_task: &mut Option<tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>>,
    shared: &Shared,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let mut stream = all_watches(&client, cfg);
    let mut cache = Cache {
        kueue_compat: cfg.index.kueue_compat,
        ..Cache::default()
    };
    let mut index: Option<Mutex<Index>> = None;
    let mut cycle_at: Option<Instant> = None;
    let mut fenced_since: Option<Instant> = None;
    let mut queue_tick = tokio::time::interval(cfg.queue_status_interval);
    queue_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut queue_status = QueueStatusWriter::default();
    let coalesce = Duration::from_millis(50);
    tokio::pin!(shutdown);
    loop {
        let sleep_until = cycle_at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
            msg = stream.next() => {
                let Some(msg) = msg else { return Ok(()) };
                let mut batch = vec![msg];
                // Take whatever else is ready: one cycle for a burst of events.
                while batch.len() < 1024 {
                    match futures::FutureExt::now_or_never(stream.next()) {
                        Some(Some(m)) => batch.push(m),
                        _ => break,
                    }
                }
                let mut ix = match &index { Some(m) => Some(m.lock().await), None => None };
                for m in batch {
                    handle(&mut cache, ix.as_deref_mut(), m, now_ms());
                }
                drop(ix);
                let all_synced = Kind::ALL.iter().all(|k| cache.synced.contains(k));
                shared.synced.store(all_synced, Ordering::Relaxed);
                let soon = Instant::now() + coalesce;
                cycle_at = Some(cycle_at.map_or(soon, |t| t.min(soon)));
            }
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
            _ = queue_tick.tick() => {
                // Nothing is handed out while the Lease fence refuses writes
                // (it would come back as failures).
                let fenced = io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
                if let Some(ix) = &index
                    && !fenced
                {
                    let mut ix = ix.lock().await;
                    // Refill explanation writes as the queue drains.
                    let room = cfg.index.explanations_per_cycle.saturating_sub(io.queue.len());
                    let mut plans = ix.take_explanations(room, now_ms());
                    plans.extend(queue_status.plans(&ix, &shared.metrics, cfg));
                    for plan in plans {
                        if let Some(old) = io.queue.push(plan) {
                            ix.superseded(&old);
                        }
                    }
                }
                continue;
            }
            Some((epoch, plan, result)) = io.failed.recv() => {
                if plan.purpose == crate::plan::Purpose::QueueStatus {
                    queue_status.written(&plan, result.is_ok());
                    continue;
                }
                // About an index that is gone (leadership lost since).
                if epoch != io.queue.epoch() {
                    continue;
                }
                if let Some(m) = &index {
                    let mut ix = m.lock().await;
                    match &result {
                        Ok(acks) => {
                            ix.acknowledge(&plan, acks);
                            if let crate::plan::Purpose::ConfirmPodsGone { uid } = &plan.purpose {
                                ix.pods_gone(uid, now_ms());
                            }
                        }
                        Err(error) => writer::report_failure(&mut ix, &plan, error, now_ms()),
                    }
                    // A rolled-back admission, a failed write or a requeue
                    // after the pods are gone is worked on a little later
                    // (an acknowledged write needs nothing).
                    if result.is_err() || matches!(plan.purpose, crate::plan::Purpose::ConfirmPodsGone { .. }) {
                        let retry = Instant::now() + Duration::from_secs(1);
                        cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
                    }
                }
                continue;
            }
            changed = leader_rx.changed() => {
                if changed.is_err() {
                    return Err(RunError::Lease("lease task ended".into()));
                }
                let leading = *leader_rx.borrow();
                tracing::info!(leading, "leadership changed");
                if !leading {
                    index = None;
                    io.queue.clear();
                    queue_status = QueueStatusWriter::default();
                }
            }
            done = async { match lease_task.as_mut() { Some(t) => t.await, None => std::future::pending().await } } => {
                *lease_task = None;
                return Err(RunError::Lease(match done {
                    Ok(Ok(_)) => "lease task ended".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                }));
            }
        }
        let leading = *leader_rx.borrow();
        // The Lease as the API server shows it must name us and be fresh
        // (it lags the lease manager by a watch event at most).
        let fenced = leading && io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
        if fenced {
            let retry = Instant::now() + Duration::from_secs(1);
            cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
            // Holding the Lease but never seeing it (its watch fails): no
            // other replica could take over. Stop, so that it expires.
            let since = *fenced_since.get_or_insert_with(Instant::now);
            let limit = Duration::from_secs(cfg.lease.as_ref().map_or(15, |l| l.duration_seconds).saturating_mul(2));
            if since.elapsed() > limit {
                return Err(RunError::Lease(format!(
                    "holding the Lease, but the Lease as the API server shows it has not named this replica for {}s (is its watch failing?); stopping so that another replica takes over",
                    limit.as_secs()
                )));
            }
        } else {
            fenced_since = None;
        }
        let synced = shared.synced.load(Ordering::Relaxed);
        if leading && !fenced && synced && index.is_none() {
            let ix = build_index(&cache, &cfg.index);
            tracing::info!(
                workloads = ix.engine().workload_count(),
                unrestored = ix.unrestored(),
                "leading: ledger rebuilt from Workload statuses"
            );
            index = Some(Mutex::new(ix));
            cycle_at = Some(Instant::now());
        }
        shared
            .ready
            .store(synced && (!leading || index.is_some()), Ordering::Relaxed);
        let due = cycle_at.is_some_and(|t| t <= Instant::now());
        if let Some(m) = &index
            && due
            && !fenced
        {
            let started = Instant::now();
            let (plans, wake) = {
                let mut ix = m.lock().await;
                let out = ix.cycle(now_ms());
                record_stats(&mut ix, &shared.metrics);
                out
            };
            shared.metrics.cycle_duration.observe(started.elapsed().as_secs_f64());
            {
                let mut ix = m.lock().await;
                for plan in plans {
                    if let Some(old) = io.queue.push(plan) {
                        ix.superseded(&old);
                    }
                }
            }
            // Workloads whose status write failed: read them again.
            let refetch = m.lock().await.take_workload_refetch();
            for key in refetch {
                let api: Api<Workload> = Api::namespaced(client.clone(), &key.namespace);
                match tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(&key.name)).await {
                    Ok(Ok(Some(wl))) => m.lock().await.apply_fetched_workload(&wl, now_ms()),
                    // Gone: its deletion comes through the watch.
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => tracing::warn!(workload = %key, error = %e, "cannot read Workload"),
                    Err(_) => tracing::warn!(workload = %key, "reading Workload timed out"),
                }
            }
            // Jobs whose Workload must be (re)created: read them again.
            let refetch = m.lock().await.take_refetch();
            if !refetch.is_empty() {
                for key in refetch {
                    let api: Api<Job> = Api::namespaced(client.clone(), &key.namespace);
                    match tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(&key.name)).await {
                        Ok(Ok(Some(j))) => m.lock().await.apply_job(j, now_ms()),
                        Ok(Ok(None)) => {}
                        Ok(Err(e)) => tracing::warn!(job = %key, error = %e, "cannot read Job"),
                        Err(_) => tracing::warn!(job = %key, "reading Job timed out"),
                    }
                }
            }
            cycle_at = wake.and_then(|w| wake_instant(Instant::now(), now_ms(), w));
            // Rolled-back admissions are retried a little later.
            if m.lock().await.wants_cycle() {
                let retry = Instant::now() + Duration::from_secs(1);
                cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
            }
        }
    }
}

/// When to run the next cycle for a wake-up at `wake_ms`: never an
/// overflowing `Instant` (a far deadline saturates; events still wake the loop).
fn wake_instant(now: Instant, now_ms: i64, wake_ms: i64) -> Option<Instant> {
    let wait = wake_ms.saturating_sub(now_ms).max(0) as u64;
    now.checked_add(Duration::from_millis(wait))
}

fn handle(cache: &mut Cache, ix: Option<&mut Index>, msg: Msg, now: i64) {
    match msg {
        Msg::Init(kind) => {
            cache.relisting.insert(kind, BTreeSet::new());
        }
        Msg::InitDone(kind) => {
            // Objects gone while we were not watching get no Delete event.
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
        Msg::Apply(o) => {
            let kind = kind_of(&o);
            let key = match &o {
                Obj::Malformed(_, k, _) => k.clone(),
                _ => key_of_obj(&o),
            };
            if let Some(seen) = cache.relisting.get_mut(&kind) {
                seen.insert(key.clone());
            }
            if let Some(ix) = ix {
                apply_to_index(ix, &o, now);
            }
            // Kept compact (the index had the full Job to create a Workload from).
            let o = match o {
                Obj::Job(j) => {
                    let (ns, name) = key.split_once('/').unwrap_or(("", &key));
                    let wl_key = format!("{ns}/{}", crate::job::workload_name(name));
                    let has_workload = cache
                        .objects
                        .get(&Kind::Workload)
                        .is_some_and(|m| m.contains_key(&wl_key));
                    match has_workload {
                        true => Obj::JobView(Box::new(crate::job::JobView::of(&j, cache.kueue_compat))),
                        // Its Workload is still to be created from it.
                        false => {
                            let mut slim = (*j).clone();
                            slim.metadata.managed_fields = None;
                            match serde_json::to_vec(&slim) {
                                Ok(bytes) => Obj::JobJson(bytes.into()),
                                Err(_) => Obj::JobView(Box::new(crate::job::JobView::of(&j, cache.kueue_compat))),
                            }
                        }
                    }
                }
                Obj::Workload(w) => {
                    // Its Job no longer needs to be kept whole.
                    if let Some((job_name, _)) = crate::job::owning_job(&w) {
                        let ns = w.metadata.namespace.as_deref().unwrap_or_default();
                        let compat = cache.kueue_compat;
                        if let Some(jobs) = cache.objects.get_mut(&Kind::Job)
                            && let Some(cached) = jobs.get_mut(&format!("{ns}/{job_name}"))
                            && let Obj::JobJson(bytes) = cached
                            && let Ok(j) = serde_json::from_slice::<Job>(bytes)
                        {
                            *cached = Obj::JobView(Box::new(crate::job::JobView::of(&j, compat)));
                        }
                    }
                    match serde_json::to_vec(&*w) {
                        Ok(bytes) => Obj::WorkloadJson(bytes.into()),
                        Err(_) => Obj::Workload(w),
                    }
                }
                other => other,
            };
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

fn record_stats(ix: &mut Index, m: &Metrics) {
    let stats = ix.take_stats();
    m.admitted.inc_by(stats.admitted as u64);
    m.preempted.inc_by(stats.preempted as u64);
    for r in stats.evicted {
        m.evicted.get_or_create(&vec![("reason", r.to_string())]).inc();
    }
    for w in stats.wait_seconds {
        m.wait_time.observe(w);
    }
    for (kind, reason) in stats.errors {
        m.reconcile_errors
            .get_or_create(&vec![("kind", kind.to_string()), ("reason", reason.to_string())])
            .inc();
    }
    for kind in stats.drift {
        m.drift.get_or_create(&vec![("kind", kind.to_string())]).inc();
    }
    m.unrestored.set(ix.unrestored() as i64);
}

/// ClusterQueue and LocalQueue status: written when changed, at most once
/// per tick per object, and at most ~10 % of the write budget per tick
/// (the rest waits for the next tick; latest value wins, no backlog).
#[derive(Default)]
struct QueueStatusWriter {
    /// Last status written per queue.
    last: HashMap<QueueId, serde_json::Value>,
    /// Handed to the writer, not written yet.
    queued: HashMap<QueueId, serde_json::Value>,
    /// When each queue's Active condition last changed: (status, time).
    active_since: HashMap<QueueId, (bool, String)>,
}

/// (cluster-scoped, namespace, name)
type QueueId = (bool, Option<String>, String);

/// Whether two queue statuses say the same, fields left out and empty or
/// null ones alike (the server's copy omits empty lists).
fn same_status(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    fn norm(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .filter(|(_, v)| !(v.is_null() || v.as_array().is_some_and(Vec::is_empty)))
                    .map(|(k, v)| (k.clone(), norm(v)))
                    .collect(),
            ),
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(norm).collect()),
            other => other.clone(),
        }
    }
    norm(a) == norm(b)
}

/// When the server's `Active` condition of a queue took its status, if it
/// has that status now.
fn observed_active_since(ix: &Index, id: &QueueId, active: bool) -> Option<String> {
    let status = ix.observed_queue_status(id.1.as_deref(), &id.2)?;
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Active")?;
    let same = c["status"] == if active { "True" } else { "False" };
    same.then(|| c["lastTransitionTime"].as_str().map(String::from))?
}

impl QueueStatusWriter {
    /// A queue's `Active` condition, keeping its transition time while the
    /// status stays the same.
    fn active_condition(
        &mut self,
        ix: &Index,
        id: QueueId,
        problem: Option<(&'static str, String)>,
        ok: &str,
        now: &str,
    ) -> serde_json::Value {
        let active = problem.is_none();
        // A new leader keeps the transition time the server has.
        let observed = match self.active_since.contains_key(&id) {
            true => None,
            false => observed_active_since(ix, &id, active),
        };
        let since = self
            .active_since
            .entry(id)
            .or_insert_with(|| (active, observed.unwrap_or_else(|| now.to_string())));
        if since.0 != active {
            *since = (active, now.to_string());
        }
        let (reason, message) = problem.unwrap_or(("Ready", ok.to_string()));
        json!([{
            "type": "Active",
            "status": if active { "True" } else { "False" },
            "reason": reason,
            "message": message,
            "lastTransitionTime": since.1,
        }])
    }

    /// The status every queue should have now; updates the usage metrics.
    fn wanted(&mut self, ix: &Index, m: &Metrics, now: &str) -> Vec<(QueueId, serde_json::Value)> {
        let mut wanted = Vec::new();
        let cqs = ix.cluster_queue_names();
        let mut names: BTreeSet<String> = cqs.into_iter().collect();
        names.extend(
            ix.errors()
                .keys()
                .filter(|(k, _)| *k == Kind::ClusterQueue)
                .map(|(_, name)| name.clone()),
        );
        for name in names {
            let condition = self.active_condition(
                ix,
                (true, None, name.clone()),
                ix.cluster_queue_problem(&name),
                "Can admit workloads",
                now,
            );
            let mut status = json!({"conditions": condition});
            if let Some(u) = ix.engine().cluster_queue_usage(&name) {
                let labels = |f: &str, r: &str| {
                    vec![
                        ("cluster_queue", name.clone()),
                        ("flavor", f.to_string()),
                        ("resource", r.to_string()),
                    ]
                };
                m.pending
                    .get_or_create(&vec![("cluster_queue", name.clone()), ("status", "active".into())])
                    .set(u.pending as i64);
                let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
                for r in &u.resources {
                    m.usage.get_or_create(&labels(&r.flavor, &r.resource)).set(r.used);
                    m.nominal.get_or_create(&labels(&r.flavor, &r.resource)).set(r.nominal);
                    flavors.entry(r.flavor.clone()).or_default().push(ResourceUsage {
                        name: r.resource.clone(),
                        total: sluice_api::quantity::to_quantity(&r.resource, i128::from(r.used)),
                        borrowed: (r.borrowed > 0)
                            .then(|| sluice_api::quantity::to_quantity(&r.resource, i128::from(r.borrowed))),
                    });
                }
                status["pendingWorkloads"] = json!(u.pending);
                status["admittedWorkloads"] = json!(u.admitted);
                status["flavorsUsage"] = serde_json::to_value(
                    flavors
                        .into_iter()
                        .map(|(name, resources)| FlavorUsage { name, resources })
                        .collect::<Vec<_>>(),
                )
                .unwrap_or_default();
            }
            wanted.push(((true, None, name), status));
        }
        for (key, st) in ix.local_queue_stats() {
            let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
            for ((flavor, resource), used) in &st.usage {
                flavors.entry(flavor.clone()).or_default().push(ResourceUsage {
                    name: resource.clone(),
                    total: sluice_api::quantity::to_quantity(resource, i128::from(*used)),
                    borrowed: None,
                });
            }
            let usage: Vec<FlavorUsage> = flavors
                .into_iter()
                .map(|(name, resources)| FlavorUsage { name, resources })
                .collect();
            let id = (false, Some(key.namespace.clone()), key.name.clone());
            let condition = self.active_condition(
                ix,
                id.clone(),
                ix.local_queue_problem(&key),
                "Can submit new workloads to its ClusterQueue",
                now,
            );
            let status = json!({
                "conditions": condition,
                "pendingWorkloads": st.pending,
                "admittedWorkloads": st.admitted,
                "flavorsUsage": usage,
            });
            wanted.push((id, status));
        }
        // Queues no longer there are forgotten.
        let ids: BTreeSet<&QueueId> = wanted.iter().map(|(id, _)| id).collect();
        self.last.retain(|id, _| ids.contains(id));
        self.queued.retain(|id, _| ids.contains(id));
        self.active_since.retain(|id, _| ids.contains(id));
        // A new leader knows what the server holds: what is already there
        // is not written again.
        for (id, _) in &wanted {
            if !self.last.contains_key(id)
                && let Some(observed) = ix.observed_queue_status(id.1.as_deref(), &id.2)
            {
                self.last.insert(id.clone(), observed);
            }
        }
        wanted.retain(|(id, status)| !self.last.get(id).is_some_and(|l| same_status(l, status)));
        wanted
    }

    /// Plans for the queues whose status changed (not already queued with
    /// that status), at most ~10 % of the write budget per interval: the
    /// writer applies them (rate limit, lease) and reports back.
    fn plans(&mut self, ix: &Index, m: &Metrics, cfg: &RunConfig) -> Vec<Plan> {
        let budget = ((cfg.kube_qps * 0.1 * cfg.queue_status_interval.as_secs_f64()).floor() as usize).max(1);
        let now = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let mut out = Vec::new();
        for (id, status) in self.wanted(ix, m, &now) {
            if out.len() >= budget {
                break;
            }
            if self.queued.get(&id) == Some(&status) {
                continue;
            }
            self.queued.insert(id.clone(), status.clone());
            let (_, namespace, name) = id;
            out.push(Plan {
                purpose: Purpose::QueueStatus,
                steps: vec![Step::ApplyQueueStatus {
                    queue: QueueRef { namespace, name },
                    status,
                }],
            });
        }
        out
    }

    /// The writer is done with a queue status plan.
    fn written(&mut self, plan: &Plan, ok: bool) {
        for step in &plan.steps {
            let Step::ApplyQueueStatus { queue, status } = step else {
                continue;
            };
            let id = (queue.namespace.is_none(), queue.namespace.clone(), queue.name.clone());
            if self.queued.get(&id) == Some(status) {
                self.queued.remove(&id);
            }
            if ok {
                self.last.insert(id, status.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{cq, flavor, job_fixture, lq};
    use sluice_api::v1alpha1::WorkloadStatus;
    use sluice_scheduler::WorkloadState;

    #[test]
    fn a_far_wake_up_never_overflows_an_instant() {
        let now = Instant::now();
        assert_eq!(wake_instant(now, 1_000, 3_000), Some(now + Duration::from_secs(2)));
        assert_eq!(wake_instant(now, 5_000, 3_000), Some(now), "past: at once");
        // i64::MAX ms from now does not fit an Instant: no panic.
        let _ = wake_instant(now, 0, i64::MAX);
        let _ = wake_instant(now, i64::MIN, i64::MAX);
    }

    fn admitted_workload() -> Workload {
        let j = job_fixture("job-suspended-create-response.json");
        let mut wl = crate::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
        wl.metadata.uid = Some("wl-uid".into());
        let mut status = WorkloadStatus::default();
        for t in ["QuotaReserved", "Admitted"] {
            crate::index::set_condition(&mut status.conditions, t, "True", t, "", 0, None);
        }
        status.admission = Some(
            serde_json::from_value(json!({"clusterQueue": "cluster-gpu", "podSetAssignments": [
                {"name": "main", "count": 4, "flavors": {"nvidia.com/gpu": "a100"}, "resourceUsage": {"nvidia.com/gpu": "8"}}]}))
            .unwrap(),
        );
        wl.status = Some(status);
        wl
    }

    fn listed(cache: &mut Cache, objs: Vec<Obj>) {
        for k in Kind::ALL {
            handle(cache, None, Msg::Init(k), 0);
        }
        for o in objs {
            handle(cache, None, Msg::Apply(o), 0);
        }
        for k in Kind::ALL {
            handle(cache, None, Msg::InitDone(k), 0);
        }
    }

    #[test]
    fn a_new_leader_rebuilds_the_ledger_from_the_cache_before_any_cycle() {
        let mut cache = Cache::default();
        // Workloads listed before the queues: order in the cache does not matter.
        listed(
            &mut cache,
            vec![
                Obj::Workload(Arc::new(admitted_workload())),
                Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
                Obj::Flavor(Box::new(flavor("a100"))),
                Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
            ],
        );
        let mut ix = build_index(&cache, &IndexConfig::default());
        assert!(ix.is_ready());
        assert_eq!(ix.engine().workload_state("wl-uid"), Some(WorkloadState::Admitted));
        assert_eq!(
            ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
            8000
        );
        let (plans, _) = ix.cycle(now_ms());
        assert!(
            plans.iter().all(|p| p.purpose.label() != "admit"),
            "never admitted twice"
        );
    }

    #[test]
    fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
        let mut cache = Cache::default();
        listed(
            &mut cache,
            vec![
                Obj::Flavor(Box::new(flavor("a100"))),
                Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
                Obj::ClusterQueue(Box::new(cq("gone", 8))),
            ],
        );
        let mut ix = build_index(&cache, &IndexConfig::default());
        assert_eq!(ix.engine().cluster_queue_names().len(), 2);
        // 410 Gone: the watcher lists again; "gone" is not in the new list.
        handle(&mut cache, Some(&mut ix), Msg::Init(Kind::ClusterQueue), 0);
        handle(
            &mut cache,
            Some(&mut ix),
            Msg::Apply(Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8)))),
            0,
        );
        handle(&mut cache, Some(&mut ix), Msg::InitDone(Kind::ClusterQueue), 0);
        let names: Vec<String> = ix
            .engine()
            .cluster_queue_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(names, ["cluster-gpu"]);
        assert_eq!(cache.objects[&Kind::ClusterQueue].len(), 1);
    }

    #[test]
    fn queue_status_is_wanted_only_when_it_changes_and_invalid_queues_say_why() {
        let mut cache = Cache::default();
        let mut bad = cq("bad", 4);
        bad.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
            Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
        listed(
            &mut cache,
            vec![
                Obj::Flavor(Box::new(flavor("a100"))),
                Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
                Obj::ClusterQueue(Box::new(bad)),
                Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
            ],
        );
        let ix = build_index(&cache, &IndexConfig::default());
        let m = Metrics::new();
        let mut w = QueueStatusWriter::default();
        let wanted = w.wanted(&ix, &m, "2027-01-01T00:00:00Z");
        let ids: Vec<_> = wanted.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(
            ids,
            [
                (true, None, "bad".to_string()),
                (true, None, "cluster-gpu".to_string()),
                (false, Some("research".to_string()), "team-a".to_string())
            ]
        );
        let bad_status = &wanted[0].1;
        assert_eq!(bad_status["conditions"][0]["status"], "False");
        assert_eq!(bad_status["conditions"][0]["reason"], "InvalidClusterQueue");
        let good = &wanted[1].1;
        assert_eq!(good["conditions"][0]["status"], "True");
        assert_eq!(
            (good["pendingWorkloads"].as_u64(), good["admittedWorkloads"].as_u64()),
            (Some(0), Some(0))
        );
        assert_eq!(good["flavorsUsage"][0]["resources"][0]["total"], "0");
        // Written: nothing is wanted again until something changes.
        for (id, status) in wanted {
            w.last.insert(id, status);
        }
        assert!(w.wanted(&ix, &m, "2027-01-01T00:00:05Z").is_empty());
        assert!(m.encode().contains("sluice_cluster_queue_nominal_quota{cluster_queue=\"cluster-gpu\",flavor=\"a100\",resource=\"nvidia.com/gpu\"} 8000"));
    }

    #[test]
    fn queue_status_is_handed_to_the_writer_once_and_remembered_when_written() {
        let mut cache = Cache::default();
        listed(
            &mut cache,
            vec![
                Obj::Flavor(Box::new(flavor("a100"))),
                Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
                Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
            ],
        );
        let ix = build_index(&cache, &IndexConfig::default());
        let m = Metrics::new();
        let cfg = RunConfig {
            kube_qps: 50.0,
            kube_burst: 100,
            index: IndexConfig::default(),
            lease: None,
            identity: "test".into(),
            metrics_addr: "127.0.0.1:0".parse().unwrap(),
            queue_status_interval: Duration::from_secs(1),
        };
        let mut w = QueueStatusWriter::default();
        let plans = w.plans(&ix, &m, &cfg);
        assert_eq!(plans.len(), 2, "the ClusterQueue and the LocalQueue");
        assert!(plans.iter().all(|p| p.purpose == Purpose::QueueStatus));
        // Queued, not written yet: not handed out again.
        assert!(w.plans(&ix, &m, &cfg).is_empty());
        // A failed write is handed out again; a written one is not.
        w.written(&plans[0], false);
        w.written(&plans[1], true);
        let again = w.plans(&ix, &m, &cfg);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].steps, plans[0].steps);
        w.written(&again[0], true);
        assert!(w.plans(&ix, &m, &cfg).is_empty());
    }

    #[test]
    fn a_new_leader_does_not_rewrite_queue_status_the_server_already_has() {
        let objects = |statuses: Option<(serde_json::Value, serde_json::Value)>| {
            let mut cq = cq("cluster-gpu", 8);
            let mut lq = lq("research", "team-a", "cluster-gpu");
            if let Some((c, l)) = statuses {
                cq.status = serde_json::from_value(c).unwrap();
                lq.status = serde_json::from_value(l).unwrap();
            }
            vec![
                Obj::Flavor(Box::new(flavor("a100"))),
                Obj::ClusterQueue(Box::new(cq)),
                Obj::LocalQueue(Box::new(lq)),
            ]
        };
        let cfg = RunConfig {
            kube_qps: 50.0,
            kube_burst: 100,
            index: IndexConfig::default(),
            lease: None,
            identity: "test".into(),
            metrics_addr: "127.0.0.1:0".parse().unwrap(),
            queue_status_interval: Duration::from_secs(1),
        };
        let m = Metrics::new();
        let mut cache = Cache::default();
        listed(&mut cache, objects(None));
        let mut first = QueueStatusWriter::default();
        let plans = first.plans(&build_index(&cache, &IndexConfig::default()), &m, &cfg);
        let status = |i: usize| match &plans[i].steps[0] {
            Step::ApplyQueueStatus { status, .. } => status.clone(),
            _ => unreachable!(),
        };
        // Written by the first leader; a second one starts from the cache.
        let mut cache = Cache::default();
        listed(&mut cache, objects(Some((status(0), status(1)))));
        let mut second = QueueStatusWriter::default();
        let ix = build_index(&cache, &IndexConfig::default());
        assert!(second.plans(&ix, &m, &cfg).is_empty(), "nothing to write");
    }

    #[test]
    fn queues_are_inactive_while_a_flavor_or_their_cluster_queue_is_missing() {
        let mut cache = Cache::default();
        listed(
            &mut cache,
            vec![
                Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
                Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
                Obj::LocalQueue(Box::new(lq("research", "orphan", "nowhere"))),
            ],
        );
        let m = Metrics::new();
        let mut w = QueueStatusWriter::default();
        let ix = build_index(&cache, &IndexConfig::default());
        let wanted: BTreeMap<_, _> = w.wanted(&ix, &m, "2027-01-01T00:00:00Z").into_iter().collect();
        let cond = |id: (bool, Option<&str>, &str)| {
            wanted[&(id.0, id.1.map(String::from), id.2.to_string())]["conditions"][0].clone()
        };
        let c = cond((true, None, "cluster-gpu"));
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("FlavorNotFound"))
        );
        assert!(c["message"].as_str().unwrap().contains("a100"), "{c}");
        let l = cond((false, Some("research"), "team-a"));
        assert_eq!(
            (l["status"].as_str(), l["reason"].as_str()),
            (Some("False"), Some("ClusterQueueIsInactive"))
        );
        let o = cond((false, Some("research"), "orphan"));
        assert_eq!(o["reason"], "ClusterQueueDoesNotExist");
        assert_eq!(o["message"], "ClusterQueue nowhere does not exist");
        for (id, status) in wanted {
            w.last.insert(id, status);
        }
        // The flavor appears: both become active, with a new transition time.
        handle(&mut cache, None, Msg::Apply(Obj::Flavor(Box::new(flavor("a100")))), 0);
        let ix = build_index(&cache, &IndexConfig::default());
        let again: BTreeMap<_, _> = w.wanted(&ix, &m, "2027-01-01T00:01:00Z").into_iter().collect();
        let c = &again[&(true, None, "cluster-gpu".to_string())]["conditions"][0];
        assert_eq!(
            (c["status"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("True"), Some("2027-01-01T00:01:00Z"))
        );
        let l = &again[&(false, Some("research".to_string()), "team-a".to_string())]["conditions"][0];
        assert_eq!(l["status"], "True");
        assert!(
            !again.contains_key(&(false, Some("research".to_string()), "orphan".to_string())),
            "unchanged: not written again"
        );
    }

    #[test]
    fn the_cache_keeps_a_job_whole_only_until_its_workload_exists() {
        let mut cache = Cache::default();
        let j = job_fixture("job-suspended-create-response.json");
        let mut wl = crate::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
        wl.metadata.uid = Some("wl-uid".into());
        handle(&mut cache, None, Msg::Apply(Obj::Job(Arc::new(j.clone()))), 0);
        let key = "research/train-research".to_string();
        assert!(matches!(cache.objects[&Kind::Job][&key], Obj::JobJson(_)));
        // A new leader would create the Workload from the cached Job.
        let mut ix = build_index(&cache, &IndexConfig::default());
        assert!(ix.take_refetch().is_empty());
        handle(&mut cache, None, Msg::Apply(Obj::Workload(Arc::new(wl))), 0);
        assert!(matches!(cache.objects[&Kind::Job][&key], Obj::JobView(_)));
        handle(&mut cache, None, Msg::Apply(Obj::Job(Arc::new(j))), 0);
        assert!(matches!(cache.objects[&Kind::Job][&key], Obj::JobView(_)));
    }

    #[test]
    fn a_malformed_object_is_reported_not_fatal() {
        let mut cache = Cache::default();
        listed(
            &mut cache,
            vec![Obj::Malformed(
                Kind::ClusterQueue,
                "bad".into(),
                "spec: missing field".into(),
            )],
        );
        let ix = build_index(&cache, &IndexConfig::default());
        assert_eq!(
            ix.errors()[&(Kind::ClusterQueue, "bad".to_string())].reason,
            "Malformed"
        );
        assert!(ix.is_ready());
    }

    fn rss_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0)
    }

    /// Memory with 15 000 Workloads (and their Jobs) and 30 ClusterQueues
    /// cached and indexed, after the first cycle. Run with
    /// `cargo test -p sluice-controller --release -- --ignored memory --nocapture`.
    #[test]
    #[ignore = "measurement; run alone"]
    fn memory_with_15000_workloads_and_30_cluster_queues() {
        let before = rss_kib();
        let mut cache = Cache::default();
        for k in Kind::ALL {
            handle(&mut cache, None, Msg::Init(k), 0);
        }
        let mut add = |o: Obj| handle(&mut cache, None, Msg::Apply(o), 0);
        add(Obj::Flavor(Box::new(flavor("a100"))));
        for q in 0..30 {
            add(Obj::ClusterQueue(Box::new(cq(&format!("cq-{q}"), 64))));
            add(Obj::LocalQueue(Box::new(lq(
                "research",
                &format!("lq-{q}"),
                &format!("cq-{q}"),
            ))));
        }
        let template = job_fixture("job-suspended-create-response.json");
        // One at a time, as the watches deliver them.
        for i in 0..15_000 {
            let mut j = template.clone();
            j.metadata.name = Some(format!("job-{i}"));
            j.metadata.uid = Some(format!("job-uid-{i}"));
            j.metadata
                .labels
                .get_or_insert_default()
                .insert(sluice_api::labels::QUEUE.into(), format!("lq-{}", i % 30));
            let mut wl = crate::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
            wl.metadata.uid = Some(format!("wl-uid-{i}"));
            crate::job::slim_template(&mut wl.spec.pod_sets[0].template);
            add(Obj::Job(Arc::new(j)));
            add(Obj::Workload(Arc::new(wl)));
        }
        for k in Kind::ALL {
            handle(&mut cache, None, Msg::InitDone(k), 0);
        }
        eprintln!("cached: {} MiB", rss_kib() / 1024);
        let mut ix = build_index(&cache, &IndexConfig::default());
        eprintln!("indexed: {} MiB", rss_kib() / 1024);
        let (plans, _) = ix.cycle(now_ms());
        let admitted = plans.iter().filter(|p| p.purpose.label() == "admit").count();
        drop(plans);
        let after = rss_kib();
        eprintln!(
            "RSS {} MiB (grew {} MiB) with 15000 Workloads + Jobs, 30 ClusterQueues, {admitted} admitted",
            after / 1024,
            after.saturating_sub(before) / 1024
        );
        // The issue's target is 100 MiB; measured 90 MiB (release build, glibc
        // malloc): ~34 MiB cache, ~42 MiB index and engine, ~14 MiB the first
        // cycle (500 explanation plans). A guard against regressions (debug
        // builds use more), not the target.
        assert!(after <= 130 * 1024, "RSS {after} KiB");
    }

    // ----- the whole loop against a mocked API server ---------------------------------

    use http::{Request, Response};
    use kube::client::Body;
    use tokio::sync::mpsc;

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn http_get(port: u16, path: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, out)
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn list(kind: &str, items: Vec<serde_json::Value>) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": format!("{kind}List"), "metadata": {"resourceVersion": "7"}, "items": items})
    }

    /// Serves lists from `lists` (by path), leaves watches open, echoes
    /// writes back, and reports every write (method, path, body).
    async fn serve(
        mut handle: Handle,
        lists: BTreeMap<&'static str, serde_json::Value>,
        writes: mpsc::UnboundedSender<(String, String, serde_json::Value)>,
        mut conflicts: usize,
    ) {
        let mut open_watches = Vec::new();
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let query = req.uri().query().unwrap_or_default().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let reply = |v: &serde_json::Value| {
                Response::builder()
                    .status(200)
                    .body(Body::from(serde_json::to_vec(v).unwrap()))
                    .unwrap()
            };
            if method == "GET" && query.contains("watch=true") {
                open_watches.push(send);
            } else if method == "GET" {
                let v = lists
                    .get(path.as_str())
                    .cloned()
                    .unwrap_or_else(|| panic!("unexpected list {path}"));
                send.send_response(reply(&v));
            } else if conflicts > 0 && path.ends_with("/status") && path.contains("/workloads/") {
                // The recorded 409 of a conflicting status apply.
                conflicts -= 1;
                let conflict = crate::testing::fixture("error-409-workload-status-apply-conflict.json");
                send.send_response(
                    Response::builder()
                        .status(409)
                        .body(Body::from(serde_json::to_vec(&conflict).unwrap()))
                        .unwrap(),
                );
                let _ = writes.send(("409".into(), path, body));
            } else {
                let answer = if path.starts_with("/apis/batch/v1/") {
                    crate::testing::fixture("job-unsuspend-merge-patch-response.json")
                } else {
                    body.clone()
                };
                send.send_response(reply(&answer));
                let _ = writes.send((method, path, body));
            }
        }
    }

    async fn start(
        lists: BTreeMap<&'static str, serde_json::Value>,
        conflicts: usize,
    ) -> (
        mpsc::UnboundedReceiver<(String, String, serde_json::Value)>,
        u16,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<Result<(), RunError>>,
    ) {
        let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(svc, "default");
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(serve(handle, lists, tx, conflicts));
        let port = free_port();
        let cfg = RunConfig {
            kube_qps: 1000.0,
            kube_burst: 1000,
            index: IndexConfig::default(),
            lease: None,
            identity: "test-0".into(),
            metrics_addr: ([127, 0, 0, 1], port).into(),
            queue_status_interval: Duration::from_secs(1),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(client, cfg, async move {
            let _ = stopped.await;
        }));
        (rx, port, stop, task)
    }

    fn config_lists(
        workloads: Vec<serde_json::Value>,
        jobs: Vec<serde_json::Value>,
    ) -> BTreeMap<&'static str, serde_json::Value> {
        BTreeMap::from([
            (
                "/apis/sluice.dev/v1alpha1/resourceflavors",
                list("ResourceFlavor", vec![serde_json::to_value(flavor("a100")).unwrap()]),
            ),
            (
                "/apis/sluice.dev/v1alpha1/clusterqueues",
                list(
                    "ClusterQueue",
                    vec![serde_json::to_value(cq("cluster-gpu", 8)).unwrap()],
                ),
            ),
            (
                "/apis/sluice.dev/v1alpha1/localqueues",
                list(
                    "LocalQueue",
                    vec![serde_json::to_value(lq("research", "team-a", "cluster-gpu")).unwrap()],
                ),
            ),
            (
                "/apis/sluice.dev/v1alpha1/workloadpriorityclasses",
                list("WorkloadPriorityClass", vec![]),
            ),
            ("/apis/sluice.dev/v1alpha1/workloads", list("Workload", workloads)),
            ("/apis/batch/v1/jobs", list("Job", jobs)),
            (
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                list("PriorityClass", vec![]),
            ),
            (
                "/api/v1/namespaces",
                list("Namespace", vec![json!({"metadata": {"name": "research"}})]),
            ),
        ])
    }

    async fn next_write(
        rx: &mut mpsc::UnboundedReceiver<(String, String, serde_json::Value)>,
    ) -> (String, String, serde_json::Value) {
        // Queue status writes come on their own schedule: not what these tests look at.
        loop {
            let w = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .expect("a write within 5 s")
                .expect("server running");
            if !w.1.contains("/clusterqueues/") && !w.1.contains("/localqueues/") {
                return w;
            }
        }
    }

    /// The recorded suspended Job (as the API returns it) and the Workload
    /// the controller makes for it, with a UID as the API server would set.
    fn recorded_job_and_workload() -> (serde_json::Value, Workload) {
        let job = crate::testing::fixture("job-suspended-create-response.json");
        let mut wl = crate::job::workload_for_job(
            &job_fixture("job-suspended-create-response.json"),
            false,
            |_| None,
            |_| None,
        )
        .unwrap();
        wl.metadata.uid = Some("wl-uid".into());
        (job, wl)
    }

    #[tokio::test]
    async fn the_loop_lists_everything_becomes_ready_and_admits_through_the_api() {
        let (job, wl) = recorded_job_and_workload();
        let (mut writes, port, stop, task) =
            start(config_lists(vec![serde_json::to_value(&wl).unwrap()], vec![job]), 0).await;
        let (method, path, body) = next_write(&mut writes).await;
        assert_eq!(
            (method.as_str(), path.as_str()),
            (
                "PATCH",
                "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research/status"
            )
        );
        assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
        let (method, path, body) = next_write(&mut writes).await;
        assert_eq!(
            (method.as_str(), path.as_str()),
            ("PATCH", "/apis/batch/v1/namespaces/research/jobs/train-research")
        );
        assert_eq!(body["spec"]["suspend"], false);
        let (code, _) = tokio::task::spawn_blocking(move || http_get(port, "/readyz"))
            .await
            .unwrap();
        assert_eq!(code, 200);
        let (_, metrics) = tokio::task::spawn_blocking(move || http_get(port, "/metrics"))
            .await
            .unwrap();
        assert!(metrics.contains("sluice_admitted_workloads_total 1"), "{metrics}");
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("graceful stop")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn after_a_restart_the_loop_restores_admissions_and_admits_nothing_twice() {
        let first = admitted_workload();
        let mut second_job = job_fixture("job-suspended-create-response.json");
        second_job.metadata.name = Some("second".into());
        second_job.metadata.uid = Some("job-uid-second".into());
        let mut second = crate::job::workload_for_job(&second_job, false, |_| None, |_| None).unwrap();
        second.metadata.uid = Some("wl-uid-second".into());
        let mut running = job_fixture("job-running-pods-ready.json");
        running.metadata.namespace = Some("research".into());
        let lists = config_lists(
            vec![
                serde_json::to_value(&first).unwrap(),
                serde_json::to_value(&second).unwrap(),
            ],
            vec![
                serde_json::to_value(&running).unwrap(),
                serde_json::to_value(&second_job).unwrap(),
            ],
        );
        let (mut writes, _port, stop, task) = start(lists, 0).await;
        // The only Workload write: "second" explained (it does not fit beside the restored one).
        loop {
            let (method, path, body) = next_write(&mut writes).await;
            if path.contains("clusterqueues") || path.contains("localqueues") {
                continue;
            }
            assert_eq!(method, "PATCH");
            assert_eq!(
                path,
                "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-second/status"
            );
            assert!(body["status"].get("admission").is_none(), "{body}");
            assert_eq!(body["status"]["pending"]["reason"], "InsufficientQuota");
            break;
        }
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("graceful stop")
            .unwrap()
            .unwrap();
        // Nothing else was written for the workloads.
        while let Ok(w) = writes.try_recv() {
            assert!(!w.1.contains("/workloads/"), "unexpected write {w:?}");
        }
    }

    #[tokio::test]
    async fn a_conflicting_admission_write_is_rolled_back_and_retried_by_the_loop() {
        let (job, wl) = recorded_job_and_workload();
        let mut lists = config_lists(vec![serde_json::to_value(&wl).unwrap()], vec![job]);
        // After the failed write the loop reads the Workload again.
        lists.insert(
            "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research",
            serde_json::to_value(&wl).unwrap(),
        );
        let (mut writes, _port, stop, task) = start(lists, 1).await;
        let (code, path, body) = next_write(&mut writes).await;
        assert_eq!(code, "409");
        assert!(path.ends_with("/workloads/job-train-research/status"));
        assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
        // Rolled back, and not followed by the Job patch: the retry comes next.
        let (method, path, body) = next_write(&mut writes).await;
        assert_eq!(
            (method.as_str(), path.as_str()),
            (
                "PATCH",
                "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research/status"
            )
        );
        assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
        let (_, path, body) = next_write(&mut writes).await;
        assert_eq!(path, "/apis/batch/v1/namespaces/research/jobs/train-research");
        assert_eq!(body["spec"]["suspend"], false);
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("graceful stop")
            .unwrap()
            .unwrap();
    }
}
