//! `trainer.kubeflow.org/v1alpha1` TrainJob (Kubeflow Trainer v2), as pure
//! functions over its JSON and its training runtime's.
//!
//! - A TrainJob names its runtime (`spec.runtimeRef`: a
//!   ClusterTrainingRuntime, the default, or a TrainingRuntime in its
//!   namespace); the runtime's `spec.template` is a JobSet template, and
//!   Trainer makes a JobSet named like the TrainJob from it. Its pod sets
//!   are therefore read from the runtime ([`Queueable::referent`]): the
//!   controller resolves it from the runtimes it watches and calls
//!   [`Queueable::workload_with`]; without the runtime there is no
//!   Workload (the controller reports which runtime is missing).
//! - Workload `trainjob-<name>`, one pod set per replicated Job of the
//!   runtime, as a JobSet's ([`crate::jobset`]), except the trainer's
//!   (the replicated Job whose template is labelled
//!   [`ANCESTOR_LABEL`]`: trainer`, else the one named `node`): its pods
//!   are `spec.trainer.numNodes`, else the runtime's
//!   `spec.mlPolicy.numNodes`, else as its template says; and
//!   `spec.trainer.resourcesPerNode` replaces the resources of its
//!   `node` container (else its first).
//! - Suspended and resumed through `spec.suspend`.
//! - Admission writes each pod set's flavors (node labels, tolerations) as
//!   one entry of `spec.podTemplateOverrides` (Trainer v2.1) targeting
//!   that replicated Job, marked by [`OVERRIDE_MARK`] in the entry's
//!   `metadata.annotations`; the user's own entries are never touched.
//!   Restoring removes the marked entries, each removal guarded by a
//!   `test` of its mark. The view's `templates` are the TrainJob's
//!   override entries in order (`key`: [`OWNED`] for Sluice's, empty for
//!   the user's).
//! - Finished: condition `Complete` (succeeded) or `Failed`.
//! - The JobSet Trainer makes is controlled by the TrainJob and left to it
//!   ([`crate::jobset`]'s `made_by`).
//! - Its pods carry `jobset.sigs.k8s.io/jobset-name: <name>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{self, JobError, JobView, TemplateDirectives};
use crate::jobset::{self, ReplicatedJob};
use crate::shape::{self, Count, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Referent, Resource, object, placed};

pub const GROUP: &str = "trainer.kubeflow.org";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";
pub const KIND: &str = "TrainJob";
pub const PLURAL: &str = "trainjobs";
/// The namespaced runtime.
pub const TRAINING_RUNTIME: Resource = Resource {
    group: GROUP,
    version: VERSION,
    api_version: API_VERSION,
    kind: "TrainingRuntime",
    plural: "trainingruntimes",
};
/// The cluster-scoped runtime (the default of `spec.runtimeRef.kind`).
pub const CLUSTER_TRAINING_RUNTIME: Resource = Resource {
    group: GROUP,
    version: VERSION,
    api_version: API_VERSION,
    kind: "ClusterTrainingRuntime",
    plural: "clustertrainingruntimes",
};
/// The label of a runtime's replicated Job template that says which step
/// of training it is (`trainer`, `dataset-initializer`, …).
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// The label Trainer's JobSet puts on its pods: the JobSet's (and the
/// TrainJob's) name.
pub const NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// The annotation, in a `spec.podTemplateOverrides` entry's metadata,
/// that marks the entry as Sluice's (its value: the pod set).
pub const OVERRIDE_MARK: &str = "sluice.dev/admission-override";
/// The `key` of the view's template that is one of Sluice's entries.
pub const OWNED: &str = "sluice";
/// The replicated Job that runs the trainer, when no template is labelled.
const TRAINER_JOB: &str = "node";

