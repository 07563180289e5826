//! The controller's state: an in-memory index fed by watch events, driving
//! the engine. No API calls here: every change the cluster needs comes out
//! as a [`Plan`] for the writer.
//!
//! ```text
//!  watch events ──► Index::apply_* / delete_*  ──► Engine (ledger)
//!                        │   ▲                         │
//!                        │   └─ admission_failed ◄──┐  │ schedule(now)
//!                        ▼                          │  ▼
//!                  Vec<Plan> ───────────────────► writer (server-side apply,
//!                                                  merge patches, Events)
//! ```
//!
//! ## Restart safety
//! A Workload seen with `status.admission` and `QuotaReserved=True` is put
//! back in the engine with [`Engine::restore_admitted`] (and `evict`ed
//! again if it carries `Evicted=True`), never added as pending. If its
//! ClusterQueue is not known yet it is kept out of the engine entirely
//! (so it can never be admitted a second time) and retried whenever a
//! ClusterQueue changes. [`Index::cycle`] does nothing until every watched
//! kind reported its initial list ([`Index::mark_synced`]), so the ledger is
//! rebuilt before anything is admitted.
//!
//! ## Malformed objects
//! Objects that fail `validate()` or the adapter are recorded in
//! [`Index::errors`] with the reason, reported once (log, Event, metric by
//! the caller) and skipped. A ClusterQueue that turns invalid keeps its last
//! valid version in the engine, so admitted work is not disturbed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use sluice_api::Validate;
use sluice_api::v1alpha1::{
    ClusterQueue, FlavorPendingReason, LocalQueue, PendingExplanation, RequeueState, ResourceFlavor, Workload,
    WorkloadPriorityClass, WorkloadStatus, conditions as cond,
};
use sluice_scheduler::{self as eng, Engine, Explanation, WorkloadState};

use crate::job;
use crate::plan::{EventSpec, ObjKey, Plan, Purpose, Step};
use sluice_convert as adapter;

/// Kinds the index must have listed before it admits anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    ResourceFlavor,
    ClusterQueue,
    LocalQueue,
    WorkloadPriorityClass,
    PriorityClass,
    Namespace,
    Workload,
    Job,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::ResourceFlavor,
        Kind::ClusterQueue,
        Kind::LocalQueue,
        Kind::WorkloadPriorityClass,
        Kind::PriorityClass,
        Kind::Namespace,
        Kind::Workload,
        Kind::Job,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ResourceFlavor => "ResourceFlavor",
            Kind::ClusterQueue => "ClusterQueue",
            Kind::LocalQueue => "LocalQueue",
            Kind::WorkloadPriorityClass => "WorkloadPriorityClass",
            Kind::PriorityClass => "PriorityClass",
            Kind::Namespace => "Namespace",
            Kind::Workload => "Workload",
            Kind::Job => "Job",
        }
    }
}

/// Options of the index.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// Honour `kueue.x-k8s.io/queue-name` on Jobs.
    pub kueue_compat: bool,
    /// Evict a Job-owned workload whose pods are not all ready this long
    /// after admission; `None` disables the check.
    pub pods_ready_timeout_ms: Option<i64>,
    /// First requeue backoff after a pods-ready timeout; doubles per
    /// eviction.
    pub backoff_base_ms: i64,
    /// Largest requeue backoff.
    pub backoff_max_ms: i64,
    /// Most pods-ready evictions of a workload; the next one deactivates it
    /// (`spec.active: false`) instead of requeueing it. `None`: no limit.
    pub requeue_limit: Option<u32>,
    /// Most explanation writes a cycle hands out (the rest follow later).
    pub explanations_per_cycle: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            kueue_compat: false,
            pods_ready_timeout_ms: Some(10 * 60 * 1000),
            backoff_base_ms: 60_000,
            backoff_max_ms: 3_600_000,
            requeue_limit: None,
            explanations_per_cycle: 500,
        }
    }
}

/// A malformed or unusable object, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectError {
    /// Machine-readable reason (event reason, metric label).
    pub reason: &'static str,
    pub message: String,
}

/// How often the ledger is checked against the Workload statuses.
const DRIFT_CHECK_MS: i64 = 60_000;
/// Eviction reason when a Workload's status lost its admission.
const ADMISSION_LOST: &str = "AdmissionLost";

/// A pods-gone check of an evicted Job: one in flight at a time, retried
/// with backoff (1 s doubling to 16 s) while pods remain.
#[derive(Clone, Copy, Debug, Default)]
struct Confirmation {
    in_flight: bool,
    attempts: u32,
    not_before_ms: i64,
}

/// What the index keeps of a Workload: a few fields and the status, not
/// the object (its pod templates are what the engine already holds).
struct WlEntry {
    uid: String,
    /// Name and uid of the controlling Job.
    owner: Option<(String, String)>,
    /// The [`job::JOB_UID_LABEL`]: made by Sluice for that Job (kept when
    /// the owner reference is stripped by an orphaning delete).
    job_uid: Option<String>,
    generation: Option<i64>,
    active: bool,
    queue_name: String,
    /// `spec.priority` as observed.
    priority: Option<i32>,
    /// Pods of the first pod set (a Job's parallelism).
    count: i32,
    created_ms: i64,
    /// The engine's view of it, kept only while it is not in the engine
    /// (waiting for its ClusterQueue).
    spec: Option<Box<eng::WorkloadSpec>>,
    /// The status as last written by us or observed, whichever is later,
    /// without the text of a pending explanation (see `pending_fp`).
    status: WorkloadStatus,
    /// Fingerprint of the pending explanation last written or observed.
    pending_fp: Option<u64>,
    /// Sequence number of the latest status write planned for it.
    seq: u64,
    /// That write is not acknowledged yet: watch events (older than it)
    /// must not undo what it writes.
    awaiting: bool,
    /// resourceVersion our last acknowledged status write produced: events
    /// older than it are stale.
    written_rv: Option<u64>,
    /// Known to the engine (pending, admitted, evicting or finished).
    in_engine: bool,
    /// Admission time (epoch ms) while admitted.
    admitted_at: Option<i64>,
    /// All pods were ready at least once since admission.
    pods_ready_seen: bool,
    /// The `PodsReady=True` write failed: retried on the next Job event.
    pods_ready_unwritten: bool,
}

impl WlEntry {
    /// Numbers a status write about to be planned.
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.awaiting = true;
        self.seq
    }
}

/// A LocalQueue's counts and usage (milli-units per (flavor, resource)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalQueueStats {
    pub pending: usize,
    pub admitted: usize,
    pub usage: BTreeMap<(String, String), i64>,
}

/// Counts an observer can read (metrics).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CycleStats {
    pub admitted: usize,
    pub preempted: usize,
    /// Evictions by reason.
    pub evicted: Vec<&'static str>,
    /// Seconds each admitted workload waited since creation.
    pub wait_seconds: Vec<f64>,
    /// Newly recorded malformed objects: (kind, reason).
    pub errors: Vec<(&'static str, &'static str)>,
    /// Ledger entries found out of step with the Workload statuses and
    /// repaired: `engine_only` (admitted in the ledger, not in its status)
    /// or `status_only` (admitted in its status, pending in the ledger).
    pub drift: Vec<&'static str>,
}

/// The index. See the module documentation.
pub struct Index {
    config: IndexConfig,
    engine: Engine,
    flavors: BTreeMap<String, ResourceFlavor>,
    cluster_queues: BTreeMap<String, ClusterQueue>,
    local_queues: BTreeMap<ObjKey, LocalQueue>,
    workload_classes: BTreeMap<String, i32>,
    pod_classes: BTreeMap<String, i32>,
    jobs: BTreeMap<ObjKey, job::JobView>,
    /// Jobs whose full object is needed (to create their Workload) but not held.
    refetch: BTreeSet<ObjKey>,
    workloads: BTreeMap<ObjKey, WlEntry>,
    by_uid: HashMap<String, ObjKey>,
    /// Admitted workloads whose ClusterQueue is unknown: kept out of the
    /// engine until it appears.
    unrestored: BTreeSet<ObjKey>,
    errors: BTreeMap<(Kind, String), ObjectError>,
    synced: BTreeSet<Kind>,
    /// Writes in flight or done whose effect has not been observed yet, so
    /// that repeated events do not repeat them.
    creating: BTreeSet<ObjKey>,
    suspending: BTreeSet<ObjKey>,
    starting: BTreeSet<ObjKey>,
    /// Workloads being evicted (checked for "pods gone" on every tick).
    evicting: BTreeSet<String>,
    /// Evicted workloads whose Job's pods are being looked at (servers
    /// without `status.terminating`), by uid.
    confirming: HashMap<String, Confirmation>,
    /// Workloads we deactivated whose `spec.active: false` is not observed yet.
    deactivating: BTreeSet<String>,
    /// When the ledger is next checked against the Workload statuses.
    next_drift_check_ms: i64,
    /// Deactivations whose `spec.active: false` patch failed: tried again.
    deactivate_retry: BTreeSet<String>,
    /// Jobs to reconcile again next cycle (a Job patch failed).
    retry_jobs: BTreeSet<ObjKey>,
    /// Workloads to read again (a status write failed).
    refetch_workloads: BTreeSet<ObjKey>,
    /// `apply_workload` is taking a Workload read on purpose.
    fetched: bool,
    /// Plans produced by event handlers, drained by [`Index::take_plans`].
    plans: Vec<Plan>,
    stats: CycleStats,
    retry_soon: bool,
    /// Status before an admission whose write is in flight (for rollback).
    prior: HashMap<String, WorkloadStatus>,
    /// Workloads whose explanation changed and is not written yet.
    explain: BTreeSet<String>,
    /// Namespace labels (for ClusterQueue namespaceSelectors).
    namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Pending workloads held out of the engine: their namespace is not
    /// selected by their ClusterQueue.
    not_selected: BTreeSet<ObjKey>,
    /// Jobs were (re)listed: look for orphaned Workloads in the next cycle.
    orphan_scan_due: bool,
}

/// The requeue backoff after the `n`th eviction: `base × 2^(n-1)`, at most
/// `max` (saturating: any `n`, any durations).
pub fn backoff_ms(base: i64, max: i64, n: i32) -> i64 {
    let exp = n.saturating_sub(1).clamp(0, 62) as u32;
    base.max(0).saturating_mul(1i64 << exp).min(max.max(0))
}

