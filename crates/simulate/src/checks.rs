//! What a scenario must get right besides its syntax, so that a typo is an
//! error with its place instead of a simulation that silently means
//! something else: kinds the simulator reads, fields their schema declares,
//! one object per name, names that refer to something, cohort trees
//! without cycles, and sizes the simulator can hold.

use sluice_api::transform::{ResourceTransformation, Strategy};
use std::collections::{BTreeMap, BTreeSet};

use sluice_api::strict;
use sluice_convert::adapter::AdapterError;
use sluice_scheduler::{ClusterQueueSpec, CohortSpec, Engine, LocalQueueSpec, ResourceGroupSpec};

use super::position::Node;
use super::scenario::Document;
use super::trace::{Diagnostic, DocOrigin, TraceWorkload};

/// The most workloads one scenario may expand to.
pub const MAX_WORKLOADS: u64 = 5_000_000;

/// What the loader does with a document, by its `apiVersion` and `kind`.
pub enum Class {
    /// A Sluice kind the simulator reads.
    Sluice,
    /// Not a Sluice object (a Job, a Namespace): ignored, so a cluster's
    /// manifests can be pasted in as they are.
    Other,
    /// Looks meant for the simulator but is not readable.
    Refused(Diagnostic),
}

/// Sorts a document by its head.
pub fn classify(api_version: Option<&str>, kind: Option<&str>, doc: &Document<'_>, origin: DocOrigin<'_>) -> Class {
    let Some(api_version) = api_version else {
        return Class::Other;
    };
    let kind = kind.unwrap_or("");
    let at = |path: &str, message: String| {
        let location = locate(doc, path);
        diagnostic(origin, location, path, message)
    };
    let Some(version) = api_version.strip_prefix("sluice.dev/") else {
        return Class::Other;
    };
    if version != "v1alpha1" {
        return Class::Refused(at(
            "apiVersion",
            format!("sluice.dev/{version}: expected sluice.dev/v1alpha1"),
        ));
    }
    let mut known = strict::kinds();
    known.push("Trace".to_string());
    if known.iter().any(|k| k == kind) {
        return Class::Sluice;
    }
    let hint = strict::nearest(kind, known.iter().map(String::as_str))
        .map(|k| format!(", did you mean `{k}`?"))
        .unwrap_or_else(|| format!(" (sluice.dev/v1alpha1 kinds: {})", known.join(", ")));
    Class::Refused(at("kind", format!("unknown kind `{kind}`{hint}")))
}

/// Every key of a Sluice object that its CRD schema does not declare.
pub fn unknown_fields(kind: &str, doc: &Document<'_>, origin: DocOrigin<'_>) -> Vec<Diagnostic> {
    let Some(crd) = strict::crd_of(kind) else {
        return Vec::new();
    };
    let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(doc.text) else {
        // Not valid YAML: the typed parse reports it with its position.
        return Vec::new();
    };
    strict::unknown_fields(crd, &value)
        .into_iter()
        .map(|u| {
            let location = locate(doc, &u.path);
            let mut message = format!("{kind}: unknown field `{}`", u.key);
            if let Some(s) = &u.suggestion {
                message.push_str(&format!(", did you mean `{s}`?"));
            }
            diagnostic(origin, location, &u.path, message)
        })
        .collect()
}