/// What Sluice reads of a TrainJob.
#[derive(Debug, Deserialize)]
struct TrainJob {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    suspend: Option<bool>,
    runtime_ref: Option<RuntimeRef>,
    #[serde(default)]
    trainer: Option<Trainer>,
    #[serde(default)]
    pod_template_overrides: Vec<Override>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeRef {
    name: String,
    #[serde(default)]
    api_group: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Trainer {
    #[serde(default)]
    num_nodes: Option<i32>,
    #[serde(default)]
    resources_per_node: Option<ResourceRequirements>,
}

/// One `spec.podTemplateOverrides` entry, as far as scheduling goes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Override {
    #[serde(default)]
    target_jobs: Vec<Target>,
    #[serde(default)]
    metadata: Option<ObjectMeta>,
    #[serde(default)]
    spec: Option<OverrideSpec>,
}

#[derive(Debug, Deserialize)]
struct Target {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OverrideSpec {
    #[serde(default)]
    node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    tolerations: Option<Vec<Toleration>>,
}

impl Override {
    fn owned(&self) -> bool {
        self.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .is_some_and(|a| a.contains_key(OVERRIDE_MARK))
    }
}

/// What Sluice reads of a (Cluster)TrainingRuntime.
#[derive(Debug, Deserialize)]
struct Runtime {
    spec: Option<RuntimeSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeSpec {
    #[serde(default)]
    ml_policy: Option<MlPolicy>,
    template: Option<RuntimeTemplate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MlPolicy {
    #[serde(default)]
    num_nodes: Option<i32>,
}

#[derive(Debug, Deserialize)]
struct RuntimeTemplate {
    spec: Option<RuntimeJobSet>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuntimeJobSet {
    #[serde(default)]
    replicated_jobs: Vec<ReplicatedJob>,
}

fn parse(obj: &Value) -> Result<(TrainJob, Spec), JobError> {
    let mut tj: TrainJob = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "TrainJob".into(),
        problem: e.to_string(),
    })?;
    let spec = tj.spec.take().ok_or(JobError::Missing { field: "spec" })?;
    if let Some(n) = spec.trainer.as_ref().and_then(|t| t.num_nodes)
        && n < 1
    {
        return Err(JobError::Invalid {
            field: "spec.trainer.numNodes".into(),
            problem: format!("{n} must be at least 1"),
        });
    }
    Ok((tj, spec))
}

/// The runtime a TrainJob names (in `namespace` when it is a
/// TrainingRuntime).
fn runtime_of(spec: &Spec, namespace: &str) -> Result<Referent, JobError> {
    let r = spec.runtime_ref.as_ref().ok_or(JobError::Missing {
        field: "spec.runtimeRef",
    })?;
    if let Some(g) = r.api_group.as_deref().filter(|g| *g != GROUP) {
        return Err(JobError::Invalid {
            field: "spec.runtimeRef.apiGroup".into(),
            problem: format!("{g:?}: Sluice reads runtimes of {GROUP} only"),
        });
    }
    let (resource, namespace) = match r.kind.as_deref() {
        None | Some("ClusterTrainingRuntime") => (CLUSTER_TRAINING_RUNTIME, None),
        Some("TrainingRuntime") => (TRAINING_RUNTIME, Some(namespace.to_string())),
        Some(other) => {
            return Err(JobError::Invalid {
                field: "spec.runtimeRef.kind".into(),
                problem: format!("{other:?}: must be ClusterTrainingRuntime or TrainingRuntime"),
            });
        }
    };
    Ok(Referent {
        resource,
        namespace,
        name: r.name.clone(),
    })
}

/// The label selector of a TrainJob's pods (its JobSet's name is its own).
fn pods_selector(name: &str) -> String {
    format!("{NAME_LABEL}={name}")
}

/// How a TrainJob ended: condition `Complete` or `Failed`.
fn finished(obj: &Value) -> Option<bool> {
    shape::terminal_condition(obj, "Complete", "Failed")
}

/// What the index keeps of a TrainJob: `pods` its trainer's nodes as it
/// asks for them (1 when it leaves them to its runtime), no readiness (its
/// pods are looked up by label), its override entries as `templates`.
pub fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let (tj, spec) = parse(obj)?;
    let templates = spec
        .pod_template_overrides
        .iter()
        .map(|o| TemplateDirectives {
            pod_set: o
                .target_jobs
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
            key: if o.owned() { OWNED.to_string() } else { String::new() },
            node_selector: o.spec.as_ref().and_then(|s| s.node_selector.clone()),
            tolerations: o.spec.as_ref().and_then(|s| s.tolerations.clone()),
        })
        .collect();
    let name = tj.metadata.name.clone().unwrap_or_default();
    let state = object::State {
        suspended: spec.suspend.unwrap_or(false),
        finished: finished(obj),
        ready: None,
        succeeded: 0,
        pods: spec.trainer.as_ref().and_then(|t| t.num_nodes).unwrap_or(1),
        live: 0,
        pods_selector: Some(pods_selector(&name)),
        replicas: None,
        templates,
    };
    Ok(object::view(JobKind::TrainJob, &tj.metadata, kueue_compat, state))
}

/// Whether `rj` is the runtime's trainer Job.
fn is_trainer(rj: &ReplicatedJob, labelled: bool) -> bool {
    if labelled {
        rj.template
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.as_ref())
            .or(rj.template.metadata.as_ref().and_then(|m| m.labels.as_ref()))
            .and_then(|l| l.get(ANCESTOR_LABEL))
            .is_some_and(|v| v == "trainer")
    } else {
        rj.name == TRAINER_JOB
    }
}

/// The pod sets of a TrainJob run by `runtime` (its JSON).
fn pod_sets(spec: &Spec, runtime: &Value) -> Result<Vec<object::Set>, JobError> {
    let rt: Runtime = serde_json::from_value(runtime.clone()).map_err(|e| JobError::Invalid {
        field: "spec.runtimeRef".into(),
        problem: format!("its runtime cannot be read: {e}"),
    })?;
    let rspec = rt.spec.ok_or(JobError::Invalid {
        field: "spec.runtimeRef".into(),
        problem: "its runtime has no spec".into(),
    })?;
    let jobs = rspec
        .template
        .and_then(|t| t.spec)
        .map(|s| s.replicated_jobs)
        .unwrap_or_default();
    if jobs.is_empty() {
        return Err(JobError::Invalid {
            field: "spec.runtimeRef".into(),
            problem: "its runtime's spec.template.spec.replicatedJobs lists no Job".into(),
        });
    }
    let labelled = jobs.iter().any(|rj| is_trainer(rj, true));
    let trainer = spec.trainer.as_ref();
    let num_nodes = trainer
        .and_then(|t| t.num_nodes)
        .or(rspec.ml_policy.as_ref().and_then(|p| p.num_nodes));
    let mut sets = Vec::new();
    for rj in &jobs {
        // Counted as a JobSet's, but for the trainer's nodes.
        let mut template: PodTemplateSpec = jobset::pod_template(rj);
        let mut count = jobset::pods_of(rj);
        if is_trainer(rj, labelled) {
            if let Some(n) = num_nodes {
                count = rj.copies().saturating_mul(n);
            }
            if let Some(res) = trainer.and_then(|t| t.resources_per_node.clone())
                && let Some(pod) = template.spec.as_mut()
            {
                let i = pod.containers.iter().position(|c| c.name == TRAINER_JOB).unwrap_or(0);
                if let Some(c) = pod.containers.get_mut(i) {
                    c.resources = Some(res);
                }
            }
        }
        // The user's own overrides of this Job's pods (Sluice's are not
        // part of what the TrainJob asks for).
        if let Some(pod) = template.spec.as_mut() {
            for o in spec.pod_template_overrides.iter().filter(|o| !o.owned()) {
                if !o.target_jobs.iter().any(|t| t.name == rj.name) {
                    continue;
                }
                let Some(os) = o.spec.as_ref() else { continue };
                if let Some(sel) = &os.node_selector {
                    pod.node_selector.get_or_insert_with(BTreeMap::new).extend(sel.clone());
                }
                if let Some(tols) = &os.tolerations {
                    pod.tolerations
                        .get_or_insert_with(Vec::new)
                        .extend(tols.iter().cloned());
                }
            }
        }
        sets.push(object::Set {
            name: rj.name.clone(),
            count,
            template,
        });
    }
    Ok(sets)
}

/// The Workload of a queued TrainJob run by `runtime` (its JSON; without
/// status).
pub fn workload(
    obj: &Value,
    runtime: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let (tj, spec) = parse(obj)?;
    let sets = pod_sets(&spec, runtime)?;
    object::workload(
        JobKind::TrainJob,
        &tj.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// Operations removing Sluice's override entries (last first, each
/// guarded by its mark).
fn removals(view: &JobView) -> Vec<Value> {
    let mut ops = Vec::new();
    for (i, t) in view.templates.iter().enumerate().rev().filter(|(_, t)| t.key == OWNED) {
        let mark = format!(
            "/spec/podTemplateOverrides/{i}/metadata/annotations/{}",
            shape::escape(OVERRIDE_MARK)
        );
        ops.push(json!({"op": "test", "path": mark, "value": t.pod_set}));
        ops.push(json!({"op": "remove", "path": format!("/spec/podTemplateOverrides/{i}")}));
    }
    ops
}

/// Sluice's override entry giving pod set `pod_set` its flavors.
fn entry(pod_set: &str, flavors: &[&ResourceFlavor]) -> Option<Value> {
    let d = placed::with_flavors(&job::SchedulingDirectives::default(), flavors);
    let selector = d.node_selector.filter(|m| !m.is_empty());
    let tolerations = d.tolerations.filter(|v| !v.is_empty());
    if selector.is_none() && tolerations.is_none() {
        return None;
    }
    let mut spec = serde_json::Map::new();
    if let Some(s) = selector {
        spec.insert("nodeSelector".into(), json!(s));
    }
    if let Some(t) = tolerations {
        spec.insert("tolerations".into(), json!(t));
    }
    Some(json!({
        "targetJobs": [{"name": pod_set}],
        "metadata": {"annotations": {OVERRIDE_MARK: pod_set}},
        "spec": spec,
    }))
}

/// TrainJob as a [`Queueable`].
pub(super) struct TrainJobKind;

impl Queueable for TrainJobKind {
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
        "trainer.kubeflow.org/trainjob"
    }

    fn workload_prefix(&self) -> &'static str {
        "trainjob-"
    }

    fn pods_selector(&self, name: &str, _uid: &str) -> String {
        pods_selector(name)
    }

    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
        view(obj, kueue_compat)
    }

