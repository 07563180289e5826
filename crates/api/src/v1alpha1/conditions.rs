//! Condition types and reasons, in Kueue's vocabulary where it fits.
//!
//! Conditions use the standard `metav1.Condition` shape (type, status,
//! reason, message, lastTransitionTime, observedGeneration). Reasons are
//! CamelCase identifiers; messages are for humans.
//!
//! Workload lifecycle, as the controller writes it:
//!
//! ```text
//!  created ──▶ QuotaReserved=True ──▶ Admitted=True ──▶ PodsReady=True ──▶ Finished=True
//!                    │                      │
//!                    └──── Evicted=True ◀───┘  (Preempted=True when the cause was preemption)
//!                              │
//!                              ▼
//!                    Requeued=True, QuotaReserved=False ──▶ waits again
//! ```

/// Workload condition: quota is reserved in a ClusterQueue.
pub const QUOTA_RESERVED: &str = "QuotaReserved";
/// Workload condition: admitted; its Job is unsuspended with the flavors'
/// node selectors and tolerations.
pub const ADMITTED: &str = "Admitted";
/// Workload condition: evicted (suspended and quota released or being
/// released); `reason` says why.
pub const EVICTED: &str = "Evicted";
/// Workload condition: preempted by another workload; `reason` says where the
/// preemptor came from.
pub const PREEMPTED: &str = "Preempted";
/// Workload condition: preempted with a notice (its ClusterQueue's
/// `spec.preemption.noticeSeconds`): `True` (reason `Preempted`) while it
/// still runs, its `lastTransitionTime` the notice's start and its message
/// the deadline; `False` (reason `Suspended`) once it is suspended, at the
/// deadline or when it acknowledged, with its `Finished` reason when it
/// finished first, or `Withdrawn` when a restarted controller did not
/// preempt it again.
pub const PREEMPTION_NOTICE: &str = "PreemptionNotice";
/// Workload condition: all admitted pods are ready (or have been).
pub const PODS_READY: &str = "PodsReady";
/// Workload condition: back in the queue after an eviction; `False` while a
/// backoff (see `status.requeueState`) is running.
pub const REQUEUED: &str = "Requeued";
/// Workload condition: its Job finished; the quota is released.
pub const FINISHED: &str = "Finished";
/// ClusterQueue and LocalQueue condition: the queue can admit workloads.
pub const ACTIVE: &str = "Active";
/// Workload condition: its GPUs were idle by its ClusterQueue's
/// `idleReclaim` policy (`True`, with the measured utilisation and window),
/// or are used again (`False`).
pub const GPU_IDLE: &str = "GPUIdle";
/// ClusterQueue condition: the idle-GPU check of its `idleReclaim` policy
/// cannot run (Prometheus unreachable, failing or answering garbage), so
/// nothing is judged idle; `False` once a check succeeds again.
pub const IDLE_CHECK_UNAVAILABLE: &str = "IdleCheckUnavailable";

/// ClusterQueue condition: every LocalQueue pointing at it is in a
/// namespace its `namespaceSelector` selects (`True`), or it has no selector
/// (it serves no namespace) or LocalQueues pointing at it are in namespaces
/// it does not select (`False`, naming them). Admitted workloads of those
/// LocalQueues keep running; new ones wait with `NamespaceNotSelected`.
pub const NAMESPACES_SELECTED: &str = "NamespacesSelected";
/// ClusterQueue condition, with `spec.budget`: `True` while no budget
/// action applies; `False` with the action (`Warn`, `Deprioritize`,
/// `Stop`) as reason once spending reached it.
pub const WITHIN_BUDGET: &str = "WithinBudget";

/// Standard condition status values.
pub mod status {
    /// The condition holds.
    pub const TRUE: &str = "True";
    /// The condition does not hold.
    pub const FALSE: &str = "False";
    /// It is not known whether the condition holds.
    pub const UNKNOWN: &str = "Unknown";
}

