//! The `Trace` document: what arrives, when, how big it is and how long it runs.
//!
//! `Trace` (`apiVersion: sluice.dev/v1alpha1`) is a simulator-only kind; it
//! never reaches a cluster. Its `spec` holds explicit `jobs` and `generators`
//! that expand into many similar jobs (enough to express Kueue's performance
//! scenarios), and optionally the cluster's `nodes` ([`nodes`]) and the
//! engine's fair-sharing setting ([`fair_sharing`]). See
//! `docs/simulate.md` for the full reference.
//!
//! Parsing happens in two steps so that every error can name its place:
//! 1. [`parse_trace`] deserializes the document. Shape errors (a missing
//!    field, a bad duration or quantity) come from the deserializer with the
//!    line and column, and `serde_path_to_error` supplies the field path.
//! 2. [`expand`] checks what spans the scenario (does the LocalQueue exist,
//!    is the priority class known, do gang members agree) using the locations
//!    kept with [`Spanned`] and turns everything into [`TraceWorkload`]s.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::Spanned;

use super::units::{Millis, parse_duration};

mod expand;
pub mod fair_sharing;
pub mod nodes;
pub mod profile;

pub use expand::{ScenarioNames, SplitMix64, TracePodSet, TraceWorkload, expand};
pub use nodes::{NodeEntry, ScenarioNode, TopologyEntry};
pub use profile::{SegmentEntry, Utilization};

/// A problem in the scenario, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// Field path inside the document, e.g. `spec.jobs[2].requests.cpu`;
    /// empty when the problem is the document as a whole.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Where a document starts in its file, to turn document-relative positions
/// into file positions.
#[derive(Debug, Clone, Copy)]
pub struct DocOrigin<'a> {
    pub file: &'a str,
    /// Number of file lines before the document's first line.
    pub line_offset: u32,
}

