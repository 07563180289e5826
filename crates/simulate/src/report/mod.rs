//! Figures computed from a run, and their three renderings: a terminal table,
//! JSON (field names documented in `docs/simulate.md`), and an HTML report.
//!
//! Definitions (the same in every rendering):
//! - *time to admission*: from arrival to the admission write of the
//!   workload's latest admission (the one it finished in, for a finished
//!   workload), as Kueue's benchmark recorder and `sluice bench` count it:
//!   a workload preempted twice waited until its third start. API
//!   throttling counts as waiting. Workloads never admitted are left out
//!   and counted as `neverAdmitted`. *Time to first admission* is beside it.
//! - *completion time*: from arrival to finishing (finished workloads);
//!   *slowdown*: completion time ÷ the workload's own run time (1 = it
//!   neither waited nor lost work).
//! - *GPU-hours lost to preemption*: for every run cut short by preemption
//!   or a stop policy, its GPUs (`nvidia.com/gpu` and other GPU resources,
//!   MIG slices counted as units) × how long it had run (through its
//!   notice, if it had one), less the work it kept by checkpoints
//!   ([`crate::sim::checkpoint`]).
//! - percentiles use the nearest-rank method ([`nearest_rank`], also
//!   `sluice bench`'s): p50 of n sorted values is the value at rank ⌈0.5·n⌉.
//! - *utilisation* of a resource: quota in use (reserved by admitted
//!   workloads, summed over the queue's flavors) integrated over the run,
//!   divided by nominal quota × the run's length. Above 100 % means the queue
//!   borrowed.
//! - *borrowed share*: the part of that usage above nominal quota (per
//!   flavor), integrated, divided by the usage integral.
//! - the `idle` section (idle-GPU reclaim) is defined in [`idle`]; runs
//!   ended by idle reclaim are not counted as lost to preemption.
//! - the `forecast` section (start-time estimates) is defined in
//!   [`forecast`].
//! - the `placement` section (waits for nodes against waits for quota,
//!   when the scenario declares nodes) is defined in [`placement`].
//! - the `fairness` section (weighted shares and Jain's index, when some
//!   ClusterQueue is in a cohort) is defined in [`fairness`].

pub mod backfill;
mod column;
pub mod fairness;
pub mod forecast;
pub mod html;
pub mod idle;
pub mod placement;
mod stats;
pub mod table;
pub mod usage;

pub use column::{Column, resource_order};
pub use stats::{RatioStats, WaitStats, nearest_rank, ratio_stats, wait_stats};

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_api::resources::is_gpu;

use super::sim::{QueueSeries, RunEnd, SimOptions, SimResult, WorkloadRecord};
use super::trace::TraceWorkload;
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
    /// Every workload's own figures, in trace order.
    pub workloads: Vec<WorkloadOut>,
    /// Workloads still waiting when the run ended (they can never be
    /// admitted with this quota), with the engine's last explanation.
    pub pending_at_end: Vec<PendingOut>,
    /// Idle-GPU reclaim; only when some ClusterQueue has `idleReclaim` or
    /// some workload a utilisation profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<idle::IdleReport>,
    /// Start-time estimates against actual admissions; only with
    /// `--forecast`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast: Option<forecast::ForecastReport>,
    /// Waits for nodes against waits for quota; only when the scenario
    /// declares nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<placement::PlacementReport>,
    /// Weighted shares and Jain's index per cohort tree; only when some
    /// ClusterQueue is in a cohort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<fairness::FairnessReport>,
    /// Figures with backfill and without; only when some ClusterQueue has
    /// `backfill: Reserve`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill: Option<backfill::BackfillReport>,
    /// GPU-hours by queue against budgets; only when some ClusterQueue
    /// has a budget or the run a usage half-life.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<usage::UsageReport>,
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

