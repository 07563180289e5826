//! Which GPU pods may run where GPUs are queued: a pod with the queue
//! label, or any pod asking for a GPU in a namespace that queues every
//! object (`sluice.dev/default-queue: enabled`), runs only as part of a
//! Workload. It may be created when:
//!
//! - a queued object's controller makes it: the job, ReplicaSet or
//!   StatefulSet controller of kube-controller-manager for the object of
//!   that kind that controls it (Jobs and StatefulSets are queued; a GPU
//!   ReplicaSet exists there only as a Deployment's, below), or a job
//!   operator (`operators`) or admission writer for the object it runs.
//!   `userInfo.username` is the API server's: a tenant cannot claim it;
//! - it is exempt as a GPU system pod (the trust rules of the GPU fixes:
//!   excluded namespaces, the admin's trust label with a verified
//!   DaemonSet or the skip label), checked before this;
//! - where the server has pod scheduling gates (1.27+), any other such
//!   pod is gated (`spec.schedulingGates` [`ADMISSION_GATE`], labelled
//!   [`MANAGED_POD`]) and becomes a Workload of its own or of its pod
//!   group; where it has none (1.24), it is refused, saying how to run it.
//!
//! A ReplicaSet made by anyone but the Deployment controller would make
//! such pods through the ReplicaSet controller: in a namespace that queues
//! every object, one whose pods ask for a GPU is refused (create a
//! Deployment, which is queued).

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::{Value, json};
use sluice_api::labels::{
    ADMISSION_GATE, ALLOW_GPU_FIXES_SKIP, DEFAULT_LOCAL_QUEUE_NAME, DEFAULT_QUEUE, DEFAULT_QUEUE_ENABLED, GPU_FIXES,
    GPU_FIXES_SKIP, MANAGED_POD, POD_GROUP, POD_GROUP_TOTAL,
};
use sluice_kinds::shape;

use super::{Decision, Reviewer};
use crate::gpu::FixKind;
use crate::patch::{PatchOp, Pointer};

/// kube-controller-manager without per-controller credentials.
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

/// The built-in controllers that make pods of queued objects, with the
/// kind (apiVersion, kind) of object each makes them for.
const POD_MAKERS: [(&str, &str, &str); 3] = [
    (
        "system:serviceaccount:kube-system:replicaset-controller",
        "apps/v1",
        "ReplicaSet",
    ),
    (
        "system:serviceaccount:kube-system:statefulset-controller",
        "apps/v1",
        "StatefulSet",
    ),
    ("system:serviceaccount:kube-system:job-controller", "batch/v1", "Job"),
];

/// The Deployment controller, which makes a Deployment's ReplicaSets.
const DEPLOYMENT_CONTROLLER: &str = "system:serviceaccount:kube-system:deployment-controller";

impl Reviewer {
    /// The queue guard of a pod being created (after the GPU fixes): a
    /// queued GPU pod that no queued object made is gated or refused.
    pub(super) fn guard_pod(&self, req: &AdmissionRequest<DynamicObject>, obj: &DynamicObject, d: &mut Decision) {
        let Some(spec) = obj.data.get("spec") else { return };
        let Some(gpu_at) = first_gpu(spec) else { return };
        let namespace = req.namespace.as_deref().unwrap_or_default();
        let labels = obj.metadata.labels.as_ref();
        let labelled = self.cfg.queue_label_of(labels).and_then(|k| labels?.get(k).cloned());
        let by_namespace = self.view.default_queue_enabled(namespace);
        if labelled.is_none() && !by_namespace {
            return;
        }
        let user = req.user_info.username.as_deref().unwrap_or("");
        if self.made_for_its_owner(user, obj) {
            return;
        }
        let queue = labelled.clone().unwrap_or_else(|| DEFAULT_LOCAL_QUEUE_NAME.to_owned());
        if self.gates {
            gate(
                obj,
                &queue,
                labelled.is_none().then_some(self.cfg.queue_label.as_str()),
                d,
            );
        } else {
            d.denials.push(self.refusal(namespace, &gpu_at, labelled.as_deref()));
        }
    }

