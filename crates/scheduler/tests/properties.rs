//! Invariants under random worlds and event sequences. After every step an
//! independent oracle recomputes, from the admitted workloads alone, what
//! each queue and cohort uses, and checks it against quota; and the usage
//! book fed with the engine's metering equals the integral over time of
//! what the ledger holds, across restarts.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use sluice_scheduler::usage::{Account, UsageBook};
use sluice_scheduler::*;

const RESOURCES: [&str; 2] = ["nvidia.com/gpu", "cpu"];
const FLAVORS: [&str; 2] = ["f0", "f1"];

#[derive(Clone, Debug)]
struct QueueGen {
    cohort: Option<u8>,
    strict: bool,
    nominal: [[i64; 2]; 2],
    borrowing: [[Option<i64>; 2]; 2],
    lending: [[Option<i64>; 2]; 2],
    within: WithinClusterQueue,
    reclaim: ReclaimWithinCohort,
    borrow_within: Option<i32>,
    min_runtime: Millis,
    /// The victim order and the recently-preempted grace.
    victims: (VictimOrderPolicy, Option<Millis>),
}

#[derive(Clone, Debug)]
enum Op {
    Add {
        queue: u8,
        priority: i32,
        pods: u32,
        gpu: i64,
        cpu: i64,
        second_pod_set: bool,
        /// Partial admission: pod set `a` may run with this many.
        min: Option<u32>,
    },
    Cycle,
    /// A cycle cut short after this many decisions (1 to 4).
    CycleWithin(u8),
    Finish(u16),
    CompleteEviction(u16),
    /// Eviction completed with a requeue backoff of this many ms.
    CompleteEvictionWithBackoff(u16, Millis),
    Evict(u16),
    Remove(u16),
    Tick(Millis),
    /// Sets a ClusterQueue's stop policy.
    Stop(u8, StopPolicy),
    /// Gives a ClusterQueue a budget standing (`None`: within budget).
    Budget(u8, Option<BudgetAction>),
    /// A controller restart: a new engine rebuilt from what is known
    /// (admitted workloads restored with their assignments, evictions
    /// under way evicted again, backoffs given back, the rest pending).
    Restart,
}

fn queue_gen() -> impl Strategy<Value = QueueGen> {
    let amount = 0i64..12;
    let limit = prop::option::of(0i64..8);
    (
        prop::option::of(0u8..2),
        any::<bool>(),
        [[amount.clone(), amount.clone()], [amount.clone(), amount]],
        [[limit.clone(), limit.clone()], [limit.clone(), limit.clone()]],
        [[limit.clone(), limit.clone()], [limit.clone(), limit]],
        prop_oneof![
            Just(WithinClusterQueue::Never),
            Just(WithinClusterQueue::LowerPriority),
            Just(WithinClusterQueue::LowerOrNewerEqualPriority)
        ],
        prop_oneof![
            Just(ReclaimWithinCohort::Never),
            Just(ReclaimWithinCohort::LowerPriority),
            Just(ReclaimWithinCohort::Any)
        ],
        prop::option::of(0i32..3),
        prop_oneof![Just(0), Just(5)],
        prop_oneof![
            Just((VictimOrderPolicy::Newest, None)),
            Just((VictimOrderPolicy::LeastWorkLost, None)),
            Just((VictimOrderPolicy::LeastWorkLost, Some(5))),
            Just((VictimOrderPolicy::Newest, Some(5)))
        ],
    )
        .prop_map(
            |(cohort, strict, nominal, borrowing, lending, within, reclaim, borrow_within, min_runtime, victims)| {
                QueueGen {
                    cohort,
                    strict,
                    nominal,
                    borrowing,
                    lending,
                    within,
                    reclaim,
                    borrow_within,
                    min_runtime,
                    victims,
                }
            },
        )
}

