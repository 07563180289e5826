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
//! the caller) and skipped. A ClusterQueue or Cohort that turns invalid
//! keeps its last valid version in the engine, so admitted work is not
//! disturbed.
//!
//! ## Where each rule lives
//! - `config`: ResourceFlavors, queues, priority classes, Namespaces;
//!   why a queue cannot admit; its counts;
//! - `cohort`: Cohort objects (a cohort tree's parents, quota and
//!   weights), refused ones kept aside and tried again;
//! - `workload`: Workload events, restart restore, adoption, deletion;
//! - `jobs`: Job events and the level-triggered Job ↔ Workload
//!   reconcile (create, suspend, start, finish, orphans);
//! - `gangs`: multi-Job gangs: membership, their Workload made once
//!   whole, and retired when a member goes;
//! - `eviction`: evictions, pods-gone confirmation, pods-ready timeouts
//!   and the requeue backoff;
//! - `cycle`: running the engine, admissions, the drift check;
//! - `explain`: pending explanations, fingerprinted and written in
//!   bounded batches;
//! - `feedback`: what the writer reports back (acks, failures,
//!   rollback, read-backs);
//! - `status`: decision → Workload status (conditions, reason,
//!   message), pure functions;
//! - `errors`: malformed and unusable objects;
//! - `placement`: Nodes and bound pods, summed for the engine's placement;
//! - `usage`: usage over time charged, budgets governed, records flushed
//!   into queue statuses and restored from them;
//! - `backstop`: the ResourceQuota of admitted GPUs in each namespace
//!   that queues every object;
//! - `escaped`: GPU pods seen running outside the queue there;
//! - `podgroups`: pods the webhook gated (servers with scheduling gates),
//!   a Workload per pod or pod group.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::v1alpha1::WorkloadStatus;
use sluice_scheduler::{self as eng, Engine};

use crate::plan::{ObjKey, Plan};
use sluice_kinds::JobKind;

mod accounting;
mod backstop;
mod classes;
mod cohort;
mod config;
mod cycle;
mod default_queue;
mod entry;
mod errors;
mod escaped;
mod eviction;
mod explain;
mod feedback;
mod finish;
mod forecast;
mod foreign;
mod gangs;
mod idle;
mod jobs;
mod notice;
mod parts;
mod placement;
mod podgroups;
mod referents;
mod reshape;
mod status;
mod usage;
mod visibility;
mod workload;

pub use errors::IndexError;
pub use eviction::backoff_ms;
pub use forecast::ForecastJob;
pub use idle::{IdleApplied, IdleOutcome, IdleTarget};
pub use placement::PodEntry;
pub use status::set_condition;
pub use visibility::PendingSnapshot;

use entry::{GangEntry, WlEntry};
use parts::{Definitions, InFlight, Outbox, Queued, WorkloadTable};
use status::time_of;

/// Every kind a queued kind reads pod sets from, once each.
pub fn referent_kinds() -> impl Iterator<Item = sluice_kinds::Resource> {
    let mut all: Vec<sluice_kinds::Resource> = JobKind::ALL
        .into_iter()
        .flat_map(|k| k.referent_kinds().iter().copied())
        .collect();
    all.sort();
    all.dedup();
    all.into_iter()
}

/// Kinds the index must have listed before it admits anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    ResourceFlavor,
    Cohort,
    ClusterQueue,
    LocalQueue,
    WorkloadPriorityClass,
    PriorityClass,
    Namespace,
    /// Kueue's Workloads (`kueue.x-k8s.io`), for the quota they hold.
    KueueWorkload,
    Workload,
    /// Objects of a kind Sluice queues (`sluice_kinds`).
    Queued(JobKind),
    /// Objects a queued kind reads its pod sets from (a TrainJob's
    /// training runtimes, [`JobKind::referent_kinds`]).
    Referent(sluice_kinds::Resource),
    Node,
    Pod,
    /// Pods the webhook gated (servers with pod scheduling gates).
    GatedPod,
}

impl Kind {
    /// batch/v1 Jobs.
    pub const JOB: Kind = Kind::Queued(JobKind::Job);