fn ms(t: &Time) -> i64 {
    t.0.as_millisecond()
}

fn time_of(now_ms: i64) -> Time {
    Time(Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Sets a condition, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now_ms: i64,
    generation: Option<i64>,
) {
    let now = time_of(now_ms);
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_transition_time: now,
            observed_generation: generation,
        }),
    }
}

fn is_true(status: &WorkloadStatus, type_: &str) -> bool {
    status.condition(type_).is_some_and(|c| c.status == cond::status::TRUE)
}

fn key_of(ns: Option<&str>, name: Option<&str>) -> Option<ObjKey> {
    Some(ObjKey::new(ns?, name?))
}

fn reference(api_version: &str, kind: &str, key: &ObjKey, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid: uid.map(String::from),
        ..Default::default()
    }
}

impl Index {
    pub fn new(config: IndexConfig) -> Self {
        Self {
            config,
            engine: Engine::new(),
            flavors: BTreeMap::new(),
            cluster_queues: BTreeMap::new(),
            local_queues: BTreeMap::new(),
            workload_classes: BTreeMap::new(),
            pod_classes: BTreeMap::new(),
            jobs: BTreeMap::new(),
            refetch: BTreeSet::new(),
            workloads: BTreeMap::new(),
            by_uid: HashMap::new(),
            unrestored: BTreeSet::new(),
            errors: BTreeMap::new(),
            synced: BTreeSet::new(),
            creating: BTreeSet::new(),
            suspending: BTreeSet::new(),
            starting: BTreeSet::new(),
            evicting: BTreeSet::new(),
            confirming: HashMap::new(),
            deactivating: BTreeSet::new(),
            next_drift_check_ms: 0,
            deactivate_retry: BTreeSet::new(),
            retry_jobs: BTreeSet::new(),
            refetch_workloads: BTreeSet::new(),
            fetched: false,
            plans: Vec::new(),
            stats: CycleStats::default(),
            retry_soon: false,
            prior: HashMap::new(),
            explain: BTreeSet::new(),
            namespaces: HashMap::new(),
            not_selected: BTreeSet::new(),
            orphan_scan_due: false,
        }
    }

    // ----- queries ---------------------------------------------------------------

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Malformed or unusable objects, by (kind, key).
    pub fn errors(&self) -> &BTreeMap<(Kind, String), ObjectError> {
        &self.errors
    }

    /// Every kind listed and the ledger rebuilt from it.
    pub fn is_ready(&self) -> bool {
        Kind::ALL.iter().all(|k| self.synced.contains(k))
    }

    /// The key of the workload with this uid.
    pub fn workload_key(&self, uid: &str) -> Option<&ObjKey> {
        self.by_uid.get(uid)
    }

    /// The status the index believes a workload has.
    pub fn workload_status(&self, key: &ObjKey) -> Option<&WorkloadStatus> {
        self.workloads.get(key).map(|e| &e.status)
    }

    /// Admitted workloads kept out of the engine until their ClusterQueue appears.
    pub fn unrestored(&self) -> usize {
        self.unrestored.len()
    }

    /// Counts of the last cycle(s) since the last call, for metrics.
    pub fn take_stats(&mut self) -> CycleStats {
        std::mem::take(&mut self.stats)
    }

    /// Plans produced by event handlers since the last call.
    pub fn take_plans(&mut self) -> Vec<Plan> {
        std::mem::take(&mut self.plans)
    }

    /// Names of the ClusterQueues the index holds (valid ones).
    pub fn cluster_queue_names(&self) -> Vec<String> {
        self.cluster_queues.keys().cloned().collect()
    }

    /// A queue's status as last observed from the API server: a
    /// ClusterQueue (`namespace` None) or a LocalQueue.
    pub fn observed_queue_status(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        let status = match namespace {
            None => serde_json::to_value(self.cluster_queues.get(name)?.status.as_ref()?),
            Some(ns) => serde_json::to_value(self.local_queues.get(&ObjKey::new(ns, name))?.status.as_ref()?),
        };
        status.ok()
    }

    /// Why a ClusterQueue cannot admit new workloads, if it cannot: it
    /// failed validation (kept out of the engine), or it names
    /// ResourceFlavors that do not exist. `(reason, message)`.
    pub fn cluster_queue_problem(&self, name: &str) -> Option<(&'static str, String)> {
        if let Some(e) = self.errors.get(&(Kind::ClusterQueue, name.to_string())) {
            return Some((
                "InvalidClusterQueue",
                format!("Ignored by the controller: {}", e.message),
            ));
        }
        let cq = self.cluster_queues.get(name)?;
        let missing: BTreeSet<&str> = cq
            .spec
            .resource_groups
            .iter()
            .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
            .filter(|f| !self.flavors.contains_key(*f))
            .collect();
        (!missing.is_empty()).then(|| {
            let list: Vec<&str> = missing.into_iter().collect();
            (
                "FlavorNotFound",
                format!(
                    "Cannot admit into ResourceFlavor(s) that do not exist: {}",
                    list.join(", ")
                ),
            )
        })
    }

    /// Why a LocalQueue cannot admit new workloads, if it cannot:
    /// `(reason, message)`.
    pub fn local_queue_problem(&self, key: &ObjKey) -> Option<(&'static str, String)> {
        let lq = self.local_queues.get(key)?;
        let cq = &lq.spec.cluster_queue;
        if !self.cluster_queues.contains_key(cq) && !self.errors.contains_key(&(Kind::ClusterQueue, cq.clone())) {
            return Some(("ClusterQueueDoesNotExist", format!("ClusterQueue {cq} does not exist")));
        }
        self.cluster_queue_problem(cq).map(|(_, why)| {
            (
                "ClusterQueueIsInactive",
                format!("ClusterQueue {cq} is inactive: {why}"),
            )
        })
    }

