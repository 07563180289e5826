//! The importer: each Kueue document in; its Sluice object out (or, for
//! Kueue's Configuration, `sluice controller` flags and chart values), with
//! a note for every field that is not copied as it is. Every key of the
//! input is accounted for by the mapping table ([`walk`]). Each Sluice
//! object is built with Sluice's own types and checked as Sluice checks it
//! (`Validate`), so what is printed is what the webhook takes.

mod configuration;
mod queue;
mod walk;

use std::collections::BTreeMap;

use serde_json::Value;

pub use configuration::{FairSharing, SLUICE_FRAMEWORKS};

use crate::mapping::{QUEUE_KINDS, Status};

/// Something said about a field: it is not copied as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Where: `ClusterQueue team-a: spec.admissionChecks`.
    pub place: String,
    /// What became of it.
    pub status: Status,
    /// Why, or what Sluice does instead (from the mapping table).
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.place, self.status.as_str(), self.message)
    }
}

/// What an import produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Import {
    /// Sluice objects (`sluice.dev/v1alpha1`), in input order, as Sluice's
    /// types serialize them.
    pub objects: Vec<Value>,
    /// For each object, the index of the input document it came from.
    pub origins: Vec<usize>,
    /// The same objects as YAML documents, in their types' field order
    /// ([`Import::manifests`] prints them all as one stream).
    pub documents: Vec<String>,
    /// `sluice controller` flags Kueue's Configuration asks for (none
    /// without a Configuration).
    pub flags: Vec<String>,
    /// The same settings as chart values (`helm install -f`), or null
    /// without a Configuration.
    pub chart_values: Value,
    /// Fair sharing as Kueue's Configuration sets it (none without a
    /// Configuration): for a simulation of the imported queues.
    pub fair_sharing: Option<FairSharing>,
    /// What is not copied as it is, in input order.
    pub notes: Vec<Note>,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A document that cannot be read as a Kueue object.
    #[error("document {}: {message}", .index + 1)]
    Document {
        /// 0-based position among the documents.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A translation Sluice's validation refuses.
    #[error("{kind} {name}: Sluice would refuse the translation: {message}")]
    Invalid {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Every violation, with its field path.
        message: String,
    },
    /// `strict`, and fields Sluice does not support.
    #[error("strict import: {} field(s) Sluice does not support:\n  {}", .0.len(), .0.join("\n  "))]
    Strict(Vec<String>),
}

impl ImportError {
    /// The input document the error is about, by its position in `docs`
    /// (the documents given to [`import`]); `None` for a strict import's
    /// list, which is about several.
    pub fn document(&self, docs: &[Value]) -> Option<usize> {
        match self {
            ImportError::Document { index, .. } => Some(*index),
            ImportError::Invalid { kind, name, .. } => docs
                .iter()
                .position(|v| v["kind"] == kind.as_str() && v["metadata"]["name"] == name.as_str()),
            ImportError::Strict(_) => None,
        }
    }
}

impl Import {
    /// Whether the import gave nothing: no Sluice object and no Kueue
    /// Configuration (the input held only other kinds, Kueue's or not).
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.fair_sharing.is_none()
    }
}

