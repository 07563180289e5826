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
//!   charge.rs      what a pod set is charged: transformations, shared GPUs
//!   preemption/    victims: policy eligibility, victim order, minimal sets
//!   overlay.rs     what-if usage for preemption and eviction checks
//!   partial.rs     partial admission: fewer pods, down to min_count
//!   backfill/      reservations for queue heads; what may go ahead of them
//!   metering.rs    changes of held quota, for the driver to accrue over time
//!   budget.rs      budget standings (stop, last in order, no borrowing) and usage history
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

use std::sync::Arc;

use crate::decision::PodSetAssignment;
use crate::model::EngineConfig;

mod admit;
mod backfill;
mod budget;
mod candidate;
mod charge;
mod cohort;
mod config;
mod consistency;
mod contention;
mod cycle;
mod explain;
mod fast_map;
mod fifo;
mod flavor;
mod foreign;
mod lifecycle;
mod metering;
mod order;
mod overlay;
mod partial;
mod parts;
mod placement;
mod preemption;
mod queries;
mod queue;
mod share;
mod shrink;
mod state;
mod stop;
mod tournament;

use fast_map::FastMap;
pub use metering::UsageChange;
use parts::{Catalog, Claims, Memo, Queues, Turn, Workloads};
pub use queries::{QueuePosition, QueueUsage, ResourceUsage, WorkloadState};
pub use share::FairShare;
use state::{Interner, Wl};

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
    #[error("resource transformation of {input}: {why}")]
    BadTransformation { input: String, why: String },
}

/// The admission engine. See the crate documentation for the algorithm.
///
/// `Clone` makes a deep, independent copy (what [`Engine::forecast`] runs
/// forward); only immutable data behind `Arc`s is shared.
#[derive(Clone)]
pub struct Engine {
    /// Names and definitions: the engine's config, interned resources and
    /// flavors (changed by `config.rs`).
    catalog: Catalog,
    /// ClusterQueues with their quota ledgers and pending queues, cohorts,
    /// LocalQueues (defined by `config.rs` and `cohort.rs`; usage changed by
    /// `admit.rs`, queues by `queue.rs`).
    queues: Queues,
    /// The workload table (changed by `lifecycle.rs`).
    workloads: Workloads,
    /// The cycle in progress and what it reports (changed by `cycle.rs`
    /// and `admit.rs`).
    turn: Turn,
    /// Timers and preemption claims (changed by `cycle.rs`, `admit.rs`).
    claims: Claims,
    /// Explanations and admissions shared per (queue, shape) (changed by
    /// `explain.rs`, `admit.rs`, cleared by `config.rs`).
    memo: Memo,
    /// Nodes, for [`PlacementMode::Nodes`] (changed by `placement/`).
    inv: placement::Inventory,
    /// Quota reserved for the heads of queues with backfill on (changed
    /// by `backfill.rs`).
    reservations: backfill::Reservations,
    /// Usage changes for the driver to meter (changed by `metering.rs`).
    journal: metering::Journal,
    /// Budget standings and usage histories the driver gives per queue
    /// (changed by `budget.rs`).
    budgets: budget::Budgets,
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
        let shared_resources = crate::sharing::SHARED_RESOURCES.map(|r| resources.intern(r)).to_vec();
        Self {
            catalog: Catalog {
                config,
                resources,
                flavor_names: Interner::default(),
                flavors: FastMap::default(),
                pods_res,
                transforms: charge::Transforms::default(),
                shared_resources,
            },
            queues: Queues::default(),
            workloads: Workloads::default(),
            turn: Turn::default(),
            claims: Claims::default(),
            memo: Memo::default(),
            inv: placement::Inventory::default(),
            reservations: backfill::Reservations::default(),
            journal: metering::Journal::default(),
            budgets: budget::Budgets::default(),
        }
    }

    fn id_of(&self, uid: &str) -> Result<WlId, EngineError> {
        self.workloads
            .by_uid
            .get(uid)
            .copied()
            .ok_or_else(|| EngineError::UnknownWorkload(uid.to_string()))
    }

    fn wl(&self, id: WlId) -> &Wl {
        self.workloads.wls[id].as_ref().expect("live workload")
    }

    fn wl_mut(&mut self, id: WlId) -> &mut Wl {
        self.workloads.wls[id].as_mut().expect("live workload")
    }
}