/// One workload's figures (times in ms of virtual time).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadOut {
    pub name: String,
    pub class: String,
    pub cluster_queue: String,
    pub arrival_ms: Millis,
    /// Own run time, from the trace.
    pub duration_ms: Millis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_to_first_admission_ms: Option<Millis>,
    /// Time to its latest admission.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_ms: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    pub preemptions: u32,
    pub evictions: u32,
    pub gpu_hours_lost: f64,
    /// Time pending for room on the nodes (see [`placement`]); only when
    /// the scenario declares nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_wait_ms: Option<Millis>,
    /// Time pending for any other reason; only with nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_wait_ms: Option<Millis>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptionsOut {
    pub api_qps: Option<f64>,
    pub api_burst: u32,
    pub api_latency_ms: Millis,
    pub finish_lag_ms: Millis,
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
    /// Serving objects removed by their owners while they waited (never
    /// admitted, and not waiting any more).
    #[serde(skip_serializing_if = "is_zero")]
    pub withdrawn: u64,
    /// Time to admission (the latest one), over the admitted workloads.
    pub wait: WaitStats,
    /// Time to the first admission, over the same workloads.
    pub wait_to_first_admission: WaitStats,
    /// Arrival to finish, over the finished workloads.
    pub completion: WaitStats,
    /// Completion time ÷ own run time, over the finished workloads with a
    /// run time.
    pub slowdown: RatioStats,
    /// GPU-hours of runs cut short by preemption or a stop policy.
    pub gpu_hours_lost: f64,
    /// Per resource (GPUs first), summed over flavors; empty for classes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceUse>,
    /// Per (resource, flavor), GPUs first: an H100 is not an L4, and
    /// borrowing is per flavor. Empty for classes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<ResourceUse>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUse {
    pub resource: String,
    /// The flavor, in [`Group::flavors`]; absent in the per-resource sums.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// Nominal quota, in the resource's units (summed over flavors).
    pub nominal: f64,
    /// Largest amount in use at once, in units.
    pub peak: f64,
    /// Mean use ÷ nominal (0.5 = 50 %); `null` when nominal is 0.
    pub utilisation: Option<f64>,
    /// Borrowed part of the usage (0–1); `null` when nothing was used.
    pub borrowed_share: Option<f64>,
}

