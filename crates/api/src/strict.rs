//! Strict reading of Sluice manifests: every key that the kind's CRD schema
//! does not declare is reported, with its field path and the nearest known
//! name. The API server prunes such keys without a word (so `cohrt: shared`
//! silently means "no cohort"); tools that read manifests themselves, like
//! `sluice simulate`, refuse them instead.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

/// The fields of `metadata` a manifest may set (ObjectMeta).
const OBJECT_META: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
];

/// A key the schema does not declare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownField {
    /// Path of the key, e.g. `spec.resourceGroups[0].flavors[1].resources[0].borrowingLimt`.
    pub path: String,
    /// The key itself.
    pub key: String,
    /// The nearest declared name at that place, if one is close.
    pub suggestion: Option<String>,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: unknown field `{}`", self.path, self.key)?;
        if let Some(s) = &self.suggestion {
            write!(f, ", did you mean `{s}`?")?;
        }
        Ok(())
    }
}

/// Every CRD, generated once: generating the schemas costs far more than
/// checking a document against them, and a scenario has thousands.
fn crds() -> &'static [CustomResourceDefinition] {
    static CRDS: std::sync::OnceLock<Vec<CustomResourceDefinition>> = std::sync::OnceLock::new();
    CRDS.get_or_init(crate::crd::all)
}

/// The CRD of a Sluice kind (`ClusterQueue`, …), if it is one.
pub fn crd_of(kind: &str) -> Option<&'static CustomResourceDefinition> {
    crds().iter().find(|c| c.spec.names.kind == kind)
}

/// The Sluice kinds, by name.
pub fn kinds() -> Vec<String> {
    crds().iter().map(|c| c.spec.names.kind.clone()).collect()
}

/// Every key of `object` (a whole manifest: apiVersion, kind, metadata,
/// spec, …) that the CRD's schema does not declare, in document order.
pub fn unknown_fields(crd: &CustomResourceDefinition, object: &Value) -> Vec<UnknownField> {
    let Some(schema) = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Value::Object(map) = object else { return out };
    for (key, value) in map {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                if let Value::Object(meta) = value {
                    for k in meta.keys().filter(|k| !OBJECT_META.contains(&k.as_str())) {
                        out.push(unknown("metadata", k, OBJECT_META.iter().copied()));
                    }
                }
            }
            _ => match schema.properties.as_ref().and_then(|p| p.get(key)) {
                Some(sub) => walk(sub, value, key, &mut out),
                None => out.push(unknown(
                    "",
                    key,
                    ["apiVersion", "kind", "metadata"]
                        .into_iter()
                        .chain(schema.properties.iter().flat_map(|p| p.keys().map(String::as_str))),
                )),
            },
        }
    }
    out
}

fn walk(schema: &JSONSchemaProps, value: &Value, path: &str, out: &mut Vec<UnknownField>) {
    if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = &schema.properties {
                for (key, v) in map {
                    match props.get(key) {
                        Some(sub) => walk(sub, v, &format!("{path}.{key}"), out),
                        None => out.push(unknown(path, key, props.keys().map(String::as_str))),
                    }
                }
            } else if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &schema.additional_properties {
                // A map: any key, values by the schema.
                for (key, v) in map {
                    walk(sub, v, &format!("{path}[{key}]"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(sub)) = &schema.items {
                for (i, v) in items.iter().enumerate() {
                    walk(sub, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn unknown<'a>(parent: &str, key: &str, known: impl Iterator<Item = &'a str>) -> UnknownField {
    UnknownField {
        path: if parent.is_empty() {
            key.to_string()
        } else {
            format!("{parent}.{key}")
        },
        key: key.to_string(),
        suggestion: nearest(key, known).map(str::to_string),
    }
}

/// The known name closest to `word`: equal but for case, else within a
/// small edit distance (a third of the word, at least 2). `None` when
/// nothing is that close.
pub fn nearest<'a>(word: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    let limit = (word.chars().count() / 3).max(2);
    known
        .map(|k| {
            let d = if k.to_lowercase() == lower {
                0
            } else {
                edit_distance(&lower, &k.to_lowercase())
            };
            (d, k)
        })
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, k)| (d, k))
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(kind: &str, object: Value) -> Vec<String> {
        unknown_fields(crd_of(kind).unwrap(), &object)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn typos_are_found_where_they_are_with_the_name_meant() {
        let got = check(
            "ClusterQueue",
            json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
                "metadata": {"name": "a", "lables": {}},
                "spec": {
                    "cohrt": "shared",
                    "preemption": {"withinClusterqueue": "LowerPriority"},
                    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4, "borrowingLimt": 2}]}
                    ]}]
                }
            }),
        );
        assert_eq!(
            got,
            [
                "metadata.lables: unknown field `lables`, did you mean `labels`?",
                "spec.cohrt: unknown field `cohrt`, did you mean `cohort`?",
                "spec.preemption.withinClusterqueue: unknown field `withinClusterqueue`, did you mean `withinClusterQueue`?",
                "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimt: unknown field `borrowingLimt`, did you mean `borrowingLimit`?",
            ]
        );
    }

    #[test]
    fn maps_take_any_key_and_a_far_name_gets_no_suggestion() {
        let got = check(
            "ResourceFlavor",
            json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor",
                "metadata": {"name": "a100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": "A100"}, "gpuModel": "a100"}
            }),
        );
        assert_eq!(got, ["spec.gpuModel: unknown field `gpuModel`"]);
    }

    #[test]
    fn a_valid_manifest_has_no_unknown_fields() {
        let got = check(
            "LocalQueue",
            json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": "ns", "labels": {"a": "b"}},
                "spec": {"clusterQueue": "cq"}
            }),
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn nearest_prefers_case_then_distance() {
        let kinds = ["ClusterQueue", "LocalQueue", "ResourceFlavor"];
        assert_eq!(nearest("Clusterqueue", kinds.into_iter()), Some("ClusterQueue"));
        assert_eq!(nearest("LocalQeue", kinds.into_iter()), Some("LocalQueue"));
        assert_eq!(nearest("Job", kinds.into_iter()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
