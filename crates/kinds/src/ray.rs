//! `ray.io/v1` RayJob, as pure functions over its JSON.
//!
//! - Workload `rayjob-<name>`: a pod set `head` (1 pod of
//!   `spec.rayClusterSpec.headGroupSpec.template`) and one per
//!   `spec.rayClusterSpec.workerGroupSpecs[i]`, named after its
//!   `groupName` in lower case, of as many pods as KubeRay runs for it:
//!   `replicas` (0 when unset, as KubeRay's CRD defaults it) clamped to
//!   [`minReplicas`, `maxReplicas`], × `numOfHosts` (1 when unset); a
//!   group of no pods is no pod set; controller owner reference to the
//!   RayJob. The submitter pod KubeRay runs in `K8sJobMode` is not counted.
//! - Queued only with `spec.shutdownAfterJobFinishes: true` and its own
//!   cluster (no `clusterSelector`): KubeRay suspends no other RayJob.
//! - Suspended and resumed through `spec.suspend` (KubeRay deletes the
//!   RayCluster of a suspended RayJob and creates it again on resume).
//! - Admission injects each group's flavors into its pod template with one
//!   JSON patch, every worker group's position guarded by a `test` of its
//!   `groupName` (see `placed`); restored on eviction.
//! - Finished: `status.jobDeploymentStatus` `Complete` (succeeded when
//!   `status.jobStatus` is `SUCCEEDED`), `Failed` or `ValidationFailed`.
//!   Ready: `Running`. While `Suspending` (KubeRay deleting the cluster)
//!   its pods count as not gone.
//! - Its pods carry [`CLUSTER_LABEL`] with `status.rayClusterName` (the
//!   last name seen is kept).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView};
use crate::shape::{self, Count, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource, object};

pub(crate) mod cluster;

use cluster::IN_RAYJOB;

/// Label KubeRay puts on a RayJob's RayCluster and submitter Job: the
/// RayJob's name.
pub const NAME_LABEL: &str = "ray.io/originated-from-cr-name";
/// Label KubeRay puts on a RayCluster's pods: the cluster's name.
pub const CLUSTER_LABEL: &str = "ray.io/cluster";
/// The pod set of the head.
pub const HEAD: &str = "head";

#[derive(Debug, Deserialize)]
struct RayJob {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    suspend: Option<bool>,
    #[serde(default)]
    shutdown_after_job_finishes: Option<bool>,
    #[serde(default)]
    cluster_selector: Option<BTreeMap<String, String>>,
    ray_cluster_spec: Option<ClusterSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterSpec {
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
    num_of_hosts: Option<i32>,
    template: PodTemplateSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    job_deployment_status: Option<String>,
    #[serde(default)]
    ray_cluster_name: Option<String>,
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
    status: Status,
}

fn parse(obj: &Value) -> Result<Parsed, JobError> {
    let rj: RayJob = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "RayJob".into(),
        problem: e.to_string(),
    })?;
    let spec = rj.spec.ok_or(JobError::Missing { field: "spec" })?;
    if spec.cluster_selector.as_ref().is_some_and(|s| !s.is_empty()) {
        return Err(JobError::Invalid {
            field: "spec.clusterSelector".into(),
            problem: "a queued RayJob must create its own cluster (spec.rayClusterSpec): one running on an existing cluster holds no quota of its own".into(),
        });
    }
    if spec.shutdown_after_job_finishes != Some(true) {
        return Err(JobError::Invalid {
            field: "spec.shutdownAfterJobFinishes".into(),
            problem: "must be true for a queued RayJob: KubeRay suspends and resumes only RayJobs that delete their cluster when they finish".into(),
        });
    }
    let cluster = spec.ray_cluster_spec.ok_or_else(|| JobError::Invalid {
        field: "spec.rayClusterSpec".into(),
        problem:
            "must be set: Sluice queues RayJobs that create their own RayCluster (clusterSelector is not supported)"
                .into(),
    })?;
    let mut groups = vec![Group {
        pod_set: HEAD.to_string(),
        key: HEAD.to_string(),
        pods: 1,
        template: cluster.head_group_spec.template,
    }];
    for (i, g) in cluster.worker_group_specs.into_iter().enumerate() {
        let field = format!("spec.rayClusterSpec.workerGroupSpecs[{i}]");
        let name = g.group_name.to_ascii_lowercase();
        if name.is_empty() || name == HEAD || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(JobError::Invalid {
                field: format!("{field}.groupName"),
                problem: format!(
                    "{:?} must be letters, digits and '-', and not \"head\" (it names a pod set)",
                    g.group_name
                ),
            });
        }
        // KubeRay's CRD defaults replicas to 0.
        let replicas = g.replicas.unwrap_or(0);
        let hosts = g.num_of_hosts.unwrap_or(1);
        if replicas < 0 || hosts < 1 {
            return Err(JobError::Invalid {
                field,
                problem: format!("replicas {replicas} and numOfHosts {hosts} must be at least 0 and 1"),
            });
        }
        // As many pods as KubeRay will run: replicas within
        // [minReplicas, maxReplicas], × numOfHosts (as for a RayCluster).
        let raw = &shape::list(obj.pointer("/spec/rayClusterSpec/workerGroupSpecs"))[i];
        groups.push(Group {
            pod_set: name,
            key: g.group_name,
            pods: i32::try_from(cluster::worker_pods(raw)).unwrap_or(i32::MAX),
            template: g.template,
        });
    }
    Ok(Parsed {
        metadata: rj.metadata,
        suspend: spec.suspend.unwrap_or(false),
        groups,
        status: rj.status.unwrap_or_default(),
    })
}

