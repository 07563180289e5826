//! `apps/v1` Deployment, a serving object held at zero replicas until
//! admitted (`serving`):
//!
//! - Workload `deployment-<name>`: one pod set `main` of the pods it runs
//!   at once, its replicas plus its rollout surge: a `RollingUpdate`
//!   strategy's `maxSurge` (a number, or a percentage of the replicas
//!   rounded up; `Recreate` surges none).
//! - The webhook sets a new queued Deployment's `maxSurge` to 0 when it is
//!   the API's default (`25%`), so that a rollout replaces pods in place
//!   and asks for no quota beyond its replicas; any other value its author
//!   wrote is kept, and its surge is asked for.
//! - Ready: every replica ready (`status.readyReplicas`); never finished.
//! - Its pods are found by the [`sluice_api::labels::POD_OWNER`] label
//!   Sluice puts on its template when it starts it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ResourceFlavor, Workload};

use crate::job::{JobError, JobView};
use crate::serving::{self, Template};
use crate::shape::{self, Count, Hold, TemplateAt};
use crate::{Defaulted, JobKind, ObjPatch, Queueable, Resource, object};

/// Its one pod template.
const TEMPLATE: Template = Template {
    pod_set: "main",
    path: &["spec", "template"],
};

/// The surge the API server writes when a RollingUpdate strategy gives
/// none.
const API_DEFAULT_SURGE: &str = "25%";

#[derive(Debug, Deserialize)]
struct Deployment {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
struct Spec {
    template: PodTemplateSpec,
}

struct Parsed {
    metadata: ObjectMeta,
    template: PodTemplateSpec,
    asked: i32,
    surge: i32,
}

fn parse(obj: &Value) -> Result<Parsed, JobError> {
    let d: Deployment = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "Deployment".into(),
        problem: e.to_string(),
    })?;
    let spec = d.spec.ok_or(JobError::Missing { field: "spec" })?;
    let asked = serving::asked(obj)?;
    Ok(Parsed {
        metadata: d.metadata,
        template: spec.template,
        asked,
        surge: surge(obj, asked)?,
    })
}

/// Pods above its replicas a rollout may run: a `RollingUpdate`
/// strategy's `maxSurge` (the API's `25%` when unset) resolved against
/// `replicas`; none for `Recreate`.
fn surge(obj: &Value, replicas: i32) -> Result<i32, JobError> {
    let strategy = obj.pointer("/spec/strategy");
    if strategy.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("Recreate") {
        return Ok(0);
    }
    let raw = strategy
        .and_then(|s| s.pointer("/rollingUpdate/maxSurge"))
        .cloned()
        .unwrap_or_else(|| json!(API_DEFAULT_SURGE));
    serving::int_or_percent(&raw, replicas).ok_or_else(|| JobError::Invalid {
        field: "spec.strategy.rollingUpdate.maxSurge".into(),
        problem: format!("expected a whole number or a percentage, got {raw}"),
    })
}

fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let p = parse(obj)?;
    let pods = p.asked.saturating_add(p.surge);
    let status = |f: &str| shape::int(obj.pointer(&format!("/status/{f}")), 0);
    let state = object::State {
        suspended: Hold::Replicas.is_held(obj),
        finished: None,
        ready: Some(serving::ready_pods(status("readyReplicas"), p.asked, 1, pods)),
        succeeded: 0,
        pods,
        live: i32::try_from(status("replicas")).unwrap_or(0),
        pods_selector: None,
        replicas: Some(p.asked),
        templates: vec![object::directives(TEMPLATE.pod_set, TEMPLATE.pod_set, &p.template)],
    };
    Ok(object::view(JobKind::Deployment, &p.metadata, kueue_compat, state))
}

fn workload(
    obj: &Value,
    kueue_compat: bool,
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let p = parse(obj)?;
    if p.asked == 0 {
        return Err(JobError::NothingAsked {
            field: "spec.replicas".into(),
        });
    }
    let sets = vec![object::Set {
        name: TEMPLATE.pod_set.into(),
        count: p.asked.saturating_add(p.surge),
        template: p.template,
    }];
    object::workload(
        JobKind::Deployment,
        &p.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// apps/v1 Deployment as a [`Queueable`].
pub(super) struct DeploymentKind;

impl Queueable for DeploymentKind {
    fn resource(&self) -> Resource {
        Resource {
            group: "apps",
            version: "v1",
            api_version: "apps/v1",
            kind: "Deployment",
            plural: "deployments",
        }
    }

    fn flag_name(&self) -> &'static str {
        "deployment"
    }

    fn workload_prefix(&self) -> &'static str {
        "deployment-"
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
        "InvalidDeployment"
    }

    fn hold(&self) -> Hold {
        Hold::Replicas
    }

    /// Only when a pod template asks for a GPU.
    fn queued_by_namespace(&self, obj: &Value) -> bool {
        crate::templates_request_gpu(JobKind::Deployment, obj)
    }

    fn create_defaults(&self, obj: &Value) -> Vec<Defaulted> {
        let strategy = obj.pointer("/spec/strategy");
        let rolling = strategy.and_then(|s| s.get("type")).and_then(Value::as_str) != Some("Recreate");
        let surge = strategy.and_then(|s| s.pointer("/rollingUpdate/maxSurge"));
        if !rolling || surge.is_some_and(|s| s != API_DEFAULT_SURGE) {
            return Vec::new();
        }
        let why = format!(
            "spec.strategy.rollingUpdate.maxSurge: set to 0 (was {}): a queued Deployment's rollout replaces pods in place, so it asks for no quota beyond its replicas; write another maxSurge to surge, and its surge pods are asked for too",
            surge.map_or("unset".to_owned(), ToString::to_string)
        );
        let (pointer, value) = match (strategy, strategy.and_then(|s| s.get("rollingUpdate"))) {
            (None, _) => (
                "/spec/strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}),
            ),
            (Some(_), None) => ("/spec/strategy/rollingUpdate", json!({"maxSurge": 0})),
            (Some(_), Some(_)) => ("/spec/strategy/rollingUpdate/maxSurge", json!(0)),
        };
        vec![Defaulted {
            pointer: pointer.into(),
            value,
            why,
        }]
    }

    fn templates(&self, _obj: &Value) -> Vec<TemplateAt> {
        vec![TemplateAt::at(&TEMPLATE.pointer(), &TEMPLATE.field())]
    }

    /// Its replicas, and its rollout surge.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        let replicas = shape::int(obj.pointer("/spec/replicas"), 1);
        let surge = i32::try_from(replicas)
            .ok()
            .and_then(|r| surge(obj, r).ok())
            .unwrap_or(0);
        vec![
            Count {
                field: "spec.replicas".into(),
                value: replicas,
            },
            Count {
                field: "spec.strategy.rollingUpdate.maxSurge (pods above spec.replicas during a rollout)".into(),
                value: i64::from(surge),
            },
        ]
    }

    /// Never: a Deployment runs until it is deleted.
    fn finished(&self, _obj: &Value) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests;
