//! `jobset.x-k8s.io/v1alpha2` JobSet, as pure functions over its JSON.
//!
//! - Workload `jobset-<name>`, one pod set per `spec.replicatedJobs[i]`,
//!   named after it, of `replicas × min(parallelism, completions)` pods of
//!   its Job template's pod template; controller owner reference to the
//!   JobSet.
//! - Suspended and resumed through `spec.suspend` (the JobSet controller
//!   suspends and resumes its child Jobs).
//! - Admission injects each replicated Job's flavors into its pod
//!   template (`spec.replicatedJobs[i].template.spec.template.spec`) with
//!   one JSON patch, each position guarded by a `test` of the replicated
//!   Job's name; what the user wrote is kept first in
//!   [`ORIGINAL_SCHEDULING`] (a JSON object: pod set → directives) and put
//!   back on eviction.
//! - Finished: condition `Completed` (succeeded) or `Failed`. Ready: every
//!   child Job ready or succeeded (`status.replicatedJobsStatus`).
//! - Its pods carry [`UID_LABEL`].

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_api::labels;
use sluice_api::v1alpha1::{PodSet, ResourceFlavor, Workload, WorkloadSpec};

use super::ObjPatch;
use super::placed::{self, Placed};
use crate::job::{self, JobError, JobView, ORIGINAL_SCHEDULING, TemplateDirectives};

pub const GROUP: &str = "jobset.x-k8s.io";
pub const VERSION: &str = "v1alpha2";
pub const API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";
pub const KIND: &str = "JobSet";
pub const PLURAL: &str = "jobsets";
/// Label the JobSet controller puts on its Jobs and pods: the JobSet's uid.
pub const UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";

/// The name of JobSet `name`'s Workload.
pub fn workload_name(name: &str) -> String {
    format!("jobset-{name}")
}

/// What Sluice reads of a JobSet.
#[derive(Debug, Deserialize)]
struct JobSet {
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
    replicated_jobs: Vec<ReplicatedJob>,
}

#[derive(Debug, Deserialize)]
struct ReplicatedJob {
    name: String,
    #[serde(default)]
    replicas: Option<i32>,
    template: JobTemplateSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    replicated_jobs_status: Vec<ReplicatedJobStatus>,
}

#[derive(Debug, Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

#[derive(Debug, Default, Deserialize)]
struct ReplicatedJobStatus {
    #[serde(default)]
    ready: i32,
    #[serde(default)]
    succeeded: i32,
}

fn parse(obj: &Value) -> Result<(JobSet, Spec), JobError> {
    let mut js: JobSet = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "JobSet".into(),
        problem: e.to_string(),
    })?;
    let spec = js.spec.take().ok_or(JobError::Missing { field: "spec" })?;
    if spec.replicated_jobs.is_empty() {
        return Err(JobError::Invalid {
            field: "spec.replicatedJobs".into(),
            problem: "must list at least one replicated Job".into(),
        });
    }
    for (i, rj) in spec.replicated_jobs.iter().enumerate() {
        if let Some(r) = rj.replicas
            && r < 1
        {
            return Err(JobError::Invalid {
                field: format!("spec.replicatedJobs[{i}].replicas"),
                problem: format!("{r} must be at least 1"),
            });
        }
        let parallelism = rj.template.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
        if parallelism < 1 {
            return Err(JobError::Invalid {
                field: format!("spec.replicatedJobs[{i}].template.spec.parallelism"),
                problem: format!("{parallelism} must be at least 1 for a queued JobSet"),
            });
        }
    }
    Ok((js, spec))
}

fn pods_of(rj: &ReplicatedJob) -> i32 {
    let spec = rj.template.spec.as_ref();
    let per_job = job::pods_count(spec.and_then(|s| s.parallelism), spec.and_then(|s| s.completions));
    rj.replicas.unwrap_or(1).max(1).saturating_mul(per_job)
}

