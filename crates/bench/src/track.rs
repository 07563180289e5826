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
mod tests {
    use super::*;
    use serde_json::json;

    fn slot() -> Slot {
        ("rf".to_string(), "cpu".to_string())
    }

    /// Two queues in cohort `c` (a: nominal 20, borrowingLimit 10; b:
    /// nominal 20, no borrowingLimit: cohort pool 40) and `solo` (nominal 5,
    /// no cohort).
    fn model() -> QuotaModel {
        let q = |cohort: Option<&str>, nominal: i64, borrowing: Option<i64>| QueueQuota {
            cohort: cohort.map(String::from),
            limits: BTreeMap::from([(
                slot(),
                Limit {
                    nominal,
                    borrowing_limit: borrowing,
                    lending_limit: None,
                },
            )]),
        };
        QuotaModel::new(BTreeMap::from([
            ("a".to_string(), q(Some("c"), 20_000, Some(10_000))),
            ("b".to_string(), q(Some("c"), 20_000, None)),
            ("solo".to_string(), q(None, 5_000, None)),
        ]))
    }

    fn holding(queue: &str, cpu: i64) -> Observation {
        Observation {
            generation: Some(1),
            admitted: true,
            holding: Some(Holding {
                cluster_queue: queue.to_string(),
                usage: BTreeMap::from([(slot(), cpu)]),
            }),
            ..Observation::default()
        }
    }

    fn finished() -> Observation {
        Observation {
            generation: Some(1),
            admitted: true,
            finished: true,
            ..Observation::default()
        }
    }

    fn tracker(n: usize, runtime: Ms) -> Tracker {
        Tracker::new(model(), (0..n).map(|i| (format!("ns/w{i}"), runtime)))
    }