    /// Pending and admitted counts and usage per (flavor, resource) of
    /// every LocalQueue, in one pass over the workloads.
    pub fn local_queue_stats(&self) -> BTreeMap<ObjKey, LocalQueueStats> {
        let mut out: BTreeMap<ObjKey, LocalQueueStats> = self
            .local_queues
            .keys()
            .map(|k| (k.clone(), LocalQueueStats::default()))
            .collect();
        for (k, e) in &self.workloads {
            if !e.in_engine {
                continue;
            }
            let Some(st) = out.get_mut(&ObjKey::new(k.namespace.clone(), e.queue_name.clone())) else {
                continue;
            };
            match self.engine.workload_state(&e.uid) {
                Some(WorkloadState::Pending | WorkloadState::Preempting) => st.pending += 1,
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    st.admitted += 1;
                    for ps in self.engine.admission(&e.uid).iter().flat_map(|a| a.pod_sets.iter()) {
                        for (res, amount) in &ps.usage {
                            if let Some(fl) = ps.flavors.get(res) {
                                *st.usage.entry((fl.clone(), res.clone())).or_default() += amount;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// A Warning Event on a skipped object, so `kubectl describe` shows why.
    fn report(&mut self, kind: Kind, key: &str, e: &ObjectError) {
        let (namespace, name) = match key.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, key.to_string()),
        };
        let api_version = match kind {
            Kind::Job => "batch/v1",
            Kind::PriorityClass => "scheduling.k8s.io/v1",
            Kind::Namespace => "v1",
            _ => "sluice.dev/v1alpha1",
        };
        self.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: ObjectReference {
                    api_version: Some(api_version.into()),
                    kind: Some(kind.as_str().into()),
                    namespace,
                    name: Some(name),
                    ..Default::default()
                },
                type_: "Warning",
                reason: e.reason.to_string(),
                action: "Skip",
                note: format!("Ignored by Sluice: {}", e.message),
            })],
        });
    }

    fn record_error(&mut self, kind: Kind, key: String, reason: &'static str, message: String) -> bool {
        let e = ObjectError { reason, message };
        let fresh = self.errors.get(&(kind, key.clone())) != Some(&e);
        if fresh {
            self.stats.errors.push((kind.as_str(), reason));
            tracing::warn!(kind = kind.as_str(), object = %key, reason, message = %e.message, "skipping object");
            // Reported once everything is listed: before that, a
            // Workload listed before its ClusterQueue is not an error.
            if self.is_ready() {
                self.report(kind, &key, &e);
            }
        }
        self.errors.insert((kind, key), e);
        fresh
    }

    /// An object that could not be decoded at all.
    pub fn report_malformed(&mut self, kind: Kind, key: &str, message: &str) {
        self.record_error(kind, key.to_string(), "Malformed", message.to_string());
    }

    /// Whether a cycle should run soon even without new events (an
    /// admission was rolled back and waits to be retried).
    pub fn wants_cycle(&self) -> bool {
        self.retry_soon || !self.plans.is_empty()
    }

    fn clear_error(&mut self, kind: Kind, key: &str) {
        self.errors.remove(&(kind, key.to_string()));
    }

    /// A kind finished its initial list.
    pub fn mark_synced(&mut self, kind: Kind) {
        let was_ready = self.is_ready();
        self.synced.insert(kind);
        if kind == Kind::Job {
            // Workloads listed before the Jobs: orphans are finished by
            // the first cycle (before it admits anything).
            self.orphan_scan_due = true;
        }
        if !was_ready && self.is_ready() {
            let errors: Vec<_> = self
                .errors
                .iter()
                .map(|((k, key), e)| (*k, key.clone(), e.clone()))
                .collect();
            for (k, key, e) in errors {
                self.report(k, &key, &e);
            }
        }
    }

    // ----- configuration objects ----------------------------------------------------

    pub fn apply_flavor(&mut self, rf: ResourceFlavor) {
        let Some(name) = rf.metadata.name.clone() else { return };
        match admissible(&rf, adapter::flavor) {
            Ok(spec) => {
                self.clear_error(Kind::ResourceFlavor, &name);
                self.engine.upsert_flavor(spec);
                self.flavors.insert(name, rf);
            }
            Err(m) => {
                self.record_error(Kind::ResourceFlavor, name, "InvalidResourceFlavor", m);
            }
        }
    }

    pub fn delete_flavor(&mut self, name: &str) {
        self.clear_error(Kind::ResourceFlavor, name);
        if self.flavors.remove(name).is_some() {
            self.engine.remove_flavor(name);
        }
    }

    pub fn apply_cluster_queue(&mut self, cq: ClusterQueue) {
        let Some(name) = cq.metadata.name.clone() else { return };
        if let Some(old) = self.cluster_queues.get_mut(&name)
            && old.spec == cq.spec
        {
            // A status update (our own, mostly): nothing for the engine.
            *old = cq;
            return;
        }
        match admissible(&cq, adapter::cluster_queue) {
            Ok(spec) => {
                self.clear_error(Kind::ClusterQueue, &name);
                self.engine.upsert_cluster_queue(spec);
                self.cluster_queues.insert(name, cq);
                self.retry_unrestored();
                self.retry_not_selected(0);
            }
            Err(m) => {
                self.record_error(Kind::ClusterQueue, name, "InvalidClusterQueue", m);
            }
        }
    }

    pub fn delete_cluster_queue(&mut self, name: &str) {
        self.clear_error(Kind::ClusterQueue, name);
        if self.cluster_queues.remove(name).is_some() {
            self.engine.remove_cluster_queue(name);
        }
    }

    pub fn apply_local_queue(&mut self, lq: LocalQueue) {
        let Some(key) = key_of(lq.metadata.namespace.as_deref(), lq.metadata.name.as_deref()) else {
            return;
        };
        if let Some(old) = self.local_queues.get_mut(&key)
            && old.spec == lq.spec
        {
            *old = lq;
            return;
        }
        match admissible(&lq, adapter::local_queue) {
            Ok(spec) => {
                self.clear_error(Kind::LocalQueue, &key.to_string());
                self.engine.upsert_local_queue(spec);
                self.local_queues.insert(key, lq);
                self.retry_not_selected(0);
            }
            Err(m) => {
                self.record_error(Kind::LocalQueue, key.to_string(), "InvalidLocalQueue", m);
            }
        }
    }

    pub fn delete_local_queue(&mut self, key: &ObjKey) {
        self.clear_error(Kind::LocalQueue, &key.to_string());
        if self.local_queues.remove(key).is_some() {
            self.engine
                .remove_local_queue(&adapter::local_queue_key(&key.namespace, &key.name));
        }
    }

    pub fn apply_workload_priority_class(&mut self, wpc: WorkloadPriorityClass) {
        let Some(name) = wpc.metadata.name.clone() else { return };
        match wpc.check() {
            Ok(()) => {
                self.clear_error(Kind::WorkloadPriorityClass, &name);
                self.workload_classes.insert(name, wpc.spec.value);
            }
            Err(e) => {
                self.record_error(
                    Kind::WorkloadPriorityClass,
                    name,
                    "InvalidWorkloadPriorityClass",
                    e.to_string(),
                );
            }
        }
    }

    pub fn delete_workload_priority_class(&mut self, name: &str) {
        self.workload_classes.remove(name);
    }

    /// A Namespace's labels.
    pub fn apply_namespace(&mut self, name: &str, labels: BTreeMap<String, String>, now_ms: i64) {
        if self.namespaces.get(name) != Some(&labels) {
            self.namespaces.insert(name.to_string(), labels);
            self.retry_not_selected(now_ms);
        }
    }

    pub fn delete_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    /// The ClusterQueue whose namespaceSelector leaves out the namespace of
    /// LocalQueue `ns/lq`, if that is the case. Unknown namespaces are not
    /// held back before Namespaces are listed.
    fn unselected_by(&self, ns: &str, lq: &str) -> Option<String> {
        let lq = self.local_queues.get(&ObjKey::new(ns, lq))?;
        let cq = self.cluster_queues.get(&lq.spec.cluster_queue)?;
        let selector = cq.spec.namespace_selector.as_ref()?;
        let labels = match self.namespaces.get(ns) {
            Some(l) => l.clone(),
            None if self.synced.contains(&Kind::Namespace) => BTreeMap::new(),
            None => return None,
        };
        (!selects(selector, &labels)).then(|| lq.spec.cluster_queue.clone())
    }

    fn retry_not_selected(&mut self, now_ms: i64) {
        let keys: Vec<ObjKey> = self.not_selected.iter().cloned().collect();
        for k in keys {
            self.sync_workload(&k, None, now_ms);
        }
    }

    /// A scheduling.k8s.io PriorityClass (name and value).
    pub fn apply_priority_class(&mut self, name: &str, value: i32) {
        self.pod_classes.insert(name.to_string(), value);
    }

    pub fn delete_priority_class(&mut self, name: &str) {
        self.pod_classes.remove(name);
    }

    // ----- workloads ----------------------------------------------------------------------

    pub fn apply_workload(&mut self, wl: impl std::borrow::Borrow<Workload>, now_ms: i64) {
        let wl: &Workload = wl.borrow();
        let Some(key) = key_of(wl.metadata.namespace.as_deref(), wl.metadata.name.as_deref()) else {
            return;
        };
        let Some(uid) = wl.metadata.uid.clone() else { return };
        self.creating.remove(&key);
        if let Some(old) = self.workloads.get(&key)
            && old.uid != uid
        {
            // Deleted and recreated under the same name while we looked away.
            self.delete_workload(&key, now_ms);
        }
        let observed = wl.status.clone().unwrap_or_default();
        let owner = job::owning_job(wl).map(|(n, u)| (n.to_string(), u.to_string()));
        let job_uid = wl
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(job::JOB_UID_LABEL))
            .cloned();
        let generation = wl.metadata.generation;
        let mut active = wl.spec.active;
        if self.deactivating.contains(&uid) {
            if active {
                // Older than our `spec.active: false`: not a reactivation.
                active = false;
            } else {
                self.deactivating.remove(&uid);
            }
        }
        let queue_name = wl.spec.queue_name.clone();
        let count = wl.spec.pod_sets.first().map(|p| p.count).unwrap_or(1);
        let created_ms = wl.metadata.creation_timestamp.as_ref().map(ms).unwrap_or(now_ms);
        let priority = wl.spec.priority;
        match self.workloads.get_mut(&key) {
            Some(e) => {
                // Moved to another queue or reprioritised while it waits:
                // queued again with its new spec.
                if e.in_engine
                    && (e.queue_name != queue_name || e.priority != priority)
                    && matches!(self.engine.workload_state(&uid), Some(WorkloadState::Pending))
                {
                    let _ = self.engine.remove_workload(&uid);
                    e.in_engine = false;
                }
                let reactivated = !e.active && active;
                e.owner = owner;
                e.job_uid = job_uid;
                e.generation = generation;
                e.active = active;
                e.queue_name = queue_name;
                e.priority = priority;
                e.count = count;
                let rv = wl
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok());
                let older = matches!((rv, e.written_rv), (Some(o), Some(w)) if o < w);
                // A Workload read on purpose counts unless a status write of
                // ours is in flight.
                let stale = e.awaiting || (older && !self.fetched);
                if !stale {
                    // What an admission that fails goes back to is no longer
                    // needed: the server's answer is here.
                    self.prior.remove(&uid);
                }
                if stale {
                    // Older than what we wrote (or are writing): keep ours,
                    // but take what others own (an owner's Finished).
                    take_foreign(&mut e.status, &observed);
                } else {
                    e.status = observed;
                    slim_pending(e);
                }
                if reactivated {
                    // A fresh start: pods-ready evictions count from zero
                    // (persisted with its next status write).
                    e.status.requeue_state = None;
                }
            }
            None => {
                self.by_uid.insert(uid.clone(), key.clone());
                self.workloads.insert(
                    key.clone(),
                    WlEntry {
                        uid,
                        priority,
                        owner,
                        job_uid,
                        generation,
                        active,
                        queue_name,
                        count,
                        created_ms,
                        spec: None,
                        status: observed,
                        pending_fp: None,
                        seq: 0,
                        awaiting: false,
                        written_rv: None,
                        in_engine: false,
                        admitted_at: None,
                        pods_ready_seen: false,
                        pods_ready_unwritten: false,
                    },
                );
            }
        }
        if let Some(e) = self.workloads.get_mut(&key)
            && e.status.pending.is_some()
        {
            slim_pending(e);
        }
        self.sync_workload(&key, Some(wl), now_ms);
        if let Some(job_key) = self.job_key_of(&key) {
            self.reconcile_job(&job_key, now_ms);
        }
    }

    fn job_key_of(&self, wl: &ObjKey) -> Option<ObjKey> {
        let e = self.workloads.get(wl)?;
        let (name, _) = e.owner.as_ref()?;
        Some(ObjKey::new(wl.namespace.clone(), name.clone()))
    }

    fn engine_spec(&self, wl: &Workload) -> Result<eng::WorkloadSpec, String> {
        wl.check().map_err(|v| v.to_string())?;
        let prio = adapter::priority(wl, |n| self.workload_classes.get(n).copied());
        let created = wl.metadata.creation_timestamp.as_ref().map(ms).unwrap_or(0);
        adapter::workload(wl, prio, created).map_err(|err| err.to_string())
    }

    /// Puts a workload into the engine in the state its status says. `wl`
    /// is the object when it was just observed; without it, the spec kept
    /// while it waited is used.
    fn sync_workload(&mut self, key: &ObjKey, wl: Option<&Workload>, now_ms: i64) {
        let Some(e) = self.workloads.get(key) else { return };
        let uid = e.uid.clone();
        let finished = is_true(&e.status, cond::FINISHED);
        if !finished && self.is_orphan(key) {
            self.finish_orphan(key, now_ms);
            return;
        }
        if e.in_engine {
            // Its owner (a Job, or whoever created it) marked it finished.
            if finished
                && matches!(
                    self.engine.workload_state(&uid),
                    Some(WorkloadState::Admitted | WorkloadState::Evicting)
                )
            {
                let _ = self.engine.finish(&uid);
                self.evicting.remove(&uid);
                // `status.state` (a printer column) follows: Finished.
                let e = self.workloads.get_mut(key).expect("present");
                let state = e.status.derive_state(e.active);
                if e.status.state != Some(state) {
                    e.status.state = Some(state);
                    let status = e.status.clone();
                    let seq = e.next_seq();
                    let wl_uid = e.uid.clone();
                    self.plans.push(Plan {
                        purpose: Purpose::Finish { uid: uid.clone() },
                        steps: vec![Step::ApplyWorkloadStatus {
                            key: key.clone(),
                            status: Box::new(status),
                            seq,
                            uid: wl_uid.clone(),
                        }],
                    });
                }
            } else if finished {
                let _ = self.engine.remove_workload(&uid);
                self.workloads.get_mut(key).expect("present").in_engine = false;
                return;
            } else if e.status.holds_quota()
                && e.status.admission.is_some()
                && matches!(
                    self.engine.workload_state(&uid),
                    Some(WorkloadState::Pending | WorkloadState::Preempting)
                )
            {
                // Admitted by someone else (a previous leader writing during
                // the hand-over): take its admission as it is, never admit it
                // a second time.
                let _ = self.engine.remove_workload(&uid);
                self.workloads.get_mut(key).expect("present").in_engine = false;
                tracing::warn!(workload = %key, "adopting an admission made by another writer");
            } else if !e.active {
                // Deactivated (spec.active: false): evicted if admitted, out
                // of the queue otherwise, until it is activated again.
                match self.engine.workload_state(&uid) {
                    Some(WorkloadState::Admitted) if self.engine.evict(&uid).is_ok() => {
                        let msg = "The workload was deactivated (spec.active: false)";
                        self.on_evicted(&uid, cond::reasons::DEACTIVATED, None, msg, now_ms);
                    }
                    Some(WorkloadState::Pending | WorkloadState::Preempting) => {
                        let _ = self.engine.remove_workload(&uid);
                        self.workloads.get_mut(key).expect("present").in_engine = false;
                    }
                    _ => {}
                }
                return;
            } else {
                return;
            }
        }
        if finished {
            return;
        }
        let spec = match wl.map(|w| self.engine_spec(w)) {
            Some(Ok(s)) => s,
            Some(Err(m)) => {
                self.record_error(Kind::Workload, key.to_string(), "InvalidWorkload", m);
                return;
            }
            None => match self.workloads.get_mut(key).and_then(|e| e.spec.take()) {
                Some(s) => *s,
                None => return,
            },
        };
        // Its Job is not (or no longer) there: once Jobs are listed, it must
        // not take quota (a deleted Job's Workload is about to be garbage
        // collected). Kept aside; its Job's arrival brings it in.
        if let Some(e) = self.workloads.get_mut(key)
            && let Some((job_name, job_uid)) = &e.owner
            && self.synced.contains(&Kind::Job)
            && self
                .jobs
                .get(&ObjKey::new(key.namespace.clone(), job_name.clone()))
                .is_none_or(|j| j.uid != *job_uid)
        {
            e.spec = Some(Box::new(spec));
            return;
        }
        let Some(e) = self.workloads.get(key) else { return };
        let holds = e.status.holds_quota() && e.status.admission.is_some();
        let evicted = is_true(&e.status, cond::EVICTED);
        let admitted_at = e
            .status
            .condition(cond::QUOTA_RESERVED)
            .map(|c| ms(&c.last_transition_time))
            .unwrap_or(now_ms);
        let result = if holds {
            let adm = e.status.admission.as_ref().expect("checked");
            match adapter::admission(adm) {
                Err(err) => Err(("InvalidAdmission", err.to_string())),
                Ok(assignments) => self
                    .engine
                    .restore_admitted(spec.clone(), &adm.cluster_queue, &assignments, admitted_at)
                    .map_err(|err| ("RestoreFailed", err.to_string())),
            }
        } else if e.active
            && let Some(cq) = self.unselected_by(&key.namespace, &e.queue_name)
        {
            self.hold_unselected(key, spec, &cq, now_ms);
            return;
        } else if e.active {
            self.not_selected.remove(key);
            // A requeue backoff still running (found after a restart) is kept.
            let backoff = e
                .status
                .requeue_state
                .as_ref()
                .and_then(|r| r.requeue_at.as_ref())
                .map(ms)
                .filter(|t| *t > now_ms);
            match backoff {
                Some(t) => self.engine.add_workload_backing_off(spec.clone(), t),
                None => self.engine.add_workload(spec.clone()),
            }
            .map_err(|err| ("InvalidWorkload", err.to_string()))
        } else {
            return;
        };
        match result {
            Ok(()) => {
                self.unrestored.remove(key);
                self.clear_error(Kind::Workload, &key.to_string());
                let e = self.workloads.get_mut(key).expect("present");
                e.in_engine = true;
                if holds {
                    e.admitted_at = Some(admitted_at);
                    // Its pods were seen ready before a restart: no deadline.
                    e.pods_ready_seen = is_true(&e.status, cond::PODS_READY);
                    if evicted {
                        let _ = self.engine.evict(&uid);
                        self.evicting.insert(uid);
                    }
                }
            }
            Err((reason, m)) => {
                if holds {
                    self.unrestored.insert(key.clone());
                    if let Some(e) = self.workloads.get_mut(key) {
                        e.spec = Some(Box::new(spec));
                    }
                }
                self.record_error(Kind::Workload, key.to_string(), reason, m);
            }
        }
    }

    /// Keeps a pending workload out of the engine because its namespace is
    /// not selected, and says so in its status (once).
    fn hold_unselected(&mut self, key: &ObjKey, spec: eng::WorkloadSpec, cq: &str, now_ms: i64) {
        self.not_selected.insert(key.clone());
        let Some(e) = self.workloads.get_mut(key) else { return };
        e.spec = Some(Box::new(spec));
        let fp = explanation_fp(cond::reasons::NAMESPACE_NOT_SELECTED, std::iter::empty());
        if e.pending_fp == Some(fp) {
            return;
        }
        let message = format!(
            "namespace {} is not selected by the namespaceSelector of ClusterQueue {cq}",
            key.namespace
        );
        set_condition(
            &mut e.status.conditions,
            cond::QUOTA_RESERVED,
            cond::status::FALSE,
            cond::reasons::NAMESPACE_NOT_SELECTED,
            &message,
            now_ms,
            e.generation,
        );
        e.status.pending = Some(PendingExplanation {
            reason: cond::reasons::NAMESPACE_NOT_SELECTED.into(),
            message,
            ..Default::default()
        });
        e.status.state = Some(e.status.derive_state(e.active));
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        slim_pending(e);
        let uid = e.uid.clone();
        self.plans.push(Plan {
            purpose: Purpose::Pending { uid },
            steps: vec![Step::ApplyWorkloadStatus {
                key: key.clone(),
                status: Box::new(status),
                seq,
                uid: wl_uid.clone(),
            }],
        });
    }

    fn retry_unrestored(&mut self) {
        let keys: Vec<ObjKey> = self.unrestored.iter().cloned().collect();
        for k in keys {
            // Time only matters for fresh admissions, which these are not.
            self.sync_workload(&k, None, 0);
        }
    }

    pub fn delete_workload(&mut self, key: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.remove(key) else { return };
        self.not_selected.remove(key);
        self.by_uid.remove(&e.uid);
        self.unrestored.remove(key);
        self.evicting.remove(&e.uid);
        self.confirming.remove(&e.uid);
        self.deactivating.remove(&e.uid);
        self.deactivate_retry.remove(&e.uid);
        self.prior.remove(&e.uid);
        self.refetch_workloads.remove(key);
        self.clear_error(Kind::Workload, &key.to_string());
        if e.in_engine {
            let _ = self.engine.remove_workload(&e.uid);
        }
        // The Job still wants a Workload: recreate it.
        if let Some((name, _)) = &e.owner {
            let jk = ObjKey::new(key.namespace.clone(), name.clone());
            self.reconcile_job(&jk, now_ms);
        }
    }

    // ----- jobs ---------------------------------------------------------------------------

    /// A Job as observed (the full object: its Workload may be created from it).
    pub fn apply_job(&mut self, j: impl std::borrow::Borrow<Job>, now_ms: i64) {
        let j: &Job = j.borrow();
        let view = job::JobView::of(j, self.config.kueue_compat);
        self.apply_job_view(view, Some(j), now_ms);
    }

    /// A Job known only by its view (a new leader building its index from
    /// the cache). If its Workload must be created, the Job is listed in
    /// [`Index::take_refetch`] so that the caller reads it again.
    pub fn apply_job_view(&mut self, view: job::JobView, full: Option<&Job>, now_ms: i64) {
        let key = ObjKey::new(view.namespace.clone(), view.name.clone());
        if view.name.is_empty() {
            return;
        }
        if view.suspended {
            self.suspending.remove(&key);
        } else {
            self.starting.remove(&key);
        }
        self.refetch.remove(&key);
        self.jobs.insert(key.clone(), view);
        // Its Workload, seen first and kept aside, can come in now.
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        if self
            .workloads
            .get(&wk)
            .is_some_and(|e| !e.in_engine && e.spec.is_some())
        {
            self.sync_workload(&wk, None, now_ms);
        }
        self.reconcile(&key, full, now_ms);
    }

    /// Jobs to read again from the API server and pass to [`Index::apply_job`].
    pub fn take_refetch(&mut self) -> Vec<ObjKey> {
        std::mem::take(&mut self.refetch).into_iter().collect()
    }

    pub fn delete_job(&mut self, key: &ObjKey, now_ms: i64) {
        self.jobs.remove(key);
        self.refetch.remove(key);
        self.suspending.remove(key);
        self.starting.remove(key);
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        // Quota is released now; the Workload goes with its owner (garbage
        // collector) and is forgotten when its deletion is observed.
        if let Some(e) = self.workloads.get_mut(&wk)
            && e.in_engine
        {
            let _ = self.engine.remove_workload(&e.uid);
            e.in_engine = false;
            self.evicting.remove(&e.uid);
        }
        let _ = now_ms;
    }

    fn reconcile_job(&mut self, key: &ObjKey, now_ms: i64) {
        self.reconcile(key, None, now_ms);
    }

    /// Level-triggered: what a Job needs given its Workload's state.
    fn reconcile(&mut self, key: &ObjKey, full: Option<&Job>, now_ms: i64) {
        let Some(j) = self.jobs.get(key) else { return };
        if j.queue.is_none() {
            return;
        }
        let job_uid = j.uid.clone();
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        let owned = self
            .workloads
            .get(&wk)
            .filter(|e| e.owner.as_ref().is_some_and(|(_, u)| *u == job_uid));
        let Some(e) = owned else {
            if self.workloads.contains_key(&wk) {
                self.record_error(
                    Kind::Job,
                    key.to_string(),
                    "WorkloadNameTaken",
                    format!("Workload {wk} exists but is not owned by this Job"),
                );
                return;
            }
            if j.finished.is_some() {
                return;
            }
            // No Workload yet: create it, and hold the Job if it runs.
            if !j.suspended && self.suspending.insert(key.clone()) {
                self.plans.push(Plan {
                    purpose: Purpose::SuspendJob,
                    steps: vec![Step::PatchJob {
                        key: key.clone(),
                        patch: job::suspend_patch(),
                    }],
                });
            }
            if !self.creating.contains(&wk) {
                let Some(full) = full else {
                    self.refetch.insert(key.clone());
                    return;
                };
                let wcs = &self.workload_classes;
                let pcs = &self.pod_classes;
                match job::workload_for_job(
                    full,
                    self.config.kueue_compat,
                    |n| wcs.get(n).copied(),
                    |n| pcs.get(n).copied(),
                ) {
                    Ok(wl) => {
                        self.creating.insert(wk);
                        self.plans.push(Plan {
                            purpose: Purpose::CreateWorkload,
                            steps: vec![Step::ApplyWorkload(Box::new(wl))],
                        });
                    }
                    Err(err) => {
                        self.record_error(Kind::Job, key.to_string(), err.metric_label(), err.to_string());
                    }
                }
            }
            return;
        };
        let uid = e.uid.clone();
        let count = e.count;
        let state = if e.in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        let finished_status = is_true(&e.status, cond::FINISHED);
        let unrestored = self.unrestored.contains(&wk);
        if let Some(ok) = j.finished {
            if !finished_status {
                self.finish(&wk, ok, now_ms);
            }
            return;
        }
        if finished_status || unrestored {
            return;
        }
        let suspended = j.suspended;
        let live = j.live;
        match state {
            Some(WorkloadState::Admitted) => {
                if j.all_pods_ready(count) {
                    self.pods_ready(&wk, now_ms);
                }
                if suspended && !self.starting.contains(key) {
                    // Admitted but the Job never started (e.g. a crash between
                    // the status write and the Job patch): start it.
                    if let Some(adm) = self.engine.admission(&uid) {
                        let steps = self.start_job_steps(key, &adm.pod_sets);
                        if !steps.is_empty() {
                            self.starting.insert(key.clone());
                            self.plans.push(Plan {
                                purpose: Purpose::StartJob { uid },
                                steps,
                            });
                        }
                    }
                }
            }
            Some(WorkloadState::Evicting) => {
                if !suspended {
                    if self.suspending.insert(key.clone()) {
                        self.plans.push(Plan {
                            purpose: Purpose::SuspendJob,
                            steps: vec![Step::PatchJob {
                                key: key.clone(),
                                patch: job::suspend_patch(),
                            }],
                        });
                    }
                } else if live == 0 {
                    if j.reports_terminating {
                        self.complete_eviction(&wk, now_ms);
                    } else {
                        // `active` is 0 but pods being deleted are not
                        // counted: look before releasing their quota.
                        self.confirm_pods_gone(key, job_uid, uid, now_ms);
                    }
                }
            }
            Some(WorkloadState::Pending | WorkloadState::Preempting) | None => {
                if !suspended && self.suspending.insert(key.clone()) {
                    self.plans.push(Plan {
                        purpose: Purpose::SuspendJob,
                        steps: vec![Step::PatchJob {
                            key: key.clone(),
                            patch: job::suspend_patch(),
                        }],
                    });
                }
            }
            Some(WorkloadState::Finished) => {}
        }
    }

    /// All pods of an admitted workload were seen ready: no pods-ready
    /// deadline any more, and `PodsReady=True` persisted so that a
    /// restarted controller knows it too.
    fn pods_ready(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.get_mut(wk) else { return };
        let retry = std::mem::take(&mut e.pods_ready_unwritten);
        if e.pods_ready_seen && !retry {
            return;
        }
        e.pods_ready_seen = true;
        if !retry && is_true(&e.status, cond::PODS_READY) {
            return;
        }
        let generation = e.generation;
        set_condition(
            &mut e.status.conditions,
            cond::PODS_READY,
            cond::status::TRUE,
            cond::reasons::PODS_READY,
            "All pods were ready or succeeded",
            now_ms,
            generation,
        );
        e.status.state = Some(e.status.derive_state(e.active));
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        let uid = e.uid.clone();
        self.plans.push(Plan {
            purpose: Purpose::PodsReady { uid },
            steps: vec![Step::ApplyWorkloadStatus {
                key: wk.clone(),
                status: Box::new(status),
                seq,
                uid: wl_uid.clone(),
            }],
        });
    }

    /// The steps that start an admitted workload's suspended Job on its flavors.
    fn start_job_steps(&mut self, key: &ObjKey, pod_sets: &[eng::PodSetAssignment]) -> Vec<Step> {
        let Some(j) = self.jobs.get(key) else { return Vec::new() };
        let names: BTreeSet<&String> = pod_sets.iter().flat_map(|p| p.flavors.values()).collect();
        let flavors: Vec<&ResourceFlavor> = names.iter().filter_map(|n| self.flavors.get(*n)).collect();
        let base = j.patch_base();
        let patch = match job::injection_patch(&base, &flavors) {
            Ok(p) => p,
            Err(err) => {
                self.record_error(Kind::Job, key.to_string(), err.metric_label(), err.to_string());
                return Vec::new();
            }
        };
        let mut steps = Vec::new();
        if j.started {
            steps.push(Step::PatchJobStatus {
                key: key.clone(),
                patch: job::clear_start_time_patch(),
            });
        }
        steps.push(Step::PatchJob {
            key: key.clone(),
            patch,
        });
        steps
    }

    fn job_reference(&self, wk: &ObjKey) -> Option<ObjectReference> {
        let jk = self.job_key_of(wk)?;
        let j = self.jobs.get(&jk)?;
        Some(reference("batch/v1", "Job", &jk, Some(&j.uid)))
    }

    fn events(&self, wk: &ObjKey, type_: &'static str, reason: &str, action: &'static str, note: &str) -> Vec<Step> {
        let mut out = Vec::new();
        if let Some(e) = self.workloads.get(wk) {
            out.push(Step::Event(EventSpec {
                regarding: reference("sluice.dev/v1alpha1", "Workload", wk, Some(&e.uid)),
                type_,
                reason: reason.to_string(),
                action,
                note: note.to_string(),
            }));
        }
        if let Some(r) = self.job_reference(wk) {
            out.push(Step::Event(EventSpec {
                regarding: r,
                type_,
                reason: reason.to_string(),
                action,
                note: note.to_string(),
            }));
        }
        out
    }

    /// A Workload Sluice made for a Job ([`job::JOB_UID_LABEL`]) that has
    /// lost its owner reference (an orphaning delete) while that Job is
    /// gone (once Jobs are listed): nobody will ever finish it.
    fn is_orphan(&self, wk: &ObjKey) -> bool {
        let Some(e) = self.workloads.get(wk) else { return false };
        let Some(job_uid) = &e.job_uid else { return false };
        if e.owner.is_some() || !self.synced.contains(&Kind::Job) {
            return false;
        }
        let job_name = wk.name.strip_prefix("job-").unwrap_or(&wk.name);
        self.jobs
            .get(&ObjKey::new(wk.namespace.clone(), job_name))
            .is_none_or(|j| j.uid != *job_uid)
    }

    /// Finishes an orphaned Workload (JobDeleted): its quota is released
    /// and a restart never takes it again.
    fn finish_orphan(&mut self, wk: &ObjKey, now_ms: i64) {
        self.unrestored.remove(wk);
        self.not_selected.remove(wk);
        if let Some(e) = self.workloads.get_mut(wk) {
            e.spec = None;
        }
        tracing::info!(workload = %wk, "its Job was deleted (Workload orphaned): finished");
        self.finish_with(
            wk,
            cond::reasons::JOB_DELETED,
            "The Job was deleted; its Workload was orphaned",
            now_ms,
        );
    }

    /// Orphaned Workloads seen before Jobs were listed.
    fn finish_orphans(&mut self, now_ms: i64) {
        let orphans: Vec<ObjKey> = self
            .workloads
            .iter()
            .filter(|(_, e)| e.job_uid.is_some() && e.owner.is_none() && !is_true(&e.status, cond::FINISHED))
            .map(|(k, _)| k.clone())
            .filter(|k| self.is_orphan(k))
            .collect();
        for k in orphans {
            self.finish_orphan(&k, now_ms);
        }
    }

    fn finish(&mut self, wk: &ObjKey, succeeded: bool, now_ms: i64) {
        let (reason, message) = if succeeded {
            (cond::reasons::SUCCEEDED, "Job finished successfully")
        } else {
            (cond::reasons::FAILED, "Job failed")
        };
        self.finish_with(wk, reason, message, now_ms);
    }

    fn finish_with(&mut self, wk: &ObjKey, reason: &str, message: &str, now_ms: i64) {
        let Some(e) = self.workloads.get_mut(wk) else { return };
        let uid = e.uid.clone();
        if e.in_engine {
            match self.engine.workload_state(&uid) {
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    let _ = self.engine.finish(&uid);
                }
                _ => {
                    let _ = self.engine.remove_workload(&uid);
                    e.in_engine = false;
                }
            }
        }
        self.evicting.remove(&uid);
        e.admitted_at = None;
        let generation = e.generation;
        set_condition(
            &mut e.status.conditions,
            cond::FINISHED,
            cond::status::TRUE,
            reason,
            message,
            now_ms,
            generation,
        );
        e.status.pending = None;
        e.pending_fp = None;
        e.status.state = Some(e.status.derive_state(e.active));
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        let mut steps = vec![Step::ApplyWorkloadStatus {
            key: wk.clone(),
            status: Box::new(status),
            seq,
            uid: wl_uid.clone(),
        }];
        steps.extend(
            self.events(wk, "Normal", "Finished", "Finish", message)
                .into_iter()
                .take(1),
        );
        self.plans.push(Plan {
            purpose: Purpose::Finish { uid },
            steps,
        });
    }

    fn confirm_pods_gone(&mut self, job: &ObjKey, job_uid: String, uid: String, now_ms: i64) {
        let c = self.confirming.entry(uid.clone()).or_default();
        if c.in_flight || now_ms < c.not_before_ms {
            return;
        }
        c.in_flight = true;
        self.plans.push(Plan {
            purpose: Purpose::ConfirmPodsGone { uid },
            steps: vec![Step::ConfirmPodsGone {
                key: job.clone(),
                job_uid,
            }],
        });
    }

    /// The pods of an evicted workload's Job are gone: release its quota
    /// and requeue it (if it is still being evicted and its Job still
    /// reports no active pods).
    pub fn pods_gone(&mut self, uid: &str, now_ms: i64) {
        if self.confirming.remove(uid).is_none() {
            return;
        }
        let Some(wk) = self.by_uid.get(uid).cloned() else {
            return;
        };
        if self.engine.workload_state(uid) != Some(WorkloadState::Evicting) {
            return;
        }
        match self.job_key_of(&wk).and_then(|jk| self.jobs.get(&jk)) {
            Some(j) if j.suspended && j.live == 0 => self.complete_eviction(&wk, now_ms),
            // Something changed meanwhile: the next tick looks again.
            _ => {}
        }
    }

    /// Pods of an evicted workload's Job remain (or the list failed): look
    /// again after a backoff.
    pub fn pods_remain(&mut self, uid: &str, now_ms: i64) {
        if let Some(c) = self.confirming.get_mut(uid) {
            c.in_flight = false;
            c.attempts = c.attempts.saturating_add(1);
            c.not_before_ms = now_ms.saturating_add(1000 << c.attempts.min(4));
        }
    }

    fn complete_eviction(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.get_mut(wk) else { return };
        let uid = e.uid.clone();
        self.confirming.remove(&uid);
        let not_before = e
            .status
            .requeue_state
            .as_ref()
            .and_then(|r| r.requeue_at.as_ref())
            .map(ms)
            .filter(|t| *t > now_ms);
        if self
            .engine
            .eviction_complete_with_backoff(&uid, now_ms, not_before)
            .is_err()
        {
            return;
        }
        self.evicting.remove(&uid);
        e.admitted_at = None;
        e.pods_ready_seen = false;
        let deactivated = !e.active;
        if deactivated {
            let _ = self.engine.remove_workload(&uid);
            e.in_engine = false;
        }
        let generation = e.generation;
        let c = &mut e.status.conditions;
        set_condition(
            c,
            cond::QUOTA_RESERVED,
            cond::status::FALSE,
            cond::reasons::PENDING,
            "Quota released after eviction",
            now_ms,
            generation,
        );
        set_condition(
            c,
            cond::ADMITTED,
            cond::status::FALSE,
            cond::reasons::PENDING,
            "Evicted; waiting in the queue again",
            now_ms,
            generation,
        );
        let (status, reason, message) = match not_before {
            _ if deactivated => (
                cond::status::FALSE,
                cond::reasons::DEACTIVATED,
                "Deactivated; not requeued until spec.active is true",
            ),
            Some(_) => (cond::status::FALSE, cond::reasons::BACKOFF, "Requeue after backoff"),
            None => (cond::status::TRUE, cond::reasons::PENDING, "Requeued after eviction"),
        };
        set_condition(c, cond::REQUEUED, status, reason, message, now_ms, generation);
        e.status.admission = None;
        e.status.state = Some(e.status.derive_state(e.active));
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        let mut steps = vec![Step::ApplyWorkloadStatus {
            key: wk.clone(),
            status: Box::new(status),
            seq,
            uid: wl_uid.clone(),
        }];
        if let Some(jk) = self.job_key_of(wk)
            && let Some(j) = self.jobs.get(&jk)
        {
            let started = j.started;
            match job::restoration_patch(&j.patch_base()) {
                Ok(Some(patch)) => {
                    if started {
                        steps.push(Step::PatchJobStatus {
                            key: jk.clone(),
                            patch: job::clear_start_time_patch(),
                        });
                    }
                    steps.push(Step::PatchJob { key: jk, patch });
                }
                Ok(None) => {}
                Err(err) => {
                    self.record_error(Kind::Job, jk.to_string(), err.metric_label(), err.to_string());
                }
            }
        }
        steps.extend(self.events(wk, "Normal", "Requeued", "Requeue", message));
        self.plans.push(Plan {
            purpose: Purpose::Requeue { uid },
            steps,
        });
    }

    // ----- cycles ---------------------------------------------------------------------------

    /// Runs the engine once (if ready) and returns every plan due: those
    /// from events since the last call, admissions, preemptions,
    /// evictions, requeues and changed explanations. Also returns when the
    /// engine next wants to run.
    pub fn cycle(&mut self, now_ms: i64) -> (Vec<Plan>, Option<i64>) {
        if !self.is_ready() {
            return (self.take_plans(), None);
        }
        self.retry_soon = false;
        if std::mem::take(&mut self.orphan_scan_due) {
            self.finish_orphans(now_ms);
        }
        self.tick(now_ms);
        for key in std::mem::take(&mut self.retry_jobs) {
            self.reconcile_job(&key, now_ms);
        }
        for uid in std::mem::take(&mut self.deactivate_retry) {
            if self.deactivating.contains(&uid)
                && let Some(wk) = self.by_uid.get(&uid).cloned()
            {
                self.plans.push(Plan {
                    purpose: Purpose::Deactivate { uid },
                    steps: vec![Step::PatchWorkload {
                        key: wk,
                        patch: serde_json::json!({"spec": {"active": false}}),
                    }],
                });
            }
        }
        if now_ms >= self.next_drift_check_ms {
            self.check_drift(now_ms);
            self.next_drift_check_ms = now_ms.saturating_add(DRIFT_CHECK_MS);
        }
        let cycle = self.engine.schedule(now_ms);
        for adm in &cycle.admitted {
            self.on_admitted(adm, now_ms);
        }
        for p in &cycle.preempted {
            let preemptor = self
                .by_uid
                .get(&*p.preemptor)
                .map(ToString::to_string)
                .unwrap_or_else(|| p.preemptor.to_string());
            let message = format!("Preempted to accommodate {preemptor}: {}", p.message);
            self.on_evicted(
                &p.victim,
                cond::reasons::PREEMPTED,
                Some(p.reason.as_str()),
                &message,
                now_ms,
            );
            self.stats.preempted += 1;
        }
        for ev in &cycle.evicted {
            self.on_evicted(&ev.uid, ev.reason.as_str(), None, &ev.message, now_ms);
        }
        for (uid, expl) in &cycle.pending_changed {
            self.on_pending(uid, expl, now_ms);
        }
        let mut wake = cycle.next_wakeup;
        if let Some(t) = self.next_pods_ready_deadline() {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        // A pods-gone check waiting out its backoff.
        if let Some(t) = self
            .confirming
            .values()
            .filter(|c| !c.in_flight)
            .map(|c| c.not_before_ms)
            .min()
        {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        let mut plans = self.take_plans();
        plans.extend(self.take_explanations(self.config.explanations_per_cycle, now_ms));
        (plans, wake)
    }

    /// The periodic check of the ledger against reality (the Workload
    /// statuses as last observed or written): a workload the ledger holds
    /// as admitted whose status no longer records an admission (changed
    /// outside Sluice) is evicted, so its Job stops and its quota is
    /// released; one whose status records an admission the ledger does not
    /// hold is taken as admitted. Workloads with a status write in flight
    /// are left alone. Each repair is counted (`sluice_ledger_drift_total`).
    /// Runs with the first cycle a minute after the last check (drift comes
    /// from changes, and every change is an event that brings a cycle).
    fn check_drift(&mut self, now_ms: i64) {
        let mut engine_only = Vec::new();
        let mut status_only = Vec::new();
        for (k, e) in &self.workloads {
            if !e.in_engine || e.awaiting || self.unrestored.contains(k) {
                continue;
            }
            let recorded = e.status.holds_quota() && e.status.admission.is_some();
            match self.engine.workload_state(&e.uid) {
                Some(WorkloadState::Admitted) if !recorded && !is_true(&e.status, cond::FINISHED) => {
                    engine_only.push((k.clone(), e.uid.clone()));
                }
                Some(WorkloadState::Pending | WorkloadState::Preempting) if recorded => status_only.push(k.clone()),
                _ => {}
            }
        }
        for k in status_only {
            tracing::warn!(workload = %k, "ledger drift: admitted in its status, pending in the ledger; taking the admission");
            self.stats.drift.push("status_only");
            self.sync_workload(&k, None, now_ms);
        }
        for (k, uid) in engine_only {
            tracing::warn!(workload = %k, "ledger drift: admitted in the ledger, not in its status; evicting");
            self.stats.drift.push("engine_only");
            if self.engine.evict(&uid).is_ok() {
                let msg = "Its status no longer records the admission (changed outside Sluice): evicted so that the ledger and the cluster agree";
                self.on_evicted(&uid, ADMISSION_LOST, None, msg, now_ms);
            }
        }
    }

    /// Time-driven checks: pods-ready timeouts, and evictions whose pods are gone.
    fn tick(&mut self, now_ms: i64) {
        let evicting: Vec<String> = self.evicting.iter().cloned().collect();
        for uid in evicting {
            let Some(wk) = self.by_uid.get(&uid).cloned() else {
                continue;
            };
            match self.job_key_of(&wk) {
                // No Job: nobody we know runs its pods.
                None => self.complete_eviction(&wk, now_ms),
                Some(jk) => self.reconcile_job(&jk, now_ms),
            }
        }
        let Some(timeout) = self.config.pods_ready_timeout_ms else {
            return;
        };
        let mut expired = Vec::new();
        for (wk, e) in &self.workloads {
            if e.pods_ready_seen || !e.in_engine || e.owner.is_none() {
                continue;
            }
            if let Some(at) = e.admitted_at
                && at.saturating_add(timeout) <= now_ms
                && self.engine.workload_state(&e.uid) == Some(WorkloadState::Admitted)
            {
                expired.push(wk.clone());
            }
        }
        for wk in expired {
            // A server that does not report `status.ready` (JobReadyPods off)
            // cannot tell us: give up the check rather than evict running work.
            let measurable = self
                .job_key_of(&wk)
                .and_then(|jk| self.jobs.get(&jk))
                .is_some_and(|j| j.ready.is_some());
            let e = self.workloads.get_mut(&wk).expect("present");
            if !measurable {
                tracing::warn!(workload = %wk, "Job reports no status.ready; pods-ready timeout not applied");
                e.pods_ready_seen = true;
                continue;
            }
            // The count comes from the API (anyone may write it): no overflow.
            let n = e
                .status
                .requeue_state
                .as_ref()
                .map_or(0, |r| r.count.max(0))
                .saturating_add(1);
            let over = self
                .config
                .requeue_limit
                .is_some_and(|limit| i64::from(n) > i64::from(limit));
            let uid = e.uid.clone();
            let mut msg = format!("Not all pods were ready within {}s of admission", timeout / 1000);
            if over {
                // Requeued as often as allowed: deactivated, as if its owner
                // had set spec.active to false (Kueue's RequeuingLimitExceeded).
                e.status.requeue_state = Some(RequeueState {
                    count: n,
                    requeue_at: None,
                });
                e.active = false;
                msg.push_str(&format!(
                    "; evicted {n} times, over the requeue limit of {}: deactivated (set spec.active to true to queue it again)",
                    self.config.requeue_limit.unwrap_or_default()
                ));
                self.deactivating.insert(uid.clone());
                self.plans.push(Plan {
                    purpose: Purpose::Deactivate { uid: uid.clone() },
                    steps: vec![Step::PatchWorkload {
                        key: wk.clone(),
                        patch: serde_json::json!({"spec": {"active": false}}),
                    }],
                });
            } else {
                let backoff = backoff_ms(self.config.backoff_base_ms, self.config.backoff_max_ms, n);
                e.status.requeue_state = Some(RequeueState {
                    count: n,
                    requeue_at: Some(time_of(now_ms.saturating_add(backoff))),
                });
            }
            if self.engine.evict(&uid).is_ok() {
                self.on_evicted(&uid, cond::reasons::PODS_READY_TIMEOUT, None, &msg, now_ms);
            }
        }
    }

    fn next_pods_ready_deadline(&self) -> Option<i64> {
        let timeout = self.config.pods_ready_timeout_ms?;
        self.workloads
            .values()
            .filter(|e| !e.pods_ready_seen && e.in_engine && e.owner.is_some())
            // Same rule as `tick`: only an admitted workload has a deadline
            // (a finished or evicting one would wake the loop at once, forever).
            .filter(|e| self.engine.workload_state(&e.uid) == Some(WorkloadState::Admitted))
            .filter_map(|e| e.admitted_at)
            .map(|t| t.saturating_add(timeout))
            .min()
    }

    fn on_admitted(&mut self, adm: &eng::Admission, now_ms: i64) {
        let Some(wk) = self.by_uid.get(&*adm.uid).cloned() else {
            return;
        };
        let e = self.workloads.get_mut(&wk).expect("indexed");
        self.prior.insert(adm.uid.to_string(), e.status.clone());
        let generation = e.generation;
        let msg = format!("Quota reserved in ClusterQueue {}", adm.cluster_queue);
        let c = &mut e.status.conditions;
        set_condition(
            c,
            cond::QUOTA_RESERVED,
            cond::status::TRUE,
            cond::reasons::QUOTA_RESERVED,
            &msg,
            now_ms,
            generation,
        );
        set_condition(
            c,
            cond::ADMITTED,
            cond::status::TRUE,
            cond::reasons::ADMITTED,
            "The workload is admitted",
            now_ms,
            generation,
        );
        for t in [cond::EVICTED, cond::PREEMPTED] {
            if let Some(x) = c.iter_mut().find(|x| x.type_ == t && x.status == cond::status::TRUE) {
                x.status = cond::status::FALSE.into();
                x.last_transition_time = time_of(now_ms);
                x.reason = cond::reasons::ADMITTED.into();
                x.message = "Admitted again".into();
            }
        }
        // Readiness of a previous admission does not carry over.
        if let Some(x) = c
            .iter_mut()
            .find(|x| x.type_ == cond::PODS_READY && x.status == cond::status::TRUE)
        {
            x.status = cond::status::FALSE.into();
            x.last_transition_time = time_of(now_ms);
            x.reason = cond::reasons::WAIT_FOR_START.into();
            x.message = "Admitted again; waiting for its pods".into();
        }
        e.status.admission = Some(adapter::admission_status(adm));
        e.status.pending = None;
        e.pending_fp = None;
        e.status.state = Some(e.status.derive_state(e.active));
        e.admitted_at = Some(now_ms);
        e.pods_ready_seen = false;
        let created = e.created_ms;
        self.stats
            .wait_seconds
            .push(((now_ms - created).max(0)) as f64 / 1000.0);
        self.stats.admitted += 1;
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        let mut steps = vec![Step::ApplyWorkloadStatus {
            key: wk.clone(),
            status: Box::new(status),
            seq,
            uid: wl_uid.clone(),
        }];
        if let Some(jk) = self.job_key_of(&wk) {
            let job_steps = self.start_job_steps(&jk, &adm.pod_sets);
            if !job_steps.is_empty() {
                self.starting.insert(jk);
            }
            steps.extend(job_steps);
        }
        let flavors: BTreeSet<&String> = adm.pod_sets.iter().flat_map(|p| p.flavors.values()).collect();
        let pods: u32 = adm.pod_sets.iter().map(|p| p.count).sum();
        let note = format!(
            "Admitted by ClusterQueue {}: {pods} pods on flavor(s) {}",
            adm.cluster_queue,
            flavors.into_iter().cloned().collect::<Vec<_>>().join(", ")
        );
        steps.extend(self.events(&wk, "Normal", "Admitted", "Admit", &note));
        self.plans.push(Plan {
            purpose: Purpose::Admit {
                uid: adm.uid.to_string(),
            },
            steps,
        });
    }

    fn on_evicted(&mut self, uid: &str, reason: &str, preempted: Option<&str>, message: &str, now_ms: i64) {
        let Some(wk) = self.by_uid.get(uid).cloned() else {
            return;
        };
        let e = self.workloads.get_mut(&wk).expect("indexed");
        // No pods-ready deadline while it is evicted (set again on admission).
        e.admitted_at = None;
        let generation = e.generation;
        set_condition(
            &mut e.status.conditions,
            cond::EVICTED,
            cond::status::TRUE,
            reason,
            message,
            now_ms,
            generation,
        );
        if let Some(p) = preempted {
            set_condition(
                &mut e.status.conditions,
                cond::PREEMPTED,
                cond::status::TRUE,
                p,
                message,
                now_ms,
                generation,
            );
        }
        e.status.state = Some(e.status.derive_state(e.active));
        let status = e.status.clone();
        let seq = e.next_seq();
        let wl_uid = e.uid.clone();
        self.evicting.insert(uid.to_string());
        self.stats.evicted.push(match reason {
            cond::reasons::PREEMPTED => cond::reasons::PREEMPTED,
            cond::reasons::PODS_READY_TIMEOUT => cond::reasons::PODS_READY_TIMEOUT,
            cond::reasons::DEACTIVATED => cond::reasons::DEACTIVATED,
            _ => "Other",
        });
        let mut steps = vec![Step::ApplyWorkloadStatus {
            key: wk.clone(),
            status: Box::new(status),
            seq,
            uid: wl_uid.clone(),
        }];
        if let Some(jk) = self.job_key_of(&wk)
            && self.jobs.contains_key(&jk)
        {
            self.suspending.insert(jk.clone());
            steps.push(Step::PatchJob {
                key: jk,
                patch: job::suspend_patch(),
            });
        }
        steps.extend(self.events(&wk, "Normal", reason, "Evict", message));
        self.plans.push(Plan {
            purpose: Purpose::Evict { uid: uid.to_string() },
            steps,
        });
    }

    fn on_pending(&mut self, uid: &str, expl: &Explanation, now_ms: i64) {
        let Some(wk) = self.by_uid.get(uid).cloned() else {
            return;
        };
        if !matches!(
            self.engine.workload_state(uid),
            Some(WorkloadState::Pending | WorkloadState::Preempting)
        ) {
            return;
        }
        let e = self.workloads.get_mut(&wk).expect("indexed");
        // Same reason (per flavor too) as what is written: nothing to write,
        // even if the numbers or the position moved (e.g. after a restart).
        let fp = explanation_fp(
            expl.reason_code(),
            expl.flavors
                .iter()
                .map(|f| (f.flavor.as_str(), verdict_reason(&f.verdict))),
        );
        if e.pending_fp == Some(fp) {
            return;
        }
        e.pending_fp = Some(fp);
        // The text is not kept here (15 000 pending workloads would hold
        // 15 000 copies of a few shared explanations): `take_explanations`
        // writes the engine's explanation as it is then.
        let generation = e.generation;
        set_condition(
            &mut e.status.conditions,
            cond::QUOTA_RESERVED,
            cond::status::FALSE,
            expl.reason_code(),
            "",
            now_ms,
            generation,
        );
        e.status.pending = None;
        e.status.state = Some(e.status.derive_state(e.active));
        self.explain.insert(uid.to_string());
    }

    /// The status to write for a pending workload: what the index keeps,
    /// with the engine's current explanation and position filled in.
    fn pending_status(&self, uid: &str, e: &WlEntry, now_ms: i64) -> WorkloadStatus {
        let mut status = e.status.clone();
        let Some(expl) = self.engine.explanation(uid) else {
            return status;
        };
        let pos = self.engine.position(uid);
        let full = expl.to_string();
        let position = pos
            .map(|p| {
                format!(
                    " (position {} in ClusterQueue, {} in LocalQueue)",
                    p.in_cluster_queue, p.in_local_queue
                )
            })
            .unwrap_or_default();
        // The condition says it all; `status.pending` has the summary, and
        // the per-flavor detail in its own list (not repeated).
        let summary = full.split("; pod set").next().unwrap_or(&full);
        status.pending = Some(pending_explanation(expl, &format!("{summary}{position}"), pos));
        // Kept as it is when already False (its transition time with it).
        let since = status
            .condition(cond::QUOTA_RESERVED)
            .filter(|c| c.status == cond::status::FALSE)
            .map(|c| ms(&c.last_transition_time))
            .unwrap_or(now_ms);
        set_condition(
            &mut status.conditions,
            cond::QUOTA_RESERVED,
            cond::status::FALSE,
            expl.reason_code(),
            &format!("{full}{position}"),
            since,
            e.generation,
        );
        status.state = Some(status.derive_state(e.active));
        status
    }

    /// Plans writing at most `max` changed explanations (the status as it
    /// is now; workloads no longer pending are skipped). The rest stay
    /// marked for later calls: memory and the write queue stay bounded,
    /// and the latest explanation is what gets written.
    pub fn take_explanations(&mut self, max: usize, now_ms: i64) -> Vec<Plan> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(uid) = self.explain.pop_first() else { break };
            if !matches!(
                self.engine.workload_state(&uid),
                Some(WorkloadState::Pending | WorkloadState::Preempting)
            ) {
                continue;
            }
            let Some(wk) = self.by_uid.get(&uid).cloned() else {
                continue;
            };
            let Some(e) = self.workloads.get(&wk) else { continue };
            let status = self.pending_status(&uid, e, now_ms);
            let seq = self.workloads.get_mut(&wk).expect("present").next_seq();
            let wl_uid = uid.clone();
            out.push(Plan {
                purpose: Purpose::Pending { uid },
                steps: vec![Step::ApplyWorkloadStatus {
                    key: wk,
                    status: Box::new(status),
                    seq,
                    uid: wl_uid.clone(),
                }],
            });
        }
        out
    }

    /// Explanations changed but not yet handed out.
    pub fn explanations_due(&self) -> usize {
        self.explain.len()
    }

    /// The status write of an admission failed: undo the admission in the
    /// engine (it waits again), and forget the optimistic status.
    pub fn admission_failed(&mut self, uid: &str, now_ms: i64) {
        let Some(wk) = self.by_uid.get(uid).cloned() else {
            return;
        };
        if self.engine.workload_state(uid) == Some(WorkloadState::Admitted) {
            let _ = self.engine.evict(uid);
            let _ = self.engine.eviction_complete(uid, now_ms);
        }
        let jk = self.job_key_of(&wk);
        if let Some(jk) = jk {
            self.starting.remove(&jk);
        }
        let e = self.workloads.get_mut(&wk).expect("indexed");
        e.admitted_at = None;
        if let Some(prior) = self.prior.remove(uid) {
            e.status = prior;
        }
        self.retry_soon = true;
    }

    /// The writer is done with a plan: for each of its status writes, the
    /// resourceVersion it produced (`acks`: step index and resourceVersion;
    /// none when the plan failed). Watch events older than the latest
    /// acknowledged write are ignored from then on.
    pub fn acknowledge(&mut self, plan: &Plan, acks: &[(usize, String)]) {
        for (i, step) in plan.steps.iter().enumerate() {
            let Step::ApplyWorkloadStatus { key, seq, .. } = step else {
                continue;
            };
            let Some(e) = self.workloads.get_mut(key) else { continue };
            if let Some(rv) = acks
                .iter()
                .find(|(k, _)| *k == i)
                .and_then(|(_, rv)| rv.parse::<u64>().ok())
            {
                e.written_rv = Some(e.written_rv.map_or(rv, |w| w.max(rv)));
            }
            if *seq == e.seq {
                e.awaiting = false;
            }
        }
    }

    /// A plan stopped at step `from` (the steps before it were made):
    /// forget that its effect is expected, so that it is tried again, and
    /// read back any Workload whose status write has no answer.
    pub fn plan_failed(&mut self, plan: &Plan, from: usize, now_ms: i64) {
        if let Purpose::Deactivate { uid } = &plan.purpose
            && self.deactivating.contains(uid)
        {
            // Not written: kept as deactivating (observed `spec.active:
            // true` is not a reactivation) and tried again next cycle.
            self.deactivate_retry.insert(uid.clone());
        }
        if let Purpose::PodsReady { uid } = &plan.purpose
            && let Some(wk) = self.by_uid.get(uid)
            && let Some(e) = self.workloads.get_mut(wk)
        {
            // Still known to be ready here; written again on the next event.
            e.pods_ready_unwritten = true;
        }
        if let Purpose::Pending { uid } = &plan.purpose {
            self.explanation_not_written(uid);
        }
        for (i, s) in plan.steps.iter().enumerate() {
            match s {
                Step::ApplyWorkload(wl) => {
                    if let Some(k) = key_of(wl.metadata.namespace.as_deref(), wl.metadata.name.as_deref()) {
                        self.creating.remove(&k);
                    }
                }
                Step::PatchJob { key, .. } => {
                    self.suspending.remove(key);
                    self.starting.remove(key);
                    // Looked at again next cycle (a Job start left undone
                    // after its admission was written has no event to wait for).
                    self.retry_jobs.insert(key.clone());
                }
                Step::ApplyWorkloadStatus { key, seq, .. } if i >= from => {
                    // Not made, or made without an answer (a timeout may
                    // still have landed): the index's status is a guess now.
                    // Read the Workload again and take it as it is.
                    if let Some(e) = self.workloads.get_mut(key)
                        && e.seq == *seq
                    {
                        e.awaiting = false;
                        self.refetch_workloads.insert(key.clone());
                    }
                }
                _ => {}
            }
        }
        let _ = now_ms;
    }

    /// A queued plan was replaced by a later one and will not be written.
    pub fn superseded(&mut self, plan: &Plan) {
        for s in &plan.steps {
            if let Step::ApplyWorkloadStatus { key, seq, .. } = s
                && let Some(e) = self.workloads.get_mut(key)
                && e.seq == *seq
            {
                e.awaiting = false;
            }
        }
        if let Purpose::Pending { uid } = &plan.purpose {
            self.explanation_not_written(uid);
        }
    }

    /// An explanation that was planned is not written: planned again.
    fn explanation_not_written(&mut self, uid: &str) {
        if let Some(wk) = self.by_uid.get(uid)
            && let Some(e) = self.workloads.get_mut(wk)
        {
            e.pending_fp = None;
            if matches!(
                self.engine.workload_state(uid),
                Some(WorkloadState::Pending | WorkloadState::Preempting)
            ) {
                self.explain.insert(uid.to_string());
            }
        }
    }

    /// Workloads to read again from the API (after a failed status write).
    pub fn take_workload_refetch(&mut self) -> Vec<ObjKey> {
        std::mem::take(&mut self.refetch_workloads).into_iter().collect()
    }

    /// A Workload read from the API on purpose: taken as it is, unless a
    /// newer status write of ours is still in flight.
    pub fn apply_fetched_workload(&mut self, wl: &Workload, now_ms: i64) {
        self.fetched = true;
        self.apply_workload(wl, now_ms);
        self.fetched = false;
    }
}

