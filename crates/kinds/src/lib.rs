//! The kinds of workload Sluice queues, one file each, each implementing
//! [`Queueable`] (Kueue's `GenericJob` is the model). Both the controller
//! and the webhook read a kind only through it:
//!
//! - for the controller: what a kind's object becomes in the index (a
//!   [`JobView`]: pod sets, suspended, finished, ready), its Workload (pod
//!   sets with their counts and templates, the priority class), the
//!   patches that suspend it, start it on its flavors and put back what
//!   its user wrote, its pods' label, and the API calls it makes on it
//!   ([`Queueable::controller_access`], which the chart's role is checked
//!   against);
//! - for the webhook: where its suspend flag and pod templates are, how
//!   many pods each part runs at once (an admitted object may not grow),
//!   whether it has finished, and what it refuses on CREATE.
//!
//! | kind | file | Workload | pod sets |
//! |------|------|----------|----------|
//! | `batch/v1` Job | [`job`] | `job-<name>` | `main` |
//! | multi-Job gang of Jobs | [`gang`] | `gang-<gang>` | one per Job |
//! | `jobset.x-k8s.io/v1alpha2` JobSet | [`jobset`] | `jobset-<name>` | one per replicated Job |
//! | `kubeflow.org/v1` PyTorchJob | [`kubeflow`] | `pytorchjob-<name>` | one per role (master, worker) |
//! | `kubeflow.org/v2beta1` MPIJob | [`kubeflow`] | `mpijob-<name>` | one per role (launcher, worker) |
//! | `ray.io/v1` RayJob | [`ray`] | `rayjob-<name>` | head, and one per worker group |
//! | `kubeflow.org/v1` TFJob | `tfjob` | `tfjob-<name>` | one per role (chief, ps, worker, …) |
//! | `kubeflow.org/v1` XGBoostJob | `xgboostjob` | `xgboostjob-<name>` | one per role (master, worker) |
//! | `kubeflow.org/v1` PaddleJob | `paddlejob` | `paddlejob-<name>` | one per role (master, worker) |
//! | `kubeflow.org/v1` JAXJob | `jaxjob` | `jaxjob-<name>` | one per role (worker) |
//!
//! A new kind is a file here implementing [`Queueable`] (its view and
//! Workload built with `object`; its pod templates patched by merge
//! patches where they are map keys, as in [`kubeflow`], or by guarded JSON
//! patches where they sit at list positions, `placed`, as in [`jobset`]
//! and [`ray`]), plus its [`JobKind`] variant and its line in
//! [`JobKind::integration`]. The controller's watches, cache, index and
//! discovery, and the webhook's endpoints and configurations, take every
//! kind of [`JobKind::ALL`]; the chart's templates list the kinds too, and
//! a test checks them against this registry.

use std::collections::BTreeMap;

use kube::api::ApiResource;
use serde_json::Value;
use sluice_api::v1alpha1::ResourceFlavor;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::v1alpha1::{PodSet, Workload, WorkloadSpec};

use crate::job::{JobError, JobView};
pub use crate::shape::{Count, SuspendField, TemplateAt};

pub mod gang;
mod jaxjob;
pub mod job;
pub mod jobset;
pub mod kubeflow;
mod object;
mod paddlejob;
mod placed;
pub mod ray;
pub mod shape;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod tfjob;
mod xgboostjob;

/// A kind of workload object Sluice queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum JobKind {
    /// `batch/v1` Job.
    #[default]
    Job,
    /// `jobset.x-k8s.io/v1alpha2` JobSet.
    JobSet,
    /// `kubeflow.org/v1` PyTorchJob.
    PyTorchJob,
    /// `kubeflow.org/v2beta1` MPIJob.
    MpiJob,
    /// `ray.io/v1` RayJob.
    RayJob,
    /// `kubeflow.org/v1` TFJob.
    TfJob,
    /// `kubeflow.org/v1` XGBoostJob.
    XgBoostJob,
    /// `kubeflow.org/v1` PaddleJob.
    PaddleJob,
    /// `kubeflow.org/v1` JAXJob.
    JaxJob,
}

