//! Plain Pods where GPUs are queued. A bare pod has no suspend flag and
//! its spec cannot be changed once it runs, so how one is held depends on
//! the API server:
//!
//! - with pod scheduling gates (Kubernetes 1.27+; 1.26 behind a feature
//!   gate), Kueue's protocol: the webhook adds the gate
//!   [`sluice_api::labels::ADMISSION_GATE`] at create, and at admission
//!   the flavor's node selector and tolerations are written (allowed while
//!   a pod is gated) and the gate removed;
//! - without them (1.24), a bare pod that would wait is refused at create
//!   with how to run it.
//!
//! A gated pod ([`GatedPod`]) is a Workload of its own, `pod-<name>`, or
//! its group's, `pod-<group>`: the pods of one namespace with the same
//! [`POD_GROUP`] label and a [`POD_GROUP_TOTAL`] annotation, made once
//! that many exist ([`assess`]), admitted together. Its pod sets are the
//! group's roles (pods that ask for the same), its owner references every
//! pod (none its controller: the Workload goes with the last of them). At
//! admission each pod is given its flavors' node labels and tolerations
//! and its gate is removed ([`ungate_patch`]); a running pod cannot be
//! held again, so an evicted group's pods are deleted (their owner, if
//! any, makes them again, gated).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};
use sluice_api::labels::{self, ADMISSION_GATE, POD_GROUP, POD_GROUP_TOTAL};
use sluice_api::v1alpha1::{PodSet, ResourceFlavor, Workload};

use crate::ObjPatch;
use crate::job::{self, JobError};
use crate::shape::escape;

/// Prefix of a gated pod's (or pod group's) Workload.
pub const WORKLOAD_PREFIX: &str = "pod-";

/// What the index keeps of a pod the webhook gated.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Its group and the group's size; `None`: a group of its own.
    pub group: Option<(String, u32)>,
    /// The LocalQueue its labels name.
    pub queue: Option<String>,
    /// Where [`ADMISSION_GATE`] is in `spec.schedulingGates`, while it is.
    pub gate_at: Option<usize>,
    /// `Some(true)` Succeeded, `Some(false)` Failed.
    pub finished: Option<bool>,
    /// Being deleted.
    pub deleting: bool,
    pub labels: BTreeMap<String, String>,
    /// Its spec, cut down to what a Workload reads
    /// ([`job::slim_template`]).
    pub template: PodTemplateSpec,
}

impl GatedPod {
    /// Its group's name (its own name when it has none).
    pub fn group_name(&self) -> &str {
        self.group.as_ref().map_or(&self.name, |(g, _)| g)
    }

    /// The name of its group's Workload.
    pub fn workload_name(&self) -> String {
        format!("{WORKLOAD_PREFIX}{}", self.group_name())
    }

    /// Running: neither gated nor finished nor being deleted.
    pub fn running(&self) -> bool {
        self.gate_at.is_none() && self.finished.is_none() && !self.deleting
    }
}

/// A pod as the index keeps it; a malformed group count is an error with
/// its field.
pub fn gated_pod(obj: &Value, kueue_compat: bool) -> Result<GatedPod, JobError> {
    let meta: ObjectMeta =
        serde_json::from_value(obj.get("metadata").cloned().unwrap_or(Value::Null)).map_err(|e| JobError::Invalid {
            field: "metadata".into(),
            problem: e.to_string(),
        })?;
    let spec: PodSpec =
        serde_json::from_value(obj.get("spec").cloned().unwrap_or(Value::Null)).map_err(|e| JobError::Invalid {
            field: "spec".into(),
            problem: e.to_string(),
        })?;
    let labels = meta.labels.clone().unwrap_or_default();
    let group = group_of(&meta)?;
    let gate_at = spec
        .scheduling_gates
        .iter()
        .flatten()
        .position(|g| g.name == ADMISSION_GATE);
    let finished = match obj.pointer("/status/phase").and_then(Value::as_str) {
        Some("Succeeded") => Some(true),
        Some("Failed") => Some(false),
        _ => None,
    };
    let mut template = PodTemplateSpec {
        metadata: None,
        spec: Some(spec),
    };
    job::slim_template(&mut template);
    Ok(GatedPod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        group,
        queue: labels::queue_name(&labels, kueue_compat).map(String::from),
        gate_at,
        finished,
        deleting: meta.deletion_timestamp.is_some(),
        labels,
        template,
    })
}

