//! Multi-document YAML manifests into typed Sluice objects.
//!
//! [`parse_manifests`] reads a YAML stream (documents separated by `---`),
//! decodes every `sluice.dev/v1alpha1` document of a known kind into its
//! type, and returns every other document (a `batch/v1` Job, a simulator
//! trace, …) as an [`OtherDocument`] so that the caller decides what to do
//! with it. Empty documents are skipped.
//!
//! Errors name the document (1-based, counting non-empty documents), the
//! line and column where the YAML parser knows them, and the field path:
//!
//! ```text
//! document 2 (ClusterQueue), line 14, column 18: spec.resourceGroups[0].flavors: invalid type: string "a100", expected a sequence
//! ```
//!
//! Decoding is as lenient as the YAML parser: unknown fields are ignored,
//! as they are by the API server's default field validation, and a plain
//! scalar such as `123` is accepted where a string is expected (the API
//! server, which sees JSON, would reject it). Run [`Validate::validate`] on
//! the objects to apply Sluice's rules.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::v1alpha1::{API_VERSION, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};
use crate::validation::{Validate, Violation};

/// One of the six Sluice kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum SluiceObject {
    /// A ResourceFlavor.
    ResourceFlavor(ResourceFlavor),
    /// A ClusterQueue.
    ClusterQueue(ClusterQueue),
    /// A Cohort.
    Cohort(Cohort),
    /// A LocalQueue.
    LocalQueue(LocalQueue),
    /// A WorkloadPriorityClass.
    WorkloadPriorityClass(WorkloadPriorityClass),
    /// A Workload.
    Workload(Workload),
}

impl SluiceObject {
    /// The object's kind, e.g. `ClusterQueue`.
    pub fn kind(&self) -> &'static str {
        match self {
            SluiceObject::ResourceFlavor(_) => "ResourceFlavor",
            SluiceObject::ClusterQueue(_) => "ClusterQueue",
            SluiceObject::Cohort(_) => "Cohort",
            SluiceObject::LocalQueue(_) => "LocalQueue",
            SluiceObject::WorkloadPriorityClass(_) => "WorkloadPriorityClass",
            SluiceObject::Workload(_) => "Workload",
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            SluiceObject::ResourceFlavor(o) => &o.metadata,
            SluiceObject::ClusterQueue(o) => &o.metadata,
            SluiceObject::Cohort(o) => &o.metadata,
            SluiceObject::LocalQueue(o) => &o.metadata,
            SluiceObject::WorkloadPriorityClass(o) => &o.metadata,
            SluiceObject::Workload(o) => &o.metadata,
        }
    }

    /// `metadata.name`, if set.
    pub fn name(&self) -> Option<&str> {
        self.metadata().name.as_deref()
    }

    /// `metadata.namespace`, if set (only namespaced kinds have one).
    pub fn namespace(&self) -> Option<&str> {
        self.metadata().namespace.as_deref()
    }
}

impl Validate for SluiceObject {
    fn validate(&self) -> Vec<Violation> {
        match self {
            SluiceObject::ResourceFlavor(o) => o.validate(),
            SluiceObject::ClusterQueue(o) => o.validate(),
            SluiceObject::Cohort(o) => o.validate(),
            SluiceObject::LocalQueue(o) => o.validate(),
            SluiceObject::WorkloadPriorityClass(o) => o.validate(),
            SluiceObject::Workload(o) => o.validate(),
        }
    }
}

/// A document that is not one of the Sluice kinds, kept as parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherDocument {
    /// Its `apiVersion`, when it is a mapping with a string `apiVersion`.
    pub api_version: Option<String>,
    /// Its `kind`, when it is a mapping with a string `kind`.
    pub kind: Option<String>,
    /// The whole document.
    pub value: serde_json::Value,
}

impl OtherDocument {
    /// Decodes the document into `T` (e.g. `k8s_openapi::api::batch::v1::Job`),
    /// with the field path in the error.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, (String, String)> {
        serde_path_to_error::deserialize(&self.value).map_err(|e| (e.path().to_string(), e.into_inner().to_string()))
    }
}

/// What a document holds.
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentContent {
    /// A Sluice object (boxed: the kinds are much larger than the other variant).
    Sluice(Box<SluiceObject>),
    /// Anything else.
    Other(OtherDocument),
}

/// One non-empty document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 0-based position among the non-empty documents of the stream.
    pub index: usize,
    /// 1-based line where the document starts.
    pub line: usize,
    /// What the document holds.
    pub content: DocumentContent,
}

impl Document {
    /// The Sluice object, if the document is one.
    pub fn as_sluice(&self) -> Option<&SluiceObject> {
        match &self.content {
            DocumentContent::Sluice(o) => Some(o),
            DocumentContent::Other(_) => None,
        }
    }

    /// The other document, if the document is not a Sluice object.
    pub fn as_other(&self) -> Option<&OtherDocument> {
        match &self.content {
            DocumentContent::Sluice(_) => None,
            DocumentContent::Other(o) => Some(o),
        }
    }
}

