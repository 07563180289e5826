//! `apps/v1` StatefulSet, a serving object held at zero replicas until
//! admitted (`serving`):
//!
//! - Workload `statefulset-<name>`: one pod set `main` of its replicas
//!   (a StatefulSet's rollout replaces pods in place: no surge).
//! - Ready: every replica ready (`status.readyReplicas`); never finished.
//! - A LeaderWorkerSet's StatefulSets are its own, never queued on their
//!   own ([`Queueable::made_by`]): its leaders' StatefulSet is controlled
//!   by the LeaderWorkerSet, each group's workers' by its leader pod and
//!   labelled with the LeaderWorkerSet's name
//!   ([`crate::leaderworkerset::NAME_LABEL`]).
//! - Its pods are found by the [`sluice_api::labels::POD_OWNER`] label
//!   Sluice puts on its template when it starts it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView};
use crate::serving::{self, Template};
use crate::shape::{self, Count, Hold, TemplateAt};
use crate::{JobKind, ObjPatch, Queueable, Resource, object};

/// Its one pod template.
const TEMPLATE: Template = Template {
    pod_set: "main",
    path: &["spec", "template"],
};

#[derive(Debug, Deserialize)]
struct StatefulSet {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
struct Spec {
    template: PodTemplateSpec,
}

fn parse(obj: &Value) -> Result<(ObjectMeta, PodTemplateSpec, i32), JobError> {
    let s: StatefulSet = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "StatefulSet".into(),
        problem: e.to_string(),
    })?;
    let spec = s.spec.ok_or(JobError::Missing { field: "spec" })?;
    Ok((s.metadata, spec.template, serving::asked(obj)?))
}

fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let (metadata, template, asked) = parse(obj)?;
    let status = |f: &str| shape::int(obj.pointer(&format!("/status/{f}")), 0);
    let state = object::State {
        suspended: Hold::Replicas.is_held(obj),
        finished: None,
        ready: Some(serving::ready_pods(status("readyReplicas"), asked, 1, asked)),
        succeeded: 0,
        pods: asked,
        live: i32::try_from(status("replicas")).unwrap_or(0),
        pods_selector: None,
        replicas: Some(asked),
        templates: vec![object::directives(TEMPLATE.pod_set, TEMPLATE.pod_set, &template)],
    };
    Ok(object::view(JobKind::StatefulSet, &metadata, kueue_compat, state))
}

fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let (metadata, template, asked) = parse(obj)?;
    if asked == 0 {
        return Err(JobError::NothingAsked {
            field: "spec.replicas".into(),
        });
    }
    let sets = vec![object::Set {
        name: TEMPLATE.pod_set.into(),
        count: asked,
        template,
    }];
    object::workload(
        JobKind::StatefulSet,
        &metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// apps/v1 StatefulSet as a [`Queueable`].
pub(super) struct StatefulSetKind;

impl Queueable for StatefulSetKind {
    fn resource(&self) -> Resource {
        Resource {
            group: "apps",
            version: "v1",
            api_version: "apps/v1",
            kind: "StatefulSet",
            plural: "statefulsets",
        }
    }

    fn flag_name(&self) -> &'static str {
        "statefulset"
    }

    fn workload_prefix(&self) -> &'static str {
        "statefulset-"
    }

    fn pods_selector(&self, _name: &str, uid: &str) -> String {
        serving::pods_selector(uid)
    }

    fn view(&self, obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
        view(obj, kueue_compat)
    }

    fn workload(
        &self,
        obj: &Value,
        kueue_compat: bool,
        workload_class: &dyn Fn(&str) -> Option<i32>,
        pod_class: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Workload, JobError> {
        workload(obj, kueue_compat, workload_class, pod_class)
    }

    /// Admitted whole (its pod set has no minCount).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        _admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(vec![(
            false,
            ObjPatch::Merge(serving::start_patch(view, &[TEMPLATE], flavors)?),
        )])
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(serving::restore_patch(view, &[TEMPLATE])?
            .map(|p| vec![(false, ObjPatch::Merge(p))])
            .unwrap_or_default())
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidStatefulSet"
    }

    fn hold(&self) -> Hold {
        Hold::Replicas
    }

    /// Only when a pod template asks for a GPU.
    fn queued_by_namespace(&self, obj: &Value) -> bool {
        crate::templates_request_gpu(JobKind::StatefulSet, obj)
    }

    fn templates(&self, _obj: &Value) -> Vec<TemplateAt> {
        vec![TemplateAt::at(&TEMPLATE.pointer(), &TEMPLATE.field())]
    }

    fn counts(&self, obj: &Value) -> Vec<Count> {
        vec![Count {
            field: "spec.replicas".into(),
            value: shape::int(obj.pointer("/spec/replicas"), 1),
        }]
    }

    /// Never: a StatefulSet runs until it is deleted.
    fn finished(&self, _obj: &Value) -> Option<bool> {
        None
    }

    fn made_by(&self) -> &'static [JobKind] {
        &[JobKind::LeaderWorkerSet]
    }

    fn made_by_label(&self) -> Option<(&'static str, JobKind)> {
        Some((crate::leaderworkerset::NAME_LABEL, JobKind::LeaderWorkerSet))
    }
}

#[cfg(test)]
mod tests;