    /// Every kind, in the order a new leader's index is built in
    /// (configuration, then the quota Kueue holds, then Workloads, then the
    /// objects queued, then nodes and their pods).
    pub fn all() -> impl Iterator<Item = Kind> {
        [
            Kind::ResourceFlavor,
            Kind::Cohort,
            Kind::ClusterQueue,
            Kind::LocalQueue,
            Kind::WorkloadPriorityClass,
            Kind::PriorityClass,
            Kind::Namespace,
            Kind::KueueWorkload,
            Kind::Workload,
        ]
        .into_iter()
        .chain(referent_kinds().map(Kind::Referent))
        .chain(JobKind::ALL.into_iter().map(Kind::Queued))
        .chain([Kind::Node, Kind::Pod, Kind::GatedPod])
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ResourceFlavor => "ResourceFlavor",
            Kind::Cohort => "Cohort",
            Kind::ClusterQueue => "ClusterQueue",
            Kind::LocalQueue => "LocalQueue",
            Kind::WorkloadPriorityClass => "WorkloadPriorityClass",
            Kind::PriorityClass => "PriorityClass",
            Kind::Namespace => "Namespace",
            Kind::KueueWorkload => "KueueWorkload",
            Kind::Workload => "Workload",
            Kind::Queued(k) => k.kind(),
            Kind::Referent(r) => r.kind,
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::GatedPod => "GatedPod",
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
    /// No pending explanation is written for a workload created less than
    /// this long ago (`--explain-after`).
    pub explain_after_ms: i64,
    /// The kinds queued besides batch/v1 Jobs (`--integrations`): their
    /// objects are watched and must be listed before anything is admitted.
    pub integrations: BTreeSet<JobKind>,
    /// What admission requires (`--placement`); with
    /// [`eng::PlacementMode::Nodes`] Nodes and bound pods are watched.
    pub placement: eng::PlacementMode,
    /// Fair sharing in cohorts (`--fair-sharing`,
    /// `--fair-sharing-strategies`).
    pub fair_sharing: eng::FairSharing,
    /// The API version of Kueue's Workloads, when the quota they hold is
    /// counted (`--kueue-usage=count`, Kueue's CRDs served, no
    /// `--kueue-compat`): they are watched.
    pub kueue_workloads: Option<String>,
    /// How often usage over time is flushed into queue statuses
    /// (`--usage-flush-interval`): what a restart may lose at most.
    pub usage_flush_ms: i64,
    /// Half-life of the decayed usage fair sharing weighs
    /// (`--usage-half-life`); `None`: fair sharing counts current
    /// borrowing only.
    pub usage_half_life_ms: Option<i64>,
    /// Keep a ResourceQuota of the admitted GPUs in each namespace that
    /// queues every object (`--gpu-quota-backstop`, `backstop`).
    pub gpu_quota_backstop: bool,
    /// Delete a GPU pod that runs outside the queue where every GPU is
    /// queued this long after it is first seen (`--unqueued-gpu-pod-grace`,
    /// `escaped`); `None`: report it only.
    pub unqueued_pod_grace_ms: Option<i64>,
    /// The server has pod scheduling gates (read at start): the pods the
    /// webhook gates are watched and queued (`podgroups`).
    pub pod_gates: bool,
    /// Resource transformations (`--resource-transformations`).
    pub transformations: Vec<eng::Transformation>,
}

impl IndexConfig {
    /// Whether objects of `kind` are watched: the kinds of
    /// [`IndexConfig::integrations`], Nodes and Pods with
    /// [`IndexConfig::placement`], and every other kind.
    pub fn watches(&self, kind: Kind) -> bool {
        match kind.queued() {
            Some(k) => self.integrations.contains(&k),
            None if matches!(kind, Kind::Node | Kind::Pod) => self.placement == eng::PlacementMode::Nodes,
            None if kind == Kind::GatedPod => self.pod_gates,
            None if kind == Kind::KueueWorkload => self.kueue_workloads.is_some(),
            None => match kind {
                Kind::Referent(r) => self.integrations.iter().any(|k| k.referent_kinds().contains(&r)),
                _ => true,
            },
        }
    }
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
            explain_after_ms: 0,
            integrations: BTreeSet::from([JobKind::Job]),
            placement: eng::PlacementMode::QuotaOnly,
            fair_sharing: eng::FairSharing::default(),
            kueue_workloads: None,
            usage_flush_ms: 60_000,
            usage_half_life_ms: None,
            gpu_quota_backstop: true,
            unqueued_pod_grace_ms: None,
            pod_gates: false,
            transformations: Vec::new(),
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
    /// Workloads newly reported running more pods than admitted.
    pub pods_over_admission: usize,
    /// GPU pods newly reported running outside the queue where every GPU
    /// is queued (`escaped`).
    pub unqueued_gpu_pods: usize,
}

/// The index. See the module documentation. Its state is cut into the
/// parts the rules own (`parts.rs`).
pub struct Index {
    config: IndexConfig,
    engine: Engine,
    /// Queue definitions and the other objects decisions read.
    defs: Definitions,
    /// The queued objects and gangs.
    queued: Queued,
    /// Workloads and what is derived from them.
    table: WorkloadTable,
    /// Writes whose effect has not been observed yet.
    inflight: InFlight,
    /// Plans for the writer, the write budget, and what the next cycle
    /// reports.
    outbox: Outbox,
    /// Bound pods summed per node and per owner (placement only).
    placement: placement::Placement,
    /// Workloads seen running more pods than admitted.
    pods_over: accounting::OverAdmission,
    /// The quota Kueue's admissions hold (a switch-over).
    kueue: foreign::KueueUsage,
    /// The last idle-GPU check's health (`None`: none ran yet).
    idle_health: Option<idle::IdleHealth>,
    /// Usage over time, budgets, and what was last flushed.
    usage: usage::Usage,
    /// The GPU quota backstop of namespaces that queue every object.
    backstop: backstop::Backstop,
    /// GPU pods seen running outside the queue there.
    escaped: escaped::Escaped,
    /// Pods the webhook gated, and their groups.
    pod_groups: podgroups::PodGroups,
}

fn ms(t: &Time) -> i64 {
    t.0.as_millisecond()
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
        let mut engine = Engine::with_config(eng::EngineConfig {
            placement: config.placement,
            fair_sharing: config.fair_sharing,
            metering: true,
            ..Default::default()
        });
        if let Err(e) = engine.set_transformations(&config.transformations) {
            // Checked when the flag was read: this engine is new, so only
            // a list the flag's check let through could be refused here.
            tracing::error!(error = %e, "resource transformations not applied");
        }
        let usage = usage::Usage::new(config.usage_flush_ms, config.usage_half_life_ms);
        let backstop = backstop::Backstop::new(config.gpu_quota_backstop);
        let escaped = escaped::Escaped::new(config.unqueued_pod_grace_ms);
        Self {
            config,
            engine,
            defs: Definitions::default(),
            queued: Queued::default(),
            table: WorkloadTable::default(),
            inflight: InFlight::default(),
            outbox: Outbox::default(),
            placement: placement::Placement::default(),
            pods_over: Default::default(),
            kueue: foreign::KueueUsage::default(),
            idle_health: None,
            usage,
            backstop,
            escaped,
            pod_groups: Default::default(),
        }
    }

