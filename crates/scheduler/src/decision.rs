//! What a cycle decides: admissions, preemptions, evictions and why the rest
//! waits. Structure only: the words users read are built from it elsewhere
//! (`sluice_convert::text`), once for the controller and the simulator.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{Amount, Millis};

/// Everything one call to [`Engine::schedule`](crate::Engine::schedule) decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cycle {
    /// Workloads admitted now, in admission order.
    pub admitted: Vec<Admission>,
    /// Victims chosen now. Each keeps its quota until
    /// [`Engine::eviction_complete`](crate::Engine::eviction_complete).
    pub preempted: Vec<Preemption>,
    /// Workloads evicted by a stop policy (same completion call as victims).
    pub evicted: Vec<Eviction>,
    /// Pending workloads whose reason for waiting changed (or was first set).
    /// Numbers inside a reason (free quota, deficit) refreshing do not count
    /// as a change, so a controller can write status only for these.
    pub pending_changed: Vec<(Arc<str>, Arc<Explanation>)>,
    /// Reservations whose start moved later than their head was told (by
    /// a minute or more, or to unknown): the head's explanation carries
    /// the new start, and its status is worth a write even though its
    /// reason (`Reserved`) did not change.
    pub moved: Vec<ReservationMoved>,
    /// When the engine next wants a cycle even if nothing happens
    /// (a preemption protection or a requeue backoff expiring).
    pub next_wakeup: Option<Millis>,
}

impl Cycle {
    /// Nothing was decided.
    pub fn is_empty(&self) -> bool {
        self.admitted.is_empty()
            && self.preempted.is_empty()
            && self.evicted.is_empty()
            && self.pending_changed.is_empty()
            && self.moved.is_empty()
    }
}

/// A workload admitted into a ClusterQueue with flavors chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    pub uid: Arc<str>,
    pub cluster_queue: Arc<str>,
    /// Shared with the engine's record (and with other workloads of the
    /// same shape admitted to the same flavors): cloning is a pointer copy.
    pub pod_sets: Arc<[PodSetAssignment]>,
    /// Whether the admission uses quota borrowed from the cohort.
    pub borrowing: bool,
    /// Admitted behind a reservation it does not delay (backfill).
    pub backfill: Option<Backfilled>,
}

/// When a reservation is expected to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReservedStart {
    /// At this time, when admitted work with declared run times has ended.
    At(Millis),
    /// Once admitted work that declared no run time ends: unknown.
    AfterUndeclared,
}

/// With node placement, the nodes a reservation's pods go on at its start,
/// by flavor (and topology domain, for a pod set that needs one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservedNodes {
    pub flavor: String,
    pub nodes: u32,
    pub domain: Option<TopologyDomain>,
}

/// Why a workload behind a reservation was admitted anyway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backfilled {
    /// The `namespace/name` of the workload holding the reservation.
    pub reserved_for: Arc<str>,
    pub start: ReservedStart,
    /// `true`: its declared run time ends before the reservation starts;
    /// `false`: the reservation fits beside it.
    pub ends_before: bool,
    /// How much later the reservation starts because of it (within its
    /// queue's max delay); 0: not at all.
    pub delay: Millis,
    /// The ClusterQueue holding the reservation.
    pub queue: Arc<str>,
    /// With `ends_before`: when its declared run time ends (admission +
    /// run time), past which it may be evicted while it holds the
    /// reservation off.
    pub due: Option<Millis>,
}

/// A reservation that starts later than its head was told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationMoved {
    /// The head holding the reservation.
    pub uid: Arc<str>,
    /// The start it was told, and the start now.
    pub from: ReservedStart,
    pub to: ReservedStart,
    /// Workloads (`namespace/name`) that went ahead of it this cycle:
    /// admitted or reserving ahead of it in queue order (higher priority,
    /// or queued earlier), admitted in another queue within its nominal
    /// quota, or let ahead within `backfill.maxDelayMinutes`. None:
    /// admitted work ran past its declared run time, or quota or nodes
    /// changed.
    pub ahead: Vec<Arc<str>>,
}

