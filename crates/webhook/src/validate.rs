//! Validation of Sluice's own kinds: the api crate's `validate()` (the rule
//! of record, since CEL rules may be dropped by the API server) plus the
//! update rules that need the old object.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_api::{ClusterQueue, LocalQueue, ResourceFlavor, Validate, Workload, WorkloadPriorityClass};

use crate::config::WebhookConfig;

/// The API group of Sluice's kinds.
pub const GROUP: &str = "sluice.dev";
/// Their version.
pub const VERSION: &str = "v1alpha1";

/// Sluice's kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SluiceKind {
    ClusterQueue,
    LocalQueue,
    ResourceFlavor,
    WorkloadPriorityClass,
    Workload,
}

impl SluiceKind {
    pub fn kind(self) -> &'static str {
        match self {
            Self::ClusterQueue => "ClusterQueue",
            Self::LocalQueue => "LocalQueue",
            Self::ResourceFlavor => "ResourceFlavor",
            Self::WorkloadPriorityClass => "WorkloadPriorityClass",
            Self::Workload => "Workload",
        }
    }

    /// The plural resource name.
    pub fn plural(self) -> &'static str {
        match self {
            Self::ClusterQueue => "clusterqueues",
            Self::LocalQueue => "localqueues",
            Self::ResourceFlavor => "resourceflavors",
            Self::WorkloadPriorityClass => "workloadpriorityclasses",
            Self::Workload => "workloads",
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Self::ClusterQueue => "/validate/clusterqueues",
            Self::LocalQueue => "/validate/localqueues",
            Self::ResourceFlavor => "/validate/resourceflavors",
            Self::WorkloadPriorityClass => "/validate/workloadpriorityclasses",
            Self::Workload => "/validate/workloads",
        }
    }

    pub fn namespaced(self) -> bool {
        matches!(self, Self::LocalQueue | Self::Workload)
    }
}

/// Decodes the request's objects as `K`.
fn decode<K: DeserializeOwned>(obj: &DynamicObject, which: &str, kind: SluiceKind) -> Result<K, String> {
    let value = serde_json::to_value(obj).map_err(|e| format!("{which}: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("{which}: not a valid {GROUP}/{VERSION} {}: {e}", kind.kind()))
}

/// The object's fields other than metadata (which `data` never holds) and
/// status: what a user writes.
fn without_status(data: &Value) -> Value {
    match data {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "status")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every reason to deny a CREATE or UPDATE of a Sluice object, each naming
/// its field. `Err` when the object does not decode.
pub fn validate_sluice(
    kind: SluiceKind,
    req: &AdmissionRequest<DynamicObject>,
    cfg: &WebhookConfig,
) -> Result<Vec<String>, String> {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(Vec::new());
    }
    let Some(obj) = &req.object else {
        return Err("object: missing from the request".to_owned());
    };
    let old = if req.operation == Operation::Update {
        req.old_object.as_ref()
    } else {
        None
    };
    // validate() checks what the user wrote. It runs on CREATE and on an
    // UPDATE that changes it; not on writes to the status subresource, not
    // when only metadata or status changed (finalizer removal, labels), and
    // not once the object is being deleted: a stored object that a newer
    // rule (or a newer schema) rejects must still be able to go away.
    let status_only = req.sub_resource.as_deref() == Some("status");
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let written_changed = old.is_none_or(|o| without_status(&o.data) != without_status(&obj.data));
    let run_validate = !status_only && !deleting && written_changed;
    let mut denials = Vec::new();
    match kind {
        SluiceKind::ClusterQueue => {
            if run_validate {
                let new: ClusterQueue = decode(obj, "object", kind)?;
                denials.extend(new.validate().iter().map(ToString::to_string));
            }
        }
        SluiceKind::ResourceFlavor => {
            if run_validate {
                let new: ResourceFlavor = decode(obj, "object", kind)?;
                denials.extend(new.validate().iter().map(ToString::to_string));
            }
        }
        SluiceKind::WorkloadPriorityClass => {
            if run_validate {
                let new: WorkloadPriorityClass = decode(obj, "object", kind)?;
                denials.extend(new.validate().iter().map(ToString::to_string));
            }
        }
        SluiceKind::LocalQueue => {
            if run_validate {
                let new: LocalQueue = decode(obj, "object", kind)?;
                denials.extend(new.validate().iter().map(ToString::to_string));
            }
            // Compared as JSON: an old object that no longer decodes must
            // not block the update.
            if let Some(old) = old {
                let field = |o: &DynamicObject| o.data.pointer("/spec/clusterQueue").cloned().unwrap_or(Value::Null);
                let (was, now) = (field(old), field(obj));
                if was != now {
                    denials.push(format!(
                        "spec.clusterQueue: is immutable (was {was}, now {now}); delete and recreate the LocalQueue to point it elsewhere"
                    ));
                }
            }
        }
        SluiceKind::Workload => {
            if run_validate {
                let new: Workload = decode(obj, "object", kind)?;
                denials.extend(new.validate().iter().map(ToString::to_string));
            }
            // Any change of the admission (set, changed or cleared) admits a
            // Workload past quota or takes it away: only the controller may.
            // Compared as JSON so an old object that no longer decodes
            // cannot block the check.
            let admission = |o: &DynamicObject| o.data.pointer("/status/admission").filter(|v| !v.is_null()).cloned();
            let before = old.and_then(admission);
            let after = admission(obj);
            let user = req.user_info.username.as_deref().unwrap_or("");
            if before != after && !cfg.is_admission_writer(user) {
                let what = match (&before, &after) {
                    (None, _) => "cannot be set",
                    (_, None) => "cannot be removed",
                    _ => "cannot be changed",
                };
                denials.push(format!(
                    "status.admission: {what} by {user:?}; only the Sluice controller ({}) admits Workloads",
                    if cfg.admission_writers.is_empty() {
                        "no admission writers configured".to_owned()
                    } else {
                        cfg.admission_writers.join(", ")
                    }
                ));
            }
        }
    }
    Ok(denials)
}
