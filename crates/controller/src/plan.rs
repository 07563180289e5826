//! What the controller wants done through the API: [`Plan`]s of
//! [`Step`]s, produced by the [`crate::index::Index`] (which never calls
//! the API) and applied in order by the [`crate::writer`].

use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::Value;
use sluice_api::v1alpha1::{Workload, WorkloadState, WorkloadStatus};

use sluice_kinds::{JobKind, ObjPatch};

/// A namespaced object's key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// An object of a kind Sluice queues (a Job, a JobSet).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobRef {
    pub kind: JobKind,
    pub key: ObjKey,
}

impl JobRef {
    pub fn new(kind: JobKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            key: ObjKey::new(namespace, name),
        }
    }

    /// A batch/v1 Job.
    pub fn job(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self::new(JobKind::Job, namespace, name)
    }

    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }

    pub fn name(&self) -> &str {
        &self.key.name
    }
}

/// `namespace/name` (the kind is said where it matters).
impl std::fmt::Display for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.key.fmt(f)
    }
}

/// One API call.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Server-side apply of a Workload's metadata and spec (creates it).
    ApplyWorkload(Box<Workload>),
    /// Server-side apply of a Workload's whole status (the fields Sluice
    /// owns: omitted ones are removed) through `/status`.
    /// `seq` numbers the index's status writes of that workload; the writer
    /// acknowledges it (with the resourceVersion written) so that older
    /// watch events do not undo the write.
    ApplyWorkloadStatus {
        key: ObjKey,
        /// The Workload's uid (a precondition of the apply).
        uid: String,
        status: Box<WorkloadStatus>,
        seq: u64,
    },
    /// JSON merge patch of a Workload's `status.state` alone (the printer
    /// column), through `/status`, with its uid as a precondition: what a
    /// workload its owner finished needs. Small on purpose: thousands may
    /// wait in the bookkeeping lane.
    PatchWorkloadState {
        key: ObjKey,
        uid: String,
        state: WorkloadState,
    },
    /// A patch of a queued object (a Job's template or `suspend`, a
    /// JobSet's).
    PatchJob { job: JobRef, patch: ObjPatch },
    /// JSON merge patch of a Workload (its spec: `active`).
    PatchWorkload { key: ObjKey, patch: Value },
    /// JSON merge patch of a Job's `/status`.
    PatchJobStatus { key: ObjKey, patch: Value },
    /// An events.k8s.io/v1 Event.
    Event(EventSpec),
    /// Server-side apply of a ClusterQueue's, LocalQueue's or Cohort's
    /// status.
    ApplyQueueStatus { queue: QueueRef, status: Value },
    /// Deletion of a Workload, with its uid as a precondition (one created
    /// again under this name is not deleted); already gone counts as done.
    DeleteWorkload { key: ObjKey, uid: String },
    /// Server-side apply of the GPU quota backstop of a namespace (a
    /// ResourceQuota, `index::backstop`): `hard` as `requests.<gpu>` →
    /// quantity.
    ApplyGpuQuota {
        key: ObjKey,
        hard: std::collections::BTreeMap<String, String>,
    },
    /// Deletion of a namespace's GPU quota backstop; already gone counts as
    /// done.
    DeleteGpuQuota { key: ObjKey },
    /// A patch of a pod: a gated pod started on its flavors
    /// (`index::podgroups`).
    PatchPod { key: ObjKey, patch: ObjPatch },
    /// Deletion of a GPU pod that runs outside the queue (`index::escaped`,
    /// only with `--unqueued-gpu-pod-grace`); already gone counts as done.
    DeletePod { key: ObjKey },
    /// A read, not a write: succeeds only if no pod of the object (label
    /// `selector`, [`sluice_kinds::pods_selector_of`]) is still
    /// running or terminating.
    ConfirmPodsGone { job: JobRef, selector: String },
    /// JSON merge patch of the annotation `key` to `value` on each pod of
    /// the object (label `selector`) that is not finished; no pod is no
    /// error.
    AnnotatePods {
        job: JobRef,
        selector: String,
        key: &'static str,
        value: String,
    },
}

impl Step {
    /// The status write of a Workload: `status` applied whole, numbered
    /// `seq` (see [`Step::ApplyWorkloadStatus`]).
    pub fn workload_status(key: ObjKey, uid: String, status: WorkloadStatus, seq: u64) -> Step {
        Step::ApplyWorkloadStatus {
            key,
            uid,
            status: Box::new(status),
            seq,
        }
    }

    /// Label for `sluice_api_writes_total{kind}`.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::ApplyWorkload(_) => "workload",
            Step::ApplyWorkloadStatus { .. } | Step::PatchWorkloadState { .. } => "workload_status",
            Step::PatchJob { .. } => "job",
            Step::PatchWorkload { .. } | Step::DeleteWorkload { .. } => "workload",
            Step::PatchJobStatus { .. } => "job_status",
            Step::Event(_) => "event",
            Step::ConfirmPodsGone { .. } => "pod_list",
            Step::AnnotatePods { .. } => "pod",
            Step::ApplyQueueStatus { .. } => "queue_status",
            Step::ApplyGpuQuota { .. } | Step::DeleteGpuQuota { .. } => "resource_quota",
            Step::DeletePod { .. } | Step::PatchPod { .. } => "pod",
        }
    }

    /// Whether the writer reports this plan back to the index when it is
    /// done (status writes are acknowledged; pod checks answer).
    pub fn wants_feedback(&self) -> bool {
        matches!(
            self,
            Step::ApplyWorkloadStatus { .. }
                | Step::PatchWorkloadState { .. }
                | Step::ConfirmPodsGone { .. }
                | Step::ApplyQueueStatus { .. }
        )
    }

    /// Whether the step takes a token of the client-side limit when the
    /// writer makes it (Events in a lane of their own are never made by it).
    pub fn is_budgeted(&self) -> bool {
        !matches!(self, Step::Event(_))
    }

    /// Whether the step writes (counted in `sluice_api_writes_total`).
    pub fn is_write(&self) -> bool {
        !matches!(self, Step::ConfirmPodsGone { .. })
    }
}

