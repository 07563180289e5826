//! The importer: each Kueue document in, its Sluice object (or, for
//! Kueue's Configuration, flags) out, with a note for every field that is
//! not copied as it is. The output is checked as Sluice would check it
//! (`Validate`), so what is printed is what the API server and webhook take.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use sluice_api::v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, WorkloadPriorityClass};
use sluice_api::validation::Validate;

use crate::mapping::{Row, Status, mapping};

/// Something said about a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// `ClusterQueue team-a: spec.admissionChecks`.
    pub place: String,
    pub status: Status,
    pub message: String,
}

/// What an import produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Import {
    /// Sluice objects (`sluice.dev/v1alpha1`), in input order.
    pub objects: Vec<Value>,
    /// `sluice controller` flags from Kueue's Configuration.
    pub flags: Vec<String>,
    pub notes: Vec<Note>,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("document {index}: {message}")]
    Document { index: usize, message: String },
    #[error("{kind} {name}: Sluice would refuse the translation: {message}")]
    Invalid {
        kind: String,
        name: String,
        message: String,
    },
    #[error("--strict: {} field(s) not supported:\n  {}", .0.len(), .0.join("\n  "))]
    Strict(Vec<String>),
}

const KINDS: [&str; 5] = [
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "WorkloadPriorityClass",
];

/// Imports Kueue documents (parsed YAML or JSON). With `strict`, any field
/// that is not supported is an error listing them all.
pub fn import(docs: &[Value], strict: bool) -> Result<Import, ImportError> {
    let mut out = Import::default();
    for (index, doc) in docs.iter().enumerate() {
        let api = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        match (api.split('/').next(), kind) {
            (Some("kueue.x-k8s.io"), k) if KINDS.contains(&k) => {
                let object = object(index, k, doc, &mut out.notes)?;
                out.objects.push(object);
            }
            (Some("config.kueue.x-k8s.io"), "Configuration") => configuration(doc, &mut out),
            _ => out.notes.push(Note {
                place: format!("document {index} ({api} {kind})"),
                status: Status::Unsupported,
                message: "not a Kueue queue or Configuration: left out".into(),
            }),
        }
    }
    if strict {
        let unsupported: Vec<String> = out
            .notes
            .iter()
            .filter(|n| n.status == Status::Unsupported)
            .map(|n| format!("{}: {}", n.place, n.message))
            .collect();
        if !unsupported.is_empty() {
            return Err(ImportError::Strict(unsupported));
        }
    }
    Ok(out)
}

/// One queue object.
fn object(index: usize, kind: &str, doc: &Value, notes: &mut Vec<Note>) -> Result<Value, ImportError> {
    let name = doc["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ImportError::Document {
            index,
            message: format!("{kind} without metadata.name"),
        })?;
    let mut body = doc.clone();
    let mut fields = Vec::new();
    leaves(&body, "", "", &mut fields);
    let mut said: BTreeSet<&'static str> = BTreeSet::new();
    let mut drop: Vec<String> = Vec::new();
    for (path, pointer) in fields {
        if path == "apiVersion" || path == "kind" {
            continue;
        }
        let place = format!("{kind} {name}: {path}");
        match row_of(kind, &path) {
            None => {
                notes.push(Note {
                    place,
                    status: Status::Unsupported,
                    message: "unknown field: not copied".into(),
                });
                drop.push(pointer);
            }
            Some(r) if r.status == Status::Unsupported => {
                if said.insert(r.kueue) {
                    notes.push(Note {
                        place: format!("{kind} {name}: {}", r.kueue),
                        status: Status::Unsupported,
                        message: format!("not copied: {}", r.note),
                    });
                }
                drop.push(pointer);
            }
            Some(r) if r.status == Status::Ignored => drop.push(pointer),
            Some(_) => {}
        }
    }
    for pointer in drop {
        remove(&mut body, &pointer);
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    for key in ["namespace", "labels", "annotations"] {
        if let Some(v) = doc["metadata"].get(key).filter(|v| !v.is_null()) {
            meta.insert(key.into(), v.clone());
        }
    }
    let mut object = body.as_object().cloned().unwrap_or_default();
    object.insert("apiVersion".into(), json!("sluice.dev/v1alpha1"));
    object.insert("metadata".into(), Value::Object(meta));
    object.remove("status");
    let mut object = Value::Object(object);
    renames(kind, &mut object);
    defaults(kind, name, &mut object, notes);
    check(kind, name, &object)?;
    Ok(object)
}

