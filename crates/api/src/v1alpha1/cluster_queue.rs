//! ClusterQueue: a pool of quota, per flavor and resource, shared by the
//! LocalQueues that point at it and (through a cohort) with other
//! ClusterQueues.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys once per column,
// which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, FairSharingStatus, FlavorUsage, StopPolicy};
use super::idle_reclaim::IdleReclaim;
use super::quota::{self, FlavorQuotas, ResourceGroup};
use super::usage::{Budget, BudgetStatus, UsageStatus};
use crate::validation::{DNS1123_SUBDOMAIN_PATTERN, Validate, Violation, Violations};

/// A ClusterQueue holds quota: for each resource group, how much of each
/// covered resource each flavor provides. LocalQueues point workloads at it;
/// a cohort lets ClusterQueues lend unused quota to each other.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    category = "sluice",
    status = "ClusterQueueStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ClusterQueue holds quota per flavor and resource for the workloads of the LocalQueues that point at it, and shares unused quota with the other ClusterQueues of its cohort.",
    printcolumn(
        name = "Cohort",
        type_ = "string",
        json_path = ".spec.cohort",
        description = "Cohort the queue borrows from and lends to"
    ),
    printcolumn(
        name = "Active",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Active\")].status",
        description = "Whether the queue admits work (False: see Reason)"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Active\")].reason",
        description = "Why the queue is (in)active"
    ),
    printcolumn(
        name = "Strategy",
        type_ = "string",
        json_path = ".spec.queueingStrategy",
        description = "Queueing strategy"
    ),
    printcolumn(
        name = "Pending",
        type_ = "integer",
        json_path = ".status.pendingWorkloads",
        description = "Workloads waiting for admission"
    ),
    printcolumn(
        name = "Admitted",
        type_ = "integer",
        json_path = ".status.admittedWorkloads",
        description = "Workloads admitted and not finished"
    ),
    printcolumn(
        name = "GPUs",
        type_ = "string",
        json_path = ".status.gpus",
        description = "Whole GPUs in use / nominal quota over all flavors; MIG slices apart"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.cohort) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit) && !has(r.lendingLimit))))",
        "message": "borrowingLimit and lendingLimit require spec.cohort"
    }
]))]
pub struct ClusterQueueSpec {
    /// Quota, grouped by the resources that are assigned a flavor together.
    /// Within a group, flavors are tried in the order listed (first =
    /// preferred). A resource may appear in at most one group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub resource_groups: Vec<ResourceGroup>,
    /// Name of the cohort this queue belongs to. Queues in one cohort lend
    /// unused quota to each other (up to their lendingLimit) and borrow it
    /// (up to their borrowingLimit). Unset: the queue neither lends nor borrows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub cohort: Option<String>,
    /// Order in which pending workloads are considered. `BestEffortFIFO`
    /// (default): by priority, then age; a workload that does not fit lets
    /// later ones be admitted. `StrictFIFO`: by priority, then age; the head
    /// blocks everything behind it until it fits.
    #[serde(default)]
    pub queueing_strategy: QueueingStrategy,
    /// Namespaces whose LocalQueues may use this ClusterQueue, as in Kueue:
    /// unset selects no namespace, `{}` selects every namespace, a selector
    /// the namespaces whose labels match it. Workloads of a namespace that is
    /// not selected wait (reason `NamespaceNotSelected`); admitted ones keep
    /// running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// When admitted workloads may be preempted to make room. Every policy
    /// defaults to `Never`.
    #[serde(default)]
    pub preemption: Preemption,
    /// Minimum time, in seconds, an admitted workload runs before it may be
    /// preempted, so expensive GPU jobs do not thrash. Unset or 0: no
    /// protection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_runtime_seconds: Option<i64>,
    /// `None` (default): the queue runs normally. `Hold`: no new admissions,
    /// admitted workloads keep running. `HoldAndDrain`: no new admissions and
    /// admitted workloads are evicted.
    #[serde(default)]
    pub stop_policy: StopPolicy,
    /// Idle-GPU reclaim: what happens to admitted workloads whose GPUs sit
    /// idle (from DCGM metrics in Prometheus; needs the controller's
    /// `--prometheus-url`). Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_reclaim: Option<IdleReclaim>,
    /// Its weight when it competes with the other members of its cohort for
    /// unused quota (Kueue's `fairSharing`). Unset: weight 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Whether the first pending workload that does not fit reserves the
    /// quota it needs, so that smaller ones admitted meanwhile cannot
    /// delay it (EASY backfill). Absent: no reservation, as in Kueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<Backfill>,
    /// How much of a resource (GPUs by default) the queue may use per
    /// period, in resource-hours, and what happens as it is spent: `Warn`,
    /// `Deprioritize` (behind the rest of the cohort, no borrowing) or
    /// `Stop` (nothing new admitted; admitted work runs on). Absent: no
    /// budget; usage is still accounted (`status.usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<Budget>>,
}

