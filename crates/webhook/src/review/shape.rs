//! The shape of a queued object: how many pods each of its parts runs at
//! once, and what one pod of each template asks for. While an object runs,
//! its admission covers the shape it had when it started; an update that
//! asks for more (a scaled Job, more JobSet replicas, a larger pod) is
//! refused here, and the controller suspends and requeues an object that
//! grew anyway (it never relies on this check).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use kube::core::DynamicObject;
use serde_json::Value;
use sluice_api::v1alpha1::PodSet;

use super::jobs::Queued;

/// One count of an object: where it is (its field path) and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Count {
    pub field: String,
    pub value: i64,
}

impl Queued {
    /// The counts of pods `obj` runs at once, by field: a Job's
    /// `min(parallelism, completions)`, each replicated Job's `replicas` ×
    /// its Job's parallelism, each Kubeflow role's `replicas`, each Ray
    /// worker group's `replicas`, `minReplicas` and `maxReplicas` (each × `numOfHosts`).
    pub fn counts(self, obj: &DynamicObject) -> Vec<Count> {
        let d = &obj.data;
        match self {
            Queued::Job => vec![Count {
                field: "spec.parallelism".into(),
                value: job_pods(d.get("spec")),
            }],
            Queued::JobSet => list(d.pointer("/spec/replicatedJobs"))
                .iter()
                .enumerate()
                .map(|(i, rj)| Count {
                    field: format!("spec.replicatedJobs[{i}] ({}).replicas × parallelism", name_of(rj)),
                    value: int(rj.get("replicas"), 1) * job_pods(rj.pointer("/template/spec")),
                })
                .collect(),
            Queued::PyTorchJob | Queued::MpiJob => {
                let field = self.roles_field().unwrap_or_default();
                d.pointer(&format!("/spec/{field}"))
                    .and_then(Value::as_object)
                    .map(|roles| {
                        roles
                            .iter()
                            .map(|(role, spec)| Count {
                                field: format!("spec.{field}.{role}.replicas"),
                                value: int(spec.get("replicas"), 1),
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            }
            Queued::RayJob => list(d.pointer("/spec/rayClusterSpec/workerGroupSpecs"))
                .iter()
                .enumerate()
                .flat_map(|(i, g)| {
                    let hosts = int(g.get("numOfHosts"), 1);
                    ["replicas", "minReplicas", "maxReplicas"].map(|f| Count {
                        field: format!(
                            "spec.rayClusterSpec.workerGroupSpecs[{i}] ({}).{f} × numOfHosts",
                            group_name(g)
                        ),
                        value: int(g.get(f), 0) * hosts,
                    })
                })
                .collect(),
        }
    }

    /// What one pod of each template asks for (milli-units), by the
    /// template's field path; a template that cannot be read is left out
    /// (the API server validates pod templates).
    pub fn pod_requests(self, obj: &DynamicObject) -> BTreeMap<String, BTreeMap<String, i128>> {
        self.templates(obj)
            .into_iter()
            .filter_map(|(at, _)| {
                let spec: PodSpec = serde_json::from_value(obj.data.pointer(at.pointer.as_str())?.clone()).ok()?;
                let ps = PodSet {
                    name: String::new(),
                    count: 1,
                    min_count: None,
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(spec),
                    },
                    topology: None,
                };
                Some((at.field.clone(), ps.pod_requests(&at.field).ok()?))
            })
            .collect()
    }
}

/// Where `new` asks for more than `old` of `kind`: each in words, with the
/// field.
pub fn grown(kind: Queued, old: &DynamicObject, new: &DynamicObject) -> Vec<String> {
    let before = kind.counts(old);
    let mut out: Vec<String> = kind
        .counts(new)
        .into_iter()
        .filter_map(|c| {
            let was = before.iter().find(|b| b.field == c.field).map_or(0, |b| b.value);
            (c.value > was).then(|| format!("{}: {} pods at once, was {was}", c.field, c.value))
        })
        .collect();
    let before = kind.pod_requests(old);
    for (field, reqs) in kind.pod_requests(new) {
        let was = before.get(&field);
        for (resource, amount) in reqs {
            let had = was.and_then(|w| w.get(&resource)).copied().unwrap_or(0);
            if amount > had {
                out.push(format!(
                    "{field}: a pod asks for {} of {resource}, was {}",
                    milli(amount),
                    milli(had)
                ));
            }
        }
    }
    out
}

fn milli(v: i128) -> String {
    if v % 1000 == 0 {
        (v / 1000).to_string()
    } else {
        format!("{v}m")
    }
}

fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default)
}

/// A batch/v1 Job spec's pods at once: `min(parallelism, completions)`.
fn job_pods(spec: Option<&Value>) -> i64 {
    let spec = spec.unwrap_or(&Value::Null);
    let p = int(spec.get("parallelism"), 1);
    spec.get("completions").and_then(Value::as_i64).map_or(p, |c| p.min(c))
}

fn name_of(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or("")
}

fn group_name(v: &Value) -> &str {
    v.get("groupName").and_then(Value::as_str).unwrap_or("")
}