/// The flavors and usage of one pod set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSetAssignment {
    pub name: String,
    pub count: u32,
    /// Resource name to flavor name.
    pub flavors: BTreeMap<String, String>,
    /// Resource name to total usage (count × per-pod request), milli-units.
    pub usage: BTreeMap<String, Amount>,
    /// The topology domain all its pods must run in, when the pod set
    /// requires one (the controller pins the pods to it).
    pub topology: Option<TopologyDomain>,
}

/// A topology domain: the nodes whose label `key` has value `value`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopologyDomain {
    pub key: String,
    pub value: String,
}

/// Why a victim is preempted (Kueue's reason vocabulary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreemptionReason {
    /// By a higher-priority workload of the same ClusterQueue.
    InClusterQueue,
    /// Its queue borrowed quota that the preemptor's queue reclaims.
    InCohortReclamation,
    /// The preemptor borrows, and preempts lower-priority work to do so.
    InCohortReclaimWhileBorrowing,
    /// Its queue is above its fair share, and stays at least as far above
    /// it as the preemptor's queue will be (fair sharing).
    InCohortFairSharing,
}

impl PreemptionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InClusterQueue => "InClusterQueue",
            Self::InCohortReclamation => "InCohortReclamation",
            Self::InCohortReclaimWhileBorrowing => "InCohortReclaimWhileBorrowing",
            Self::InCohortFairSharing => "InCohortFairSharing",
        }
    }
}

/// A victim of preemption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preemption {
    pub victim: Arc<str>,
    /// The preemptor's UID and name.
    pub preemptor: Arc<str>,
    pub preemptor_name: Arc<str>,
    /// The ClusterQueue the preemptor is admitted to.
    pub preemptor_cluster_queue: Arc<str>,
    pub reason: PreemptionReason,
    /// Both priorities: a preemption within a queue under
    /// `LowerOrNewerEqualPriority` may be between equals.
    pub preemptor_priority: i32,
    pub victim_priority: i32,
}

/// Why an admitted workload is evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvictionReason {
    /// Its ClusterQueue's stop policy is HoldAndDrain.
    ClusterQueueStopped,
    /// Its LocalQueue's stop policy is HoldAndDrain.
    LocalQueueStopped,
    /// Its pods were not all ready in time (decided by the controller).
    PodsReadyTimeout,
    /// Deactivated or otherwise evicted by the caller.
    Deactivated,
    /// Admitted ahead of a reservation because its declared run time
    /// ended before the reservation's start, it ran past that run time
    /// and now keeps the reservation's head from fitting.
    BackfillOverrun,
}

impl EvictionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterQueueStopped => "ClusterQueueStopped",
            Self::LocalQueueStopped => "LocalQueueStopped",
            Self::PodsReadyTimeout => "PodsReadyTimeout",
            Self::Deactivated => "Deactivated",
            Self::BackfillOverrun => "BackfillOverrun",
        }
    }
}

/// An eviction decided by the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    pub uid: Arc<str>,
    pub reason: EvictionReason,
    /// The queue whose stop policy evicts it: a ClusterQueue's name, or a
    /// LocalQueue's `namespace/name`; for a backfill overrun, the
    /// `namespace/name` of the workload holding the reservation.
    pub queue: Arc<str>,
}

/// Why a pending workload is not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    pub reason: PendingReason,
    /// Per pod set and flavor, why that flavor was not used (for
    /// [`PendingReason::NoFit`] and [`PendingReason::NeverFits`]).
    pub flavors: Vec<FlavorVerdict>,
}

