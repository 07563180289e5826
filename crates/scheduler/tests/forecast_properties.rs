//! [`Engine::forecast`] under random small states: it terminates, leaves
//! the engine untouched, is deterministic, estimates only workloads pending
//! at the call within the horizon, and its first cycle is the real next one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use sluice_scheduler::*;

const GPU: &str = "nvidia.com/gpu";

#[derive(Clone, Debug)]
struct QueueGen {
    cohort: Option<u8>,
    strict: bool,
    nominal: i64,
    borrowing: Option<i64>,
    within: WithinClusterQueue,
    reclaim: ReclaimWithinCohort,
    min_runtime: Millis,
    hold: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Add { queue: u8, priority: i32, gpu: i64 },
    Cycle,
    Finish(u16),
    CompleteEviction(u16),
    Backoff(u16, Millis),
    Evict(u16),
    Tick(Millis),
}

fn queue_gen() -> impl Strategy<Value = QueueGen> {
    (
        prop::option::of(0u8..2),
        any::<bool>(),
        0i64..10,
        prop::option::of(0i64..6),
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
        prop_oneof![Just(0), Just(7)],
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(cohort, strict, nominal, borrowing, within, reclaim, min_runtime, hold)| QueueGen {
                cohort,
                strict,
                nominal,
                borrowing,
                within,
                reclaim,
                min_runtime,
                hold,
            },
        )
}

fn op_gen(queues: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..queues, 0i32..3, 0i64..7).prop_map(|(queue, priority, gpu)| Op::Add { queue, priority, gpu }),
        3 => Just(Op::Cycle),
        2 => any::<u16>().prop_map(Op::Finish),
        2 => any::<u16>().prop_map(Op::CompleteEviction),
        1 => (any::<u16>(), 1i64..40).prop_map(|(i, d)| Op::Backoff(i, d)),
        1 => any::<u16>().prop_map(Op::Evict),
        1 => (1i64..8).prop_map(Op::Tick),
    ]
}

/// Per workload (by number): its expected end relative to now (`None`:
/// unknown; negative: overdue) and its expected run time.
#[derive(Clone, Debug)]
struct Guess {
    end: Option<Millis>,
    runtime: Millis,
}

fn guess_gen() -> impl Strategy<Value = Guess> {
    (prop::option::weighted(0.85, -10i64..60), 0i64..40).prop_map(|(end, runtime)| Guess { end, runtime })
}

type Case = (Vec<QueueGen>, Vec<Op>, Vec<Guess>, Millis, usize);

fn case() -> impl Strategy<Value = Case> {
    (1u8..4).prop_flat_map(|n| {
        (
            prop::collection::vec(queue_gen(), n as usize),
            prop::collection::vec(op_gen(n), 1..60),
            prop::collection::vec(guess_gen(), 60),
            prop_oneof![Just(1_000_000), 0i64..80],
            prop_oneof![Just(100_000), 0usize..6],
        )
    })
}

fn cq_spec(i: usize, g: &QueueGen) -> ClusterQueueSpec {
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
            covered_resources: vec![GPU.into()],
            flavors: vec![FlavorQuotaSpec {
                flavor: "f".into(),
                resources: vec![ResourceQuotaSpec {
                    resource: GPU.into(),
                    nominal: g.nominal * 1000,
                    borrowing_limit: g.cohort.and(g.borrowing).map(|b| b * 1000),
                    lending_limit: None,
                }],
            }],
        }],
        preemption: PreemptionPolicy {
            within_cluster_queue: g.within,
            reclaim_within_cohort: g.reclaim,
            borrow_within_cohort: BorrowWithinCohort::Never,
            ..Default::default()
        },
        min_runtime: g.min_runtime,
        stop_policy: if g.hold { StopPolicy::Hold } else { StopPolicy::None },
        backfill: Default::default(),
        backfill_max_delay: 0,
        backfill_depth: 1,
    }
}