/// Reasons for condition transitions and pending explanations.
pub mod reasons {
    // --- QuotaReserved / Admitted / pending ---
    /// Waiting for quota (QuotaReserved=False, Admitted=False).
    pub const PENDING: &str = "Pending";
    /// Quota was reserved (QuotaReserved=True).
    pub const QUOTA_RESERVED: &str = "QuotaReserved";
    /// The workload was admitted (Admitted=True).
    pub const ADMITTED: &str = "Admitted";
    /// Pending: not enough free quota in any flavor right now.
    pub const INSUFFICIENT_QUOTA: &str = "InsufficientQuota";
    /// Pending: the request can never fit (more than the queue's nominal
    /// quota plus what it may borrow, or a resource no group covers).
    pub const INADMISSIBLE: &str = "Inadmissible";
    /// Pending: the LocalQueue named by the workload does not exist.
    pub const LOCAL_QUEUE_NOT_FOUND: &str = "LocalQueueNotFound";
    /// Pending: the ClusterQueue does not exist.
    pub const CLUSTER_QUEUE_NOT_FOUND: &str = "ClusterQueueNotFound";
    /// Pending: the ClusterQueue exists but is not active.
    pub const CLUSTER_QUEUE_INACTIVE: &str = "ClusterQueueInactive";
    /// Pending: the namespace is not selected by the ClusterQueue's
    /// namespaceSelector.
    pub const NAMESPACE_NOT_SELECTED: &str = "NamespaceNotSelected";
    /// Pending reasons that waiting alone never ends (the quota or the
    /// nodes can never hold it; the queue it names does not exist; its
    /// namespace is not served; a resource no group covers): the admin or
    /// the user must change something. The engine's reason codes
    /// (`Explanation::reason_code`) and the controller's own.
    pub const WAITING_CANNOT_ADMIT: [&str; 6] = [
        "ExceedsQuota",
        "NeverPlaceable",
        "LocalQueueMissing",
        "ClusterQueueMissing",
        "ResourceNotCovered",
        NAMESPACE_NOT_SELECTED,
    ];

    /// Whether waiting alone never admits a workload pending for `reason`.
    pub fn waiting_cannot_admit(reason: &str) -> bool {
        WAITING_CANNOT_ADMIT.contains(&reason)
    }
    /// Pending: a StrictFIFO queue's head is waiting and blocks this one.
    pub const BLOCKED_BY_HEAD: &str = "BlockedByHead";
    /// Pending: victims were chosen and are being evicted.
    pub const WAITING_FOR_PREEMPTION: &str = "WaitingForPreemption";
    /// Pending: the gang is not complete yet (fewer Jobs than `gang-size`).
    pub const WAITING_FOR_GANG: &str = "WaitingForGang";
    /// Pending: in requeue backoff until `status.requeueState.requeueAt`.
    pub const BACKOFF: &str = "Backoff";

    // --- Evicted ---
    /// Evicted because another workload preempted it.
    pub const PREEMPTED: &str = "Preempted";
    /// Evicted because its pods were not all ready within `podsReadyTimeout`.
    pub const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
    /// Evicted because its ClusterQueue is stopped with `HoldAndDrain`.
    pub const CLUSTER_QUEUE_STOPPED: &str = "ClusterQueueStopped";
    /// Evicted because its LocalQueue is stopped with `HoldAndDrain`.
    pub const LOCAL_QUEUE_STOPPED: &str = "LocalQueueStopped";
    /// Evicted because a Job of its gang was deleted (a gang runs whole or
    /// not at all); its Workload is deleted once its pods are gone.
    pub const GANG_INCOMPLETE: &str = "GangIncomplete";
    /// Evicted because the workload was deactivated (`spec.active: false`).
    pub const DEACTIVATED: &str = "Deactivated";
    /// Evicted (or deactivated) because its GPUs were idle by its
    /// ClusterQueue's `idleReclaim` policy; also the `GPUIdle` reason.
    pub const IDLE_GPU: &str = "IdleGPU";
    /// Evicted because its object asks for more than was admitted (more
    /// pods, or more per pod): it is queued again with its new shape.
    pub const WORKLOAD_SHAPE_CHANGED: &str = "WorkloadShapeChanged";
    /// Evicted because it was requeued too often and deactivated.
    pub const REQUEUING_LIMIT_EXCEEDED: &str = "DeactivatedDueToRequeuingLimitExceeded";