/// What decides whether a pending explanation is worth a write: its reason
/// and, per flavor (first mention), the flavor's reason; not the numbers,
/// the wording or the position.
fn explanation_fp<'a>(reason: &str, flavors: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the same explanation gives the same value in every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    reason.hash(&mut h);
    let mut seen: Vec<&str> = Vec::new();
    for (name, why) in flavors {
        if !seen.contains(&name) {
            seen.push(name);
            (name, why).hash(&mut h);
        }
    }
    h.finish()
}

/// Fields of an observed status that others own, taken even from an event
/// older than our latest write: the `Finished` condition a workload's owner
/// sets.
fn take_foreign(ours: &mut WorkloadStatus, observed: &WorkloadStatus) {
    if is_true(observed, cond::FINISHED)
        && !is_true(ours, cond::FINISHED)
        && let Some(c) = observed.condition(cond::FINISHED)
    {
        ours.conditions.retain(|x| x.type_ != cond::FINISHED);
        ours.conditions.push(c.clone());
    }
}

/// Keeps only the fingerprint of an observed pending explanation (and
/// blanks its condition message): the text is rebuilt from the engine when
/// it is written again.
fn slim_pending(e: &mut WlEntry) {
    e.pending_fp = e.status.pending.take().map(|p| {
        explanation_fp(
            &p.reason,
            p.flavors.iter().map(|f| (f.name.as_str(), f.reason.as_str())),
        )
    });
    if e.pending_fp.is_some()
        && let Some(c) = e
            .status
            .conditions
            .iter_mut()
            .find(|c| c.type_ == cond::QUOTA_RESERVED && c.status == cond::status::FALSE)
    {
        c.message = String::new();
    }
}

