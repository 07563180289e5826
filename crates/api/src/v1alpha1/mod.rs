//! The `sluice.dev/v1alpha1` kinds.
//!
//! ```text
//!   Job ──label sluice.dev/queue──▶ LocalQueue (ns) ──spec.clusterQueue──▶ ClusterQueue
//!    │                                                                      │   │
//!    └─owns─▶ Workload (ns) ── spec.queueName ─▶ LocalQueue                  │   └─ spec.cohort ─▶ Cohort ─ spec.parent ─▶ Cohort
//!               │ spec.priorityClassName ─▶ WorkloadPriorityClass            │                    (other ClusterQueues name it too)
//!               └ status.admission.podSetAssignments[].flavors ─▶ ResourceFlavor ◀─ resourceGroups[].flavors[].name (ClusterQueue, Cohort)
//! ```

pub mod cluster_queue;
pub mod cohort;
pub mod common;
pub mod conditions;
pub mod idle_reclaim;
pub mod local_queue;
pub mod priority_class;
pub mod quota;
pub mod resource_flavor;
pub mod usage;
pub mod visibility;
pub mod workload;

pub use cluster_queue::{
    Backfill, BackfillPolicy, BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueue, ClusterQueueSpec,
    ClusterQueueStatus, Preemption, QueueingStrategy, ReclaimWithinCohort, VictimOrder, WithinClusterQueue,
};
pub use cohort::{Cohort, CohortSpec, CohortStatus};
pub use common::{
    FairSharing, FairSharingStatus, FlavorUsage, ResourceUsage, StopPolicy, find_condition, is_condition_true,
};
pub use idle_reclaim::{IdleAction, IdlePolicy, IdleReclaim};
pub use local_queue::{LocalQueue, LocalQueueSpec, LocalQueueStatus};
pub use priority_class::{WorkloadPriorityClass, WorkloadPriorityClassSpec};
pub use quota::{FlavorQuotas, ResourceGroup, ResourceQuota};
pub use resource_flavor::{ResourceFlavor, ResourceFlavorSpec, SharedGpuRequests};
pub use usage::{
    Budget, BudgetAction, BudgetPeriod, BudgetStatus, BudgetStep, BudgetWindow, ResourceHours, UsageBucket, UsageStatus,
};
pub use visibility::{ClusterQueueSummary, FlavorQuota, PendingWorkload, ResourceQuotaUsage};
pub use workload::{
    Admission, BackfillAdmission, FlavorPendingReason, PendingExplanation, PodSet, PodSetAssignment, RequeueState,
    ResourceShortfall, TopologyDomain, TopologyRequest, Workload, WorkloadSpec, WorkloadState, WorkloadStatus,
};

/// API group of every Sluice kind.
pub const GROUP: &str = "sluice.dev";
/// API version of this module's kinds.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` value of this module's kinds.
pub const API_VERSION: &str = "sluice.dev/v1alpha1";
