//! Nodes and the pods bound to them, as the engine's placement sees them:
//! a node's labels, scheduling taints, allocatable and whether new pods
//! may go there; a pod's node, requests (as the scheduler counts them) and
//! whether it is terminating.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::api::core::v1::{Node, Pod};
use sluice_api::quantity;
use sluice_api::v1alpha1::PodSet;
use sluice_scheduler as eng;

use crate::adapter::{AdapterError, narrow, taint};

/// A Node as the engine sees it. It is schedulable unless cordoned
/// (`spec.unschedulable`) or not `Ready=True`.
pub fn node(n: &Node) -> Result<eng::NodeSpec, AdapterError> {
    let name = n.metadata.name.clone().ok_or_else(|| AdapterError::Missing {
        field: "metadata.name".into(),
    })?;
    let spec = n.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.taints[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let status = n.status.as_ref();
    let mut allocatable = BTreeMap::new();
    for (r, q) in status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten() {
        let field = format!("status.allocatable[{r}]");
        let units = quantity::parse_amount(r, &field, &q.0)?;
        allocatable.insert(r.clone(), narrow(&field, units)?.max(0));
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    Ok(eng::NodeSpec {
        name,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        allocatable,
        schedulable: ready && !cordoned,
    })
}

/// What a bound pod takes on its node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundPod {
    pub node: String,
    /// Requests as the scheduler counts them (containers, init containers,
    /// overhead), milli-units, with `pods: 1000`.
    pub requests: BTreeMap<String, eng::Amount>,
    /// It has a deletion timestamp: gone soon.
    pub terminating: bool,
}

/// A pod that is bound to a node and not finished, or `None` (not bound,
/// or `Succeeded`/`Failed`: it holds nothing).
pub fn bound_pod(p: &Pod) -> Result<Option<BoundPod>, AdapterError> {
    let Some(spec) = &p.spec else { return Ok(None) };
    let Some(node) = spec.node_name.clone().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return Ok(None);
    }
    let set = PodSet {
        name: "pod".into(),
        count: 1,
        min_count: None,
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(spec.clone()),
        },
        topology: None,
    };
    let mut requests = BTreeMap::new();
    for (r, v) in set.pod_requests("pod")? {
        let field = format!("spec (requests of {r})");
        let v = narrow(&field, v)?;
        if v > 0 {
            requests.insert(r, v);
        }
    }
    requests.insert("pods".to_string(), 1000);
    Ok(Some(BoundPod {
        node,
        requests,
        terminating: p.metadata.deletion_timestamp.is_some(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node_json(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("node")
    }

    #[test]
    fn a_ready_gpu_node_with_its_taints_and_allocatable() {
        let n = node_json(json!({
            "metadata": {"name": "gpu-1", "labels": {"rack": "r1"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"nvidia.com/gpu": "8", "cpu": "95500m", "memory": "1Ti", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }));
        let spec = node(&n).unwrap();
        assert_eq!(spec.name, "gpu-1");
        assert_eq!(spec.labels["rack"], "r1");
        assert!(spec.schedulable);
        assert_eq!(spec.allocatable["nvidia.com/gpu"], 8000);
        assert_eq!(spec.allocatable["cpu"], 95_500);
        assert_eq!(spec.allocatable["pods"], 110_000);
        assert_eq!(spec.taints.len(), 1);
        assert_eq!(spec.taints[0].effect, eng::TaintEffect::NoSchedule);
    }

    #[test]
    fn cordoned_or_not_ready_nodes_take_nothing_new() {
        let cordoned = node_json(json!({
            "metadata": {"name": "a"}, "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }));
        assert!(!node(&cordoned).unwrap().schedulable);
        let not_ready = node_json(json!({
            "metadata": {"name": "b"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}
        }));
        assert!(!node(&not_ready).unwrap().schedulable);
    }

    #[test]
    fn a_bad_quantity_names_the_field() {
        let n = node_json(json!({
            "metadata": {"name": "a"},
            "status": {"allocatable": {"nvidia.com/gpu": "eight"}}
        }));
        let err = node(&n).unwrap_err().to_string();
        assert!(err.contains("status.allocatable[nvidia.com/gpu]"), "{err}");
    }

    #[test]
    fn bound_pods_count_requests_and_one_pod() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "gpu-1", "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "4"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}}
            ]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let b = bound_pod(&p).unwrap().unwrap();
        assert_eq!(b.node, "gpu-1");
        assert_eq!(b.requests["cpu"], 1500);
        assert_eq!(b.requests["nvidia.com/gpu"], 4000);
        assert_eq!(b.requests["pods"], 1000);
        assert!(b.terminating);
    }

    #[test]
    fn unbound_or_finished_pods_hold_nothing() {
        let unbound: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}
        }))
        .unwrap();
        assert_eq!(bound_pod(&unbound).unwrap(), None);
        let done: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap();
        assert_eq!(bound_pod(&done).unwrap(), None);
    }
}
