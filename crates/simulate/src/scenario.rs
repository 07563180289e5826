//! Loading a scenario file: the admin's Sluice manifests plus one `Trace`.
//!
//! The file is split into YAML documents here (not by the api crate's
//! parser) so that every document keeps its first line: errors from any
//! document then carry file positions. Sluice kinds are deserialized into the
//! api crate's types, checked with their `validate()` and converted by the
//! `sluice-convert` crate (the same conversion a cluster gets); the `Trace` is
//! the simulator's own kind ([`super::trace`]). Kueue's documents are first
//! replaced by the Sluice objects they translate to ([`super::kueue`]),
//! and read as those. Other kinds (Jobs) are
//! ignored, so a cluster's manifests can be pasted in as they are, except
//! that a `v1` Namespace's labels count for ClusterQueue namespaceSelectors
//! (every namespace also has `kubernetes.io/metadata.name`, as in a
//! cluster; a LocalQueue its ClusterQueue does not select is an error); a
//! Sluice object is read strictly ([`super::checks`]): unknown kinds and
//! fields, an object declared twice, names that refer to nothing, a cycle
//! of Cohort parents and sizes past the limits are errors.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sluice_api::v1alpha1::{ClusterQueue, Cohort, IdlePolicy, LocalQueue, ResourceFlavor, WorkloadPriorityClass};
use sluice_api::validation::Validate;
use sluice_convert::adapter;
use sluice_scheduler::{ClusterQueueSpec, CohortSpec, FairSharing, FlavorSpec, LocalQueueSpec};

use super::checks::{self, Class, Placed};
use super::kueue;
use super::position::Node;
use super::sim::Scenario;
use super::trace::{self, Diagnostic, DocOrigin, ScenarioNames, ScenarioNode, TraceDoc, TraceWorkload};
use super::units::Millis;

/// One YAML document of a multi-document file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    pub text: &'a str,
    /// Lines of the file before the document's first line.
    pub line_offset: u32,
}

/// Splits a YAML stream at `---` / `...` marker lines. A marker followed by
/// content on the same line (`--- {a: 1}`) keeps that content in its document.
pub fn split_documents(text: &str) -> Vec<Document<'_>> {
    let mut docs = Vec::new();
    let mut start = 0usize; // byte offset of the current document
    let mut start_line = 0u32;
    let mut offset = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_start = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
        let is_end = bare == "..." || bare.starts_with("... ");
        if is_start || is_end {
            if offset > start {
                docs.push(Document {
                    text: &text[start..offset],
                    line_offset: start_line,
                });
            }
            if is_start && bare.len() > 3 {
                // Content after the marker: keep the line, blank the marker.
                start = offset + 3;
                start_line = n as u32;
            } else {
                start = offset + line.len();
                start_line = n as u32 + 1;
            }
        }
        offset += line.len();
    }
    if text.len() > start {
        docs.push(Document {
            text: &text[start..],
            line_offset: start_line,
        });
    }
    docs.retain(|d| {
        d.text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

/// What the loader reads of a `v1` Namespace: its name and labels.
#[derive(Deserialize)]
struct NamespaceDoc {
    metadata: NamespaceMeta,
}

#[derive(Deserialize)]
struct NamespaceMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

fn parse_doc<T: DeserializeOwned>(doc: &Document<'_>, origin: DocOrigin<'_>) -> Result<T, Diagnostic> {
    let mut path = String::new();
    serde_saphyr::with_deserializer_from_str(doc.text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| trace::saphyr_diagnostic(&e, &path, origin))
}

fn violations(
    kind: &str,
    name: &str,
    v: Vec<sluice_api::validation::Violation>,
    doc: &Document<'_>,
    origin: DocOrigin<'_>,
) -> Vec<Diagnostic> {
    // Locate each violation's field in the document (its key, or the
    // nearest ancestor that exists); the document's first line otherwise.
    let tree: Option<Node> = serde_saphyr::from_str(doc.text).ok();
    v.into_iter()
        .map(|v| {
            let (line, column) = tree
                .as_ref()
                .and_then(|t| t.locate(&v.path))
                .map(|l| (l.line() as u32 + origin.line_offset, l.column() as u32))
                .unwrap_or((origin.line_offset + 1, 1));
            Diagnostic {
                file: origin.file.into(),
                line,
                column,
                path: v.path,
                message: format!("{kind} {name}: {}", v.message),
            }
        })
        .collect()
}

/// Reads a scenario; every problem found is returned, none is skipped.
pub fn load(file: &str, text: &str) -> Result<Scenario, Vec<Diagnostic>> {
    load_with(file, text, &LoadOptions::default()).map(|(scenario, _)| scenario)
}

/// How [`load_with`] reads a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadOptions {
    /// Multiplies every generator's `count` (see [`scaled_count`]); explicit
    /// `jobs` are kept as written. 1.0 reads the file as it is.
    pub scale: f64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self { scale: 1.0 }
    }
}

