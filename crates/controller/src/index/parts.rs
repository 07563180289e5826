//! The index's state, cut into the parts the rules own. Each part says
//! which modules change it; the others read it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use k8s_openapi::api::batch::v1::Job;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor, WorkloadStatus};
use sluice_kinds::job::JobView;

use super::entry::WlEntry;
use super::eviction::Confirmation;
use super::notice::Noticed;
use super::visibility::PendingSnapshot;
use super::{CycleStats, Kind, ObjectError, cohort};
use crate::plan::{JobRef, ObjKey, Plan};

/// Queue definitions and the other objects decisions read (`config`,
/// `cohort`, `errors`).
#[derive(Default)]
pub(super) struct Definitions {
    pub(super) flavors: BTreeMap<String, ResourceFlavor>,
    pub(super) cluster_queues: BTreeMap<String, ClusterQueue>,
    /// Cohort objects: the engine's and those it refused.
    pub(super) cohorts: cohort::Cohorts,
    pub(super) local_queues: BTreeMap<ObjKey, LocalQueue>,
    pub(super) workload_classes: BTreeMap<String, i32>,
    pub(super) pod_classes: BTreeMap<String, i32>,
    /// Namespace labels (for ClusterQueue namespaceSelectors).
    pub(super) namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Malformed or unusable objects.
    pub(super) errors: BTreeMap<(Kind, String), ObjectError>,
    /// Kinds listed.
    pub(super) synced: BTreeSet<Kind>,
}

/// The queued objects and multi-Job gangs (`jobs`, `gangs`; `referents`
/// and `classes` keep who waits for what).
#[derive(Default)]
pub(super) struct Queued {
    pub(super) jobs: BTreeMap<JobRef, JobView>,
    /// Objects whose full object is needed (to create their Workload) but not held.
    pub(super) refetch: BTreeSet<JobRef>,
    /// What queued objects read their pod sets from (a TrainJob's
    /// training runtimes), by kind and key, as observed.
    pub(super) referents: BTreeMap<(sluice_kinds::Resource, String), std::sync::Arc<serde_json::Value>>,
    /// The queued objects that read each of those (whether it exists
    /// yet or not): read again when it appears or changes.
    pub(super) readers: BTreeMap<(sluice_kinds::Resource, String), BTreeSet<JobRef>>,
    /// The queued objects that name a WorkloadPriorityClass not known
    /// yet, by its name: read again when it appears.
    pub(super) class_waiters: BTreeMap<String, BTreeSet<JobRef>>,
    /// Multi-Job gangs: (namespace, gang name) → its Jobs' names.
    pub(super) gangs: BTreeMap<ObjKey, BTreeSet<String>>,
    /// Gang members whose gang has no Workload yet, whole (slimmed): the
    /// Workload is made from all of them at once.
    pub(super) gang_jobs: BTreeMap<JobRef, Job>,
    /// Jobs that are members of a gang's Workload (with the uid it was
    /// made from) → that Workload.
    pub(super) member_of: BTreeMap<JobRef, ObjKey>,
    /// What a waiting gang's Jobs were last told.
    pub(super) gang_told: BTreeMap<ObjKey, String>,
    /// Gang Workloads being deleted (by uid).
    pub(super) retiring: BTreeSet<String>,
    /// Jobs were (re)listed: look for orphaned Workloads in the next cycle.
    pub(super) orphan_scan_due: bool,
}

