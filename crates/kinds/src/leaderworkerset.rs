//! `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet, a serving object held at
//! zero replicas until admitted (`serving`): `spec.replicas` groups, each
//! a leader and `size - 1` workers.
//!
//! - Workload `leaderworkerset-<name>`: with a leader template, a pod set
//!   `leader` (one pod per group, of
//!   `spec.leaderWorkerTemplate.leaderTemplate`) and a pod set `worker`
//!   (`size - 1` pods per group, of `workerTemplate`; none when `size` is
//!   1); without one, every pod is of the worker template: one pod set
//!   `worker` of `size` pods per group. Groups: its replicas plus its
//!   rollout surge (`spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge`,
//!   default 0).
//! - Ready: every group ready (`status.readyReplicas`); never finished.
//! - Its operator makes StatefulSets for it, left to it
//!   ([`crate::statefulset`]): the leaders' one controlled by it, each
//!   group's workers' controlled by the group's leader pod and labelled
//!   [`NAME_LABEL`].
//! - Its pods are found by the [`sluice_api::labels::POD_OWNER`] label
//!   Sluice puts on its templates when it starts it.

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

/// The label LeaderWorkerSet's operator puts on the StatefulSets and pods
/// it makes for a LeaderWorkerSet: its name.
pub const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";

const LEADER: Template = Template {
    pod_set: "leader",
    path: &["spec", "leaderWorkerTemplate", "leaderTemplate"],
};

const WORKER: Template = Template {
    pod_set: "worker",
    path: &["spec", "leaderWorkerTemplate", "workerTemplate"],
};

#[derive(Debug, Deserialize)]
struct LeaderWorkerSet {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    leader_worker_template: GroupTemplate,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupTemplate {
    #[serde(default)]
    size: Option<i32>,
    #[serde(default)]
    leader_template: Option<PodTemplateSpec>,
    worker_template: PodTemplateSpec,
}

/// A pod set of the object: its template and pods per group.
struct Part {
    at: Template,
    per_group: i32,
    template: PodTemplateSpec,
}

struct Parsed {
    metadata: ObjectMeta,
    /// Groups asked for (replicas).
    asked: i32,
    /// Groups run at once (replicas and surge).
    groups: i32,
    size: i32,
    parts: Vec<Part>,
}

fn parse(obj: &Value) -> Result<Parsed, JobError> {
    let l: LeaderWorkerSet = serde_json::from_value(obj.clone()).map_err(|e| JobError::Invalid {
        field: "LeaderWorkerSet".into(),
        problem: e.to_string(),
    })?;
    let spec = l.spec.ok_or(JobError::Missing { field: "spec" })?;
    let t = spec.leader_worker_template;
    let size = t.size.unwrap_or(1);
    if size < 1 {
        return Err(JobError::Invalid {
            field: "spec.leaderWorkerTemplate.size".into(),
            problem: format!("{size} must be at least 1"),
        });
    }
    let asked = serving::asked(obj)?;
    let parts = match t.leader_template {
        Some(leader) => vec![
            Part {
                at: LEADER,
                per_group: 1,
                template: leader,
            },
            Part {
                at: WORKER,
                per_group: size - 1,
                template: t.worker_template,
            },
        ],
        None => vec![Part {
            at: WORKER,
            per_group: size,
            template: t.worker_template,
        }],
    };
    Ok(Parsed {
        metadata: l.metadata,
        asked,
        groups: asked.saturating_add(surge(obj, asked)?),
        size,
        parts,
    })
}

/// Groups above its replicas a rollout may run.
fn surge(obj: &Value, replicas: i32) -> Result<i32, JobError> {
    let Some(raw) = obj.pointer("/spec/rolloutStrategy/rollingUpdateConfiguration/maxSurge") else {
        return Ok(0);
    };
    serving::int_or_percent(raw, replicas).ok_or_else(|| JobError::Invalid {
        field: "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge".into(),
        problem: format!("expected a whole number or a percentage, got {raw}"),
    })
}

fn view(obj: &Value, kueue_compat: bool) -> Result<JobView, JobError> {
    let p = parse(obj)?;
    let pods = p.groups.saturating_mul(p.size);
    let status = |f: &str| shape::int(obj.pointer(&format!("/status/{f}")), 0);
    let state = object::State {
        suspended: Hold::Replicas.is_held(obj),
        finished: None,
        ready: Some(serving::ready_pods(status("readyReplicas"), p.asked, p.size, pods)),
        succeeded: 0,
        pods,
        live: i32::try_from(status("replicas")).unwrap_or(0).saturating_mul(p.size),
        pods_selector: None,
        replicas: Some(p.asked),
        templates: p
            .parts
            .iter()
            .map(|part| object::directives(part.at.pod_set, part.at.pod_set, &part.template))
            .collect(),
    };
    Ok(object::view(JobKind::LeaderWorkerSet, &p.metadata, kueue_compat, state))
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
    let sets = p
        .parts
        .into_iter()
        .map(|part| object::Set {
            name: part.at.pod_set.into(),
            count: p.groups.saturating_mul(part.per_group),
            template: part.template,
        })
        .collect();
    object::workload(
        JobKind::LeaderWorkerSet,
        &p.metadata,
        sets,
        kueue_compat,
        workload_class,
        pod_class,
    )
}

/// The templates the object has (a leader template only when written).
fn templates_of(obj: &Value) -> Vec<Template> {
    let leader = obj.pointer(&LEADER.pointer()).is_some_and(Value::is_object);
    [leader.then_some(LEADER), Some(WORKER)].into_iter().flatten().collect()
}

/// LeaderWorkerSet as a [`Queueable`].
pub(super) struct LeaderWorkerSetKind;

impl Queueable for LeaderWorkerSetKind {
    fn resource(&self) -> Resource {
        Resource {
            group: "leaderworkerset.x-k8s.io",
            version: "v1",
            api_version: "leaderworkerset.x-k8s.io/v1",
            kind: "LeaderWorkerSet",
            plural: "leaderworkersets",
        }
    }