/// The Sluice objects of a scenario as written (each one valid), in file
/// order: what a cluster gets when the scenario is applied to it.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub flavors: Vec<ResourceFlavor>,
    pub cluster_queues: Vec<ClusterQueue>,
    pub cohorts: Vec<Cohort>,
    pub local_queues: Vec<LocalQueue>,
    pub priority_classes: Vec<WorkloadPriorityClass>,
    /// What the importer said about the scenario's Kueue documents
    /// ([`super::kueue`]): the fields not copied as they are, one a line.
    pub kueue_notes: Vec<String>,
}

/// A generator's `count` at `scale`: `round(count × scale)`, but at least 1
/// when `count` is not 0, so that every class of the scenario still arrives
/// in every queue. `scale` must be positive and finite.
pub fn scaled_count(count: u32, scale: f64) -> u32 {
    if count == 0 {
        return 0;
    }
    let scaled = (f64::from(count) * scale).round();
    if scaled >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (scaled as u32).max(1)
    }
}

/// [`load`], with generator counts scaled, also returning the objects as
/// written (for `sluice bench`, which creates them in a cluster).
pub fn load_with(file: &str, text: &str, opts: &LoadOptions) -> Result<(Scenario, Manifests), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    // 1. Kueue's documents replaced by their Sluice objects.
    let docs = split_documents(text);
    let kueue = kueue::convert(file, &docs)?;
    // 2. Every document read: the Sluice objects, Namespaces, the Trace.
    let mut setup = Setup::new(file, kueue.notes.clone());
    for doc in kueue.apply(docs) {
        setup.read(doc, &mut errors);
    }
    // 3. Names between the objects, once every object was read: an object
    // refused above is reported at its own error, not again as "not in the
    // scenario" wherever it is named.
    let objects_read = errors.is_empty();
    if objects_read {
        setup.check_references(&mut errors);
    }
    // 4. The Trace, against those objects.
    let Some((mut trace_doc, trace_text)) = setup.trace.take() else {
        if errors.is_empty() {
            errors.push(no_trace(file));
        }
        return Err(errors);
    };
    if opts.scale != 1.0 {
        for g in &mut trace_doc.spec.generators {
            g.count = scaled_count(g.count, opts.scale);
        }
    }
    let replay = setup.read_trace(&trace_doc, &trace_text, kueue.fair_sharing, objects_read, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    // 5. The scenario, named by its Trace, else by its file.
    let name = trace_doc.metadata.and_then(|m| m.name).unwrap_or_else(|| {
        std::path::Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let Setup {
        manifests,
        flavors,
        cluster_queues,
        cohorts,
        local_queues,
        idle_reclaim,
        notice,
        budgets,
        ..
    } = setup;
    let scenario = Scenario {
        name,
        flavors,
        cluster_queues: cluster_queues.into_iter().map(|c| c.spec).collect(),
        local_queues: local_queues.into_iter().map(|l| l.spec).collect(),
        workloads: replay.workloads,
        eviction_delay: trace_doc.spec.eviction_delay.map(|d| d.0),
        idle_reclaim,
        notice,
        idle_interval: replay.idle_interval,
        nodes: replay.nodes,
        cohorts: cohorts.into_iter().map(|c| c.spec).collect(),
        fair_sharing: replay.fair_sharing,
        budgets,
        usage_half_life: trace_doc.spec.usage_half_life.map(|d| d.0),
        transformations: replay.transformations,
    };
    Ok((scenario, manifests))
}

/// The objects of a scenario read so far: each valid Sluice object as
/// written (`manifests`) and as the engine's spec, with what else the
/// scenario needs of them.
struct Setup<'a> {
    file: &'a str,
    manifests: Manifests,
    flavors: Vec<FlavorSpec>,
    cluster_queues: Vec<Placed<'a, ClusterQueueSpec>>,
    cohorts: Vec<Placed<'a, CohortSpec>>,
    local_queues: Vec<Placed<'a, LocalQueueSpec>>,
    priority_classes: BTreeMap<String, i32>,
    /// Valid policies only: validate() has refused the others.
    idle_reclaim: BTreeMap<String, IdlePolicy>,
    /// `spec.preemption.noticeSeconds` of the ClusterQueues that set it,
    /// in ms, by name.
    notice: BTreeMap<String, Millis>,
    /// `spec.budget` of the ClusterQueues that have one, by name.
    budgets: BTreeMap<String, sluice_scheduler::usage::Budget>,
    trace: Option<(TraceDoc, Document<'a>)>,
    declared: checks::Declared,
    /// A Namespace's labels, which count for namespaceSelectors.
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// What the Trace makes of the scenario.
struct Replay {
    workloads: Vec<TraceWorkload>,
    idle_interval: Option<Millis>,
    fair_sharing: FairSharing,
    nodes: Vec<ScenarioNode>,
    transformations: Vec<sluice_scheduler::Transformation>,
}

/// A Sluice kind a scenario holds.
trait SluiceObject: DeserializeOwned + Validate {
    const KIND: &'static str;
    fn meta(&self) -> &ObjectMeta;
}

macro_rules! sluice_object {
    ($($ty:ident),*) => {$(
        impl SluiceObject for $ty {
            const KIND: &'static str = stringify!($ty);
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
        }
    )*};
}
sluice_object!(ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass);

impl<'a> Setup<'a> {
    /// Nothing read yet of `file` but what the importer said of its Kueue
    /// documents.
    fn new(file: &'a str, kueue_notes: Vec<String>) -> Self {
        Setup {
            file,
            manifests: Manifests {
                kueue_notes,
                ..Manifests::default()
            },
            flavors: Vec::new(),
            cluster_queues: Vec::new(),
            cohorts: Vec::new(),
            local_queues: Vec::new(),
            priority_classes: BTreeMap::new(),
            idle_reclaim: BTreeMap::new(),
            budgets: BTreeMap::new(),
            notice: BTreeMap::new(),
            trace: None,
            declared: checks::Declared::default(),
            namespaces: BTreeMap::new(),
        }
    }

    /// One document: a Sluice object, a Namespace, the Trace, or
    /// something a scenario ignores.
    fn read(&mut self, doc: Document<'a>, errors: &mut Vec<Diagnostic>) {
        let origin = DocOrigin {
            file: self.file,
            line_offset: doc.line_offset,
        };
        let head: Head = match parse_doc(&doc, origin) {
            Ok(h) => h,
            Err(e) => return errors.push(e),
        };
        match checks::classify(head.api_version.as_deref(), head.kind.as_deref(), &doc, origin) {
            Class::Other => {
                // A Namespace's labels count for namespaceSelectors.
                if head.api_version.as_deref() == Some("v1")
                    && head.kind.as_deref() == Some("Namespace")
                    && let Ok(ns) = parse_doc::<NamespaceDoc>(&doc, origin)
                {
                    self.namespaces.insert(ns.metadata.name, ns.metadata.labels);
                }
            }
            Class::Refused(e) => errors.push(e),
            Class::Sluice => {
                let kind = head.kind.as_deref().unwrap_or("");
                errors.extend(checks::unknown_fields(kind, &doc, origin));
                self.read_sluice(kind, doc, origin, errors);
            }
        }
    }

    /// A Sluice object of `kind`, kept when it is valid and converts.
    fn read_sluice(&mut self, kind: &str, doc: Document<'a>, origin: DocOrigin<'a>, errors: &mut Vec<Diagnostic>) {
        match kind {
            "ResourceFlavor" => {
                if let Some((rf, f)) = self.converted(&doc, origin, errors, adapter::flavor) {
                    self.flavors.push(f);
                    self.manifests.flavors.push(rf);
                }
            }
            "ClusterQueue" => {
                if let Some((cq, spec)) = self.converted(&doc, origin, errors, adapter::cluster_queue) {
                    if let Some(p) = cq.spec.idle_reclaim.as_ref().and_then(|r| r.policy().ok()) {
                        self.idle_reclaim.insert(spec.name.clone(), p);
                    }
                    if let Some(secs) = cq.spec.preemption.notice_seconds {
                        self.notice.insert(spec.name.clone(), Millis::from(secs) * 1000);
                    }
                    // validate() passed: the budget converts.
                    if let Some(b) = cq
                        .spec
                        .budget
                        .as_deref()
                        .and_then(|b| sluice_convert::usage::budget(b).ok())
                    {
                        self.budgets.insert(spec.name.clone(), b);
                    }
                    self.cluster_queues.push(Placed { spec, doc, origin });
                    self.manifests.cluster_queues.push(cq);
                }
            }
            "Cohort" => {
                if let Some((c, spec)) = self.converted(&doc, origin, errors, adapter::cohort) {
                    self.cohorts.push(Placed { spec, doc, origin });
                    self.manifests.cohorts.push(c);
                }
            }
            "LocalQueue" => {
                if let Some((lq, spec)) = self.converted(&doc, origin, errors, adapter::local_queue) {
                    self.local_queues.push(Placed { spec, doc, origin });
                    self.manifests.local_queues.push(lq);
                }
            }
            "WorkloadPriorityClass" => {
                if let Some(pc) = self.valid::<WorkloadPriorityClass>(&doc, origin, errors) {
                    let name = pc.metadata.name.clone().unwrap_or_default();
                    self.priority_classes.insert(name, pc.spec.value);
                    self.manifests.priority_classes.push(pc);
                }
            }
            "Trace" => match trace::parse_trace(doc.text, origin) {
                Ok(t) if self.trace.is_none() => self.trace = Some((t, doc)),
                Ok(_) => errors.push(Diagnostic {
                    file: origin.file.into(),
                    line: doc.line_offset + 1,
                    column: 1,
                    path: String::new(),
                    message: "a scenario has exactly one Trace document; this is the second".into(),
                }),
                Err(e) => errors.push(e),
            },
            // Workloads and future kinds: not part of a scenario's setup.
            _ => {}
        }
    }

    /// A valid object of kind `T`, converted to the engine's spec by the
    /// controller's conversion (sluice-convert), so a scenario means
    /// exactly what the cluster would.
    fn converted<T: SluiceObject, S>(
        &mut self,
        doc: &Document<'a>,
        origin: DocOrigin<'a>,
        errors: &mut Vec<Diagnostic>,
        convert: impl Fn(&T) -> Result<S, adapter::AdapterError>,
    ) -> Option<(T, S)> {
        let obj = self.valid::<T>(doc, origin, errors)?;
        match convert(&obj) {
            Ok(spec) => Some((obj, spec)),
            Err(e) => {
                errors.push(adapter_diagnostic(T::KIND, &e, doc, origin.file));
                None
            }
        }
    }

    /// An object of kind `T` that parses, is declared once, and is valid.
    fn valid<T: SluiceObject>(
        &mut self,
        doc: &Document<'a>,
        origin: DocOrigin<'a>,
        errors: &mut Vec<Diagnostic>,
    ) -> Option<T> {
        let obj = parse_doc::<T>(doc, origin).map_err(|e| errors.push(e)).ok()?;
        let name = obj.meta().name.clone().unwrap_or_default();
        let namespace = obj.meta().namespace.as_deref();
        errors.extend(self.declared.declare(T::KIND, namespace, &name, doc, origin));
        let v = obj.validate();
        if v.is_empty() {
            Some(obj)
        } else {
            errors.extend(violations(T::KIND, &name, v, doc, origin));
            None
        }
    }

    /// Names between the objects refer to something, Cohort parents make
    /// no cycle, and every LocalQueue's ClusterQueue selects its namespace.
    fn check_references(&self, errors: &mut Vec<Diagnostic>) {
        let flavor_names: BTreeSet<String> = self.flavors.iter().map(|f| f.name.clone()).collect();
        errors.extend(checks::references(
            &flavor_names,
            &self.cluster_queues,
            &self.cohorts,
            &self.local_queues,
        ));
        errors.extend(checks::cohort_cycles(&self.cohorts));
        // Valid LocalQueues are kept in both lists, in the same order.
        let paired: Vec<_> = self.manifests.local_queues.iter().zip(&self.local_queues).collect();
        errors.extend(checks::namespace_selection(
            &self.manifests.cluster_queues,
            &paired,
            &self.namespaces,
        ));
    }

    /// The Trace's workloads (checked against the queues and priority
    /// classes, and their resources against the ClusterQueues when
    /// `objects_read`: every object was read), idle interval, fair sharing
    /// (the Trace's own setting, else Kueue's Configuration's, else the
    /// default) and nodes.
    fn read_trace(
        &self,
        trace_doc: &TraceDoc,
        text: &Document<'_>,
        kueue_fair_sharing: Option<FairSharing>,
        objects_read: bool,
        errors: &mut Vec<Diagnostic>,
    ) -> Replay {
        let origin = DocOrigin {
            file: self.file,
            line_offset: text.line_offset,
        };
        let lq_keys: BTreeSet<String> = self.local_queues.iter().map(|lq| lq.spec.key.clone()).collect();
        let names = ScenarioNames {
            local_queues: &lq_keys,
            priority_classes: &self.priority_classes,
        };
        let transforms = &trace_doc.spec.resource_transformations;
        let transformations = checks::transformations(transforms, text, origin)
            .map_err(|e| errors.extend(e))
            .unwrap_or_default();
        let workloads = match trace::expand(trace_doc, &names, origin) {
            Ok(w) => {
                if objects_read {
                    errors.extend(checks::requested_resources(
                        &w,
                        &self.cluster_queues,
                        transforms,
                        text,
                        origin,
                    ));
                }
                w
            }
            Err(e) => {
                errors.extend(e);
                Vec::new()
            }
        };
        let idle_interval = trace::profile::idle_interval(trace_doc.spec.idle_interval.as_ref(), origin)
            .map_err(|e| errors.push(e))
            .unwrap_or_default();
        let fair_sharing = match (trace_doc.spec.fair_sharing.as_ref(), kueue_fair_sharing) {
            (None, Some(from_kueue)) => from_kueue,
            (entry, _) => trace::fair_sharing::read(entry, origin)
                .map_err(|e| errors.push(e))
                .unwrap_or_default(),
        };
        let specs = self.cluster_queues.iter().map(|c| &c.spec);
        let nodes = trace::nodes::expand(trace_doc, &self.flavors, specs, &workloads, text, origin)
            .map_err(|e| errors.extend(e))
            .unwrap_or_default();
        Replay {
            workloads,
            idle_interval,
            fair_sharing,
            nodes,
            transformations,
        }
    }
}

fn no_trace(file: &str) -> Diagnostic {
    Diagnostic {
        file: file.into(),
        line: 1,
        column: 1,
        path: String::new(),
        message: "no Trace document (apiVersion: sluice.dev/v1alpha1, kind: Trace): nothing to simulate".into(),
    }
}

/// A conversion error of a `kind` object, at the field it names when the
/// document has it (else the document's first line).
fn adapter_diagnostic(kind: &str, e: &adapter::AdapterError, doc: &Document<'_>, file: &str) -> Diagnostic {
    let location = checks::adapter_field(e).and_then(|f| {
        let tree: Node = serde_saphyr::from_str(doc.text).ok()?;
        tree.locate(f)
    });
    Diagnostic {
        file: file.into(),
        line: location.map_or(doc.line_offset + 1, |l| l.line() as u32 + doc.line_offset),
        column: location.map_or(1, |l| l.column() as u32),
        path: String::new(),
        message: format!("{kind}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_counts_round_and_keep_every_class() {
        assert_eq!(scaled_count(350, 0.1), 35);
        assert_eq!(scaled_count(350, 0.02), 7);
        // 50 × 0.02 = 1; 4 × 0.1 = 0.4 rounds to 0 but a class never vanishes.
        assert_eq!(scaled_count(50, 0.02), 1);
        assert_eq!(scaled_count(4, 0.1), 1);
        // 11 × 0.25 = 2.75 → 3; 0 stays 0; scaling up works too.
        assert_eq!(scaled_count(11, 0.25), 3);
        assert_eq!(scaled_count(0, 10.0), 0);
        assert_eq!(scaled_count(100, 2.5), 250);
        assert_eq!(scaled_count(u32::MAX, 2.0), u32::MAX);
    }

    const SMALL: &str = "\
apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: f}
spec: {}
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq}
spec: {namespaceSelector: {}, resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]}]}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 9
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
spec:
  jobs:
  - {name: once, namespace: ns, queue: lq, arrival: 0s, requests: {cpu: 1}, duration: 1s}
  generators:
  - {class: g, count: 20, interval: 1s, duration: 1s, requests: {cpu: 1}, priorityClass: high, namespace: ns, queue: lq}
";

    #[test]
    fn load_with_scales_generators_and_keeps_the_objects() {
        let (plain, m) = load_with("s.yaml", SMALL, &LoadOptions::default()).expect("loads");
        assert_eq!(plain.workloads.len(), 21);
        assert_eq!(
            (
                m.flavors.len(),
                m.cluster_queues.len(),
                m.local_queues.len(),
                m.priority_classes.len()
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(m.local_queues[0].spec.cluster_queue, "cq");
        // × 0.25: 20 → 5 generated; the explicit job stays.
        let (scaled, _) = load_with("s.yaml", SMALL, &LoadOptions { scale: 0.25 }).expect("loads");
        assert_eq!(scaled.workloads.len(), 6);
        assert_eq!(scaled.workloads.iter().filter(|w| w.class == "g").count(), 5);
        assert!(
            scaled
                .workloads
                .iter()
                .filter(|w| w.class == "g")
                .all(|w| w.priority == 9)
        );
        // `load` is `load_with` at scale 1.
        let loaded = load("s.yaml", SMALL).expect("loads");
        assert_eq!(loaded.workloads, plain.workloads);
    }
}
