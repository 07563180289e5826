//! Cohort: a node of a cohort tree. ClusterQueues name their cohort
//! (`spec.cohort`); a Cohort object gives that cohort a parent, quota of
//! its own and a fair-sharing weight. The shape is Kueue's
//! `kueue.x-k8s.io/v1beta1` Cohort, so its manifests carry over with a new
//! apiVersion.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys once per column,
// which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, FairSharingStatus};
use super::quota::{self, ResourceGroup};
use crate::validation::{DNS1123_SUBDOMAIN_PATTERN, Validate, Violation, Violations};

/// A Cohort gives the cohort of that name (the one ClusterQueues name in
/// `spec.cohort`) a parent cohort, quota of its own that the queues below
/// it may borrow, and a fair-sharing weight. A cohort without a Cohort
/// object exists while queues name it: no parent, no quota, weight 1.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "Cohort",
    plural = "cohorts",
    category = "sluice",
    status = "CohortStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Cohort gives the cohort of its name (named by ClusterQueues in spec.cohort) a parent cohort, quota of its own that the queues below it may borrow, and a fair-sharing weight.",
    printcolumn(
        name = "Parent",
        type_ = "string",
        json_path = ".spec.parent",
        description = "Parent cohort"
    ),
    printcolumn(
        name = "Active",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Active\")].status",
        description = "Whether its spec is in effect (False: see Reason)"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Active\")].reason",
        description = "Why the cohort is (in)active"
    ),
    printcolumn(
        name = "Weight",
        type_ = "string",
        json_path = ".spec.fairSharing.weight",
        description = "Fair-sharing weight"
    ),
    printcolumn(
        name = "Share",
        type_ = "integer",
        json_path = ".status.fairSharing.weightedShare",
        description = "Weighted share of what the parent can lend"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.parent) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit) && !has(r.lendingLimit))))",
        "message": "borrowingLimit and lendingLimit require spec.parent"
    }
]))]
pub struct CohortSpec {
    /// Name of the parent cohort. Unset: this cohort is the root of its
    /// tree. A parent without a Cohort object is a cohort with no quota of
    /// its own. A parent chain that leads back to this cohort is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub parent: Option<String>,
    /// Quota of the cohort itself, grouped as in a ClusterQueue. The queues
    /// below the cohort may borrow it. borrowingLimit and lendingLimit
    /// bound what the cohort's subtree takes from and gives to its parent,
    /// and require spec.parent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub resource_groups: Vec<ResourceGroup>,
    /// Its weight when it competes with the other members of its parent for
    /// unused quota (Kueue's `fairSharing`). Unset: weight 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// Observed state of a Cohort, written by the controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// The cohort's weighted share in fair sharing (Kueue's
    /// `status.fairSharing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
    /// Conditions of the cohort.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl Validate for Cohort {
    /// Everything that can be checked from the object alone; a parent chain
    /// through other Cohorts that leads back here needs those Cohorts (the
    /// webhook checks it).
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        v.metadata_name(&self.metadata, false);
        let spec = &self.spec;
        if let Some(parent) = &spec.parent {
            v.dns1123_subdomain("spec.parent", parent);
            if self.metadata.name.as_ref() == Some(parent) {
                v.push(
                    "spec.parent",
                    format!("{parent:?} is this cohort itself; a cohort cannot be its own parent"),
                );
            }
        }
        if let Some(fair) = &spec.fair_sharing {
            fair.validate_into(&mut v, "spec.fairSharing");
        }
        quota::validate_resource_groups(
            &mut v,
            &spec.resource_groups,
            quota::Owner {
                kind: "Cohort",
                link: "spec.parent",
                linked_to: "parent",
                linked: spec.parent.is_some(),
            },
        );
        v.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{SluiceObject, parse_manifests};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn cohort(yaml: &str) -> Cohort {
        match parse_manifests(yaml).unwrap().remove(0).as_sluice() {
            Some(SluiceObject::Cohort(c)) => c.clone(),
            other => panic!("not a Cohort: {other:?}"),
        }
    }

    /// A Kueue v1beta1 Cohort with its apiVersion changed reads as written.
    #[test]
    fn kueue_shape_reads_and_validates() {
        let c = cohort(
            r#"
apiVersion: sluice.dev/v1alpha1
kind: Cohort
metadata: {name: research}
spec:
  parent: company
  fairSharing: {weight: 2}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4, lendingLimit: 2}
"#,
        );
        assert_eq!(c.spec.parent.as_deref(), Some("company"));
        let fair = c.spec.fair_sharing.as_ref().unwrap();
        assert_eq!(fair.weight_milli("spec.fairSharing.weight"), Ok(2000));
        let quota = &c.spec.resource_groups[0].flavors[0].resources[0];
        assert_eq!(quota.lending_limit.as_ref().map(|q| q.0.as_str()), Some("2"));
        assert_eq!(c.validate(), []);
    }

    #[test]
    fn weight_is_a_non_negative_quantity_defaulting_to_one() {
        // Unset, or null (which the schema's nullable lets through): weight 1.
        for unset in ["{}", "{weight: null}"] {
            let c = cohort(&format!(
                "apiVersion: sluice.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: a}}\nspec: {{fairSharing: {unset}}}\n"
            ));
            let fair = c.spec.fair_sharing.unwrap();
            assert_eq!(
                (fair.weight.clone(), fair.weight_milli("w")),
                (None, Ok(1000)),
                "{unset}"
            );
        }
        for (weight, milli) in [
            ("0", 0),
            ("0.5", 500),
            ("500m", 500),
            ("1", 1000),
            ("3", 3000),
            ("1n", 1),
        ] {
            let c = cohort(&format!(
                "apiVersion: sluice.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: a}}\nspec: {{fairSharing: {{weight: \"{weight}\"}}}}\n"
            ));
            assert_eq!(c.validate(), [], "{weight}");
            let fair = c.spec.fair_sharing.unwrap();
            assert_eq!(fair.weight_milli("w"), Ok(milli), "{weight}");
        }
    }

    #[test]
    fn serialises_in_kueue_field_names() {
        let c = Cohort::new(
            "research",
            CohortSpec {
                parent: Some("company".into()),
                resource_groups: Vec::new(),
                fair_sharing: Some(FairSharing {
                    weight: Some(Quantity("2".into())),
                }),
            },
        );
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["spec"],
            serde_json::json!({"parent": "company", "fairSharing": {"weight": "2"}})
        );
        let status = CohortStatus {
            fair_sharing: Some(FairSharingStatus { weighted_share: 250 }),
            conditions: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::json!({"fairSharing": {"weightedShare": 250}})
        );
    }
}
