//! Jobs ↔ Workloads, as pure functions.
//!
//! - [`workload_for_job`]: the Workload a queued Job gets (name
//!   `job-<job>`, controller owner reference, one pod set `main` of
//!   `min(parallelism, completions)` pods ([`pods_count`]) with the Job's template, queue from the label,
//!   priority resolved by [`resolve_priority`]).
//! - [`injection_patch`]: the JSON merge patch that puts the admitted
//!   flavors' node labels and tolerations into a suspended Job's template
//!   and unsuspends it. The Job's original `nodeSelector`/`tolerations` are
//!   stored first in the [`ORIGINAL_SCHEDULING`] annotation, so that
//!   [`restoration_patch`] puts back exactly what the user wrote, even after
//!   a controller restart. A partial admission lowers `spec.parallelism`
//!   the same way, its original kept in [`ORIGINAL_PARALLELISM`]
//!   (`partial`).
//! - [`JobView`] (`view`): what is kept of a Job in memory.
//!
//! Merge patches (RFC 7386) are used for Jobs rather than server-side apply:
//! `tolerations` is an atomic list owned by the user, and restoring it means
//! replacing it with the recorded original, which a merge patch says
//! directly.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sluice_api::labels;
use sluice_api::v1alpha1::{PodSet, ResourceFlavor, Workload};

use crate::shape::{self, Count, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource};

/// Job annotation holding the template's `nodeSelector` and `tolerations`
/// as they were before Sluice injected a flavor's (JSON of
/// [`SchedulingDirectives`]). Present exactly while injected directives may
/// be in the template.
pub const ORIGINAL_SCHEDULING: &str = "sluice.dev/original-scheduling";

/// Label on a Workload Sluice created for a Job: the Job's uid. It
/// outlives the owner reference (deleting a batch/v1 Job with the default
/// `orphan` propagation strips that), so an orphaned Workload is still
/// known to be a Job's, and is finished once that Job is gone.
pub const JOB_UID_LABEL: &str = "sluice.dev/job-uid";

/// Name of the pod set a Job's Workload has.
pub const MAIN_POD_SET: &str = "main";

/// Why a Job cannot be turned into a Workload or patched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("{field}: must be set")]
    Missing { field: &'static str },
    #[error("the Job has no queue label ({})", labels::QUEUE)]
    NotQueued,
    #[error("spec.parallelism: {0} must be at least 1 for a queued Job")]
    Parallelism(i32),
    #[error("metadata.annotations[{ORIGINAL_SCHEDULING}]: not valid JSON of the original scheduling directives: {0}")]
    BadAnnotation(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
    /// A serving object held with no replicas asked for: it has no
    /// Workload until its owner asks for some.
    #[error("{field}: 0 replicas asked for: nothing to admit until some are")]
    NothingAsked { field: String },
}

impl JobError {
    /// Short label for metrics and event reasons.
    pub fn metric_label(&self) -> &'static str {
        match self {
            JobError::Missing { .. } => "job_missing_field",
            JobError::NotQueued => "job_not_queued",
            JobError::Parallelism(_) => "job_parallelism",
            JobError::BadAnnotation(_) => "job_bad_annotation",
            JobError::Invalid { .. } => "job_invalid",
            JobError::NothingAsked { .. } => "job_nothing_asked",
        }
    }
}

/// The name of the Workload of Job `job_name`.
pub fn workload_name(job_name: &str) -> String {
    format!("job-{job_name}")
}

/// The Job's priority and the WorkloadPriorityClass it came from:
/// the `sluice.dev/priority-class` label's WorkloadPriorityClass value;
/// else the template's `priorityClassName` looked up among
/// scheduling.k8s.io PriorityClasses; else 0. A named class that does not
/// exist counts as absent.
pub fn resolve_priority(
    job: &Job,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> (i32, Option<String>) {
    let template_class = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.priority_class_name.as_deref());
    priority_of(job.metadata.labels.as_ref(), template_class, workload_class, pod_class)
}

