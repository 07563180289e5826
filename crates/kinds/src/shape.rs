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
}
