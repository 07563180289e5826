//! The Trace's `spec.nodes`: the cluster's nodes, for node-aware placement.
//!
//! Each entry is `count` identical nodes of one ResourceFlavor:
//!
//! ```yaml
//! nodes:
//! - flavor: h100
//!   count: 4
//!   allocatable: {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti, pods: 110}
//!   labels: {rack: [r1, r2]}     # optional; a list is spread round-robin
//! ```
//!
//! A node carries its flavor's `nodeLabels` (so it belongs to the flavor)
//! plus the entry's `labels`, and its flavor's `nodeTaints`. A label given
//! as a list of values is spread over the entry's nodes in turn: node k of
//! the entry (from 0) gets value k mod n. Nodes are named
//! `<flavor>-<n>`, numbered per flavor from 0 in file order across entries.
//! `allocatable` is per node, Kubernetes quantities; `pods` limits the
//! number of pods, any resource not listed is 0.
//!
//! Declaring any node runs the engine with `PlacementMode::Nodes`: a
//! workload is admitted only when every pod fits on a node of its flavors.
//! So that a typo does not leave work waiting for ever, the checks here
//! refuse nodes that could not mean what was written ([`expand`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use sluice_api::strict;
use sluice_api::validation::{is_label_value, is_qualified_name};
use sluice_scheduler::{ClusterQueueSpec, FlavorSpec, NodeSpec};

use super::{Amount, Diagnostic, DocOrigin, TraceDoc, TraceWorkload};
use crate::position::Node;
use crate::scenario::Document;

/// The most nodes one scenario may declare.
pub const MAX_NODES: u64 = 100_000;

/// `count` identical nodes of one flavor.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeEntry {
    /// A ResourceFlavor of the scenario.
    pub flavor: Spanned<String>,
    #[serde(default = "one")]
    pub count: u32,
    /// Per node, milli-units.
    pub allocatable: BTreeMap<String, Amount>,
    /// Labels besides the flavor's; a list of values is spread round-robin.
    #[serde(default)]
    pub labels: BTreeMap<String, LabelValues>,
}

fn one() -> u32 {
    1
}

/// A label's value, or values spread over an entry's nodes in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelValues(pub Vec<String>);

/// A scalar as text (`zone: 1` is the label value `"1"`).
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a label value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for LabelValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LabelValues;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a label value, or a list of values spread over the nodes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LabelValues, E> {
                Ok(LabelValues(vec![v.to_string()]))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LabelValues, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LabelValues, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LabelValues, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LabelValues, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LabelValues, A::Error> {
                let mut values = Vec::new();
                while let Some(Scalar(v)) = seq.next_element()? {
                    values.push(v);
                }
                Ok(LabelValues(values))
            }
        }
        d.deserialize_any(V)
    }
}

/// `topology: required` on a job or generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TopologyEntry {
    #[serde(rename = "required")]
    Required,
}

/// A node of the scenario, with the flavor it was declared for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioNode {
    pub flavor: String,
    pub spec: NodeSpec,
}

/// Turns `spec.nodes` into nodes, checking that each one belongs to a
/// flavor as written: a known flavor, `count` ≥ 1, some allocatable and
/// none negative, valid labels that add to the flavor's without changing
/// them, the flavor's `topologyKey` among them. With any node, every
/// flavor a ClusterQueue names must have a node, and every resource a
/// workload requests must be allocatable on some node (otherwise that work
/// would wait for ever). Without nodes, `topology: required` is an error:
/// there is nothing to place pods on.
pub fn expand<'a>(
    trace: &TraceDoc,
    flavors: &[FlavorSpec],
    cluster_queues: impl Iterator<Item = &'a ClusterQueueSpec>,
    workloads: &[TraceWorkload],
    doc: &Document<'_>,
    origin: DocOrigin<'_>,
) -> Result<Vec<ScenarioNode>, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    if trace.spec.nodes.is_empty() {
        topology_without_nodes(trace, origin, &mut errors);
        return if errors.is_empty() { Ok(Vec::new()) } else { Err(errors) };
    }
    let places = Places {
        tree: serde_saphyr::from_str(doc.text).ok(),
        origin,
    };
    let by_name: BTreeMap<&str, &FlavorSpec> = flavors.iter().map(|f| (f.name.as_str(), f)).collect();
    let nodes = declared_nodes(&trace.spec.nodes, &by_name, &places, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    // Work that could never be placed: a flavor with quota but no node, a
    // resource no node has.
    flavors_without_nodes(cluster_queues, &by_name, &nodes, &places, &mut errors);
    resources_on_no_node(workloads, &nodes, &places, &mut errors);
    if errors.is_empty() { Ok(nodes) } else { Err(errors) }
}

