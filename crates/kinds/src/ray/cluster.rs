//! A KubeRay cluster spec (a head group and worker groups), as a RayCluster
//! holds it at `spec` and a RayJob at `spec.rayClusterSpec`: the pods
//! KubeRay runs for it, where its templates are, and what a queued one
//! must not be.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sluice_api::v1alpha1::workload::MAX_POD_SETS;

use super::HEAD;
use crate::job::JobView;
use crate::placed::Placed;
use crate::shape::{self, TemplateAt};

/// Where a cluster spec is in its object: a JSON pointer and the field
/// path users read.
#[derive(Clone, Copy)]
pub(crate) struct At {
    pub(crate) pointer: &'static str,
    pub(crate) field: &'static str,
}

/// A RayCluster's own spec.
pub(crate) const IN_RAYCLUSTER: At = At {
    pointer: "/spec",
    field: "spec",
};

/// The cluster a RayJob makes.
pub(crate) const IN_RAYJOB: At = At {
    pointer: "/spec/rayClusterSpec",
    field: "spec.rayClusterSpec",
};

impl At {
    fn workers<'a>(&self, obj: &'a Value) -> &'a [Value] {
        shape::list(obj.pointer(&format!("{}/workerGroupSpecs", self.pointer)))
    }
}

/// The pods KubeRay runs for a worker group: `replicas` (its CRD
/// defaults it to `minReplicas`) clamped to [`minReplicas`,
/// `maxReplicas`], × `numOfHosts`; none while the group's `suspend` is
/// true.
pub(crate) fn worker_pods(g: &Value) -> i64 {
    if g.get("suspend") == Some(&Value::Bool(true)) {
        return 0;
    }
    let min = shape::int(g.get("minReplicas"), 0);
    let max = shape::int(g.get("maxReplicas"), i64::from(i32::MAX));
    let replicas = g.get("replicas").and_then(Value::as_i64).unwrap_or(min);
    let replicas = if replicas < min {
        min
    } else if replicas > max {
        max
    } else {
        replicas
    };
    replicas.saturating_mul(shape::int(g.get("numOfHosts"), 1))
}

/// The head group's pod template, then each worker group's.
pub(crate) fn templates(obj: &Value, at: At) -> Vec<TemplateAt> {
    let head = TemplateAt::at(
        &format!("{}/headGroupSpec/template", at.pointer),
        &format!("{}.headGroupSpec.template", at.field),
    );
    let workers = (0..at.workers(obj).len()).map(|i| {
        TemplateAt::at(
            &format!("{}/workerGroupSpecs/{i}/template", at.pointer),
            &format!("{}.workerGroupSpecs[{i}].template", at.field),
        )
    });
    std::iter::once(head).chain(workers).collect()
}

/// Where each group's pod template is in a view's object: the head's,
/// then each worker group's, guarded by its `groupName`.
pub(crate) fn placed(view: &JobView, at: At) -> Vec<Placed<'_>> {
    view.templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i == 0 {
                Placed {
                    template: t,
                    spec: format!("{}/headGroupSpec/template/spec", at.pointer),
                    guard: None,
                }
            } else {
                let group = format!("{}/workerGroupSpecs/{}", at.pointer, i - 1);
                Placed {
                    template: t,
                    spec: format!("{group}/template/spec"),
                    guard: Some((format!("{group}/groupName"), json!(t.key))),
                }
            }
        })
        .collect()
}

/// What a queued `noun`'s cluster must not be, as (field, problem): scaled
/// by the Ray autoscaler (it would grow its worker groups past what was
/// admitted), a worker group whose lower-case name is the head's, not a
/// pod set name, or an earlier group's, or more worker groups than a
/// Workload holds pod sets beside the head.
pub(crate) fn problems(obj: &Value, at: At, noun: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if obj.pointer(&format!("{}/enableInTreeAutoscaling", at.pointer)) == Some(&Value::Bool(true)) {
        out.push((
            format!("{}.enableInTreeAutoscaling", at.field),
            format!("must not be true for a queued {noun}: the Ray autoscaler would scale its worker groups past what Sluice admitted; set it to false and size each worker group with replicas"),
        ));
    }
    let groups = at.workers(obj);
    let mut seen = BTreeSet::new();
    for (i, g) in groups.iter().enumerate() {
        let name = g.get("groupName").and_then(Value::as_str).unwrap_or("");
        let pod_set = name.to_ascii_lowercase();
        let field = format!("{}.workerGroupSpecs[{i}].groupName", at.field);
        if pod_set == HEAD {
            out.push((
                field,
                format!("{name:?} is the head's pod set; a queued {noun}'s worker group must have another name"),
            ));
        } else if pod_set.is_empty() || !pod_set.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            out.push((
                field,
                format!("{name:?} must be letters, digits and '-' (in lower case it names a pod set)"),
            ));
        } else if !seen.insert(pod_set.clone()) {
            out.push((
                field,
                format!("{name:?} names pod set {pod_set:?}, as an earlier worker group does (pod set names are the group names in lower case)"),
            ));
        }
    }
    if 1 + groups.len() > MAX_POD_SETS {
        out.push((
            format!("{}.workerGroupSpecs", at.field),
            format!(
                "has {} worker groups: with the head that is {} pod sets, and a queued {noun} may have at most {MAX_POD_SETS} (the head and {} worker groups), the most a Workload holds",
                groups.len(),
                1 + groups.len(),
                MAX_POD_SETS - 1
            ),
        ));
    }
    out
}