fn op_gen(queues: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..queues, 0i32..3, 1u32..4, 0i64..5, 0i64..4, any::<bool>(), prop::option::of(1u32..3)).prop_map(
            |(queue, priority, pods, gpu, cpu, second_pod_set, min)| Op::Add { queue, priority, pods, gpu, cpu, second_pod_set, min }
        ),
        4 => Just(Op::Cycle),
        2 => (1u8..5).prop_map(Op::CycleWithin),
        2 => any::<u16>().prop_map(Op::Finish),
        2 => any::<u16>().prop_map(Op::CompleteEviction),
        1 => (any::<u16>(), 1i64..40).prop_map(|(i, d)| Op::CompleteEvictionWithBackoff(i, d)),
        1 => any::<u16>().prop_map(Op::Evict),
        1 => any::<u16>().prop_map(Op::Remove),
        1 => (1i64..8).prop_map(Op::Tick),
        1 => (
            0..queues,
            prop_oneof![
                4 => Just(StopPolicy::None),
                1 => Just(StopPolicy::Hold),
                1 => Just(StopPolicy::HoldAndDrain)
            ]
        )
            .prop_map(|(q, p)| Op::Stop(q, p)),
        1 => (
            0..queues,
            prop_oneof![
                2 => Just(None),
                1 => Just(Some(BudgetAction::Warn)),
                1 => Just(Some(BudgetAction::Deprioritize)),
                1 => Just(Some(BudgetAction::Stop))
            ]
        )
            .prop_map(|(q, a)| Op::Budget(q, a)),
        1 => Just(Op::Restart),
    ]
}

/// Queues, events, and whether fair sharing is on.
fn scenario() -> impl Strategy<Value = (Vec<QueueGen>, Vec<Op>, bool)> {
    (1u8..5).prop_flat_map(|n| {
        (
            prop::collection::vec(queue_gen(), n as usize),
            prop::collection::vec(op_gen(n), 1..120),
            any::<bool>(),
        )
    })
}

fn engine(fair: bool) -> Engine {
    Engine::with_config(EngineConfig {
        fair_sharing: if fair { FairSharing::default() } else { FairSharing::Off },
        metering: true,
        ..Default::default()
    })
}

/// A budget standing with `action` reached (no early refusals: nothing
/// declares a run time here).
fn standing(action: Option<BudgetAction>) -> BudgetStanding {
    BudgetStanding {
        action,
        resource: RESOURCES[0].to_string(),
        flavor: None,
        spent: 0,
        limit: 1,
        stop_at: None,
        period: "1d calendar".to_string(),
    }
}

fn cq_spec(i: usize, g: &QueueGen) -> ClusterQueueSpec {
    let flavors = FLAVORS
        .iter()
        .enumerate()
        .map(|(fi, f)| FlavorQuotaSpec {
            flavor: f.to_string(),
            resources: RESOURCES
                .iter()
                .enumerate()
                .map(|(ri, r)| {
                    let nominal = g.nominal[fi][ri] * 1000;
                    ResourceQuotaSpec {
                        resource: r.to_string(),
                        nominal,
                        borrowing_limit: g.cohort.and(g.borrowing[fi][ri]).map(|b| b * 1000),
                        lending_limit: g.cohort.and(g.lending[fi][ri]).map(|l| (l * 1000).min(nominal)),
                    }
                })
                .collect(),
        })
        .collect();
    ClusterQueueSpec {
        fair_weight: Default::default(),
        name: format!("q{i}"),
        cohort: g.cohort.map(|c| format!("c{c}")),
        strategy: if g.strict {
            QueueingStrategy::StrictFifo
        } else {
            QueueingStrategy::BestEffortFifo
        },
        resource_groups: vec![ResourceGroupSpec {
            covered_resources: RESOURCES.iter().map(|r| r.to_string()).collect(),
            flavors,
        }],
        preemption: PreemptionPolicy {
            within_cluster_queue: g.within,
            reclaim_within_cohort: g.reclaim,
            borrow_within_cohort: match g.borrow_within {
                None => BorrowWithinCohort::Never,
                Some(t) => BorrowWithinCohort::LowerPriority {
                    max_priority_threshold: Some(t),
                },
            },
            victim_order: g.victims.0,
            recently_preempted_grace: g.victims.1,
        },
        min_runtime: g.min_runtime,
        stop_policy: StopPolicy::None,
        backfill: Default::default(),
        backfill_max_delay: 0,
        backfill_depth: 1,
    }
}