    fn flag_name(&self) -> &'static str {
        "leaderworkerset.x-k8s.io/leaderworkerset"
    }

    fn workload_prefix(&self) -> &'static str {
        "leaderworkerset-"
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

    /// Admitted whole (its pod sets have no minCount).
    fn start_patches(
        &self,
        view: &JobView,
        flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
        _admitted: &BTreeMap<String, u32>,
    ) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(vec![(
            false,
            ObjPatch::Merge(serving::start_patch(view, &[LEADER, WORKER], flavors)?),
        )])
    }

    fn restore_patches(&self, view: &JobView) -> Result<Vec<(bool, ObjPatch)>, JobError> {
        Ok(serving::restore_patch(view, &[LEADER, WORKER])?
            .map(|p| vec![(false, ObjPatch::Merge(p))])
            .unwrap_or_default())
    }

    fn invalid_reason(&self) -> &'static str {
        "InvalidLeaderWorkerSet"
    }

    fn hold(&self) -> Hold {
        Hold::Replicas
    }

    /// Only when a pod template asks for a GPU.
    fn queued_by_namespace(&self, obj: &Value) -> bool {
        crate::templates_request_gpu(JobKind::LeaderWorkerSet, obj)
    }

    fn templates(&self, obj: &Value) -> Vec<TemplateAt> {
        templates_of(obj)
            .iter()
            .map(|t| TemplateAt::at(&t.pointer(), &t.field()))
            .collect()
    }

    /// Its groups, their size, and its rollout surge.
    fn counts(&self, obj: &Value) -> Vec<Count> {
        let int = |p: &str| shape::int(obj.pointer(p), 1);
        let replicas = int("/spec/replicas");
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
                field: "spec.leaderWorkerTemplate.size".into(),
                value: int("/spec/leaderWorkerTemplate/size"),
            },
            Count {
                field: "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge (groups above spec.replicas during a rollout)".into(),
                value: i64::from(surge),
            },
        ]
    }

    /// Never: a LeaderWorkerSet runs until it is deleted.
    fn finished(&self, _obj: &Value) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests;
