//! Kubeflow training jobs, as pure functions over their JSON:
//! `kubeflow.org/v1` PyTorchJob (`spec.pytorchReplicaSpecs`: Master,
//! Worker) and `kubeflow.org/v2beta1` MPIJob (`spec.mpiReplicaSpecs`:
//! Launcher, Worker). Both are a map of roles, each `replicas` pods of a
//! pod template.
//!
//! - Workload `<kind>-<name>` (`pytorchjob-`, `mpijob-`), one pod set per
//!   role, named after it in lower case, of `replicas` pods (default 1)
//!   of its template; controller owner reference to the job.
//! - Suspended and resumed through `spec.runPolicy.suspend` (the training
//!   operator deletes and recreates the pods).
//! - Admission injects each role's flavors into its pod template
//!   (`spec.<replicaSpecs>.<Role>.template.spec`) with one merge patch (the
//!   roles are map keys, so nothing can be patched in the wrong place);
//!   what the user wrote is kept in [`ORIGINAL_SCHEDULING`] (pod set →
//!   directives) and put back on eviction.
//! - Finished: condition `Succeeded` or `Failed`. Ready: condition
//!   `Running` (as Kueue reads these jobs).
//! - Its pods carry [`NAME_LABEL`] (the job's name) and [`OPERATOR_LABEL`]
//!   (`pytorchjob-controller`, `mpi-operator`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView, ORIGINAL_SCHEDULING, SchedulingDirectives, TemplateDirectives};
use crate::shape::{self, Count, Hold, SuspendField, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource, object, placed};

pub const GROUP: &str = "kubeflow.org";
/// Label the training operator puts on a job's pods: the job's name.
pub const NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// Label naming the operator that made a pod (a PyTorchJob and an MPIJob
/// of one name are told apart by it).
pub const OPERATOR_LABEL: &str = "training.kubeflow.org/operator-name";

#[derive(Debug, Deserialize)]
struct Object {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<Value>,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaSpec {
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    template: PodTemplateSpec,
}

#[derive(Debug, Default, Deserialize)]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Debug, Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

/// A parsed job: its metadata, suspend flag and roles (sorted by role).
struct Parsed {
    metadata: ObjectMeta,
    suspend: bool,
    roles: BTreeMap<String, ReplicaSpec>,
    status: Status,
}

fn parse(k: &Kubeflow, obj: &Value) -> Result<Parsed, JobError> {
    let kind = k.kind;
    let o: Object = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: kind.kind().into(),
        problem: e.to_string(),
    })?;
    let spec = o.spec.ok_or(JobError::Missing { field: "spec" })?;
    let field = k.field;
    let raw = spec.get(field).cloned().unwrap_or(Value::Null);
    let roles: BTreeMap<String, ReplicaSpec> = serde_json::from_value(raw).map_err(|e| JobError::Invalid {
        field: format!("spec.{field}"),
        problem: format!("must map each role to its replicas and template: {e}"),
    })?;
    if roles.is_empty() {
        return Err(JobError::Invalid {
            field: format!("spec.{field}"),
            problem: "must name at least one role".into(),
        });
    }
    for (role, rs) in &roles {
        if let Some(r) = rs.replicas
            && r < 0
        {
            return Err(JobError::Invalid {
                field: format!("spec.{field}.{role}.replicas"),
                problem: format!("{r} must not be negative"),
            });
        }
        if role.is_empty() || !role.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(JobError::Invalid {
                field: format!("spec.{field}.{role}"),
                problem: "a role name must be letters, digits and '-' (it names a pod set)".into(),
            });
        }
    }
    let suspend = spec
        .pointer("/runPolicy/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Parsed {
        metadata: o.metadata,
        suspend,
        roles,
        status: o.status.unwrap_or_default(),
    })
}

fn pod_set_name(role: &str) -> String {
    role.to_ascii_lowercase()
}

/// How a job ended: condition `Succeeded` or `Failed`.
fn finished(obj: &Value) -> Option<bool> {
    shape::terminal_condition(obj, "Succeeded", "Failed")
}

/// What the index keeps of a job of kind `k`.
fn view(k: &Kubeflow, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let kind = k.kind;
    let p = parse(k, obj)?;
    let is_true = |t: &str| p.status.conditions.iter().any(|c| c.type_ == t && c.status == "True");
    let finished = finished(obj);
    let pods: i32 = p.roles.values().map(|r| r.replicas.unwrap_or(1)).sum();
    let state = object::State {
        suspended: p.suspend,
        finished,
        // The operator reports Running once the job runs (its master, or
        // its launcher): Kueue's reading too.
        ready: Some(if is_true("Running") { pods } else { 0 }),
        succeeded: 0,
        pods,
        live: 0,
        pods_selector: None,
        replicas: None,
        templates: p
            .roles
            .iter()
            .map(|(role, rs)| object::directives(&pod_set_name(role), role, &rs.template))
            .collect(),
    };
    Ok(object::view(kind, &p.metadata, kueue_compat, state))
}

/// The Workload of a queued job of kind `k` (without status): a role of
/// no pods (replicas 0) takes no quota and is no pod set.
fn workload(
    k: &Kubeflow,
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let p = parse(k, obj)?;
    let sets = p
        .roles
        .iter()
        .map(|(role, rs)| object::Set {
            name: pod_set_name(role),
            count: rs.replicas.unwrap_or(1),
            template: rs.template.clone(),
        })
        .collect();
    object::workload(k.kind, &p.metadata, sets, kueue_compat, workload_class, pod_class)
}

/// The merge patch that suspends a job (`spec.runPolicy.suspend`).
pub fn suspend_patch() -> Value {
    SUSPEND.patch(true)
}

