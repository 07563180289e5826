//! The [`Engine`]: its state, public API and the admission cycle, one rule
//! per module.
//!
//! ```text
//!   config.rs      flavors, ClusterQueues, LocalQueues (upserts and removals)
//!   lifecycle.rs   workloads: add, restore, finish, evict, remove
//!   queries.rs     read-only views: state, explanation, position, usage
//!   cycle.rs       schedule(): timers, claims, one pass per cohort domain
//!   candidate.rs   one candidate of a pass: admitted, given victims, reduced or parked
//!   order.rs       the merge of queue heads; nominal quota before borrowing
//!   tournament.rs  the fair-sharing order: a tournament over the cohort tree
//!   fifo.rs        StrictFIFO: what blocks a queue
//!   stop.rs        stop policies: Hold and HoldAndDrain
//!   flavor.rs      flavor assignment per (pod set, resource group)
//!   preemption/    victims: policy eligibility, victim order, minimal sets
//!   overlay.rs     what-if usage for preemption and eviction checks
//!   partial.rs     partial admission: fewer pods, down to min_count
//!   admit.rs       applying decisions to the ledger (admit, claim, evict, release)
//!   explain.rs     why a workload waits, shared per (queue, shape)
//!   queue.rs       putting workloads into queues and waking queues
//!   cohort.rs      cohort trees and their pools
//!   share.rs       fair sharing: weighted dominant shares
//!   consistency.rs the ledger's self-check (tests)
//!   contention.rs  who waits for an admitted workload's quota (idle reclaim)
//!   placement/     nodes: inventory, the placement rule, reservations
//!   state.rs       the internal types
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use crate::decision::TopologyDomain;
use crate::decision::{
    Admission, Cycle, Eviction, EvictionReason, Explanation, FlavorVerdict, NeverOnNodes, PendingReason,
    PodSetAssignment, Preemption, PreemptionReason, Verdict,
};
use crate::ledger::{self, Fit, FlavorId, FrKey, Pool, ResId, Slot};
use crate::model::{
    Amount, BorrowWithinCohort, BoundPods, ClusterQueueSpec, CohortSpec, EngineConfig, FairShareStrategies,
    FairSharing, FlavorSpec, LocalQueueSpec, Millis, NodeSpec, NodeUsage, PlacementMode, QueueingStrategy,
    ReclaimWithinCohort, RequeueOrder, StopPolicy, Taint, TaintEffect, Toleration, Weight, WithinClusterQueue,
    WorkloadSpec,
};

mod admit;
mod candidate;
mod cohort;
mod config;
mod consistency;
mod contention;
mod cycle;
mod explain;
mod fifo;
mod flavor;
mod foreign;
mod lifecycle;
mod order;
mod overlay;
mod partial;
mod placement;
mod preemption;
mod queries;
mod queue;
mod share;
mod shrink;
mod state;
mod stop;
mod tournament;

use fifo::Blocked;
use flavor::{AssignError, Attempt, Choice, FlavorOption};
use order::{HeadMerge, Merge};
use overlay::Overlay;
use placement::{ClaimPlacement, NodeDelta, NodeId, Placement, ResVec, Unplaced};
use preemption::PreemptOutcome;
pub use queries::{QueuePosition, QueueUsage, ResourceUsage, WorkloadState};
pub use share::FairShare;
use share::{ShareKey, ShareView};
use state::*;
use tournament::Tournament;

pub(crate) type CqId = usize;
pub(crate) type CohortId = usize;
pub(crate) type WlId = usize;

/// Errors from lifecycle calls. The engine's state is unchanged when one is
/// returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("workload {0} is already known to the engine")]
    DuplicateWorkload(String),
    #[error("workload {0} is not known to the engine")]
    UnknownWorkload(String),
    #[error("workload {uid} is {state}, not {expected}")]
    WrongState {
        uid: String,
        state: &'static str,
        expected: &'static str,
    },
    #[error("workload {uid}: pod set {pod_set}: count must be at least 1")]
    EmptyPodSet { uid: String, pod_set: String },
    #[error("workload {uid}: pod set {pod_set}: request for {resource} is negative")]
    NegativeRequest {
        uid: String,
        pod_set: String,
        resource: String,
    },
    #[error("workload {uid}: pod set {pod_set}: {resource} total overflows")]
    Overflow {
        uid: String,
        pod_set: String,
        resource: String,
    },
    #[error("cluster queue {0} does not exist")]
    UnknownClusterQueue(String),
    #[error("workload {uid}: admission names pod set {pod_set}, which the workload does not have")]
    UnknownPodSet { uid: String, pod_set: String },
    #[error("workload {uid}: pod set {pod_set} requests {resource} but the admission assigns it no flavor")]
    UnassignedResource {
        uid: String,
        pod_set: String,
        resource: String,
    },
    #[error("cohort {cohort}: parent chain {path} leads back to itself")]
    CohortCycle { cohort: String, path: String },
}

