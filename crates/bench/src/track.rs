//! The harness's view of a run, fed by its Workload watch. No I/O: every
//! figure of the report comes from what [`Tracker`] recorded, and the tests
//! feed it by hand.
//!
//! From each observed Workload the tracker reads ([`observe`]):
//! - *holding quota*: `QuotaReserved=True`, not `Finished=True`, with an
//!   `admission` — its `resourceUsage` per flavor counts against its
//!   ClusterQueue (an evicting workload still holds quota);
//! - *running*: `Admitted=True` and neither `Evicted=True` nor
//!   `Finished=True`. Each start of running is one admission, and starts its
//!   run time (as in Kueue's runner: the clock starts when the harness sees
//!   the admission; a preempted workload starts over when admitted again);
//! - *finished*: `Finished=True`.
//!
//! At every change of a workload's holding, the usage of its ClusterQueue
//! and cohort is checked against the quota ([`QuotaModel`]); a rule broken
//! at an observed moment opens a [`Violation`] that lasts until a later
//! observation satisfies the rule again.
//!
//! Times are milliseconds since the start of the run ([`Ms`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use sluice_api::v1alpha1::Workload;
use sluice_api::v1alpha1::conditions as cond;

/// Milliseconds since the start of the run.
pub type Ms = i64;

/// A quota slot: (flavor, resource).
pub type Slot = (String, String);

/// What the harness reads from one Workload object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observation {
    pub generation: Option<i64>,
    /// `Admitted=True`.
    pub admitted: bool,
    /// `Evicted=True`.
    pub evicted: bool,
    /// `Finished=True`.
    pub finished: bool,
    /// Set while it holds quota.
    pub holding: Option<Holding>,
}

impl Observation {
    /// Admitted, and neither evicted nor finished: its pods would run.
    pub fn running(&self) -> bool {
        self.admitted && !self.evicted && !self.finished
    }
}

/// Quota a workload holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    pub cluster_queue: String,
    /// Milli-units per (flavor, resource).
    pub usage: BTreeMap<Slot, i64>,
}

/// Reads an observed Workload; an error names the field that cannot be read.
pub fn observe(wl: &Workload) -> Result<Observation, String> {
    let generation = wl.metadata.generation;
    let Some(status) = &wl.status else {
        return Ok(Observation {
            generation,
            ..Observation::default()
        });
    };
    let is_true = |t: &str| status.condition(t).is_some_and(|c| c.status == cond::status::TRUE);
    let holding = match &status.admission {
        Some(adm) if status.holds_quota() => {
            let mut usage = BTreeMap::new();
            for (i, psa) in adm.pod_set_assignments.iter().enumerate() {
                for (resource, q) in &psa.resource_usage {
                    let field = format!("status.admission.podSetAssignments[{i}].resourceUsage[{resource}]");
                    let flavor = psa
                        .flavors
                        .get(resource)
                        .ok_or_else(|| format!("{field}: no flavor is assigned to {resource}"))?;
                    let milli = sluice_api::quantity::milli(&field, q)
                        .map_err(|e| format!("{field}: quantity {:?} {}", e.value, e.kind))?;
                    let milli = i64::try_from(milli).map_err(|_| format!("{field}: {:?} is too large", q.0))?;
                    *usage.entry((flavor.clone(), resource.clone())).or_insert(0) += milli;
                }
            }
            Some(Holding {
                cluster_queue: adm.cluster_queue.clone(),
                usage,
            })
        }
        _ => None,
    };
    Ok(Observation {
        generation,
        admitted: is_true(cond::ADMITTED),
        evicted: is_true(cond::EVICTED),
        finished: is_true(cond::FINISHED),
        holding,
    })
}

/// Quota of one (flavor, resource) of a ClusterQueue, milli-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limit {
    pub nominal: i64,
    pub borrowing_limit: Option<i64>,
    pub lending_limit: Option<i64>,
}

