//! What Sluice keeps of a queued object in memory ([`JobView`]), and the
//! Job rebuilt from it that the patches are computed on.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::labels;

use super::{
    MAIN_POD_SET, ORIGINAL_PARALLELISM, ORIGINAL_SCHEDULING, finished, has_started, is_suspended, live_pods,
    pods_count, queue_of,
};

/// A pod template's `nodeSelector` and `tolerations`, and the pod set it
/// belongs to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TemplateDirectives {
    pub pod_set: String,
    /// Where the template is in its object: a JobSet's replicated Job's
    /// name, a Kubeflow job's role (a Job's: its pod set's name).
    pub key: String,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
}

/// The object of another queued kind that controls a Job, as the Job's
/// owner reference names it (anyone who writes the Job writes that too:
/// the index believes it only when that object exists with that uid).
#[derive(Clone, Debug, PartialEq)]
pub struct ManagedBy {
    pub kind: crate::JobKind,
    pub name: String,
    /// Its uid; empty when only its name is known (named by a label).
    pub uid: String,
}

impl ManagedBy {
    /// The controller an object of `kind` names of a kind that may hold it
    /// ([`crate::JobKind::made_by`]), or the maker its label names when
    /// its controller is a pod of that maker's (a LeaderWorkerSet's worker
    /// StatefulSet: [`crate::Queueable::made_by_label`]; no uid).
    pub fn of(kind: crate::JobKind, meta: &ObjectMeta) -> Option<ManagedBy> {
        if let Some((_, r, k)) = kind.queued_controller(meta) {
            return Some(ManagedBy {
                kind: k,
                name: r.name.clone(),
                uid: r.uid.clone(),
            });
        }
        let (label, maker) = kind.integration().made_by_label()?;
        let under_pod = meta
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.kind == "Pod" && r.api_version == "v1");
        let name = meta.labels.as_ref()?.get(label)?;
        under_pod.then(|| ManagedBy {
            kind: maker,
            name: name.clone(),
            uid: String::new(),
        })
    }
}

/// What Sluice keeps of a Job in memory: the few fields it decides on,
/// and the template's scheduling directives and original-scheduling
/// annotation for the patches. (The full Job is needed only to create its
/// Workload, which happens when the Job is observed.)
#[derive(Clone, Debug, PartialEq)]
pub struct JobView {
    /// The kind of object it is a view of (a JobSet's view is made by
    /// [`crate::jobset`]).
    pub kind: crate::JobKind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The LocalQueue it is queued in (label, with the Kueue label when enabled).
    pub queue: Option<String>,
    pub suspended: bool,
    /// `Some(true)` Complete, `Some(false)` Failed.
    pub finished: Option<bool>,
    /// `status.ready`, when the server reports it.
    pub ready: Option<i32>,
    /// `status.succeeded`.
    pub succeeded: i32,
    /// Pods that run at once: [`pods_count`] of the spec.
    pub pods: i32,
    /// A batch/v1 Job's `spec.parallelism` and `spec.completions` as they
    /// are now (partial admission may have lowered the parallelism); `None`
    /// for other kinds.
    pub parallelism: Option<i32>,
    /// The replicas a serving object (Deployment, StatefulSet,
    /// LeaderWorkerSet) asks for: while it is held, those kept in its
    /// [`labels::HELD_REPLICAS`] annotation, else its `spec.replicas`;
    /// `None` for other kinds.
    pub replicas: Option<i32>,
    pub completions: Option<i32>,
    /// The [`ORIGINAL_PARALLELISM`] annotation, as written.
    pub original_parallelism: Option<String>,
    /// Pods not yet gone ([`live_pods`]).
    pub live: i32,
    /// The server reports `status.terminating` (1.29+, or 1.28 with
    /// JobPodReplacementPolicy): `live` then counts terminating pods too.
    pub reports_terminating: bool,
    /// `status.startTime` is set.
    pub started: bool,
    /// Each pod template's scheduling directives as they are now, in the
    /// object's order (a Job has one, pod set [`MAIN_POD_SET`]).
    pub templates: Vec<TemplateDirectives>,
    /// The [`ORIGINAL_SCHEDULING`] annotation, as written.
    pub original: Option<String>,
    /// Its gang labels, when it is a member of a multi-Job gang.
    pub gang: Option<crate::gang::member::Labels>,
    /// The kind of the object of another kind Sluice queues that made this
    /// Job (a JobSet's child Job, an MPIJob's launcher, a RayJob's
    /// submitter): while that kind is queued, the Job is queued as part of
    /// its owner, never on its own.
    pub managed_by: Option<ManagedBy>,
    /// Queued in its namespace's default LocalQueue without a queue label
    /// of its own: the namespace queues every object
    /// ([`crate::index`]'s `default_queue`).
    pub queued_by_namespace: bool,
    /// Whether a namespace that queues every object queues this one when
    /// it has no queue label ([`crate::Queueable::queued_by_namespace`]:
    /// a serving object only when it asks for a GPU).
    pub namespace_queues: bool,
    /// The label selector of its pods, where it is not its kind's usual
    /// one ([`crate::JobKind::pods_selector`]): a RayJob's
    /// RayCluster's.
    pub pods_selector: Option<String>,
    /// Expected run time (ms): the `sluice.dev/expected-runtime` annotation,
    /// else a Job's `activeDeadlineSeconds`; `Err` names a bad annotation.
    pub expected_runtime: Result<Option<i64>, String>,
    /// The `sluice.dev/checkpoint-done` annotation, as written: the job's
    /// acknowledgement of a preemption notice ([`labels::CHECKPOINT_DONE`]).
    pub checkpoint_done: Option<String>,
}