/// A workload's figures from its record.
fn workload_out(w: &TraceWorkload, rec: &WorkloadRecord) -> WorkloadOut {
    let first = rec.first_start();
    let latest = rec.latest_start();
    let completion = rec.finished_at().map(|f| f - w.arrival);
    let gpus: i64 = w
        .pod_sets
        .iter()
        .flat_map(|ps| ps.requests.iter().map(move |(r, &a)| (r, a * i64::from(ps.count))))
        .filter(|(r, _)| is_gpu(r))
        .map(|(_, a)| a)
        .sum();
    // What a cut run did, through its notice, less what it kept.
    let lost_ms: i64 = rec
        .runs
        .iter()
        .filter(|r| matches!(r.end, RunEnd::Preempted | RunEnd::Evicted))
        .filter_map(|r| Some(r.ended_at? + r.ran_on_ms - r.started_at? - r.kept_ms))
        .map(|d| d.max(0))
        .sum();
    WorkloadOut {
        name: w.name.clone(),
        class: w.class.clone(),
        cluster_queue: rec.cluster_queue.to_string(),
        arrival_ms: w.arrival,
        duration_ms: w.duration,
        wait_to_first_admission_ms: first.map(|s| s - w.arrival),
        wait_ms: latest.map(|s| s - w.arrival),
        completion_ms: completion,
        slowdown: completion
            .filter(|_| w.duration > 0)
            .map(|c| c as f64 / w.duration as f64),
        preemptions: rec.preempted,
        evictions: rec.evicted,
        gpu_hours_lost: gpus as f64 / 1000.0 * lost_ms as f64 / 3_600_000.0,
        node_wait_ms: None,
        quota_wait_ms: None,
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

/// What integrals are kept per: a resource (summed over flavors), or a
/// (resource, flavor) pair.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    resource: String,
    flavor: Option<String>,
}

impl Key {
    fn of(slot: &super::sim::Slot, per_flavor: bool) -> Self {
        Self {
            resource: slot.resource.clone(),
            flavor: per_flavor.then(|| slot.flavor.clone()),
        }
    }
}

fn queue_integrals(q: &QueueSeries, end: Millis, per_flavor: bool, acc: &mut BTreeMap<Key, Integrals>) {
    for s in &q.slots {
        acc.entry(Key::of(s, per_flavor)).or_default().nominal += s.nominal;
    }
    for (k, sample) in q.samples.iter().enumerate() {
        let until = q.samples.get(k + 1).map_or(end, |n| n.at).max(sample.at);
        let dt = (until - sample.at) as f64;
        let mut per_key: BTreeMap<Key, i64> = BTreeMap::new();
        for (slot, &used) in q.slots.iter().zip(sample.used.iter()) {
            let key = Key::of(slot, per_flavor);
            let e = acc.entry(key.clone()).or_default();
            e.used += used as f64 * dt;
            // Borrowing is per slot: a flavor above its nominal quota
            // borrows even while another flavor of the queue sits idle.
            e.borrowed += (used - slot.nominal).max(0) as f64 * dt;
            *per_key.entry(key).or_default() += used;
        }
        for (key, used) in per_key {
            let e = acc.get_mut(&key).expect("entry created above");
            e.peak = e.peak.max(used);
        }
    }
}

/// Engine units in one whole unit of `resource`.
fn per_whole(resource: &str) -> f64 {
    sluice_api::quantity::units_per_whole(resource) as f64
}

fn resources_out(acc: &BTreeMap<Key, Integrals>, end: Millis) -> Vec<ResourceUse> {
    let mut keys: Vec<&Key> = acc.keys().collect();
    keys.sort_by(|a, b| resource_order(&a.resource, &b.resource).then_with(|| a.flavor.cmp(&b.flavor)));
    keys.into_iter()
        .map(|key| {
            let i = &acc[key];
            let span = end.max(1) as f64;
            ResourceUse {
                resource: key.resource.clone(),
                flavor: key.flavor.clone(),
                nominal: i.nominal as f64 / per_whole(&key.resource),
                peak: i.peak as f64 / per_whole(&key.resource),
                utilisation: (i.nominal > 0).then(|| i.used / (i.nominal as f64 * span)),
                borrowed_share: (i.used > 0.0).then(|| i.borrowed / i.used),
            }
        })
        .collect()
}

/// Per resource and per (resource, flavor) figures of a set of queues.
#[derive(Default)]
struct Usage {
    by_resource: BTreeMap<Key, Integrals>,
    by_flavor: BTreeMap<Key, Integrals>,
}

impl Usage {
    fn of(q: &QueueSeries, end: Millis) -> Self {
        let mut u = Self::default();
        queue_integrals(q, end, false, &mut u.by_resource);
        queue_integrals(q, end, true, &mut u.by_flavor);
        u
    }

    /// Adds another queue's integrals (peaks are set separately: the peak
    /// of a sum is not the sum of peaks).
    fn add(&mut self, other: &Usage) {
        for (mine, theirs) in [
            (&mut self.by_resource, &other.by_resource),
            (&mut self.by_flavor, &other.by_flavor),
        ] {
            for (key, i) in theirs {
                let e = mine.entry(key.clone()).or_default();
                e.nominal += i.nominal;
                e.used += i.used;
                e.borrowed += i.borrowed;
            }
        }
    }

    /// Adds a Cohort's own quota to the nominal capacity.
    fn add_capacity(&mut self, q: &super::sim::CohortQuota) {
        for (per_flavor, acc) in [(false, &mut self.by_resource), (true, &mut self.by_flavor)] {
            let key = Key {
                resource: q.resource.clone(),
                flavor: per_flavor.then(|| q.flavor.clone()),
            };
            acc.entry(key).or_default().nominal += q.nominal;
        }
    }

    /// Sets the peaks of these queues, replayed together.
    fn set_peaks<'a>(&mut self, queues: impl Iterator<Item = &'a QueueSeries> + Clone) {
        for (per_flavor, acc) in [(false, &mut self.by_resource), (true, &mut self.by_flavor)] {
            for (key, peak) in cluster_peaks(queues.clone(), per_flavor) {
                acc.entry(key).or_default().peak = peak;
            }
        }
    }
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
    withdrawn: u64,
    waits: Vec<Millis>,
    first_waits: Vec<Millis>,
    completions: Vec<Millis>,
    slowdowns: Vec<f64>,
    gpu_hours_lost: f64,
}

impl Tally {
    fn into_group(self, name: String, cohort: Option<String>, usage: Option<(&Usage, Millis)>) -> Group {
        let (resources, flavors) = match usage {
            Some((u, end)) => (resources_out(&u.by_resource, end), resources_out(&u.by_flavor, end)),
            None => (Vec::new(), Vec::new()),
        };
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
            withdrawn: self.withdrawn,
            wait: wait_stats(self.waits),
            wait_to_first_admission: wait_stats(self.first_waits),
            completion: wait_stats(self.completions),
            slowdown: ratio_stats(self.slowdowns),
            gpu_hours_lost: self.gpu_hours_lost,
            resources,
            flavors,
        }
    }
}