impl Limit {
    /// The most the queue may use: nominal + borrowingLimit in a cohort
    /// (no per-queue cap without a borrowingLimit: the cohort rule bounds
    /// it), nominal alone without a cohort.
    pub fn queue_cap(&self, in_cohort: bool) -> Option<i64> {
        if in_cohort {
            self.borrowing_limit.map(|b| self.nominal.saturating_add(b))
        } else {
            Some(self.nominal)
        }
    }

    /// What the queue lends its cohort: min(lendingLimit, nominal), all of
    /// nominal without a lendingLimit.
    pub fn lendable(&self) -> i64 {
        self.lending_limit.map_or(self.nominal, |l| l.min(self.nominal)).max(0)
    }

    /// What only the queue itself may use: nominal − lendable.
    pub fn guaranteed(&self) -> i64 {
        self.nominal - self.lendable()
    }
}

/// A ClusterQueue's quotas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueQuota {
    pub cohort: Option<String>,
    pub limits: BTreeMap<Slot, Limit>,
}

/// The quota rules the admitted set must keep at every moment:
/// - **ClusterQueue**: usage ≤ [`Limit::queue_cap`] per (flavor, resource);
///   a slot the queue has no quota for allows nothing;
/// - **cohort**: Σ over its queues of max(0, usage − guaranteed) ≤ Σ of
///   lendable, per (flavor, resource): what the queues use beyond what is
///   theirs alone comes from the cohort's pool. Without lending limits this
///   is Σ usage ≤ Σ nominal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaModel {
    pub queues: BTreeMap<String, QueueQuota>,
    /// Cohort → its queues.
    pub cohorts: BTreeMap<String, Vec<String>>,
}

impl QuotaModel {
    pub fn new(queues: BTreeMap<String, QueueQuota>) -> Self {
        let mut cohorts: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, q) in &queues {
            if let Some(c) = &q.cohort {
                cohorts.entry(c.clone()).or_default().push(name.clone());
            }
        }
        Self { queues, cohorts }
    }

    /// Nominal quota of a queue's slot (0 when it has none).
    pub fn nominal(&self, queue: &str, slot: &Slot) -> i64 {
        self.limit(queue, slot).nominal
    }

    fn limit(&self, queue: &str, slot: &Slot) -> Limit {
        self.queues
            .get(queue)
            .and_then(|q| q.limits.get(slot))
            .copied()
            .unwrap_or_default()
    }
}

/// Which rule was broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    ClusterQueue,
    Cohort,
}

/// A quota rule broken from `from_ms` until `to_ms` (the first later
/// observation that kept it, or the end of the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub scope: Scope,
    /// ClusterQueue or cohort (cluster names).
    pub name: String,
    pub flavor: String,
    pub resource: String,
    /// What the rule allows, milli-units: the queue's cap, or the cohort's
    /// lendable pool.
    pub limit: i64,
    /// The most seen while broken, milli-units: the queue's usage, or what
    /// the cohort's queues used of the pool.
    pub peak: i64,
    pub from_ms: Ms,
    pub to_ms: Ms,
}

/// What the harness saw of one workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadRecord {
    /// Run time once admitted.
    pub runtime: Ms,
    /// When it was created: the earlier of the create call's answer and the
    /// first sight of it in the watch.
    pub created_at: Option<Ms>,
    /// First sight of `Admitted=True`.
    pub first_admitted_at: Option<Ms>,
    /// Start of its latest admission (re-admissions after preemption
    /// included): the one it finished in, once finished.
    pub last_admitted_at: Option<Ms>,
    /// First sight of `Finished=True`.
    pub finished_at: Option<Ms>,
    /// Times it started running (re-admissions after preemption included).
    pub admissions: u32,
    /// Times it was seen newly `Evicted=True`.
    pub evictions: u32,
    running: bool,
    evicted: bool,
    generation: Option<i64>,
    holding: Option<Holding>,
}

