//! The GPU pod fixes: pure functions from a pod spec (as the API server sent
//! it) to a minimal JSON patch, one warning line per fix, and denials that
//! name the field and the reason.
//!
//! ```text
//!   pod spec JSON ──decode──▶ k8s-openapi PodSpec ──rules──▶ decisions
//!        │                                                     │
//!        └──────────── ops generated against this JSON ◀───────┘
//! ```
//!
//! The typed spec is only read; patch paths come from the JSON so `null`
//! members and unknown fields are handled exactly as sent.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Toleration};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_api::quantity;

pub use crate::config::RuntimeClass;
use crate::config::{GpuConfig, GpuKind, NodeAffinitySpec, TolerationSpec, VisibleDevicesPolicy};
use crate::patch::{PatchOp, Pointer};

/// The environment variable that selects GPUs for the NVIDIA container runtime.
pub const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// Kinds of fix, for metrics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FixKind {
    RuntimeClass,
    Toleration,
    NodeAffinity,
    GpuLimits,
    Suspend,
    QueueLabel,
}

impl FixKind {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RuntimeClass => "runtime_class",
            Self::Toleration => "toleration",
            Self::NodeAffinity => "node_affinity",
            Self::GpuLimits => "gpu_limits",
            Self::Suspend => "suspend",
            Self::QueueLabel => "queue_label",
        }
    }
}

/// What the rules decided for one pod spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Patch operations (empty when denied).
    pub ops: Vec<PatchOp>,
    /// One line per fix applied, or per `warn`-policy finding.
    pub warnings: Vec<String>,
    /// The fixes applied, one entry per patch-producing fix.
    pub fixes: Vec<FixKind>,
    /// Every reason to reject the object, each naming its field.
    pub denials: Vec<String>,
}

impl Outcome {
    pub fn is_denied(&self) -> bool {
        !self.denials.is_empty()
    }
}

/// Where the pod spec sits in the reviewed object.
#[derive(Clone, Debug)]
pub struct SpecLocation {
    /// JSON pointer of the pod spec, e.g. `/spec/template/spec`.
    pub pointer: Pointer,
    /// Field path used in messages, e.g. `spec.template.spec`.
    pub field: String,
}

impl SpecLocation {
    /// A Pod's spec.
    pub fn pod() -> Self {
        Self {
            pointer: Pointer::from_plain("/spec"),
            field: "spec".to_owned(),
        }
    }

    /// A Job's (or any workload's) pod template spec.
    pub fn template() -> Self {
        Self {
            pointer: Pointer::from_plain("/spec/template/spec"),
            field: "spec.template.spec".to_owned(),
        }
    }
}

/// A pod spec that does not decode as a Kubernetes PodSpec.
#[derive(Debug, thiserror::Error)]
#[error("{field}: not a valid pod spec: {message}")]
pub struct BadSpec {
    pub field: String,
    pub message: String,
}

/// Applies the GPU rules to one pod spec. `runtime_class` is what
/// `gpu.runtimeClassName` resolves to in this cluster
/// ([`crate::config::RuntimeClassPolicy::resolve`]).
pub fn fix_pod_spec(
    cfg: &GpuConfig,
    runtime_class: RuntimeClass<'_>,
    spec_json: &Value,
    at: &SpecLocation,
) -> Result<Outcome, BadSpec> {
    let spec = PodSpec::deserialize(spec_json).map_err(|e| BadSpec {
        field: at.field.clone(),
        message: e.to_string(),
    })?;
    let mut out = Outcome::default();
    let lists: [(&str, &[Container]); 2] = [
        ("initContainers", spec.init_containers.as_deref().unwrap_or_default()),
        ("containers", &spec.containers),
    ];

    check_visible_devices(cfg, &lists, at, &mut out);
    check_ephemeral_visible_devices(cfg, &spec, &[], at, &mut out);
    let finding_warnings = out.warnings.len();
    let requests_gpus = lists
        .iter()
        .any(|(_, cs)| cs.iter().any(|c| container_requests_gpu(cfg, c)));
    if requests_gpus {
        let kind = gpu_kind(cfg, &spec, &lists);
        fix_limits(cfg, &lists, at, &mut out);
        fix_runtime_class(runtime_class, &spec, at, &mut out);
        fix_tolerations(cfg.tolerations_for(kind), &spec, at, &mut out);
        if let Some(req) = cfg.node_affinity_for(kind) {
            fix_node_affinity(req, &spec, spec_json, at, &mut out);
        }
    }
    if out.is_denied() {
        // Nothing is changed on a denied object: keep only the findings.
        out.ops.clear();
        out.fixes.clear();
        out.warnings.truncate(finding_warnings);
    }
    Ok(out)
}

