//! The engine's state, cut into the parts the rules own. Each part is
//! changed by the rules named on it; the others read it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::fast_map::FastMap;
use super::flavor::Choice;
use super::state::{Cohort, Cq, Interner, OrderKey, ShapeKey, Timer, Wl};
use super::{CohortId, CqId, SharedAssignment, WlId};
use crate::decision::{Eviction, Explanation, PendingReason};
use crate::ledger::{FlavorId, ResId};
use crate::model::{EngineConfig, FlavorSpec, LocalQueueSpec, Millis};

/// Names and definitions: what `config.rs` upserts.
#[derive(Clone)]
pub(super) struct Catalog {
    pub(super) config: EngineConfig,
    pub(super) resources: Interner,
    pub(super) flavor_names: Interner,
    pub(super) flavors: FastMap<FlavorId, FlavorSpec>,
    /// The `pods` resource (one per pod on a node).
    pub(super) pods_res: ResId,
    /// Resource transformations (`charge.rs`).
    pub(super) transforms: super::charge::Transforms,
    /// The resources sharing nodes replicate ([`crate::sharing::SHARED_RESOURCES`]).
    pub(super) shared_resources: Vec<ResId>,
}

/// ClusterQueues (quota ledgers and pending queues), cohorts and
/// LocalQueues.
#[derive(Clone, Default)]
pub(super) struct Queues {
    pub(super) cqs: Vec<Cq>,
    pub(super) cq_by_name: HashMap<Arc<str>, CqId>,
    pub(super) cohorts: Vec<Cohort>,
    pub(super) cohort_by_name: HashMap<String, CohortId>,
    pub(super) lqs: HashMap<Arc<str>, LocalQueueSpec>,
    /// LocalQueues with a stop policy (most clusters have none: fast path).
    pub(super) stopped_local_queues: usize,
}

/// The workload table: what `lifecycle.rs` adds, restores and removes.
#[derive(Clone, Default)]
pub(super) struct Workloads {
    pub(super) wls: Vec<Option<Wl>>,
    pub(super) free_ids: Vec<WlId>,
    pub(super) by_uid: HashMap<Arc<str>, WlId>,
    /// Pending workloads whose LocalQueue or ClusterQueue is missing.
    pub(super) unresolved: BTreeSet<WlId>,
    /// Interned pod set shapes.
    pub(super) shapes: HashMap<ShapeKey, u32>,
    /// Admissions another controller made ([`super::Engine::hold_foreign`]).
    pub(super) foreign: BTreeSet<WlId>,
    /// The arrival of the next workload given to the engine
    /// ([`super::state::Wl::arrival`]).
    pub(super) next_arrival: u64,
}

/// The cycle in progress, and what it has to report.
#[derive(Clone)]
pub(super) struct Turn {
    /// Queues with fresh or woken workloads.
    pub(super) dirty: BTreeSet<CqId>,
    /// Decisions the cycle in progress may still make
    /// ([`super::Engine::schedule_within`]).
    pub(super) budget: usize,
    /// After a cycle cut short by its budget: the next cycle starts with
    /// the domains after this queue, so that every domain gets its turn.
    pub(super) resume_after: Option<CqId>,
    /// Decisions made outside a cycle (drains, explanations of unresolved
    /// workloads), reported by the next cycle.
    pub(super) buffered_evictions: Vec<Eviction>,
    pub(super) buffered_notes: BTreeSet<WlId>,
    /// Workloads admitted by the cycle in progress, with their index in its
    /// output, and the indices of admissions withdrawn in the same cycle.
    pub(super) admitted_now: FastMap<WlId, usize>,
    pub(super) withdrawn: Vec<usize>,
}

impl Default for Turn {
    fn default() -> Self {
        Self {
            dirty: BTreeSet::new(),
            budget: usize::MAX,
            resume_after: None,
            buffered_evictions: Vec::new(),
            buffered_notes: BTreeSet::new(),
            admitted_now: FastMap::default(),
            withdrawn: Vec::new(),
        }
    }
}

/// Timers (backoff, minimum runtimes) and the preemption claims that hold
/// capacity for their preemptors.
#[derive(Clone, Default)]
pub(super) struct Claims {
    pub(super) timers: BTreeSet<(Millis, Timer)>,
    pub(super) preempting: BTreeSet<OrderKey>,
}

/// What is shared rather than computed again.
#[derive(Clone)]
pub(super) struct Memo {
    /// Why parked workloads of a (queue, shape) wait.
    pub(super) shape_expl: FastMap<(CqId, u32), Arc<Explanation>>,
    /// Admissions already built, per (queue, shape) and flavor choice:
    /// workloads of one shape admitted to the same flavors share one.
    /// Cleared whenever a queue or flavor changes.
    pub(super) assignments: FastMap<(CqId, u32), Vec<(Choice, SharedAssignment)>>,
    /// Shared explanations for the common per-workload reasons, so that
    /// re-explaining is a pointer comparison.
    pub(super) blocked_expl: Arc<Explanation>,
    pub(super) held_expl: [Arc<Explanation>; 2],
}

impl Default for Memo {
    fn default() -> Self {
        Self {
            shape_expl: FastMap::default(),
            assignments: FastMap::default(),
            blocked_expl: Arc::new(Explanation::new(PendingReason::BlockedByHead)),
            held_expl: [
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: false })),
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: true })),
            ],
        }
    }
}
