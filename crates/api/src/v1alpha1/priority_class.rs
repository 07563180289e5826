//! WorkloadPriorityClass: a named priority for queueing and preemption.
//!
//! Shaped like Kubernetes' own PriorityClass (and Kueue's
//! WorkloadPriorityClass): `value` and `description` sit at the top level of
//! the object, not under `spec`. On the Rust side they are still in
//! [`WorkloadPriorityClass::spec`].

// kube's `printcolumn(name = .., type_ = ..)` repeats keys once per column,
// which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{Validate, Violation, Violations};

/// Highest value a WorkloadPriorityClass may have. Larger values are
/// reserved, as for Kubernetes PriorityClasses.
pub const MAX_PRIORITY_VALUE: i32 = 1_000_000_000;
/// Lowest value a WorkloadPriorityClass may have.
pub const MIN_PRIORITY_VALUE: i32 = -MAX_PRIORITY_VALUE;

/// A WorkloadPriorityClass gives Jobs that name it (label
/// `sluice.dev/priority-class`) a priority for queue order and preemption,
/// without changing the pods' Kubernetes priority.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "WorkloadPriorityClass",
    plural = "workloadpriorityclasses",
    shortname = "wpc",
    category = "sluice",
    no_spec,
    derive = "PartialEq",
    derive = "Default",
    doc = "WorkloadPriorityClass is a named priority that Jobs select with the sluice.dev/priority-class label; it orders queues and decides preemption without changing the pods' Kubernetes priority.",
    printcolumn(
        name = "Value",
        type_ = "integer",
        json_path = ".value",
        description = "Priority value; higher is more important"
    ),
    printcolumn(
        name = "Description",
        type_ = "string",
        json_path = ".description",
        description = "What the class is for",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClassSpec {
    /// Priority of workloads using this class; higher values are admitted
    /// first and may preempt lower ones. From -1000000000 to 1000000000.
    #[schemars(range(min = -1_000_000_000, max = 1_000_000_000))]
    pub value: i32,
    /// What the class is for, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 2048))]
    pub description: String,
}

impl Validate for WorkloadPriorityClass {
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        // The name is used as a label value (`sluice.dev/priority-class`).
        v.metadata_name(&self.metadata, true);
        if !(MIN_PRIORITY_VALUE..=MAX_PRIORITY_VALUE).contains(&self.spec.value) {
            v.push(
                "value",
                format!(
                    "must be between {MIN_PRIORITY_VALUE} and {MAX_PRIORITY_VALUE}, got {}",
                    self.spec.value
                ),
            );
        }
        if self.spec.description.len() > 2048 {
            v.push("description", "must be at most 2048 characters");
        }
        v.0
    }
}
