//! The kinds of workload Sluice queues, one file each: what a kind's
//! object becomes in the index (a [`JobView`]), its Workload, and the
//! patches that suspend it, start it on its flavors and put back what its
//! user wrote. The index calls them through [`JobKind`] and never reads a
//! kind's object itself.
//!
//! | kind | file | Workload | pod sets |
//! |------|------|----------|----------|
//! | `batch/v1` Job | [`crate::job`] | `job-<name>` | `main` |
//! | multi-Job gang of Jobs | [`crate::gang`] | `gang-<gang>` | one per Job |
//! | `jobset.x-k8s.io/v1alpha2` JobSet | [`jobset`] | `jobset-<name>` | one per replicated Job |
//! | `kubeflow.org/v1` PyTorchJob | [`kubeflow`] | `pytorchjob-<name>` | one per role (master, worker) |
//! | `kubeflow.org/v2beta1` MPIJob | [`kubeflow`] | `mpijob-<name>` | one per role (launcher, worker) |
//! | `ray.io/v1` RayJob | [`ray`] | `rayjob-<name>` | head, and one per worker group |
//!
//! A new kind is a file here — its `view` and `workload` (built with
//! `object`), and where its pod templates are (map keys patched by merge
//! patches, as in [`kubeflow`], or list positions guarded by `placed`, as
//! in [`jobset`] and [`ray`]) — plus a [`JobKind`] variant and its arms in
//! the dispatch below; watches, the cache and discovery take every kind.

use std::collections::BTreeMap;

use kube::api::ApiResource;
use serde_json::Value;
use sluice_api::v1alpha1::ResourceFlavor;

use crate::job::{self, JobError, JobView};

pub mod jobset;
pub mod kubeflow;
mod object;
mod placed;
pub mod ray;

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
}

impl JobKind {
    pub const ALL: [JobKind; 5] = [
        JobKind::Job,
        JobKind::JobSet,
        JobKind::PyTorchJob,
        JobKind::MpiJob,
        JobKind::RayJob,
    ];

    pub fn api_version(self) -> &'static str {
        match self {
            JobKind::Job => "batch/v1",
            JobKind::JobSet => jobset::API_VERSION,
            JobKind::PyTorchJob => "kubeflow.org/v1",
            JobKind::MpiJob => "kubeflow.org/v2beta1",
            JobKind::RayJob => "ray.io/v1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            JobKind::Job => "Job",
            JobKind::JobSet => jobset::KIND,
            JobKind::PyTorchJob => "PyTorchJob",
            JobKind::MpiJob => "MPIJob",
            JobKind::RayJob => "RayJob",
        }
    }

    /// The name `--integrations` knows it by.
    pub fn flag_name(self) -> &'static str {
        match self {
            JobKind::Job => "batch/job",
            JobKind::JobSet => "jobset.x-k8s.io/jobset",
            JobKind::PyTorchJob => "kubeflow.org/pytorchjob",
            JobKind::MpiJob => "kubeflow.org/mpijob",
            JobKind::RayJob => "ray.io/rayjob",
        }
    }

    pub fn from_flag(name: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.flag_name() == name)
    }

    /// Its API resource (for dynamic calls).
    pub fn api_resource(self) -> ApiResource {
        match self {
            JobKind::Job => ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&()),
            JobKind::JobSet => ApiResource {
                group: jobset::GROUP.into(),
                version: jobset::VERSION.into(),
                api_version: jobset::API_VERSION.into(),
                kind: jobset::KIND.into(),
                plural: jobset::PLURAL.into(),
            },
            JobKind::RayJob => ApiResource {
                group: "ray.io".into(),
                version: "v1".into(),
                api_version: "ray.io/v1".into(),
                kind: "RayJob".into(),
                plural: "rayjobs".into(),
            },
            JobKind::PyTorchJob | JobKind::MpiJob => {
                let (version, plural) = match self {
                    JobKind::PyTorchJob => ("v1", "pytorchjobs"),
                    _ => ("v2beta1", "mpijobs"),
                };
                ApiResource {
                    group: kubeflow::GROUP.into(),
                    version: version.into(),
                    api_version: self.api_version().into(),
                    kind: self.kind().into(),
                    plural: plural.into(),
                }
            }
        }
    }

    /// The name of the Workload of its object `name`.
    pub fn workload_name(self, name: &str) -> String {
        match self {
            JobKind::Job => job::workload_name(name),
            JobKind::JobSet => jobset::workload_name(name),
            JobKind::PyTorchJob => format!("pytorchjob-{name}"),
            JobKind::MpiJob => format!("mpijob-{name}"),
            JobKind::RayJob => format!("rayjob-{name}"),
        }
    }

    /// The label selector of the pods of its object `name` with uid `uid`.
    pub fn pods_selector(self, name: &str, uid: &str) -> String {
        match self {
            JobKind::Job => format!("controller-uid={uid}"),
            JobKind::JobSet => format!("{}={uid}", jobset::UID_LABEL),
            JobKind::PyTorchJob => format!(
                "{}={name},{}=pytorchjob-controller",
                kubeflow::NAME_LABEL,
                kubeflow::OPERATOR_LABEL
            ),
            JobKind::MpiJob => format!(
                "{}={name},{}=mpi-operator",
                kubeflow::NAME_LABEL,
                kubeflow::OPERATOR_LABEL
            ),
            // Its pods are its RayCluster's (see `pods_selector_of`); the
            // cluster and the submitter carry the RayJob's name.
            JobKind::RayJob => format!("{}={name},ray.io/originated-from-crd=RayJob", ray::NAME_LABEL),
        }
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
    match kind {
        // `spec.suspend: true`, as a Job's.
        JobKind::Job | JobKind::JobSet | JobKind::RayJob => ObjPatch::Merge(job::suspend_patch()),
        JobKind::PyTorchJob | JobKind::MpiJob => ObjPatch::Merge(kubeflow::suspend_patch()),
    }
}

