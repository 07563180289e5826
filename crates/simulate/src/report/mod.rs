//! Figures computed from a run, and their three renderings: a terminal table,
//! JSON (field names documented in `docs/simulate.md`), and an HTML report.
//!
//! Definitions (the same in every rendering):
//! - *time to admission*: from arrival to the first admission write (when
//!   the pods could first start), so API throttling counts as waiting;
//!   workloads never admitted are left out and counted as `neverAdmitted`.
//! - percentiles use the nearest-rank method ([`nearest_rank`], also
//!   `sluice bench`'s): p50 of n sorted values is the value at rank ⌈0.5·n⌉.
//! - *utilisation* of a resource: quota in use (reserved by admitted
//!   workloads, summed over the queue's flavors) integrated over the run,
//!   divided by nominal quota × the run's length. Above 100 % means the queue
//!   borrowed.
//! - *borrowed share*: the part of that usage above nominal quota (per
//!   flavor), integrated, divided by the usage integral.

pub mod html;
pub mod table;

use std::collections::BTreeMap;

use serde::Serialize;

use super::sim::{QueueSeries, RunEnd, SimOptions, SimResult};
use super::units::Millis;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Report format version; bumped only on incompatible changes.
    pub format: u32,
    pub scenario: String,
    pub options: OptionsOut,
    /// Virtual time from 0 to the last event, ms.
    pub makespan_ms: Millis,
    pub cycles: u64,
    pub api_writes: ApiWrites,
    pub totals: Group,
    pub cluster_queues: Vec<Group>,
    /// Per cohort (queues without a cohort are left out).
    pub cohorts: Vec<Group>,
    pub classes: Vec<Group>,
    /// Workloads still waiting when the run ended (they can never be
    /// admitted with this quota), with the engine's last explanation.
    pub pending_at_end: Vec<PendingOut>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingOut {
    /// `namespace/name`.
    pub name: String,
    pub class: String,
    pub cluster_queue: String,
    /// Why it waits, as the engine explains it (`null` if it never said).
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptionsOut {
    pub api_qps: Option<f64>,
    pub api_burst: u32,
    pub eviction_delay_ms: Millis,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiWrites {
    pub count: u64,
    pub mean_delay_ms: f64,
    pub max_delay_ms: Millis,
}

/// Figures for a set of workloads: one cluster queue, one class, or all.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    pub workloads: u64,
    /// Workloads admitted at least once.
    pub admitted: u64,
    pub finished: u64,
    /// Preemptions suffered (a workload preempted twice counts twice).
    pub preemptions: u64,
    /// Evictions by a stop policy.
    pub evictions: u64,
    /// Workloads that arrived and were never admitted.
    pub never_admitted: u64,
    /// Workloads the engine refused at arrival.
    pub rejected: u64,
    pub wait: WaitStats,
    /// Per resource (GPUs first); empty for classes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceUse>,
}

/// Time to admission over the admitted workloads, ms.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitStats {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: Millis,
    pub p95_ms: Millis,
    pub max_ms: Millis,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUse {
    pub resource: String,
    /// Nominal quota, in the resource's units (summed over flavors).
    pub nominal: f64,
    /// Largest amount in use at once, in units.
    pub peak: f64,
    /// Mean use ÷ nominal (0.5 = 50 %); `null` when nominal is 0.
    pub utilisation: Option<f64>,
    /// Borrowed part of the usage (0–1); `null` when nothing was used.
    pub borrowed_share: Option<f64>,
}

/// GPU resources first, then the rest by name (`cpu`, `memory`, …).
pub fn resource_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn rank(r: &str) -> u8 {
        if r == "nvidia.com/gpu" {
            0
        } else if r.contains("gpu") || r.contains("mig-") {
            1
        } else if r == "cpu" {
            2
        } else if r == "memory" {
            3
        } else {
            4
        }
    }
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// Nearest-rank percentile of sorted values: the value at rank ⌈p·n⌉.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

pub fn wait_stats(mut waits: Vec<Millis>) -> WaitStats {
    if waits.is_empty() {
        return WaitStats::default();
    }
    waits.sort_unstable();
    let n = waits.len();
    let rank = |p: f64| nearest_rank(&waits, p).unwrap_or_default();
    WaitStats {
        count: n as u64,
        mean_ms: waits.iter().map(|&w| w as f64).sum::<f64>() / n as f64,
        p50_ms: rank(0.50),
        p95_ms: rank(0.95),
        max_ms: waits[n - 1],
    }
}

/// Integrals over [0, end] of used and borrowed per resource, plus peaks.
#[derive(Default, Clone)]
struct Integrals {
    nominal: i64,
    used: f64,
    borrowed: f64,
    peak: i64,
}

fn queue_integrals(q: &QueueSeries, end: Millis, acc: &mut BTreeMap<String, Integrals>) {
    for s in &q.slots {
        acc.entry(s.resource.clone()).or_default().nominal += s.nominal;
    }
    for (k, sample) in q.samples.iter().enumerate() {
        let until = q.samples.get(k + 1).map_or(end, |n| n.at).max(sample.at);
        let dt = (until - sample.at) as f64;
        let mut per_resource: BTreeMap<&str, i64> = BTreeMap::new();
        for (slot, &used) in q.slots.iter().zip(sample.used.iter()) {
            let e = acc.entry(slot.resource.clone()).or_default();
            e.used += used as f64 * dt;
            e.borrowed += (used - slot.nominal).max(0) as f64 * dt;
            *per_resource.entry(&slot.resource).or_default() += used;
        }
        for (r, used) in per_resource {
            let e = acc.get_mut(r).expect("entry created above");
            e.peak = e.peak.max(used);
        }
    }
}

fn resources_out(acc: &BTreeMap<String, Integrals>, end: Millis) -> Vec<ResourceUse> {
    let mut names: Vec<&String> = acc.keys().collect();
    names.sort_by(|a, b| resource_order(a, b));
    names
        .into_iter()
        .map(|r| {
            let i = &acc[r];
            let span = end.max(1) as f64;
            ResourceUse {
                resource: r.clone(),
                nominal: i.nominal as f64 / 1000.0,
                peak: i.peak as f64 / 1000.0,
                utilisation: (i.nominal > 0).then(|| i.used / (i.nominal as f64 * span)),
                borrowed_share: (i.used > 0.0).then(|| i.borrowed / i.used),
            }
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    workloads: u64,
    admitted: u64,
    finished: u64,
    preemptions: u64,
    evictions: u64,
    never_admitted: u64,
    rejected: u64,
    waits: Vec<Millis>,
}

impl Tally {
    fn into_group(self, name: String, cohort: Option<String>, resources: Vec<ResourceUse>) -> Group {
        Group {
            name,
            cohort,
            workloads: self.workloads,
            admitted: self.admitted,
            finished: self.finished,
            preemptions: self.preemptions,
            evictions: self.evictions,
            never_admitted: self.never_admitted,
            rejected: self.rejected,
            wait: wait_stats(self.waits),
            resources,
        }
    }
}

pub fn build(scenario: &str, opts: &SimOptions, r: &SimResult) -> Report {
    let mut by_queue: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut by_class: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut by_cohort: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    let mut cohort_of: BTreeMap<&str, &str> = BTreeMap::new();
    for q in &r.queues {
        by_queue.entry(q.name.as_str()).or_default();
        if let Some(c) = &q.cohort {
            cohort_of.insert(q.name.as_str(), c.as_str());
            by_cohort.entry(c.as_str()).or_default();
        }
    }
    for (w, rec) in r.workloads.iter().zip(&r.records) {
        by_queue.entry(&rec.cluster_queue).or_default();
        by_class.entry(&w.class).or_default();
        let wait = rec.first_start().map(|s| s - w.arrival);
        let finished = rec.runs.last().is_some_and(|x| x.end == RunEnd::Finished);
        let apply = |t: &mut Tally| {
            t.workloads += 1;
            if rec.rejected.is_some() {
                t.rejected += 1;
            } else if let Some(wait) = wait {
                t.admitted += 1;
                t.waits.push(wait);
            } else {
                t.never_admitted += 1;
            }
            t.finished += u64::from(finished);
            t.preemptions += u64::from(rec.preempted);
            t.evictions += u64::from(rec.evicted);
        };
        apply(by_queue.get_mut(&*rec.cluster_queue).expect("inserted above"));
        apply(by_class.get_mut(w.class.as_str()).expect("inserted above"));
        apply(&mut total);
        if let Some(c) = cohort_of.get(&*rec.cluster_queue) {
            apply(by_cohort.get_mut(c).expect("inserted above"));
        }
    }

    let mut all: BTreeMap<String, Integrals> = BTreeMap::new();
    let mut per_cohort: BTreeMap<&str, BTreeMap<String, Integrals>> = BTreeMap::new();
    let mut cluster_queues = Vec::new();
    for q in &r.queues {
        let mut acc = BTreeMap::new();
        queue_integrals(q, r.end, &mut acc);
        for (res, i) in &acc {
            let mut targets = vec![all.entry(res.clone()).or_default()];
            if let Some(c) = &q.cohort {
                targets.push(
                    per_cohort
                        .entry(c.as_str())
                        .or_default()
                        .entry(res.clone())
                        .or_default(),
                );
            }
            for e in targets {
                e.nominal += i.nominal;
                e.used += i.used;
                e.borrowed += i.borrowed;
            }
        }
        let tally = by_queue.remove(q.name.as_str()).unwrap_or_default();
        cluster_queues.push(tally.into_group(q.name.clone(), q.cohort.clone(), resources_out(&acc, r.end)));
    }
    // Cluster peak per resource: replay all samples in time order.
    for (res, peak) in cluster_peaks(r.queues.iter()) {
        all.entry(res).or_default().peak = peak;
    }
    let cohorts = by_cohort
        .into_iter()
        .map(|(name, t)| {
            let mut acc = per_cohort.remove(name).unwrap_or_default();
            for (res, peak) in cluster_peaks(r.queues.iter().filter(|q| q.cohort.as_deref() == Some(name))) {
                acc.entry(res).or_default().peak = peak;
            }
            t.into_group(name.to_string(), None, resources_out(&acc, r.end))
        })
        .collect();
    // Borrowing moves quota between queues, so it is not "borrowed" for the
    // cluster as a whole: report the queues' sum, which says how much work
    // ran on lent quota.
    let totals = total.into_group("total".into(), None, resources_out(&all, r.end));
    let classes = by_class
        .into_iter()
        .map(|(name, t)| t.into_group(name.to_string(), None, Vec::new()))
        .collect();
    Report {
        format: 1,
        scenario: scenario.to_string(),
        options: OptionsOut {
            api_qps: opts.api_qps,
            api_burst: opts.api_burst,
            eviction_delay_ms: opts.eviction_delay,
        },
        makespan_ms: r.end,
        cycles: r.cycles,
        api_writes: ApiWrites {
            count: r.api_writes,
            mean_delay_ms: if r.api_writes == 0 {
                0.0
            } else {
                r.write_delay_total as f64 / r.api_writes as f64
            },
            max_delay_ms: r.write_delay_max,
        },
        totals,
        cluster_queues,
        cohorts,
        classes,
        pending_at_end: r
            .workloads
            .iter()
            .zip(&r.records)
            .filter(|(_, rec)| rec.rejected.is_none() && rec.first_start().is_none())
            .map(|(w, rec)| PendingOut {
                name: w.name.clone(),
                class: w.class.clone(),
                cluster_queue: rec.cluster_queue.to_string(),
                reason: rec.last_pending.clone(),
            })
            .collect(),
    }
}

/// Largest cluster-wide use of each resource at any instant.
fn cluster_peaks<'a>(queues: impl Iterator<Item = &'a QueueSeries>) -> BTreeMap<String, i64> {
    let queues: Vec<&QueueSeries> = queues.collect();
    // (time, queue, slot, value) events; replay keeping each slot's value.
    let mut points: Vec<(Millis, usize, usize, i64)> = Vec::new();
    for (qi, q) in queues.iter().enumerate() {
        for s in &q.samples {
            for (si, &v) in s.used.iter().enumerate() {
                points.push((s.at, qi, si, v));
            }
        }
    }
    points.sort_unstable_by_key(|p| (p.0, p.1, p.2));
    let mut current: Vec<Vec<i64>> = queues.iter().map(|q| vec![0; q.slots.len()]).collect();
    let mut sums: BTreeMap<&str, i64> = BTreeMap::new();
    let mut peaks: BTreeMap<String, i64> = BTreeMap::new();
    let mut k = 0;
    while k < points.len() {
        let t = points[k].0;
        while k < points.len() && points[k].0 == t {
            let (_, qi, si, v) = points[k];
            let res = queues[qi].slots[si].resource.as_str();
            *sums.entry(res).or_default() += v - current[qi][si];
            current[qi][si] = v;
            k += 1;
        }
        for (res, &sum) in &sums {
            let p = peaks.entry(res.to_string()).or_default();
            *p = (*p).max(sum);
        }
    }
    peaks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        // n = 10 sorted values 1..=10: p50 at rank ⌈5⌉ = 5 → 5;
        // p95 at rank ⌈9.5⌉ = 10 → 10; p0 clamps to rank 1.
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(nearest_rank(&v, 0.50), Some(5));
        assert_eq!(nearest_rank(&v, 0.95), Some(10));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        // n = 3: p50 at ⌈1.5⌉ = 2, p95 at ⌈2.85⌉ = 3.
        assert_eq!(nearest_rank(&[10, 20, 30], 0.50), Some(20));
        assert_eq!(nearest_rank(&[10, 20, 30], 0.95), Some(30));
        assert_eq!(nearest_rank::<i64>(&[], 0.5), None);
        // wait_stats (class figures, here and in sluice bench): the same rule.
        let s = wait_stats(vec![30, 10, 20]);
        assert_eq!((s.p50_ms, s.p95_ms, s.max_ms, s.mean_ms), (20, 30, 30, 20.0));
    }
}