impl WorkloadRecord {
    /// From creation to its latest admission — for a finished workload the
    /// admission it ran to completion in. This is Kueue's figure: its
    /// runner's recorder sets `TimeToAdmitMs` again at every transition of
    /// `Admitted` to true, so a preempted and re-admitted workload counts
    /// until its last admission.
    pub fn time_to_admission(&self) -> Option<Ms> {
        Some((self.last_admitted_at? - self.created_at?).max(0))
    }

    /// From creation to its first admission.
    pub fn time_to_first_admission(&self) -> Option<Ms> {
        Some((self.first_admitted_at? - self.created_at?).max(0))
    }
}

/// When to mark a workload Finished: `epoch` is its admission count when
/// it was admitted, so that a timer of an earlier admission is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishAt {
    pub index: usize,
    pub epoch: u32,
    pub at: Ms,
}

/// The observed admitted set over time.
#[derive(Debug)]
pub struct Tracker {
    quotas: QuotaModel,
    records: Vec<WorkloadRecord>,
    by_key: HashMap<String, usize>,
    /// Per ClusterQueue: usage per slot now, milli-units.
    used: BTreeMap<String, BTreeMap<Slot, i64>>,
    /// Per ClusterQueue: ∫ usage dt per slot, milli-unit·ms.
    integral: BTreeMap<String, BTreeMap<Slot, f64>>,
    /// Per ClusterQueue: time the integral was brought up to.
    integrated_to: BTreeMap<String, Ms>,
    open: BTreeMap<(Scope, String, Slot), usize>,
    violations: Vec<Violation>,
    admissions: Vec<Ms>,
    finished: usize,
}

/// What a run recorded, for [`super::report`].
#[derive(Debug, Clone)]
pub struct Closed {
    /// End of the run (ms since its start).
    pub end: Ms,
    pub records: Vec<WorkloadRecord>,
    /// Per ClusterQueue and slot: ∫ usage dt over [0, end], milli-unit·ms.
    pub usage: BTreeMap<String, BTreeMap<Slot, f64>>,
    /// In order of their start.
    pub violations: Vec<Violation>,
    /// Every admission's time, sorted.
    pub admissions: Vec<Ms>,
    pub quotas: QuotaModel,
}

impl Tracker {
    /// `workloads`: (`namespace/name`, run time) of every planned workload;
    /// their index is their position.
    pub fn new(quotas: QuotaModel, workloads: impl IntoIterator<Item = (String, Ms)>) -> Self {
        let mut records = Vec::new();
        let mut by_key = HashMap::new();
        for (i, (key, runtime)) in workloads.into_iter().enumerate() {
            by_key.insert(key, i);
            records.push(WorkloadRecord {
                runtime,
                ..WorkloadRecord::default()
            });
        }
        Self {
            quotas,
            records,
            by_key,
            used: BTreeMap::new(),
            integral: BTreeMap::new(),
            integrated_to: BTreeMap::new(),
            open: BTreeMap::new(),
            violations: Vec::new(),
            admissions: Vec::new(),
            finished: 0,
        }
    }

    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    pub fn records(&self) -> &[WorkloadRecord] {
        &self.records
    }

    pub fn finished(&self) -> usize {
        self.finished
    }

    /// Every planned workload has been seen finished.
    pub fn done(&self) -> bool {
        self.finished == self.records.len()
    }

    /// What the run looks like at `at`, for the stall rule.
    pub fn sample(&self, at: Ms) -> crate::stall::Sample {
        let mut s = crate::stall::Sample {
            at,
            admissions: self.admissions.len() as u64,
            finished: self.finished as u64,
            ..Default::default()
        };
        for r in &self.records {
            if r.running {
                s.running += 1;
            } else if r.created_at.is_some() && r.finished_at.is_none() {
                s.pending += 1;
            }
        }
        s
    }