/// What kind of GPU a pod asks for: MIG slices (any `nvidia.com/mig-*`),
/// a replica of a shared GPU (its node selector names the sharing label,
/// as the engine's rule says, or it requests `nvidia.com/gpu.shared`), or
/// whole GPUs.
pub fn gpu_kind(cfg: &GpuConfig, spec: &PodSpec, lists: &[(&str, &[Container]); 2]) -> GpuKind {
    let asked: Vec<&str> = lists
        .iter()
        .flat_map(|(_, cs)| cs.iter())
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| [&r.requests, &r.limits].into_iter().flatten())
        .flat_map(|m| m.iter())
        .filter(|(name, q)| cfg.is_gpu_resource(name) && !quantity::is_zero(&q.0))
        .map(|(name, _)| name.as_str())
        .collect();
    let selector = spec.node_selector.clone().unwrap_or_default();
    if asked.iter().any(|r| sluice_api::resources::is_mig(r)) {
        GpuKind::MigSlice
    } else if asked.contains(&"nvidia.com/gpu.shared") || sluice_scheduler::sharing::asks_for_shared_gpu(&selector) {
        GpuKind::Shared
    } else {
        GpuKind::Whole
    }
}

/// Whether a container asks for a non-zero amount of a GPU resource.
pub fn container_requests_gpu(cfg: &GpuConfig, c: &Container) -> bool {
    let Some(res) = &c.resources else {
        return false;
    };
    [&res.requests, &res.limits].into_iter().flatten().any(|m| {
        m.iter()
            .any(|(name, q)| cfg.is_gpu_resource(name) && !quantity::is_zero(&q.0))
    })
}

fn container_field(at: &SpecLocation, list: &str, i: usize, c: &Container) -> String {
    format!("{}.{list}[{i}] ({:?})", at.field, c.name)
}

/// Whether an `env` list sets `NVIDIA_VISIBLE_DEVICES` to something that can
/// expose a GPU. Every entry with that name counts: the API server keeps
/// duplicates and the kubelet uses the last one, so checking only the first
/// would let a harmless first entry hide a harmful second. `void`, `none`
/// and the empty string expose no GPU; a `valueFrom` can say anything.
pub fn sets_visible_devices(env: &[EnvVar]) -> bool {
    env.iter().filter(|e| e.name == VISIBLE_DEVICES).any(|var| {
        let harmless =
            var.value_from.is_none() && matches!(var.value.as_deref().map_or("", str::trim), "" | "void" | "none");
        !harmless
    })
}

fn visible_devices_finding(cfg: &GpuConfig, msg: String, out: &mut Outcome) {
    match cfg.visible_devices_policy {
        VisibleDevicesPolicy::Deny => out.denials.push(msg),
        VisibleDevicesPolicy::Warn => out.warnings.push(msg),
        VisibleDevicesPolicy::Allow => {}
    }
}

fn check_visible_devices(cfg: &GpuConfig, lists: &[(&str, &[Container]); 2], at: &SpecLocation, out: &mut Outcome) {
    if cfg.visible_devices_policy == VisibleDevicesPolicy::Allow {
        return;
    }
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            if !sets_visible_devices(c.env.as_deref().unwrap_or_default()) || container_requests_gpu(cfg, c) {
                continue;
            }
            let msg = format!(
                "{}.env[{VISIBLE_DEVICES}]: set without requesting a GPU ({}): bypasses device allocation and can reach other pods' GPUs; request a GPU in limits or remove it",
                container_field(at, list, i, c),
                gpu_names(cfg)
            );
            visible_devices_finding(cfg, msg, out);
        }
    }
}

/// The `NVIDIA_VISIBLE_DEVICES` check for ephemeral containers added to a
/// running pod (`pods/ephemeralcontainers` UPDATE): they cannot request
/// resources, so any value that exposes a GPU is a finding. Containers
/// named in `existing` were there before and are not checked again.
pub fn check_ephemeral_containers(
    cfg: &GpuConfig,
    spec_json: &Value,
    existing: &[String],
    at: &SpecLocation,
) -> Result<Outcome, BadSpec> {
    let spec = PodSpec::deserialize(spec_json).map_err(|e| BadSpec {
        field: at.field.clone(),
        message: e.to_string(),
    })?;
    let mut out = Outcome::default();
    check_ephemeral_visible_devices(cfg, &spec, existing, at, &mut out);
    Ok(out)
}

