//! The one writer: applies [`Plan`]s through the API server, in order.
//!
//! - Workloads: server-side apply with field manager [`FIELD_MANAGER`]
//!   (`force`), the status through `/status` with every status field
//!   Sluice owns (re-applying fewer fields removes the omitted ones).
//! - Jobs: JSON merge patches (see [`sluice_kinds::job`]), the same field manager.
//! - Events: events.k8s.io/v1 with `eventTime` (required by the API
//!   server), `reportingController` [`REPORTING_CONTROLLER`].
//!
//! A failed step stops its plan (Events excepted: a lost Event is logged
//! and the plan goes on). [`drain`] sends the outcome back, and the run
//! loop hands it to [`Index::feedback`](crate::index::Index::feedback):
//! status writes are acknowledged with the resourceVersion they made; a
//! failed admission status write rolls the admission back in the engine
//! (assume, then commit); a failed or unanswered status write has its
//! Workload read back; other failures are forgotten so that they are
//! tried again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
};
use serde_json::json;
use sluice_api::v1alpha1::{ClusterQueue, Cohort, LocalQueue, Workload, WorkloadStatus};

pub use crate::run::lease::LeaseFence;

use crate::limit::Limiter;
use crate::metrics::Metrics;
use crate::plan::{EventSpec, JobRef, ObjKey, Plan, QueueRef, Step};
use sluice_kinds::ObjPatch;

mod drain;
mod queue;
pub use drain::drain;
pub use queue::{Lane, Lazy, WriteQueue};

/// Field manager of every write.
pub const FIELD_MANAGER: &str = "sluice-controller";
/// `reportingController` of Events.
pub const REPORTING_CONTROLLER: &str = "sluice.dev/controller";
/// Time limit of one API call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{kind} write failed: {source}")]
    Api {
        kind: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{kind} write timed out after {secs}s", secs = CALL_TIMEOUT.as_secs())]
    Timeout { kind: &'static str },
    #[error("{kind} write dropped: this replica does not hold the lease")]
    NotLeader { kind: &'static str },
    #[error("pods of Job {job} are still running or terminating")]
    PodsRemain { job: String },
}

impl WriteError {
    /// Label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            WriteError::Api { source, .. } => match source {
                kube::Error::Api(s) if s.code == 409 => "conflict",
                kube::Error::Api(s) if s.code == 404 => "not_found",
                kube::Error::Api(s) if s.code == 422 => "invalid",
                kube::Error::Api(s) if s.code >= 500 => "server_error",
                kube::Error::Api(_) => "api_error",
                _ => "transport",
            },
            WriteError::Timeout { .. } => "timeout",
            WriteError::NotLeader { .. } => "not_leader",
            WriteError::PodsRemain { .. } => "pods_remain",
        }
    }

    /// Whether it says the API server is unavailable (no answer in time,
    /// a 5xx, a 429, no connection): one outage, not one log line a call
    /// ([`crate::outage`]).
    pub fn unavailable(&self) -> bool {
        match self {
            WriteError::Api { source, .. } => crate::outage::unavailable(source),
            WriteError::Timeout { .. } => true,
            WriteError::NotLeader { .. } | WriteError::PodsRemain { .. } => false,
        }
    }

    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            WriteError::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

/// A plan that stopped at step `step`.
#[derive(Debug, thiserror::Error)]
#[error("plan {purpose} stopped at step {step}: {error}")]
pub struct PlanError {
    pub purpose: &'static str,
    pub step: usize,
    #[source]
    pub error: WriteError,
    /// resourceVersions the status writes before `step` made.
    pub acks: Vec<(usize, String)>,
}

/// Applies plans with one client.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    /// `reportingInstance` of Events (the pod name).
    instance: String,
    limiter: Option<Arc<Limiter>>,
    leader: Option<watch::Receiver<bool>>,
    fence: Option<Arc<LeaseFence>>,
    /// Events go here instead of being written inline (see [`event_lane`]).
    events: Option<tokio::sync::mpsc::Sender<EventSpec>>,
    /// The lazy lanes' own share (`--explain-qps`).
    explain: Option<Arc<Limiter>>,
}

impl Writer {
    pub fn new(client: Client, instance: impl Into<String>) -> Self {
        Self {
            client,
            instance: instance.into(),
            limiter: None,
            leader: None,
            fence: None,
            events: None,
            explain: None,
        }
    }