    #[test]
    fn reads_conditions_and_admission_from_a_workload() {
        let wl: Workload = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "generation": 2},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {}}]},
            "status": {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                    {"type": "Evicted", "status": "False", "reason": "Admitted", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
                ],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": "main", "count": 2, "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "2500m"}}
                ]}
            }
        }))
        .expect("a Workload");
        let obs = observe(&wl).expect("readable");
        assert_eq!(obs.generation, Some(2));
        assert!(obs.running());
        let h = obs.holding.expect("holds quota");
        assert_eq!(h.cluster_queue, "cq");
        assert_eq!(h.usage[&slot()], 2_500);

        // Finished: no longer holds quota, no longer runs.
        let mut done = wl.clone();
        let st = done.status.as_mut().expect("status");
        st.conditions.push(serde_json::from_value(json!({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": "2024-01-01T00:00:01Z"})).expect("condition"));
        let obs = observe(&done).expect("readable");
        assert!(obs.finished && !obs.running() && obs.holding.is_none());

        // A usage without a flavor is an error naming the field.
        let mut bad = wl;
        let adm = bad
            .status
            .as_mut()
            .and_then(|s| s.admission.as_mut())
            .expect("admission");
        adm.pod_set_assignments[0].flavors.clear();
        let err = observe(&bad).unwrap_err();
        assert!(err.contains("podSetAssignments[0].resourceUsage[cpu]"), "{err}");
    }

    #[test]
    fn limits_of_queues_and_cohorts() {
        let l = Limit {
            nominal: 20,
            borrowing_limit: Some(100),
            lending_limit: None,
        };
        assert_eq!(l.queue_cap(true), Some(120));
        assert_eq!(l.queue_cap(false), Some(20));
        assert_eq!((l.lendable(), l.guaranteed()), (20, 0));
        let keeps = Limit {
            nominal: 20,
            borrowing_limit: None,
            lending_limit: Some(5),
        };
        // Lends 5, keeps 15 for itself; no cap of its own in a cohort.
        assert_eq!((keeps.lendable(), keeps.guaranteed()), (5, 15));
        assert_eq!(keeps.queue_cap(true), None);
    }

    #[test]
    fn admission_starts_the_run_time_and_preemption_restarts_it() {
        let mut t = tracker(1, 200);
        t.created(0, 10);
        // Admitted at 50: finish at 250, epoch 1.
        assert_eq!(
            t.observe(0, 50, holding("a", 1_000)),
            Some(FinishAt {
                index: 0,
                epoch: 1,
                at: 250
            })
        );
        // The same state again (e.g. a status write of another field): nothing new.
        assert_eq!(t.observe(0, 60, holding("a", 1_000)), None);
        assert_eq!(t.finish_due(0, 1), Some(Some(1)));
        // Preempted at 100: the epoch-1 timer is stale.
        let mut evicted = holding("a", 1_000);
        evicted.evicted = true;
        assert_eq!(t.observe(0, 100, evicted), None);
        assert_eq!(t.finish_due(0, 1), None);
        // Eviction complete (quota released), then admitted again at 300.
        t.observe(0, 150, Observation::default());
        assert_eq!(
            t.observe(0, 300, holding("a", 1_000)),
            Some(FinishAt {
                index: 0,
                epoch: 2,
                at: 500
            })
        );
        assert_eq!(t.finish_due(0, 1), None);
        assert_eq!(t.finish_due(0, 2), Some(Some(1)));
        t.observe(0, 510, finished());
        assert!(t.done());
        let c = t.close(600);
        let r = &c.records[0];
        // Time to admission (Kueue's): the admission it finished in −
        // creation = 300 − 10 = 290 ms; to its first admission 50 − 10 = 40.
        assert_eq!(r.time_to_admission(), Some(290));
        assert_eq!(r.time_to_first_admission(), Some(40));
        assert_eq!((r.admissions, r.evictions, r.finished_at), (2, 1, Some(510)));
        assert_eq!(c.admissions, vec![50, 300]);
    }

    #[test]
    fn creation_time_is_the_earlier_of_the_answer_and_the_watch() {
        let mut t = tracker(2, 0);
        // The watch saw w0 at 12 before its create call answered at 15.
        t.observe(0, 12, Observation::default());
        t.created(0, 15);
        t.created(1, 20);
        t.observe(1, 25, Observation::default());
        assert_eq!(t.records()[0].created_at, Some(12));
        assert_eq!(t.records()[1].created_at, Some(20));
    }

    #[test]
    fn a_missed_admission_is_counted_at_first_sight() {
        // The watch relisted and first sees w0 already Finished at 900.
        let mut t = tracker(1, 100);
        t.created(0, 100);
        assert_eq!(t.observe(0, 900, finished()), None);
        let c = t.close(900);
        assert_eq!(c.records[0].first_admitted_at, Some(900));
        assert_eq!(c.records[0].time_to_admission(), Some(800));
        assert_eq!(c.records[0].admissions, 1);
        assert_eq!(c.admissions, vec![900]);
    }

    #[test]
    fn usage_is_integrated_per_queue() {
        // Queue a: 2 CPU from 0 to 1 000 ms, 5 CPU (2 + 3) from 1 000 to
        // 2 000, 3 CPU from 2 000 to the end at 4 000:
        // ∫ = 2 000·1 000 + 5 000·1 000 + 3 000·2 000 = 13 000 000 milli-CPU·ms
        // (13 CPU·s; with nominal 20 CPU over 4 s that is 13 / 80 = 16.25 %).
        let mut t = tracker(2, 10_000);
        t.observe(0, 0, holding("a", 2_000));
        t.observe(1, 1_000, holding("a", 3_000));
        t.observe(0, 2_000, finished());
        let c = t.close(4_000);
        assert_eq!(c.usage["a"][&slot()], 13_000_000.0);
        assert!(c.violations.is_empty());
    }

    #[test]
    fn a_queue_over_nominal_plus_borrowing_limit_is_a_violation() {
        // a: cap 20 + 10 = 30 CPU. 25 CPU at 0 is borrowing within the cap;
        // another 6 CPU at 100 makes 31 > 30 until the first finishes at 300.
        // The cohort (pool 20 + 20 = 40) is within its quota throughout.
        let mut t = tracker(3, 10_000);
        t.observe(0, 0, holding("a", 25_000));
        assert_eq!(t.violations(), 0);
        t.observe(1, 100, holding("a", 6_000));
        t.observe(2, 200, holding("a", 1_000)); // 32 CPU: still broken, peak 32
        t.observe(0, 300, finished()); // 7 CPU
        let c = t.close(1_000);
        assert_eq!(
            c.violations,
            vec![Violation {
                scope: Scope::ClusterQueue,
                name: "a".into(),
                flavor: "rf".into(),
                resource: "cpu".into(),
                limit: 30_000,
                peak: 32_000,
                from_ms: 100,
                to_ms: 300,
            }]
        );
    }

    #[test]
    fn a_cohort_over_its_total_nominal_is_a_violation() {
        // Cohort c: a (20) + b (20) = 40 CPU. b has no borrowingLimit, so
        // only the cohort rule bounds it: a 15 + b 26 = 41 > 40 at 50, still
        // broken at the end (1 000).
        let mut t = tracker(2, 10_000);
        t.observe(0, 0, holding("a", 15_000));
        t.observe(1, 50, holding("b", 26_000));
        let c = t.close(1_000);
        assert_eq!(c.violations.len(), 1);
        let v = &c.violations[0];
        assert_eq!((v.scope, v.name.as_str()), (Scope::Cohort, "c"));
        assert_eq!((v.limit, v.peak, v.from_ms, v.to_ms), (40_000, 41_000, 50, 1_000));
    }

    #[test]
    fn a_queue_without_a_cohort_never_exceeds_nominal() {
        // solo: nominal 5; 5 is fine, 5.5 is not. A queue unknown to the
        // scenario, or a flavor it has no quota for, allows nothing.
        let mut t = tracker(3, 10_000);
        t.observe(0, 0, holding("solo", 5_000));
        assert_eq!(t.violations(), 0);
        t.observe(1, 10, holding("solo", 500));
        t.observe(2, 20, holding("elsewhere", 1));
        let c = t.close(30);
        let got: Vec<(&str, i64, i64)> = c
            .violations
            .iter()
            .map(|v| (v.name.as_str(), v.limit, v.peak))
            .collect();
        assert_eq!(got, vec![("solo", 5_000, 5_500), ("elsewhere", 0, 1)]);
    }

    #[test]
    fn a_queue_in_a_cohort_cannot_use_a_flavor_it_has_no_quota_for() {
        // a is in cohort c with quota of rf only; 1 CPU of another flavor
        // is over its cap of 0 (the cohort has 40 CPU of rf to spare, but
        // a queue borrows only what it lists).
        let mut t = tracker(1, 10_000);
        let mut obs = holding("a", 0);
        obs.holding = Some(Holding {
            cluster_queue: "a".into(),
            usage: BTreeMap::from([(("other".to_string(), "cpu".to_string()), 1_000)]),
        });
        t.observe(0, 5, obs);
        let c = t.close(10);
        let got: Vec<(Scope, &str, &str, i64, i64)> = c
            .violations
            .iter()
            .map(|v| (v.scope, v.name.as_str(), v.flavor.as_str(), v.limit, v.peak))
            .collect();
        assert!(got.contains(&(Scope::ClusterQueue, "a", "other", 0, 1_000)), "{got:?}");
    }

    #[test]
    fn a_relist_is_checked_as_one_moment() {
        // a (cap 30) holds w0 (25 CPU). While the watch is away w0 is
        // evicted and released, and w1 (25 CPU) admitted in its place. The
        // relist shows w1 before w0: one by one that would be 50 > 30 for
        // a moment; as the list it is, 25 CPU, no violation.
        let mut t = tracker(2, 10_000);
        t.observe(0, 0, holding("a", 25_000));
        let finishes = t.observe_list([(1, 500, holding("a", 25_000)), (0, 501, Observation::default())]);
        assert_eq!(
            finishes,
            vec![FinishAt {
                index: 1,
                epoch: 1,
                at: 10_500
            }]
        );
        assert_eq!(t.violations(), 0);
        // The same list taken one by one does show the phantom.
        let mut one_by_one = tracker(2, 10_000);
        one_by_one.observe(0, 0, holding("a", 25_000));
        one_by_one.observe(1, 500, holding("a", 25_000));
        one_by_one.observe(0, 501, Observation::default());
        // The queue (50 > 30) and the cohort (50 > 40).
        assert_eq!(one_by_one.violations(), 2);
        // A list that really is over quota is still caught, at its last time.
        let mut over = tracker(2, 10_000);
        over.observe_list([(0, 700, holding("a", 20_000)), (1, 701, holding("a", 20_000))]);
        let c = over.close(1_000);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        let v = &c.violations[0];
        assert_eq!((v.limit, v.peak, v.from_ms, v.to_ms), (30_000, 40_000, 701, 1_000));
        // Usage is still integrated from each item's own time: 20 CPU from
        // 700 and 20 more from 701, to 1 000.
        assert_eq!(c.usage["a"][&slot()], 20_000.0 * 300.0 + 20_000.0 * 299.0);
    }

    #[test]
    fn lending_limits_shrink_the_cohort_pool() {
        // x: nominal 10, lends 4 (keeps 6); y: nominal 10, lends all.
        // Pool = 4 + 10 = 14. x uses 10 (4 from the pool), y 10 (all from
        // the pool): 14 ≤ 14. One more CPU in y: 15 > 14.
        let lim = |lending| Limit {
            nominal: 10_000,
            borrowing_limit: None,
            lending_limit: lending,
        };
        let model = QuotaModel::new(BTreeMap::from([
            (
                "x".to_string(),
                QueueQuota {
                    cohort: Some("c".into()),
                    limits: BTreeMap::from([(slot(), lim(Some(4_000)))]),
                },
            ),
            (
                "y".to_string(),
                QueueQuota {
                    cohort: Some("c".into()),
                    limits: BTreeMap::from([(slot(), lim(None))]),
                },
            ),
        ]));
        let mut t = Tracker::new(model, (0..3).map(|i| (format!("ns/w{i}"), 1_000)));
        t.observe(0, 0, holding("x", 10_000));
        t.observe(1, 0, holding("y", 10_000));
        assert_eq!(t.violations(), 0);
        t.observe(2, 5, holding("y", 1_000));
        let c = t.close(10);
        assert_eq!(c.violations.len(), 1);
        assert_eq!((c.violations[0].limit, c.violations[0].peak), (14_000, 15_000));
    }
}
