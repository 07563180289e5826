//! Workload: the unit of admission. The controller creates one per queued Job
//! (owned by the Job); the engine admits it whole or not at all.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys once per column,
// which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{find_condition, is_condition_true, preserve_unknown_object, quantity_map};
use super::conditions;
use crate::quantity::{QuantityError, QuantityErrorKind};
use crate::validation::{DNS1123_LABEL_PATTERN, Validate, Violation, Violations};

/// At most this many pod sets per workload.
pub const MAX_POD_SETS: usize = 8;

/// A Workload is what Sluice queues and admits: one or more pod sets that
/// must all fit before any of them runs. The controller creates it for each
/// Job queued with the `sluice.dev/queue` label and keeps its status.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "Workload",
    plural = "workloads",
    namespaced,
    shortname = "wl",
    category = "sluice",
    status = "WorkloadStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Workload is the unit Sluice queues and admits: pod sets (a gang) that are admitted together or not at all. The controller creates one per queued Job and maintains its status.",
    printcolumn(
        name = "Queue",
        type_ = "string",
        json_path = ".spec.queueName",
        description = "LocalQueue the workload is queued in"
    ),
    printcolumn(
        name = "Admitted by",
        type_ = "string",
        json_path = ".status.admission.clusterQueue",
        description = "ClusterQueue that admitted the workload"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.state",
        description = "Pending, QuotaReserved, Admitted, Evicting, Finished or Inactive"
    ),
    printcolumn(
        name = "Position",
        type_ = "integer",
        json_path = ".status.pending.positionInLocalQueue",
        description = "0-based place among the LocalQueue's pending workloads (refreshed at most once a minute)"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.pending.reason",
        description = "Why it waits, in short"
    ),
    printcolumn(
        name = "Est. start",
        type_ = "date",
        json_path = ".status.pending.estimatedStart",
        description = "When it is expected to be admitted"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// Groups of identical pods. All pod sets are admitted together (a gang):
    /// either every pod set gets its quota or none does.
    #[schemars(length(min = 1, max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pod_sets: Vec<PodSet>,
    /// Name of the LocalQueue, in the workload's namespace, that the workload
    /// is queued in.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL_PATTERN))]
    pub queue_name: String,
    /// Priority for queue order and preemption; higher goes first. Set by the
    /// controller from the WorkloadPriorityClass, else the pod template's
    /// Kubernetes PriorityClass, else 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Name of the WorkloadPriorityClass the priority came from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = DNS1123_LABEL_PATTERN))]
    pub priority_class_name: Option<String>,
    /// Whether the workload may be admitted. Setting it to false evicts an
    /// admitted workload and keeps it out of the queue until set back to true.
    #[serde(default = "default_true")]
    pub active: bool,
}

fn default_true() -> bool {
    true
}

fn default_count() -> i32 {
    1
}

/// A group of identical pods with one pod template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    { "rule": "!has(self.minCount) || self.minCount <= self.count", "message": "minCount must be at most count" }
]))]
pub struct PodSet {
    /// Name of the pod set, unique within the workload (e.g. `main`,
    /// `launcher`, `worker`).
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL_PATTERN))]
    pub name: String,
    /// Number of pods; for a Job, its `parallelism`. All of them form the
    /// gang.
    #[serde(default = "default_count")]
    #[schemars(range(min = 1))]
    pub count: i32,
    /// Fewest pods the workload can run with, if it can run with fewer than
    /// `count` (partial admission). Unset: exactly `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_count: Option<i32>,
    /// Pod template of the pods (a Kubernetes PodTemplateSpec). Sluice reads
    /// the containers' resource requests, node selector, tolerations and
    /// priority class from it; the schema keeps it as-is, the API server
    /// validates the pods themselves.
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// `Required`: all its pods run within one topology domain of their
    /// flavor (the flavor's `topologyKey`). From the object's
    /// `sluice.dev/topology: required` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyRequest>,
}

/// How a pod set's pods must be spread over topology domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TopologyRequest {
    /// Within one domain, or not admitted.
    Required,
}