/// What the index keeps of a JobSet. Its ready and succeeded counts are
/// of child Jobs, its `pods` the number of child Jobs.
pub fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let (js, spec) = parse(obj)?;
    let status = js.status.unwrap_or_default();
    let finished = status
        .conditions
        .iter()
        .filter(|c| c.status == "True")
        .find_map(|c| match c.type_.as_str() {
            "Completed" => Some(true),
            "Failed" => Some(false),
            _ => None,
        });
    let meta = &js.metadata;
    Ok(JobView {
        kind: super::JobKind::JobSet,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        queue: meta
            .labels
            .as_ref()
            .and_then(|l| labels::queue_name(l, kueue_compat))
            .map(String::from),
        suspended: spec.suspend.unwrap_or(false),
        finished,
        ready: Some(status.replicated_jobs_status.iter().map(|s| s.ready).sum()),
        succeeded: status.replicated_jobs_status.iter().map(|s| s.succeeded).sum(),
        pods: spec
            .replicated_jobs
            .iter()
            .map(|rj| rj.replicas.unwrap_or(1).max(1))
            .sum(),
        // Its pods are looked up by label before its quota is released.
        live: 0,
        reports_terminating: false,
        started: false,
        templates: spec
            .replicated_jobs
            .iter()
            .map(|rj| {
                let pod = rj.template.spec.as_ref().and_then(|s| s.template.spec.as_ref());
                TemplateDirectives {
                    pod_set: rj.name.clone(),
                    key: rj.name.clone(),
                    node_selector: pod.and_then(|p| p.node_selector.clone()),
                    tolerations: pod.and_then(|p| p.tolerations.clone()),
                }
            })
            .collect(),
        original: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(ORIGINAL_SCHEDULING))
            .cloned(),
        gang: None,
        managed_by: None,
        pods_selector: None,
    })
}

/// The Workload of a queued JobSet (without status).
pub fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let (js, spec) = parse(obj)?;
    let meta = &js.metadata;
    let name = meta
        .name
        .as_deref()
        .ok_or(JobError::Missing { field: "metadata.name" })?;
    let namespace = meta.namespace.as_deref().ok_or(JobError::Missing {
        field: "metadata.namespace",
    })?;
    let uid = meta.uid.as_deref().ok_or(JobError::Missing { field: "metadata.uid" })?;
    let queue = meta
        .labels
        .as_ref()
        .and_then(|l| labels::queue_name(l, kueue_compat))
        .ok_or(JobError::NotQueued)?;
    let originals = placed::recorded(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(ORIGINAL_SCHEDULING))
            .map(String::as_str),
    )?;
    let mut pod_sets = Vec::with_capacity(spec.replicated_jobs.len());
    for rj in &spec.replicated_jobs {
        let mut template = rj
            .template
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        if let Some(original) = originals.as_ref().and_then(|o| o.get(&rj.name))
            && let Some(pod) = template.spec.as_mut()
        {
            pod.node_selector = original.node_selector.clone();
            pod.tolerations = original.tolerations.clone();
        }
        pod_sets.push(PodSet {
            name: rj.name.clone(),
            count: pods_of(rj),
            min_count: None,
            template,
        });
    }
    let template_class = pod_sets
        .first()
        .and_then(|p| p.template.spec.as_ref())
        .and_then(|p| p.priority_class_name.as_deref());
    let (priority, class) = job::priority_of(meta.labels.as_ref(), template_class, workload_class, pod_class);
    let mut owner = job::owner_reference(name, uid, true);
    owner.api_version = API_VERSION.into();
    owner.kind = KIND.into();
    Ok(Workload {
        metadata: ObjectMeta {
            name: Some(workload_name(name)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(labels::QUEUE.to_string(), queue.to_string())])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: WorkloadSpec {
            pod_sets,
            queue_name: queue.to_string(),
            priority: Some(priority),
            priority_class_name: class,
            active: true,
        },
        status: None,
    })
}

/// The merge patch that suspends a JobSet.
pub fn suspend_patch() -> Value {
    json!({"spec": {"suspend": true}})
}

/// Where each replicated Job's pod template is, guarded by its name.
fn placed(view: &JobView) -> Vec<Placed<'_>> {
    view.templates
        .iter()
        .enumerate()
        .map(|(i, t)| Placed {
            template: t,
            spec: format!("/spec/replicatedJobs/{i}/template/spec/template/spec"),
            guard: Some((format!("/spec/replicatedJobs/{i}/name"), json!(t.key))),
        })
        .collect()
}

/// The patches that admit a suspended JobSet: the original directives
/// recorded (a merge patch, unless already recorded); then one JSON patch
/// giving each replicated Job's pod template its pod set's flavors' node
/// labels and tolerations on top of the original, and `spec.suspend:
/// false`, every position guarded by a `test` of the replicated Job's name.
pub fn injection_patches(
    view: &JobView,
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
) -> Result<Vec<ObjPatch>, JobError> {
    let resume = vec![json!({"op": "add", "path": "/spec/suspend", "value": false})];
    placed::injection_patches(view, &placed(view), flavors, resume)
}

/// The patches that put back the recorded directives of every replicated
/// Job (a JSON patch), then drop the annotation (a merge patch); `None`
/// when nothing was injected.
pub fn restoration_patches(view: &JobView) -> Result<Option<Vec<ObjPatch>>, JobError> {
    placed::restoration_patches(view, &placed(view))
}

#[cfg(test)]
mod tests;
