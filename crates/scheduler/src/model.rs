//! The engine's input types: what the adapter (CRDs) or the simulator (trace
//! files) hands to the [`Engine`](crate::Engine). They are plain data, owned,
//! and know nothing of Kubernetes.

use std::collections::BTreeMap;

/// Time, in milliseconds. The engine never reads a clock: callers pass `now`.
pub type Millis = i64;

/// An amount of a resource in milli-units (`cpu: 500m` is 500, `nvidia.com/gpu: 8`
/// is 8000, `memory: 1Ki` is 1 024 000).
pub type Amount = i64;

/// A node taint that a flavor's nodes carry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: TaintEffect,
}

/// The effect of a taint or toleration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// A toleration of a pod set (or of a flavor, which injects it).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    pub key: Option<String>,
    pub operator: TolerationOperator,
    pub value: Option<String>,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

/// How a toleration matches a taint's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TolerationOperator {
    Exists,
    Equal,
}

impl Toleration {
    /// Kubernetes' rule: keys equal (or the toleration's key empty with
    /// `Exists`), effects equal (or the toleration's effect empty), and for
    /// `Equal` the values equal.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect
            && effect != taint.effect
        {
            return false;
        }
        match (&self.key, self.operator) {
            (None, TolerationOperator::Exists) => true,
            (None, TolerationOperator::Equal) => false,
            (Some(key), op) => {
                if *key != taint.key {
                    return false;
                }
                match op {
                    TolerationOperator::Exists => true,
                    TolerationOperator::Equal => {
                        self.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
                    }
                }
            }
        }
    }
}

/// A ResourceFlavor: a kind of node (GPU model, MIG profile, pool).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlavorSpec {
    pub name: String,
    /// Labels every node of the flavor carries; a pod set whose node selector
    /// contradicts them cannot use the flavor.
    pub node_labels: BTreeMap<String, String>,
    /// Taints of the flavor's nodes; a pod set must tolerate the
    /// `NoSchedule`/`NoExecute` ones (its own tolerations or the flavor's).
    pub taints: Vec<Taint>,
    /// Tolerations injected into admitted pods.
    pub tolerations: Vec<Toleration>,
    /// Node label whose values are the flavor's topology domains (a rack,
    /// block or NVLink domain). Pod sets that require one domain are placed
    /// within a single value of it.
    pub topology_key: Option<String>,
    /// Which GPU requests may use the flavor's nodes when they share each
    /// GPU ([`crate::sharing`]).
    pub shared_gpu_requests: SharedGpuRequests,
}

/// Which pod sets a flavor whose nodes share their GPUs (time-slicing or
/// MPS: each device advertised as several) takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SharedGpuRequests {
    /// Only pod sets that ask for a shared GPU: their node selector names
    /// the sharing label ([`crate::sharing::asks_for_shared_gpu`]). A pod
    /// set that asks for a whole GPU is never put on a replica of one.
    #[default]
    Marked,
    /// Any pod set: each GPU it asks for is one replica.
    All,
}

/// What a [`Transformation`] does with its input resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransformStrategy {
    /// Quota is also charged for the input resource (Kueue's default).
    #[default]
    Retain,
    /// Quota is charged for the outputs only; nodes still need the input.
    Replace,
}

/// An exact factor: `num / den` engine units of an output per engine unit
/// of the input (both positive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub num: Amount,
    pub den: Amount,
}

/// A resource transformation (Kueue's `resources.transformations`): every
/// request of `input` also counts, for quota, fair sharing and budgets, as
/// the outputs times their factors (a MIG slice as a seventh of a
/// GPU-equivalent and 10Gi of GPU memory). Nodes are always checked
/// against what pods really request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transformation {
    pub input: String,
    pub strategy: TransformStrategy,
    /// Output resource and its amount per unit of input.
    pub outputs: Vec<(String, Ratio)>,
}

/// How a ClusterQueue orders its pending workloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueingStrategy {
    /// The head blocks the queue until it is admitted.
    StrictFifo,
    /// A head that does not fit lets later workloads that fit pass it.
    #[default]
    BestEffortFifo,
}

/// Whether a queue admits new work and keeps what it admitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StopPolicy {
    #[default]
    None,
    /// Admit nothing new; admitted work keeps running.
    Hold,
    /// Admit nothing new and evict what is admitted.
    HoldAndDrain,
}

/// Whether the first workload of a queue that does not fit holds a
/// reservation that later workloads may not delay (EASY backfill,
/// [`crate::Engine`]'s `backfill` rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backfill {
    /// Any later workload that fits is admitted (Kueue's BestEffortFIFO).
    #[default]
    None,
    /// The queue's first workload that does not fit reserves the quota it
    /// needs from the time it is expected to fit; a later workload is
    /// admitted only if the reservation's start would not move.
    Reserve,
}