impl DocOrigin<'_> {
    pub fn at(&self, loc: serde_saphyr::Location, path: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.to_string(),
            line: loc.line() as u32 + self.line_offset,
            column: loc.column() as u32,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A duration field: `90s`, `2h30m`, `150ms`; a number needs its unit (only
/// `0` goes without one), as a YAML number or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration(pub Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 90s, 2h30m or 150ms")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).map(Duration).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                parse_duration(&v.to_string()).map(Duration).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                parse_duration(&v.to_string()).map(Duration).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
                parse_duration(&v.to_string()).map(Duration).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A per-pod resource amount in milli-units, written as a Kubernetes quantity
/// (`8`, `500m`, `64Gi`) and parsed exactly by the api crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(pub i64);

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Amount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as 8, 500m or 64Gi")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Amount, E> {
                let milli = sluice_api::quantity::parse_milli("", v)
                    .map_err(|e| E::custom(format!("quantity {v:?} {}", e.kind)))?;
                i64::try_from(milli)
                    .map(Amount)
                    .map_err(|_| E::custom(format!("quantity {v:?} is too large")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceDoc {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<TraceMeta>,
    pub spec: TraceSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceMeta {
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceSpec {
    #[serde(default)]
    pub jobs: Vec<JobEntry>,
    #[serde(default)]
    pub generators: Vec<GeneratorEntry>,
    /// Default for `--eviction-delay` in this scenario.
    #[serde(default)]
    pub eviction_delay: Option<Duration>,
    /// Default for `--idle-interval`: how often idle-GPU reclaim checks.
    #[serde(default)]
    pub idle_interval: Option<Spanned<Duration>>,
    /// The cluster's nodes ([`nodes`]); any at all turns on node-aware
    /// placement.
    #[serde(default)]
    pub nodes: Vec<NodeEntry>,
    /// Fair sharing on or off, and its preemption strategies
    /// ([`fair_sharing`]); absent: on, both strategies.
    #[serde(default)]
    pub fair_sharing: Option<fair_sharing::FairSharingEntry>,
    /// Fair sharing over time: the half-life of the decayed usage that
    /// counts as borrowing (the controller's `--usage-half-life`); absent:
    /// off.
    #[serde(default)]
    pub usage_half_life: Option<Duration>,
    /// Resource transformations (the controller's
    /// `--resource-transformations`): a MIG slice as a seventh of a
    /// GPU-equivalent, for quota, fair sharing and budgets.
    #[serde(default)]
    pub resource_transformations: Vec<sluice_api::transform::ResourceTransformation>,
}

/// One explicit job: a Job with `pods` pods (its parallelism), all of which
/// must be admitted together.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobEntry {
    pub name: Spanned<String>,
    /// Workload class for the report; defaults to the job's name.
    #[serde(default)]
    pub class: Option<String>,
    pub arrival: Spanned<Duration>,
    pub namespace: String,
    /// LocalQueue name in `namespace`.
    pub queue: Spanned<String>,
    #[serde(default)]
    pub priority_class: Option<Spanned<String>>,
    #[serde(default = "one")]
    pub pods: u32,
    /// Partial admission: the job may be admitted with as few as this many
    /// pods (the pod set's `minCount`); from 1 to `pods`.
    #[serde(default)]
    pub min_count: Option<Spanned<u32>>,
    pub requests: BTreeMap<String, Amount>,
    pub duration: Duration,
    /// What the job's owner expects it to run (the `sluice.dev/expected-runtime`
    /// annotation), for start-time estimates; absent: the queue's median.
    #[serde(default)]
    pub expected_runtime: Option<Duration>,
    /// It saves its state every this much run time: preempted, it loses
    /// only the work since its last checkpoint and resumes from it.
    #[serde(default)]
    pub checkpoint_interval: Option<Duration>,
    /// Given a preemption notice (its ClusterQueue's
    /// `preemption.noticeSeconds`), it saves its state in this long and
    /// acknowledges: it loses nothing. Longer than the notice: as if absent.
    #[serde(default)]
    pub checkpoint_on_notice: Option<Duration>,
    /// Jobs sharing a gang name are admitted as one workload, one pod set each.
    #[serde(default)]
    pub gang: Option<Spanned<String>>,
    /// GPU utilisation over the run ([`profile`]); absent: always busy.
    #[serde(default)]
    pub utilization: Option<Vec<SegmentEntry>>,
    /// `required`: all its pods within one topology domain of their flavor
    /// (the `sluice.dev/topology: required` annotation); needs `spec.nodes`.
    #[serde(default)]
    pub topology: Option<Spanned<TopologyEntry>>,
    /// A serving object (a Deployment, StatefulSet or LeaderWorkerSet):
    /// it never finishes on its own but holds its GPUs until it is removed,
    /// `duration` after it arrives; preempted, it waits again and loses
    /// nothing (there is no work to keep).
    #[serde(default)]
    pub serving: bool,
    /// Its pods' node selector: `nvidia.com/gpu.sharing-strategy:
    /// time-slicing` asks for a replica of a time-sliced GPU.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
}

/// `count` similar jobs, one every `interval` from `start`, in each queue.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorEntry {
    /// Its position locates errors about the generator as a whole.
    pub class: Spanned<String>,
    pub count: u32,
    #[serde(default)]
    pub start: Option<Duration>,
    pub interval: Duration,
    pub duration: Duration,
    /// Every generated job's expected run time (not jittered), as for jobs.
    #[serde(default)]
    pub expected_runtime: Option<Duration>,
    /// As for jobs, for every job it makes.
    #[serde(default)]
    pub checkpoint_interval: Option<Duration>,
    /// As for jobs, for every job it makes.
    #[serde(default)]
    pub checkpoint_on_notice: Option<Duration>,
    #[serde(default = "one")]
    pub pods: u32,
    /// As for jobs: every job it makes may be admitted with this few pods.
    #[serde(default)]
    pub min_count: Option<Spanned<u32>>,
    pub requests: BTreeMap<String, Amount>,
    #[serde(default)]
    pub priority_class: Option<Spanned<String>>,
    /// With `queue`: the LocalQueue's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub queue: Option<Spanned<String>>,
    /// Several LocalQueues as `namespace/name`; the generator runs once per
    /// queue (`count` jobs in each).
    #[serde(default)]
    pub queues: Vec<Spanned<String>>,
    #[serde(default)]
    pub jitter: Option<Jitter>,
    /// GPU utilisation over the run of every job it makes ([`profile`]).
    #[serde(default)]
    pub utilization: Option<Vec<SegmentEntry>>,
    /// As for jobs: every job it makes within one topology domain.
    #[serde(default)]
    pub topology: Option<Spanned<TopologyEntry>>,
    /// As for jobs: every one it makes is a serving object, removed
    /// `duration` after it arrives.
    #[serde(default)]
    pub serving: bool,
    /// As for jobs: every pod it makes has this node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
}

/// Deterministic randomness: the same seed gives the same trace.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Jitter {
    pub seed: u64,
    /// Each arrival moves later by up to this fraction of `interval` (0–1).
    #[serde(default)]
    pub arrival: f64,
    /// Each run time is scaled by a factor in `1 ± duration` (0–1).
    #[serde(default)]
    pub duration: f64,
}

fn one() -> u32 {
    1
}

/// Deserializes a `Trace` document (its text starts at `origin`).
pub fn parse_trace(text: &str, origin: DocOrigin<'_>) -> Result<TraceDoc, Diagnostic> {
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    // `Spanned` fields add a `value` step to the path; no Trace field has that name.
    let doc: TraceDoc = result.map_err(|e| saphyr_diagnostic(&e, &path.replace(".value", ""), origin))?;
    if doc.kind != "Trace" || doc.api_version != "sluice.dev/v1alpha1" {
        return Err(Diagnostic {
            file: origin.file.into(),
            line: origin.line_offset + 1,
            column: 1,
            path: String::new(),
            message: format!(
                "expected apiVersion sluice.dev/v1alpha1 kind Trace, found {} {}",
                doc.api_version, doc.kind
            ),
        });
    }
    Ok(doc)
}

/// Turns a serde-saphyr error into a diagnostic; `path` is the field path
/// where deserialization stopped (`.` means the document root).
pub fn saphyr_diagnostic(e: &serde_saphyr::Error, path: &str, origin: DocOrigin<'_>) -> Diagnostic {
    let (line, column) = e
        .location()
        .map(|l| (l.line() as u32, l.column() as u32))
        .unwrap_or((1, 1));
    let message = plain_message(e);
    Diagnostic {
        file: origin.file.into(),
        line: line + origin.line_offset,
        column,
        path: if path == "." { String::new() } else { path.to_string() },
        message,
    }
}

/// The error's message without serde-saphyr's own position suffix or snippet.
fn plain_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    let first = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    first.trim_start_matches("error: ").to_string()
}