/// A document that could not be parsed or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// 0-based position among the non-empty documents of the stream.
    pub index: usize,
    /// 1-based line where the document starts.
    pub document_line: usize,
    /// Kind of the document, when it was recognised.
    pub kind: Option<String>,
    /// 1-based line and column of the error in the whole input, when known.
    pub location: Option<(usize, usize)>,
    /// Field path of the error, e.g. `spec.podSets[0].count`, when known.
    pub path: Option<String>,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.index + 1)?;
        if let Some(kind) = &self.kind {
            write!(f, " ({kind})")?;
        }
        match self.location {
            Some((line, column)) => write!(f, ", line {line}, column {column}")?,
            None => write!(f, " starting at line {}", self.document_line)?,
        }
        f.write_str(": ")?;
        if let Some(path) = &self.path {
            write!(f, "{path}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Parses a multi-document YAML stream. See the [module docs](self).
pub fn parse_manifests(input: &str) -> Result<Vec<Document>, ManifestError> {
    let mut documents = Vec::new();
    for chunk in split_documents(input) {
        if is_blank(&chunk.text) {
            continue;
        }
        let index = documents.len();
        let content = parse_chunk(index, &chunk)?;
        documents.push(Document {
            index,
            line: chunk.line,
            content,
        });
    }
    Ok(documents)
}

/// Parses a stream and returns only its Sluice objects, with the documents
/// that are not Sluice objects separately.
pub fn partition(documents: Vec<Document>) -> (Vec<SluiceObject>, Vec<Document>) {
    let mut sluice = Vec::new();
    let mut other = Vec::new();
    for d in documents {
        match d.content {
            DocumentContent::Sluice(o) => sluice.push(*o),
            DocumentContent::Other(_) => other.push(d),
        }
    }
    (sluice, other)
}

struct Chunk {
    /// 1-based line of the chunk's first line.
    line: usize,
    text: String,
}

/// Splits at `---` document markers (at column 0), keeping line numbers:
/// the marker is blanked, so columns on its line stay right.
fn split_documents(input: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = Chunk {
        line: 1,
        text: String::new(),
    };
    for (i, raw) in input.lines().enumerate() {
        let line_no = i + 1;
        let is_marker = raw == "---" || raw.starts_with("--- ") || raw.starts_with("---\t") || raw.starts_with("---#");
        if is_marker {
            chunks.push(std::mem::replace(
                &mut current,
                Chunk {
                    line: line_no,
                    text: String::new(),
                },
            ));
            current.text.push_str("   ");
            current.text.push_str(&raw[3..]);
        } else if raw == "..." || raw.starts_with("... ") || raw.starts_with('%') {
            // Document end marker or directive: not content.
        } else {
            current.text.push_str(raw);
        }
        current.text.push('\n');
    }
    chunks.push(current);
    chunks
}

fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

fn yaml_location(chunk: &Chunk, err: &serde_saphyr::Error) -> Option<(usize, usize)> {
    let loc = err.location()?;
    let line = usize::try_from(loc.line()).ok()?;
    let column = usize::try_from(loc.column()).ok()?;
    if line == 0 {
        return None;
    }
    Some((chunk.line + line - 1, column))
}

/// The parser's message without its location and source snippet (we print
/// our own location).
fn yaml_message(err: &serde_saphyr::Error) -> String {
    let text = err.without_snippet().to_string();
    // Messages end with " at line L column C"; drop that suffix.
    match text.rfind(" at line ") {
        Some(pos) => text[..pos].to_string(),
        None => text,
    }
}

fn parse_chunk(index: usize, chunk: &Chunk) -> Result<DocumentContent, ManifestError> {
    let value: serde_json::Value = serde_saphyr::from_str(&chunk.text).map_err(|e| ManifestError {
        index,
        document_line: chunk.line,
        kind: None,
        location: yaml_location(chunk, &e),
        path: None,
        message: format!("invalid YAML: {}", yaml_message(&e)),
    })?;
    let api_version = value.get("apiVersion").and_then(|v| v.as_str()).map(str::to_string);
    let kind = value.get("kind").and_then(|v| v.as_str()).map(str::to_string);
    if api_version.as_deref() == Some(API_VERSION) {
        let decoded = match kind.as_deref() {
            Some("ResourceFlavor") => Some(decode(index, chunk, "ResourceFlavor").map(SluiceObject::ResourceFlavor)),
            Some("ClusterQueue") => Some(decode(index, chunk, "ClusterQueue").map(SluiceObject::ClusterQueue)),
            Some("Cohort") => Some(decode(index, chunk, "Cohort").map(SluiceObject::Cohort)),
            Some("LocalQueue") => Some(decode(index, chunk, "LocalQueue").map(SluiceObject::LocalQueue)),
            Some("WorkloadPriorityClass") => {
                Some(decode(index, chunk, "WorkloadPriorityClass").map(SluiceObject::WorkloadPriorityClass))
            }
            Some("Workload") => Some(decode(index, chunk, "Workload").map(SluiceObject::Workload)),
            _ => None,
        };
        if let Some(decoded) = decoded {
            return decoded.map(|o| DocumentContent::Sluice(Box::new(o)));
        }
    }
    Ok(DocumentContent::Other(OtherDocument {
        api_version,
        kind,
        value,
    }))
}

fn decode<T: DeserializeOwned>(index: usize, chunk: &Chunk, kind: &str) -> Result<T, ManifestError> {
    let mut path = String::new();
    serde_saphyr::with_deserializer_from_str(&chunk.text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| ManifestError {
        index,
        document_line: chunk.line,
        kind: Some(kind.to_string()),
        location: yaml_location(chunk, &e),
        path: (!path.is_empty() && path != ".").then_some(path),
        message: yaml_message(&e),
    })
}