    // ----- queries ---------------------------------------------------------------

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Malformed or unusable objects, by (kind, key).
    pub fn errors(&self) -> &BTreeMap<(Kind, String), ObjectError> {
        &self.defs.errors
    }

    /// Every kind listed and the ledger rebuilt from it.
    pub fn is_ready(&self) -> bool {
        Kind::all()
            .filter(|k| self.watches(*k))
            .all(|k| self.defs.synced.contains(&k))
    }

    /// Whether objects of `kind` are watched (the kinds of
    /// [`IndexConfig::integrations`] and every kind that is not a queued
    /// object).
    pub fn watches(&self, kind: Kind) -> bool {
        self.config.watches(kind)
    }

    /// The key of the workload with this uid.
    pub fn workload_key(&self, uid: &str) -> Option<&ObjKey> {
        self.table.by_uid.get(uid)
    }

    /// The status the index believes a workload has.
    pub fn workload_status(&self, key: &ObjKey) -> Option<&WorkloadStatus> {
        self.table.workloads.get(key).map(|e| &e.written.status)
    }

    /// Admitted workloads kept out of the engine until their ClusterQueue appears.
    pub fn unrestored(&self) -> usize {
        self.table.unrestored.len()
    }

    /// Counts of the last cycle(s) since the last call, for metrics.
    pub fn take_stats(&mut self) -> CycleStats {
        std::mem::take(&mut self.outbox.stats)
    }

    /// Plans produced by event handlers since the last call.
    pub fn take_plans(&mut self) -> Vec<Plan> {
        std::mem::take(&mut self.outbox.plans)
    }

    /// How many decisions to write (admissions, preemptions, evictions)
    /// the next cycle may make; the engine leaves the rest for the cycles
    /// after it ([`sluice_scheduler::Engine::schedule_within`]). No limit
    /// unless set.
    pub fn set_cycle_budget(&mut self, decisions: usize) {
        self.outbox.cycle_budget = decisions;
    }

    /// Whether a cycle should run soon even without new events (an
    /// admission was rolled back and waits to be retried).
    pub fn wants_cycle(&self) -> bool {
        self.outbox.retry_soon || !self.outbox.plans.is_empty()
    }

    /// A kind finished its initial list.
    pub fn mark_synced(&mut self, kind: Kind) {
        let was_ready = self.is_ready();
        self.defs.synced.insert(kind);
        if kind == Kind::JOB {
            // Workloads listed before the Jobs: orphans are finished by
            // the first cycle (before it admits anything).
            self.queued.orphan_scan_due = true;
        }
        if !was_ready && self.is_ready() {
            let errors: Vec<_> = self
                .defs
                .errors
                .iter()
                .map(|((k, key), e)| (*k, key.clone(), e.clone()))
                .collect();
            for (k, key, e) in errors {
                self.report(k, &key, &e);
            }
        }
    }
}

#[cfg(test)]
mod tests;