pub fn build(scenario: &str, opts: &SimOptions, r: &SimResult) -> Report {
    // 1. Each workload's figures, tallied per queue, class and cohort, and
    //    in total.
    let (mut tallies, workloads) = Tallies::count(r);
    // 2. Each queue's quota in use, and the cohorts' and the cluster's.
    let usages: Vec<Usage> = r.queues.iter().map(|q| Usage::of(q, r.end)).collect();
    let cluster_queues = (r.queues.iter().zip(&usages))
        .map(|(q, usage)| {
            let tally = tallies.by_queue.remove(q.name.as_str()).unwrap_or_default();
            tally.into_group(q.name.clone(), q.cohort.clone(), Some((usage, r.end)))
        })
        .collect();
    let (all, mut per_cohort) = combined_usage(r, &usages);
    let cohorts = (tallies.by_cohort.into_iter())
        .map(|(name, t)| {
            let mut usage = per_cohort.remove(name).unwrap_or_default();
            usage.set_peaks(r.queues.iter().filter(|q| q.cohort.as_deref() == Some(name)));
            t.into_group(name.to_string(), None, Some((&usage, r.end)))
        })
        .collect();
    // Borrowing moves quota between queues, so it is not "borrowed" for the
    // cluster as a whole: report the queues' sum, which says how much work
    // ran on lent quota.
    let totals = tallies.total.into_group("total".into(), None, Some((&all, r.end)));
    let classes = (tallies.by_class.into_iter())
        .map(|(name, t)| t.into_group(name.to_string(), None, None))
        .collect();
    // 3. The report, with each optional part's.
    let mut report = Report {
        format: 2,
        scenario: scenario.to_string(),
        options: OptionsOut {
            api_qps: opts.api_qps,
            api_burst: opts.api_burst,
            api_latency_ms: opts.api_latency,
            finish_lag_ms: opts.finish_lag,
            eviction_delay_ms: opts.eviction_delay,
        },
        makespan_ms: r.end,
        cycles: r.cycles,
        api_writes: api_writes(r),
        totals,
        cluster_queues,
        cohorts,
        classes,
        workloads,
        pending_at_end: pending_at_end(r),
        idle: r.idle.as_ref().map(|o| idle::build(o, r)),
        forecast: forecast::build(r),
        placement: r.placement.as_ref().map(|p| placement::build(p, r)),
        fairness: r.fairness.as_ref().map(|f| fairness::build(f, r)),
        backfill: None,
        usage: r.usage.as_ref().map(usage::build),
    };
    // 4. Against the run with no queue reserving.
    if let Some(baseline) = &r.without_backfill {
        let without = build(scenario, opts, &baseline.run);
        report.backfill = Some(backfill::build(baseline, &report, &without));
    }
    report
}

/// The tallies of every ClusterQueue, workload class and cohort, and of
/// the whole cluster.
struct Tallies<'a> {
    by_queue: BTreeMap<&'a str, Tally>,
    by_class: BTreeMap<&'a str, Tally>,
    by_cohort: BTreeMap<&'a str, Tally>,
    total: Tally,
}

impl<'a> Tallies<'a> {
    /// Each workload's figures, counted in its queue, class, cohort and
    /// the total (every queue and cohort present, even with no workload).
    fn count(r: &'a SimResult) -> (Self, Vec<WorkloadOut>) {
        let mut tallies = Tallies {
            by_queue: BTreeMap::new(),
            by_class: BTreeMap::new(),
            by_cohort: BTreeMap::new(),
            total: Tally::default(),
        };
        let mut cohort_of: BTreeMap<&str, &str> = BTreeMap::new();
        for q in &r.queues {
            tallies.by_queue.entry(q.name.as_str()).or_default();
            if let Some(c) = &q.cohort {
                cohort_of.insert(q.name.as_str(), c.as_str());
                tallies.by_cohort.entry(c.as_str()).or_default();
            }
        }
        let mut workloads = Vec::with_capacity(r.workloads.len());
        for (i, (w, rec)) in r.workloads.iter().zip(&r.records).enumerate() {
            let mut out = workload_out(w, rec);
            if let Some(split) = r.placement.as_ref().and_then(|p| p.waits.get(i)) {
                out.node_wait_ms = Some(split.nodes_ms);
                out.quota_wait_ms = Some(split.other_ms);
            }
            tallies.by_queue.entry(&rec.cluster_queue).or_default().add(rec, &out);
            tallies.by_class.entry(&w.class).or_default().add(rec, &out);
            tallies.total.add(rec, &out);
            if let Some(c) = cohort_of.get(&*rec.cluster_queue) {
                tallies.by_cohort.get_mut(c).expect("inserted above").add(rec, &out);
            }
            workloads.push(out);
        }
        (tallies, workloads)
    }
}