/// A topology domain: the nodes whose label `key` is `value`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyDomain {
    /// The node label, e.g. `rack`.
    pub key: String,
    /// Its value shared by the domain's nodes.
    pub value: String,
}

/// Short summary of the conditions for `kubectl get`: Pending,
/// QuotaReserved, Admitted, Evicting, Finished or Inactive.
//
// Derived from the conditions by `WorkloadStatus::derive_state` and kept in
// `status.state` by the controller, because a printer column cannot compute
// it. (The type's doc is what the CRD shows for the optional field.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum WorkloadState {
    /// Waiting in the queue.
    #[default]
    Pending,
    /// Quota reserved, admission in progress.
    QuotaReserved,
    /// Admitted; its pods run.
    Admitted,
    /// Being evicted (preempted, timed out or drained); will requeue.
    Evicting,
    /// Finished; its quota is released.
    Finished,
    /// Deactivated (`spec.active: false`).
    Inactive,
}

/// Observed state of a Workload, written by the controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Short summary of the conditions for `kubectl get`: Pending,
    /// QuotaReserved, Admitted, Evicting, Finished or Inactive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<WorkloadState>,
    /// Conditions: QuotaReserved, Admitted, Evicted, Preempted, PodsReady,
    /// Requeued, Finished, each with a reason and a message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Where and how the workload was admitted; unset while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Requeue bookkeeping after evictions (backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// Why the workload is still pending, with the shortfall per flavor;
    /// unset once admitted. Updated only when the reason changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingExplanation>,
}

/// Where a workload was admitted and what it was given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// Name of the ClusterQueue that admitted the workload.
    pub cluster_queue: String,
    /// Flavor assignment and usage for each pod set.
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pod_set_assignments: Vec<PodSetAssignment>,
    /// Set when it was admitted ahead of another workload's reservation
    /// because its declared run time ends before that reservation starts
    /// (backfill): kept so that a restarted controller still evicts it if
    /// it runs past that run time while holding the reservation off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<BackfillAdmission>,
}

/// A workload admitted ahead of a reservation by its declared run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackfillAdmission {
    /// The ClusterQueue whose reservation it went ahead of.
    pub cluster_queue: String,
    /// The `namespace/name` of the Workload holding that reservation.
    pub reserved_for: String,
    /// Its admission time plus its declared run time.
    pub until: Time,
}

/// What one pod set was given at admission.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// Name of the pod set.
    pub name: String,
    /// Flavor assigned to each resource, e.g. `nvidia.com/gpu: h100-80gb`.
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
    /// Total amount of each resource reserved for the pod set (per-pod
    /// requests times count).
    #[serde(default)]
    #[schemars(schema_with = "quantity_map")]
    pub resource_usage: BTreeMap<String, Quantity>,
    /// Number of pods admitted; less than the pod set's count only with
    /// partial admission.
    #[schemars(range(min = 0))]
    pub count: i32,
    /// The topology domain its pods are pinned to (nodeSelector
    /// `key: value`), when the pod set requires one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_domain: Option<TopologyDomain>,
}

/// Requeue bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    /// How many times the workload was evicted and requeued.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub count: i32,
    /// Earliest time the workload is considered again (exponential backoff);
    /// unset when it may be considered now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

/// Why a workload is still pending.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingExplanation {
    /// Machine-readable reason, e.g. `InsufficientQuota`, `Inadmissible`,
    /// `LocalQueueNotFound`, `BlockedByHead`, `WaitingForPreemption`.
    pub reason: String,
    /// Human-readable summary.
    #[serde(default)]
    pub message: String,
    /// Why each flavor that was tried does not fit, in preference order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub flavors: Vec<FlavorPendingReason>,
    /// Position among the pending workloads of the ClusterQueue, from 1
    /// (the next to be admitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_in_cluster_queue: Option<i32>,
    /// Position among the pending workloads of the LocalQueue, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position_in_local_queue: Option<i32>,
    /// When it is expected to be admitted (a forecast from the expected run
    /// times of what runs and waits), if within the forecast's horizon.
    /// Positions and estimate are refreshed at most once a minute, only
    /// when they changed (the estimate by at least 10 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<Time>,
}