/// What the test knows about each workload, independent of the engine.
#[derive(Clone, Debug)]
struct Known {
    queue: usize,
    priority: i32,
    ts: Millis,
    /// Requests of one pod (every pod set's pods are alike).
    per_pod: BTreeMap<String, Amount>,
    /// Fewest pods of pod set `a` (partial admission).
    min: Option<u32>,
    pod_sets: usize,
    admitted_at: Option<Millis>,
    /// Requeue backoff: not admitted before this time.
    not_before: Millis,
    /// As added (queue-order time updated on requeue).
    spec: WorkloadSpec,
}

/// Usage by (flavor, resource).
type Usage = BTreeMap<(String, String), Amount>;

struct Run {
    engine: Engine,
    queues: Vec<QueueGen>,
    known: BTreeMap<String, Known>,
    uids: Vec<String>,
    now: Millis,
    next: usize,
    /// Every decision, for the determinism check.
    log: Vec<String>,
    /// Admitted and not since released: uid -> (queue, usage by (flavor, resource)).
    holding: HashMap<String, (usize, Usage)>,
    /// The admission of each holder, as the engine reported it.
    assignments: HashMap<String, Vec<PodSetAssignment>>,
    evicting: BTreeSet<String>,
    /// The last explanation reported for each workload.
    reported: HashMap<String, Explanation>,
    /// Each queue's stop policy.
    stops: Vec<StopPolicy>,
    /// Each queue's budget action.
    budgets: Vec<Option<BudgetAction>>,
    /// Fair sharing on.
    fair: bool,
    /// The usage book, fed with the engine's changes after every step.
    book: UsageBook,
    /// What the ledger says was used, integrated over time, per (queue,
    /// flavor, resource): what the book must have accounted.
    integral: BTreeMap<(String, String, String), i128>,
    integrated_to: Millis,
}

impl Run {
    fn new(queues: &[QueueGen], fair: bool) -> Self {
        let mut engine = engine(fair);
        for f in FLAVORS {
            engine.upsert_flavor(FlavorSpec {
                name: f.into(),
                ..Default::default()
            });
        }
        for (i, g) in queues.iter().enumerate() {
            engine.upsert_cluster_queue(cq_spec(i, g));
            engine.upsert_local_queue(LocalQueueSpec {
                key: format!("ns/q{i}"),
                cluster_queue: format!("q{i}"),
                ..Default::default()
            });
        }
        Self {
            engine,
            queues: queues.to_vec(),
            known: BTreeMap::new(),
            uids: Vec::new(),
            now: 0,
            next: 0,
            log: Vec::new(),
            holding: HashMap::new(),
            assignments: HashMap::new(),
            evicting: BTreeSet::new(),
            reported: HashMap::new(),
            stops: vec![StopPolicy::None; queues.len()],
            budgets: vec![None; queues.len()],
            fair,
            book: UsageBook::new(None),
            integral: BTreeMap::new(),
            integrated_to: 0,
        }
    }

    /// Adds what the ledger holds now, from the last step to now.
    fn integrate(&mut self) {
        let dt = i128::from(self.now - self.integrated_to);
        for name in self.engine.cluster_queue_names() {
            for r in self.engine.cluster_queue_usage(&name).unwrap().resources {
                *self
                    .integral
                    .entry((name.to_string(), r.flavor.clone(), r.resource.clone()))
                    .or_default() += i128::from(r.used) * dt;
            }
        }
        self.integrated_to = self.now;
    }

    /// Charges the engine's changes at now; the book must then agree
    /// with the integral of the ledger.
    fn meter(&mut self) -> Result<(), TestCaseError> {
        let changes = self.engine.take_usage_changes();
        self.book.apply(self.now, &changes);
        self.book.advance(self.now);
        for ((q, f, r), &expected) in &self.integral {
            let account = Account::ClusterQueue(q.as_str().into());
            let total: i128 = self
                .book
                .meters_of(&account)
                .filter(|(mf, mr, _)| &***mf == f && &***mr == r)
                .map(|(_, _, m)| m.total)
                .sum();
            prop_assert_eq!(
                total,
                expected,
                "{} {}/{}: accounted against the ledger's integral",
                q,
                f,
                r
            );
        }
        Ok(())
    }

    fn pick(&self, i: u16) -> Option<String> {
        (!self.uids.is_empty()).then(|| self.uids[i as usize % self.uids.len()].clone())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        self.integrate();
        self.act(op)?;
        // A tick moves time, not usage: the ledger held the same since.
        self.integrate();
        self.meter()?;
        self.engine.check_consistency().map_err(TestCaseError::fail)?;
        self.check_quota()
    }