/// [`resolve_priority`] for any kind: from the object's labels and the
/// `priorityClassName` of its (first) pod template.
pub fn priority_of(
    object_labels: Option<&BTreeMap<String, String>>,
    template_class: Option<&str>,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> (i32, Option<String>) {
    if let Some(name) = object_labels.and_then(|l| l.get(labels::PRIORITY_CLASS))
        && let Some(v) = workload_class(name)
    {
        return (v, Some(name.clone()));
    }
    (template_class.and_then(pod_class).unwrap_or(0), None)
}

/// The queue a Job is labelled with, if any.
pub fn queue_of(job: &Job, kueue_compat: bool) -> Option<&str> {
    job.metadata
        .labels
        .as_ref()
        .and_then(|l| labels::queue_name(l, kueue_compat))
}

/// The Workload for a queued Job (without status).
pub fn workload_for_job(
    job: &Job,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let (name, namespace, uid) = identity(job)?;
    let queue = queue_of(job, kueue_compat).ok_or(JobError::NotQueued)?;
    let pod_set = pod_set_of(job, MAIN_POD_SET)?;
    let metadata = ObjectMeta {
        name: Some(workload_name(name)),
        namespace: Some(namespace.to_string()),
        labels: Some(BTreeMap::from([
            (labels::QUEUE.to_string(), queue.to_string()),
            (JOB_UID_LABEL.to_string(), uid.to_string()),
        ])),
        owner_references: Some(vec![owner_reference(name, uid, true)]),
        ..Default::default()
    };
    let priority = resolve_priority(job, workload_class, pod_class);
    Ok(crate::queued_workload(metadata, queue, vec![pod_set], priority))
}

/// The run time a Job declares: its `sluice.dev/expected-runtime`
/// annotation, else its `activeDeadlineSeconds`; `Err` names a malformed
/// annotation.
pub fn expected_runtime_ms(job: &Job) -> Result<Option<i64>, String> {
    labels::expected_runtime_ms(job.metadata.annotations.as_ref()).map(|a| {
        a.or_else(|| {
            let secs = job.spec.as_ref()?.active_deadline_seconds?;
            Some(secs.saturating_mul(1000))
        })
    })
}

/// [`expected_runtime_ms`], a malformed annotation declaring nothing.
pub fn declared_runtime_ms(job: &Job) -> Option<i64> {
    expected_runtime_ms(job).ok().flatten()
}

/// A Job's name, namespace and uid, each required.
pub(crate) fn identity(job: &Job) -> Result<(&str, &str, &str), JobError> {
    let name = job
        .metadata
        .name
        .as_deref()
        .ok_or(JobError::Missing { field: "metadata.name" })?;
    let namespace = job.metadata.namespace.as_deref().ok_or(JobError::Missing {
        field: "metadata.namespace",
    })?;
    let uid = job
        .metadata
        .uid
        .as_deref()
        .ok_or(JobError::Missing { field: "metadata.uid" })?;
    Ok((name, namespace, uid))
}

/// An owner reference to Job `name`; `controller` for a Job's own
/// Workload, not for a gang's (a gang has several owners, none of them
/// its controller).
pub(crate) fn owner_reference(name: &str, uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

/// The pod set `name` a Job asks for: `min(parallelism, completions)`
/// pods ([`pods_count`]) of its template as the user wrote it (injected
/// directives are not part of what the workload asks for), with the
/// `minCount` of its [`labels::MIN_PARALLELISM`] annotation.
pub(crate) fn pod_set_of(job: &Job, name: &str) -> Result<PodSet, JobError> {
    let spec = job.spec.as_ref().ok_or(JobError::Missing { field: "spec" })?;
    // What the user wrote, not what a partial admission lowered it to.
    let parallelism = original_parallelism(job)?;
    if parallelism < 1 {
        return Err(JobError::Parallelism(parallelism));
    }
    let mut template = spec.template.clone();
    if let Some(original) = stored_original(job)?
        && let Some(pod) = template.spec.as_mut()
    {
        pod.node_selector = original.node_selector;
        pod.tolerations = original.tolerations;
    }
    let count = pods_count(Some(parallelism), spec.completions);
    Ok(PodSet {
        name: name.into(),
        count,
        min_count: crate::min_count_of(job.metadata.annotations.as_ref(), parallelism, count)?,
        template,
        topology: crate::topology_of(job.metadata.annotations.as_ref())?,
    })
}

/// The name and uid of the Job that controls a Workload, if one does.
pub fn owning_job(wl: &Workload) -> Option<(&str, &str)> {
    match owner_of(wl)? {
        (crate::JobKind::Job, name, uid) => Some((name, uid)),
        _ => None,
    }
}

/// The kind, name and uid of the object (of a kind Sluice queues) that
/// controls a Workload, if one does.
pub fn owner_of(wl: &Workload) -> Option<(crate::JobKind, &str, &str)> {
    wl.metadata.owner_references.iter().flatten().find_map(|o| {
        let kind = crate::JobKind::ALL
            .into_iter()
            .find(|k| o.kind == k.kind() && o.api_version == k.api_version())?;
        (o.controller == Some(true)).then_some((kind, o.name.as_str(), o.uid.as_str()))
    })
}

/// A template's scheduling directives, as recorded in [`ORIGINAL_SCHEDULING`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingDirectives {
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub tolerations: Option<Vec<Toleration>>,
}

fn current_directives(job: &Job) -> SchedulingDirectives {
    let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    SchedulingDirectives {
        node_selector: pod.and_then(|p| p.node_selector.clone()),
        tolerations: pod.and_then(|p| p.tolerations.clone()),
    }
}

pub(crate) fn stored_original(job: &Job) -> Result<Option<SchedulingDirectives>, JobError> {
    match job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ORIGINAL_SCHEDULING))
    {
        None => Ok(None),
        Some(raw) => serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| JobError::BadAnnotation(e.to_string())),
    }
}