    /// Never without its runtime: see [`Queueable::workload_with`].
    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        self.workload_with(obj, None, kueue_compat, workload_class, pod_class)
    }

    fn referent(&self, obj: &Value) -> Result<Option<Referent>, JobError> {
        let (tj, spec) = parse(obj)?;
        runtime_of(&spec, tj.metadata.namespace.as_deref().unwrap_or_default()).map(Some)
    }

    fn referent_kinds(&self) -> &'static [Resource] {
        &[TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME]
    }

    fn workload_with(
        &self,
        obj: &Value,
        referent: Option<&Value>,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        let Some(runtime) = referent else {
            let (tj, spec) = parse(obj)?;
            let r = runtime_of(&spec, tj.metadata.namespace.as_deref().unwrap_or_default())?;
            return Err(JobError::Invalid {
                field: "spec.runtimeRef".into(),
                problem: format!("{} not found: its pod sets are read from it", r.describe()),
            });
        };
        workload(obj, runtime, kueue_compat, workload_class, pod_class)
    }

    /// Sluice's entries replaced by one per pod set with flavors, and
    /// `spec.suspend: false`, in one JSON patch. Admitted whole: its pod
    /// sets have no minCount (see `object`).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        _admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        let mut ops = removals(view);
        let entries: Vec<Value> = flavors.iter().filter_map(|(ps, f)| entry(ps, f)).collect();
        let kept = view.templates.iter().filter(|t| t.key != OWNED).count();
        if !entries.is_empty() {
            if kept == 0 {
                ops.push(json!({"op": "add", "path": "/spec/podTemplateOverrides", "value": entries}));
            } else {
                for e in entries {
                    ops.push(json!({"op": "add", "path": "/spec/podTemplateOverrides/-", "value": e}));
                }
            }
        }
        ops.push(json!({"op": "add", "path": "/spec/suspend", "value": false}));
        Ok(vec![(false, ObjPatch::Json(Value::Array(ops)))])
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        let ops = removals(view);
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![(false, ObjPatch::Json(Value::Array(ops)))])
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidTrainJob"
    }

    /// None of its own: its pods' templates are its runtime's, and the
    /// webhook fixes its pods as they are made.
    fn templates(&self, _obj: &Value) -> Vec<TemplateAt> {
        Vec::new()
    }

    /// Its trainer's nodes (`spec.trainer.numNodes`; 1 when left to its
    /// runtime).
    fn counts(&self, obj: &Value) -> Vec<Count> {
        vec![Count {
            field: "spec.trainer.numNodes".into(),
            value: shape::int(obj.pointer("/spec/trainer/numNodes"), 1),
        }]
    }

    fn finished(&self, obj: &Value) -> Option<bool> {
        finished(obj)
    }

    /// What every kind needs, and reading the runtimes its pod sets come
    /// from.
    fn controller_access(&self) -> Vec<crate::Access> {
        let r = self.resource();
        let mut access = vec![
            crate::Access {
                verbs: &["get", "list", "watch", "patch"],
                group: r.group,
                resource: r.plural.to_owned(),
            },
            crate::Access {
                verbs: &["update"],
                group: r.group,
                resource: format!("{}/finalizers", r.plural),
            },
        ];
        for rt in self.referent_kinds() {
            access.push(crate::Access {
                verbs: &["get", "list", "watch"],
                group: rt.group,
                resource: rt.plural.to_owned(),
            });
        }
        access
    }
}

#[cfg(test)]
mod tests;