/// Every leaf of `v`: its path (lists as `[]`) and its JSON pointer. An
/// empty object or list is a leaf.
fn leaves(v: &Value, path: &str, pointer: &str, out: &mut Vec<(String, String)>) {
    let join = |p: &str, k: &str| {
        if p.is_empty() {
            k.to_string()
        } else {
            format!("{p}.{k}")
        }
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                leaves(x, &join(path, k), &format!("{pointer}/{escaped}"), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, &format!("{path}[]"), &format!("{pointer}/{i}"), out);
            }
        }
        _ => out.push((path.to_string(), pointer.to_string())),
    }
}

/// The row covering `path` for `kind`: the longest whose path is `path` or
/// above it.
fn row_of(kind: &str, path: &str) -> Option<&'static Row> {
    mapping()
        .iter()
        .filter(|r| r.kind == kind || r.kind == "*")
        .filter(|r| {
            path == r.kueue
                || path
                    .strip_prefix(r.kueue)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
        .max_by_key(|r| r.kueue.len())
}

/// Removes what `pointer` names, and the objects and lists it leaves empty.
fn remove(v: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(p) = v.pointer_mut(parent) {
        match p {
            Value::Object(m) => {
                m.remove(&last);
            }
            Value::Array(a) => {
                if let Ok(i) = last.parse::<usize>()
                    && i < a.len()
                {
                    a[i] = Value::Null;
                }
            }
            _ => {}
        }
    }
    prune(v);
}

/// Drops nulls left in lists, and emptied objects and lists, except the
/// ones that mean something when empty (a namespaceSelector).
fn prune(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for x in m.values_mut() {
                prune(x);
            }
            m.retain(|k, x| k == "namespaceSelector" || !(x.is_null() || is_empty(x)));
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                prune(x);
            }
            a.retain(|x| !(x.is_null() || is_empty(x)));
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
}

/// v1beta2's and v1beta1's names for what Sluice calls `cohort` and `parent`.
fn renames(kind: &str, object: &mut Value) {
    let (from, to) = match kind {
        "ClusterQueue" => ("cohortName", "cohort"),
        "Cohort" => ("parentName", "parent"),
        _ => return,
    };
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(v) = spec.remove(from)
    {
        spec.insert(to.into(), v);
    }
}

