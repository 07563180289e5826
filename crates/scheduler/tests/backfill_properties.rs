//! Backfill under random traces of one reserving queue (1 to 3
//! reservations deep), every workload of one priority and every declared run time exact (some workloads declare
//! none): a workload told its quota is reserved from `t` is admitted by
//! `t`, the start it is told never moves later, backfilled workloads
//! included, and the ledger never exceeds quota.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice_scheduler::*;

const GPU: &str = "nvidia.com/gpu";

#[derive(Clone, Debug)]
struct Job {
    arrival: Millis,
    gpu: i64,
    runtime: Millis,
    declared: bool,
}

fn job_gen() -> impl Strategy<Value = Job> {
    (0i64..50, 1i64..9, 1i64..40, prop::bool::weighted(0.8)).prop_map(|(arrival, gpu, runtime, declared)| Job {
        arrival,
        gpu,
        runtime,
        declared,
    })
}

fn engine(nominal: i64, depth: u32) -> Engine {
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "a100".into(),
        ..Default::default()
    });
    e.upsert_cluster_queue(ClusterQueueSpec {
        name: "a".into(),
        resource_groups: vec![ResourceGroupSpec {
            covered_resources: vec![GPU.into()],
            flavors: vec![FlavorQuotaSpec {
                flavor: "a100".into(),
                resources: vec![ResourceQuotaSpec {
                    resource: GPU.into(),
                    nominal: nominal * 1000,
                    borrowing_limit: None,
                    lending_limit: None,
                }],
            }],
        }],
        backfill: Backfill::Reserve,
        backfill_depth: depth,
        ..Default::default()
    });
    e.upsert_local_queue(LocalQueueSpec {
        key: "ns/a".into(),
        cluster_queue: "a".into(),
        stop_policy: StopPolicy::None,
    });
    e
}

fn spec(i: usize, j: &Job) -> WorkloadSpec {
    WorkloadSpec {
        uid: format!("w{i:03}"),
        name: format!("ns/w{i:03}"),
        local_queue: "ns/a".into(),
        queue_order_time: j.arrival,
        pod_sets: vec![PodSetSpec {
            name: "main".into(),
            count: 1,
            requests: BTreeMap::from([(GPU.to_string(), j.gpu * 1000)]),
            ..Default::default()
        }],
        expected_runtime: j.declared.then_some(j.runtime),
        ..Default::default()
    }
}

/// What the run saw: each workload's admission time, and the reserved
/// starts each was told, in order.
#[derive(Default)]
struct Seen {
    admitted: BTreeMap<String, Millis>,
    promised: BTreeMap<String, Vec<Millis>>,
}

fn run(nominal: i64, depth: u32, jobs: &[Job]) -> Seen {
    let mut e = engine(nominal, depth);
    let mut seen = Seen::default();
    let mut ends: BTreeSet<(Millis, String)> = BTreeSet::new();
    let mut arrivals: Vec<(Millis, usize)> = jobs.iter().enumerate().map(|(i, j)| (j.arrival, i)).collect();
    arrivals.sort();
    let mut next = 0;
    loop {
        let t = [arrivals.get(next).map(|a| a.0), ends.first().map(|e| e.0)]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t else { break };
        while let Some((at, uid)) = ends.first().cloned().filter(|(at, _)| *at == t) {
            ends.remove(&(at, uid.clone()));
            e.finish(&uid).expect("admitted");
        }
        while let Some(&(at, i)) = arrivals.get(next).filter(|a| a.0 == t) {
            e.add_workload(spec(i, &jobs[i])).expect("new");
            next += 1;
            let _ = at;
        }
        let cycle = e.schedule(t);
        e.check_consistency().expect("within quota");
        for a in &cycle.admitted {
            let i: usize = a.uid[1..].parse().expect("our uid");
            seen.admitted.insert(a.uid.to_string(), t);
            ends.insert((t + jobs[i].runtime, a.uid.to_string()));
        }
        for i in 0..next {
            let uid = format!("w{i:03}");
            if let Some(Explanation {
                reason:
                    PendingReason::Reserved {
                        start: ReservedStart::At(s),
                        ..
                    },
                ..
            }) = e.explanation(&uid)
            {
                let told = seen.promised.entry(uid).or_default();
                if told.last() != Some(s) {
                    told.push(*s);
                }
            }
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_reserved_workload_starts_by_the_time_it_was_told(
        nominal in 4i64..12,
        depth in 1u32..4,
        jobs in prop::collection::vec(job_gen(), 1..40),
    ) {
        let seen = run(nominal, depth, &jobs);
        for (uid, told) in &seen.promised {
            let first = told[0];
            let at = seen.admitted.get(uid).copied();
            prop_assert!(at.is_some_and(|a| a <= first), "{uid} told {told:?}, admitted at {at:?}");
            prop_assert!(told.windows(2).all(|w| w[1] <= w[0]), "{uid}'s start moved later: {told:?}");
        }
    }
}