/// The field an error of the controller's conversion is about, if it names one.
pub fn adapter_field(e: &AdapterError) -> Option<&str> {
    match e {
        AdapterError::Quantity(q) => Some(q.field.as_str()),
        AdapterError::OutOfRange { field, .. }
        | AdapterError::TaintEffect { field, .. }
        | AdapterError::TolerationOperator { field, .. }
        | AdapterError::Missing { field }
        | AdapterError::Count { field, .. }
        | AdapterError::MinCount { field, .. } => Some(field.as_str()),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The Sluice objects read so far, by kind and name (`namespace/name` for
/// a LocalQueue), with the line of each one's `metadata.name`.
#[derive(Default)]
pub struct Declared(BTreeMap<(&'static str, String), u32>);

impl Declared {
    /// Records an object; a second one of its kind and name is an error at
    /// its `metadata.name`: applied to a cluster it would replace the first,
    /// so the scenario would not mean what it says.
    pub fn declare(
        &mut self,
        kind: &'static str,
        namespace: Option<&str>,
        name: &str,
        doc: &Document<'_>,
        origin: DocOrigin<'_>,
    ) -> Option<Diagnostic> {
        let key = match namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        };
        let here = diagnostic(origin, locate(doc, "metadata.name"), "metadata.name", String::new());
        let first = *self.0.entry((kind, key.clone())).or_insert(here.line);
        (first != here.line).then(|| Diagnostic {
            message: format!("{kind} {key} is declared twice; the first is at line {first}"),
            ..here
        })
    }
}

/// A ClusterQueue, Cohort or LocalQueue as read, with its document for
/// positions.
pub struct Placed<'a, T> {
    pub spec: T,
    pub doc: Document<'a>,
    pub origin: DocOrigin<'a>,
}

/// Names that must refer to something: every flavor a ClusterQueue or a
/// Cohort lists is a ResourceFlavor of the scenario; every Cohort has a
/// ClusterQueue or a Cohort under it (one with nothing under it is most
/// likely a misspelt name); every LocalQueue's ClusterQueue exists.
pub fn references(
    flavors: &BTreeSet<String>,
    cluster_queues: &[Placed<'_, ClusterQueueSpec>],
    cohorts: &[Placed<'_, CohortSpec>],
    local_queues: &[Placed<'_, LocalQueueSpec>],
) -> Vec<Diagnostic> {
    let mut errors = Vec::new();
    let mut quota = |kind: &str, name: &str, groups: &[ResourceGroupSpec], doc: &Document<'_>, origin| {
        for (g, group) in groups.iter().enumerate() {
            for (f, flavor) in group.flavors.iter().enumerate() {
                if flavors.contains(&flavor.flavor) {
                    continue;
                }
                let path = format!("spec.resourceGroups[{g}].flavors[{f}].name");
                let message = format!(
                    "{kind} {name}: flavor `{}` is not a ResourceFlavor of the scenario{}",
                    flavor.flavor,
                    suggestion(&flavor.flavor, flavors.iter())
                );
                errors.push(diagnostic(origin, locate(doc, &path), &path, message));
            }
        }
    };
    for cq in cluster_queues {
        quota(
            "ClusterQueue",
            &cq.spec.name,
            &cq.spec.resource_groups,
            &cq.doc,
            cq.origin,
        );
    }
    for c in cohorts {
        quota("Cohort", &c.spec.name, &c.spec.resource_groups, &c.doc, c.origin);
    }
    let named: BTreeSet<&String> = (cluster_queues.iter())
        .filter_map(|c| c.spec.cohort.as_ref())
        .chain(cohorts.iter().filter_map(|c| c.spec.parent.as_ref()))
        .collect();
    for c in cohorts.iter().filter(|c| !named.contains(&c.spec.name)) {
        let message = format!(
            "Cohort {}: nothing is under it (no ClusterQueue names it in spec.cohort, no Cohort in spec.parent){}",
            c.spec.name,
            suggestion(&c.spec.name, named.iter().copied())
        );
        errors.push(diagnostic(
            c.origin,
            locate(&c.doc, "metadata.name"),
            "metadata.name",
            message,
        ));
    }
    let names: BTreeSet<&String> = cluster_queues.iter().map(|c| &c.spec.name).collect();
    for lq in local_queues {
        if names.contains(&lq.spec.cluster_queue) {
            continue;
        }
        let path = "spec.clusterQueue";
        let message = format!(
            "LocalQueue {}: ClusterQueue `{}` is not in the scenario{}",
            lq.spec.key,
            lq.spec.cluster_queue,
            suggestion(&lq.spec.cluster_queue, names.iter().copied())
        );
        errors.push(diagnostic(lq.origin, locate(&lq.doc, path), path, message));
    }
    errors
}

/// The label the API server puts on every Namespace: its name. A
/// simulated namespace always has it, so a selector written for a cluster
/// (`kubernetes.io/metadata.name: team-a`) means the same here.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels of a scenario's namespace: those of its `v1` Namespace
/// document, if the scenario has one, plus [`NAMESPACE_NAME_LABEL`].
pub fn namespace_labels(declared: &BTreeMap<String, BTreeMap<String, String>>, ns: &str) -> BTreeMap<String, String> {
    let mut labels = declared.get(ns).cloned().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), ns.to_string());
    labels
}

/// Every LocalQueue's ClusterQueue selects its namespace, by the cluster's
/// rule ([`sluice_api::selector`]: unset selects none, `{}` all). One that
/// does not would never admit a workload: an error at its
/// `spec.clusterQueue` with the reason the controller would give.
pub fn namespace_selection(
    cluster_queues: &[sluice_api::ClusterQueue],
    local_queues: &[(&sluice_api::LocalQueue, &Placed<'_, LocalQueueSpec>)],
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<Diagnostic> {
    let specs: BTreeMap<&str, &sluice_api::v1alpha1::ClusterQueueSpec> = cluster_queues
        .iter()
        .filter_map(|c| Some((c.metadata.name.as_deref()?, &c.spec)))
        .collect();
    let mut errors = Vec::new();
    for (lq, placed) in local_queues {
        let ns = lq.metadata.namespace.as_deref().unwrap_or("default");
        let cq = lq.spec.cluster_queue.as_str();
        let Some(spec) = specs.get(cq) else { continue };
        if let Some(why) = spec.namespace_not_selected(cq, ns, &namespace_labels(namespaces, ns)) {
            let path = "spec.clusterQueue";
            let message = format!(
                "LocalQueue {}: {why}; its workloads would never be admitted",
                placed.spec.key
            );
            errors.push(diagnostic(placed.origin, locate(&placed.doc, path), path, message));
        }
    }
    errors
}

/// Cohort parent chains, by the engine's own rule: the Cohorts are given to
/// an engine in file order, as the simulation gives them, and one the
/// engine refuses (its parent chain leads back to it) is an error at its
/// `spec.parent`, naming the chain.
pub fn cohort_cycles(cohorts: &[Placed<'_, CohortSpec>]) -> Vec<Diagnostic> {
    let mut engine = Engine::default();
    (cohorts.iter())
        .filter_map(|c| {
            let e = engine.upsert_cohort(c.spec.clone()).err()?;
            Some(diagnostic(
                c.origin,
                locate(&c.doc, "spec.parent"),
                "spec.parent",
                e.to_string(),
            ))
        })
        .collect()
}

/// The Trace's `spec.resourceTransformations` for the engine; every
/// mistake at its place.
pub fn transformations(
    list: &[ResourceTransformation],
    trace: &Document<'_>,
    origin: DocOrigin<'_>,
) -> Result<Vec<sluice_scheduler::Transformation>, Vec<Diagnostic>> {
    let at = |path: String, message: String| diagnostic(origin, locate(trace, &path), &path, message);
    let violations = sluice_api::transform::validate(list);
    if !violations.is_empty() {
        return Err(violations
            .into_iter()
            .map(|v| at(format!("spec.resourceTransformations{}", v.path), v.message))
            .collect());
    }
    sluice_convert::transform::for_engine(list)
        .map_err(|e| vec![at("spec.resourceTransformations".into(), e.to_string())])
}

/// Every resource a workload requests must be covered by some ClusterQueue
/// (`nvidia.com/gpus` for `nvidia.com/gpu` would leave it pending forever),
/// or be the input of a transformation whose charged resources are. One
/// error per resource, at its first request in the Trace.
pub fn requested_resources(
    workloads: &[TraceWorkload],
    cluster_queues: &[Placed<'_, ClusterQueueSpec>],
    transforms: &[ResourceTransformation],
    trace: &Document<'_>,
    origin: DocOrigin<'_>,
) -> Vec<Diagnostic> {
    let covered: BTreeSet<&String> = cluster_queues
        .iter()
        .flat_map(|c| c.spec.resource_groups.iter())
        .flat_map(|g| g.covered_resources.iter())
        .collect();
    // What quota is charged for a request of `resource`.
    let charged = |resource: &String| -> Vec<String> {
        match transforms.iter().find(|t| t.input == *resource) {
            None => vec![resource.clone()],
            Some(t) => {
                let mut out: Vec<String> = t.outputs.keys().cloned().collect();
                if t.strategy == Strategy::Retain {
                    out.push(resource.clone());
                }
                out
            }
        }
    };
    let mut missing: Vec<(&String, &TraceWorkload)> = Vec::new();
    for w in workloads {
        for ps in &w.pod_sets {
            for (resource, amount) in &ps.requests {
                let uncovered = charged(resource).iter().any(|r| !covered.contains(r));
                if *amount != 0 && uncovered && !missing.iter().any(|(r, _)| *r == resource) {
                    missing.push((resource, w));
                }
            }
        }
    }
    let value: Option<serde_json::Value> = serde_saphyr::from_str(trace.text).ok();
    missing
        .into_iter()
        .map(|(resource, w)| {
            let path = value
                .as_ref()
                .and_then(|v| first_request(v, resource))
                .unwrap_or_else(|| "spec".to_string());
            let message = format!(
                "Trace: {} requests {resource}, which no ClusterQueue of the scenario covers{}",
                w.name,
                suggestion(resource, covered.iter().copied())
            );
            diagnostic(origin, locate(trace, &path), &path, message)
        })
        .collect()
}

/// The path of the first `requests` entry for `resource` among the Trace's
/// jobs and generators.
fn first_request(trace: &serde_json::Value, resource: &str) -> Option<String> {
    ["jobs", "generators"].into_iter().find_map(|list| {
        trace["spec"][list]
            .as_array()?
            .iter()
            .enumerate()
            .find_map(|(i, entry)| {
                entry["requests"]
                    .get(resource)
                    .map(|_| format!("spec.{list}[{i}].requests[{resource}]"))
            })
    })
}

/// `, did you mean `x`?`, or the names known, for an error about `word`.
pub(crate) fn suggestion<'a>(word: &str, known: impl Iterator<Item = &'a String>) -> String {
    let known: Vec<&String> = known.collect();
    match strict::nearest(word, known.iter().map(|s| s.as_str())) {
        Some(k) => format!(", did you mean `{k}`?"),
        None if known.is_empty() => " (none is defined)".to_string(),
        None => format!(
            " (known: {})",
            known.iter().take(8).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Where `path` is in `doc` (or its deepest existing ancestor).
pub(crate) fn locate(doc: &Document<'_>, path: &str) -> Option<serde_saphyr::Location> {
    let tree: Node = serde_saphyr::from_str(doc.text).ok()?;
    tree.locate(path)
}

/// A diagnostic at `location`, or at the document's first line without one.
pub(crate) fn diagnostic(
    origin: DocOrigin<'_>,
    location: Option<serde_saphyr::Location>,
    path: &str,
    message: String,
) -> Diagnostic {
    match location {
        Some(l) => origin.at(l, path, message),
        None => Diagnostic {
            file: origin.file.to_string(),
            line: origin.line_offset + 1,
            column: 1,
            path: path.to_string(),
            message,
        },
    }
}