    /// Whether `user` made the pod for the object that controls it: a
    /// built-in controller for its kind, or a job operator or admission
    /// writer for any.
    fn made_for_its_owner(&self, user: &str, obj: &DynamicObject) -> bool {
        let Some(owner) = obj
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
        else {
            return false;
        };
        if self.cfg.acts_for_owners(user) {
            return true;
        }
        POD_MAKERS.iter().any(|(maker, api_version, kind)| {
            (user == *maker || user == CONTROLLER_MANAGER) && owner.api_version == *api_version && owner.kind == *kind
        })
    }

    /// Why a queued bare GPU pod cannot be created on this server, and how
    /// to run it.
    fn refusal(&self, namespace: &str, gpu_at: &str, queue: Option<&str>) -> String {
        let why = match queue {
            Some(q) => format!("it is labelled {}={q:?}", self.cfg.queue_label),
            None => format!("namespace {namespace:?} queues every GPU ({DEFAULT_QUEUE}={DEFAULT_QUEUE_ENABLED})"),
        };
        format!(
            "{gpu_at}: a Pod that asks for a GPU must wait for admission here ({why}), and this API server has no pod scheduling gates (Kubernetes 1.27+) to hold a bare Pod until Sluice admits it, so it would run outside the GPU quota: run it as a Job (kubectl create job), or as a Deployment or StatefulSet, which Sluice queues; a GPU system pod is exempted in an excluded namespace ({}), or, in a namespace a cluster admin labelled {ALLOW_GPU_FIXES_SKIP}=true, from a DaemonSet or labelled {GPU_FIXES}={GPU_FIXES_SKIP}",
            self.cfg.excluded_namespaces.join(", ")
        )
    }

    /// A ReplicaSet created or changed, in a namespace that queues every
    /// object (the entry's namespaceSelector): one whose pods ask for a
    /// GPU is refused unless the Deployment controller (or another
    /// control-plane or trusted user) writes it, or the update adds no
    /// GPU pods.
    pub(super) fn validate_replica_set(&self, req: &AdmissionRequest<DynamicObject>) -> Decision {
        let mut d = Decision::default();
        let Some(new) = req.object.as_ref() else { return d };
        let user = req.user_info.username.as_deref().unwrap_or("");
        let gpu = |o: &DynamicObject| o.data.pointer("/spec/template/spec").is_some_and(shape::requests_gpu);
        if self.excluded(req) || !gpu(new) || control_plane(user) || self.cfg.acts_for_owners(user) {
            return d;
        }
        if req.operation == Operation::Update
            && let Some(old) = req.old_object.as_ref()
            && gpu(old)
            && replicas(new) <= replicas(old)
        {
            return d;
        }
        let namespace = req.namespace.as_deref().unwrap_or_default();
        d.denials.push(format!(
            "spec.template: the pods of a ReplicaSet that {user:?} writes would ask for a GPU outside the GPU quota: namespace {namespace:?} queues every GPU ({DEFAULT_QUEUE}={DEFAULT_QUEUE_ENABLED}); create a Deployment instead (Sluice queues it and holds it at zero replicas until it is admitted)"
        ));
        d
    }
}

impl Reviewer {
    /// An UPDATE of a pod the webhook gated (labelled [`MANAGED_POD`]):
    /// only an admission writer removes its gate or that label (either
    /// would let it run, or hide it from Sluice, unadmitted).
    pub(super) fn validate_gated_pod(&self, req: &AdmissionRequest<DynamicObject>) -> Decision {
        let mut d = Decision::default();
        let user = req.user_info.username.as_deref().unwrap_or("");
        let (Some(old), Some(new)) = (&req.old_object, &req.object) else {
            return d;
        };
        if req.operation != Operation::Update || self.cfg.is_admission_writer(user) {
            return d;
        }
        let gated = |o: &DynamicObject| {
            shape::list(o.data.pointer("/spec/schedulingGates"))
                .iter()
                .any(|g| g.get("name").and_then(Value::as_str) == Some(ADMISSION_GATE))
        };
        let managed = |o: &DynamicObject| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_POD))
                .map(String::as_str)
                == Some("true")
        };
        if gated(old) && !gated(new) {
            d.denials.push(format!(
                "spec.schedulingGates: {ADMISSION_GATE} cannot be removed by {user:?}: the pod waits in its queue and only the Sluice controller removes the gate, once the pod is admitted"
            ));
        }
        if managed(old) && !managed(new) {
            d.denials.push(format!(
                "metadata.labels[{MANAGED_POD}]: cannot be removed by {user:?}: Sluice follows the pods it gated by it"
            ));
        }
        d
    }
}

