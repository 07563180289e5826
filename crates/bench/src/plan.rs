//! What a bench run creates, worked out before anything is sent.
//!
//! A scenario (`sluice simulate`'s format, read by
//! [`sluice_simulate::scenario::load_with`], counts scaled there) becomes a
//! [`Plan`]: every name carries the run id (`<run>-<name>`), every object the
//! label [`RUN_LABEL`]`=<run>`, so that runs never share objects with each
//! other or with real queues, and cleanup finds everything by label.
//!
//! | scenario | in the cluster |
//! |----------|----------------|
//! | ResourceFlavor `f` | ResourceFlavor `<run>-f` |
//! | ClusterQueue `cq`, cohort `c`, flavor `f` | ClusterQueue `<run>-cq`, cohort `<run>-c`, flavor `<run>-f` |
//! | LocalQueue `ns/lq` → `cq` | Namespace `<run>-ns`, LocalQueue `<run>-ns/lq` → `<run>-cq` |
//! | WorkloadPriorityClass | not created: each Workload gets its `spec.priority` directly, as Kueue's runner does |
//! | Trace workload `ns/name` | Workload `<run>-ns/name`, created at its arrival time |
//!
//! Workloads have one pod set per trace pod set (`main` for generated ones)
//! whose single container requests the trace's per-pod amounts; no pods are
//! ever made from them (there is no Job). A namespaceSelector of a
//! ClusterQueue is kept as written: the run's namespaces carry only the run
//! label (and their own `kubernetes.io/metadata.name`, `<run>-<ns>`), so a
//! scenario's ClusterQueues should say `namespaceSelector: {}` (as the
//! shipped ones do): unset selects no namespace, and a selector on labels
//! or names of the scenario's namespaces selects none of the run's.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;
use sluice_api::quantity::{format_for_resource, format_milli};
use sluice_api::v1alpha1::{PodSet, Workload, WorkloadSpec};
use sluice_api::validation::{Validate, Violation};

use super::track::{Limit, QueueQuota, QuotaModel};
use sluice_simulate::scenario::Manifests;
use sluice_simulate::sim::Scenario;
use sluice_simulate::trace::{SplitMix64, TracePodSet};
use sluice_simulate::units::Millis;

/// Label on everything a run creates; its value is the run id.
pub const RUN_LABEL: &str = "sluice.dev/bench-run";
/// Annotation on a Workload: its workload class.
pub const CLASS_ANNOTATION: &str = "sluice.dev/bench-class";
/// Annotation on a Workload: its run time once admitted, milliseconds.
pub const RUNTIME_ANNOTATION: &str = "sluice.dev/bench-runtime-ms";
/// Field manager of every write the harness makes.
pub const FIELD_MANAGER: &str = "sluice-bench";
/// Longest run id: names get `<run>-` in front and must stay valid.
pub const MAX_RUN_ID_LEN: usize = 20;
/// Image of the (never started) container of a bench Workload.
pub const IMAGE: &str = "registry.k8s.io/pause:3.10";

/// Scenarios shipped in the binary, by name: the same files `sluice simulate`
/// reads from `examples/simulate/`.
pub const BUILTIN_SCENARIOS: [(&str, &str); 3] = [
    (
        "kueue-baseline",
        include_str!("../../../examples/simulate/kueue-baseline.yaml"),
    ),
    (
        "kueue-large-scale",
        include_str!("../../../examples/simulate/kueue-large-scale.yaml"),
    ),
    ("deep-queue", include_str!("../../../examples/simulate/deep-queue.yaml")),
];

/// The text of a scenario and what to call it in error messages.
#[derive(Debug, Clone)]
pub struct ScenarioText {
    pub file: String,
    pub text: Cow<'static, str>,
}

