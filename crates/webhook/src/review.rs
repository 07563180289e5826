//! AdmissionReview in, AdmissionReview out: decoding, dispatch by endpoint,
//! and the rules (those of the queued kinds in `jobs`). No I/O: the only outside knowledge comes from a
//! [`ClusterView`] (an informer cache).
//!
//! dryRun requests are handled exactly like real ones: the webhook has no
//! side effects (it declares `sideEffects: None`), so there is nothing to skip.

use sluice_kinds::JobKind;
use std::sync::Arc;

use base64::Engine as _;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, Status, TypeMeta};
use serde::Serialize;
use serde_json::Value;

use crate::cache::ClusterView;
use crate::config::WebhookConfig;
use crate::gpu::{self, FixKind, SpecLocation};
use crate::patch::{self, PatchOp};
use crate::validate::{self, SluiceKind};

/// The AdmissionReview version this webhook speaks.
pub const ADMISSION_V1: &str = "admission.k8s.io/v1";

/// The webhook's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// Pods: the GPU fixes, and which GPU pods may run outside a Workload
    /// (`pods`).
    MutatePods,
    /// ReplicaSets: a GPU ReplicaSet that is not a Deployment's where GPUs
    /// are queued (`pods`).
    ValidateReplicaSets,
    /// Pods the webhook gated: their gate and label stay until Sluice
    /// admits them (`pods`).
    ValidateGatedPods,
    /// Objects of a queued kind with the queue label: CREATE (and, for a
    /// held serving object, UPDATE).
    MutateQueued(JobKind),
    /// Objects of a queued kind without the queue label, from namespaces
    /// that opted in to default queueing: the API server only calls this
    /// path for them (namespaceSelector), so the opt-in is trusted without
    /// the cache.
    MutateQueuedDefaultQueue(JobKind),
    /// Objects of a queued kind with the queue label: UPDATE.
    ValidateQueued(JobKind),
    /// Objects of a queued kind without the queue label, from namespaces
    /// that opted in to default queueing: UPDATE.
    ValidateQueuedDefaultQueue(JobKind),
    /// A serving kind's `scale` subresource (`kubectl scale`, a
    /// HorizontalPodAutoscaler): UPDATE.
    ValidateScale(JobKind),
    Validate(SluiceKind),
}

impl Endpoint {
    /// Every endpoint: Pods', ReplicaSets', each queued kind's four (and a
    /// serving kind's scale), and the Sluice kinds' validation.
    pub fn all() -> Vec<Endpoint> {
        let queued = JobKind::ALL.into_iter().flat_map(|k| {
            [
                Endpoint::MutateQueued(k),
                Endpoint::MutateQueuedDefaultQueue(k),
                Endpoint::ValidateQueued(k),
                Endpoint::ValidateQueuedDefaultQueue(k),
            ]
        });
        let scales = JobKind::ALL
            .into_iter()
            .filter(|k| k.integration().hold() == sluice_kinds::Hold::Replicas)
            .map(Endpoint::ValidateScale);
        [
            Endpoint::MutatePods,
            Endpoint::ValidateReplicaSets,
            Endpoint::ValidateGatedPods,
        ]
        .into_iter()
        .chain(queued)
        .chain(scales)
        .chain(SluiceKind::ALL.map(Endpoint::Validate))
        .collect()
    }

    /// The URL path the API server posts to: `/mutate/<plural>`,
    /// `/mutate/<plural>/default-queue`, `/validate/<plural>`,
    /// `/validate/<plural>/default-queue`, `/validate/<plural>/scale` for
    /// a queued kind.
    pub fn path(self) -> String {
        match self {
            Self::MutatePods => "/mutate/pods".to_owned(),
            Self::ValidateReplicaSets => "/validate/replicasets".to_owned(),
            Self::ValidateGatedPods => "/validate/pods".to_owned(),
            Self::MutateQueued(k) => format!("/mutate/{}", k.plural()),
            Self::MutateQueuedDefaultQueue(k) => format!("/mutate/{}/default-queue", k.plural()),
            Self::ValidateQueued(k) => format!("/validate/{}", k.plural()),
            Self::ValidateQueuedDefaultQueue(k) => format!("/validate/{}/default-queue", k.plural()),
            Self::ValidateScale(k) => format!("/validate/{}/scale", k.plural()),
            Self::Validate(k) => k.path().to_owned(),
        }
    }

    pub fn from_path(path: &str) -> Option<Self> {
        Self::all().into_iter().find(|e| e.path() == path)
    }

