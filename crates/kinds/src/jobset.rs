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
//!   [`crate::job::ORIGINAL_SCHEDULING`] (a JSON object: pod set → directives) and put
//!   back on eviction.
//! - Finished: condition `Completed` (succeeded) or `Failed`. Ready: every
//!   child Job ready or succeeded (`status.replicatedJobsStatus`).
//! - Its pods carry [`UID_LABEL`].

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{self, JobError, JobView};
use crate::placed::Placed;
use crate::shape::{self, Count, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource, object};

pub const GROUP: &str = "jobset.x-k8s.io";
pub const VERSION: &str = "v1alpha2";
pub const API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";
pub const KIND: &str = "JobSet";
pub const PLURAL: &str = "jobsets";
/// Label the JobSet controller puts on its Jobs and pods: the JobSet's uid.
pub const UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";

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

/// One replicated Job of a JobSet (or of the JobSet template a TrainJob's
/// runtime holds, [`crate::trainjob`]).
#[derive(Debug, Deserialize)]
pub(crate) struct ReplicatedJob {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) replicas: Option<i32>,
    pub(crate) template: JobTemplateSpec,
}

impl ReplicatedJob {
    /// Its copies: `replicas`, at least 1.
    pub(crate) fn copies(&self) -> i32 {
        self.replicas.unwrap_or(1).max(1)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    replicated_jobs_status: Vec<ReplicatedJobStatus>,
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

/// The pods a replicated Job runs at once: its copies × each one's.
pub(crate) fn pods_of(rj: &ReplicatedJob) -> i32 {
    let spec = rj.template.spec.as_ref();
    let per_job = job::pods_count(spec.and_then(|s| s.parallelism), spec.and_then(|s| s.completions));
    rj.copies().saturating_mul(per_job)
}

/// How a JobSet ended: condition `Completed` or `Failed`.
fn finished(obj: &Value) -> Option<bool> {
    shape::terminal_condition(obj, "Completed", "Failed")
}

/// What the index keeps of a JobSet. Its ready and succeeded counts are
/// of child Jobs, its `pods` the number of child Jobs.
pub fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let (js, spec) = parse(obj)?;
    let status = js.status.unwrap_or_default();
    let finished = finished(obj);
    let state = object::State {
        suspended: spec.suspend.unwrap_or(false),
        finished,
        ready: Some(status.replicated_jobs_status.iter().map(|s| s.ready).sum()),
        succeeded: status.replicated_jobs_status.iter().map(|s| s.succeeded).sum(),
        pods: spec.replicated_jobs.iter().map(ReplicatedJob::copies).sum(),
        // Its pods are looked up by label before its quota is released.
        live: 0,
        pods_selector: None,
        replicas: None,
        templates: spec
            .replicated_jobs
            .iter()
            .map(|rj| object::directives(&rj.name, &rj.name, &pod_template(rj)))
            .collect(),
    };
    Ok(object::view(JobKind::JobSet, &js.metadata, kueue_compat, state))
}

/// The pod template of a replicated Job.
pub(crate) fn pod_template(rj: &ReplicatedJob) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    rj.template
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// The Workload of a queued JobSet (without status).
pub fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let (js, spec) = parse(obj)?;
    let sets = spec
        .replicated_jobs
        .iter()
        .map(|rj| object::Set {
            name: rj.name.clone(),
            count: pods_of(rj),
            template: pod_template(rj),
        })
        .collect();
    object::workload(
        JobKind::JobSet,
        &js.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
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

/// JobSet as a [`Queueable`].
pub(super) struct JobSetKind;

impl Queueable for JobSetKind {
    fn resource(&self) -> Resource {
        Resource {
            group: GROUP,
            version: VERSION,
            api_version: API_VERSION,
            kind: KIND,
            plural: PLURAL,
        }
    }

    fn flag_name(&self) -> &'static str {
        "jobset.x-k8s.io/jobset"
    }

    fn workload_prefix(&self) -> &'static str {
        "jobset-"
    }

    fn pods_selector(&self, _name: &str, uid: &str) -> String {
        format!("{UID_LABEL}={uid}")
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
        "InvalidJobSet"
    }

    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        (0..shape::list(obj.pointer("/spec/replicatedJobs")).len())
            .map(|i| {
                TemplateAt::at(
                    &format!("/spec/replicatedJobs/{i}/template/spec/template"),
                    &format!("spec.replicatedJobs[{i}].template.spec.template"),
                )
            })
            .collect()
    }

    /// Each replicated Job's `replicas` × its Job's pods at once.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        shape::list(obj.pointer("/spec/replicatedJobs"))
            .iter()
            .enumerate()
            .map(|(i, rj)| Count {
                field: format!(
                    "spec.replicatedJobs[{i}] ({}).replicas × parallelism",
                    rj.get("name").and_then(Value::as_str).unwrap_or("")
                ),
                value: shape::int(rj.get("replicas"), 1) * shape::job_pods(rj.pointer("/template/spec")),
            })
            .collect()
    }

    fn finished(&self, obj: &Value) -> Option<bool> {
        finished(obj)
    }

    /// A TrainJob's JobSet (Kubeflow Trainer makes it from the TrainJob's
    /// runtime and controls it).
    fn made_by(&self) -> &'static [JobKind] {
        &[JobKind::TrainJob]
    }
}

#[cfg(test)]
mod tests;