/// `--scenario`: a built-in name, else a file path.
pub fn scenario_text(arg: &str) -> Result<ScenarioText, String> {
    if let Some((name, text)) = BUILTIN_SCENARIOS.iter().find(|(n, _)| *n == arg) {
        return Ok(ScenarioText {
            file: format!("examples/simulate/{name}.yaml"),
            text: Cow::Borrowed(text),
        });
    }
    let builtins: Vec<&str> = BUILTIN_SCENARIOS.iter().map(|(n, _)| *n).collect();
    match std::fs::read_to_string(arg) {
        Ok(text) => Ok(ScenarioText {
            file: arg.to_string(),
            text: Cow::Owned(text),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "--scenario {arg:?}: no such file, and not a built-in scenario ({})",
            builtins.join(", ")
        )),
        Err(e) => Err(format!("--scenario {arg:?}: cannot read the file: {e}")),
    }
}

/// A fresh run id, `sb-` and 8 hex digits.
pub fn new_run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut rng = SplitMix64::new(nanos ^ (u64::from(std::process::id()) << 40));
    format!("sb-{:08x}", rng.next_u64() as u32)
}

/// A run id must be a DNS label of at most [`MAX_RUN_ID_LEN`] characters.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let ok_chars = id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends =
        id.starts_with(|c: char| c.is_ascii_alphanumeric()) && id.ends_with(|c: char| c.is_ascii_alphanumeric());
    if id.is_empty() || id.len() > MAX_RUN_ID_LEN || !ok_chars || !ok_ends {
        return Err(format!(
            "{id:?} is not a run id: 1 to {MAX_RUN_ID_LEN} lower-case letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// One Workload of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedWorkload {
    /// In the cluster (`<run>-<scenario namespace>`).
    pub namespace: String,
    pub name: String,
    pub class: String,
    /// LocalQueue name (in `namespace`).
    pub queue: String,
    pub priority: i32,
    /// When to create it, from the start of the run.
    pub arrival: Millis,
    /// How long it runs once admitted before the harness marks it Finished.
    pub runtime: Millis,
    pub pod_sets: Vec<TracePodSet>,
}

impl PlannedWorkload {
    /// `namespace/name`, as the watch reports it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Workload object to apply.
    pub fn object(&self, run_id: &str) -> Workload {
        let pod_sets = self
            .pod_sets
            .iter()
            .map(|ps| {
                let requests: BTreeMap<String, Quantity> = ps
                    .requests
                    .iter()
                    .map(|(r, milli)| {
                        let q = format_milli(i128::from(*milli), format_for_resource(r));
                        (r.clone(), Quantity(q))
                    })
                    .collect();
                PodSet {
                    name: ps.name.clone(),
                    count: i32::try_from(ps.count).unwrap_or(i32::MAX),
                    min_count: None,
                    topology: None,
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(PodSpec {
                            restart_policy: Some("Never".into()),
                            containers: vec![Container {
                                name: "main".into(),
                                image: Some(IMAGE.into()),
                                resources: Some(ResourceRequirements {
                                    requests: Some(requests),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }),
                    },
                }
            })
            .collect();
        let mut wl = Workload::new(
            &self.name,
            WorkloadSpec {
                pod_sets,
                queue_name: self.queue.clone(),
                priority: Some(self.priority),
                priority_class_name: None,
                active: true,
            },
        );
        wl.metadata.namespace = Some(self.namespace.clone());
        wl.metadata.labels = Some(run_labels(run_id, None));
        wl.metadata.annotations = Some(BTreeMap::from([
            (CLASS_ANNOTATION.to_string(), self.class.clone()),
            (RUNTIME_ANNOTATION.to_string(), self.runtime.to_string()),
        ]));
        wl
    }
}

/// A cluster-scoped or namespaced object to apply, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Object {
    pub namespace: Option<String>,
    pub name: String,
    pub body: Value,
}

/// Everything a run creates, in the order it is created.
#[derive(Debug, Clone)]
pub struct Plan {
    pub run_id: String,
    /// The Trace's name.
    pub scenario: String,
    pub scale: f64,
    pub namespaces: Vec<String>,
    pub flavors: Vec<Object>,
    pub cluster_queues: Vec<Object>,
    pub local_queues: Vec<Object>,
    /// By arrival, then name.
    pub workloads: Vec<PlannedWorkload>,
    /// Cluster queue quotas, with the cluster's (prefixed) names.
    pub quotas: QuotaModel,
}

impl Plan {
    /// `<run>-<name>`.
    pub fn name(&self, name: &str) -> String {
        prefixed(&self.run_id, name)
    }

    /// The scenario's name of a cluster name (the run prefix removed).
    pub fn scenario_name<'a>(&self, name: &'a str) -> &'a str {
        name.strip_prefix(self.run_id.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
            .unwrap_or(name)
    }
}

fn prefixed(run_id: &str, name: &str) -> String {
    format!("{run_id}-{name}")
}

fn run_labels(run_id: &str, original: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut labels = original.cloned().unwrap_or_default();
    labels.insert(RUN_LABEL.to_string(), run_id.to_string());
    labels
}

fn meta(run_id: &str, name: String, namespace: Option<String>, original: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace,
        labels: Some(run_labels(run_id, original.labels.as_ref())),
        annotations: original.annotations.clone(),
        ..Default::default()
    }
}

fn describe(kind: &str, name: &str, v: Vec<Violation>, errors: &mut Vec<String>) {
    for v in v {
        errors.push(format!("{kind} {name}: {}: {}", v.path, v.message));
    }
}

/// The JSON of a typed object, without `status` (status is not ours to write).
fn body<T: Serialize>(obj: &T) -> Result<Value, String> {
    let mut v = serde_json::to_value(obj).map_err(|e| format!("cannot serialize: {e}"))?;
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
    }
    Ok(v)
}

/// Works out a run of `scenario` (already scaled) with id `run_id`. Every
/// problem is returned (names too long once prefixed, mostly).
pub fn build(run_id: &str, scenario: &Scenario, manifests: &Manifests, scale: f64) -> Result<Plan, Vec<String>> {
    check_run_id(run_id).map_err(|e| vec![e])?;
    let mut errors = refuse_cohorts(manifests);
    let flavors = flavors(run_id, manifests, &mut errors);
    let cluster_queues = cluster_queues(run_id, manifests, &mut errors);
    let (namespaces, local_queues) = local_queues(run_id, manifests, &mut errors);
    let workloads = workloads(run_id, scenario, &mut errors);
    let quotas = quota_model(run_id, scenario);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Plan {
        run_id: run_id.to_string(),
        scenario: scenario.name.clone(),
        scale,
        namespaces,
        flavors,
        cluster_queues,
        local_queues,
        workloads,
        quotas,
    })
}

