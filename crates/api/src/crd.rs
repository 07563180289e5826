//! The CustomResourceDefinitions of every Sluice kind.
//!
//! [`all`] returns them in a fixed order (ResourceFlavor, ClusterQueue,
//! Cohort, LocalQueue, WorkloadPriorityClass, Workload) so that generated files are
//! stable; `sluice crds` prints them and `crds/` holds them committed.
//!
//! Rules that span fields are CEL `x-kubernetes-validations`, which API
//! servers before 1.25 (or with the feature off) drop. Those that the
//! OpenAPI schema can state with `anyOf`, `not`, `required` and `enum` are
//! stated so too ([`without_cel`]), so that the API server itself refuses
//! such an object even without the webhook, on every supported version.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, JSONSchemaProps};
use kube::CustomResourceExt;
use serde_json::json;

use crate::v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};

/// Every Sluice CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut cluster_queue = ClusterQueue::crd();
    without_cel::limits_need(&mut cluster_queue, "cohort");
    without_cel::preemption_rules(&mut cluster_queue);
    let mut cohort = Cohort::crd();
    without_cel::limits_need(&mut cohort, "parent");
    vec![
        ResourceFlavor::crd(),
        cluster_queue,
        cohort,
        LocalQueue::crd(),
        WorkloadPriorityClass::crd(),
        Workload::crd(),
    ]
}

/// The CEL rules of ClusterQueue and Cohort that the OpenAPI schema can
/// also state, as `anyOf` branches (one of them must hold). Added to the
/// generated CRD, after kube's structural rewrite, which would hoist the
/// branches' properties. The webhook's `validate()` stays the rule of
/// record (with the better message); these make the API server refuse the
/// same objects when the webhook is not running and CEL is not there.
mod without_cel {
    use super::*;

    /// The schema at `path` (property names from the root) of a CRD's
    /// only version.
    fn at<'a>(crd: &'a mut CustomResourceDefinition, path: &[&str]) -> &'a mut JSONSchemaProps {
        let mut node = crd.spec.versions[0]
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .expect("a generated CRD has a schema");
        for name in path {
            node = node
                .properties
                .as_mut()
                .and_then(|p| p.get_mut(*name))
                .unwrap_or_else(|| panic!("the CRD's schema has no {path:?}"));
        }
        node
    }

    /// Sets `anyOf` on `node`: one of `branches` must hold. When none
    /// does, the API server (go-openapi) reports the failures of the branch
    /// that matched the most checks, the first one on a tie; so the first
    /// branch, whose failure says what to do (`spec.cohort: Required
    /// value`), also walks the other branch's path with checks that always
    /// hold there (names the schema already requires to be non-empty).
    fn any_of(node: &mut JSONSchemaProps, branches: serde_json::Value) {
        assert!(node.any_of.is_none(), "one anyOf rule per schema node");
        node.any_of = Some(serde_json::from_value(branches).expect("an OpenAPI schema"));
    }

    /// `borrowingLimit` and `lendingLimit` need `spec.<link>` (a
    /// ClusterQueue's cohort, a Cohort's parent): the spec has the link,
    /// or no resource of any flavor has a limit.
    pub(super) fn limits_need(crd: &mut CustomResourceDefinition, link: &str) {
        any_of(
            at(crd, &["spec"]),
            json!([
                {"required": [link], "properties": {"resourceGroups": {"items": {"properties": {"flavors": {"items": {"properties": {
                    "resources": {"items": {"properties": {"name": {"minLength": 1}}}}
                }}}}}}}},
                {"properties": {"resourceGroups": {"items": {"properties": {"flavors": {"items": {"properties": {
                    "resources": {"items": {"not": {"anyOf": [
                        {"required": ["borrowingLimit"]},
                        {"required": ["lendingLimit"]}
                    ]}}}
                }}}}}}}}
            ]),
        );
    }

    /// `borrowWithinCohort.policy` other than `Never` needs
    /// `reclaimWithinCohort` other than `Never`; `maxPriorityThreshold`
    /// needs `policy: LowerPriority`. (Defaults are applied before the
    /// schema is checked, so an unset field is its default here.)
    pub(super) fn preemption_rules(crd: &mut CustomResourceDefinition) {
        any_of(
            at(crd, &["spec", "preemption"]),
            json!([
                {"properties": {
                    "reclaimWithinCohort": {"enum": ["LowerPriority", "Any"]},
                    "borrowWithinCohort": {"properties": {"policy": {"minLength": 1}}}
                }},
                {"properties": {"borrowWithinCohort": {"properties": {"policy": {"enum": ["Never"]}}}}}
            ]),
        );
        any_of(
            at(crd, &["spec", "preemption", "borrowWithinCohort"]),
            json!([
                {"not": {"required": ["maxPriorityThreshold"]}},
                {"required": ["policy"], "properties": {"policy": {"enum": ["LowerPriority"]}}}
            ]),
        );
    }
}

/// File name for a CRD in `crds/`: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// Renders one CRD as a YAML document (no leading `---`).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

/// Renders every CRD as one multi-document YAML stream.
pub fn all_to_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}