fn check_ephemeral_visible_devices(
    cfg: &GpuConfig,
    spec: &PodSpec,
    existing: &[String],
    at: &SpecLocation,
    out: &mut Outcome,
) {
    if cfg.visible_devices_policy == VisibleDevicesPolicy::Allow {
        return;
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        if existing.contains(&c.name) || !sets_visible_devices(c.env.as_deref().unwrap_or_default()) {
            continue;
        }
        let msg = format!(
            "{}.ephemeralContainers[{i}] ({:?}).env[{VISIBLE_DEVICES}]: set in an ephemeral container, which cannot request a GPU ({}): bypasses device allocation and can reach the node's GPUs; remove it",
            at.field,
            c.name,
            gpu_names(cfg)
        );
        visible_devices_finding(cfg, msg, out);
    }
}

fn gpu_names(cfg: &GpuConfig) -> String {
    cfg.resource_names
        .iter()
        .chain(&cfg.resource_patterns)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn fix_limits(cfg: &GpuConfig, lists: &[(&str, &[Container]); 2], at: &SpecLocation, out: &mut Outcome) {
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let Some(res) = &c.resources else { continue };
            let Some(requests) = &res.requests else {
                continue;
            };
            let mut missing = BTreeMap::new();
            for (name, q) in requests.iter().filter(|(n, _)| cfg.is_gpu_resource(n)) {
                match res.limits.as_ref().and_then(|l| l.get(name)) {
                    None => {
                        missing.insert(name.clone(), q.0.clone());
                    }
                    Some(limit) if !quantity::same_amount(&q.0, &limit.0) => {
                        out.denials.push(format!(
                            "{}.resources: {name} requests {} differ from limits {}; GPUs are extended resources, so requests must equal limits (or be omitted)",
                            container_field(at, list, i, c),
                            q.0,
                            limit.0
                        ));
                    }
                    Some(_) => {}
                }
            }
            if missing.is_empty() || !cfg.copy_requests_to_limits {
                continue;
            }
            let limits_ptr = at.pointer.key(list).index(i).key("resources").key("limits");
            for (name, q) in &missing {
                out.warnings.push(format!(
                    "sluice: copied {name}={q} from requests to limits of {} (GPUs must be set in limits)",
                    container_field(at, list, i, c)
                ));
            }
            if res.limits.is_none() {
                let map: Map<String, Value> = missing.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
                out.ops.push(PatchOp::add(&limits_ptr, Value::Object(map)));
            } else {
                for (name, q) in missing {
                    out.ops.push(PatchOp::add(&limits_ptr.key(&name), Value::String(q)));
                }
            }
            out.fixes.push(FixKind::GpuLimits);
        }
    }
}

fn fix_runtime_class(runtime_class: RuntimeClass<'_>, spec: &PodSpec, at: &SpecLocation, out: &mut Outcome) {
    if spec.runtime_class_name.is_some() {
        return;
    }
    match runtime_class {
        RuntimeClass::Off => {}
        RuntimeClass::Missing(name) => out.warnings.push(format!(
            "sluice: {}.runtimeClassName left unset: RuntimeClass {name:?} (gpu.runtimeClassName) does not exist in the cluster",
            at.field
        )),
        RuntimeClass::Set(name) => {
            out.ops.push(PatchOp::add(
                &at.pointer.key("runtimeClassName"),
                Value::String(name.to_owned()),
            ));
            out.warnings.push(format!(
                "sluice: set {}.runtimeClassName to {name:?} (pod requests GPUs)",
                at.field
            ));
            out.fixes.push(FixKind::RuntimeClass);
        }
    }
}

