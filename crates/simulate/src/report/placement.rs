//! The report's `placement` section (present when the scenario declares
//! nodes): how long work waited for room on the nodes against how long it
//! waited for quota, and the nodes it had.
//!
//! - *node wait*: a workload's time pending with a reason that says it
//!   fits quota but not the nodes ([`crate::placement`]: `NoPlacement`,
//!   or `WaitingForEvictions` with a `NoNodeFits` verdict); *quota wait*:
//!   its time pending for any other reason (quota, in the main). Summed
//!   per ClusterQueue (the one it was last admitted to, or its own) in
//!   hours of waiting, not GPU-hours; a workload never admitted counts
//!   until the end of the run.
//! - *waited for nodes*: workloads with any node wait.
//! - per flavor, the nodes declared for it, their GPUs (GPU resources
//!   summed; a MIG slice counts as one) and the GPU quota the
//!   ClusterQueues give on it (nominal, summed); with a `topologyKey`, how
//!   many domains its nodes form.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use sluice_api::resources::{is_gpu, is_mig};

use super::table::Table;
use crate::placement::PlacementOutcome;
use crate::sim::SimResult;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementReport {
    pub nodes: u64,
    /// GPUs of all nodes: devices, a time-sliced GPU once however many
    /// replicas it is advertised as; MIG slices apart.
    pub gpus: f64,
    /// MIG slices of all nodes (never summed as GPUs).
    #[serde(skip_serializing_if = "is_zero")]
    pub mig_slices: f64,
    pub node_wait_hours: f64,
    pub quota_wait_hours: f64,
    pub waited_for_nodes: u64,
    /// Flavors with nodes, in the order their nodes are declared.
    pub flavors: Vec<FlavorNodes>,
    /// Every ClusterQueue, in file order.
    pub cluster_queues: Vec<PlacementQueue>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorNodes {
    pub flavor: String,
    pub nodes: u64,
    pub gpus: f64,
    #[serde(skip_serializing_if = "is_zero")]
    pub mig_slices: f64,
    /// Nominal GPU quota on the flavor, over all ClusterQueues (in GPUs:
    /// quota of time-sliced replicas over their replicas per GPU).
    pub gpu_quota: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// Distinct values of `topologyKey` among its nodes; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementQueue {
    pub name: String,
    pub workloads: u64,
    pub waited_for_nodes: u64,
    pub node_wait_hours: f64,
    pub quota_wait_hours: f64,
}

const MS_PER_HOUR: f64 = 3_600_000.0;

/// The section's figures from a run.
pub fn build(p: &PlacementOutcome, r: &SimResult) -> PlacementReport {
    let mut queues: Vec<PlacementQueue> = r
        .queues
        .iter()
        .map(|q| PlacementQueue {
            name: q.name.clone(),
            ..PlacementQueue::default()
        })
        .collect();
    let mut total = PlacementQueue::default();
    for (rec, split) in r.records.iter().zip(&p.waits) {
        if rec.rejected.is_some() {
            continue;
        }
        let add = |q: &mut PlacementQueue| {
            q.workloads += 1;
            q.waited_for_nodes += u64::from(split.nodes_ms > 0);
            q.node_wait_hours += split.nodes_ms as f64 / MS_PER_HOUR;
            q.quota_wait_hours += split.other_ms as f64 / MS_PER_HOUR;
        };
        if let Some(q) = queues.iter_mut().find(|q| *q.name == *rec.cluster_queue) {
            add(q);
        }
        add(&mut total);
    }

    let mut flavors: Vec<FlavorNodes> = Vec::new();
    let mut domains: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let (mut gpus_total, mut mig_total) = (0.0, 0.0);
    for node in &p.nodes {
        let (gpus, mig) = devices(&node.spec);
        gpus_total += gpus;
        mig_total += mig;
        let key = p.topology_keys.get(&node.flavor);
        if let Some(value) = key.and_then(|k| node.spec.labels.get(k)) {
            domains.entry(&node.flavor).or_default().insert(value);
        }
        match flavors.iter_mut().find(|f| f.flavor == node.flavor) {
            Some(f) => {
                f.nodes += 1;
                f.gpus += gpus;
                f.mig_slices += mig;
            }
            None => flavors.push(FlavorNodes {
                flavor: node.flavor.clone(),
                nodes: 1,
                gpus,
                mig_slices: mig,
                gpu_quota: gpu_quota(r, &node.flavor) / f64::from(replicas(&node.spec)),
                topology_key: key.cloned(),
                domains: None,
            }),
        }
    }
    for f in &mut flavors {
        if f.topology_key.is_some() {
            f.domains = Some(domains.get(f.flavor.as_str()).map_or(0, |d| d.len() as u64));
        }
    }
    PlacementReport {
        nodes: p.nodes.len() as u64,
        gpus: gpus_total,
        mig_slices: mig_total,
        node_wait_hours: total.node_wait_hours,
        quota_wait_hours: total.quota_wait_hours,
        waited_for_nodes: total.waited_for_nodes,
        flavors,
        cluster_queues: queues,
    }
}

/// A node's GPUs (a time-sliced one once, not per replica) and MIG slices.
fn devices(node: &sluice_scheduler::NodeSpec) -> (f64, f64) {
    let (mut gpus, mut mig) = (0.0, 0.0);
    for (r, &a) in node.allocatable.iter().filter(|(r, _)| is_gpu(r)) {
        let units = a as f64 / 1000.0;
        if is_mig(r) {
            mig += units;
        } else {
            gpus += units / f64::from(replicas(node));
        }
    }
    (gpus, mig)
}

/// Replicas per GPU that a node advertises (1 unless it shares them).
fn replicas(node: &sluice_scheduler::NodeSpec) -> u32 {
    sluice_scheduler::sharing::replicas(&node.labels).unwrap_or(1)
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// The title's count: `24 GPUs`, `24 GPUs + 56 MIG slices`.
pub(crate) fn devices_phrase(gpus: f64, mig: f64) -> String {
    if mig == 0.0 {
        format!("{} GPUs", units(gpus))
    } else {
        format!("{} GPUs + {} MIG slices", units(gpus), units(mig))
    }
}

/// A GPUs cell: `16`, `56 MIG slices`, `8 + 56 MIG slices`.
pub(crate) fn devices_text(gpus: f64, mig: f64) -> String {
    if mig == 0.0 {
        units(gpus)
    } else if gpus == 0.0 {
        format!("{} MIG slices", units(mig))
    } else {
        format!("{} + {} MIG slices", units(gpus), units(mig))
    }
}

fn gpu_quota(r: &SimResult, flavor: &str) -> f64 {
    let milli: i64 = r
        .queues
        .iter()
        .flat_map(|q| q.slots.iter())
        .filter(|s| s.flavor == flavor && is_gpu(&s.resource) && !is_mig(&s.resource))
        .map(|s| s.nominal)
        .sum();
    milli as f64 / 1000.0
}

/// A row's figures: workloads that waited for nodes, node wait hours,
/// quota wait hours, and the node share of the waiting (the terminal and
/// HTML tables show the same).
pub(crate) fn figures(q: &PlacementQueue) -> [String; 4] {
    let waited = q.node_wait_hours + q.quota_wait_hours;
    [
        q.waited_for_nodes.to_string(),
        format!("{:.1}", q.node_wait_hours),
        format!("{:.1}", q.quota_wait_hours),
        if waited > 0.0 {
            format!("{:.0}%", q.node_wait_hours / waited * 100.0)
        } else {
            "—".into()
        },
    ]
}

impl PlacementReport {
    /// The cluster's row.
    pub(crate) fn totals(&self) -> PlacementQueue {
        PlacementQueue {
            name: "cluster".into(),
            workloads: self.cluster_queues.iter().map(|q| q.workloads).sum(),
            waited_for_nodes: self.waited_for_nodes,
            node_wait_hours: self.node_wait_hours,
            quota_wait_hours: self.quota_wait_hours,
        }
    }
}

/// A flavor's topology column: `rack: 2 domains`, or `—`.
pub(crate) fn topology_text(f: &FlavorNodes) -> String {
    match (&f.topology_key, f.domains) {
        (Some(key), Some(n)) => format!("{key}: {n} domain{}", if n == 1 { "" } else { "s" }),
        _ => "—".into(),
    }
}

/// A number of GPUs without a needless `.0`.
pub(crate) fn units(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

/// The section's title line.
pub(crate) fn title(p: &PlacementReport) -> String {
    format!(
        "Placement on nodes ({} nodes, {}; node wait = hours pending that fit quota but not on the nodes; quota wait = hours pending for any other reason, quota mostly)",
        p.nodes,
        devices_phrase(p.gpus, p.mig_slices)
    )
}

/// The terminal tables.
pub fn render_table(p: &PlacementReport, out: &mut String) {
    let _ = writeln!(out, "\n{}", title(p));
    let mut t = Table::new(
        ["flavor", "nodes", "GPUs", "GPU quota", "topology"]
            .map(String::from)
            .to_vec(),
    );
    for f in &p.flavors {
        t.rows.push(vec![
            f.flavor.clone(),
            f.nodes.to_string(),
            devices_text(f.gpus, f.mig_slices),
            units(f.gpu_quota),
            topology_text(f),
        ]);
    }
    t.render(out);
    out.push('\n');
    let mut t = Table::new(
        [
            "cluster queue",
            "waited for nodes",
            "node wait h",
            "quota wait h",
            "node share",
        ]
        .map(String::from)
        .to_vec(),
    );
    let row = |q: &PlacementQueue| {
        let mut row = vec![q.name.clone()];
        row.extend(figures(q));
        row
    };
    for q in &p.cluster_queues {
        t.rows.push(row(q));
    }
    t.rule();
    t.rows.push(row(&p.totals()));
    t.render(out);
    out.push_str(LEGEND);
}

/// What the columns mean, under the table.
const LEGEND: &str = "  waited for nodes: workloads that waited, at some point, for room on the nodes rather than for quota\n  node wait h / quota wait h: hours of waiting (not GPU-hours) with a reason of each kind\n  node share: node wait ÷ (node wait + quota wait)\n";