/// Workloads, and what is derived from them (`workload`, `finish`,
/// `visibility`, `forecast`).
#[derive(Default)]
pub(super) struct WorkloadTable {
    /// Boxed: the entry is large and the map's nodes hold eleven each.
    pub(super) workloads: BTreeMap<ObjKey, Box<WlEntry>>,
    pub(super) by_uid: HashMap<String, ObjKey>,
    /// Admitted workloads whose ClusterQueue is unknown: kept out of the
    /// engine until it appears.
    pub(super) unrestored: BTreeSet<ObjKey>,
    /// Pending workloads held out of the engine: their namespace is not
    /// selected by their ClusterQueue.
    pub(super) not_selected: BTreeSet<ObjKey>,
    /// Status before an admission whose write is in flight (for rollback).
    pub(super) prior: HashMap<String, WorkloadStatus>,
    /// Per LocalQueue, its pending workloads as of the last refresh.
    pub(super) pending_snapshots: BTreeMap<ObjKey, PendingSnapshot>,
    /// Estimated admission time per pending workload (uid), last refresh.
    pub(super) estimates: HashMap<String, i64>,
    /// Run times of finished workloads per ClusterQueue (the last
    /// [`super::forecast::OBSERVED_RUNS`]), for expected run times.
    pub(super) run_times: HashMap<String, VecDeque<i64>>,
    /// `apply_workload` is taking a Workload read on purpose.
    pub(super) fetched: bool,
}

/// Writes in flight or done whose effect has not been observed yet, so
/// that repeated events do not repeat them (`jobs`, `eviction`,
/// `feedback`, `reshape`, `idle`).
#[derive(Default)]
pub(super) struct InFlight {
    pub(super) creating: BTreeSet<ObjKey>,
    pub(super) suspending: BTreeSet<JobRef>,
    pub(super) starting: BTreeSet<JobRef>,
    /// Workloads being evicted (checked for "pods gone" on every tick).
    pub(super) evicting: BTreeSet<String>,
    /// Evicted workloads whose Job's pods are being looked at (servers
    /// without `status.terminating`), by uid.
    pub(super) confirming: HashMap<String, Confirmation>,
    /// Workloads we deactivated whose `spec.active: false` is not observed yet.
    pub(super) deactivating: BTreeSet<String>,
    /// Deactivations whose `spec.active: false` patch failed: tried again.
    pub(super) deactivate_retry: BTreeSet<String>,
    /// Jobs to reconcile again next cycle (a Job patch failed).
    pub(super) retry_jobs: BTreeSet<JobRef>,
    /// Workloads to read again (a status write failed).
    pub(super) refetch_workloads: BTreeSet<ObjKey>,
    /// Workloads being evicted because their objects grew (by uid): made
    /// again, not requeued, once their pods are gone.
    pub(super) reshaping: BTreeSet<String>,
    /// Workloads preempted with a notice that still run, by uid
    /// (`notice`): evicted at the deadline or when they acknowledge.
    pub(super) noticed: HashMap<String, Noticed>,
    /// Whether notices left from before this index were looked at
    /// (`notice::withdraw_stale_notices`, once).
    pub(super) notices_checked: bool,
}

/// Plans for the writer and the budgets that bound them (`cycle`,
/// `explain`, `finish`, `feedback`).
pub(super) struct Outbox {
    /// Plans produced by event handlers, drained by [`super::Index::take_plans`].
    pub(super) plans: Vec<Plan>,
    pub(super) stats: CycleStats,
    pub(super) retry_soon: bool,
    /// Decisions the next cycle may make ([`super::Index::set_cycle_budget`]).
    pub(super) cycle_budget: usize,
    /// Workloads whose explanation changed and is not written yet.
    pub(super) explain: BTreeSet<String>,
    /// Explanation writes handed out and not yet answered or superseded:
    /// at most `explanations_per_cycle`, so the write queue stays bounded.
    pub(super) explain_out: usize,
    /// Finished workloads whose `status.state` write is due, and those
    /// handed out and not yet answered or superseded.
    pub(super) states_due: usize,
    pub(super) states_out: usize,
    /// When the ledger is next checked against the Workload statuses.
    pub(super) next_drift_check_ms: i64,
}

impl Default for Outbox {
    fn default() -> Self {
        Self {
            plans: Vec::new(),
            stats: CycleStats::default(),
            retry_soon: false,
            cycle_budget: usize::MAX,
            explain: BTreeSet::new(),
            explain_out: 0,
            states_due: 0,
            states_out: 0,
            next_drift_check_ms: 0,
        }
    }
}