impl Tally {
    /// One more workload, `rec` as run, `out` its figures.
    fn add(&mut self, rec: &WorkloadRecord, out: &WorkloadOut) {
        self.workloads += 1;
        if rec.rejected.is_some() {
            self.rejected += 1;
        } else if rec.removed && out.wait_ms.is_none() {
            self.withdrawn += 1;
        } else if let (Some(wait), Some(first)) = (out.wait_ms, out.wait_to_first_admission_ms) {
            self.admitted += 1;
            self.waits.push(wait);
            self.first_waits.push(first);
        } else {
            self.never_admitted += 1;
        }
        self.completions.extend(out.completion_ms);
        self.slowdowns.extend(out.slowdown);
        self.gpu_hours_lost += out.gpu_hours_lost;
        let finished = rec.runs.last().is_some_and(|x| x.end == RunEnd::Finished);
        self.finished += u64::from(finished);
        self.preemptions += u64::from(rec.preempted);
        self.evictions += u64::from(rec.evicted);
    }
}

/// The cluster's usage (with its peaks) and each cohort's (peaks not yet
/// set): their queues' usage, plus a Cohort's own quota as capacity (what
/// its queues borrow).
fn combined_usage<'a>(r: &'a SimResult, usages: &[Usage]) -> (Usage, BTreeMap<&'a str, Usage>) {
    let mut all = Usage::default();
    let mut per_cohort: BTreeMap<&str, Usage> = BTreeMap::new();
    for (q, usage) in r.queues.iter().zip(usages) {
        all.add(usage);
        if let Some(c) = &q.cohort {
            per_cohort.entry(c.as_str()).or_default().add(usage);
        }
    }
    for q in &r.cohort_quota {
        all.add_capacity(q);
        per_cohort.entry(q.cohort.as_str()).or_default().add_capacity(q);
    }
    // Cluster and cohort peaks: replay the samples of all their queues in time order.
    all.set_peaks(r.queues.iter());
    (all, per_cohort)
}

fn api_writes(r: &SimResult) -> ApiWrites {
    ApiWrites {
        count: r.api_writes,
        mean_delay_ms: if r.api_writes == 0 {
            0.0
        } else {
            r.write_delay_total as f64 / r.api_writes as f64
        },
        max_delay_ms: r.write_delay_max,
    }
}

/// The workloads never admitted (not rejected), with the engine's last
/// reason.
fn pending_at_end(r: &SimResult) -> Vec<PendingOut> {
    (r.workloads.iter().zip(&r.records))
        .filter(|(_, rec)| rec.rejected.is_none() && !rec.removed && rec.first_start().is_none())
        .map(|(w, rec)| PendingOut {
            name: w.name.clone(),
            class: w.class.clone(),
            cluster_queue: rec.cluster_queue.to_string(),
            reason: rec.last_pending.clone(),
        })
        .collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Largest use of each resource (or (resource, flavor)) at any instant,
/// over these queues together.
fn cluster_peaks<'a>(queues: impl Iterator<Item = &'a QueueSeries>, per_flavor: bool) -> BTreeMap<Key, i64> {
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
    let mut sums: BTreeMap<Key, i64> = BTreeMap::new();
    let mut peaks: BTreeMap<Key, i64> = BTreeMap::new();
    let mut k = 0;
    while k < points.len() {
        let t = points[k].0;
        while k < points.len() && points[k].0 == t {
            let (_, qi, si, v) = points[k];
            let key = Key::of(&queues[qi].slots[si], per_flavor);
            *sums.entry(key).or_default() += v - current[qi][si];
            current[qi][si] = v;
            k += 1;
        }
        for (key, &sum) in &sums {
            let p = peaks.entry(key.clone()).or_default();
            *p = (*p).max(sum);
        }
    }
    peaks
}