/// The run's quota model and cleanup know ClusterQueues' own quota only:
/// a tree with quota of its own would be measured against the wrong
/// bounds, so such scenarios are refused rather than run without it.
fn refuse_cohorts(manifests: &Manifests) -> Vec<String> {
    manifests
        .cohorts
        .iter()
        .map(|c| {
            format!(
                "Cohort {}: sluice bench does not create Cohort objects; run this scenario with `sluice simulate`, or remove the Cohort (ClusterQueues still share quota through spec.cohort)",
                c.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// An object to apply, or its problem in `errors`.
fn object_of<T: Serialize>(
    kind: &str,
    namespace: Option<String>,
    name: String,
    obj: &T,
    errors: &mut Vec<String>,
) -> Option<Object> {
    match body(obj) {
        Ok(body) => Some(Object { namespace, name, body }),
        Err(e) => {
            errors.push(format!("{kind} {name}: {e}"));
            None
        }
    }
}

/// The ResourceFlavors, renamed `<run>-<name>` and labelled.
fn flavors(run_id: &str, manifests: &Manifests, errors: &mut Vec<String>) -> Vec<Object> {
    let mut flavors = Vec::new();
    for rf in &manifests.flavors {
        let name = prefixed(run_id, rf.metadata.name.as_deref().unwrap_or_default());
        let mut obj = rf.clone();
        obj.metadata = meta(run_id, name.clone(), None, &rf.metadata);
        describe("ResourceFlavor", &name, obj.validate(), errors);
        flavors.extend(object_of("ResourceFlavor", None, name, &obj, errors));
    }
    flavors
}

/// The ClusterQueues, renamed and labelled, their cohort and flavors
/// renamed too.
fn cluster_queues(run_id: &str, manifests: &Manifests, errors: &mut Vec<String>) -> Vec<Object> {
    let p = |name: &str| prefixed(run_id, name);
    let mut cluster_queues = Vec::new();
    for cq in &manifests.cluster_queues {
        let name = p(cq.metadata.name.as_deref().unwrap_or_default());
        let mut obj = cq.clone();
        obj.metadata = meta(run_id, name.clone(), None, &cq.metadata);
        obj.spec.cohort = cq.spec.cohort.as_deref().map(p);
        for group in &mut obj.spec.resource_groups {
            for f in &mut group.flavors {
                f.name = p(&f.name);
            }
        }
        describe("ClusterQueue", &name, obj.validate(), errors);
        cluster_queues.extend(object_of("ClusterQueue", None, name, &obj, errors));
    }
    cluster_queues
}

/// The LocalQueues in namespaces `<run>-<namespace>`, pointing at the
/// renamed ClusterQueues; and those namespaces, each a DNS label.
fn local_queues(run_id: &str, manifests: &Manifests, errors: &mut Vec<String>) -> (Vec<String>, Vec<Object>) {
    let mut namespaces = BTreeSet::new();
    let mut local_queues = Vec::new();
    for lq in &manifests.local_queues {
        let ns = prefixed(run_id, lq.metadata.namespace.as_deref().unwrap_or("default"));
        let name = lq.metadata.name.clone().unwrap_or_default();
        let mut obj = lq.clone();
        obj.metadata = meta(run_id, name.clone(), Some(ns.clone()), &lq.metadata);
        obj.spec.cluster_queue = prefixed(run_id, &lq.spec.cluster_queue);
        describe("LocalQueue", &format!("{ns}/{name}"), obj.validate(), errors);
        namespaces.insert(ns.clone());
        local_queues.extend(object_of("LocalQueue", Some(ns), name, &obj, errors));
    }
    for ns in &namespaces {
        if !is_dns_label(ns) {
            errors.push(format!(
                "namespace {ns:?} (the run id, '-' and the scenario's namespace) is not a DNS label of at most 63 characters: use a shorter --run-id"
            ));
        }
    }
    (namespaces.into_iter().collect(), local_queues)
}

/// The scenario's workloads, in its order; the problems of the first
/// invalid ones (until there are 50 problems).
fn workloads(run_id: &str, scenario: &Scenario, errors: &mut Vec<String>) -> Vec<PlannedWorkload> {
    let mut workloads = Vec::with_capacity(scenario.workloads.len());
    for w in &scenario.workloads {
        let (ns, name) = w.name.split_once('/').unwrap_or(("default", &w.name));
        let queue = w.local_queue.split_once('/').map_or(w.local_queue.as_str(), |(_, q)| q);
        let planned = PlannedWorkload {
            namespace: prefixed(run_id, ns),
            name: name.to_string(),
            class: w.class.clone(),
            queue: queue.to_string(),
            priority: w.priority,
            arrival: w.arrival,
            runtime: w.duration,
            pod_sets: w.pod_sets.clone(),
        };
        let v = planned.object(run_id).validate();
        if !v.is_empty() && errors.len() < 50 {
            describe("Workload", &planned.key(), v, errors);
        }
        workloads.push(planned);
    }
    workloads
}

/// The ClusterQueues' quotas, with the cluster's names.
fn quota_model(run_id: &str, scenario: &Scenario) -> QuotaModel {
    let p = |name: &str| prefixed(run_id, name);
    let mut queues = BTreeMap::new();
    for cq in &scenario.cluster_queues {
        let mut limits = BTreeMap::new();
        for group in &cq.resource_groups {
            for f in &group.flavors {
                for r in &f.resources {
                    limits.insert(
                        (p(&f.flavor), r.resource.clone()),
                        Limit {
                            nominal: r.nominal,
                            borrowing_limit: r.borrowing_limit,
                            lending_limit: r.lending_limit,
                        },
                    );
                }
            }
        }
        queues.insert(
            p(&cq.name),
            QueueQuota {
                cohort: cq.cohort.as_deref().map(p),
                limits,
            },
        );
    }
    QuotaModel::new(queues)
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests;