    /// (group, version, kind) this endpoint handles.
    pub fn expected_kind(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::MutatePods | Self::ValidateGatedPods => ("", "v1", "Pod"),
            Self::ValidateReplicaSets => ("apps", "v1", "ReplicaSet"),
            Self::MutateQueued(k)
            | Self::MutateQueuedDefaultQueue(k)
            | Self::ValidateQueued(k)
            | Self::ValidateQueuedDefaultQueue(k) => k.gvk(),
            Self::ValidateScale(_) => ("autoscaling", "v1", "Scale"),
            Self::Validate(k) => (validate::GROUP, validate::VERSION, k.kind()),
        }
    }
}

/// How a review ended, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Denied.
    Denied,
    /// Not a kind or version this endpoint handles: allowed with a warning.
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Patched => "patched",
            Self::Denied => "denied",
            Self::Skipped => "skipped",
        }
    }
}

/// A body that is not an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("malformed AdmissionReview: {0}")]
    Malformed(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("encoding the response: {0}")]
    Encode(String),
}

/// A finished review, ready to send.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The AdmissionReview JSON.
    pub body: Vec<u8>,
    pub verdict: Verdict,
    /// Fixes the patch applies.
    pub fixes: Vec<FixKind>,
    /// The response as kube's type (tests, logs).
    pub response: AdmissionResponse,
}

/// What the rules decided.
#[derive(Debug, Default)]
struct Decision {
    ops: Vec<PatchOp>,
    warnings: Vec<String>,
    denials: Vec<String>,
    fixes: Vec<FixKind>,
    skipped: bool,
}

impl Decision {
    fn absorb(&mut self, out: gpu::Outcome) {
        self.ops.extend(out.ops);
        self.warnings.extend(out.warnings);
        self.denials.extend(out.denials);
        self.fixes.extend(out.fixes);
    }

    /// Absorbs the GPU rules' outcome; each denial also says how a pod that
    /// legitimately needs it (a GPU system pod) is exempted, and, with
    /// `note`, why an exemption the object claimed does not hold.
    fn absorb_gpu(&mut self, mut out: gpu::Outcome, cfg: &WebhookConfig, subject: GpuSubject<'_>) {
        use sluice_api::labels::{ALLOW_GPU_FIXES_SKIP, GPU_FIXES, GPU_FIXES_SKIP};
        let (what, daemon_set, note) = match subject {
            GpuSubject::Pod { note } => ("the pod", " run it from a DaemonSet or", note),
            GpuSubject::Template(what) => (what, "", None),
        };
        let note = note.map(|n| format!("{n}; ")).unwrap_or_default();
        for denial in &mut out.denials {
            denial.push_str(&format!(
                " ({note}a GPU system pod is exempted: run it in an excluded namespace ({}), or, in a namespace a cluster admin labelled {ALLOW_GPU_FIXES_SKIP}=true,{daemon_set} label {what} {GPU_FIXES}={GPU_FIXES_SKIP})",
                cfg.excluded_namespaces.join(", "),
            ));
        }
        self.absorb(out);
    }
}