/// Whether an existing toleration tolerates every taint the wanted one
/// tolerates (Kubernetes `ToleratesTaint` semantics, applied to sets).
pub fn toleration_covers(existing: &Toleration, wanted: &TolerationSpec) -> bool {
    let e_key = existing.key.as_deref().unwrap_or("");
    let e_op = match existing.operator.as_deref().unwrap_or("") {
        "" => "Equal",
        op => op,
    };
    let e_value = existing.value.as_deref().unwrap_or("");
    let e_effect = existing.effect.as_deref().unwrap_or("");
    let w_op = if wanted.operator.is_empty() {
        "Equal"
    } else {
        wanted.operator.as_str()
    };

    let effect_ok = e_effect.is_empty() || e_effect == wanted.effect;
    let key_ok = if e_key.is_empty() {
        e_op == "Exists"
    } else {
        e_key == wanted.key
    };
    let value_ok = match e_op {
        "Exists" => true,
        "Equal" => w_op == "Equal" && e_value == wanted.value,
        _ => false,
    };
    // tolerationSeconds only bounds NoExecute taints.
    let may_be_no_execute = wanted.effect.is_empty() || wanted.effect == "NoExecute";
    let seconds_ok = !may_be_no_execute
        || match (existing.toleration_seconds, wanted.toleration_seconds) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(e), Some(w)) => e >= w,
        };
    effect_ok && key_ok && value_ok && seconds_ok
}

fn toleration_json(t: &TolerationSpec) -> Value {
    let mut m = Map::new();
    if !t.key.is_empty() {
        m.insert("key".to_owned(), json!(t.key));
    }
    if !t.operator.is_empty() {
        m.insert("operator".to_owned(), json!(t.operator));
    }
    if !t.value.is_empty() {
        m.insert("value".to_owned(), json!(t.value));
    }
    if !t.effect.is_empty() {
        m.insert("effect".to_owned(), json!(t.effect));
    }
    if let Some(s) = t.toleration_seconds {
        m.insert("tolerationSeconds".to_owned(), json!(s));
    }
    Value::Object(m)
}

fn describe_toleration(t: &TolerationSpec) -> String {
    let op = if t.operator.is_empty() { "Equal" } else { &t.operator };
    let mut s = format!("{} {op}", if t.key.is_empty() { "*" } else { &t.key });
    if !t.value.is_empty() {
        s.push_str(&format!(" {}", t.value));
    }
    if !t.effect.is_empty() {
        s.push_str(&format!(" {}", t.effect));
    }
    s
}

fn fix_tolerations(tolerations: &[TolerationSpec], spec: &PodSpec, at: &SpecLocation, out: &mut Outcome) {
    let existing = spec.tolerations.as_deref().unwrap_or_default();
    let mut missing: Vec<&TolerationSpec> = Vec::new();
    for wanted in tolerations {
        let covered = existing.iter().any(|e| toleration_covers(e, wanted))
            || missing.iter().any(|m| toleration_covers(&to_k8s(m), wanted));
        if !covered {
            missing.push(wanted);
        }
    }
    if missing.is_empty() {
        return;
    }
    let ptr = at.pointer.key("tolerations");
    if spec.tolerations.is_none() {
        out.ops.push(PatchOp::add(
            &ptr,
            Value::Array(missing.iter().map(|t| toleration_json(t)).collect()),
        ));
    } else {
        for t in &missing {
            out.ops.push(PatchOp::add(&ptr.append(), toleration_json(t)));
        }
    }
    for t in &missing {
        out.warnings.push(format!(
            "sluice: added toleration {} to {}.tolerations (pod requests GPUs)",
            describe_toleration(t),
            at.field
        ));
        out.fixes.push(FixKind::Toleration);
    }
}

fn to_k8s(t: &TolerationSpec) -> Toleration {
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Toleration {
        key: opt(&t.key),
        operator: opt(&t.operator),
        value: opt(&t.value),
        effect: opt(&t.effect),
        toleration_seconds: t.toleration_seconds,
    }
}

/// Whether a node selector requirement already restricts a term to (a subset
/// of) the nodes the wanted requirement selects.
pub fn requirement_implies(have: &NodeSelectorRequirement, want: &NodeAffinitySpec) -> bool {
    if have.key != want.key {
        return false;
    }
    let have_values = have.values.as_deref().unwrap_or_default();
    let same_set = have_values.len() == want.values.len()
        && have_values.iter().all(|v| want.values.contains(v))
        && want.values.iter().all(|v| have_values.contains(v));
    if have.operator == want.operator && same_set {
        return true;
    }
    match want.operator.as_str() {
        "In" => have.operator == "In" && !have_values.is_empty() && have_values.iter().all(|v| want.values.contains(v)),
        "Exists" => matches!(have.operator.as_str(), "In" | "Exists" | "Gt" | "Lt"),
        _ => false,
    }
}

fn requirement_json(r: &NodeAffinitySpec) -> Value {
    let mut m = Map::new();
    m.insert("key".to_owned(), json!(r.key));
    m.insert("operator".to_owned(), json!(r.operator));
    if !r.values.is_empty() {
        m.insert("values".to_owned(), json!(r.values));
    }
    Value::Object(m)
}

