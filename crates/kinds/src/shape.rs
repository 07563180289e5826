//! What the webhook reads of a queued object, by kind: where its suspend
//! flag is, where its pod templates are, how many pods each of its parts
//! runs at once, whether it has finished. Each kind's file says these for
//! its object ([`crate::Queueable`]); the helpers here read the JSON.

use serde_json::Value;

/// Where a kind's suspend flag is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuspendField {
    /// A JSON pointer (`/spec/suspend`).
    pub pointer: &'static str,
    /// Its field path, as users write it (`spec.suspend`).
    pub field: &'static str,
}

impl SuspendField {
    /// `spec.suspend`.
    pub const SPEC: SuspendField = SuspendField {
        pointer: "/spec/suspend",
        field: "spec.suspend",
    };

    /// The JSON merge patch that sets the flag to `value` (its parents
    /// created where missing).
    pub fn patch(&self, value: bool) -> Value {
        self.pointer
            .rsplit('/')
            .filter(|k| !k.is_empty())
            .fold(Value::Bool(value), |inner, key| {
                Value::Object(serde_json::Map::from_iter([(key.to_owned(), inner)]))
            })
    }
}

/// How objects of a kind are held until Sluice admits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Its suspend flag is true (a Job's `spec.suspend`, a Kubeflow job's
    /// `spec.runPolicy.suspend`).
    Suspend(SuspendField),
    /// It runs no replicas (`spec.replicas: 0`), the replicas its owner
    /// asked for kept in the [`HELD_REPLICAS`] annotation: a serving
    /// object (Deployment, StatefulSet, LeaderWorkerSet), which has no
    /// suspend flag (`crate::serving`).
    Replicas,
}

/// The annotation that keeps a held serving object's replicas.
pub use sluice_api::labels::HELD_REPLICAS;

impl Hold {
    /// The field that holds an object, as users write it
    /// (`spec.suspend`, `spec.replicas`).
    pub fn field(self) -> &'static str {
        match self {
            Hold::Suspend(f) => f.field,
            Hold::Replicas => "spec.replicas",
        }
    }

    /// Whether `obj` is held: its suspend flag true, or no replicas and
    /// the [`HELD_REPLICAS`] annotation.
    pub fn is_held(self, obj: &Value) -> bool {
        match self {
            Hold::Suspend(f) => obj.pointer(f.pointer) == Some(&Value::Bool(true)),
            Hold::Replicas => {
                int(obj.pointer("/spec/replicas"), 1) == 0
                    && obj
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(HELD_REPLICAS))
                        .is_some()
            }
        }
    }

    /// The JSON merge patch that holds an object which asks for `asked`
    /// replicas (read only by [`Hold::Replicas`]).
    pub fn patch(self, asked: Option<i32>) -> Value {
        match self {
            Hold::Suspend(f) => f.patch(true),
            Hold::Replicas => serde_json::json!({
                "metadata": {"annotations": {HELD_REPLICAS: asked.unwrap_or(1).max(0).to_string()}},
                "spec": {"replicas": 0},
            }),
        }
    }
}

/// One pod template of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateAt {
    /// A JSON pointer to the template's pod spec.
    pub spec: String,
    /// The pod spec's field path (`spec.template.spec`).
    pub field: String,
    /// A JSON pointer to the template's labels.
    pub labels: String,
}

impl TemplateAt {
    /// The template at JSON pointer `base` (field path `field`).
    pub fn at(base: &str, field: &str) -> TemplateAt {
        TemplateAt {
            spec: format!("{base}/spec"),
            field: format!("{field}.spec"),
            labels: format!("{base}/metadata/labels"),
        }
    }
}

/// One count of an object: where it is (its field path) and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Count {
    pub field: String,
    pub value: i64,
}

/// The pod templates of a map of roles at `/spec/<field>` (Kubeflow's
/// replica specs), each at `<role>.template`.
pub fn role_templates(obj: &Value, field: &str) -> Vec<TemplateAt> {
    roles(obj, field)
        .map(|role| {
            TemplateAt::at(
                &format!("/spec/{field}/{}/template", escape(role)),
                &format!("spec.{field}.{role}.template"),
            )
        })
        .collect()
}

/// Each role's `replicas` (default 1) of a map of roles at `/spec/<field>`.
pub fn role_counts(obj: &Value, field: &str) -> Vec<Count> {
    let specs = obj.pointer(&format!("/spec/{field}"));
    roles(obj, field)
        .map(|role| Count {
            field: format!("spec.{field}.{role}.replicas"),
            value: int(specs.and_then(|s| s.get(role)).and_then(|r| r.get("replicas")), 1),
        })
        .collect()
}