/// Preemption among the workloads of one ClusterQueue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    /// Lower priority, or equal priority and newer in queue order.
    LowerOrNewerEqualPriority,
}

/// Taking back quota that other queues of the cohort borrowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReclaimWithinCohort {
    #[default]
    Never,
    LowerPriority,
    Any,
}

/// Preempting in other queues of the cohort in order to borrow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BorrowWithinCohort {
    #[default]
    Never,
    /// Preempt lower-priority workloads of other queues whose priority is
    /// at most `max_priority_threshold` (no bound when `None`).
    LowerPriority { max_priority_threshold: Option<i32> },
}

/// Which of the victims the policies allow go first, within a tier of
/// equal priority (and equally borrowing queue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VictimOrderPolicy {
    /// The most recently admitted first (Kueue's order).
    #[default]
    Newest,
    /// The least work lost first: the share of the contested resources a
    /// victim holds times how long it has run since its latest admission.
    LeastWorkLost,
}

/// A ClusterQueue's preemption policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreemptionPolicy {
    pub within_cluster_queue: WithinClusterQueue,
    pub reclaim_within_cohort: ReclaimWithinCohort,
    pub borrow_within_cohort: BorrowWithinCohort,
    /// The order of victims within a tier.
    pub victim_order: VictimOrderPolicy,
    /// A workload this engine preempted less than this long ago goes after
    /// every other candidate of its tier. `None`: no such grace.
    pub recently_preempted_grace: Option<Millis>,
}

impl PreemptionPolicy {
    pub(crate) fn can_preempt(&self) -> bool {
        self.within_cluster_queue != WithinClusterQueue::Never
            || self.reclaim_within_cohort != ReclaimWithinCohort::Never
            || self.borrow_within_cohort != BorrowWithinCohort::Never
    }
}

/// Quota of one resource in one flavor of a ClusterQueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceQuotaSpec {
    pub resource: String,
    pub nominal: Amount,
    /// How much more than `nominal` the queue may borrow from its cohort;
    /// `None` means no limit beyond what the cohort can lend.
    pub borrowing_limit: Option<Amount>,
    /// How much of `nominal` the queue lends to its cohort; `None` means all.
    pub lending_limit: Option<Amount>,
}

/// One flavor's quotas within a resource group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavorQuotaSpec {
    pub flavor: String,
    pub resources: Vec<ResourceQuotaSpec>,
}

/// Resources that are assigned together from one flavor (e.g. cpu + memory,
/// or `nvidia.com/gpu`), with flavors in order of preference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceGroupSpec {
    pub covered_resources: Vec<String>,
    pub flavors: Vec<FlavorQuotaSpec>,
}

/// A ClusterQueue: a pool of quota with its policies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterQueueSpec {
    pub name: String,
    pub cohort: Option<String>,
    pub strategy: QueueingStrategy,
    pub resource_groups: Vec<ResourceGroupSpec>,
    pub preemption: PreemptionPolicy,
    /// Admitted workloads younger than this are never preempted.
    pub min_runtime: Millis,
    pub stop_policy: StopPolicy,
    /// Its weight in fair sharing (`fairSharing.weight`).
    pub fair_weight: Weight,
    /// Whether its first workload that does not fit reserves quota.
    pub backfill: Backfill,
    /// How much later than first told a reservation may start because of
    /// workloads admitted ahead of it; 0: not at all.
    pub backfill_max_delay: Millis,
    /// How many of its first workloads that do not fit hold a reservation
    /// (at least 1).
    pub backfill_depth: u32,
}

/// A fair-sharing weight in milli-units: `Weight(1000)` is weight 1, the
/// default. A queue (or cohort) with weight 0 that borrows has an infinite
/// share: it is served last and preempted first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Weight(pub Amount);

impl Default for Weight {
    fn default() -> Self {
        Weight(1000)
    }
}

/// A Cohort object: a node of a cohort tree. ClusterQueues name their
/// cohort; a cohort names its parent. A cohort no object describes exists
/// implicitly (no parent, no quota of its own, weight 1) while queues or
/// cohorts name it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CohortSpec {
    pub name: String,
    pub parent: Option<String>,
    /// Quota of the cohort itself, which every queue below may borrow.
    /// `borrowing_limit` bounds what the cohort's subtree takes from its
    /// parent, `lending_limit` what it lends to the rest of the tree.
    pub resource_groups: Vec<ResourceGroupSpec>,
    pub fair_weight: Weight,
}

/// A LocalQueue: the namespaced name users submit to, pointing at a ClusterQueue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalQueueSpec {
    /// `namespace/name`.
    pub key: String,
    pub cluster_queue: String,
    pub stop_policy: StopPolicy,
}