/// The patches that start a suspended object on the flavors assigned to
/// each of its pod sets (`flavors`: pod set name → flavors): for a Job,
/// `status.startTime` cleared first when it is set (`true`: through
/// `/status`), then the template; for a JobSet, the annotation, then one
/// JSON patch.
pub fn start_patches(
    view: &JobView,
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    match view.kind {
        JobKind::Job => {
            let all: Vec<&ResourceFlavor> = flavors.values().flatten().copied().collect();
            let mut out = Vec::new();
            if view.started {
                out.push((true, ObjPatch::Merge(job::clear_start_time_patch())));
            }
            out.push((false, ObjPatch::Merge(job::injection_patch(&view.patch_base(), &all)?)));
            Ok(out)
        }
        JobKind::JobSet | JobKind::RayJob => {
            let resume = vec![serde_json::json!({"op": "add", "path": "/spec/suspend", "value": false})];
            Ok(placed::injection_patches(view, &templates_of(view), flavors, resume)?
                .into_iter()
                .map(|p| (false, p))
                .collect())
        }
        JobKind::PyTorchJob | JobKind::MpiJob => Ok(vec![(
            false,
            ObjPatch::Merge(kubeflow::injection_patch(view, flavors)?),
        )]),
    }
}

/// The patches that put back what the user wrote into an evicted,
/// suspended object (none when nothing was injected).
pub fn restore_patches(view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
    match view.kind {
        JobKind::Job => {
            let Some(patch) = job::restoration_patch(&view.patch_base())? else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            if view.started {
                out.push((true, ObjPatch::Merge(job::clear_start_time_patch())));
            }
            out.push((false, ObjPatch::Merge(patch)));
            Ok(out)
        }
        JobKind::JobSet | JobKind::RayJob => Ok(placed::restoration_patches(view, &templates_of(view))?
            .into_iter()
            .flatten()
            .map(|p| (false, p))
            .collect()),
        JobKind::PyTorchJob | JobKind::MpiJob => Ok(kubeflow::restoration_patch(view)?
            .map(|p| vec![(false, ObjPatch::Merge(p))])
            .unwrap_or_default()),
    }
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
    ) -> Result<sluice_api::v1alpha1::Workload, JobError> {
        match self {
            Full::Job(j) => job::workload_for_job(j, kueue_compat, workload_class, pod_class),
            Full::Dynamic(JobKind::Job, v) => {
                let j = serde_json::from_value(v.clone()).map_err(|e| JobError::Invalid {
                    field: "Job".into(),
                    problem: e.to_string(),
                })?;
                job::workload_for_job(&j, kueue_compat, workload_class, pod_class)
            }
            Full::Dynamic(JobKind::JobSet, v) => jobset::workload(v, kueue_compat, workload_class, pod_class),
            Full::Dynamic(JobKind::RayJob, v) => ray::workload(v, kueue_compat, workload_class, pod_class),
            Full::Dynamic(kind, v) => kubeflow::workload(kind, v, kueue_compat, workload_class, pod_class),
        }
    }
}

/// The view of an object of a kind other than batch/v1 Job, from its JSON.
pub fn view(kind: JobKind, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    match kind {
        JobKind::Job => {
            let j: k8s_openapi::api::batch::v1::Job =
                serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
                    field: "Job".into(),
                    problem: e.to_string(),
                })?;
            Ok(JobView::of(&j, kueue_compat))
        }
        JobKind::JobSet => jobset::view(obj, kueue_compat),
        JobKind::PyTorchJob | JobKind::MpiJob => kubeflow::view(kind, obj, kueue_compat),
        JobKind::RayJob => ray::view(obj, kueue_compat),
    }
}

/// The label selector of an object's pods: its own (a RayJob's cluster),
/// else its kind's.
pub fn pods_selector_of(view: &JobView) -> String {
    view.pods_selector
        .clone()
        .unwrap_or_else(|| view.kind.pods_selector(&view.name, &view.uid))
}

/// Where the pod templates of an object with templates at list positions
/// (a JobSet, a RayJob) are: see [`placed`].
fn templates_of(view: &JobView) -> Vec<placed::Placed<'_>> {
    match view.kind {
        JobKind::RayJob => ray::placed(view),
        _ => jobset::placed(view),
    }
}