impl JobKind {
    pub const ALL: [JobKind; 9] = [
        JobKind::Job,
        JobKind::JobSet,
        JobKind::PyTorchJob,
        JobKind::MpiJob,
        JobKind::RayJob,
        JobKind::TfJob,
        JobKind::XgBoostJob,
        JobKind::PaddleJob,
        JobKind::JaxJob,
    ];

    /// What queues objects of this kind.
    pub fn integration(self) -> &'static dyn Queueable {
        match self {
            JobKind::Job => &job::BatchJob,
            JobKind::JobSet => &jobset::JobSetKind,
            JobKind::PyTorchJob => &kubeflow::PYTORCH_JOB,
            JobKind::MpiJob => &kubeflow::MPI_JOB,
            JobKind::RayJob => &ray::RayJobKind,
            JobKind::TfJob => &tfjob::TF_JOB,
            JobKind::XgBoostJob => &xgboostjob::XGBOOST_JOB,
            JobKind::PaddleJob => &paddlejob::PADDLE_JOB,
            JobKind::JaxJob => &jaxjob::JAX_JOB,
        }
    }

    pub fn api_version(self) -> &'static str {
        self.integration().resource().api_version
    }

    pub fn kind(self) -> &'static str {
        self.integration().resource().kind
    }

    /// (group, version, kind).
    pub fn gvk(self) -> (&'static str, &'static str, &'static str) {
        let r = self.integration().resource();
        (r.group, r.version, r.kind)
    }

    /// Its resource's plural name (`jobs`).
    pub fn plural(self) -> &'static str {
        self.integration().resource().plural
    }

    /// The name `--integrations` knows it by.
    pub fn flag_name(self) -> &'static str {
        self.integration().flag_name()
    }

    /// The kinds other than batch/v1 Job: those made by an operator.
    pub fn others() -> impl Iterator<Item = JobKind> {
        JobKind::ALL.into_iter().filter(|k| *k != JobKind::Job)
    }

    /// What the controller calls on objects of this kind.
    pub fn controller_access(self) -> Vec<Access> {
        self.integration().controller_access()
    }

    /// What the webhook lists and watches of this kind: the objects of a
    /// kind made by an operator, to verify a Job's owner of that kind.
    pub fn webhook_access(self) -> Vec<Access> {
        let r = self.integration().resource();
        match self {
            JobKind::Job => Vec::new(),
            _ => vec![Access {
                verbs: &["list", "watch"],
                group: r.group,
                resource: r.plural.to_owned(),
            }],
        }
    }

    /// The reason recorded for an object of this kind that cannot be read.
    pub fn invalid_reason(self) -> &'static str {
        self.integration().invalid_reason()
    }

    pub fn from_flag(name: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.flag_name() == name)
    }

    /// Its API resource (for dynamic calls).
    pub fn api_resource(self) -> ApiResource {
        let r = self.integration().resource();
        ApiResource {
            group: r.group.into(),
            version: r.version.into(),
            api_version: r.api_version.into(),
            kind: r.kind.into(),
            plural: r.plural.into(),
        }
    }

    /// The name of the Workload of its object `name`.
    pub fn workload_name(self, name: &str) -> String {
        format!("{}{name}", self.integration().workload_prefix())
    }

    /// The label selector of the pods of its object `name` with uid `uid`.
    pub fn pods_selector(self, name: &str, uid: &str) -> String {
        self.integration().pods_selector(name, uid)
    }
}

/// Verbs on one resource of a kind's API group: what the chart's roles
/// must grant (and nothing more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub verbs: &'static [&'static str],
    pub group: &'static str,
    /// `jobs`, `jobs/status`, `jobs/finalizers`.
    pub resource: String,
}