/// How a RayJob ended: `status.jobDeploymentStatus` `Complete`
/// (succeeded when `status.jobStatus` is `SUCCEEDED`), `Failed` or
/// `ValidationFailed` (KubeRay refused the spec: it never runs).
fn finished(obj: &Value) -> Option<bool> {
    match obj.pointer("/status/jobDeploymentStatus").and_then(Value::as_str) {
        Some("Complete") => Some(obj.pointer("/status/jobStatus").and_then(Value::as_str) == Some("SUCCEEDED")),
        Some("Failed" | "ValidationFailed") => Some(false),
        _ => None,
    }
}

/// What the index keeps of a RayJob.
pub fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let p = parse(obj)?;
    let deployment = p.status.job_deployment_status.as_deref();
    let finished = finished(obj);
    let pods: i32 = p.groups.iter().map(|g| g.pods).sum();
    let state = object::State {
        suspended: p.suspend,
        finished,
        ready: Some(if deployment == Some("Running") { pods } else { 0 }),
        succeeded: 0,
        pods,
        // Suspending: KubeRay is still deleting the cluster.
        live: i32::from(deployment == Some("Suspending")),
        replicas: None,
        pods_selector: p
            .status
            .ray_cluster_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(|n| format!("{CLUSTER_LABEL}={n}")),
        templates: p
            .groups
            .iter()
            .map(|g| object::directives(&g.pod_set, &g.key, &g.template))
            .collect(),
    };
    Ok(object::view(JobKind::RayJob, &p.metadata, kueue_compat, state))
}

/// The Workload of a queued RayJob (without status): a group of no pods
/// (replicas 0) takes no quota and is no pod set.
pub fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let p = parse(obj)?;
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
        JobKind::RayJob,
        &p.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// RayJob as a [`Queueable`].
pub(super) struct RayJobKind;

impl Queueable for RayJobKind {
    fn resource(&self) -> Resource {
        Resource {
            group: "ray.io",
            version: "v1",
            api_version: "ray.io/v1",
            kind: "RayJob",
            plural: "rayjobs",
        }
    }

    fn flag_name(&self) -> &'static str {
        "ray.io/rayjob"
    }

    fn workload_prefix(&self) -> &'static str {
        "rayjob-"
    }

    /// Its cluster and submitter carry the RayJob's name; its pods are its
    /// RayCluster's, selected through the view (`pods_selector`) once the
    /// cluster's name is known.
    fn pods_selector(&self, name: &str, _uid: &str) -> String {
        format!("{NAME_LABEL}={name},ray.io/originated-from-crd=RayJob")
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
        super::placed_start(view, &cluster::placed(view, IN_RAYJOB), flavors)
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        super::placed_restore(view, &cluster::placed(view, IN_RAYJOB))
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidRayJob"
    }

    /// The head group's, then each worker group's.
    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        cluster::templates(obj, IN_RAYJOB)
    }

    /// Each worker group's `replicas`, `minReplicas` and `maxReplicas`,
    /// each × `numOfHosts`.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        shape::list(obj.pointer("/spec/rayClusterSpec/workerGroupSpecs"))
            .iter()
            .enumerate()
            .flat_map(|(i, g)| {
                let hosts = shape::int(g.get("numOfHosts"), 1);
                let name = g.get("groupName").and_then(Value::as_str).unwrap_or("");
                ["replicas", "minReplicas", "maxReplicas"].map(|f| Count {
                    field: format!("spec.rayClusterSpec.workerGroupSpecs[{i}] ({name}).{f} × numOfHosts"),
                    value: shape::int(g.get(f), 0) * hosts,
                })
            })
            .collect()
    }

    fn finished(&self, obj: &Value) -> Option<bool> {
        finished(obj)
    }

    /// KubeRay suspends only RayJobs that run their own cluster and
    /// delete it when they finish: any other would be admitted and never
    /// run.
    fn refusals(&self, obj: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if obj
            .pointer("/spec/clusterSelector")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            out.push(
                "spec.clusterSelector: a queued RayJob must create its own cluster (spec.rayClusterSpec); one running on an existing cluster cannot be held or admitted".to_owned(),
            );
        }
        if obj.pointer("/spec/shutdownAfterJobFinishes") != Some(&Value::Bool(true)) {
            out.push(
                "spec.shutdownAfterJobFinishes: must be true for a queued RayJob (KubeRay suspends and resumes only RayJobs that delete their cluster when they finish)".to_owned(),
            );
        }
        out.extend(
            cluster::problems(obj, IN_RAYJOB, "RayJob")
                .into_iter()
                .map(|(field, problem)| format!("{field}: {problem}")),
        );
        out
    }
}

#[cfg(test)]
mod tests;