/// An object whose status the queue-status writer keeps: a ClusterQueue,
/// a LocalQueue or a Cohort.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueRef {
    ClusterQueue(String),
    LocalQueue(ObjKey),
    Cohort(String),
}

impl QueueRef {
    pub fn name(&self) -> &str {
        match self {
            QueueRef::ClusterQueue(n) | QueueRef::Cohort(n) => n,
            QueueRef::LocalQueue(k) => &k.name,
        }
    }

    /// A LocalQueue's namespace (the other kinds are cluster-scoped).
    pub fn namespace(&self) -> Option<&str> {
        match self {
            QueueRef::LocalQueue(k) => Some(&k.namespace),
            QueueRef::ClusterQueue(_) | QueueRef::Cohort(_) => None,
        }
    }
}

impl std::fmt::Display for QueueRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueRef::ClusterQueue(n) => write!(f, "ClusterQueue {n}"),
            QueueRef::LocalQueue(k) => write!(f, "LocalQueue {k}"),
            QueueRef::Cohort(n) => write!(f, "Cohort {n}"),
        }
    }
}

/// An Event to create.
#[derive(Clone, Debug, PartialEq)]
pub struct EventSpec {
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: String,
    pub action: &'static str,
    pub note: String,
}

/// Why a plan exists; decides how failures are handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Create the Workload of a Job.
    CreateWorkload,
    /// Admission of the workload with this uid (assumed in the engine):
    /// if the first step (the status write) fails, the admission is rolled
    /// back.
    Admit { uid: String },
    /// Preemption or eviction of a workload.
    Evict { uid: String },
    /// A workload preempted with a notice: told so (condition, Event, its
    /// pods annotated with the deadline); evicted later.
    Notice { uid: String },
    /// Eviction done: quota released, workload requeued, Job restored.
    Requeue { uid: String },
    /// An evicted Job reports no active pods but not its terminating ones
    /// (servers without `status.terminating`): look at its pods.
    ConfirmPodsGone { uid: String },
    /// The workload finished after its owner said so: its `status.state`
    /// follows the owner's `Finished` condition (bookkeeping).
    Finish { uid: String },
    /// The workload finished while it held quota (its Jobs finished, or it
    /// was orphaned): its `Finished` write is a state change, written in
    /// order before any admission that reuses the quota, so that the
    /// Workloads as the API shows them never hold more than the quota.
    Release { uid: String },
    /// A gang lost a member: its Workload (holding no quota) is deleted,
    /// and a new one is made when the gang is whole again.
    RetireGang { uid: String },
    /// An object's shape changed: its admission reduced (a scaled-down
    /// Job), or its waiting Workload deleted to be made again.
    Reshape { uid: String },
    /// The workload is deactivated (`spec.active: false`).
    Deactivate { uid: String },
    /// All pods of an admitted workload were seen ready (`PodsReady=True`).
    PodsReady { uid: String },
    /// A pending explanation changed.
    Pending { uid: String },
    /// A queued Job that ran without admission is suspended.
    SuspendJob,
    /// An admitted workload's suspended Job is started (restart recovery).
    StartJob { uid: String },
    /// A report about a malformed object.
    Report,
    /// An admitted workload's `GPUIdle` condition changed (idle-GPU
    /// reclaim's warning), with its event.
    IdleGpu { uid: String },
    /// A queue's (or a Cohort's) status changed (latest wins while it waits).
    QueueStatus,
    /// A namespace's GPU quota backstop changed (`index::backstop`):
    /// written in order with admissions, before those that need it.
    GpuQuota,
}

impl Purpose {
    /// Label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Purpose::CreateWorkload => "create_workload",
            Purpose::Admit { .. } => "admit",
            Purpose::Evict { .. } => "evict",
            Purpose::Notice { .. } => "notice",
            Purpose::Requeue { .. } => "requeue",
            Purpose::ConfirmPodsGone { .. } => "confirm_pods_gone",
            Purpose::Finish { .. } => "finish",
            Purpose::Release { .. } => "release",
            Purpose::RetireGang { .. } => "retire_gang",
            Purpose::Reshape { .. } => "reshape",
            Purpose::Deactivate { .. } => "deactivate",
            Purpose::PodsReady { .. } => "pods_ready",
            Purpose::Pending { .. } => "pending",
            Purpose::SuspendJob => "suspend_job",
            Purpose::StartJob { .. } => "start_job",
            Purpose::Report => "report",
            Purpose::IdleGpu { .. } => "idle_gpu",
            Purpose::QueueStatus => "queue_status",
            Purpose::GpuQuota => "gpu_quota",
        }
    }
}

/// API calls applied in order; the first failure stops the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub purpose: Purpose,
    pub steps: Vec<Step>,
}