/// Requires the GPU node affinity `want` of a pod spec: added where the
/// spec has no required node affinity (or no terms), else ANDed into every
/// term that does not imply it already.
fn fix_node_affinity(want: &NodeAffinitySpec, spec: &PodSpec, spec_json: &Value, at: &SpecLocation, out: &mut Outcome) {
    let describe = format!("{} {} [{}]", want.key, want.operator, want.values.join(", "));
    let field = format!(
        "{}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        at.field
    );
    let terms_ptr = at
        .pointer
        .key("affinity")
        .key("nodeAffinity")
        .key("requiredDuringSchedulingIgnoredDuringExecution")
        .key("nodeSelectorTerms");
    let terms = match required_terms(want, spec, spec_json, at) {
        Ok(terms) => terms,
        Err(op) => {
            out.ops.push(op);
            out.warnings.push(format!(
                "sluice: required node affinity {describe} added as {field} (pod requests GPUs)"
            ));
            out.fixes.push(FixKind::NodeAffinity);
            return;
        }
    };
    let anded = and_into_terms(want, terms, &terms_ptr, &mut out.ops);
    if anded > 0 {
        out.warnings.push(format!(
            "sluice: required node affinity {describe} ANDed into {anded} of {} terms of {field}.nodeSelectorTerms (pod requests GPUs)",
            terms.len()
        ));
        out.fixes.push(FixKind::NodeAffinity);
    }
}

/// The spec's required node selector terms, or (`Err`) the patch that adds
/// the one term requiring `want` where the affinity, the node affinity,
/// its required part or its terms are missing.
fn required_terms<'a>(
    want: &NodeAffinitySpec,
    spec: &'a PodSpec,
    spec_json: &Value,
    at: &SpecLocation,
) -> Result<&'a [NodeSelectorTerm], PatchOp> {
    let term = json!({ "matchExpressions": [requirement_json(want)] });
    let required = json!({ "nodeSelectorTerms": [term.clone()] });
    let aff_ptr = at.pointer.key("affinity");
    let na_ptr = aff_ptr.key("nodeAffinity");
    let req_ptr = na_ptr.key("requiredDuringSchedulingIgnoredDuringExecution");
    let terms_ptr = req_ptr.key("nodeSelectorTerms");
    let Some(affinity) = &spec.affinity else {
        return Err(PatchOp::add(
            &aff_ptr,
            json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": required } }),
        ));
    };
    let Some(node_affinity) = &affinity.node_affinity else {
        return Err(PatchOp::add(
            &na_ptr,
            json!({ "requiredDuringSchedulingIgnoredDuringExecution": required }),
        ));
    };
    let Some(selector) = &node_affinity.required_during_scheduling_ignored_during_execution else {
        return Err(PatchOp::add(&req_ptr, required));
    };
    if !selector.node_selector_terms.is_empty() {
        return Ok(&selector.node_selector_terms);
    }
    // A JSON `null` or `[]` list: give it the one term.
    let terms_json =
        spec_json.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms");
    Err(if matches!(terms_json, Some(Value::Array(_))) {
        PatchOp::add(&terms_ptr.append(), term)
    } else {
        PatchOp::add(&terms_ptr, json!([term]))
    })
}

/// `want` ANDed into every term that does not imply it already (an empty
/// term matches no node: ANDing into it changes nothing). How many terms
/// it was ANDed into.
fn and_into_terms(
    want: &NodeAffinitySpec,
    terms: &[NodeSelectorTerm],
    terms_ptr: &Pointer,
    ops: &mut Vec<PatchOp>,
) -> usize {
    let req = requirement_json(want);
    let mut anded = 0usize;
    for (i, t) in terms.iter().enumerate() {
        let exprs = t.match_expressions.as_deref().unwrap_or_default();
        let fields = t.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            continue;
        }
        if exprs.iter().any(|e| requirement_implies(e, want)) {
            continue;
        }
        let exprs_ptr = terms_ptr.index(i).key("matchExpressions");
        if t.match_expressions.is_none() {
            ops.push(PatchOp::add(&exprs_ptr, json!([req.clone()])));
        } else {
            ops.push(PatchOp::add(&exprs_ptr.append(), req.clone()));
        }
        anded += 1;
    }
    anded
}

#[cfg(test)]
mod tests;