/// Where a diagnostic about the Trace goes: the field it names when the
/// document has it, else a fallback position, else the document's first
/// line.
struct Places<'a> {
    tree: Option<Node>,
    origin: DocOrigin<'a>,
}

impl Places<'_> {
    fn at(&self, path: String, fallback: Option<serde_saphyr::Location>, message: String) -> Diagnostic {
        match self.tree.as_ref().and_then(|t| t.locate(&path)).or(fallback) {
            Some(l) => self.origin.at(l, path, message),
            None => Diagnostic {
                file: self.origin.file.into(),
                line: self.origin.line_offset + 1,
                column: 1,
                path,
                message,
            },
        }
    }
}

/// Without nodes, every `topology: required` of a job or generator is an
/// error.
fn topology_without_nodes(trace: &TraceDoc, origin: DocOrigin<'_>, errors: &mut Vec<Diagnostic>) {
    let jobs = trace.spec.jobs.iter().map(|j| &j.topology);
    let generators = trace.spec.generators.iter().map(|g| &g.topology);
    let lists = [("jobs", jobs.collect::<Vec<_>>()), ("generators", generators.collect())];
    for (list, topologies) in lists {
        for (i, t) in topologies.into_iter().enumerate() {
            if let Some(t) = t {
                errors.push(origin.at(
                    t.referenced,
                    format!("spec.{list}[{i}].topology"),
                    "topology: required places pods on nodes, and this Trace declares none (spec.nodes)",
                ));
            }
        }
    }
}

/// The nodes of every entry without errors, numbered per flavor; stops
/// at the simulator's limit on nodes.
fn declared_nodes(
    entries: &[NodeEntry],
    by_name: &BTreeMap<&str, &FlavorSpec>,
    places: &Places<'_>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<ScenarioNode> {
    let mut numbering: BTreeMap<&str, u32> = BTreeMap::new();
    let mut nodes: Vec<ScenarioNode> = Vec::new();
    let mut total: u64 = 0;
    for (i, e) in entries.iter().enumerate() {
        let p = format!("spec.nodes[{i}]");
        let Some(flavor) = by_name.get(e.flavor.value.as_str()) else {
            let hint = match strict::nearest(&e.flavor.value, by_name.keys().copied()) {
                Some(k) => format!(", did you mean `{k}`?"),
                None => format!(" (known: {})", by_name.keys().copied().collect::<Vec<_>>().join(", ")),
            };
            errors.push(places.origin.at(
                e.flavor.referenced,
                format!("{p}.flavor"),
                format!("`{}` is not a ResourceFlavor of the scenario{hint}", e.flavor.value),
            ));
            continue;
        };
        let before = errors.len();
        check_entry(&p, e, flavor, places, errors);
        total += u64::from(e.count);
        if total > MAX_NODES {
            errors.push(places.at(
                format!("{p}.count"),
                Some(e.flavor.referenced),
                format!("{total} nodes with those before, more than the simulator's limit of {MAX_NODES}"),
            ));
            break;
        }
        if errors.len() > before {
            continue;
        }
        let counter = numbering.entry(flavor.name.as_str()).or_insert(0);
        push_nodes(e, flavor, counter, &mut nodes);
    }
    nodes
}

/// Entry `e` (at `p`) describes nodes of `flavor` as written: `count` ≥ 1,
/// some allocatable and none negative, valid labels that add to the
/// flavor's, the flavor's `topologyKey` among them.
fn check_entry(p: &str, e: &NodeEntry, flavor: &FlavorSpec, places: &Places<'_>, errors: &mut Vec<Diagnostic>) {
    let here = Some(e.flavor.referenced);
    if e.count == 0 {
        errors.push(places.at(format!("{p}.count"), here, "count must be at least 1".into()));
    }
    if e.allocatable.is_empty() {
        errors.push(places.at(
            format!("{p}.allocatable"),
            here,
            "a node needs at least one allocatable resource, e.g. {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}".into(),
        ));
    }
    for (resource, amount) in &e.allocatable {
        if amount.0 < 0 {
            errors.push(places.at(
                format!("{p}.allocatable[{resource}]"),
                here,
                format!("allocatable {resource} must not be negative"),
            ));
        }
    }
    check_labels(p, e, flavor, places, errors);
    if let Some(key) = &flavor.topology_key
        && !flavor.node_labels.contains_key(key)
        && !e.labels.contains_key(key)
    {
        errors.push(places.at(
            format!("{p}.labels"),
            here,
            format!(
                "ResourceFlavor {} has topologyKey {key}: its nodes need the label {key} (e.g. labels: {{{key}: [a, b]}}), or they are in no topology domain",
                flavor.name
            ),
        ));
    }
}

