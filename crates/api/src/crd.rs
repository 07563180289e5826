//! The CustomResourceDefinitions of every Sluice kind.
//!
//! [`all`] returns them in a fixed order (ResourceFlavor, ClusterQueue,
//! Cohort, LocalQueue, WorkloadPriorityClass, Workload) so that generated files are
//! stable; `sluice crds` prints them and `crds/` holds them committed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};

/// Every Sluice CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        ResourceFlavor::crd(),
        ClusterQueue::crd(),
        Cohort::crd(),
        LocalQueue::crd(),
        WorkloadPriorityClass::crd(),
        Workload::crd(),
    ]
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