/// The directives the user wrote: from the annotation when Sluice already
/// injected, else the template as it is.
pub fn original_directives(job: &Job) -> Result<SchedulingDirectives, JobError> {
    Ok(stored_original(job)?.unwrap_or_else(|| current_directives(job)))
}

/// The merge patch that admits a suspended Job onto `flavors` with
/// `admitted` pods (`None`: all it asks for): records the original
/// directives (unless already recorded), sets the template's nodeSelector
/// to the original plus every flavor's node labels and its tolerations to
/// the original plus the flavors' tolerations (no duplicates), lowers
/// `spec.parallelism` to a partial admission (`partial`), and
/// `spec.suspend: false`. Idempotent: applying it twice, or computing it
/// again from the patched Job, gives the same Job.
pub fn injection_patch(job: &Job, flavors: &[&ResourceFlavor], admitted: Option<u32>) -> Result<Value, JobError> {
    let original = original_directives(job)?;
    let current = current_directives(job);
    let mut selector = original.node_selector.clone().unwrap_or_default();
    let mut tolerations = original.tolerations.clone().unwrap_or_default();
    for f in flavors {
        for (k, v) in &f.spec.node_labels {
            selector.insert(k.clone(), v.clone());
        }
        for t in &f.spec.tolerations {
            if !tolerations.contains(t) {
                tolerations.push(t.clone());
            }
        }
    }
    let recorded = serde_json::to_string(&original).expect("directives serialise");
    let mut pod = serde_json::Map::new();
    pod.insert(
        "nodeSelector".into(),
        selector_patch(current.node_selector.as_ref(), &selector),
    );
    pod.insert(
        "tolerations".into(),
        if tolerations.is_empty() {
            Value::Null
        } else {
            serde_json::to_value(&tolerations).expect("tolerations serialise")
        },
    );
    let mut patch = json!({
        "metadata": {"annotations": {ORIGINAL_SCHEDULING: recorded}},
        "spec": {"suspend": false, "template": {"spec": pod}},
    });
    partial::add_to_start(job, admitted, &mut patch)?;
    Ok(patch)
}