    fn act(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Add {
                queue,
                priority,
                pods,
                gpu,
                cpu,
                second_pod_set,
                min,
            } => {
                let uid = format!("w{:03}", self.next);
                self.next += 1;
                let mut requests = BTreeMap::new();
                requests.insert(RESOURCES[0].to_string(), gpu * 1000);
                requests.insert(RESOURCES[1].to_string(), cpu * 500);
                let min = min.filter(|&m| m < pods);
                let mut pod_sets = vec![PodSetSpec {
                    name: "a".into(),
                    count: pods,
                    requests: requests.clone(),
                    min_count: min,
                    ..Default::default()
                }];
                if second_pod_set {
                    pod_sets.push(PodSetSpec {
                        name: "b".into(),
                        count: 1,
                        requests: requests.clone(),
                        ..Default::default()
                    });
                }
                let spec = WorkloadSpec {
                    uid: uid.clone(),
                    name: format!("ns/{uid}"),
                    local_queue: format!("ns/q{queue}"),
                    priority,
                    queue_order_time: self.now,
                    pod_sets,
                    expected_runtime: None,
                };
                self.engine
                    .add_workload(spec.clone())
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.known.insert(
                    uid.clone(),
                    Known {
                        queue: queue as usize,
                        priority,
                        ts: self.now,
                        per_pod: requests,
                        min,
                        pod_sets: 1 + second_pod_set as usize,
                        admitted_at: None,
                        not_before: 0,
                        spec,
                    },
                );
                self.uids.push(uid);
            }
            Op::Cycle => self.cycle()?,
            Op::CycleWithin(n) => {
                // As a controller does: cycle again at once while the engine
                // says work is left.
                for _ in 0..10_000 {
                    let (_, wake) = self.cycle_within(usize::from(n))?;
                    if wake != Some(self.now) {
                        break;
                    }
                }
            }
            Op::Finish(i) => {
                if let Some(uid) = self.pick(i) {
                    let ok = self.engine.finish(&uid).is_ok();
                    prop_assert_eq!(
                        ok,
                        self.holding.contains_key(&uid),
                        "finish({}) accepted iff it holds quota",
                        uid
                    );
                    if ok {
                        self.holding.remove(&uid);
                        self.evicting.remove(&uid);
                        self.log.push(format!("finish {uid}"));
                    }
                }
            }
            Op::CompleteEviction(i) => {
                if let Some(uid) = self.pick(i) {
                    let ok = self.engine.eviction_complete(&uid, self.now).is_ok();
                    prop_assert_eq!(
                        ok,
                        self.evicting.contains(&uid),
                        "eviction_complete({}) iff evicting",
                        uid
                    );
                    if ok {
                        self.holding.remove(&uid);
                        self.evicting.remove(&uid);
                        self.known.get_mut(&uid).unwrap().ts = self.now;
                        self.known.get_mut(&uid).unwrap().admitted_at = None;
                    }
                }
            }
            Op::CompleteEvictionWithBackoff(i, delay) => {
                if let Some(uid) = self.pick(i) {
                    let until = self.now + delay;
                    let ok = self
                        .engine
                        .eviction_complete_with_backoff(&uid, self.now, Some(until))
                        .is_ok();
                    prop_assert_eq!(
                        ok,
                        self.evicting.contains(&uid),
                        "eviction_complete({}) iff evicting",
                        uid
                    );
                    if ok {
                        self.holding.remove(&uid);
                        self.evicting.remove(&uid);
                        let k = self.known.get_mut(&uid).unwrap();
                        k.ts = self.now;
                        k.admitted_at = None;
                        k.not_before = until;
                    }
                }
            }
            Op::Evict(i) => {
                if let Some(uid) = self.pick(i) {
                    let ok = self.engine.evict(&uid).is_ok();
                    let expect = self.holding.contains_key(&uid) && !self.evicting.contains(&uid);
                    prop_assert_eq!(ok, expect, "evict({}) iff admitted", uid);
                    if ok {
                        self.evicting.insert(uid);
                    }
                }
            }
            Op::Remove(i) => {
                if let Some(uid) = self.pick(i) {
                    self.engine
                        .remove_workload(&uid)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    self.holding.remove(&uid);
                    self.evicting.remove(&uid);
                    self.known.remove(&uid);
                    self.uids.retain(|u| *u != uid);
                    self.log.push(format!("remove {uid}"));
                }
            }
            Op::Tick(dt) => self.now += dt,
            Op::Restart => {
                self.restart()?;
                self.log.push("restart".into());
            }
            Op::Budget(q, action) => {
                let q = q as usize;
                self.budgets[q] = action;
                self.engine
                    .set_budget_standing(&format!("q{q}"), Some(standing(action)))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.log.push(format!("budget q{q} {action:?}"));
            }
            Op::Stop(q, policy) => {
                let q = q as usize;
                self.stops[q] = policy;
                let mut spec = cq_spec(q, &self.queues[q]);
                spec.stop_policy = policy;
                self.engine.upsert_cluster_queue(spec);
                self.log.push(format!("stop q{q} {policy:?}"));
                if policy == StopPolicy::HoldAndDrain {
                    // Drained at once; reported by the next cycle.
                    for (uid, (hq, _)) in &self.holding {
                        if *hq == q {
                            self.evicting.insert(uid.clone());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A new engine rebuilt from what is known, and a new book from the
    /// records the old one would have flushed now.
    fn restart(&mut self) -> Result<(), TestCaseError> {
        let mut book = UsageBook::new(None);
        for account in self.book.accounts() {
            let record = self.book.record(&account, self.now);
            book.restore(&account, &record);
        }
        self.book = book;
        let mut engine = engine(self.fair);
        for f in FLAVORS {
            engine.upsert_flavor(FlavorSpec {
                name: f.into(),
                ..Default::default()
            });
        }
        for (i, g) in self.queues.iter().enumerate() {
            let mut spec = cq_spec(i, g);
            spec.stop_policy = self.stops[i];
            engine.upsert_cluster_queue(spec);
            engine.upsert_local_queue(LocalQueueSpec {
                key: format!("ns/q{i}"),
                cluster_queue: format!("q{i}"),
                ..Default::default()
            });
        }
        for (i, &action) in self.budgets.iter().enumerate() {
            engine
                .set_budget_standing(&format!("q{i}"), Some(standing(action)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let fail = |e: EngineError| TestCaseError::fail(e.to_string());
        for uid in &self.uids {
            let k = &self.known[uid];
            let mut spec = k.spec.clone();
            spec.queue_order_time = k.ts;
            match self.holding.get(uid) {
                Some((q, _)) => {
                    let at = k.admitted_at.expect("a holder was admitted");
                    engine
                        .restore_admitted(spec, &format!("q{q}"), &self.assignments[uid], at)
                        .map_err(fail)?;
                    if self.evicting.contains(uid) {
                        engine.evict(uid).map_err(fail)?;
                    }
                }
                // A backoff still running is given back.
                None if k.not_before > self.now => engine.add_workload_backing_off(spec, k.not_before).map_err(fail)?,
                None => engine.add_workload(spec).map_err(fail)?,
            }
        }
        self.engine = engine;
        self.reported.clear();
        Ok(())
    }

    fn cycle(&mut self) -> Result<(), TestCaseError> {
        self.cycle_within(usize::MAX).map(|_| ())
    }

    /// A cycle within `budget` decisions, checked; its admissions and
    /// when the engine wants the next cycle.
    fn cycle_within(&mut self, budget: usize) -> Result<(usize, Option<Millis>), TestCaseError> {
        let c = self.engine.schedule_within(self.now, budget);
        for a in &c.admitted {
            let uid = a.uid.to_string();
            prop_assert!(!self.holding.contains_key(&uid), "{} admitted twice", uid);
            let k = self.known.get_mut(&uid).expect("admitted a known workload");
            prop_assert_eq!(&*a.cluster_queue, format!("q{}", k.queue));
            prop_assert_eq!(
                self.stops[k.queue],
                StopPolicy::None,
                "{} admitted into a held queue",
                uid
            );
            prop_assert!(
                self.budgets[k.queue] != Some(BudgetAction::Stop),
                "{} admitted into a queue its budget stops",
                uid
            );
            prop_assert!(
                !(a.borrowing && self.budgets[k.queue] == Some(BudgetAction::Deprioritize)),
                "{} admitted by borrowing into a queue its budget deprioritizes",
                uid
            );
            prop_assert!(
                self.now >= k.not_before,
                "{} admitted during its backoff (until {})",
                uid,
                k.not_before
            );
            prop_assert_eq!(a.pod_sets.len(), k.pod_sets, "gang: every pod set admitted");
            let mut usage: BTreeMap<(String, String), Amount> = BTreeMap::new();
            let mut by_resource: BTreeMap<String, Amount> = BTreeMap::new();
            for ps in a.pod_sets.iter() {
                for (r, amount) in &ps.usage {
                    *usage.entry((ps.flavors[r].clone(), r.clone())).or_default() += amount;
                    *by_resource.entry(r.clone()).or_default() += amount;
                }
            }
            // Pod set a: all its pods, or (partial admission) at least min.
            let full_a = k.spec.pod_sets[0].count;
            let count_a = a.pod_sets[0].count;
            prop_assert!(
                count_a == full_a || k.min.is_some_and(|m| count_a >= m && count_a < full_a),
                "{} admitted with {} of {} pods (min {:?})",
                uid,
                count_a,
                full_a,
                k.min
            );
            let pods: u32 = a.pod_sets.iter().map(|p| p.count).sum();
            prop_assert_eq!(
                pods,
                k.spec.pod_sets.iter().map(|p| p.count).sum::<u32>() - (full_a - count_a)
            );
            let expected: BTreeMap<String, Amount> = k
                .per_pod
                .iter()
                .filter(|(_, a)| **a > 0)
                .map(|(r, a)| (r.clone(), a * pods as Amount))
                .collect();
            prop_assert_eq!(by_resource, expected, "gang: every admitted pod is accounted");
            k.admitted_at = Some(self.now);
            self.holding.insert(uid.clone(), (k.queue, usage));
            self.assignments.insert(uid.clone(), a.pod_sets.to_vec());
            self.log.push(format!("admit {uid} {:?}", a.pod_sets));
        }
        for p in &c.preempted {
            let victim = self.known[&*p.victim].clone();
            let preemptor = self.known[&*p.preemptor].clone();
            let vq = &self.queues[victim.queue];
            let pq = &self.queues[preemptor.queue];
            prop_assert!(
                self.holding.contains_key(&*p.victim) && !self.evicting.contains(&*p.victim),
                "victim {} is admitted",
                p.victim
            );
            // minRuntime protection of the victim's queue.
            let since = self.now - victim.admitted_at.unwrap();
            prop_assert!(
                vq.min_runtime == 0 || since >= vq.min_runtime,
                "{} preempted {}ms after admission",
                p.victim,
                since
            );
            match p.reason {
                PreemptionReason::InClusterQueue => {
                    prop_assert_eq!(victim.queue, preemptor.queue);
                    let allowed = match pq.within {
                        WithinClusterQueue::Never => false,
                        WithinClusterQueue::LowerPriority => victim.priority < preemptor.priority,
                        WithinClusterQueue::LowerOrNewerEqualPriority => {
                            victim.priority < preemptor.priority
                                || (victim.priority == preemptor.priority && victim.ts > preemptor.ts)
                        }
                    };
                    prop_assert!(
                        allowed,
                        "within-queue preemption of {:?} by {:?} not allowed by {:?}",
                        victim,
                        preemptor,
                        pq.within
                    );
                }
                PreemptionReason::InCohortReclamation | PreemptionReason::InCohortReclaimWhileBorrowing
                    if self.fair =>
                {
                    prop_assert!(false, "{:?} with fair sharing on", p.reason);
                }
                PreemptionReason::InCohortReclamation => {
                    prop_assert!(victim.queue != preemptor.queue && vq.cohort.is_some() && vq.cohort == pq.cohort);
                    let allowed = match pq.reclaim {
                        ReclaimWithinCohort::Never => false,
                        ReclaimWithinCohort::LowerPriority => victim.priority < preemptor.priority,
                        ReclaimWithinCohort::Any => true,
                    };
                    prop_assert!(allowed, "reclaim not allowed by {:?}", pq.reclaim);
                }
                PreemptionReason::InCohortFairSharing => {
                    prop_assert!(self.fair, "fair-sharing preemption with fair sharing off");
                    prop_assert!(victim.queue != preemptor.queue && vq.cohort.is_some() && vq.cohort == pq.cohort);
                    let reclaim = match pq.reclaim {
                        ReclaimWithinCohort::Never => false,
                        ReclaimWithinCohort::LowerPriority => victim.priority < preemptor.priority,
                        ReclaimWithinCohort::Any => true,
                    };
                    let borrow = pq
                        .borrow_within
                        .is_some_and(|t| victim.priority < preemptor.priority && victim.priority <= t);
                    prop_assert!(reclaim || borrow, "neither reclaim nor borrowWithinCohort allows it");
                }
                PreemptionReason::InCohortReclaimWhileBorrowing => {
                    prop_assert!(victim.queue != preemptor.queue && vq.cohort.is_some() && vq.cohort == pq.cohort);
                    let t = pq.borrow_within.expect("borrowWithinCohort enabled");
                    prop_assert!(victim.priority < preemptor.priority && victim.priority <= t);
                }
            }
            self.evicting.insert(p.victim.to_string());
            self.log.push(format!("preempt {} for {}", p.victim, p.preemptor));
        }
        // Only HoldAndDrain evicts, and only what its queue admitted.
        for ev in &c.evicted {
            let uid = ev.uid.to_string();
            let q = self.known[&uid].queue;
            prop_assert!(
                self.holding.contains_key(&uid) && self.evicting.contains(&uid),
                "{} reported evicted but not drained by a HoldAndDrain",
                uid
            );
            self.log.push(format!("evict {uid} from q{q}"));
        }
        for (uid, e) in &c.pending_changed {
            self.log
                .push(format!("pending {uid} {}", sluice_convert::text::explanation(e)));
            self.reported.insert(uid.to_string(), Explanation::clone(e));
        }
        // Reporting is complete: whatever a pending workload is told now has
        // the reason last reported for it.
        if let Some(msg) = common::unreported(&self.engine, &self.uids, &self.reported) {
            prop_assert!(false, "{}", msg);
        }
        Ok((c.admitted.len(), c.next_wakeup))
    }

    /// Completes every eviction and finishes every admitted workload, cycling
    /// until nothing is held or claimed; then every queue must be at zero.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..1000 {
            let evicting: Vec<String> = self.evicting.iter().cloned().collect();
            for uid in evicting {
                self.engine
                    .eviction_complete(&uid, self.now)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.evicting.remove(&uid);
                self.holding.remove(&uid);
            }
            let held: Vec<String> = self.holding.keys().cloned().collect();
            for uid in &held {
                self.engine
                    .finish(uid)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                self.holding.remove(uid);
            }
            self.meter()?;
            self.now += 10;
            self.integrate();
            self.cycle()?;
            self.meter()?;
            self.engine.check_consistency().map_err(TestCaseError::fail)?;
            self.check_quota()?;
            let backing_off = self.known.values().any(|k| k.not_before > self.now);
            if self.holding.is_empty() && self.evicting.is_empty() && !backing_off {
                break;
            }
        }
        for name in self.engine.cluster_queue_names() {
            for r in self.engine.cluster_queue_usage(&name).unwrap().resources {
                prop_assert_eq!(
                    (r.used, r.reserved),
                    (0, 0),
                    "{} {}/{} after draining",
                    name,
                    r.flavor,
                    r.resource
                );
            }
        }
        Ok(())
    }

    /// The oracle: usage recomputed from admitted workloads never exceeds
    /// nominal + borrowing limit per queue, and never exceeds what a cohort
    /// can lend (which is what lending limits bound).
    fn check_quota(&self) -> Result<(), TestCaseError> {
        let mut used: HashMap<(usize, String, String), Amount> = HashMap::new();
        for (q, usage) in self.holding.values() {
            for ((f, r), a) in usage {
                *used.entry((*q, f.clone(), r.clone())).or_default() += a;
            }
        }
        for (fi, f) in FLAVORS.iter().enumerate() {
            for (ri, r) in RESOURCES.iter().enumerate() {
                let mut cohort_draw: BTreeMap<u8, Amount> = BTreeMap::new();
                let mut cohort_cap: BTreeMap<u8, Amount> = BTreeMap::new();
                for (qi, g) in self.queues.iter().enumerate() {
                    let spec = cq_spec(qi, g);
                    let quota = &spec.resource_groups[0].flavors[fi].resources[ri];
                    let u = used.get(&(qi, f.to_string(), r.to_string())).copied().unwrap_or(0);
                    let ceiling = match g.cohort {
                        None => quota.nominal,
                        Some(_) => quota.borrowing_limit.map_or(Amount::MAX, |b| quota.nominal + b),
                    };
                    prop_assert!(u <= ceiling, "q{} uses {} of {}/{}, ceiling {}", qi, u, f, r, ceiling);
                    if let Some(c) = g.cohort {
                        let lendable = quota.lending_limit.unwrap_or(quota.nominal);
                        let guaranteed = quota.nominal - lendable;
                        *cohort_draw.entry(c).or_default() += (u - guaranteed).max(0);
                        *cohort_cap.entry(c).or_default() += lendable;
                    }
                }
                for (c, draw) in cohort_draw {
                    prop_assert!(
                        draw <= cohort_cap[&c],
                        "cohort c{} draws {} of {}/{} but can lend {}",
                        c,
                        draw,
                        f,
                        r,
                        cohort_cap[&c]
                    );
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Quota, gangs, single admission, preemption rules and minRuntime hold
    /// after every step; the ledger always equals the sum of its holders.
    #[test]
    fn invariants_hold_for_random_event_sequences((queues, ops, fair) in scenario()) {
        let mut run = Run::new(&queues, fair);
        for op in &ops {
            run.step(op)?;
        }
        // Draining everything returns every queue to zero.
        run.drain()?;
    }

    /// Liveness: once everything admitted has finished (and nothing holds
    /// quota), a workload still waits only if it can never fit its queue,
    /// waits behind such a head in a StrictFIFO queue, its queue is held
    /// (a stop policy, a budget's `Stop`), or it would have to borrow for a
    /// queue its budget deprioritizes. In particular,
    /// parking by shape, waking and the two-pass cycle lose nobody.
    #[test]
    fn nothing_waits_in_an_empty_cluster_unless_it_never_fits((queues, ops, fair) in scenario()) {
        let mut run = Run::new(&queues, fair);
        for op in &ops {
            run.step(op)?;
        }
        run.drain()?;
        for uid in &run.uids {
            match run.engine.workload_state(uid) {
                None | Some(WorkloadState::Finished) => {}
                Some(WorkloadState::Pending) => {
                    let reason = run.engine.explanation(uid).map(|e| e.reason.clone());
                    // A queue its budget deprioritizes may not borrow:
                    // what needs more than its nominal quota waits.
                    let deprioritized = run.budgets[run.known[uid].queue] == Some(BudgetAction::Deprioritize);
                    prop_assert!(
                        (deprioritized && reason == Some(PendingReason::NoFit)) ||
                        matches!(
                            reason,
                            Some(
                                PendingReason::NeverFits
                                    | PendingReason::ResourceNotCovered { .. }
                                    | PendingReason::BlockedByHead
                                    | PendingReason::Held { .. }
                                    | PendingReason::BudgetSpent(_)
                            )
                        ),
                        "{} waits in an empty cluster: {:?}",
                        uid,
                        reason
                    );
                }
                Some(other) => prop_assert!(false, "{} is {:?} after draining", uid, other),
            }
        }
    }

    /// The same calls give the same decisions.
    #[test]
    fn decisions_are_deterministic((queues, ops, fair) in scenario()) {
        let mut a = Run::new(&queues, fair);
        let mut b = Run::new(&queues, fair);
        for op in &ops {
            a.step(op)?;
            b.step(op)?;
        }
        prop_assert_eq!(a.log, b.log);
    }

    /// Releasing and re-admitting in a loop never drifts the ledger: after
    /// every workload finishes, usage is exactly zero everywhere.
    #[test]
    fn finish_and_evict_release_exactly_what_was_taken((queues, ops, fair) in scenario()) {
        let mut run = Run::new(&queues, fair);
        for op in &ops {
            run.step(op)?;
            if let Op::Cycle = op {
                // Complete every eviction right away, then cycle again.
                let evicting: Vec<String> = run.evicting.iter().cloned().collect();
                for uid in evicting {
                    run.step(&Op::CompleteEviction(run.uids.iter().position(|u| *u == uid).unwrap() as u16))?;
                }
                run.cycle()?;
                run.meter()?;
            }
        }
        run.drain()?;
    }
}