/// Why one flavor cannot take the workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorPendingReason {
    /// Name of the ResourceFlavor.
    pub name: String,
    /// Machine-readable reason, e.g. `InsufficientQuota`,
    /// `UntoleratedTaint`, `FlavorNotFound`.
    pub reason: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: String,
    /// Resources that do not fit, with the amounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub resources: Vec<ResourceShortfall>,
}

/// A resource the workload needs more of than a flavor has free.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceShortfall {
    /// Name of the resource, e.g. `nvidia.com/gpu`.
    pub name: String,
    /// Total the workload requests of this resource in this flavor.
    pub requested: Quantity,
    /// Amount the queue can use now (free nominal quota plus what it may
    /// borrow).
    pub available: Quantity,
}

impl WorkloadSpec {
    /// The priority used for ordering: `spec.priority`, else 0.
    pub fn effective_priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
}

impl PodSet {
    /// Requests of one pod, in milli-units per resource, computed as
    /// Kubernetes does for scheduling: the sum over containers (a container's
    /// limit stands in for a missing request), at least the largest init
    /// container (restartable "sidecar" init containers add to both), plus
    /// the pod overhead. `path` prefixes field paths in errors, e.g.
    /// `spec.podSets[0]`.
    pub fn pod_requests(&self, path: &str) -> Result<BTreeMap<String, i128>, QuantityError> {
        let Some(pod) = &self.template.spec else {
            return Ok(BTreeMap::new());
        };
        let tpath = format!("{path}.template.spec");
        let mut sum: BTreeMap<String, i128> = BTreeMap::new();
        for (i, c) in pod.containers.iter().enumerate() {
            add(&mut sum, &container_requests(c, &format!("{tpath}.containers[{i}]"))?);
        }
        let mut sidecars: BTreeMap<String, i128> = BTreeMap::new();
        let mut init_max: BTreeMap<String, i128> = BTreeMap::new();
        for (i, c) in pod.init_containers.iter().flatten().enumerate() {
            let reqs = container_requests(c, &format!("{tpath}.initContainers[{i}]"))?;
            let peak = if c.restart_policy.as_deref() == Some("Always") {
                add(&mut sidecars, &reqs);
                sidecars.clone()
            } else {
                let mut with_sidecars = sidecars.clone();
                add(&mut with_sidecars, &reqs);
                with_sidecars
            };
            for (name, v) in peak {
                let slot = init_max.entry(name).or_insert(0);
                *slot = (*slot).max(v);
            }
        }
        add(&mut sum, &sidecars);
        for (name, v) in init_max {
            let slot = sum.entry(name).or_insert(0);
            *slot = (*slot).max(v);
        }
        if let Some(overhead) = &pod.overhead {
            for (name, q) in overhead {
                let v = crate::quantity::parse_amount(name, &format!("{tpath}.overhead[{name}]"), &q.0)?;
                *sum.entry(name.clone()).or_insert(0) += v;
            }
        }
        Ok(sum)
    }

    /// Requests of the whole pod set: [`PodSet::pod_requests`] times `count`.
    pub fn total_requests(&self, path: &str) -> Result<BTreeMap<String, i128>, QuantityError> {
        let count = i128::from(self.count.max(0));
        let mut reqs = self.pod_requests(path)?;
        for v in reqs.values_mut() {
            *v = v.checked_mul(count).ok_or_else(|| QuantityError {
                field: format!("{path}.count"),
                value: self.count.to_string(),
                kind: QuantityErrorKind::Overflow,
            })?;
        }
        Ok(reqs)
    }
}

fn add(into: &mut BTreeMap<String, i128>, from: &BTreeMap<String, i128>) {
    for (name, v) in from {
        *into.entry(name.clone()).or_insert(0) += v;
    }
}