/// What the GPU rules looked at, for the exemption hint of a denial.
#[derive(Clone, Copy, Debug)]
enum GpuSubject<'a> {
    /// A pod; `note` says why an exemption it claimed does not hold.
    Pod { note: Option<&'a str> },
    /// A queued object's pod template, described.
    Template(&'a str),
}

/// The review handler: configuration plus a view of the cluster.
#[derive(Clone)]
pub struct Reviewer {
    cfg: Arc<WebhookConfig>,
    view: Arc<dyn ClusterView>,
    /// Queued bare GPU pods are gated (`spec.schedulingGates`) rather than
    /// refused ([`crate::config::PodHolding`], resolved at start).
    gates: bool,
}

impl Reviewer {
    /// A reviewer for a server without pod scheduling gates (unless the
    /// configuration says `pods: gate`).
    pub fn new(cfg: WebhookConfig, view: Arc<dyn ClusterView>) -> Self {
        let gates = cfg.pods.gates(false);
        Self {
            cfg: Arc::new(cfg),
            view,
            gates,
        }
    }

    /// The same, for a server that has (`true`) or lacks pod scheduling
    /// gates.
    pub fn with_server_gates(mut self, server_has_gates: bool) -> Self {
        self.gates = self.cfg.pods.gates(server_has_gates);
        self
    }

    /// Whether queued bare GPU pods are gated (else refused).
    pub fn gates_pods(&self) -> bool {
        self.gates
    }

    pub fn config(&self) -> &WebhookConfig {
        &self.cfg
    }

    /// Reviews one request body posted to `endpoint`.
    pub fn handle(&self, endpoint: Endpoint, body: &[u8]) -> Result<Reply, ReviewError> {
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
        let types = review.types.clone();
        let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|_| ReviewError::NoRequest)?;
        let decision = if types.api_version != ADMISSION_V1 || types.kind != "AdmissionReview" {
            skipped(format!(
                "sluice: {} does not handle {} {}; allowed unchanged",
                endpoint.path(),
                types.api_version,
                types.kind
            ))
        } else {
            self.decide(endpoint, &request)
        };
        finish(&types, &request, decision)
    }

    fn decide(&self, endpoint: Endpoint, req: &AdmissionRequest<DynamicObject>) -> Decision {
        let (group, version, kind) = endpoint.expected_kind();
        if req.kind.group != group || req.kind.version != version || req.kind.kind != kind {
            return skipped(format!(
                "sluice: {} handles {}, not {}; allowed unchanged",
                endpoint.path(),
                gvk_string(group, version, kind),
                gvk_string(&req.kind.group, &req.kind.version, &req.kind.kind)
            ));
        }
        match endpoint {
            Endpoint::MutatePods => self.mutate_pod(req),
            Endpoint::ValidateReplicaSets => self.validate_replica_set(req),
            Endpoint::ValidateGatedPods => self.validate_gated_pod(req),
            Endpoint::MutateQueued(k) => self.mutate_queued(req, false, k),
            Endpoint::MutateQueuedDefaultQueue(k) => self.mutate_queued(req, true, k),
            Endpoint::ValidateQueued(k) => self.validate_queued(req, false, k),
            Endpoint::ValidateQueuedDefaultQueue(k) => self.validate_queued(req, true, k),
            Endpoint::ValidateScale(k) => self.validate_scale(req, k),
            Endpoint::Validate(k) => {
                let mut d = Decision::default();
                match validate::validate_sluice(k, req, &self.cfg, self.view.as_ref()) {
                    Ok(found) => {
                        d.denials = found.denials;
                        d.warnings = found.warnings;
                    }
                    Err(e) => d.denials.push(e),
                }
                d
            }
        }
    }

    fn excluded(&self, req: &AdmissionRequest<DynamicObject>) -> bool {
        req.namespace.as_deref().is_some_and(|ns| self.cfg.is_excluded(ns))
    }

    /// Whether a pod with these labels opted out of the GPU rules
    /// (`sluice.dev/gpu-fixes: skip`) in a namespace that allows it
    /// (`sluice.dev/allow-gpu-fixes-skip: "true"`). The namespace's labels
    /// come from the cache; an unknown namespace allows nothing.
    fn gpu_fixes_skipped(&self, namespace: &str, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
        use sluice_api::labels::{GPU_FIXES, GPU_FIXES_SKIP};
        labels
            .and_then(|l| l.get(GPU_FIXES))
            .is_some_and(|v| v == GPU_FIXES_SKIP)
            && owners::namespace_trusted(self.view.as_ref(), namespace)
    }

    /// What `gpu.runtimeClassName` resolves to in this cluster now.
    fn runtime_class(&self) -> gpu::RuntimeClass<'_> {
        self.cfg
            .gpu
            .runtime_class_name
            .resolve(|name| self.view.runtime_class_exists(name))
    }

    fn mutate_pod(&self, req: &AdmissionRequest<DynamicObject>) -> Decision {
        let mut d = Decision::default();
        if self.excluded(req) {
            return d;
        }
        // Why a DaemonSet owner the pod names does not exempt it.
        let mut note = None;
        if let Some(obj) = &req.object {
            let namespace = req.namespace.as_deref().unwrap_or_default();
            if self.gpu_fixes_skipped(namespace, obj.metadata.labels.as_ref()) {
                return d;
            }
            // A verified DaemonSet's pods in a trusted namespace are the
            // node's own agents (device plugins, exporters): they see every
            // GPU without requesting one.
            match owners::daemon_set_pod(self.view.as_ref(), namespace, &obj.metadata) {
                owners::DaemonSetPod::Exempt => return d,
                owners::DaemonSetPod::NotExempt(why) => note = Some(why),
                owners::DaemonSetPod::NotClaimed => {}
            }
        }
        let subject = GpuSubject::Pod { note: note.as_deref() };
        if req.operation == Operation::Update && req.sub_resource.as_deref() == Some("ephemeralcontainers") {
            return self.check_ephemeral(req, subject);
        }
        if req.operation != Operation::Create {
            return d;
        }
        let Some(obj) = &req.object else {
            d.denials.push("object: missing from the CREATE request".to_owned());
            return d;
        };
        let Some(spec) = obj.data.get("spec") else {
            d.denials.push("spec: missing".to_owned());
            return d;
        };
        match gpu::fix_pod_spec(&self.cfg.gpu, self.runtime_class(), spec, &SpecLocation::pod()) {
            Ok(out) => d.absorb_gpu(out, &self.cfg, subject),
            Err(e) => d.denials.push(e.to_string()),
        }
        self.guard_pod(req, obj, &mut d);
        d
    }

    /// `opted_in`: the request came through the default-queue entry, whose
    /// namespaceSelector already matched `sluice.dev/default-queue: enabled`;
    /// otherwise the opt-in is read from the cache.
    /// `kubectl debug` adds ephemeral containers through the
    /// `pods/ephemeralcontainers` subresource: check the new ones for the
    /// `NVIDIA_VISIBLE_DEVICES` escape (nothing is patched).
    fn check_ephemeral(&self, req: &AdmissionRequest<DynamicObject>, subject: GpuSubject<'_>) -> Decision {
        let mut d = Decision::default();
        let Some(obj) = &req.object else {
            d.denials.push("object: missing from the UPDATE request".to_owned());
            return d;
        };
        let Some(spec) = obj.data.get("spec") else {
            d.denials.push("spec: missing".to_owned());
            return d;
        };
        let existing: Vec<String> = req
            .old_object
            .as_ref()
            .and_then(|o| o.data.pointer("/spec/ephemeralContainers"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        match gpu::check_ephemeral_containers(&self.cfg.gpu, spec, &existing, &SpecLocation::pod()) {
            Ok(out) => d.absorb_gpu(out, &self.cfg, subject),
            Err(e) => d.denials.push(e.to_string()),
        }
        d
    }
}

fn gvk_string(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        format!("{version} {kind}")
    } else {
        format!("{group}/{version} {kind}")
    }
}