/// Imports Kueue documents (parsed YAML or JSON): queue objects of
/// `kueue.x-k8s.io` (`v1alpha1`, `v1beta1`, `v1beta2`), Kueue's other kinds
/// (reported), its `Configuration` of `config.kueue.x-k8s.io` (`v1beta1`,
/// `v1beta2`), also inside a ConfigMap. With `strict`, any field Sluice
/// does not support is an error listing them all.
pub fn import(docs: &[Value], strict: bool) -> Result<Import, ImportError> {
    let topologies = topologies(docs);
    let mut out = Import::default();
    let mut configured = false;
    for (index, doc) in docs.iter().enumerate() {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        match group {
            "kueue.x-k8s.io" => {
                check_version(index, kind, version, &["v1alpha1", "v1beta1", "v1beta2"])?;
                if QUEUE_KINDS.contains(&kind) {
                    let (object, notes) = queue::translate(index, kind, version, doc, &topologies)?;
                    out.objects.push(object.value);
                    out.origins.push(index);
                    out.documents.push(object.yaml);
                    out.notes.extend(notes);
                } else {
                    out.notes.extend(queue::other_kind(kind, version, doc));
                }
            }
            "config.kueue.x-k8s.io" if kind == "Configuration" => {
                check_version(index, kind, version, &["v1beta1", "v1beta2"])?;
                configure(index, &mut configured, &mut out, version, doc, "Configuration")?;
            }
            "" if version == "v1" && kind == "ConfigMap" => match configuration::in_config_map(doc) {
                Some((place, version, inner)) => {
                    check_version(index, "Configuration", &version, &["v1beta1", "v1beta2"])?;
                    configure(index, &mut configured, &mut out, &version, &inner, &place)?;
                }
                None => out.notes.push(left_out(index, api_version, kind)),
            },
            _ => out.notes.push(left_out(index, api_version, kind)),
        }
    }
    if strict {
        let unsupported: Vec<String> = (out.notes.iter())
            .filter(|n| n.status == Status::Unsupported)
            .map(|n| format!("{}: {}", n.place, n.message))
            .collect();
        if !unsupported.is_empty() {
            return Err(ImportError::Strict(unsupported));
        }
    }
    Ok(out)
}

/// A document that is not Kueue's: reported, not translated.
fn left_out(index: usize, api_version: &str, kind: &str) -> Note {
    Note {
        place: format!("document {} ({api_version} {kind})", index + 1),
        status: Status::Unsupported,
        message: "not a Kueue object: left out".into(),
    }
}

/// Whether `doc` is one the importer reads: of `kueue.x-k8s.io` or
/// `config.kueue.x-k8s.io`, or a ConfigMap holding Kueue's Configuration.
pub fn is_kueue(doc: &Value) -> bool {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    api_version.starts_with("kueue.x-k8s.io/")
        || api_version.starts_with("config.kueue.x-k8s.io/")
        || (api_version == "v1" && doc["kind"] == "ConfigMap" && configuration::in_config_map(doc).is_some())
}

fn check_version(index: usize, kind: &str, version: &str, known: &[&str]) -> Result<(), ImportError> {
    if known.contains(&version) {
        return Ok(());
    }
    Err(ImportError::Document {
        index,
        message: format!("{kind} of version {version:?}: the importer reads {}", known.join(", ")),
    })
}

/// Kueue's Configuration: one per import.
fn configure(
    index: usize,
    configured: &mut bool,
    out: &mut Import,
    version: &str,
    doc: &Value,
    place: &str,
) -> Result<(), ImportError> {
    if std::mem::replace(configured, true) {
        return Err(ImportError::Document {
            index,
            message: "a second Kueue Configuration: give one".into(),
        });
    }
    let (controller, notes) = configuration::translate(version, doc, place);
    out.flags = controller.flags;
    out.chart_values = controller.values;
    out.fair_sharing = Some(controller.fair_sharing);
    out.notes.extend(notes);
    Ok(())
}

/// Each Topology's node-label levels, by name, for the notes about the
/// ResourceFlavors that name one.
fn topologies(docs: &[Value]) -> BTreeMap<String, Vec<String>> {
    docs.iter()
        .filter(|d| {
            d["kind"] == "Topology"
                && d["apiVersion"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("kueue.x-k8s.io/"))
        })
        .filter_map(|d| {
            let name = d["metadata"]["name"].as_str()?.to_string();
            let levels = (d["spec"]["levels"].as_array().into_iter().flatten())
                .filter_map(|l| l["nodeLabel"].as_str().map(str::to_string))
                .collect();
            Some((name, levels))
        })
        .collect()
}

#[cfg(test)]
mod tests;