/// The most `spec.backfill.maxDelayMinutes` may be: a week.
pub const MAX_BACKFILL_DELAY_MINUTES: u32 = 10_080;

/// The most `spec.backfill.depth` may be.
pub const MAX_BACKFILL_DEPTH: u32 = 8;

/// Reservations for the head of a ClusterQueue, and backfill behind them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Backfill {
    /// `None` (default): a workload that fits is admitted whatever waits
    /// ahead of it. `Reserve`: the first workload (in queue order) that
    /// does not fit reserves its quota from the time admitted work with
    /// declared run times (`sluice.dev/expected-runtime`, a Job's
    /// `activeDeadlineSeconds`) is expected to have freed it; a later
    /// workload is admitted only if that time does not move: it ends
    /// before, by its own declared run time, or fits beside the
    /// reservation. Workloads of other queues in the cohort are held to
    /// it only when they borrow.
    #[serde(default)]
    pub policy: BackfillPolicy,
    /// With `Reserve`: how much later than the start it was first given a
    /// reservation may start because of workloads admitted ahead of it
    /// (minutes, 1 to 10080). Unset: not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10080))]
    pub max_delay_minutes: Option<u32>,
    /// With `Reserve`: how many of the queue's first workloads that do not
    /// fit hold a reservation (1 to 8). Each later one's start counts the
    /// earlier ones as running from now until their start plus their
    /// declared run time; a workload admitted ahead may delay none of
    /// them. Unset: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub depth: Option<u32>,
}

/// See [`Backfill::policy`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BackfillPolicy {
    /// No reservations (Kueue's BestEffortFIFO).
    #[default]
    None,
    /// The queue's head that does not fit reserves its quota.
    Reserve,
}

/// How pending workloads of a ClusterQueue are ordered and whether a
/// workload that does not fit blocks the ones behind it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum QueueingStrategy {
    /// Priority, then age; the head blocks the queue until it fits.
    #[serde(rename = "StrictFIFO")]
    StrictFifo,
    /// Priority, then age; workloads that fit pass one that does not.
    #[default]
    #[serde(rename = "BestEffortFIFO")]
    BestEffortFifo,
}

