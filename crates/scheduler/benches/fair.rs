//! Fair sharing at scale (issue target: <= 60 ms on the 2-core development
//! machine): the first cycle over 50 000 pending workloads in a 3-level
//! cohort tree of 1 000 queues (a root, 10 divisions, 100 teams, 10 queues
//! each), fair sharing on; and the same world with fair sharing off,
//! measured in the same run as the baseline.
//!
//! `cargo bench -p sluice-scheduler --bench fair` runs it.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sluice_scheduler::*;

const CPU: &str = "cpu";

fn quota(nominal: i64) -> Vec<ResourceGroupSpec> {
    vec![ResourceGroupSpec {
        covered_resources: vec![CPU.into()],
        flavors: vec![FlavorQuotaSpec {
            flavor: "default".into(),
            resources: vec![ResourceQuotaSpec {
                resource: CPU.into(),
                nominal: nominal * 1000,
                borrowing_limit: None,
                lending_limit: None,
            }],
        }],
    }]
}

fn cohort(name: String, parent: Option<String>, nominal: i64) -> CohortSpec {
    CohortSpec {
        name,
        parent,
        resource_groups: quota(nominal),
        fair_weight: Weight::default(),
    }
}

/// Divisions and teams hold quota of their own besides their queues', so
/// every level lends and borrows; demand is about four times the tree.
fn tree_world(fair_sharing: FairSharing) -> Engine {
    let mut e = Engine::with_config(EngineConfig {
        fair_sharing,
        ..Default::default()
    });
    e.upsert_flavor(FlavorSpec {
        name: "default".into(),
        ..Default::default()
    });
    e.upsert_cohort(cohort("org".into(), None, 1000)).unwrap();
    let mut t = 0;
    for d in 0..10 {
        let div = format!("div-{d}");
        e.upsert_cohort(cohort(div.clone(), Some("org".into()), 200)).unwrap();
        for tm in 0..10 {
            let team = format!("team-{d}-{tm}");
            e.upsert_cohort(cohort(team.clone(), Some(div.clone()), 20)).unwrap();
            for q in 0..10 {
                let name = format!("cq-{d}-{tm}-{q}");
                e.upsert_cluster_queue(ClusterQueueSpec {
                    name: name.clone(),
                    cohort: Some(team.clone()),
                    resource_groups: quota(5),
                    fair_weight: Weight(if q % 3 == 0 { 2000 } else { 1000 }),
                    preemption: PreemptionPolicy {
                        within_cluster_queue: WithinClusterQueue::LowerPriority,
                        reclaim_within_cohort: ReclaimWithinCohort::Any,
                        borrow_within_cohort: BorrowWithinCohort::Never,
                        ..Default::default()
                    },
                    ..Default::default()
                });
                let lq = format!("ns/{name}");
                e.upsert_local_queue(LocalQueueSpec {
                    key: lq.clone(),
                    cluster_queue: name.clone(),
                    ..Default::default()
                });
                for i in 0..50 {
                    let (cpu, priority) = match i % 10 {
                        0..=6 => (1, 50),
                        7 | 8 => (5, 100),
                        _ => (20, 200),
                    };
                    t += 1;
                    e.add_workload(WorkloadSpec {
                        uid: format!("{name}-{i}"),
                        name: format!("{name}-{i}"),
                        local_queue: lq.clone(),
                        priority,
                        queue_order_time: t,
                        pod_sets: vec![PodSetSpec {
                            name: "main".into(),
                            count: 1,
                            requests: BTreeMap::from([(CPU.to_string(), cpu * 1000)]),
                            ..Default::default()
                        }],
                        expected_runtime: None,
                    })
                    .unwrap();
                }
            }
        }
    }
    e
}

fn tree_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("fair_tree");
    g.sample_size(10);
    for (name, mode) in [
        ("first_cycle_3_levels_1000_queues_50000_pending", FairSharing::default()),
        ("same_without_fair_sharing", FairSharing::Off),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || tree_world(mode),
                // The engine is returned so that dropping it is not timed.
                |mut e| {
                    let c = e.schedule(1);
                    (e, black_box(c))
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, tree_cycle);
criterion_main!(benches);
