//! `ray.io/v1` RayCluster, as pure functions over its JSON: a long-running
//! Ray cluster queued on its own (a RayJob's cluster is its RayJob's, see
//! [`Queueable::made_by`]).
//!
//! - Workload `raycluster-<name>`: a pod set `head` (1 pod of
//!   `spec.headGroupSpec.template`) and one per `spec.workerGroupSpecs[i]`,
//!   named after its `groupName` in lower case, of the pods KubeRay runs for
//!   it (`GetWorkerGroupDesiredReplicas`): `replicas` clamped to
//!   [`minReplicas`, `maxReplicas`], × `numOfHosts`, and none while the
//!   group's own `suspend` is true. Nil as KubeRay reads it: `replicas`
//!   → `minReplicas` (KubeRay's CRD defaults it to 0), `minReplicas` → 0,
//!   `maxReplicas` → unbounded, `numOfHosts` → 1. A group of no pods is no
//!   pod set. Controller owner reference to the RayCluster.
//! - Queued only without the in-tree autoscaler
//!   (`spec.enableInTreeAutoscaling: true` would grow it past its
//!   admission), with no worker group named `head`, and with at most
//!   [`MAX_POD_SETS`] groups (head included): the webhook refuses others,
//!   and the controller makes no Workload for them.
//! - Suspended and resumed through `spec.suspend` (KubeRay deletes every
//!   pod of a suspended cluster and creates them again on resume).
//! - Admission injects each group's flavors into its pod template with one
//!   JSON patch, every worker group's position guarded by a `test` of its
//!   `groupName` (see `placed`); restored on eviction.
//! - Never finished: it runs until it is deleted (or suspended), and its
//!   Workload holds its quota until then. Ready: `status.state` `ready`.
//! - Its pods carry [`CLUSTER_LABEL`] with its name.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_api::v1alpha1::workload::MAX_POD_SETS;
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView};
use crate::placed::Placed;
use crate::ray::{CLUSTER_LABEL, HEAD};
use crate::shape::{self, Count, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource, object};

#[derive(Debug, Deserialize)]
struct RayCluster {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    suspend: Option<bool>,
    head_group_spec: HeadGroup,
    #[serde(default)]
    worker_group_specs: Vec<WorkerGroup>,
}

#[derive(Debug, Deserialize)]
struct HeadGroup {
    template: PodTemplateSpec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerGroup {
    group_name: String,
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    min_replicas: Option<i32>,
    #[serde(default)]
    max_replicas: Option<i32>,
    #[serde(default)]
    num_of_hosts: Option<i32>,
    template: PodTemplateSpec,
}

/// The pods KubeRay runs for a worker group (its
/// `GetWorkerGroupDesiredReplicas`), from the group's JSON.
fn group_pods(g: &Value) -> i64 {
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

/// A group of the cluster: the head, or a worker group.
struct Group {
    pod_set: String,
    /// Its `groupName` (the head's: `head`).
    key: String,
    pods: i32,
    template: PodTemplateSpec,
}

struct Parsed {
    metadata: ObjectMeta,
    suspend: bool,
    /// The head first, then the worker groups in their order.
    groups: Vec<Group>,
}

/// Reads a RayCluster as KubeRay would run it; what only a queued one must
/// satisfy is [`queue_problems`]'s.
fn parse(obj: &Value) -> Result<Parsed, JobError> {
    let rc: RayCluster = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "RayCluster".into(),
        problem: e.to_string(),
    })?;
    let spec = rc.spec.ok_or(JobError::Missing { field: "spec" })?;
    let raw = shape::list(obj.pointer("/spec/workerGroupSpecs"));
    let mut groups = vec![Group {
        pod_set: HEAD.to_string(),
        key: HEAD.to_string(),
        pods: 1,
        template: spec.head_group_spec.template,
    }];
    for (i, (g, json)) in spec.worker_group_specs.into_iter().zip(raw).enumerate() {
        let field = format!("spec.workerGroupSpecs[{i}]");
        for (what, v) in [
            ("replicas", g.replicas),
            ("minReplicas", g.min_replicas),
            ("maxReplicas", g.max_replicas),
        ] {
            if let Some(n) = v.filter(|n| *n < 0) {
                return Err(JobError::Invalid {
                    field: format!("{field}.{what}"),
                    problem: format!("{n} must not be negative"),
                });
            }
        }
        if let Some(h) = g.num_of_hosts.filter(|h| *h < 1) {
            return Err(JobError::Invalid {
                field: format!("{field}.numOfHosts"),
                problem: format!("{h} must be at least 1"),
            });
        }
        groups.push(Group {
            pod_set: g.group_name.to_ascii_lowercase(),
            key: g.group_name,
            pods: i32::try_from(group_pods(json)).unwrap_or(i32::MAX),
            template: g.template,
        });
    }
    Ok(Parsed {
        metadata: rc.metadata,
        suspend: spec.suspend.unwrap_or(false),
        groups,
    })
}

