//! RFC 6902 JSON patches, generated against the object exactly as the API
//! server sent it. The webhook only ever adds: every fix fills in something
//! absent (or `null`), appends to an array, or replaces a scalar the rules
//! own (`spec.suspend`).

use serde::Serialize;
use serde_json::Value;

/// Escapes one reference token per RFC 6901 (`~` → `~0`, `/` → `~1`).
pub fn escape_token(token: &str) -> String {
    if !token.contains(['~', '/']) {
        return token.to_owned();
    }
    token.replace('~', "~0").replace('/', "~1")
}

/// A JSON pointer under construction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pointer(String);

impl Pointer {
    /// The whole document.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Parses a pointer whose tokens need no escaping, such as `/spec/template/spec`.
    pub fn from_plain(path: &str) -> Self {
        Self(path.to_owned())
    }

    /// This pointer with one more token, escaped.
    #[must_use]
    pub fn key(&self, token: &str) -> Self {
        Self(format!("{}/{}", self.0, escape_token(token)))
    }

    /// This pointer with an array index.
    #[must_use]
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}/{i}", self.0))
    }

    /// This pointer with `-` (append to an array).
    #[must_use]
    pub fn append(&self) -> Self {
        Self(format!("{}/-", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One operation. Only `add` and `replace` are ever produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: &'static str,
    pub path: String,
    pub value: Value,
}

impl PatchOp {
    pub fn add(path: &Pointer, value: Value) -> Self {
        Self {
            op: "add",
            path: path.0.clone(),
            value,
        }
    }

    pub fn replace(path: &Pointer, value: Value) -> Self {
        Self {
            op: "replace",
            path: path.0.clone(),
            value,
        }
    }
}

/// A pointer that the `json-patch` crate refused (never happens for pointers
/// built with [`Pointer`]).
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON pointer {0:?}")]
pub struct BadPointer(pub String);

/// Converts our operations into `json_patch`'s types (what kube's
/// `AdmissionResponse::with_patch` takes).
pub fn to_json_patch(ops: &[PatchOp]) -> Result<json_patch::Patch, BadPointer> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let path = json_patch::jsonptr::PointerBuf::parse(op.path.clone()).map_err(|_| BadPointer(op.path.clone()))?;
        out.push(match op.op {
            "replace" => json_patch::PatchOperation::Replace(json_patch::ReplaceOperation {
                path,
                value: op.value.clone(),
            }),
            _ => json_patch::PatchOperation::Add(json_patch::AddOperation {
                path,
                value: op.value.clone(),
            }),
        });
    }
    Ok(json_patch::Patch(out))
}

/// Applies operations to a document (tests, idempotency checks, benches).
pub fn apply(doc: &mut Value, ops: &[PatchOp]) -> Result<(), String> {
    let patch = to_json_patch(ops).map_err(|e| e.to_string())?;
    json_patch::patch(doc, &patch).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_are_escaped_per_rfc6901() {
        assert_eq!(escape_token("nvidia.com/gpu"), "nvidia.com~1gpu");
        assert_eq!(escape_token("a~b/c"), "a~0b~1c");
        assert_eq!(escape_token("plain"), "plain");
        let p = Pointer::from_plain("/metadata/labels").key("sluice.dev/queue");
        assert_eq!(p.as_str(), "/metadata/labels/sluice.dev~1queue");
    }

    #[test]
    fn escaped_paths_apply_to_the_right_member() {
        let mut doc = json!({"limits": {"a~b": 1}});
        let ops = vec![
            PatchOp::add(&Pointer::root().key("limits").key("nvidia.com/gpu"), json!("1")),
            PatchOp::add(&Pointer::root().key("limits").key("x~/y"), json!("2")),
        ];
        apply(&mut doc, &ops).unwrap();
        assert_eq!(doc, json!({"limits": {"a~b": 1, "nvidia.com/gpu": "1", "x~/y": "2"}}));
    }

    #[test]
    fn serialized_ops_look_like_rfc6902() {
        let op = PatchOp::add(&Pointer::root().key("spec").key("tolerations").append(), json!({}));
        assert_eq!(
            serde_json::to_value(&op).unwrap(),
            json!({"op": "add", "path": "/spec/tolerations/-", "value": {}})
        );
    }
}