/// The coarse reason a workload waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingReason {
    /// Not yet considered by a cycle.
    Queued,
    LocalQueueMissing {
        local_queue: String,
    },
    ClusterQueueMissing {
        cluster_queue: String,
    },
    /// The ClusterQueue or LocalQueue has a stop policy.
    Held {
        by_local_queue: bool,
    },
    /// A requested resource is in none of the ClusterQueue's resource groups.
    ResourceNotCovered {
        pod_set: String,
        resource: String,
    },
    /// Some flavor could hold it, but not now; per-flavor detail in `flavors`.
    NoFit,
    /// No flavor could ever hold it with this queue's quota and cohort.
    NeverFits,
    /// StrictFIFO: an earlier workload of the queue does not fit yet.
    BlockedByHead,
    /// Victims are being evicted to make room for it.
    WaitingForPreemption {
        victims: usize,
    },
    /// Quota is being freed by evictions already under way.
    WaitingForEvictions,
    /// It fits quota, but its pods fit on no set of nodes now; per-pod-set
    /// detail in `flavors`.
    NoPlacement,
    /// No node of any flavor it may use could hold a pod set, even with
    /// nothing else running ([`Verdict::NeverOnNodes`] per flavor): more
    /// quota or waiting does not help; other nodes would.
    NeverPlaceable,
    /// Requeued after an eviction; not considered before this time.
    Backoff {
        until: Millis,
    },
    /// The first workload of its queue that does not fit: the quota it
    /// needs is reserved from `start`, and later workloads are admitted
    /// meanwhile only where they do not delay that (backfill).
    Reserved {
        start: ReservedStart,
        /// Workloads admitted behind it since it reserved.
        backfilled: u32,
        /// With node placement: the nodes its pods go on at `start`.
        nodes: Vec<ReservedNodes>,
    },
    /// It fits now, but admitting it would delay the reservation of an
    /// earlier workload (`namespace/name`) past `start`.
    WouldDelayReservation {
        reserved_for: String,
        start: ReservedStart,
        /// Its own declared run time, if any.
        declared: Option<Millis>,
    },
    /// The ClusterQueue's budget reached its `Stop` action: nothing new
    /// is admitted until the period moves on.
    BudgetSpent(Box<BudgetSpent>),
    /// Its declared run time × what it would hold of the budget's resource
    /// is more than is left before the budget stops the queue.
    BudgetWouldOverrun(Box<BudgetOverrun>),
}

/// What a stopped budget spent ([`PendingReason::BudgetSpent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetSpent {
    pub resource: String,
    pub flavor: Option<String>,
    /// Milli-units × ms spent, and the spending at which it stops.
    pub spent: i128,
    pub stop_at: i128,
    pub period: String,
}

/// Why a declared run time does not fit the budget
/// ([`PendingReason::BudgetWouldOverrun`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetOverrun {
    pub resource: String,
    /// Milli-units of the resource it would hold.
    pub held: Amount,
    pub runtime: Millis,
    /// Milli-units × ms left before `Stop`.
    pub left: i128,
    pub period: String,
}

/// One flavor's verdict for one pod set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavorVerdict {
    pub pod_set: String,
    pub flavor: String,
    pub verdict: Verdict,
}

/// Why a flavor did not take a pod set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The ClusterQueue names a flavor that does not exist.
    FlavorNotFound,
    /// A taint of the flavor's nodes that the pod set does not tolerate.
    UntoleratedTaint { taint: String },
    /// The pod set's node selector contradicts the flavor's node labels.
    NodeLabelMismatch {
        key: String,
        wanted: String,
        flavor_has: String,
    },
    /// Not enough quota now.
    InsufficientQuota {
        resource: String,
        /// What it needs; with a minimum count, what its minimum needs.
        needed: Amount,
        /// With a minimum count: what it needs with all its pods.
        up_to: Option<Amount>,
        /// Free within the queue's own nominal quota.
        free_nominal: Amount,
        nominal: Amount,
        /// Obtainable by borrowing from the cohort now.
        borrowable: Amount,
    },
    /// More than the queue could ever get (nominal + borrowing, cohort size).
    ExceedsMaxQuota {
        resource: String,
        /// What it needs; with a minimum count, what its minimum needs.
        needed: Amount,
        /// With a minimum count: what it needs with all its pods.
        up_to: Option<Amount>,
        max: Amount,
    },
    /// It would fit by preempting, but no allowed set of victims exists.
    PreemptionNotPossible { protected: usize },
    /// Quota is there, but the pods do not fit on the flavor's nodes.
    NoNodeFits {
        /// The pod's largest request relative to the nodes (usually the GPU).
        resource: String,
        per_pod: Amount,
        pods: u32,
        /// How many of them fit on the nodes at once.
        placeable: u32,
        /// Free quota of `resource` (within nominal, plus borrowable) and the
        /// nominal quota, for the message.
        quota_free: Amount,
        nominal: Amount,
        /// Nodes the pod set may use (labels, selector, taints, schedulable).
        nodes: usize,
        /// The most of `resource` free on one node, and that node.
        largest_free: Amount,
        largest_node: Option<String>,
        /// The topology key when the pod set must fit in one domain.
        topology: Option<String>,
    },
    /// No node of the flavor could ever hold the pod set.
    NeverOnNodes(Box<NeverOnNodes>),
    /// The flavor's nodes share each GPU among `replicas`, and the pod set
    /// asks for whole GPUs (its node selector names no sharing label).
    SharedGpusOnly { replicas: u32 },
    /// The pod set asks for a replica of a shared GPU and the flavor's
    /// nodes give whole GPUs.
    WholeGpusOnly,
}