    /// Client-side rate limit of writes (`--kube-qps`, `--kube-burst`).
    pub fn with_rate_limit(mut self, qps: f64, burst: u32) -> Self {
        self.limiter = Some(Arc::new(Limiter::new(qps, burst)));
        self
    }

    /// The lazy lanes' own share (`--explain-qps`): `qps` writes per
    /// second (a burst of one second's worth) beyond the budget the state
    /// lane leaves unused; none when `qps` is 0 or less.
    pub fn with_explain_rate(mut self, qps: f64) -> Self {
        self.explain = Some(Arc::new(Limiter::new(qps, qps.ceil().max(1.0) as u32)));
        self
    }

    /// Takes the budget of a lazy plan making `writes` API writes, or says
    /// how long until it could:
    /// - budget the state lane leaves unused: tokens the client-side
    ///   limit's bucket would lose because it is full (so a burst of
    ///   state changes that comes next still finds a full bucket, less
    ///   one write), or, without a limit, any moment no state change waits;
    /// - otherwise the lazy lanes' own share ([`Writer::with_explain_rate`]).
    pub fn spare(&self, writes: u32) -> Result<(), Duration> {
        if writes == 0 {
            return Ok(());
        }
        let unused = self.limiter.as_ref().and_then(|l| {
            let burst = l.burst()?;
            l.try_acquire(writes, burst.saturating_sub(writes))
        });
        let Some(wait_unused) = unused else { return Ok(()) };
        match self.own_share().map(|l| l.try_acquire(writes, 0)) {
            Some(None) => Ok(()),
            Some(Some(wait)) => Err(wait.min(wait_unused)),
            None => Err(wait_unused),
        }
    }

    /// Takes `writes` tokens of the lazy lanes' own share only (a lazy
    /// plan written while a state change waits for its token); `false`
    /// when the share has none now, or there is no share.
    pub fn share(&self, writes: u32) -> bool {
        self.own_share().is_some_and(|l| l.try_acquire(writes, 0).is_none())
    }

    /// The lazy lanes' own share, if they have one.
    fn own_share(&self) -> Option<&Limiter> {
        self.explain.as_deref().filter(|l| l.burst().is_some())
    }

    /// How long a state change would wait for its token now (`None`: it
    /// would not wait). Takes nothing.
    pub fn state_wait(&self) -> Option<Duration> {
        self.limiter.as_ref().and_then(|l| l.wait_time(1, 0))
    }

    /// Writes only while the receiver says this replica leads.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    /// Hands Events to a lane of their own instead of writing them inline.
    pub fn with_event_lane(mut self, events: tokio::sync::mpsc::Sender<EventSpec>) -> Self {
        self.events = Some(events);
        self
    }

    /// Writes only while the observed Lease names this replica and has not
    /// expired.
    pub fn with_fence(mut self, fence: Arc<LeaseFence>) -> Self {
        self.fence = Some(fence);
        self
    }

    async fn throttle(&self) {
        if let Some(l) = &self.limiter {
            l.acquire().await;
        }
    }

