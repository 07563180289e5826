//! Helpers shared by the unit tests: recorded API payloads from the
//! repository's `tests/fixtures/` (through `sluice_kinds::testing`).

pub use sluice_kinds::testing::{fixture, flavor, job_fixture};

use serde_json::json;
use sluice_api::v1alpha1::{ClusterQueue, Cohort, LocalQueue};

/// A ClusterQueue with `gpus` GPUs of flavor `a100`, preempting lower
/// priorities, serving every namespace (`namespaceSelector: {}`).
pub fn cq(name: &str, gpus: u32) -> ClusterQueue {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                     {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus.to_string()}]}]}]}
    }))
    .unwrap()
}

pub fn lq(namespace: &str, name: &str, cluster_queue: &str) -> LocalQueue {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}
    }))
    .unwrap()
}

/// A Cohort holding `gpus` GPUs of flavor `a100`, under `parent` if given.
pub fn cohort(name: &str, parent: Option<&str>, gpus: u32) -> Cohort {
    let mut c: Cohort = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": name},
        "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                     {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus.to_string()}]}]}]}
    }))
    .unwrap();
    c.spec.parent = parent.map(String::from);
    c
}

/// A ClusterQueue of cohort `cohort` with no GPUs of its own (it borrows
/// all it uses), reclaiming from any peer.
pub fn borrowing_cq(name: &str, cohort: &str) -> ClusterQueue {
    let mut q = cq(name, 0);
    q.spec.cohort = Some(cohort.into());
    q.spec.preemption =
        serde_json::from_value(json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"})).unwrap();
    q
}