impl JobView {
    pub fn of(job: &Job, kueue_compat: bool) -> Self {
        let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        JobView {
            kind: crate::JobKind::Job,
            namespace: job.metadata.namespace.clone().unwrap_or_default(),
            name: job.metadata.name.clone().unwrap_or_default(),
            uid: job.metadata.uid.clone().unwrap_or_default(),
            queue: queue_of(job, kueue_compat).map(String::from),
            suspended: is_suspended(job),
            finished: finished(job),
            ready: job.status.as_ref().and_then(|s| s.ready),
            succeeded: job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0),
            pods: job
                .spec
                .as_ref()
                .map_or(1, |s| pods_count(s.parallelism, s.completions)),
            parallelism: job.spec.as_ref().and_then(|s| s.parallelism),
            replicas: None,
            completions: job.spec.as_ref().and_then(|s| s.completions),
            original_parallelism: annotation(job, ORIGINAL_PARALLELISM),
            live: live_pods(job),
            reports_terminating: job.status.as_ref().is_some_and(|s| s.terminating.is_some()),
            started: has_started(job),
            templates: vec![TemplateDirectives {
                pod_set: MAIN_POD_SET.into(),
                key: MAIN_POD_SET.into(),
                node_selector: pod.and_then(|p| p.node_selector.clone()),
                tolerations: pod.and_then(|p| p.tolerations.clone()),
            }],
            original: annotation(job, ORIGINAL_SCHEDULING),
            gang: crate::gang::member::Labels::of(&job.metadata),
            managed_by: ManagedBy::of(crate::JobKind::Job, &job.metadata),
            queued_by_namespace: false,
            namespace_queues: true,
            pods_selector: None,
            expected_runtime: super::expected_runtime_ms(job),
            checkpoint_done: annotation(job, labels::CHECKPOINT_DONE),
        }
    }

    /// A Job holding just what [`super::injection_patch`] and
    /// [`super::restoration_patch`] read.
    pub fn patch_base(&self) -> Job {
        use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
        use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
        let t = self.templates.first();
        Job {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                annotations: Some(
                    [
                        (ORIGINAL_SCHEDULING, &self.original),
                        (ORIGINAL_PARALLELISM, &self.original_parallelism),
                    ]
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
                    .collect::<BTreeMap<_, _>>(),
                )
                .filter(|a| !a.is_empty()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                suspend: Some(self.suspended),
                parallelism: self.parallelism,
                completions: self.completions,
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        node_selector: t.and_then(|t| t.node_selector.clone()),
                        tolerations: t.and_then(|t| t.tolerations.clone()),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: self.started.then(|| JobStatus {
                start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                )),
                ..Default::default()
            }),
        }
    }
}

impl JobView {
    /// All its pods are, or were, ready: `ready + succeeded >= pods`
    /// (Kueue's rule: pods that already succeeded count as ready), with
    /// `pods` at most `admitted` (the Workload's pod count).
    pub fn all_pods_ready(&self, admitted: i32) -> bool {
        let needed = self.pods.min(admitted).max(1);
        self.ready.unwrap_or(0).saturating_add(self.succeeded) >= needed
    }
}

fn annotation(job: &Job, key: &str) -> Option<String> {
    job.metadata.annotations.as_ref()?.get(key).cloned()
}
