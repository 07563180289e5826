//! ResourceFlavor: one kind of node a quota can be spent on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{Validate, Violation, Violations, is_label_value};

/// At most this many node labels, node taints or tolerations per flavor.
pub const MAX_FLAVOR_LABELS_OR_TAINTS: usize = 8;

/// A ResourceFlavor names a kind of node (a GPU model, a MIG profile, a node
/// pool) so that ClusterQueues can give quota per kind. When a workload is
/// admitted on a flavor, the flavor's node labels become the pods'
/// nodeSelector and its tolerations are added to the pods.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "ResourceFlavor",
    plural = "resourceflavors",
    shortname = "rf",
    category = "sluice",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceFlavor names a kind of node (a GPU model, a MIG profile, a node pool) that ClusterQueues give quota for. Admission on a flavor adds its node labels to the pods' nodeSelector and its tolerations to the pods."
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels that identify the flavor's nodes, e.g.
    /// `nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB`. Pods admitted on this
    /// flavor get them as nodeSelector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 8))]
    pub node_labels: BTreeMap<String, String>,
    /// Taints carried by the flavor's nodes, e.g.
    /// `nvidia.com/gpu=present:NoSchedule`. A workload is only admitted on
    /// this flavor if its pods tolerate them (or the flavor's tolerations do).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub node_taints: Vec<Taint>,
    /// Tolerations added to pods admitted on this flavor, typically matching
    /// `nodeTaints`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub tolerations: Vec<Toleration>,
    /// Node label whose values are the flavor's topology domains (a rack,
    /// block or NVLink domain, e.g. `topology.kubernetes.io/zone` or
    /// `nvidia.com/gpu.clique`). A pod set that requires one domain
    /// (`sluice.dev/topology: required`) is placed within one value of it,
    /// and its pods are pinned there. Unset: the flavor is one domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub topology_key: Option<String>,
    /// Which GPU requests this flavor takes when its nodes share each GPU
    /// (time-slicing or MPS: the node label `nvidia.com/gpu.replicas`
    /// above 1, on the flavor's node labels or on its nodes). `Marked`
    /// (the default): only pod sets whose node selector names
    /// `nvidia.com/gpu.sharing-strategy` or `nvidia.com/gpu.replicas`; a
    /// pod set that asks for whole GPUs never gets a replica. `All`: any
    /// GPU request, each GPU a replica.
    #[serde(default, skip_serializing_if = "is_marked")]
    pub shared_gpu_requests: SharedGpuRequests,
}

/// Which GPU requests a flavor whose nodes share their GPUs takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SharedGpuRequests {
    /// Only pod sets that select shared GPUs by node label.
    #[default]
    Marked,
    /// Any GPU request.
    All,
}

fn is_marked(v: &SharedGpuRequests) -> bool {
    *v == SharedGpuRequests::Marked
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Validate for ResourceFlavor {
    fn validate(&self) -> Vec<Violation> {
        let mut v = Violations::default();
        v.metadata_name(&self.metadata, false);
        let spec = &self.spec;
        node_labels(&mut v, &spec.node_labels);
        node_taints(&mut v, &spec.node_taints);
        if let Some(key) = &spec.topology_key {
            v.qualified_name("spec.topologyKey", key);
        }
        tolerations(&mut v, &spec.tolerations);
        v.0
    }
}

/// `spec.nodeLabels`: at most so many, each a qualified name and a label
/// value.
fn node_labels(v: &mut Violations, labels: &BTreeMap<String, String>) {
    if labels.len() > MAX_FLAVOR_LABELS_OR_TAINTS {
        v.push(
            "spec.nodeLabels",
            format!("must have at most {MAX_FLAVOR_LABELS_OR_TAINTS} entries"),
        );
    }
    for (key, value) in labels {
        let path = format!("spec.nodeLabels[{key}]");
        v.qualified_name(&path, key);
        if !is_label_value(value) {
            v.push(path, format!("{value:?} is not a valid label value"));
        }
    }
}

/// `spec.nodeTaints`: at most so many, each with a qualified key, a label
/// value and a known effect.
fn node_taints(v: &mut Violations, taints: &[Taint]) {
    if taints.len() > MAX_FLAVOR_LABELS_OR_TAINTS {
        v.push(
            "spec.nodeTaints",
            format!("must have at most {MAX_FLAVOR_LABELS_OR_TAINTS} items"),
        );
    }
    for (i, taint) in taints.iter().enumerate() {
        let path = format!("spec.nodeTaints[{i}]");
        v.qualified_name(&format!("{path}.key"), &taint.key);
        if let Some(value) = &taint.value
            && !is_label_value(value)
        {
            v.push(format!("{path}.value"), format!("{value:?} is not a valid label value"));
        }
        if !TAINT_EFFECTS.contains(&taint.effect.as_str()) {
            v.push(
                format!("{path}.effect"),
                format!(
                    "{:?} is not one of NoSchedule, PreferNoSchedule, NoExecute",
                    taint.effect
                ),
            );
        }
    }
}

/// `spec.tolerations`: at most so many, each valid as a pod's toleration.
fn tolerations(v: &mut Violations, tolerations: &[Toleration]) {
    if tolerations.len() > MAX_FLAVOR_LABELS_OR_TAINTS {
        v.push(
            "spec.tolerations",
            format!("must have at most {MAX_FLAVOR_LABELS_OR_TAINTS} items"),
        );
    }
    for (i, toleration) in tolerations.iter().enumerate() {
        toleration_rules(v, &format!("spec.tolerations[{i}]"), toleration);
    }
}

/// A key that is a qualified name (set when the operator is Equal), no
/// value with Exists, and a known operator and effect.
fn toleration_rules(v: &mut Violations, path: &str, toleration: &Toleration) {
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() {
        v.qualified_name(&format!("{path}.key"), key);
    }
    let value = toleration.value.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Equal" => {
            if key.is_empty() {
                v.push(format!("{path}.key"), "must be set when operator is Equal");
            }
        }
        "Exists" => {
            if !value.is_empty() {
                v.push(format!("{path}.value"), "must be empty when operator is Exists");
            }
        }
        other => v.push(
            format!("{path}.operator"),
            format!("{other:?} is not one of Equal, Exists"),
        ),
    }
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && !TAINT_EFFECTS.contains(&effect)
    {
        v.push(
            format!("{path}.effect"),
            format!("{effect:?} is not one of NoSchedule, PreferNoSchedule, NoExecute"),
        );
    }
}