    /// Violations so far (open ones with `to_ms` not final).
    pub fn violations(&self) -> usize {
        self.violations.len()
    }

    /// The create call for workload `index` answered at `at`.
    pub fn created(&mut self, index: usize, at: Ms) {
        if let Some(r) = self.records.get_mut(index) {
            r.created_at = Some(r.created_at.map_or(at, |c| c.min(at)));
        }
    }

    /// Workload `index` was observed at `at`. Returns when to mark it
    /// Finished if it just started running.
    pub fn observe(&mut self, index: usize, at: Ms, obs: Observation) -> Option<FinishAt> {
        let mut touched = BTreeSet::new();
        let finish = self.update(index, at, obs, &mut touched);
        self.check_all(touched, at);
        finish
    }

    /// A list of the watch (its first, or a relist after the watch lost
    /// its place): every object as it is at one resourceVersion, in the
    /// order listed. They are taken in together and the quota is checked
    /// once, on the result: checked one by one, a workload admitted while
    /// the watch was away would be counted before the release of the one it
    /// replaced (listed later), a violation that never happened.
    pub fn observe_list(&mut self, items: impl IntoIterator<Item = (usize, Ms, Observation)>) -> Vec<FinishAt> {
        let mut touched = BTreeSet::new();
        let mut finishes = Vec::new();
        let mut last = None::<Ms>;
        for (index, at, obs) in items {
            last = Some(last.map_or(at, |l| l.max(at)));
            finishes.extend(self.update(index, at, obs, &mut touched));
        }
        if let Some(at) = last {
            self.check_all(touched, at);
        }
        finishes
    }

    /// Records an observation; the (queue, slot)s whose usage changed are
    /// added to `touched`, to be checked by the caller.
    fn update(
        &mut self,
        index: usize,
        at: Ms,
        obs: Observation,
        touched: &mut BTreeSet<(String, Slot)>,
    ) -> Option<FinishAt> {
        let r = self.records.get_mut(index)?;
        if r.created_at.is_none() {
            r.created_at = Some(at);
        }
        r.generation = obs.generation;
        if obs.evicted && !r.evicted {
            r.evictions += 1;
        }
        r.evicted = obs.evicted;
        let mut finish = None;
        let running = obs.running();
        if running && !r.running {
            r.admissions += 1;
            r.last_admitted_at = Some(at);
            self.admissions.push(at);
            finish = Some(FinishAt {
                index,
                epoch: r.admissions,
                at: at.saturating_add(r.runtime),
            });
        }
        if obs.admitted && r.first_admitted_at.is_none() {
            // Seen admitted only together with Finished or Evicted (the watch
            // missed the moment, e.g. across a relist): the first sight is
            // the best bound there is.
            r.first_admitted_at = Some(at);
            r.last_admitted_at.get_or_insert(at);
            if r.admissions == 0 {
                r.admissions = 1;
                self.admissions.push(at);
            }
        }
        r.running = running;
        if obs.finished && r.finished_at.is_none() {
            r.finished_at = Some(at);
            self.finished += 1;
        }
        if r.holding != obs.holding {
            let old = std::mem::replace(&mut r.holding, obs.holding.clone());
            self.holding_changed(at, old, obs.holding, touched);
        }
        finish
    }

    /// The generation to write with the Finished mark, if workload `index`
    /// is still running in admission `epoch`.
    pub fn finish_due(&self, index: usize, epoch: u32) -> Option<Option<i64>> {
        let r = self.records.get(index)?;
        (r.running && r.admissions == epoch).then_some(r.generation)
    }

    fn integrate(&mut self, queue: &str, at: Ms) {
        let from = self.integrated_to.get(queue).copied().unwrap_or(0);
        let dt = (at - from).max(0) as f64;
        if dt > 0.0
            && let Some(used) = self.used.get(queue)
        {
            let acc = self.integral.entry(queue.to_string()).or_default();
            for (slot, v) in used {
                *acc.entry(slot.clone()).or_insert(0.0) += *v as f64 * dt;
            }
        }
        if at > from {
            self.integrated_to.insert(queue.to_string(), at);
        }
    }

