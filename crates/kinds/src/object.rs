//! What every queued kind other than batch/v1 Job shares: its view from
//! its metadata and what its kind module read, and its Workload from its
//! metadata and pod sets (the user's directives put back from
//! [`ORIGINAL_SCHEDULING`], the queue, the priority, the owner reference).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::labels;
use sluice_api::v1alpha1::{PodSet, Workload};

use crate::job::{self, JobError, JobView, ORIGINAL_SCHEDULING, TemplateDirectives};
use crate::{JobKind, placed};

/// What a kind module reads of an object's state.
pub(super) struct State {
    pub(super) suspended: bool,
    pub(super) finished: Option<bool>,
    /// Ready units (pods, or child Jobs), when the kind reports them.
    pub(super) ready: Option<i32>,
    pub(super) succeeded: i32,
    /// Units the object runs at once.
    pub(super) pods: i32,
    /// Units not gone yet (0: look at its pods).
    pub(super) live: i32,
    pub(super) pods_selector: Option<String>,
    pub(super) templates: Vec<TemplateDirectives>,
    /// A serving object's replicas as asked ([`JobView::replicas`]).
    pub(super) replicas: Option<i32>,
}

/// A template's directives as they are now.
pub(super) fn directives(pod_set: &str, key: &str, template: &PodTemplateSpec) -> TemplateDirectives {
    let pod = template.spec.as_ref();
    TemplateDirectives {
        pod_set: pod_set.to_string(),
        key: key.to_string(),
        node_selector: pod.and_then(|p| p.node_selector.clone()),
        tolerations: pod.and_then(|p| p.tolerations.clone()),
    }
}

/// The merge patch of a pod spec whose directives are `t` now that makes
/// them `target`: its `nodeSelector` and `tolerations`, removing what the
/// template has that `target` lacks.
pub(super) fn pod_spec_patch(t: &TemplateDirectives, target: &job::SchedulingDirectives) -> serde_json::Value {
    use serde_json::Value;
    let mut pod = serde_json::Map::new();
    let selector = target.node_selector.clone().unwrap_or_default();
    pod.insert(
        "nodeSelector".into(),
        job::selector_patch(t.node_selector.as_ref(), &selector),
    );
    pod.insert(
        "tolerations".into(),
        match target.tolerations.as_ref().filter(|v| !v.is_empty()) {
            Some(v) => serde_json::to_value(v).expect("tolerations serialise"),
            None => Value::Null,
        },
    );
    Value::Object(pod)
}

/// The view of an object of `kind`.
pub(super) fn view(kind: JobKind, meta: &ObjectMeta, kueue_compat: bool, state: State) -> JobView {
    JobView {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        queue: meta
            .labels
            .as_ref()
            .and_then(|l| labels::queue_name(l, kueue_compat))
            .map(String::from),
        suspended: state.suspended,
        finished: state.finished,
        ready: state.ready,
        succeeded: state.succeeded,
        pods: state.pods,
        parallelism: None,
        replicas: state.replicas,
        completions: None,
        original_parallelism: None,
        live: state.live,
        reports_terminating: false,
        started: false,
        templates: state.templates,
        original: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(ORIGINAL_SCHEDULING))
            .cloned(),
        gang: None,
        managed_by: job::ManagedBy::of(kind, meta),
        queued_by_namespace: false,
        namespace_queues: true,
        pods_selector: state.pods_selector,
        expected_runtime: labels::expected_runtime_ms(meta.annotations.as_ref()),
        checkpoint_done: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::CHECKPOINT_DONE))
            .cloned(),
    }
}

/// One pod set of an object: its name, pods, and its template as it is
/// now. No `minCount`: these kinds are admitted whole. Their objects run
/// the pods their spec says (an elastic PyTorchJob's workers, an
/// autoscaled Ray worker group's replicas), and their start patches do
/// not scale them down, so a partial admission would run more pods than
/// the quota it took; only a batch/v1 Job's parallelism is lowered to what
/// was admitted ([`crate::job`]).
pub(super) struct Set {
    pub(super) name: String,
    pub(super) count: i32,
    pub(super) template: PodTemplateSpec,
}

/// The Workload of a queued object of `kind` with these pod sets; a pod
/// set of no pods is left out.
pub(super) fn workload(
    kind: JobKind,
    meta: &ObjectMeta,
    pod_sets: Vec<Set>,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
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
    let topology = super::topology_of(meta.annotations.as_ref())?;
    super::refuse_min_parallelism(kind, meta.annotations.as_ref())?;
    let pod_sets: Vec<PodSet> = pod_sets
        .into_iter()
        .filter(|s| s.count > 0)
        .map(
            |Set {
                 name: ps,
                 count,
                 mut template,
             }| {
                // The template as the user wrote it: injected directives are
                // not part of what the workload asks for.
                if let Some(original) = originals.as_ref().and_then(|o| o.get(&ps))
                    && let Some(pod) = template.spec.as_mut()
                {
                    pod.node_selector = original.node_selector.clone();
                    pod.tolerations = original.tolerations.clone();
                }
                PodSet {
                    name: ps,
                    count,
                    min_count: None,
                    template,
                    topology,
                }
            },
        )
        .collect();
    let template_class = pod_sets
        .iter()
        .find_map(|p| p.template.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()));
    let priority = job::priority_of(meta.labels.as_ref(), template_class, workload_class, pod_class);
    let mut owner = job::owner_reference(name, uid, true);
    owner.api_version = kind.api_version().into();
    owner.kind = kind.kind().into();
    let metadata = ObjectMeta {
        name: Some(kind.workload_name(name)),
        namespace: Some(namespace.to_string()),
        labels: Some(BTreeMap::from([(labels::QUEUE.to_string(), queue.to_string())])),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    Ok(super::queued_workload(metadata, queue, pod_sets, priority))
}