fn roles<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    obj.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.keys().map(String::as_str))
}

/// How an object with Kubernetes-style conditions ended, if it did:
/// `Some(true)` when condition `succeeded` is True, `Some(false)` when
/// `failed` is.
pub fn terminal_condition(obj: &Value, succeeded: &str, failed: &str) -> Option<bool> {
    let conditions = obj.pointer("/status/conditions")?.as_array()?;
    let is_true = |t: &str| {
        conditions.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some(t) && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    if is_true(succeeded) {
        Some(true)
    } else if is_true(failed) {
        Some(false)
    } else {
        None
    }
}

/// A list at `v`, or none.
pub fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// An integer at `v`, or `default`.
pub fn int(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(default)
}

/// A batch/v1 Job spec's pods at once: `min(parallelism, completions)`.
pub fn job_pods(spec: Option<&Value>) -> i64 {
    let spec = spec.unwrap_or(&Value::Null);
    let p = int(spec.get("parallelism"), 1);
    spec.get("completions").and_then(Value::as_i64).map_or(p, |c| p.min(c))
}

/// Whether a pod spec (JSON) asks for a GPU: a container or init
/// container with a non-zero request or limit of a GPU resource
/// ([`sluice_api::resources::is_gpu`]).
pub fn requests_gpu(pod_spec: &Value) -> bool {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|f| list(pod_spec.get(*f)))
        .flat_map(|c| ["requests", "limits"].map(|k| c.pointer(&format!("/resources/{k}"))))
        .flatten()
        .filter_map(Value::as_object)
        .flatten()
        .any(|(name, amount)| sluice_api::resources::is_gpu(name) && !is_zero_quantity(amount))
}

fn is_zero_quantity(v: &Value) -> bool {
    match v {
        Value::String(s) => s
            .trim()
            .trim_start_matches('+')
            .chars()
            .all(|c| c == '0' || c == '.' || c.is_alphabetic()),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => true,
    }
}

/// A map key as a JSON pointer token.
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_suspend_patch_is_its_field_set_with_its_parents() {
        assert_eq!(SuspendField::SPEC.patch(true), json!({"spec": {"suspend": true}}));
        let nested = SuspendField {
            pointer: "/spec/runPolicy/suspend",
            field: "spec.runPolicy.suspend",
        };
        assert_eq!(nested.patch(false), json!({"spec": {"runPolicy": {"suspend": false}}}));
    }

    #[test]
    fn a_pod_spec_asks_for_a_gpu_with_a_nonzero_gpu_request_or_limit() {
        let spec = |res: Value| json!({"containers": [{"name": "a", "resources": res}]});
        assert!(requests_gpu(&spec(json!({"limits": {"nvidia.com/gpu": "1"}}))));
        assert!(requests_gpu(&spec(json!({"requests": {"nvidia.com/mig-1g.10gb": 2}}))));
        assert!(requests_gpu(&json!({"containers": [],
            "initContainers": [{"name": "i", "resources": {"limits": {"amd.com/gpu": "1"}}}]})));
        assert!(!requests_gpu(&spec(json!({"limits": {"nvidia.com/gpu": "0"}}))));
        assert!(!requests_gpu(&spec(json!({"limits": {"cpu": "4"}}))));
        assert!(!requests_gpu(&json!({})));
    }

    #[test]
    fn a_serving_object_is_held_at_zero_replicas_with_its_ask_kept() {
        let hold = Hold::Replicas;
        assert_eq!(
            hold.patch(Some(3)),
            json!({"metadata": {"annotations": {HELD_REPLICAS: "3"}}, "spec": {"replicas": 0}})
        );
        let held = json!({"metadata": {"annotations": {HELD_REPLICAS: "3"}}, "spec": {"replicas": 0}});
        assert!(hold.is_held(&held));
        // Scaled up while held, or never held, or at zero without an ask.
        let scaled = json!({"metadata": {"annotations": {HELD_REPLICAS: "3"}}, "spec": {"replicas": 2}});
        assert!(!hold.is_held(&scaled));
        assert!(!hold.is_held(&json!({"spec": {"replicas": 0}})));
        assert!(!hold.is_held(&json!({"metadata": {"annotations": {HELD_REPLICAS: "1"}}, "spec": {}})));
        assert_eq!(hold.field(), "spec.replicas");
        assert!(Hold::Suspend(SuspendField::SPEC).is_held(&json!({"spec": {"suspend": true}})));
        assert!(!Hold::Suspend(SuspendField::SPEC).is_held(&json!({"spec": {}})));
    }
}