fn pending_explanation(expl: &Explanation, message: &str, pos: Option<eng::QueuePosition>) -> PendingExplanation {
    PendingExplanation {
        reason: expl.reason_code().to_string(),
        message: message.to_string(),
        flavors: expl
            .flavors
            .iter()
            .map(|f| FlavorPendingReason {
                name: f.flavor.clone(),
                reason: verdict_reason(&f.verdict).to_string(),
                message: format!("pod set {}: {}", f.pod_set, f.verdict),
                resources: Vec::new(),
            })
            .fold(Vec::new(), |mut acc: Vec<FlavorPendingReason>, f| {
                // The list is keyed by flavor name: one entry per flavor.
                match acc.iter_mut().find(|x| x.name == f.name) {
                    Some(x) => {
                        x.message.push_str("; ");
                        x.message.push_str(&f.message);
                    }
                    None => acc.push(f),
                }
                acc
            }),
        position_in_cluster_queue: pos.map(|p| p.in_cluster_queue as i32),
        position_in_local_queue: pos.map(|p| p.in_local_queue as i32),
    }
}

/// Whether a label selector selects these labels (empty selects all).
pub fn selects(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let have = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

fn verdict_reason(v: &eng::Verdict) -> &'static str {
    match v {
        eng::Verdict::FlavorNotFound => "FlavorNotFound",
        eng::Verdict::UntoleratedTaint { .. } => "UntoleratedTaint",
        eng::Verdict::NodeLabelMismatch { .. } => "NodeLabelMismatch",
        eng::Verdict::InsufficientQuota { .. } => "InsufficientQuota",
        eng::Verdict::ExceedsMaxQuota { .. } => "ExceedsMaxQuota",
        eng::Verdict::PreemptionNotPossible { .. } => "PreemptionNotPossible",
    }
}

#[cfg(test)]
mod tests;

/// `validate()`, then the adapter: the engine only ever sees objects that
/// pass both; the error is what the object's Warning Event and condition say.
fn admissible<T: Validate, S>(
    obj: &T,
    adapt: impl FnOnce(&T) -> Result<S, adapter::AdapterError>,
) -> Result<S, String> {
    obj.check().map_err(|e| e.to_string())?;
    adapt(obj).map_err(|e| e.to_string())
}