/// A kind's API resource, as constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// A kind of object Sluice queues: how it reads, what its Workload is, and
/// how it is suspended, started and put back.
pub trait Queueable: Sync {
    /// Its API resource.
    fn resource(&self) -> Resource;
    /// The name `--integrations` knows it by.
    fn flag_name(&self) -> &'static str;
    /// The prefix of its Workloads' names.
    fn workload_prefix(&self) -> &'static str;
    /// The label selector of the pods of its object `name` with uid `uid`.
    fn pods_selector(&self, name: &str, uid: &str) -> String;
    /// What the index keeps of an object (its JSON): pod set templates,
    /// suspended, finished, ready.
    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError>;
    /// The Workload of a queued object (without status).
    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError>;
    /// The patch that suspends an object.
    fn suspend_patch(&self) -> ObjPatch;
    /// The patches that start a suspended object on the flavors of each
    /// of its pod sets with the pods admitted of each (`admitted`: fewer
    /// than the pod set's count after a partial admission; a pod set it
    /// does not name runs whole) (`true`: through `/status`).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError>;
    /// The patches that put back what the user wrote into an evicted,
    /// suspended object (none when nothing was injected).
    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError>;
    /// The reason recorded for an object of this kind that cannot be read.
    fn invalid_reason(&self) -> &'static str;
    /// Where its suspend flag is.
    fn suspend_field(&self) -> SuspendField {
        SuspendField::SPEC
    }
    /// Its pod templates (JSON of the object).
    fn templates(&self, obj: &Value) -> Vec<TemplateAt>;
    /// How many pods each of its parts runs at once, by field: what an
    /// admission covers.
    fn counts(&self, obj: &Value) -> Vec<Count>;
    /// How it ended, if it did: `Some(true)` succeeded, `Some(false)`
    /// failed.
    fn finished(&self, obj: &Value) -> Option<bool>;
    /// The API calls the controller makes on objects of this kind: watch,
    /// read back and patch them (suspend, start, restore), and
    /// `update` on `<plural>/finalizers` for `blockOwnerDeletion` on their
    /// Workloads' owner references.
    fn controller_access(&self) -> Vec<Access> {
        let r = self.resource();
        vec![
            Access {
                verbs: &["get", "list", "watch", "patch"],
                group: r.group,
                resource: r.plural.to_owned(),
            },
            Access {
                verbs: &["update"],
                group: r.group,
                resource: format!("{}/finalizers", r.plural),
            },
        ]
    }
    /// Why an object of this kind, as written, cannot be queued at all
    /// (each with its field): the webhook refuses it on CREATE.
    fn refusals(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }
}

/// A patch of a kind's object.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjPatch {
    /// JSON merge patch (RFC 7386).
    Merge(Value),
    /// JSON patch (RFC 6902): a list of operations, `test`s first where the
    /// list positions it writes must still hold what it was computed from.
    Json(Value),
}

/// The patch that suspends an object of `kind`.
pub fn suspend_patch(kind: JobKind) -> ObjPatch {
    kind.integration().suspend_patch()
}

/// The patches that start a suspended object on the flavors assigned to
/// each of its pod sets (`flavors`: pod set name → flavors) with the pods
/// admitted of each (`admitted`: pod set name → pods).
pub fn start_patches(
    view: &JobView,
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
    admitted: &BTreeMap<String, u32>,
) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    view.kind.integration().start_patches(view, flavors, admitted)
}

/// The patches that put back what the user wrote into an evicted,
/// suspended object (none when nothing was injected).
pub fn restore_patches(view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    view.kind.integration().restore_patches(view)
}

/// A queued object as observed in full: what its Workload is made from.
#[derive(Clone, Copy, Debug)]
pub enum Full<'a> {
    Job(&'a k8s_openapi::api::batch::v1::Job),
    /// An object of another kind, as JSON.
    Dynamic(JobKind, &'a Value),
}

impl Full<'_> {
    /// The Workload of the object (without status).
    pub fn workload(
        self,
        kueue_compat: bool,
        workload_class: impl Fn(&str) -> Option<i32>,
        pod_class: impl Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        match self {
            Full::Job(j) => crate::job::workload_for_job(j, kueue_compat, workload_class, pod_class),
            Full::Dynamic(kind, v) => kind
                .integration()
                .workload(v, kueue_compat, &workload_class, &pod_class),
        }
    }
}