/// Why no node of a flavor could ever hold a pod set: with nothing else
/// running on them, its nodes (those the pod set's selector, tolerations
/// and the flavor's labels allow, cordoned ones included) take fewer of
/// its pods than it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeverOnNodes {
    /// The pod's largest request relative to the nodes (usually the GPU).
    pub resource: String,
    pub per_pod: Amount,
    pub pods: u32,
    /// How many of its pods those nodes would take, empty.
    pub placeable: u32,
    pub nodes: usize,
    /// The most of `resource` one of those nodes has allocatable, and it.
    pub largest: Amount,
    pub largest_node: Option<String>,
    /// The topology key when the pod set must fit in one domain.
    pub topology: Option<String>,
}

impl Verdict {
    fn same_kind(&self, other: &Verdict) -> bool {
        match (self, other) {
            (Verdict::InsufficientQuota { resource: a, .. }, Verdict::InsufficientQuota { resource: b, .. }) => a == b,
            (Verdict::ExceedsMaxQuota { resource: a, .. }, Verdict::ExceedsMaxQuota { resource: b, .. }) => a == b,
            (Verdict::PreemptionNotPossible { .. }, Verdict::PreemptionNotPossible { .. }) => true,
            (Verdict::NoNodeFits { resource: a, .. }, Verdict::NoNodeFits { resource: b, .. }) => a == b,
            (Verdict::NeverOnNodes(a), Verdict::NeverOnNodes(b)) => a.resource == b.resource,
            (a, b) => a == b,
        }
    }
}

impl Explanation {
    pub(crate) fn new(reason: PendingReason) -> Self {
        Self {
            reason,
            flavors: Vec::new(),
        }
    }

    /// Whether two explanations give the same reason, ignoring the numbers
    /// that move with every admission (free quota, deficits, victim counts).
    pub fn same_reason(&self, other: &Explanation) -> bool {
        let reasons_match = match (&self.reason, &other.reason) {
            (PendingReason::WaitingForPreemption { .. }, PendingReason::WaitingForPreemption { .. }) => true,
            (PendingReason::BudgetSpent(_), PendingReason::BudgetSpent(_)) => true,
            (PendingReason::BudgetWouldOverrun(_), PendingReason::BudgetWouldOverrun(_)) => true,
            (a, b) => a == b,
        };
        reasons_match
            && self.flavors.len() == other.flavors.len()
            && self
                .flavors
                .iter()
                .zip(&other.flavors)
                .all(|(a, b)| a.pod_set == b.pod_set && a.flavor == b.flavor && a.verdict.same_kind(&b.verdict))
    }

    /// A short machine-friendly reason, for conditions.
    pub fn reason_code(&self) -> &'static str {
        match self.reason {
            PendingReason::Queued => "Queued",
            PendingReason::LocalQueueMissing { .. } => "LocalQueueMissing",
            PendingReason::ClusterQueueMissing { .. } => "ClusterQueueMissing",
            PendingReason::Held { .. } => "Held",
            PendingReason::ResourceNotCovered { .. } => "ResourceNotCovered",
            PendingReason::NoFit => "InsufficientQuota",
            PendingReason::NeverFits => "ExceedsQuota",
            PendingReason::BlockedByHead => "BlockedByHead",
            PendingReason::WaitingForPreemption { .. } => "WaitingForPreemption",
            PendingReason::WaitingForEvictions => "WaitingForEvictions",
            PendingReason::NoPlacement => "NoPlacement",
            PendingReason::NeverPlaceable => "NeverPlaceable",
            PendingReason::Backoff { .. } => "Backoff",
            PendingReason::Reserved { .. } => "Reserved",
            PendingReason::WouldDelayReservation { .. } => "WouldDelayReservation",
            PendingReason::BudgetSpent(_) => "BudgetSpent",
            PendingReason::BudgetWouldOverrun(_) => "BudgetWouldOverrun",
        }
    }
}