/// Preemption policies of a ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!(has(self.reclaimWithinCohort) && self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && has(self.borrowWithinCohort.policy) && self.borrowWithinCohort.policy != 'Never')",
        "message": "borrowWithinCohort requires reclaimWithinCohort other than Never"
    }
]))]
pub struct Preemption {
    /// Whether a pending workload that fits the queue's nominal quota may
    /// preempt admitted workloads of the same queue: `Never` (default),
    /// `LowerPriority`, or `LowerOrNewerEqualPriority` (also equal priority
    /// admitted more recently than the pending one was created).
    #[serde(default)]
    pub within_cluster_queue: WithinClusterQueue,
    /// Whether a pending workload that fits the queue's nominal quota may
    /// preempt workloads of other queues in the cohort that borrow from it:
    /// `Never` (default), `LowerPriority`, or `Any` (any priority).
    #[serde(default)]
    pub reclaim_within_cohort: ReclaimWithinCohort,
    /// Whether a pending workload that needs to borrow may preempt workloads
    /// of other queues in the cohort. Requires reclaimWithinCohort other than
    /// `Never`.
    #[serde(default)]
    pub borrow_within_cohort: BorrowWithinCohort,
    /// Which of the workloads the policies above allow are preempted
    /// first, among those of equal priority (workloads of queues that
    /// borrow always go first, then lower priority): `Newest` (default,
    /// Kueue's order) takes the most recently admitted; `LeastWorkLost`
    /// takes the one that loses the least work: its share of the resources
    /// the preemptor lacks times how long it has run since its admission.
    #[serde(default, skip_serializing_if = "VictimOrder::is_newest")]
    pub victim_order: VictimOrder,
    /// A workload Sluice preempted less than this many minutes ago is
    /// preempted again only after every other allowed workload of its tier
    /// (equal priority, in a queue that borrows or not alike). Unset: no
    /// grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10080))]
    pub recently_preempted_grace_minutes: Option<i32>,
    /// Victims admitted through this queue get this notice before they are
    /// suspended: their Workload gets a `PreemptionNotice` condition, their
    /// object an Event and their running pods the
    /// `sluice.dev/preemption-notice` annotation (the deadline); they are
    /// suspended at the deadline, or as soon as their object carries
    /// `sluice.dev/checkpoint-done` with a time at or after the notice
    /// began. Meanwhile they keep their quota, held for the preemptor.
    /// Unset: suspended at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub notice_seconds: Option<u32>,
}

/// The order of preemption victims of equal priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum VictimOrder {
    /// The most recently admitted first (Kueue's order).
    #[default]
    Newest,
    /// The least work lost first: share of the contested resources held ×
    /// time since its latest admission; then the most recently admitted.
    LeastWorkLost,
}

impl VictimOrder {
    /// The default, left out when serialized so that objects without the
    /// field stay as they were.
    pub fn is_newest(&self) -> bool {
        *self == VictimOrder::Newest
    }
}

/// Preemption within one ClusterQueue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum WithinClusterQueue {
    /// Never preempt workloads of the same queue.
    #[default]
    Never,
    /// Preempt lower-priority workloads of the same queue.
    LowerPriority,
    /// Preempt lower-priority workloads, and equal-priority ones admitted
    /// after the pending workload was created.
    LowerOrNewerEqualPriority,
}

/// Reclaiming lent quota from other ClusterQueues of the cohort.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ReclaimWithinCohort {
    /// Never preempt borrowers.
    #[default]
    Never,
    /// Preempt borrowers of lower priority.
    LowerPriority,
    /// Preempt borrowers of any priority.
    Any,
}

/// Preemption while borrowing from the cohort.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.maxPriorityThreshold) || (has(self.policy) && self.policy != 'Never')",
        "message": "maxPriorityThreshold requires policy LowerPriority"
    }
]))]
pub struct BorrowWithinCohort {
    /// `Never` (default): a workload that must borrow never preempts.
    /// `LowerPriority`: it may preempt lower-priority workloads of other
    /// queues in the cohort.
    #[serde(default)]
    pub policy: BorrowWithinCohortPolicy,
    /// Only workloads with priority at most this value may be preempted by a
    /// borrowing workload. Unset: no threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

/// Preemption policy when borrowing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BorrowWithinCohortPolicy {
    /// A borrowing workload never preempts.
    #[default]
    Never,
    /// A borrowing workload may preempt lower-priority workloads.
    LowerPriority,
}

/// Observed state of a ClusterQueue, written by the controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Number of workloads waiting for admission in this queue.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Number of workloads admitted and not yet finished.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota in use per flavor and resource, including what is borrowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub flavors_usage: Vec<FlavorUsage>,
    /// GPUs in use / nominal quota, summed over flavors (`12/32`); unset for
    /// a queue without GPU quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
    /// Conditions of the queue; `Active` tells whether it can admit (its
    /// flavors exist and it is not stopped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The queue's weighted share in fair sharing (Kueue's
    /// `status.fairSharing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
    /// Resource-hours used over time, per flavor and resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<UsageStatus>>,
    /// The budget's period, spending, projection and action reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<BudgetStatus>>,
}