    /// Workloads untyped: a reply that our types cannot read (another
    /// version's fields) must not make a successful write look failed.
    fn workloads(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &ApiResource::erase::<Workload>(&()))
    }

    /// Applies the steps in order; stops at the first failed non-Event step.
    /// Returns the resourceVersion each status write made, by step index.
    pub async fn apply(&self, plan: &Plan, metrics: Option<&Metrics>) -> Result<Vec<(usize, String)>, PlanError> {
        self.apply_with(plan, metrics, false).await
    }

    /// [`Writer::apply`]; `prepaid`: the plan's budgeted writes have their
    /// tokens already ([`Writer::spare`]).
    pub async fn apply_with(
        &self,
        plan: &Plan,
        metrics: Option<&Metrics>,
        prepaid: bool,
    ) -> Result<Vec<(usize, String)>, PlanError> {
        let lane = Lane::of(&plan.purpose);
        let mut acks = Vec::new();
        for (i, step) in plan.steps.iter().enumerate() {
            if let (Step::Event(spec), Some(lane)) = (step, &self.events) {
                // Never waits: a full lane drops the Event (as client-go's
                // recorder does), counted.
                if lane.try_send(spec.clone()).is_err() {
                    tracing::warn!(reason = %spec.reason, "event lane full; event dropped");
                    if let Some(m) = metrics {
                        m.dropped_events.inc();
                    }
                }
                continue;
            }
            if !(prepaid && step.is_budgeted()) {
                self.throttle().await;
            }
            let result = self.call(step).await;
            if let Some(m) = metrics
                && step.is_write()
            {
                m.write(step.kind(), result.is_ok());
                if result.is_ok() && step.is_budgeted() {
                    m.lane_writes
                        .get_or_create(&vec![("lane", lane.label().to_string())])
                        .inc();
                }
            }
            match result {
                Ok(rv) => acks.extend(rv.map(|rv| (i, rv))),
                Err(error) if matches!(step, Step::Event(_)) => event_not_recorded(&error),
                Err(error) => {
                    return Err(PlanError {
                        purpose: plan.purpose.label(),
                        step: i,
                        error,
                        acks,
                    });
                }
            }
        }
        Ok(acks)
    }

    /// One API call, after a token of the client-side limit. A status
    /// write returns the resourceVersion it made.
    pub async fn step(&self, step: &Step) -> Result<Option<String>, WriteError> {
        self.throttle().await;
        self.call(step).await
    }

    /// One API call, with no token taken here: refused when not leading,
    /// and ended inside the lease fence.
    async fn call(&self, step: &Step) -> Result<Option<String>, WriteError> {
        let kind = step.kind();
        let limit = self.call_limit(kind)?;
        match tokio::time::timeout(limit, self.send(step)).await {
            Ok(Ok(Answer::Done(rv))) => Ok(rv),
            Ok(Ok(Answer::PodsRemain)) => Err(WriteError::PodsRemain {
                job: match step {
                    Step::ConfirmPodsGone { job, .. } => job.to_string(),
                    _ => String::new(),
                },
            }),
            Ok(Err(source)) => Err(WriteError::Api { kind, source }),
            Err(_) => Err(WriteError::Timeout { kind }),
        }
    }

    /// How long a call may take: a call must end inside the fence too (the
    /// client gives up at its edge; the server may still apply a call it
    /// has started, and the margin before expiry is for that). None at all
    /// when this process is not the leader.
    fn call_limit(&self, kind: &'static str) -> Result<Duration, WriteError> {
        if let Some(l) = &self.leader
            && !*l.borrow()
        {
            return Err(WriteError::NotLeader { kind });
        }
        match &self.fence {
            None => Ok(CALL_TIMEOUT),
            Some(f) => match f.remaining(Timestamp::now().as_millisecond()) {
                Some(left) => Ok(left.min(CALL_TIMEOUT)),
                None => Err(WriteError::NotLeader { kind }),
            },
        }
    }

    /// The API call a step is.
    async fn send(&self, step: &Step) -> Result<Answer, kube::Error> {
        let done = Answer::Done(None);
        match step {
            Step::ApplyWorkload(wl) => {
                let ns = wl.metadata.namespace.as_deref().unwrap_or_default();
                let name = wl.metadata.name.as_deref().unwrap_or_default();
                let pp = PatchParams::apply(FIELD_MANAGER).force();
                self.workloads(ns)
                    .patch(name, &pp, &Patch::Apply(wl))
                    .await
                    .map(|_| done)
            }
            Step::ApplyWorkloadStatus { key, status, uid, .. } => self.apply_workload_status(key, uid, status).await,
            Step::PatchWorkloadState { key, uid, state } => {
                // The uid is a precondition: the server refuses to change
                // it (422) on a Workload created again under this name.
                let patch = json!({"metadata": {"uid": uid}, "status": {"state": state}});
                self.workloads(&key.namespace)
                    .patch_status(&key.name, &merge_params(), &Patch::Merge(patch))
                    .await
                    .map(|_| done)
            }
            Step::PatchWorkload { key, patch } => self
                .workloads(&key.namespace)
                .patch(&key.name, &merge_params(), &Patch::Merge(patch))
                .await
                .map(|_| done),
            Step::DeleteWorkload { key, uid } => self.delete_workload(key, uid).await.map(|_| done),
            Step::PatchJob { job, patch } => self.patch_job(job, patch).await.map(|_| done),
            Step::PatchJobStatus { key, patch } => {
                let api: Api<Job> = Api::namespaced(self.client.clone(), &key.namespace);
                api.patch_status(&key.name, &merge_params(), &Patch::Merge(patch))
                    .await
                    .map(|_| done)
            }
            Step::Event(spec) => self.create_event(spec).await.map(|_| done),
            Step::ApplyQueueStatus { queue, status } => self.apply_queue_status(queue, status).await.map(|_| done),
            Step::ApplyGpuQuota { key, hard } => self.apply_gpu_quota(key, hard).await.map(|_| done),
            Step::DeleteGpuQuota { key } => self.delete_gpu_quota(key).await.map(|_| done),
            Step::DeletePod { key } => self.delete_pod(key).await.map(|_| done),
            Step::PatchPod { key, patch } => self.patch_pod(key, patch).await.map(|_| done),
            Step::ConfirmPodsGone { job, selector } => self
                .pods_remain(job, selector)
                .await
                .map(|remain| if remain { Answer::PodsRemain } else { done }),
            Step::AnnotatePods {
                job,
                selector,
                key,
                value,
            } => self.annotate_pods(job, selector, key, value).await.map(|_| done),
        }
    }

    /// A namespace's GPU quota backstop, by server-side apply.
    async fn apply_gpu_quota(
        &self,
        key: &ObjKey,
        hard: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::ResourceQuota;
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &key.namespace);
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": key.name, "namespace": key.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "sluice"}},
            "spec": {"hard": hard},
        });
        api.patch(
            &key.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
    }

    /// Deletes a namespace's GPU quota backstop (gone already is done).
    async fn delete_gpu_quota(&self, key: &ObjKey) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::ResourceQuota;
        let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &key.namespace);
        match api.delete(&key.name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Patches a pod (a gated pod started on its flavors).
    async fn patch_pod(&self, key: &ObjKey, patch: &ObjPatch) -> Result<(), kube::Error> {
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        match patch {
            ObjPatch::Merge(p) => api.patch(&key.name, &merge_params(), &Patch::Merge(p)).await,
            ObjPatch::Json(p) => match serde_json::from_value::<json_patch::Patch>(p.clone()) {
                Ok(ops) => api.patch(&key.name, &merge_params(), &Patch::Json::<()>(ops)).await,
                Err(e) => Err(kube::Error::SerdeError(e)),
            },
        }
        .map(|_| ())
    }

    /// Deletes a pod that runs outside the queue (gone already is done).
    async fn delete_pod(&self, key: &ObjKey) -> Result<(), kube::Error> {
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        match api.delete(&key.name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A Workload's whole status, with its uid as a precondition: a
    /// Workload deleted and created again under this name is not written
    /// (409). Answers the resourceVersion it made.
    async fn apply_workload_status(
        &self,
        key: &ObjKey,
        uid: &str,
        status: &WorkloadStatus,
    ) -> Result<Answer, kube::Error> {
        let body = json!({
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": key.name, "namespace": key.namespace, "uid": uid},
            "status": status,
        });
        self.workloads(&key.namespace)
            .patch_status(
                &key.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(body),
            )
            .await
            .map(|o| Answer::Done(o.metadata.resource_version))
    }

    /// Deletes a Workload, with its uid as a precondition; already gone
    /// counts as done.
    async fn delete_workload(&self, key: &ObjKey, uid: &str) -> Result<(), kube::Error> {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.workloads(&key.namespace).delete(&key.name, &dp).await {
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// A merge or JSON patch of a queued object, of whatever kind.
    async fn patch_job(&self, job: &JobRef, patch: &ObjPatch) -> Result<(), kube::Error> {
        let ar = job.kind.api_resource();
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), job.namespace(), &ar);
        match patch {
            ObjPatch::Merge(p) => api.patch(job.name(), &merge_params(), &Patch::Merge(p)).await,
            ObjPatch::Json(p) => match serde_json::from_value::<json_patch::Patch>(p.clone()) {
                Ok(ops) => api.patch(job.name(), &merge_params(), &Patch::Json::<()>(ops)).await,
                Err(e) => Err(kube::Error::SerdeError(e)),
            },
        }
        .map(|_| ())
    }

    /// An Event; those about cluster-scoped objects live in `default`.
    async fn create_event(&self, spec: &EventSpec) -> Result<(), kube::Error> {
        let ns = spec.regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        api.create(&pp, &event(spec, &self.instance, Timestamp::now()))
            .await
            .map(|_| ())
    }

    /// Server-side apply of a ClusterQueue's, LocalQueue's or Cohort's status.
    async fn apply_queue_status(&self, queue: &QueueRef, status: &serde_json::Value) -> Result<(), kube::Error> {
        let ar = match queue {
            QueueRef::ClusterQueue(_) => ApiResource::erase::<ClusterQueue>(&()),
            QueueRef::LocalQueue(_) => ApiResource::erase::<LocalQueue>(&()),
            QueueRef::Cohort(_) => ApiResource::erase::<Cohort>(&()),
        };
        let api: Api<DynamicObject> = match queue.namespace() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let mut meta = json!({"name": queue.name()});
        if let Some(ns) = queue.namespace() {
            meta["namespace"] = json!(ns);
        }
        let body = json!({"apiVersion": ar.api_version, "kind": ar.kind, "metadata": meta, "status": status});
        api.patch_status(
            queue.name(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map(|_| ())
    }

    /// Whether a pod of the object is still running or terminating
    /// (`controller-uid` is set on a Job's pods by every server version;
    /// 1.27+ also sets the prefixed label).
    async fn pods_remain(&self, job: &JobRef, selector: &str) -> Result<bool, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), job.namespace());
        let lp = ListParams::default()
            .labels(selector)
            .fields("status.phase!=Succeeded,status.phase!=Failed")
            .limit(1);
        api.list_metadata(&lp).await.map(|l| !l.items.is_empty())
    }

    /// Annotates each pod of the object that is not finished (merge patch
    /// of its metadata); none is no error.
    async fn annotate_pods(&self, job: &JobRef, selector: &str, key: &str, value: &str) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), job.namespace());
        let lp = ListParams::default()
            .labels(selector)
            .fields("status.phase!=Succeeded,status.phase!=Failed");
        let patch = json!({"metadata": {"annotations": {key: value}}});
        for pod in api.list_metadata(&lp).await?.items {
            let Some(name) = pod.metadata.name else { continue };
            match api.patch(&name, &merge_params(), &Patch::Merge(&patch)).await {
                // Gone meanwhile: nothing to tell.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }
}

/// What a step's call answered.
enum Answer {
    /// Done; a status write says the resourceVersion it made.
    Done(Option<String>),
    /// [`Step::ConfirmPodsGone`] found pods still there.
    PodsRemain,
}

fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// Events waiting in their lane at most; more are dropped.
pub const EVENT_LANE_CAPACITY: usize = 1000;

/// An Event that could not be written: part of an outage, or logged.
fn event_not_recorded(error: &WriteError) {
    if error.unavailable() {
        crate::outage::failed("event", error);
    } else {
        tracing::warn!(%error, "event not recorded");
    }
}

/// Writes Events handed over by the main writer, with a rate limit of their
/// own (the `--kube-qps`/`--kube-burst` values, a separate bucket), so that
/// they never delay admissions: the hot path of an admission is its status
/// write and its Job patch. Kueue's event recorder likewise has its own
/// client and drops what it cannot send.
pub async fn event_lane(
    writer: Writer,
    mut events: tokio::sync::mpsc::Receiver<EventSpec>,
    metrics: Arc<impl AsRef<Metrics> + Send + Sync + 'static>,
) {
    while let Some(spec) = events.recv().await {
        let m = (*metrics).as_ref();
        match writer.step(&Step::Event(spec)).await {
            Ok(_) => {
                crate::outage::succeeded();
                m.write("event", true);
            }
            Err(WriteError::NotLeader { .. }) => m.dropped("event", "not_leader"),
            Err(e) => {
                event_not_recorded(&e);
                m.write("event", false);
            }
        }
    }
}

/// The Event object for `spec` at `now`.
pub fn event(spec: &EventSpec, instance: &str, now: Timestamp) -> Event {
    let about = spec.regarding.name.as_deref().unwrap_or("object");
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{about}.{:x}", now.as_nanosecond())),
            namespace: Some(spec.regarding.namespace.clone().unwrap_or_else(|| "default".into())),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(spec.action.to_string()),
        reason: Some(spec.reason.clone()),
        note: Some(truncate(&spec.note, 1024)),
        regarding: Some(spec.regarding.clone()),
        reporting_controller: Some(REPORTING_CONTROLLER.into()),
        reporting_instance: Some(instance.to_string()),
        type_: Some(spec.type_.to_string()),
        ..Default::default()
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// What the writer tells the index about a plan it is done with: the
/// resourceVersions its status writes made, or why it stopped.
pub type Feedback = Result<Vec<(usize, String)>, PlanError>;

#[cfg(test)]
mod tests;
