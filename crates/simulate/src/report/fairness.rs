//! The report's `fairness` section (present when some ClusterQueue is in a
//! cohort): how the queues of each cohort tree shared what they had.
//!
//! - *weighted share*: the engine's share of a queue ([`crate::fairness`]):
//!   what it borrows above its nominal quota, per resource summed over
//!   flavors, in thousandths of what its parent cohort can lend of that
//!   resource; the largest over resources, ÷ the queue's weight. 0 while
//!   the queue stays within its nominal quota; 1000 = it borrows all its
//!   parent can lend, at weight 1. A queue of weight 0 that borrows has
//!   share ∞ (`null` in JSON).
//! - *mean share*: the share's time-weighted mean over the run (from 0 to
//!   the makespan); *max share*: its largest value.
//! - *resource* of a cohort tree (the queues under one root cohort): the
//!   first resource, GPUs first ([`super::resource_order`]), that the
//!   tree's ClusterQueues have quota for.
//! - *mean use*: the queue's quota in use of that resource (reserved by
//!   admitted workloads, summed over flavors), integrated over the run, ÷
//!   the makespan, in the resource's units.
//! - *time share*: that integral ÷ the sum of the integrals of all queues of
//!   the tree: the queue's part of the GPU time (or of the tree's resource)
//!   the tree used; `null` when the tree used none.
//! - *Jain's fairness index* of a tree: J = (Σx)² / (n·Σx²) over the n
//!   queues of the tree that had demand (at least one workload arrived in
//!   them and was not refused by the engine) and a weight above 0, with
//!   x = mean use ÷ weight. 1 when every such queue got the same use per
//!   unit of weight; 1/n when one queue had it all. `null` when n is 0 or
//!   every x is 0. It measures equal allocation: a queue that asked for
//!   less than its part lowers it even when it got all it asked for, and
//!   when every workload finishes, each queue's use over the run is the
//!   work it asked for ÷ the makespan, so the index is set by the demand
//!   alone, whatever the order it was served in.
//! - *contended*: the time during which every queue counted in Jain's
//!   index had a workload pending (arrived, not admitted: all of them
//!   wanted more at once). *Use when contended* is the queue's mean use
//!   over that time only, and the *contended Jain's index* is Jain's index
//!   over it (x = use when contended ÷ weight): how the scheduler split
//!   the tree while nobody's demand was met. `null` when that never
//!   happened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::table::{MAX_QUEUE_ROWS, Table};
use super::{Key, Usage, resource_order};
use crate::fairness::{FairnessOutcome, QueueShares};
use crate::sim::{QueueSeries, Sample, SimResult};
use crate::units::{Millis, format_duration};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FairnessReport {
    /// Whether the engine ran with fair sharing on (the Trace's
    /// `spec.fairSharing.enable`).
    pub enabled: bool,
    /// One per cohort tree, by root name.
    pub trees: Vec<FairTree>,
    /// Every ClusterQueue in a cohort, in file order.
    pub cluster_queues: Vec<FairQueue>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FairTree {
    /// The root cohort.
    pub root: String,
    /// The resource its figures are about.
    pub resource: String,
    /// ClusterQueues in the tree.
    pub queues: u64,
    /// Queues counted in Jain's index: with demand and a weight above 0.
    pub counted: u64,
    pub jain_index: Option<f64>,
    /// Time during which every counted queue had a workload pending.
    pub contended_ms: Millis,
    /// Jain's index over that time; `null` when it is 0.
    pub contended_jain_index: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FairQueue {
    pub name: String,
    pub cohort: String,
    /// The root cohort of its tree.
    pub root: String,
    pub weight: f64,
    /// Workloads that arrived in it and were not refused (its demand).
    pub workloads: u64,
    /// `null`: ∞ (weight 0 while borrowing).
    pub mean_share: Option<f64>,
    pub max_share: Option<f64>,
    /// Mean use of the tree's resource, in its units.
    pub mean_use: f64,
    pub time_share: Option<f64>,
    /// Mean use over the tree's contended time; `null` when the queue is
    /// not counted or the tree was never contended.
    pub contended_mean_use: Option<f64>,
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²); `None` for no values or
/// all zero.
pub fn jain_index(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// The time-weighted mean and the largest of a share series over [0, end];
/// `None` for ∞.
fn mean_and_max(shares: &QueueShares, end: Millis) -> (Option<f64>, Option<f64>) {
    let mut integral = 0.0;
    let mut infinite = false;
    let mut max = 0;
    for (k, s) in shares.samples.iter().enumerate() {
        let until = shares.samples.get(k + 1).map_or(end, |n| n.at).max(s.at);
        max = max.max(s.share);
        if s.share == i64::MAX {
            infinite |= until > s.at;
        } else {
            integral += s.share as f64 * (until - s.at) as f64;
        }
    }
    let mean = (!infinite).then(|| integral / end.max(1) as f64);
    (mean, (max != i64::MAX).then_some(max as f64))
}

/// For the `counted` queues, the integral of each one's use of `resource`
/// over the instants when every one of them had a workload pending, and
/// the length of that time.
fn contended(counted: &[&QueueSeries], resource: &str, end: Millis) -> (Vec<f64>, Millis) {
    // Every sample in time order; each value holds until the queue's next.
    let mut points: Vec<(Millis, usize, &Sample)> = (counted.iter().enumerate())
        .flat_map(|(qi, q)| q.samples.iter().map(move |s| (s.at, qi, s)))
        .collect();
    points.sort_by_key(|&(at, qi, _)| (at, qi));
    let slots: Vec<Vec<usize>> = (counted.iter())
        .map(|q| {
            (0..q.slots.len())
                .filter(|&k| q.slots[k].resource == resource)
                .collect()
        })
        .collect();
    let mut pending = vec![0u32; counted.len()];
    let mut used = vec![0i64; counted.len()];
    let mut integrals = vec![0.0; counted.len()];
    let mut time = 0;
    let mut k = 0;
    while k < points.len() {
        let t = points[k].0;
        while k < points.len() && points[k].0 == t {
            let (_, qi, s) = points[k];
            pending[qi] = s.pending;
            used[qi] = slots[qi].iter().map(|&slot| s.used[slot]).sum();
            k += 1;
        }
        let until = points.get(k).map_or(end, |p| p.0).max(t);
        if !pending.is_empty() && pending.iter().all(|&p| p > 0) {
            time += until - t;
            for (i, &u) in integrals.iter_mut().zip(&used) {
                *i += u as f64 * (until - t) as f64;
            }
        }
    }
    (integrals, time)
}

/// The section's figures from a run.
pub fn build(f: &FairnessOutcome, r: &SimResult) -> FairnessReport {
    let mut roots: Vec<&str> = f.queues.iter().flatten().map(|s| s.root.as_str()).collect();
    roots.sort_unstable();
    roots.dedup();
    let mut demand: BTreeMap<&str, u64> = BTreeMap::new();
    for rec in r.records.iter().filter(|rec| rec.rejected.is_none()) {
        *demand.entry(&rec.cluster_queue).or_default() += 1;
    }
    let mut trees = Vec::new();
    let mut out: Vec<(usize, FairQueue)> = Vec::new();
    for root in roots {
        let (tree, queues) = tree_figures(root, f, r, &demand);
        trees.push(tree);
        out.extend(queues);
    }
    out.sort_by_key(|(i, _)| *i);
    FairnessReport {
        enabled: f.enabled,
        trees,
        cluster_queues: out.into_iter().map(|(_, q)| q).collect(),
    }
}

/// One cohort tree (`root`): each member queue's figures (with its index
/// among the run's queues), and the tree's fairness over the queues that
/// count (some workloads, a positive weight).
fn tree_figures(
    root: &str,
    f: &FairnessOutcome,
    r: &SimResult,
    demand: &BTreeMap<&str, u64>,
) -> (FairTree, Vec<(usize, FairQueue)>) {
    let members: Vec<(usize, &QueueShares)> = (f.queues.iter().enumerate())
        .filter_map(|(i, s)| Some((i, s.as_ref().filter(|s| s.root == root)?)))
        .collect();
    let resource = tree_resource(r, &members);
    let used = members_use(r, &members, &resource);
    let total: f64 = used.iter().sum();
    let workloads: Vec<u64> = (members.iter())
        .map(|&(i, _)| demand.get(r.queues[i].name.as_str()).copied().unwrap_or(0))
        .collect();
    let weight_of = |s: &QueueShares| s.weight.0 as f64 / 1000.0;
    let counted: Vec<usize> = (0..members.len())
        .filter(|&m| workloads[m] > 0 && weight_of(members[m].1) > 0.0)
        .collect();
    let series: Vec<&QueueSeries> = counted.iter().map(|&m| &r.queues[members[m].0]).collect();
    let (busy, contended_ms) = contended(&series, &resource, r.end);
    // Engine units in one of the resource's units (GPUs, equivalents).
    let per = sluice_api::quantity::units_per_whole(&resource) as f64;
    let busy_use = |m: usize| {
        let c = counted.iter().position(|&x| x == m)?;
        (contended_ms > 0).then(|| busy[c] / contended_ms as f64 / per)
    };
    let queues: Vec<(usize, FairQueue)> = (members.iter().zip(used).enumerate())
        .map(|(m, (&(i, shares), used))| {
            let q = &r.queues[i];
            let (mean_share, max_share) = mean_and_max(shares, r.end);
            let queue = FairQueue {
                name: q.name.clone(),
                cohort: q.cohort.clone().unwrap_or_default(),
                root: root.to_string(),
                weight: weight_of(shares),
                workloads: workloads[m],
                mean_share,
                max_share,
                mean_use: used / r.end.max(1) as f64 / per,
                time_share: (total > 0.0).then(|| used / total),
                contended_mean_use: busy_use(m),
            };
            (i, queue)
        })
        .collect();
    let counted_queues = counted.iter().map(|&m| &queues[m].1);
    let x: Vec<f64> = counted_queues.clone().map(|q| q.mean_use / q.weight).collect();
    let busy_x: Vec<f64> = counted_queues
        .filter_map(|q| q.contended_mean_use.map(|u| u / q.weight))
        .collect();
    let tree = FairTree {
        root: root.to_string(),
        resource,
        queues: members.len() as u64,
        counted: x.len() as u64,
        jain_index: jain_index(&x),
        contended_ms,
        contended_jain_index: jain_index(&busy_x),
    };
    (tree, queues)
}

/// The resource a tree's fairness is measured in: the first its queues
/// have, in report order (GPUs first).
fn tree_resource(r: &SimResult, members: &[(usize, &QueueShares)]) -> String {
    let mut resources: Vec<&str> = (members.iter())
        .flat_map(|&(i, _)| r.queues[i].slots.iter().map(|s| s.resource.as_str()))
        .collect();
    resources.sort_by(|a, b| resource_order(a, b));
    resources.first().copied().unwrap_or_default().to_string()
}

/// Each member queue's use of `resource` over the run (integral).
fn members_use(r: &SimResult, members: &[(usize, &QueueShares)], resource: &str) -> Vec<f64> {
    let key = Key {
        resource: resource.to_string(),
        flavor: None,
    };
    (members.iter())
        .map(|&(i, _)| {
            Usage::of(&r.queues[i], r.end)
                .by_resource
                .get(&key)
                .map_or(0.0, |u| u.used)
        })
        .collect()
}

/// A share for people: a whole number, or ∞.
pub(crate) fn share_text(v: Option<f64>) -> String {
    v.map_or("∞".into(), |v| format!("{v:.0}"))
}

/// An optional fraction as a percentage, or —.
pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{:.0}%", v * 100.0))
}

/// Jain's index for people, or — when it is undefined.
pub(crate) fn jain_text(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.3}"))
}

/// A queue's row: name, cohort, weight, workloads, mean and max share, mean
/// use, time share, use when contended (the terminal and HTML tables show
/// the same).
pub(crate) fn queue_row(q: &FairQueue) -> [String; 9] {
    [
        q.name.clone(),
        q.cohort.clone(),
        format!("{}", q.weight),
        q.workloads.to_string(),
        share_text(q.mean_share),
        share_text(q.max_share),
        format!("{:.1}", q.mean_use),
        pct(q.time_share),
        q.contended_mean_use.map_or("—".into(), |u| format!("{u:.1}")),
    ]
}

pub(crate) const QUEUE_HEADER: [&str; 9] = [
    "cluster queue",
    "cohort",
    "weight",
    "workloads",
    "mean share",
    "max share",
    "mean use",
    "time share",
    "use when contended",
];

/// A tree's row: root, resource, queues, queues counted, Jain's index,
/// contended time, Jain's index then.
pub(crate) fn tree_row(t: &FairTree) -> [String; 7] {
    [
        t.root.clone(),
        t.resource.clone(),
        t.queues.to_string(),
        t.counted.to_string(),
        jain_text(t.jain_index),
        format_duration(t.contended_ms),
        jain_text(t.contended_jain_index),
    ]
}

pub(crate) const TREE_HEADER: [&str; 7] = [
    "cohort tree",
    "resource",
    "queues",
    "counted",
    "Jain's index",
    "contended",
    "Jain's index when contended",
];

/// The section's title line.
pub(crate) fn title(f: &FairnessReport) -> String {
    format!(
        "Fair sharing ({}; share = what a queue borrows, in thousandths of what its parent cohort can lend, ÷ its weight; use is of the tree's resource; Jain's index over use ÷ weight of the queues with work; contended = while all of them had work pending)",
        if f.enabled { "on" } else { "off" }
    )
}

/// The terminal tables; above 40 queues, the trees only.
pub fn render_table(f: &FairnessReport, out: &mut String) {
    let _ = writeln!(out, "\n{}", title(f));
    if f.cluster_queues.len() <= MAX_QUEUE_ROWS {
        let mut t = Table::new(QUEUE_HEADER.map(String::from).to_vec());
        t.rows.extend(f.cluster_queues.iter().map(|q| queue_row(q).to_vec()));
        t.render(out);
        out.push('\n');
    }
    let mut t = Table::new(TREE_HEADER.map(String::from).to_vec());
    t.rows.extend(f.trees.iter().map(|x| tree_row(x).to_vec()));
    t.render(out);
    out.push_str(LEGEND);
}

/// What the columns mean, under the tables.
pub(crate) const LEGEND: &str = "  mean use: the queue's quota in use of the tree's resource (in its units, e.g. GPUs), averaged over the run\n  time share: the queue's part of what the whole tree used of that resource over the run\n  use when contended: mean use while every counted queue had work pending\n  counted: the queues with work and a weight above 0, over which Jain's index is taken\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fairness::ShareSample;
    use sluice_scheduler::Weight;

    #[test]
    fn jain_index_is_one_when_equal_and_one_over_n_when_one_takes_all() {
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12);
        let table: [(&[f64], f64); 6] = [
            (&[5.0, 5.0, 5.0], 1.0),
            (&[2.5, 2.5], 1.0),
            (&[9.0, 0.0, 0.0], 1.0 / 3.0),
            (&[0.0, 0.0, 0.0, 7.0], 0.25),
            // (1 + 3)² / (2 · (1 + 9)) = 16 / 20.
            (&[1.0, 3.0], 0.8),
            (&[4.0], 1.0),
        ];
        for (x, j) in table {
            assert!(close(jain_index(x), j), "{x:?}: {:?}, expected {j}", jain_index(x));
        }
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }

    #[test]
    fn shares_are_time_weighted_and_infinity_is_kept_apart() {
        let series = |samples: &[(Millis, i64)]| QueueShares {
            root: "r".into(),
            weight: Weight::default(),
            samples: samples.iter().map(|&(at, share)| ShareSample { at, share }).collect(),
        };
        // 0 for 10, 500 for 20, 250 for 10: (0 + 10 000 + 2 500) / 40.
        let s = series(&[(0, 0), (10, 500), (30, 250)]);
        assert_eq!(mean_and_max(&s, 40), (Some(312.5), Some(500.0)));
        // ∞ for any time makes the mean ∞; the max is ∞ even at the end.
        assert_eq!(mean_and_max(&series(&[(0, 0), (5, i64::MAX)]), 10), (None, None));
        assert_eq!(
            mean_and_max(&series(&[(0, 100), (10, i64::MAX)]), 10),
            (Some(100.0), None)
        );
    }
}