/// Builds a state by applying the operations (invalid ones are skipped, as
/// a controller's would fail).
fn build(queues: &[QueueGen], ops: &[Op]) -> (Engine, Vec<String>, Millis) {
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "f".into(),
        ..Default::default()
    });
    for (i, g) in queues.iter().enumerate() {
        e.upsert_cluster_queue(cq_spec(i, g));
        e.upsert_local_queue(LocalQueueSpec {
            key: format!("ns/q{i}"),
            cluster_queue: format!("q{i}"),
            ..Default::default()
        });
    }
    let mut uids: Vec<String> = Vec::new();
    let mut now = 0;
    let pick = |uids: &[String], i: u16| (!uids.is_empty()).then(|| uids[i as usize % uids.len()].clone());
    for op in ops {
        match *op {
            Op::Add { queue, priority, gpu } => {
                let uid = format!("w{:02}", uids.len());
                e.add_workload(WorkloadSpec {
                    uid: uid.clone(),
                    name: format!("ns/{uid}"),
                    local_queue: format!("ns/q{queue}"),
                    priority,
                    queue_order_time: now,
                    pod_sets: vec![PodSetSpec {
                        name: "main".into(),
                        count: 1,
                        requests: BTreeMap::from([(GPU.to_string(), gpu * 1000)]),
                        ..Default::default()
                    }],
                    expected_runtime: None,
                })
                .expect("valid workload");
                uids.push(uid);
            }
            Op::Cycle => {
                e.schedule(now);
            }
            Op::Finish(i) => {
                if let Some(uid) = pick(&uids, i) {
                    let _ = e.finish(&uid);
                }
            }
            Op::CompleteEviction(i) => {
                if let Some(uid) = pick(&uids, i) {
                    let _ = e.eviction_complete(&uid, now);
                }
            }
            Op::Backoff(i, d) => {
                if let Some(uid) = pick(&uids, i) {
                    let _ = e.eviction_complete_with_backoff(&uid, now, Some(now + d));
                }
            }
            Op::Evict(i) => {
                if let Some(uid) = pick(&uids, i) {
                    let _ = e.evict(&uid);
                }
            }
            Op::Tick(d) => now += d,
        }
    }
    (e, uids, now)
}

fn snapshot(e: &Engine, uids: &[String]) -> Vec<(Option<WorkloadState>, Option<Admission>)> {
    uids.iter().map(|u| (e.workload_state(u), e.admission(u))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn forecasts_terminate_and_change_nothing((queues, ops, guesses, horizon, max_cycles) in case()) {
        let (engine, uids, now) = build(&queues, &ops);
        let number = |uid: &str| uid[1..].parse::<usize>().expect("w<n>");
        let ends = |uid: &str| guesses[number(uid)].end.map(|d| now + d);
        let runtime = |uid: &str| guesses[number(uid)].runtime;
        let settings = ForecastSettings { horizon_ms: horizon, max_cycles };
        let pending: BTreeSet<&str> = uids
            .iter()
            .map(String::as_str)
            .filter(|u| matches!(engine.workload_state(u), Some(WorkloadState::Pending | WorkloadState::Preempting)))
            .collect();
        let before = snapshot(&engine, &uids);
        let twin = engine.clone();

        let out = engine.forecast(now, ends, runtime, settings);

        // Only workloads pending at the call, within the horizon.
        for (uid, &t) in &out {
            prop_assert!(pending.contains(&**uid), "{} was not pending", uid);
            prop_assert!(t >= now && t <= now + horizon, "{} estimated at {} (now {})", uid, t, now);
        }
        if max_cycles == 0 {
            prop_assert!(out.is_empty());
        }
        // Deterministic.
        prop_assert_eq!(&out, &engine.forecast(now, ends, runtime, settings));
        // The original is untouched: same states, same admissions, a sound
        // ledger, and its next cycle is the one its copy made beforehand.
        engine.check_consistency().map_err(TestCaseError::fail)?;
        prop_assert_eq!(snapshot(&engine, &uids), before);
        let mut engine = engine;
        let mut twin = twin;
        let real = engine.schedule(now);
        prop_assert_eq!(&real, &twin.schedule(now));
        // The forecast's first cycle is that same cycle: whatever it admits
        // of the pending workloads is estimated at `now`.
        if max_cycles > 0 {
            for a in real.admitted.iter().filter(|a| pending.contains(&*a.uid)) {
                prop_assert_eq!(out.get(&a.uid).copied(), Some(now), "{} admitted now", a.uid);
            }
        }
    }

    #[test]
    fn with_known_ends_a_lone_workload_that_fits_an_empty_queue_is_estimated(
        (queues, ops, guesses, _h, _m) in case()
    ) {
        // Every end known, nothing held, no cohort, no StrictFIFO head that
        // never fits: each queue drains in the copy, so every pending
        // workload that fits its queue's quota on its own is estimated.
        let queues: Vec<QueueGen> = queues
            .into_iter()
            .map(|g| QueueGen { cohort: None, hold: false, strict: false, ..g })
            .collect();
        let (engine, uids, now) = build(&queues, &ops);
        let number = |uid: &str| uid[1..].parse::<usize>().expect("w<n>");
        let out: BTreeMap<Arc<str>, Millis> = engine.forecast(
            now,
            |uid| Some(now + guesses[number(uid)].end.unwrap_or(5)),
            |uid| guesses[number(uid)].runtime,
            ForecastSettings::default(),
        );
        for (i, uid) in uids.iter().enumerate() {
            if !matches!(engine.workload_state(uid), Some(WorkloadState::Pending | WorkloadState::Preempting)) {
                continue;
            }
            let Some(Op::Add { queue, gpu, .. }) = ops.iter().filter(|o| matches!(o, Op::Add { .. })).nth(i) else {
                unreachable!("one Add per uid")
            };
            if *gpu <= queues[*queue as usize].nominal {
                prop_assert!(out.contains_key(uid.as_str()), "{} ({} GPUs in q{}) not estimated: {:?}", uid, gpu, queue, out);
            }
        }
    }
}