/// A group of identical pods of a workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSetSpec {
    pub name: String,
    pub count: u32,
    /// Requests of one pod, in milli-units.
    pub requests: BTreeMap<String, Amount>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    /// All pods on nodes of one topology domain of the flavor.
    pub require_single_domain: bool,
    /// Partial admission: the pod set may be admitted with fewer pods, the
    /// most from `count` down to `min_count` that fit.
    pub min_count: Option<u32>,
}

/// A unit of admission: all its pod sets are admitted together or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Unique and stable (the Workload's UID).
    pub uid: String,
    /// `namespace/name`, for messages.
    pub name: String,
    /// `namespace/name` of the LocalQueue.
    pub local_queue: String,
    pub priority: i32,
    /// Position in queue order among equal priorities (creation time).
    pub queue_order_time: Millis,
    pub pod_sets: Vec<PodSetSpec>,
    /// How long it runs once admitted, as its owner declared it (the
    /// `sluice.dev/expected-runtime` annotation, a Job's
    /// `activeDeadlineSeconds`); `None`: unbounded. Only backfill reads it.
    pub expected_runtime: Option<Millis>,
}

/// Where a requeued workload goes among workloads of equal priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RequeueOrder {
    /// Behind everything already waiting: its queue-order time becomes the
    /// time its eviction completed (Kueue's default).
    #[default]
    EvictionTime,
    /// Keep its original place.
    CreationTime,
}

/// Whether admission also requires the pods to fit on nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlacementMode {
    /// Quota alone decides (no node inventory is read).
    #[default]
    QuotaOnly,
    /// A workload is admitted only if every pod fits on some node of its
    /// flavors at once ([`Engine::upsert_node`](crate::Engine::upsert_node)).
    Nodes,
}

/// How queues of a cohort tree share what they borrow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairSharing {
    /// Borrowing goes to queues in global priority order, and preemption
    /// across queues follows `reclaimWithinCohort`/`borrowWithinCohort`
    /// alone.
    Off,
    /// Borrowers are served lowest weighted share first, and preemption
    /// across queues also obeys the share strategies, tried in order.
    On { strategies: FairShareStrategies },
}

impl Default for FairSharing {
    fn default() -> Self {
        FairSharing::On {
            strategies: FairShareStrategies::default(),
        }
    }
}

/// The fair-share preemption strategies, in the order they are tried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FairShareStrategies {
    /// `LessThanOrEqualToFinalShare`, then `LessThanInitialShare`.
    #[default]
    Both,
    /// Preempt only if the preemptor's queue, with the preemptor, has at
    /// most the share the victim's queue has without the victim.
    LessThanOrEqualToFinalShare,
    /// Preempt only if the preemptor's queue, with the preemptor, has less
    /// than the share the victim's queue has now.
    LessThanInitialShare,
}

/// Engine-wide settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineConfig {
    pub requeue_order: RequeueOrder,
    pub placement: PlacementMode,
    pub fair_sharing: FairSharing,
    /// Record every change of held quota for the driver to meter over
    /// time ([`crate::Engine::take_usage_changes`]).
    pub metering: bool,
}

/// What a ClusterQueue's budget does once spent to a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BudgetAction {
    /// Told (condition, Event); admission is unchanged.
    Warn,
    /// Its workloads come after every other queue's of its cohort, and it
    /// may not borrow.
    Deprioritize,
    /// Nothing new is admitted; admitted work runs on.
    Stop,
}

/// A ClusterQueue's budget as the engine obeys it: the driver measures
/// spending ([`crate::usage::spending`]) and gives the standing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetStanding {
    /// The last action reached; `None`: within budget.
    pub action: Option<BudgetAction>,
    pub resource: String,
    /// The one flavor the budget counts; `None`: all.
    pub flavor: Option<String>,
    /// Milli-units × ms spent in the period.
    pub spent: i128,
    /// Milli-units × ms the period allows.
    pub limit: i128,
    /// Spending at which `Stop` applies, if the budget stops.
    pub stop_at: Option<i128>,
    /// The period, for explanations (`7d calendar`).
    pub period: String,
}

/// A node, as far as placement needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable per resource, milli-units. `pods` (when present) limits
    /// the number of pods; any other resource a node does not list is 0.
    pub allocatable: BTreeMap<String, Amount>,
    /// False for a cordoned or NotReady node: nothing new is placed on it.
    pub schedulable: bool,
}

/// What the pods bound to a node request (every non-terminal pod,
/// terminating ones included, Sluice's own too).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Sum of the bound pods' requests, with `pods` their number × 1000.
    pub requested: BTreeMap<String, Amount>,
    /// The part of `requested` held by pods that are terminating: gone soon.
    pub terminating: BTreeMap<String, Amount>,
}

/// A workload's pods bound to one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundPods {
    pub node: String,
    pub pods: u32,
    /// Sum of their requests.
    pub requested: BTreeMap<String, Amount>,
}