/// Entry `e`'s labels are valid, each with a value, and do not change
/// one `flavor` gives its nodes.
fn check_labels(p: &str, e: &NodeEntry, flavor: &FlavorSpec, places: &Places<'_>, errors: &mut Vec<Diagnostic>) {
    let here = Some(e.flavor.referenced);
    for (key, values) in &e.labels {
        let path = format!("{p}.labels[{key}]");
        if !is_qualified_name(key) {
            errors.push(places.at(path.clone(), here, format!("`{key}` is not a valid label key")));
        }
        if values.0.is_empty() {
            errors.push(places.at(path.clone(), here, "give a value, or a list of at least one".into()));
        }
        for v in values.0.iter().filter(|v| !is_label_value(v)) {
            errors.push(places.at(path.clone(), here, format!("{v:?} is not a valid label value")));
        }
        if let Some(own) = flavor.node_labels.get(key)
            && values.0.iter().any(|v| v != own)
        {
            errors.push(places.at(
                path,
                here,
                format!(
                    "ResourceFlavor {} gives its nodes {key}={own}: a node's labels add to its flavor's, they cannot change them",
                    flavor.name
                ),
            ));
        }
    }
}

/// Entry `e`'s `count` nodes of `flavor`, named `<flavor>-<n>` from
/// `counter` on: the flavor's labels and taints, the entry's labels (a
/// list spread in turn) and allocatable.
fn push_nodes(e: &NodeEntry, flavor: &FlavorSpec, counter: &mut u32, nodes: &mut Vec<ScenarioNode>) {
    for k in 0..e.count as usize {
        let mut labels = flavor.node_labels.clone();
        for (key, values) in &e.labels {
            labels.insert(key.clone(), values.0[k % values.0.len()].clone());
        }
        nodes.push(ScenarioNode {
            flavor: flavor.name.clone(),
            spec: NodeSpec {
                name: format!("{}-{counter}", flavor.name),
                labels,
                taints: flavor.taints.clone(),
                allocatable: e.allocatable.iter().map(|(r, a)| (r.clone(), a.0)).collect(),
                schedulable: true,
            },
        });
        *counter += 1;
    }
}

/// Every flavor with quota in a ClusterQueue has a node (reported once
/// per flavor).
fn flavors_without_nodes<'a>(
    cluster_queues: impl Iterator<Item = &'a ClusterQueueSpec>,
    by_name: &BTreeMap<&str, &FlavorSpec>,
    nodes: &[ScenarioNode],
    places: &Places<'_>,
    errors: &mut Vec<Diagnostic>,
) {
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for cq in cluster_queues {
        for fq in cq.resource_groups.iter().flat_map(|g| g.flavors.iter()) {
            let Some(flavor) = by_name.get(fq.flavor.as_str()) else {
                continue;
            };
            let member = |n: &ScenarioNode| flavor.node_labels.iter().all(|(k, v)| n.spec.labels.get(k) == Some(v));
            if !nodes.iter().any(member) && reported.insert(fq.flavor.as_str()) {
                errors.push(places.at(
                    "spec.nodes".into(),
                    None,
                    format!(
                        "ResourceFlavor {} (quota of ClusterQueue {}) has no node: with spec.nodes a workload is admitted only where its pods fit, so its work would wait for ever; add nodes with flavor: {}",
                        fq.flavor, cq.name, fq.flavor
                    ),
                ));
            }
        }
    }
}

/// Every resource a workload requests is allocatable on some node
/// (reported once per resource).
fn resources_on_no_node(
    workloads: &[TraceWorkload],
    nodes: &[ScenarioNode],
    places: &Places<'_>,
    errors: &mut Vec<Diagnostic>,
) {
    let allocatable: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.spec.allocatable.keys().map(String::as_str))
        .collect();
    let mut missing: BTreeSet<&str> = BTreeSet::new();
    for w in workloads {
        for (resource, &amount) in w.pod_sets.iter().flat_map(|ps| ps.requests.iter()) {
            if amount > 0 && !allocatable.contains(resource.as_str()) && missing.insert(resource.as_str()) {
                errors.push(places.at(
                    "spec.nodes".into(),
                    None,
                    format!(
                        "{} requests {resource}, which no node has allocatable: its pods would fit nowhere",
                        w.name
                    ),
                ));
            }
        }
    }
}
