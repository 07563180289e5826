//! `batch/v1` Job as a [`Queueable`]: the rules are in [`crate::job`]
//! (kept whole there, with their view [`crate::job::JobView::of`], used
//! directly on typed Jobs); this is how the other code reaches them by kind.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use super::{ObjPatch, Queueable, Resource};
use crate::job::{self, JobError, JobView};

pub(super) struct BatchJob;

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
        job::workload_for_job(&parse(obj)?, kueue_compat, workload_class, pod_class)
    }

    fn suspend_patch(&self) -> ObjPatch {
        ObjPatch::Merge(job::suspend_patch())
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
            out.push((true, ObjPatch::Merge(job::clear_start_time_patch())));
        }
        out.push((
            false,
            ObjPatch::Merge(job::injection_patch(&view.patch_base(), &all, pods)?),
        ));
        Ok(out)
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
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
}