    fn holding_changed(
        &mut self,
        at: Ms,
        old: Option<Holding>,
        new: Option<Holding>,
        touched: &mut BTreeSet<(String, Slot)>,
    ) {
        for (h, sign) in [(old, -1i64), (new, 1i64)] {
            let Some(h) = h else { continue };
            self.integrate(&h.cluster_queue, at);
            let used = self.used.entry(h.cluster_queue.clone()).or_default();
            for (slot, v) in h.usage {
                *used.entry(slot.clone()).or_insert(0) += sign * v;
                touched.insert((h.cluster_queue.clone(), slot));
            }
        }
    }

    fn check_all(&mut self, touched: BTreeSet<(String, Slot)>, at: Ms) {
        for (queue, slot) in touched {
            self.check(&queue, &slot, at);
        }
    }

    fn used(&self, queue: &str, slot: &Slot) -> i64 {
        self.used.get(queue).and_then(|u| u.get(slot)).copied().unwrap_or(0)
    }

    fn check(&mut self, queue: &str, slot: &Slot, at: Ms) {
        let cohort = self.quotas.queues.get(queue).and_then(|q| q.cohort.clone());
        let used = self.used(queue, slot);
        // A (flavor, resource) the queue has no quota for allows nothing,
        // in a cohort too: a queue borrows only what it lists.
        let cap = match self.quotas.queues.get(queue).and_then(|q| q.limits.get(slot)) {
            Some(limit) => limit.queue_cap(cohort.is_some()),
            None => Some(0),
        };
        self.rule(Scope::ClusterQueue, queue, slot, used, cap, at);
        if let Some(c) = cohort {
            let members = self.quotas.cohorts.get(&c).cloned().unwrap_or_default();
            let (mut from_pool, mut pool) = (0i64, 0i64);
            for m in &members {
                let l = self.quotas.limit(m, slot);
                from_pool += (self.used(m, slot) - l.guaranteed()).max(0);
                pool += l.lendable();
            }
            self.rule(Scope::Cohort, &c, slot, from_pool, Some(pool), at);
        }
    }

    fn rule(&mut self, scope: Scope, name: &str, slot: &Slot, value: i64, cap: Option<i64>, at: Ms) {
        let broken = cap.is_some_and(|c| value > c);
        let id = (scope, name.to_string(), slot.clone());
        match (broken, self.open.get(&id).copied()) {
            (true, Some(i)) => {
                let v = &mut self.violations[i];
                v.peak = v.peak.max(value);
                v.to_ms = at;
            }
            (true, None) => {
                self.open.insert(id, self.violations.len());
                self.violations.push(Violation {
                    scope,
                    name: name.to_string(),
                    flavor: slot.0.clone(),
                    resource: slot.1.clone(),
                    limit: cap.unwrap_or(0),
                    peak: value,
                    from_ms: at,
                    to_ms: at,
                });
            }
            (false, Some(i)) => {
                self.violations[i].to_ms = at;
                self.open.remove(&id);
            }
            (false, None) => {}
        }
    }

    /// Ends the run at `end`: integrals up to `end`, open violations last
    /// until `end`.
    pub fn close(mut self, end: Ms) -> Closed {
        let queues: Vec<String> = self.used.keys().cloned().collect();
        for q in queues {
            self.integrate(&q, end);
        }
        for (_, i) in std::mem::take(&mut self.open) {
            self.violations[i].to_ms = end.max(self.violations[i].to_ms);
        }
        self.admissions.sort_unstable();
        Closed {
            end,
            records: self.records,
            usage: self.integral,
            violations: self.violations,
            admissions: self.admissions,
            quotas: self.quotas,
        }
    }
}

#[cfg(test)]
mod tests;
