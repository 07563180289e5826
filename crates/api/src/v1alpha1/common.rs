//! Types shared by several kinds: stop policy, usage reports, fair-sharing
//! weight and share, schema helpers.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::{MILLI_PER_UNIT, QuantityError, non_negative_milli};
use crate::validation::Violations;

/// Whether a queue accepts new admissions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum StopPolicy {
    /// The queue runs normally.
    #[default]
    None,
    /// No new workloads are admitted; admitted ones keep running.
    Hold,
    /// No new workloads are admitted and admitted ones are evicted.
    HoldAndDrain,
}

impl StopPolicy {
    /// Whether the queue admits new workloads.
    pub fn admits(self) -> bool {
        self == StopPolicy::None
    }
}

/// Usage of one flavor, per resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// Name of the ResourceFlavor.
    pub name: String,
    /// Usage of each resource of this flavor.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub resources: Vec<ResourceUsage>,
}

/// Usage of one resource of a flavor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// Name of the resource, e.g. `nvidia.com/gpu`.
    pub name: String,
    /// Amount of the resource held by admitted workloads (quota reserved).
    pub total: Quantity,
    /// Part of `total` above the nominal quota, borrowed from the cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}

/// Fair-sharing settings of a ClusterQueue or Cohort (Kueue's
/// `fairSharing`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// Weight against the other members of the same cohort when they
    /// compete for unused quota: the share (usage above nominal quota,
    /// relative to what the cohort can lend, for the dominant resource) is
    /// divided by it. A Kubernetes quantity such as `1`, `2`, `0.5` or
    /// `500m`, at least 0; 0 gives an infinite share to a member that
    /// borrows. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::optional_non_negative_quantity", extend("default" = "1"))]
    pub weight: Option<Quantity>,
}

impl FairSharing {
    /// The weight in milli-units (`1` is 1000, `500m` is 500; unset is
    /// 1000); `field` names it in the error when it is not a quantity or is
    /// negative.
    pub fn weight_milli(&self, field: &str) -> Result<i128, QuantityError> {
        match &self.weight {
            Some(w) => non_negative_milli(field, w),
            None => Ok(MILLI_PER_UNIT),
        }
    }

    pub(crate) fn validate_into(&self, v: &mut Violations, path: &str) {
        let field = format!("{path}.weight");
        if let Err(e) = self.weight_milli(&field) {
            v.push(field, format!("quantity {:?} {}", e.value, e.kind));
        }
    }
}

/// Fair-sharing state of a ClusterQueue or Cohort, written by the
/// controller (Kueue's `status.fairSharing`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// Its share of what its parent cohort can lend, in thousandths, for its
    /// dominant resource (usage above nominal quota), divided by its weight.
    /// 0 while it uses no more than its quota; 9223372036854775807 (the
    /// largest int64) when it borrows with weight 0.
    pub weighted_share: i64,
}

/// Schema for an embedded object kept as-is by the API server (a pod
/// template): the full PodTemplateSpec schema would make the CRD several
/// hundred kilobytes, and Kubernetes validates the pods themselves anyway.
pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A quantity that must not be negative (`16`, `512Gi`, `500m`): the API
/// server refuses `-8` itself, with or without the webhook and on servers
/// without CEL validation (Kubernetes' own quantity pattern, without `-`).
pub(crate) const NON_NEGATIVE_QUANTITY_PATTERN: &str =
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE]\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a non-negative quantity (see [`NON_NEGATIVE_QUANTITY_PATTERN`]).
pub(crate) fn non_negative_quantity(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "minimum": 0,
        "pattern": NON_NEGATIVE_QUANTITY_PATTERN,
    })
}

/// [`non_negative_quantity`], optional.
pub(crate) fn optional_non_negative_quantity(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    non_negative_quantity(g)
}

/// Schema for a map from resource name to quantity, without repeating the
/// long Quantity description on every value.
pub(crate) fn quantity_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-int-or-string": true },
    })
}

/// Finds a condition by type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}
