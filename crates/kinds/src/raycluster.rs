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

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView};
use crate::ray::cluster::{self, IN_RAYCLUSTER};
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
            pods: i32::try_from(cluster::worker_pods(json)).unwrap_or(i32::MAX),
            template: g.template,
        });
    }
    Ok(Parsed {
        metadata: rc.metadata,
        suspend: spec.suspend.unwrap_or(false),
        groups,
    })
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
        replicas: None,
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
    if let Some((field, problem)) = cluster::problems(obj, IN_RAYCLUSTER, "RayCluster").into_iter().next() {
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
        super::placed_start(view, &cluster::placed(view, IN_RAYCLUSTER), flavors)
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        super::placed_restore(view, &cluster::placed(view, IN_RAYCLUSTER))
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidRayCluster"
    }

    /// The head group's, then each worker group's.
    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        cluster::templates(obj, IN_RAYCLUSTER)
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
                    value: cluster::worker_pods(g),
                }
            })
            .collect()
    }

    /// Never: a RayCluster runs until it is deleted.
    fn finished(&self, _obj: &Value) -> Option<bool> {
        None
    }

    fn refusals(&self, obj: &Value) -> Vec<String> {
        cluster::problems(obj, IN_RAYCLUSTER, "RayCluster")
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