fn group_of(meta: &ObjectMeta) -> Result<Option<(String, u32)>, JobError> {
    let Some(group) = meta.labels.as_ref().and_then(|l| l.get(POD_GROUP)) else {
        return Ok(None);
    };
    let total = meta.annotations.as_ref().and_then(|a| a.get(POD_GROUP_TOTAL));
    match total.map(|t| t.trim().parse::<u32>()) {
        Some(Ok(n)) if n >= 1 => Ok(Some((group.clone(), n))),
        _ => Err(JobError::Invalid {
            field: format!("metadata.annotations[{POD_GROUP_TOTAL}]"),
            problem: format!(
                "a pod of group {group:?} must say how many pods the group has, a whole number from 1; got {}",
                total.map_or("none".to_owned(), |t| format!("{t:?}"))
            ),
        }),
    }
}

/// Whether a group's pods (those that exist) can be one Workload now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// All its pods exist.
    Whole,
    /// `have` of `need` exist.
    Waiting { have: usize, need: usize },
    /// Its pods disagree (the group's size, or its queue): why.
    Conflict(String),
}

/// Whether `pods` (one group's, by name) make its Workload.
pub fn assess(pods: &[&GatedPod]) -> Assessment {
    let Some(first) = pods.first() else {
        return Assessment::Waiting { have: 0, need: 1 };
    };
    let need = first.group.as_ref().map_or(1, |(_, n)| *n as usize);
    if let Some(p) = pods
        .iter()
        .find(|p| p.group.as_ref().map(|g| g.1) != first.group.as_ref().map(|g| g.1))
    {
        return Assessment::Conflict(format!(
            "pods {} and {} of group {:?} give different {POD_GROUP_TOTAL}",
            first.name,
            p.name,
            first.group_name()
        ));
    }
    if let Some(p) = pods.iter().find(|p| p.queue != first.queue) {
        return Assessment::Conflict(format!(
            "pods {} and {} of group {:?} name different LocalQueues",
            first.name,
            p.name,
            first.group_name()
        ));
    }
    if pods.len() < need {
        return Assessment::Waiting { have: pods.len(), need };
    }
    Assessment::Whole
}

/// The Workload of a whole group (its pods sorted by name): a pod set per
/// role (pods whose templates ask for the same), `main` when there is one.
pub fn workload(
    pods: &[&GatedPod],
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, JobError> {
    let first = pods.first().ok_or(JobError::Missing { field: "pods" })?;
    let queue = first.queue.clone().ok_or(JobError::NotQueued)?;
    let mut roles: Vec<(PodTemplateSpec, i32)> = Vec::new();
    for p in pods {
        match roles.iter_mut().find(|(t, _)| *t == p.template) {
            Some((_, n)) => *n += 1,
            None => roles.push((p.template.clone(), 1)),
        }
    }
    let single = roles.len() == 1;
    let pod_sets: Vec<PodSet> = roles
        .into_iter()
        .enumerate()
        .map(|(i, (template, count))| PodSet {
            name: if single { "main".into() } else { format!("role-{i}") },
            count,
            min_count: None,
            template,
            topology: None,
        })
        .collect();
    let template_class = first
        .template
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    let priority = job::priority_of(Some(&first.labels), template_class, workload_class, pod_class);
    let mut wl_labels = BTreeMap::from([(labels::QUEUE.to_string(), queue.clone())]);
    if let Some((g, _)) = &first.group {
        wl_labels.insert(POD_GROUP.to_string(), g.clone());
    }
    let metadata = ObjectMeta {
        name: Some(first.workload_name()),
        namespace: Some(first.namespace.clone()),
        labels: Some(wl_labels),
        owner_references: Some(pods.iter().map(|p| owner_reference(p)).collect()),
        ..Default::default()
    };
    Ok(crate::queued_workload(metadata, &queue, pod_sets, priority))
}

fn owner_reference(p: &GatedPod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        controller: Some(false),
        block_owner_deletion: None,
    }
}