/// The view of an object of `kind`, from its JSON.
pub fn view(kind: JobKind, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    kind.integration().view(obj, kueue_compat)
}

/// The label selector of an object's pods: its own (a RayJob's cluster),
/// else its kind's.
pub fn pods_selector_of(view: &JobView) -> String {
    view.pods_selector
        .clone()
        .unwrap_or_else(|| view.kind.pods_selector(&view.name, &view.uid))
}

/// The start patches of a kind whose templates sit at list positions
/// (`placed`), resumed by `spec.suspend: false`.
fn placed_start(
    view: &JobView,
    at: &[placed::Placed<'_>],
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    let resume = vec![serde_json::json!({"op": "add", "path": "/spec/suspend", "value": false})];
    Ok(placed::injection_patches(view, at, flavors, resume)?
        .into_iter()
        .map(|p| (false, p))
        .collect())
}

/// The restore patches of a kind whose templates sit at list positions.
fn placed_restore(view: &JobView, at: &[placed::Placed<'_>]) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    Ok(placed::restoration_patches(view, at)?
        .into_iter()
        .flatten()
        .map(|p| (false, p))
        .collect())
}

/// A new, active Workload (without status) in `queue` with `pod_sets`,
/// at `priority` (and the WorkloadPriorityClass it came from).
pub fn queued_workload(
    metadata: ObjectMeta,
    queue: &str,
    pod_sets: Vec<PodSet>,
    (priority, class): (i32, Option<String>),
) -> Workload {
    Workload {
        metadata,
        spec: WorkloadSpec {
            pod_sets,
            queue_name: queue.to_string(),
            priority: Some(priority),
            priority_class_name: class,
            active: true,
        },
        status: None,
    }
}

/// The pod sets' topology request from the object's
/// [`sluice_api::labels::TOPOLOGY`] annotation.
pub(crate) fn topology_of(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<sluice_api::v1alpha1::TopologyRequest>, crate::job::JobError> {
    match sluice_api::labels::topology_required(annotations) {
        Ok(true) => Ok(Some(sluice_api::v1alpha1::TopologyRequest::Required)),
        Ok(false) => Ok(None),
        Err(problem) => Err(crate::job::JobError::Invalid {
            field: format!("metadata.annotations[{}]", sluice_api::labels::TOPOLOGY),
            problem,
        }),
    }
}

/// The `minCount` of a batch/v1 Job's pod set of `count` pods, from the
/// Job's [`sluice_api::labels::MIN_PARALLELISM`] annotation (an integer
/// from 1 to `parallelism`), at most `count` (fewer completions than
/// `parallelism` make fewer pods).
pub(crate) fn min_count_of(
    annotations: Option<&BTreeMap<String, String>>,
    parallelism: i32,
    count: i32,
) -> Result<Option<i32>, crate::job::JobError> {
    match sluice_api::labels::min_parallelism(annotations, parallelism) {
        Ok(min) => Ok(min.map(|m| m.min(count))),
        Err(problem) => Err(crate::job::JobError::Invalid {
            field: format!("metadata.annotations[{}]", sluice_api::labels::MIN_PARALLELISM),
            problem,
        }),
    }
}

/// Refuses the [`sluice_api::labels::MIN_PARALLELISM`] annotation on an
/// object of a kind other than batch/v1 Job, which does not take it.
pub(crate) fn refuse_min_parallelism(
    kind: JobKind,
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<(), crate::job::JobError> {
    match annotations.and_then(|a| a.get(sluice_api::labels::MIN_PARALLELISM)) {
        None => Ok(()),
        Some(_) => Err(crate::job::JobError::Invalid {
            field: format!("metadata.annotations[{}]", sluice_api::labels::MIN_PARALLELISM),
            problem: format!(
                "only a batch/v1 Job takes this annotation, not a {}; remove it",
                kind.kind()
            ),
        }),
    }
}