/// Where a training job's suspend flag is.
const SUSPEND: SuspendField = SuspendField {
    pointer: "/spec/runPolicy/suspend",
    field: "spec.runPolicy.suspend",
};

/// The merge patch of one role's directives: `target`, removing what the
/// template has that `target` lacks.
fn role_patch(t: &TemplateDirectives, target: &SchedulingDirectives) -> Value {
    json!({"template": {"spec": object::pod_spec_patch(t, target)}})
}

/// The merge patch that admits a suspended job: the originals recorded
/// (unless already), each role's pod template given its pod set's
/// flavors' node labels and tolerations on top of the original, and
/// `spec.runPolicy.suspend: false`.
/// (`field`: the spec's map of roles).
pub fn injection_patch(
    view: &JobView,
    field: &str,
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
) -> Result<Value, JobError> {
    let originals = placed::originals(view)?;
    let mut roles = Map::new();
    for t in &view.templates {
        // A role added after the originals were recorded: as it is now.
        let original = originals
            .get(&t.pod_set)
            .cloned()
            .unwrap_or_else(|| SchedulingDirectives {
                node_selector: t.node_selector.clone(),
                tolerations: t.tolerations.clone(),
            });
        let assigned: Vec<&ResourceFlavor> = flavors.get(&t.pod_set).cloned().unwrap_or_default();
        roles.insert(
            t.key.clone(),
            role_patch(t, &placed::with_flavors(&original, &assigned)),
        );
    }
    let recorded = serde_json::to_string(&originals).expect("directives serialise");
    Ok(json!({
        "metadata": {"annotations": {ORIGINAL_SCHEDULING: recorded}},
        "spec": {field: roles, "runPolicy": {"suspend": false}},
    }))
}

/// The merge patch that puts back every role's recorded directives and
/// drops the annotation; `None` when nothing was injected.
/// (`field`: the spec's map of roles).
pub fn restoration_patch(view: &JobView, field: &str) -> Result<Option<Value>, JobError> {
    let Some(originals) = placed::recorded(view.original.as_deref())? else {
        return Ok(None);
    };
    let mut roles = Map::new();
    for t in &view.templates {
        // A role added after the injection was never written: as is.
        if let Some(original) = originals.get(&t.pod_set) {
            roles.insert(t.key.clone(), role_patch(t, original));
        }
    }
    Ok(Some(json!({
        "metadata": {"annotations": {ORIGINAL_SCHEDULING: null}},
        "spec": {field: roles},
    })))
}

/// A Kubeflow kind as a [`Queueable`]: each is one of these (its own
/// file for those of the training operator's other frameworks).
pub(crate) struct Kubeflow {
    pub(crate) kind: JobKind,
    pub(crate) resource: Resource,
    /// The field of its spec that holds its roles (`pytorchReplicaSpecs`).
    pub(crate) field: &'static str,
    pub(crate) flag: &'static str,
    pub(crate) prefix: &'static str,
    /// The [`OPERATOR_LABEL`] of its pods.
    pub(crate) operator: &'static str,
    /// The reason recorded for one that cannot be read.
    pub(crate) invalid: &'static str,
}

pub(crate) const PYTORCH_JOB: Kubeflow = Kubeflow {
    kind: JobKind::PyTorchJob,
    resource: Resource {
        group: GROUP,
        version: "v1",
        api_version: "kubeflow.org/v1",
        kind: "PyTorchJob",
        plural: "pytorchjobs",
    },
    field: "pytorchReplicaSpecs",
    flag: "kubeflow.org/pytorchjob",
    prefix: "pytorchjob-",
    operator: "pytorchjob-controller",
    invalid: "InvalidPyTorchJob",
};

pub(crate) const MPI_JOB: Kubeflow = Kubeflow {
    kind: JobKind::MpiJob,
    resource: Resource {
        group: GROUP,
        version: "v2beta1",
        api_version: "kubeflow.org/v2beta1",
        kind: "MPIJob",
        plural: "mpijobs",
    },
    field: "mpiReplicaSpecs",
    flag: "kubeflow.org/mpijob",
    prefix: "mpijob-",
    operator: "mpi-operator",
    invalid: "InvalidMPIJob",
};

impl Queueable for Kubeflow {
    fn resource(&self) -> Resource {
        self.resource
    }

    fn flag_name(&self) -> &'static str {
        self.flag
    }

    fn workload_prefix(&self) -> &'static str {
        self.prefix
    }

    fn pods_selector(&self, name: &str, _uid: &str) -> String {
        format!("{NAME_LABEL}={name},{OPERATOR_LABEL}={}", self.operator)
    }

    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
        view(self, obj, kueue_compat)
    }

    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        workload(self, obj, kueue_compat, workload_class, pod_class)
    }

    /// Admitted whole: its pod sets have no minCount (see `object`).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        _admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(vec![(
            false,
            ObjPatch::Merge(injection_patch(view, self.field, flavors)?),
        )])
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(restoration_patch(view, self.field)?
            .map(|p| vec![(false, ObjPatch::Merge(p))])
            .unwrap_or_default())
    }

    fn invalid_reason(&self) -> &'static str {
        self.invalid
    }

    fn hold(&self) -> Hold {
        Hold::Suspend(SUSPEND)
    }

    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        shape::role_templates(obj, self.field)
    }

    /// Each role's `replicas`.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        shape::role_counts(obj, self.field)
    }

    fn finished(&self, obj: &Value) -> Option<bool> {
        finished(obj)
    }
}

#[cfg(test)]
mod tests;
