//! What a LocalQueue's status shows its users about the ClusterQueue behind
//! it and about its pending workloads: namespaced users cannot read
//! ClusterQueues or other namespaces' Workloads, so the controller copies
//! what they need here (`kubectl sluice queues`, `workloads`, `why`).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::StopPolicy;

/// At most this many pending workloads are listed in a LocalQueue's status.
pub const MAX_LISTED_PENDING: usize = 100;

/// A ClusterQueue as the users of one of its LocalQueues see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSummary {
    /// Name of the ClusterQueue.
    pub name: String,
    /// Its cohort, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// Its stop policy.
    #[serde(default)]
    pub stop_policy: StopPolicy,
    /// Workloads of every LocalQueue of it waiting for admission.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Workloads of every LocalQueue of it admitted and not finished.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Quota and usage per flavor, in the ClusterQueue's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub flavors: Vec<FlavorQuota>,
    /// Its budget now, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<super::usage::BudgetStatus>>,
}

/// Quota and usage of one flavor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuota {
    /// Name of the ResourceFlavor.
    pub name: String,
    /// Quota and usage of each resource the flavor covers.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub resources: Vec<ResourceQuotaUsage>,
}

/// Quota and usage of one resource of a flavor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuotaUsage {
    /// Name of the resource, e.g. `nvidia.com/gpu`.
    pub name: String,
    /// The ClusterQueue's nominal quota.
    pub nominal: Quantity,
    /// Most it may borrow from its cohort (unset: no limit of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// Held by its admitted workloads (including what is borrowed).
    pub used: Quantity,
    /// Part of `used` above nominal, borrowed from the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}

/// One pending workload of a LocalQueue, in queue order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkload {
    /// Name of the Workload (in the LocalQueue's namespace).
    pub name: String,
    /// Its priority.
    #[serde(default)]
    pub priority: i32,
    /// Position among the pending workloads of the ClusterQueue, from 1
    /// (the next to be admitted).
    pub position_in_cluster_queue: i32,
    /// Position among the pending workloads of the LocalQueue, from 1.
    pub position_in_local_queue: i32,
    /// Why it waits, in short (e.g. `InsufficientQuota`).
    #[serde(default)]
    pub reason: String,
    /// When it is expected to be admitted, if within the forecast's horizon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<Time>,
}