/// Requests of one container; a limit stands in for a missing request.
fn container_requests(c: &Container, path: &str) -> Result<BTreeMap<String, i128>, QuantityError> {
    let mut out = BTreeMap::new();
    let Some(resources) = &c.resources else {
        return Ok(out);
    };
    if let Some(limits) = &resources.limits {
        for (name, q) in limits {
            out.insert(
                name.clone(),
                non_negative(name, &format!("{path}.resources.limits[{name}]"), q)?,
            );
        }
    }
    if let Some(requests) = &resources.requests {
        for (name, q) in requests {
            out.insert(
                name.clone(),
                non_negative(name, &format!("{path}.resources.requests[{name}]"), q)?,
            );
        }
    }
    Ok(out)
}

/// A request of `resource` in engine units ([`crate::quantity::units_per_whole`]).
fn non_negative(resource: &str, path: &str, q: &Quantity) -> Result<i128, QuantityError> {
    crate::quantity::non_negative_amount(resource, path, q)
}

impl WorkloadStatus {
    /// The state implied by the conditions and `active`, for `status.state`.
    pub fn derive_state(&self, active: bool) -> WorkloadState {
        let c = &self.conditions;
        if is_condition_true(c, conditions::FINISHED) {
            WorkloadState::Finished
        } else if is_condition_true(c, conditions::EVICTED) && is_condition_true(c, conditions::QUOTA_RESERVED) {
            WorkloadState::Evicting
        } else if is_condition_true(c, conditions::ADMITTED) {
            WorkloadState::Admitted
        } else if is_condition_true(c, conditions::QUOTA_RESERVED) {
            WorkloadState::QuotaReserved
        } else if !active {
            WorkloadState::Inactive
        } else {
            WorkloadState::Pending
        }
    }

    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find_condition(&self.conditions, type_)
    }

    /// Whether the workload holds quota (QuotaReserved=True and not Finished).
    pub fn holds_quota(&self) -> bool {
        is_condition_true(&self.conditions, conditions::QUOTA_RESERVED)
            && !is_condition_true(&self.conditions, conditions::FINISHED)
    }
}

impl Workload {
    /// The derived state of this workload (see [`WorkloadStatus::derive_state`]).
    pub fn derived_state(&self) -> WorkloadState {
        self.status
            .as_ref()
            .map(|s| s.derive_state(self.spec.active))
            .unwrap_or(if self.spec.active {
                WorkloadState::Pending
            } else {
                WorkloadState::Inactive
            })
    }
}

impl Validate for Workload {
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        v.metadata_name(&self.metadata, false);
        let spec = &self.spec;
        v.dns1123_label("spec.queueName", &spec.queue_name);
        if let Some(name) = &spec.priority_class_name {
            v.dns1123_label("spec.priorityClassName", name);
        }
        if spec.pod_sets.is_empty() {
            v.push("spec.podSets", "must have at least one pod set");
        } else if spec.pod_sets.len() > MAX_POD_SETS {
            v.push("spec.podSets", format!("must have at most {MAX_POD_SETS} items"));
        }
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for (i, ps) in spec.pod_sets.iter().enumerate() {
            let path = format!("spec.podSets[{i}]");
            v.dns1123_label(&format!("{path}.name"), &ps.name);
            if !names.insert(ps.name.as_str()) {
                v.push(format!("{path}.name"), format!("duplicate pod set name {:?}", ps.name));
            }
            if ps.count < 1 {
                v.push(format!("{path}.count"), format!("must be at least 1, got {}", ps.count));
            }
            if let Some(min) = ps.min_count {
                if min < 1 {
                    v.push(format!("{path}.minCount"), format!("must be at least 1, got {min}"));
                } else if min > ps.count {
                    v.push(
                        format!("{path}.minCount"),
                        format!("must be at most count ({}), got {min}", ps.count),
                    );
                }
            }
            match &ps.template.spec {
                Some(pod) if !pod.containers.is_empty() => {
                    if let Err(e) = ps.pod_requests(&path) {
                        v.push(e.field, format!("quantity {:?} {}", e.value, e.kind));
                    }
                }
                _ => v.push(
                    format!("{path}.template.spec.containers"),
                    "must have at least one container",
                ),
            }
        }
        v.0
    }
}