    // --- Preempted ---
    /// Preempted by a higher-priority workload of the same ClusterQueue.
    pub const IN_CLUSTER_QUEUE: &str = "InClusterQueue";
    /// Preempted by a queue of the cohort reclaiming its nominal quota.
    pub const IN_COHORT_RECLAMATION: &str = "InCohortReclamation";
    /// Preempted by a borrowing workload of the cohort (borrowWithinCohort).
    pub const IN_COHORT_RECLAIM_WHILE_BORROWING: &str = "InCohortReclaimWhileBorrowing";
    /// Preempted by a queue of the cohort below its fair share (fair sharing).
    pub const IN_COHORT_FAIR_SHARING: &str = "InCohortFairSharing";

    // --- PodsReady ---
    /// All pods are ready.
    pub const PODS_READY: &str = "PodsReady";
    /// Pods are starting.
    pub const WAIT_FOR_START: &str = "WaitForStart";
    /// Pods were ready, some are recovering.
    pub const WAIT_FOR_RECOVERY: &str = "WaitForRecovery";

    // --- PreemptionNotice ---
    /// The notice is over and the workload suspended (PreemptionNotice=False).
    pub const SUSPENDED: &str = "Suspended";
    /// The preemption that gave a notice no longer stands (a restarted
    /// controller did not preempt the workload again): PreemptionNotice=False.
    pub const WITHDRAWN: &str = "Withdrawn";
    /// The Event reason of a preemption with notice.
    pub const PREEMPTION_NOTICE: &str = "PreemptionNotice";

    // --- Requeued ---
    /// Requeued after its backoff ended.
    pub const BACKOFF_FINISHED: &str = "BackoffFinished";

    // --- Finished ---
    /// The Job succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// The Job failed.
    pub const FAILED: &str = "Failed";
    /// The Job was deleted before finishing.
    pub const JOB_DELETED: &str = "JobDeleted";

    // --- Active (queues) ---
    /// The queue can admit.
    pub const READY: &str = "Ready";
    /// A flavor the ClusterQueue references does not exist.
    pub const FLAVOR_NOT_FOUND: &str = "FlavorNotFound";
    /// The queue is stopped by its stopPolicy.
    pub const STOPPED: &str = "Stopped";
    /// The LocalQueue's ClusterQueue does not exist.
    pub const CLUSTER_QUEUE_DOES_NOT_EXIST: &str = "ClusterQueueDoesNotExist";
    /// The LocalQueue's ClusterQueue is not active.
    pub const CLUSTER_QUEUE_IS_INACTIVE: &str = "ClusterQueueIsInactive";
    // A LocalQueue whose namespace its ClusterQueue does not select is
    // inactive with reason NAMESPACE_NOT_SELECTED.

    // --- NamespacesSelected (ClusterQueue) ---
    /// Its namespaceSelector selects the namespace of every LocalQueue
    /// pointing at it.
    pub const NAMESPACES_SELECTED: &str = "NamespacesSelected";
    /// It has no namespaceSelector, so it serves no namespace (as in Kueue;
    /// `{}` serves all).
    pub const NO_NAMESPACE_SELECTOR: &str = "NoNamespaceSelector";
    /// Its namespaceSelector leaves out the namespace of some LocalQueues
    /// pointing at it.
    pub const LOCAL_QUEUES_NOT_SELECTED: &str = "LocalQueuesNotSelected";

    // --- GPUIdle ---
    /// Its GPUs are used again (above the threshold).
    pub const GPU_BUSY: &str = "GPUBusy";

    // --- IdleCheckUnavailable ---
    /// Prometheus could not be asked or answered with an error.
    pub const PROMETHEUS_UNAVAILABLE: &str = "PrometheusUnavailable";
    /// The last idle check succeeded.
    pub const IDLE_CHECK_OK: &str = "IdleCheckSucceeded";
}