/// Why a RayCluster cannot be queued, each with its field: the in-tree
/// autoscaler on, a worker group named `head` or not fit to name a pod set,
/// two groups of one pod set name, more groups than a Workload has pod
/// sets.
fn queue_problems(obj: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if obj.pointer("/spec/enableInTreeAutoscaling") == Some(&Value::Bool(true)) {
        out.push((
            "spec.enableInTreeAutoscaling".to_owned(),
            "must not be true for a queued RayCluster: the Ray autoscaler would scale its worker groups past what Sluice admitted; set it to false and size each worker group with replicas".to_owned(),
        ));
    }
    let groups = shape::list(obj.pointer("/spec/workerGroupSpecs"));
    let mut seen = BTreeSet::new();
    for (i, g) in groups.iter().enumerate() {
        let name = g.get("groupName").and_then(Value::as_str).unwrap_or("");
        let pod_set = name.to_ascii_lowercase();
        let field = format!("spec.workerGroupSpecs[{i}].groupName");
        if pod_set == HEAD {
            out.push((
                field,
                format!("{name:?} is the head's pod set; a queued RayCluster's worker group must have another name"),
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
            "spec.workerGroupSpecs".to_owned(),
            format!(
                "has {} worker groups: with the head that is {} pod sets, and a queued RayCluster may have at most {MAX_POD_SETS} (the head and {} worker groups), the most a Workload holds",
                groups.len(),
                1 + groups.len(),
                MAX_POD_SETS - 1
            ),
        ));
    }
    out
}

/// What the index keeps of a RayCluster.
pub fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let p = parse(obj)?;
    let pods: i32 = p.groups.iter().map(|g| g.pods).fold(0, i32::saturating_add);
    let ready = obj.pointer("/status/state").and_then(Value::as_str) == Some("ready");
    let state = object::State {
        suspended: p.suspend,
        finished: None,
        ready: Some(if ready { pods } else { 0 }),
        succeeded: 0,
        pods,
        live: 0,
        pods_selector: None,
        templates: p
            .groups
            .iter()
            .map(|g| object::directives(&g.pod_set, &g.key, &g.template))
            .collect(),
    };
    Ok(object::view(JobKind::RayCluster, &p.metadata, kueue_compat, state))
}

/// The Workload of a queued RayCluster (without status): a group of no
/// pods takes no quota and is no pod set.
pub fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let p = parse(obj)?;
    if let Some((field, problem)) = queue_problems(obj).into_iter().next() {
        return Err(JobError::Invalid { field, problem });
    }
    let sets = p
        .groups
        .into_iter()
        .map(|g| object::Set {
            name: g.pod_set,
            count: g.pods,
            template: g.template,
        })
        .collect();
    object::workload(
        JobKind::RayCluster,
        &p.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// Where each group's pod template is: the head's, then each worker
/// group's, guarded by its `groupName`.
fn placed(view: &JobView) -> Vec<Placed<'_>> {
    view.templates
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i == 0 {
                Placed {
                    template: t,
                    spec: "/spec/headGroupSpec/template/spec".into(),
                    guard: None,
                }
            } else {
                let at = format!("/spec/workerGroupSpecs/{}", i - 1);
                Placed {
                    template: t,
                    spec: format!("{at}/template/spec"),
                    guard: Some((format!("{at}/groupName"), json!(t.key))),
                }
            }
        })
        .collect()
}

/// RayCluster as a [`Queueable`].
pub(super) struct RayClusterKind;

impl Queueable for RayClusterKind {
    fn resource(&self) -> Resource {
        Resource {
            group: "ray.io",
            version: "v1",
            api_version: "ray.io/v1",
            kind: "RayCluster",
            plural: "rayclusters",
        }
    }

    fn flag_name(&self) -> &'static str {
        "ray.io/raycluster"
    }

    fn workload_prefix(&self) -> &'static str {
        "raycluster-"
    }

    fn pods_selector(&self, name: &str, _uid: &str) -> String {
        format!("{CLUSTER_LABEL}={name}")
    }

    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
        view(obj, kueue_compat)
    }

    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        workload(obj, kueue_compat, workload_class, pod_class)
    }

    /// Admitted whole: its pod sets have no minCount (see `object`).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        _admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        super::placed_start(view, &placed(view), flavors)
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        super::placed_restore(view, &placed(view))
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidRayCluster"
    }

    /// The head group's, then each worker group's.
    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        let head = TemplateAt::at("/spec/headGroupSpec/template", "spec.headGroupSpec.template");
        let workers = (0..shape::list(obj.pointer("/spec/workerGroupSpecs")).len()).map(|i| {
            TemplateAt::at(
                &format!("/spec/workerGroupSpecs/{i}/template"),
                &format!("spec.workerGroupSpecs[{i}].template"),
            )
        });
        std::iter::once(head).chain(workers).collect()
    }

    /// Each worker group's pods as KubeRay runs them (the head is always
    /// one pod).
    fn counts(&self, obj: &Value) -> Vec<Count> {
        shape::list(obj.pointer("/spec/workerGroupSpecs"))
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let name = g.get("groupName").and_then(Value::as_str).unwrap_or("");
                Count {
                    field: format!(
                        "spec.workerGroupSpecs[{i}] ({name}): replicas within [minReplicas, maxReplicas] × numOfHosts"
                    ),
                    value: group_pods(g),
                }
            })
            .collect()
    }

    /// Never: a RayCluster runs until it is deleted.
    fn finished(&self, _obj: &Value) -> Option<bool> {
        None
    }

    fn refusals(&self, obj: &Value) -> Vec<String> {
        queue_problems(obj)
            .into_iter()
            .map(|(field, problem)| format!("{field}: {problem}"))
            .collect()
    }

    /// KubeRay creates a RayJob's cluster, controlled by the RayJob, with
    /// the RayJob's labels (its queue label too).
    fn made_by(&self) -> &'static [JobKind] {
        &[JobKind::RayJob]
    }
}

#[cfg(test)]
mod tests;