/// The JSON patch that starts a gated pod on `flavors`: their node labels
/// added to its `nodeSelector` and their tolerations to its
/// `tolerations` (additions are what a gated pod allows), then its gate
/// removed, its position guarded by a `test`. `None` when it is not gated.
pub fn ungate_patch(p: &GatedPod, flavors: &[&ResourceFlavor]) -> Option<ObjPatch> {
    let at = p.gate_at?;
    let spec = p.template.spec.as_ref();
    let mut ops = vec![
        json!({"op": "test", "path": format!("/spec/schedulingGates/{at}/name"), "value": ADMISSION_GATE}),
        json!({"op": "remove", "path": format!("/spec/schedulingGates/{at}")}),
    ];
    let selector = spec.and_then(|s| s.node_selector.clone());
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for f in flavors {
        labels.extend(f.spec.node_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    match &selector {
        None if !labels.is_empty() => ops.push(json!({"op": "add", "path": "/spec/nodeSelector", "value": labels})),
        _ => ops.extend(
            labels
                .iter()
                .filter(|(k, v)| selector.as_ref().and_then(|s| s.get(*k)) != Some(*v))
                .map(|(k, v)| json!({"op": "add", "path": format!("/spec/nodeSelector/{}", escape(k)), "value": v})),
        ),
    }
    let have: Vec<Toleration> = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    let mut new: Vec<&Toleration> = Vec::new();
    for t in flavors.iter().flat_map(|f| f.spec.tolerations.iter()) {
        if !have.contains(t) && !new.contains(&t) {
            new.push(t);
        }
    }
    if spec.and_then(|s| s.tolerations.as_ref()).is_none() && !new.is_empty() {
        ops.push(json!({"op": "add", "path": "/spec/tolerations", "value": new}));
    } else {
        ops.extend(
            new.iter()
                .map(|t| json!({"op": "add", "path": "/spec/tolerations/-", "value": t})),
        );
    }
    Some(ObjPatch::Json(Value::Array(ops)))
}

/// How a group ended, once every one of its pods has: `Some(true)` when
/// all succeeded.
pub fn finished(pods: &[&GatedPod]) -> Option<bool> {
    if pods.is_empty() || pods.iter().any(|p| p.finished.is_none()) {
        return None;
    }
    Some(pods.iter().all(|p| p.finished == Some(true)))
}

/// Whether an API server of this version (`/version`'s `major`, `minor`,
/// as `"1"`, `"27+"`) has pod scheduling gates on by default: 1.27 and
/// later.
pub fn has_scheduling_gates(major: &str, minor: &str) -> bool {
    let num = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
    match (num(major), num(minor)) {
        (Some(1), Some(minor)) => minor >= 27,
        (Some(major), _) => major > 1,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::flavor;

    /// A pod as the API server returns it after the webhook gated it: in
    /// `group` of `total` (or alone), asking for `gpus`.
    fn gated(name: &str, group: Option<(&str, &str)>, gpus: &str) -> Value {
        let mut labels = json!({"sluice.dev/queue": "team-a", "sluice.dev/managed": "true"});
        let mut annotations = json!({});
        if let Some((g, total)) = group {
            labels[POD_GROUP] = json!(g);
            annotations[POD_GROUP_TOTAL] = json!(total);
        }
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                         "labels": labels, "annotations": annotations},
            "spec": {"schedulingGates": [{"name": "other.io/gate"}, {"name": ADMISSION_GATE}],
                     "nodeSelector": {"zone": "a"},
                     "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": "Pending"}
        })
    }

    fn pods(objs: &[Value]) -> Vec<GatedPod> {
        let mut v: Vec<GatedPod> = objs.iter().map(|o| gated_pod(o, false).unwrap()).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    #[test]
    fn a_gated_pod_is_its_own_workload_and_a_group_waits_until_whole() {
        let alone = pods(&[gated("p", None, "1")]);
        let refs: Vec<&GatedPod> = alone.iter().collect();
        assert_eq!(assess(&refs), Assessment::Whole);
        let wl = workload(&refs, |_| None, |_| None).unwrap();
        assert_eq!(wl.metadata.name.as_deref(), Some("pod-p"));
        assert_eq!(
            (wl.spec.pod_sets[0].name.as_str(), wl.spec.pod_sets[0].count),
            ("main", 1)
        );
        let group = pods(&[
            gated("w-0", Some(("g", "3")), "8"),
            gated("w-1", Some(("g", "3")), "8"),
            gated("lead", Some(("g", "3")), "0"),
        ]);
        let two: Vec<&GatedPod> = group.iter().take(2).collect();
        assert_eq!(assess(&two), Assessment::Waiting { have: 2, need: 3 });
        let all: Vec<&GatedPod> = group.iter().collect();
        assert_eq!(assess(&all), Assessment::Whole);
        let wl = workload(&all, |_| None, |_| None).unwrap();
        assert_eq!(wl.metadata.name.as_deref(), Some("pod-g"));
        let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
        assert_eq!(sets, [("role-0", 1), ("role-1", 2)], "a role per distinct template");
        let owners = wl.metadata.owner_references.unwrap();
        assert_eq!(owners.len(), 3);
        assert!(owners.iter().all(|o| o.kind == "Pod" && o.controller == Some(false)));
        // A group whose pods disagree on its size.
        let odd = pods(&[gated("a", Some(("g", "2")), "1"), gated("b", Some(("g", "3")), "1")]);
        let refs: Vec<&GatedPod> = odd.iter().collect();
        assert!(matches!(assess(&refs), Assessment::Conflict(_)));
        let mut bad = gated("x", Some(("g", "two")), "1");
        assert_eq!(
            gated_pod(&bad, false).unwrap_err().to_string(),
            "metadata.annotations[sluice.dev/pod-group-total-count]: a pod of group \"g\" must say how many pods the group has, a whole number from 1; got \"two\""
        );
        bad["metadata"]["annotations"] = json!({});
        assert!(gated_pod(&bad, false).is_err());
    }

    #[test]
    fn admission_adds_the_flavors_and_removes_only_its_own_gate() {
        let mut obj = gated("p", None, "1");
        let p = gated_pod(&obj, false).unwrap();
        assert_eq!(p.gate_at, Some(1));
        let a100 = flavor("a100");
        let Some(ObjPatch::Json(ops)) = ungate_patch(&p, &[&a100]) else {
            panic!()
        };
        let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
        json_patch::patch(&mut obj, &patch).unwrap();
        assert_eq!(obj["spec"]["schedulingGates"], json!([{"name": "other.io/gate"}]));
        assert_eq!(obj["spec"]["nodeSelector"], json!({"zone": "a", "gpu": "a100"}));
        assert_eq!(obj["spec"]["tolerations"][0]["key"], json!("nvidia.com/gpu"));
        let started = gated_pod(&obj, false).unwrap();
        assert_eq!(started.gate_at, None);
        assert!(ungate_patch(&started, &[&a100]).is_none());
        // Moved meanwhile: the guard refuses the patch.
        let mut moved = gated("p", None, "1");
        moved["spec"]["schedulingGates"] = json!([{"name": ADMISSION_GATE}]);
        let Some(ObjPatch::Json(ops)) = ungate_patch(&p, &[&a100]) else {
            panic!()
        };
        let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
        assert!(json_patch::patch(&mut moved, &patch).is_err());
    }

    #[test]
    fn a_group_is_finished_once_every_pod_is() {
        let mut a = gated("a", Some(("g", "2")), "1");
        let mut b = gated("b", Some(("g", "2")), "1");
        a["status"]["phase"] = json!("Succeeded");
        let ps = pods(&[a.clone(), b.clone()]);
        assert_eq!(finished(&ps.iter().collect::<Vec<_>>()), None);
        b["status"]["phase"] = json!("Failed");
        let ps = pods(&[a, b]);
        assert_eq!(finished(&ps.iter().collect::<Vec<_>>()), Some(false));
    }

    #[test]
    fn scheduling_gates_come_with_1_27() {
        assert!(!has_scheduling_gates("1", "24"));
        assert!(!has_scheduling_gates("1", "26"));
        assert!(has_scheduling_gates("1", "27"));
        assert!(has_scheduling_gates("1", "30+"));
        assert!(has_scheduling_gates("2", "0"));
        assert!(!has_scheduling_gates("", ""));
    }
}