/// The merge patch that puts back the recorded original directives and
/// parallelism and drops their annotations; `None` when nothing was
/// changed. It must be sent while the Job is suspended and has no
/// `status.startTime` (the template is immutable otherwise).
pub fn restoration_patch(job: &Job) -> Result<Option<Value>, JobError> {
    let mut patch = json!({});
    let parallelism = partial::add_to_restore(job, &mut patch)?;
    let Some(original) = stored_original(job)? else {
        return Ok(parallelism.then_some(patch));
    };
    let current = current_directives(job);
    let target = original.node_selector.clone().unwrap_or_default();
    let mut pod = serde_json::Map::new();
    pod.insert(
        "nodeSelector".into(),
        selector_patch(current.node_selector.as_ref(), &target),
    );
    pod.insert(
        "tolerations".into(),
        match &original.tolerations {
            Some(t) => serde_json::to_value(t).expect("tolerations serialise"),
            None => Value::Null,
        },
    );
    patch["metadata"]["annotations"][ORIGINAL_SCHEDULING] = Value::Null;
    patch["spec"]["template"]["spec"] = Value::Object(pod);
    Ok(Some(patch))
}

/// Merge patch of a map: `target`'s entries, and `null` for every current
/// key that `target` lacks (the whole map is `null` when `target` is empty).
pub(crate) fn selector_patch(current: Option<&BTreeMap<String, String>>, target: &BTreeMap<String, String>) -> Value {
    if target.is_empty() {
        return Value::Null;
    }
    let mut m = serde_json::Map::new();
    for k in current.into_iter().flat_map(|c| c.keys()) {
        if !target.contains_key(k) {
            m.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in target {
        m.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(m)
}

/// The merge patch that suspends a Job.
pub fn suspend_patch() -> Value {
    crate::SuspendField::SPEC.patch(true)
}

/// The merge patch (for the `status` subresource) that clears a suspended
/// Job's `startTime`, which makes its template mutable again.
pub fn clear_start_time_patch() -> Value {
    json!({"status": {"startTime": null}})
}

/// Reduces a pod template, in place, to what Sluice reads from it:
/// containers' and init containers' names and resources (and init
/// containers' restartPolicy, for sidecars), overhead, nodeSelector,
/// tolerations and priorityClassName. Objects kept in memory are slimmed
/// so that tens of thousands of Jobs and Workloads fit in a small
/// footprint; requests computed from a slim template are the same.
pub fn slim_template(t: &mut k8s_openapi::api::core::v1::PodTemplateSpec) {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    t.metadata = None;
    if let Some(spec) = t.spec.take() {
        let slim = |c: Container| Container {
            name: c.name,
            resources: c.resources,
            restart_policy: c.restart_policy,
            ..Default::default()
        };
        t.spec = Some(PodSpec {
            containers: spec.containers.into_iter().map(slim).collect(),
            init_containers: spec.init_containers.map(|cs| cs.into_iter().map(slim).collect()),
            overhead: spec.overhead,
            node_selector: spec.node_selector,
            tolerations: spec.tolerations,
            priority_class_name: spec.priority_class_name,
            ..Default::default()
        });
    }
}

/// Whether the Job is suspended (an unset `suspend` means running).
pub fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

/// Whether the Job has started (`status.startTime` set): its template is
/// immutable until that is cleared.
pub fn has_started(job: &Job) -> bool {
    job.status.as_ref().and_then(|s| s.start_time.as_ref()).is_some()
}

/// How a Job ended, if it did: `Some(true)` Complete, `Some(false)` Failed.
pub fn finished(job: &Job) -> Option<bool> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    for c in conds {
        if c.status == "True" {
            match c.type_.as_str() {
                "Complete" => return Some(true),
                "Failed" => return Some(false),
                _ => {}
            }
        }
    }
    None
}

/// How many pods of a Job run at once, as Kueue counts them:
/// `min(parallelism, completions)` (`parallelism` defaults to 1; no
/// `completions` means `parallelism`), at least 1.
pub fn pods_count(parallelism: Option<i32>, completions: Option<i32>) -> i32 {
    let p = parallelism.unwrap_or(1);
    completions.map_or(p, |c| p.min(c)).max(1)
}

/// Number of the Job's pods that are ready (`status.ready`).
pub fn ready_pods(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.ready).unwrap_or(0)
}

/// Number of the Job's pods that still exist and are not terminated:
/// `status.active` (which does not count pods being deleted) plus
/// `status.terminating` where the server reports it. Where it does not,
/// the controller lists the pods before it calls them gone.
pub fn live_pods(job: &Job) -> i32 {
    let s = job.status.as_ref();
    s.and_then(|s| s.active).unwrap_or(0) + s.and_then(|s| s.terminating).unwrap_or(0)
}

/// `batch/v1` Job as a kind: the rules above, reached by kind.
pub(crate) struct BatchJob;

fn parse(obj: &Value) -> Result<Job, JobError> {
    serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "Job".into(),
        problem: e.to_string(),
    })
}