/// Whether `user` is the control plane: kube-controller-manager (its own
/// credentials, or a `kube-system` service account, as the Deployment
/// controller and the garbage collector run).
fn control_plane(user: &str) -> bool {
    user == CONTROLLER_MANAGER
        || user == DEPLOYMENT_CONTROLLER
        || user.starts_with("system:serviceaccount:kube-system:")
}

fn replicas(o: &DynamicObject) -> i64 {
    shape::int(o.data.pointer("/spec/replicas"), 1)
}

/// The field of the first GPU request or limit of a pod spec
/// (`spec.containers[0].resources.limits[nvidia.com/gpu]`), if any.
fn first_gpu(spec: &Value) -> Option<String> {
    for field in ["initContainers", "containers"] {
        for (i, c) in shape::list(spec.get(field)).iter().enumerate() {
            for kind in ["limits", "requests"] {
                let one = json!({"containers": [{"resources": {kind: c.pointer(&format!("/resources/{kind}"))}}]});
                if !shape::requests_gpu(&one) {
                    continue;
                }
                let name = c
                    .pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object)
                    .and_then(|m| m.keys().find(|k| sluice_api::resources::is_gpu(k)))
                    .cloned()
                    .unwrap_or_default();
                return Some(format!("spec.{field}[{i}].resources.{kind}[{name}]"));
            }
        }
    }
    None
}

/// Gates a queued pod (its queue label added when its namespace queues
/// it): `spec.schedulingGates` gets [`ADMISSION_GATE`] and the pod the
/// [`MANAGED_POD`] label the controller watches. A pod group's total must
/// be a count.
fn gate(obj: &DynamicObject, queue: &str, add_label: Option<&str>, d: &mut Decision) {
    if let Some(problem) = group_problem(obj) {
        d.denials.push(problem);
        return;
    }
    let gates = obj.data.pointer("/spec/schedulingGates").and_then(Value::as_array);
    if gates.is_some_and(|g| {
        g.iter()
            .any(|x| x.get("name").and_then(Value::as_str) == Some(ADMISSION_GATE))
    }) {
        return;
    }
    let at = Pointer::from_plain("/spec/schedulingGates");
    d.ops.push(match gates {
        Some(_) => PatchOp::add(&at.append(), json!({"name": ADMISSION_GATE})),
        None => PatchOp::add(&at, json!([{"name": ADMISSION_GATE}])),
    });
    let labels = Pointer::from_plain("/metadata/labels");
    let mut add = vec![(MANAGED_POD, "true".to_owned())];
    if let Some(label) = add_label {
        add.push((label, queue.to_owned()));
    }
    if obj.metadata.labels.is_none() {
        let map: serde_json::Map<String, Value> = add.into_iter().map(|(k, v)| (k.to_owned(), json!(v))).collect();
        d.ops.push(PatchOp::add(&labels, Value::Object(map)));
    } else {
        for (k, v) in add {
            d.ops.push(PatchOp::add(&labels.key(k), json!(v)));
        }
    }
    d.warnings.push(format!(
        "sluice: gated ({ADMISSION_GATE} in spec.schedulingGates): the pod waits in LocalQueue {queue:?} until Sluice admits it"
    ));
    d.fixes.push(FixKind::Suspend);
}

/// What is wrong with a pod group's labels, if anything.
fn group_problem(obj: &DynamicObject) -> Option<String> {
    let group = obj.metadata.labels.as_ref()?.get(POD_GROUP)?;
    let total = obj.metadata.annotations.as_ref().and_then(|a| a.get(POD_GROUP_TOTAL));
    match total.map(|t| t.trim().parse::<u32>()) {
        Some(Ok(n)) if n >= 1 => None,
        _ => Some(format!(
            "metadata.annotations[{POD_GROUP_TOTAL}]: a pod of group {group:?} ({POD_GROUP}) must say how many pods the group has, a whole number from 1; got {}",
            total.map_or("none".to_owned(), |t| format!("{t:?}"))
        )),
    }
}