/// The admission engine. See the crate documentation for the algorithm.
///
/// `Clone` makes a deep, independent copy (what [`Engine::forecast`] runs
/// forward); only immutable data behind `Arc`s is shared.
#[derive(Clone)]
pub struct Engine {
    config: EngineConfig,
    resources: Interner,
    flavor_names: Interner,
    flavors: FastMap<FlavorId, FlavorSpec>,
    cqs: Vec<Cq>,
    cq_by_name: HashMap<Arc<str>, CqId>,
    cohorts: Vec<Cohort>,
    cohort_by_name: HashMap<String, CohortId>,
    lqs: HashMap<Arc<str>, LocalQueueSpec>,
    wls: Vec<Option<Wl>>,
    free_ids: Vec<WlId>,
    by_uid: HashMap<Arc<str>, WlId>,
    /// Pending workloads whose LocalQueue or ClusterQueue is missing.
    unresolved: BTreeSet<WlId>,
    /// Queues with fresh or woken workloads.
    dirty: BTreeSet<CqId>,
    /// Decisions the cycle in progress may still make
    /// ([`Engine::schedule_within`]).
    budget: usize,
    /// After a cycle cut short by its budget: the next cycle starts with
    /// the domains after this queue, so that every domain gets its turn.
    resume_after: Option<CqId>,
    timers: BTreeSet<(Millis, Timer)>,
    preempting: BTreeSet<OrderKey>,
    shapes: HashMap<ShapeKey, u32>,
    /// Decisions made outside a cycle (drains, explanations of unresolved
    /// workloads), reported by the next cycle.
    buffered_evictions: Vec<Eviction>,
    buffered_notes: BTreeSet<WlId>,
    /// Workloads admitted by the cycle in progress, with their index in its
    /// output, and the indices of admissions withdrawn in the same cycle.
    admitted_now: FastMap<WlId, usize>,
    withdrawn: Vec<usize>,
    /// LocalQueues with a stop policy (most clusters have none: fast path).
    stopped_local_queues: usize,
    /// Why parked workloads of a (queue, shape) wait.
    shape_expl: FastMap<(CqId, u32), Arc<Explanation>>,
    /// Admissions already built, per (queue, shape) and flavor choice:
    /// workloads of one shape admitted to the same flavors share one.
    /// Cleared whenever a queue or flavor changes.
    assignments: FastMap<(CqId, u32), Vec<(Choice, SharedAssignment)>>,
    /// Shared explanations for the common per-workload reasons, so that
    /// re-explaining is a pointer comparison.
    blocked_expl: Arc<Explanation>,
    held_expl: [Arc<Explanation>; 2],
    /// Admissions another controller made ([`Engine::hold_foreign`]).
    foreign: BTreeSet<WlId>,
    /// Nodes, for [`PlacementMode::Nodes`].
    inv: placement::Inventory,
    /// The `pods` resource (one per pod on a node).
    pods_res: ResId,
}

/// An admission's pod set assignments, shared rather than copied.
type SharedAssignment = Arc<[PodSetAssignment]>;

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    pub fn new() -> Self {
        Self::with_config(EngineConfig::default())
    }

    pub fn with_config(config: EngineConfig) -> Self {
        let mut resources = Interner::default();
        let pods_res = resources.intern("pods");
        Self {
            config,
            resources,
            flavor_names: Interner::default(),
            flavors: FastMap::default(),
            cqs: Vec::new(),
            cq_by_name: HashMap::new(),
            cohorts: Vec::new(),
            cohort_by_name: HashMap::new(),
            lqs: HashMap::new(),
            wls: Vec::new(),
            free_ids: Vec::new(),
            by_uid: HashMap::new(),
            unresolved: BTreeSet::new(),
            dirty: BTreeSet::new(),
            budget: usize::MAX,
            resume_after: None,
            timers: BTreeSet::new(),
            preempting: BTreeSet::new(),
            shapes: HashMap::new(),
            buffered_evictions: Vec::new(),
            buffered_notes: BTreeSet::new(),
            admitted_now: FastMap::default(),
            withdrawn: Vec::new(),
            stopped_local_queues: 0,
            shape_expl: FastMap::default(),
            assignments: FastMap::default(),
            blocked_expl: Arc::new(Explanation::new(PendingReason::BlockedByHead)),
            held_expl: [
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: false })),
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: true })),
            ],
            foreign: BTreeSet::new(),
            inv: placement::Inventory::default(),
            pods_res,
        }
    }

    fn id_of(&self, uid: &str) -> Result<WlId, EngineError> {
        self.by_uid
            .get(uid)
            .copied()
            .ok_or_else(|| EngineError::UnknownWorkload(uid.to_string()))
    }

    fn wl(&self, id: WlId) -> &Wl {
        self.wls[id].as_ref().expect("live workload")
    }

    fn wl_mut(&mut self, id: WlId) -> &mut Wl {
        self.wls[id].as_mut().expect("live workload")
    }
}