fn skipped(warning: String) -> Decision {
    Decision {
        warnings: vec![warning],
        skipped: true,
        ..Decision::default()
    }
}

fn finish(types: &TypeMeta, req: &AdmissionRequest<DynamicObject>, d: Decision) -> Result<Reply, ReviewError> {
    let mut resp = AdmissionResponse::from(req);
    let verdict;
    let mut fixes = Vec::new();
    if !d.denials.is_empty() {
        resp.allowed = false;
        resp.result = Status::failure(&d.denials.join("; "), "Forbidden").with_code(403);
        verdict = Verdict::Denied;
    } else if !d.ops.is_empty() {
        let p = patch::to_json_patch(&d.ops).map_err(|e| ReviewError::Encode(e.to_string()))?;
        resp = resp.with_patch(p).map_err(|e| ReviewError::Encode(e.to_string()))?;
        fixes = d.fixes;
        verdict = Verdict::Patched;
    } else {
        verdict = if d.skipped { Verdict::Skipped } else { Verdict::Allowed };
    }
    if !d.warnings.is_empty() {
        resp.warnings = Some(d.warnings);
    }
    let body = encode(types, &resp)?;
    Ok(Reply {
        body,
        verdict,
        fixes,
        response: resp,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    api_version: &'a str,
    kind: &'a str,
    response: WireResponse<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<WireStatus<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<&'a [String]>,
}

#[derive(Serialize)]
struct WireStatus<'a> {
    code: u16,
    reason: &'a str,
    message: &'a str,
}

/// Serialises the response the way the API server's own clients do: the
/// patch base64-encoded (kube's `AdmissionResponse` would write a byte
/// array, which Go accepts but no recorded client sends).
fn encode(types: &TypeMeta, resp: &AdmissionResponse) -> Result<Vec<u8>, ReviewError> {
    let api_version = if types.api_version.is_empty() {
        ADMISSION_V1
    } else {
        &types.api_version
    };
    let wire = WireReview {
        api_version,
        kind: "AdmissionReview",
        response: WireResponse {
            uid: &resp.uid,
            allowed: resp.allowed,
            status: (!resp.allowed).then(|| WireStatus {
                code: resp.result.code,
                reason: &resp.result.reason,
                message: &resp.result.message,
            }),
            patch_type: resp.patch.as_ref().map(|_| "JSONPatch"),
            patch: resp
                .patch
                .as_ref()
                .map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
            warnings: resp.warnings.as_deref(),
        },
    };
    serde_json::to_vec(&wire).map_err(|e| ReviewError::Encode(e.to_string()))
}

pub mod jobs;
pub mod owners;
pub mod pods;
pub mod scale;
pub mod shape;

#[cfg(test)]
mod tests;