/// Kueue's meaning of an unset field, where Sluice's differs.
fn defaults(kind: &str, name: &str, object: &mut Value, notes: &mut Vec<Note>) {
    if kind != "WorkloadPriorityClass"
        && let Some(o) = object.as_object_mut()
    {
        o.entry("spec").or_insert_with(|| json!({}));
    }
    if kind != "ClusterQueue" {
        return;
    }
    let spec = object
        .as_object_mut()
        .map(|o| o.entry("spec").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(spec) = spec
        && !spec.contains_key("namespaceSelector")
    {
        spec.insert("namespaceSelector".into(), json!({}));
        notes.push(Note {
            place: format!("ClusterQueue {name}: spec.namespaceSelector"),
            status: Status::Difference,
            message: "unset (every namespace in Kueue): written as {} (in Sluice, unset selects none)".into(),
        });
    }
}

/// The translation as Sluice checks it.
fn check(kind: &str, name: &str, object: &Value) -> Result<(), ImportError> {
    fn typed<T: serde::de::DeserializeOwned + Validate>(v: &Value) -> Result<(), String> {
        let t: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        t.check().map_err(|e| e.to_string())
    }
    let result = match kind {
        "ResourceFlavor" => typed::<ResourceFlavor>(object),
        "ClusterQueue" => typed::<ClusterQueue>(object),
        "Cohort" => typed::<Cohort>(object),
        "LocalQueue" => typed::<LocalQueue>(object),
        _ => typed::<WorkloadPriorityClass>(object),
    };
    result.map_err(|message| ImportError::Invalid {
        kind: kind.to_string(),
        name: name.to_string(),
        message,
    })
}

/// Kueue's Configuration as flags; what has no flag is reported.
fn configuration(doc: &Value, out: &mut Import) {
    let mut fields = Vec::new();
    leaves(doc, "", "", &mut fields);
    for (path, _) in fields {
        if path == "apiVersion" || path == "kind" {
            continue;
        }
        let place = format!("Configuration: {path}");
        match row_of("Configuration", &path) {
            Some(r) if r.status == Status::Unsupported => out.notes.push(Note {
                place,
                status: Status::Unsupported,
                message: r.note.to_string(),
            }),
            Some(_) => {}
            None => out.notes.push(Note {
                place,
                status: Status::Unsupported,
                message: "no Sluice flag: set the chart's values instead, if it applies".into(),
            }),
        }
    }
    out.flags.extend(flags(doc, &mut out.notes));
}

/// The flags a Configuration asks for.
fn flags(doc: &Value, notes: &mut Vec<Note>) -> Vec<String> {
    let mut flags = Vec::new();
    let fair = &doc["fairSharing"];
    let on = fair["enable"].as_bool().unwrap_or(false);
    flags.push(format!("--fair-sharing={}", if on { "on" } else { "off" }));
    if let Some(s) = fair["preemptionStrategies"].as_array() {
        let names: Vec<&str> = s.iter().filter_map(Value::as_str).collect();
        flags.push(format!("--fair-sharing-strategies={}", names.join(",")));
    }
    let ready = &doc["waitForPodsReady"];
    match ready["enable"].as_bool() {
        Some(true) => flags.push(format!(
            "--pods-ready-timeout={}",
            ready["timeout"].as_str().unwrap_or("5m")
        )),
        _ => flags.push("--pods-ready-timeout=0".into()),
    }
    let requeue = &ready["requeuingStrategy"];
    if let Some(n) = requeue["backoffLimitCount"].as_i64() {
        flags.push(format!("--requeue-limit={n}"));
    }
    if let Some(s) = requeue["backoffBaseSeconds"].as_i64() {
        flags.push(format!("--requeue-backoff-base={s}s"));
    }
    if let Some(s) = requeue["backoffMaxSeconds"].as_i64() {
        flags.push(format!("--requeue-backoff-max={s}s"));
    }
    if requeue["timestamp"].as_str() == Some("Creation") {
        notes.push(Note {
            place: "Configuration: waitForPodsReady.requeuingStrategy.timestamp".into(),
            status: Status::Difference,
            message: "Creation: Sluice requeues behind what waits (the eviction's time)".into(),
        });
    }
    if doc["manageJobsWithoutQueueName"].as_bool() == Some(true) {
        notes.push(Note {
            place: "Configuration: manageJobsWithoutQueueName".into(),
            status: Status::Difference,
            message: "label each namespace whose Jobs Sluice must queue sluice.dev/default-queue: enabled (with a LocalQueue named default)".into(),
        });
    }
    if let Some(list) = doc["integrations"]["frameworks"].as_array() {
        let known = [
            "jobset.x-k8s.io/jobset",
            "kubeflow.org/pytorchjob",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
        ];
        let mut kinds = Vec::new();
        for f in list.iter().filter_map(Value::as_str) {
            if known.contains(&f) {
                kinds.push(f);
            } else if f != "batch/job" {
                notes.push(Note {
                    place: format!("Configuration: integrations.frameworks ({f})"),
                    status: Status::Unsupported,
                    message: "Sluice does not queue this kind".into(),
                });
            }
        }
        flags.push(format!("--integrations={}", kinds.join(",")));
    }
    flags
}

#[cfg(test)]
mod tests;
