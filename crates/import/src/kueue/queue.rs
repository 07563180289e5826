//! One Kueue queue object (ResourceFlavor, ClusterQueue, Cohort,
//! LocalQueue, WorkloadPriorityClass) as its Sluice object: the fields the
//! table maps, under Sluice's names, decoded into Sluice's type, checked
//! by its `Validate` and written as that type writes itself.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{API_VERSION, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, WorkloadPriorityClass};
use sluice_api::validation::Validate;

use super::walk::{self, not_copied};
use super::{ImportError, Note};
use crate::mapping::{self, Status, When};

/// One Sluice object: as JSON, and as YAML in its type's field order.
pub(super) struct Translated {
    pub(super) value: Value,
    pub(super) yaml: String,
}

/// Translates one queue object; `topologies` (Topology name → its levels)
/// adds detail to the note about a ResourceFlavor's `topologyName`.
pub(super) fn translate(
    index: usize,
    kind: &str,
    version: &str,
    doc: &Value,
    topologies: &BTreeMap<String, Vec<String>>,
) -> Result<(Translated, Vec<Note>), ImportError> {
    let name = (doc["metadata"]["name"].as_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ImportError::Document {
            index,
            message: format!("{kind} without metadata.name"),
        })?;
    let place = format!("{kind} {name}");
    let walked = walk::walk(kind, version, &place, doc);
    let mut notes = walked.notes;
    let mut object = walked.kept;
    rename(kind, version, &mut object);
    notes.extend(kueue_defaults(kind, version, doc, &place));
    if kind == "ResourceFlavor" {
        describe_topology(doc, topologies, &mut notes);
    }
    object["apiVersion"] = json!(API_VERSION);
    object["kind"] = json!(kind);
    if kind != "WorkloadPriorityClass" && object.get("spec").is_none() {
        // Sluice's types require a spec; Kueue's ResourceFlavor may have none.
        object["spec"] = json!({});
    }
    let object = typed(kind, name, object)?;
    Ok((object, notes))
}

/// A Kueue kind Sluice has no counterpart for (AdmissionCheck, Topology,
/// MultiKueue's, a Workload): reported as a whole by its row, or as
/// unknown.
pub(super) fn other_kind(kind: &str, version: &str, doc: &Value) -> Vec<Note> {
    let name = doc["metadata"]["name"].as_str().unwrap_or("(unnamed)");
    let place = format!("{kind} {name}");
    match mapping::decide(kind, version, "", None) {
        Some(row) if row.status == Status::Ignored => Vec::new(),
        Some(row) => vec![Note {
            place,
            status: row.status,
            message: not_copied(row),
        }],
        None => vec![Note {
            place,
            status: Status::Unsupported,
            message: "not a Kueue kind the importer knows: left out".into(),
        }],
    }
}

/// Kueue's names for what Sluice calls otherwise (`spec.cohortName` →
/// `spec.cohort`), from the table's rows whose Sluice field differs.
fn rename(kind: &str, version: &str, object: &mut Value) {
    let renamed = (mapping::mapping().iter())
        .filter(|r| r.applies_to(kind, version) && r.status == Status::Mapped)
        .filter(|r| r.sluice.starts_with("spec.") && r.sluice != r.kueue && !r.kueue.contains("[]"));
    for row in renamed {
        let (from, to) = (pointer(row.kueue), pointer(row.sluice));
        let Some(value) = object.pointer_mut(&from).map(Value::take) else {
            continue;
        };
        remove(object, &from);
        let Some((parent, key)) = to.rsplit_once('/') else {
            continue;
        };
        if let Some(Value::Object(m)) = object.pointer_mut(parent) {
            m.insert(key.to_string(), value);
        }
    }
}

/// `spec.cohortName` → `/spec/cohortName`.
fn pointer(path: &str) -> String {
    format!("/{}", path.replace('.', "/"))
}

fn remove(object: &mut Value, pointer: &str) {
    if let Some((parent, key)) = pointer.rsplit_once('/')
        && let Some(Value::Object(m)) = object.pointer_mut(parent)
    {
        m.remove(key);
    }
}

/// Notes where a field is unset and Kueue's default matters: a
/// ClusterQueue without a namespaceSelector serves no namespace; one that
/// may borrow between several flavors does so by Kueue's default flavor
/// fungibility, which is not Sluice's.
fn kueue_defaults(kind: &str, version: &str, doc: &Value, place: &str) -> Vec<Note> {
    if kind != "ClusterQueue" {
        return Vec::new();
    }
    let spec = &doc["spec"];
    let mut notes = Vec::new();
    let mut unset = |path: &str| {
        let row = mapping::row(kind, version, path, When::Unset);
        notes.push(Note {
            place: format!("{place}: {path}"),
            status: row.status,
            message: row.note.to_string(),
        });
    };
    if spec["namespaceSelector"].is_null() {
        unset("spec.namespaceSelector");
    }
    let in_cohort = !spec["cohort"].is_null() || !spec["cohortName"].is_null();
    let several_flavors = (spec["resourceGroups"].as_array().into_iter().flatten())
        .any(|g| g["flavors"].as_array().is_some_and(|f| f.len() > 1));
    if in_cohort && several_flavors && spec["flavorFungibility"]["whenCanBorrow"].is_null() {
        unset("spec.flavorFungibility.whenCanBorrow");
    }
    notes
}

/// Adds the named Topology's levels to the note about `topologyName`, so
/// the admin can pick the one Sluice's `topologyKey` takes.
fn describe_topology(doc: &Value, topologies: &BTreeMap<String, Vec<String>>, notes: &mut [Note]) {
    let Some(topology) = doc["spec"]["topologyName"].as_str() else {
        return;
    };
    let detail = match topologies.get(topology) {
        Some(levels) => format!(" (Topology {topology} has the levels {})", levels.join(", ")),
        None => format!(" (Topology {topology} is not in the input)"),
    };
    if let Some(note) = notes.iter_mut().find(|n| n.place.ends_with(": spec.topologyName")) {
        note.message.push_str(&detail);
    }
}

/// The object as Sluice's type for `kind`: decoded (with the field path
/// in an error), validated, and written back as the type writes itself,
/// as JSON and as YAML.
fn typed(kind: &str, name: &str, object: Value) -> Result<Translated, ImportError> {
    let result = match kind {
        "ResourceFlavor" => roundtrip::<ResourceFlavor>(object),
        "ClusterQueue" => roundtrip::<ClusterQueue>(object),
        "Cohort" => roundtrip::<Cohort>(object),
        "LocalQueue" => roundtrip::<LocalQueue>(object),
        _ => roundtrip::<WorkloadPriorityClass>(object),
    };
    result.map_err(|message| ImportError::Invalid {
        kind: kind.to_string(),
        name: name.to_string(),
        message,
    })
}

fn roundtrip<T: DeserializeOwned + Serialize + Validate>(object: Value) -> Result<Translated, String> {
    let typed: T = serde_path_to_error::deserialize(&object).map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
    typed.check().map_err(|e| e.to_string())?;
    Ok(Translated {
        value: serde_json::to_value(&typed).map_err(|e| e.to_string())?,
        yaml: serde_saphyr::to_string(&typed).map_err(|e| e.to_string())?,
    })
}