impl Queueable for BatchJob {
    fn resource(&self) -> Resource {
        Resource {
            group: "batch",
            version: "v1",
            api_version: "batch/v1",
            kind: "Job",
            plural: "jobs",
        }
    }

    fn flag_name(&self) -> &'static str {
        "batch/job"
    }

    fn workload_prefix(&self) -> &'static str {
        "job-"
    }

    /// A JobSet's child Jobs, an MPIJob's launcher, a RayJob's submitter.
    fn made_by(&self) -> &'static [JobKind] {
        &[JobKind::JobSet, JobKind::MpiJob, JobKind::RayJob]
    }

    fn pods_selector(&self, _name: &str, uid: &str) -> String {
        format!("controller-uid={uid}")
    }

    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
        Ok(JobView::of(&parse(obj)?, kueue_compat))
    }

    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        workload_for_job(&parse(obj)?, kueue_compat, workload_class, pod_class)
    }

    /// `status.startTime` cleared first when it is set (through `/status`:
    /// the template is immutable otherwise), then the template, and the
    /// parallelism of a partial admission. A Job has one pod set (`main`,
    /// or its own name in a gang): the one entry of `flavors` and
    /// `admitted`.
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        let all: Vec<&ResourceFlavor> = flavors.values().flatten().copied().collect();
        let pods = admitted.values().next().copied();
        let mut out = Vec::new();
        if view.started {
            out.push((true, ObjPatch::Merge(clear_start_time_patch())));
        }
        out.push((false, ObjPatch::Merge(injection_patch(&view.patch_base(), &all, pods)?)));
        Ok(out)
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        let Some(patch) = restoration_patch(&view.patch_base())? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        if view.started {
            out.push((true, ObjPatch::Merge(clear_start_time_patch())));
        }
        out.push((false, ObjPatch::Merge(patch)));
        Ok(out)
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidJob"
    }

    /// As every kind's, and `patch` on `jobs/status` (a started Job's
    /// `status.startTime` is cleared before its template changes).
    fn controller_access(&self) -> Vec<crate::Access> {
        vec![
            crate::Access {
                verbs: &["get", "list", "watch", "patch"],
                group: "batch",
                resource: "jobs".into(),
            },
            crate::Access {
                verbs: &["patch"],
                group: "batch",
                resource: "jobs/status".into(),
            },
            crate::Access {
                verbs: &["update"],
                group: "batch",
                resource: "jobs/finalizers".into(),
            },
        ]
    }

    fn templates(&self, _obj: &Value) -> Vec<TemplateAt> {
        vec![TemplateAt::at("/spec/template", "spec.template")]
    }

    /// `min(parallelism, completions)`.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        vec![Count {
            field: "spec.parallelism".into(),
            value: shape::job_pods(obj.get("spec")),
        }]
    }

    fn finished(&self, obj: &Value) -> Option<bool> {
        shape::terminal_condition(obj, "Complete", "Failed")
    }
}

mod partial;
mod view;

pub use partial::{ORIGINAL_PARALLELISM, original_parallelism};
pub use view::{JobView, ManagedBy, TemplateDirectives};

#[cfg(test)]
mod tests;