impl ClusterQueueSpec {
    /// Iterates over `(group index, flavor)` in preference order.
    pub fn flavors(&self) -> impl Iterator<Item = (usize, &FlavorQuotas)> {
        self.resource_groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.flavors.iter().map(move |f| (i, f)))
    }

    /// Names of all flavors this queue references, without repeats.
    pub fn flavor_names(&self) -> BTreeSet<&str> {
        self.flavors().map(|(_, f)| f.name.as_str()).collect()
    }
}

impl Validate for ClusterQueue {
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        v.metadata_name(&self.metadata, false);
        let spec = &self.spec;
        if let Some(cohort) = &spec.cohort {
            v.dns1123_subdomain("spec.cohort", cohort);
        }
        if let Some(selector) = &spec.namespace_selector {
            v.label_selector("spec.namespaceSelector", selector);
        }
        if let Some(secs) = spec.min_runtime_seconds
            && secs < 0
        {
            v.push("spec.minRuntimeSeconds", "must be at least 0");
        }
        validate_preemption(&mut v, &spec.preemption);
        if let Some(m) = spec.backfill.as_ref().and_then(|b| b.max_delay_minutes)
            && !(1..=MAX_BACKFILL_DELAY_MINUTES).contains(&m)
        {
            v.push(
                "spec.backfill.maxDelayMinutes",
                format!("must be between 1 and {MAX_BACKFILL_DELAY_MINUTES} (one week) minutes, got {m}; leave it unset for none"),
            );
        }
        if let Some(d) = spec.backfill.as_ref().and_then(|b| b.depth)
            && !(1..=MAX_BACKFILL_DEPTH).contains(&d)
        {
            v.push(
                "spec.backfill.depth",
                format!("must be between 1 and {MAX_BACKFILL_DEPTH} reservations, got {d}; leave it unset for 1"),
            );
        }
        if let Some(idle) = &spec.idle_reclaim {
            idle.validate_into(&mut v, "spec.idleReclaim");
        }
        if let Some(fair) = &spec.fair_sharing {
            fair.validate_into(&mut v, "spec.fairSharing");
        }
        if let Some(budget) = &spec.budget {
            budget.validate_into(&mut v, "spec.budget");
        }
        quota::validate_resource_groups(
            &mut v,
            &spec.resource_groups,
            quota::Owner {
                kind: "ClusterQueue",
                link: "spec.cohort",
                linked_to: "cohort",
                linked: spec.cohort.is_some(),
            },
        );
        v.0
    }
}

/// The most a recently-preempted grace may be: one week.
pub const MAX_RECENTLY_PREEMPTED_GRACE_MINUTES: i32 = 7 * 24 * 60;

/// The longest preemption notice: one hour.
pub const MAX_NOTICE_SECONDS: u32 = 3600;

fn validate_preemption(v: &mut Violations, p: &Preemption) {
    if let Some(m) = p.recently_preempted_grace_minutes
        && !(1..=MAX_RECENTLY_PREEMPTED_GRACE_MINUTES).contains(&m)
    {
        v.push(
            "spec.preemption.recentlyPreemptedGraceMinutes",
            format!("must be between 1 and {MAX_RECENTLY_PREEMPTED_GRACE_MINUTES} (one week) minutes, got {m}; leave it unset for no grace"),
        );
    }
    if let Some(s) = p.notice_seconds
        && !(1..=MAX_NOTICE_SECONDS).contains(&s)
    {
        v.push(
            "spec.preemption.noticeSeconds",
            format!(
                "must be between 1 and {MAX_NOTICE_SECONDS} (one hour) seconds, got {s}; leave it unset for no notice"
            ),
        );
    }
    if p.reclaim_within_cohort == ReclaimWithinCohort::Never
        && p.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
    {
        v.push(
            "spec.preemption.borrowWithinCohort.policy",
            "requires spec.preemption.reclaimWithinCohort other than Never",
        );
    }
    if p.borrow_within_cohort.max_priority_threshold.is_some()
        && p.borrow_within_cohort.policy == BorrowWithinCohortPolicy::Never
    {
        v.push(
            "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
            "requires spec.preemption.borrowWithinCohort.policy LowerPriority",
        );
    }
}
