//! LocalQueue: the namespaced entry point that Jobs name in their
//! `sluice.dev/queue` label.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys once per column,
// which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FlavorUsage, StopPolicy};
use super::usage::UsageStatus;
use super::visibility::{ClusterQueueSummary, PendingWorkload};
use crate::validation::{DNS1123_SUBDOMAIN_PATTERN, Validate, Violation, Violations};

/// A LocalQueue lives in a team's namespace and sends the workloads queued
/// in it to one ClusterQueue.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "LocalQueue",
    plural = "localqueues",
    namespaced,
    shortname = "lq",
    category = "sluice",
    status = "LocalQueueStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "LocalQueue is the namespaced queue that Jobs name in their sluice.dev/queue label; it sends their workloads to one ClusterQueue and reports their progress to users of the namespace.",
    printcolumn(
        name = "ClusterQueue",
        type_ = "string",
        json_path = ".spec.clusterQueue",
        description = "ClusterQueue that admits this queue's workloads"
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
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// Name of the ClusterQueue that admits this queue's workloads. Cannot be
    /// changed; delete and recreate the LocalQueue instead.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    #[schemars(extend("x-kubernetes-validations" = [
        { "rule": "self == oldSelf", "message": "clusterQueue is immutable" }
    ]))]
    pub cluster_queue: String,
    /// `None` (default): the queue runs normally. `Hold`: its workloads are
    /// not admitted, admitted ones keep running. `HoldAndDrain`: not
    /// admitted, and admitted ones are evicted.
    #[serde(default)]
    pub stop_policy: StopPolicy,
}

/// Observed state of a LocalQueue, written by the controller. It shows
/// namespaced users what they may not see on the ClusterQueue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Number of this queue's workloads waiting for admission.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Number of this queue's workloads admitted and not yet finished.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota used by this queue's admitted workloads, per flavor and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub flavors_usage: Vec<FlavorUsage>,
    /// Conditions of the queue; `Active` tells whether its ClusterQueue
    /// exists and admits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The ClusterQueue behind this queue: its quota and usage per flavor,
    /// its counts and stop policy (users of the namespace may not read
    /// ClusterQueues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<ClusterQueueSummary>,
    /// This queue's first pending workloads in queue order (at most 100),
    /// with positions, reason and estimated start; refreshed at most once a
    /// minute (see `pendingAsOf`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub pending: Vec<PendingWorkload>,
    /// When `pending` was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_as_of: Option<Time>,
    /// Resource-hours this queue's workloads used over time, per flavor
    /// and resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<UsageStatus>>,
}

impl Validate for LocalQueue {
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        // The name is used as a label value (`sluice.dev/queue`): a DNS-1123 label.
        v.metadata_name(&self.metadata, true);
        v.dns1123_subdomain("spec.clusterQueue", &self.spec.cluster_queue);
        v.0
    }
}

impl LocalQueue {
    /// The rule the schema expresses with CEL `self == oldSelf`: an update may
    /// not change `spec.clusterQueue`. For the webhook's UPDATE path.
    pub fn validate_update(&self, old: &LocalQueue) -> Vec<Violation> {
        let mut violations = self.validate();
        if self.spec.cluster_queue != old.spec.cluster_queue {
            violations.push(Violation::new(
                "spec.clusterQueue",
                format!(
                    "is immutable (was {:?}); delete and recreate the LocalQueue to change it",
                    old.spec.cluster_queue
                ),
            ));
        }
        violations
    }
}
