//! The engine's performance targets (on the 2-core development machine):
//! 1. Kueue's baseline shape drained to completion: >= 200 000 admissions/s.
//! 2. A full cycle over 50 000 pending workloads in 1 000 queues: <= 50 ms.
//! 3. One finish in a full cluster, then the next cycle: <= 1 ms.
//! 4. A preemption-heavy mix: cost per preemption round.
//! 5. A start-time forecast over ~1 000 admitted and ~5 000 pending
//!    workloads (the controller runs one at most once a minute).
//! 6. Node-aware placement: a first cycle over 50 000 pending workloads
//!    and 2 000 nodes, partly full: <= 100 ms; and a steady-state cycle
//!    (a few finishes, arrivals and node usage changes, then a cycle).
//!
//! `cargo bench -p sluice-scheduler` runs them; figures go in the issue note.

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sluice_scheduler::*;

const CPU: &str = "cpu";

/// LocalQueue `ns/<cluster_queue>` pointing at ClusterQueue `cluster_queue`; its key.
fn local_queue(e: &mut Engine, cluster_queue: &str) -> String {
    let key = format!("ns/{cluster_queue}");
    e.upsert_local_queue(LocalQueueSpec {
        key: key.clone(),
        cluster_queue: cluster_queue.to_string(),
        ..Default::default()
    });
    key
}

fn queue(name: &str, cohort: &str, nominal: i64, borrowing: Option<i64>) -> ClusterQueueSpec {
    ClusterQueueSpec {
        name: name.to_string(),
        cohort: Some(cohort.to_string()),
        resource_groups: vec![ResourceGroupSpec {
            covered_resources: vec![CPU.into()],
            flavors: vec![FlavorQuotaSpec {
                flavor: "default".into(),
                resources: vec![ResourceQuotaSpec {
                    resource: CPU.into(),
                    nominal: nominal * 1000,
                    borrowing_limit: borrowing.map(|b| b * 1000),
                    lending_limit: None,
                }],
            }],
        }],
        preemption: PreemptionPolicy {
            within_cluster_queue: WithinClusterQueue::LowerPriority,
            reclaim_within_cohort: ReclaimWithinCohort::Any,
            borrow_within_cohort: BorrowWithinCohort::Never,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn workload(uid: String, lq: &str, cpu: i64, priority: i32, t: Millis) -> WorkloadSpec {
    WorkloadSpec {
        name: uid.clone(),
        uid,
        local_queue: lq.to_string(),
        priority,
        queue_order_time: t,
        pod_sets: vec![PodSetSpec {
            name: "main".into(),
            count: 1,
            requests: BTreeMap::from([(CPU.to_string(), cpu * 1000)]),
            ..Default::default()
        }],
        expected_runtime: None,
    }
}

/// `cohorts` × `per_cohort` queues of 20 CPU (borrowing limit 100) and, per
/// queue, Kueue's small/medium/large mix scaled to `per_queue` workloads
/// (350:100:50).
fn kueue_world(cohorts: usize, per_cohort: usize, per_queue: usize) -> Engine {
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "default".into(),
        ..Default::default()
    });
    let (small, medium) = (per_queue * 350 / 500, per_queue * 100 / 500);
    let mut t = 0;
    for c in 0..cohorts {
        for q in 0..per_cohort {
            let name = format!("cq-{c}-{q}");
            e.upsert_cluster_queue(queue(&name, &format!("cohort-{c}"), 20, Some(100)));
            let lq = local_queue(&mut e, &name);
            for i in 0..per_queue {
                let (cpu, prio) = if i < small {
                    (1, 50)
                } else if i < small + medium {
                    (5, 100)
                } else {
                    (20, 200)
                };
                t += 1;
                e.add_workload(workload(format!("{name}-{i}"), &lq, cpu, prio, t))
                    .unwrap();
            }
        }
    }
    e
}

/// Admits, finishes everything admitted, repeats until all are done.
/// Returns the number of admissions.
fn drain(e: &mut Engine) -> usize {
    let mut now = 0;
    let mut total = 0;
    loop {
        now += 1;
        let c = e.schedule(now);
        if c.admitted.is_empty() && c.preempted.is_empty() {
            return total;
        }
        total += c.admitted.len();
        for p in &c.preempted {
            e.eviction_complete(&p.victim, now).unwrap();
        }
        for a in &c.admitted {
            e.finish(&a.uid).unwrap();
        }
    }
}

fn baseline_drain(c: &mut Criterion) {
    let mut g = c.benchmark_group("kueue_baseline");
    g.sample_size(10);
    g.throughput(Throughput::Elements(15_000));
    g.bench_function("drain_15000_admissions", |b| {
        b.iter_batched(
            || kueue_world(5, 6, 500),
            |mut e| assert_eq!(black_box(drain(&mut e)), 15_000),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn full_cycle_50k(c: &mut Criterion) {
    let mut g = c.benchmark_group("large_scale");
    g.sample_size(10);
    g.bench_function("first_cycle_50000_pending_1000_queues", |b| {
        b.iter_batched(
            || kueue_world(10, 100, 50),
            // The engine is returned so that dropping it is not timed.
            |mut e| {
                let c = e.schedule(1);
                (e, black_box(c))
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn incremental_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("incremental");
    // A full cluster: 1 000 queues, 50 000 workloads, quota exhausted.
    let mut e = kueue_world(10, 100, 50);
    let first = e.schedule(1);
    let mut admitted: Vec<String> = first.admitted.iter().map(|a| a.uid.to_string()).collect();
    let pending_left = e.workload_count() - admitted.len();
    eprintln!("incremental: {} admitted, {pending_left} pending", admitted.len());
    let mut now = 2;
    g.bench_function("finish_one_then_cycle_in_full_cluster", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                now += 1;
                let uid = admitted.swap_remove(0);
                let start = Instant::now();
                e.finish(&uid).unwrap();
                let c = e.schedule(now);
                spent += start.elapsed();
                admitted.extend(c.admitted.iter().map(|a| a.uid.to_string()));
                e.remove_workload(&uid).unwrap();
            }
            spent
        })
    });
    g.finish();
}

fn preemption_heavy(c: &mut Criterion) {
    let mut g = c.benchmark_group("preemption");
    g.sample_size(10);
    // 30 queues in 5 cohorts full of low-priority 1-CPU work (each queue
    // borrows); 300 high-priority 5-CPU workloads arrive and preempt.
    g.bench_function("300_preemptors_in_30_full_queues", |b| {
        b.iter_batched(
            || {
                let mut e = kueue_world(5, 6, 0);
                let mut t = 0;
                for c in 0..5 {
                    for q in 0..6 {
                        let lq = format!("ns/cq-{c}-{q}");
                        for i in 0..40 {
                            t += 1;
                            e.add_workload(workload(format!("low-{c}-{q}-{i}"), &lq, 1, 10, t))
                                .unwrap();
                        }
                    }
                }
                let first = e.schedule(1);
                assert_eq!(first.admitted.len(), 600, "5 cohorts × 120 CPU");
                for c in 0..5 {
                    for q in 0..6 {
                        let lq = format!("ns/cq-{c}-{q}");
                        for i in 0..10 {
                            t += 1;
                            e.add_workload(workload(format!("high-{c}-{q}-{i}"), &lq, 5, 100, t))
                                .unwrap();
                        }
                    }
                }
                e
            },
            |mut e| {
                let c = e.schedule(2);
                let victims = c.preempted.len();
                for p in &c.preempted {
                    e.eviction_complete(&p.victim, 3).unwrap();
                }
                let c2 = e.schedule(3);
                assert!(victims > 0 && !c2.admitted.is_empty());
                black_box((victims, c2.admitted.len()))
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// A spread of run times (1 to 50 minutes) that depends only on the UID.
fn spread(uid: &str) -> Millis {
    let h = uid
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    60_000 * (1 + (h % 50) as Millis)
}

fn forecast_6000(c: &mut Criterion) {
    let mut g = c.benchmark_group("forecast");
    g.sample_size(10);
    // 10 cohorts × 10 queues of 10 CPU without borrowing; 60 workloads of
    // 1 CPU per queue in two priorities: 1 000 admitted, 5 000 pending.
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "default".into(),
        ..Default::default()
    });
    let mut t = 0;
    for c in 0..10 {
        for q in 0..10 {
            let name = format!("cq-{c}-{q}");
            e.upsert_cluster_queue(queue(&name, &format!("cohort-{c}"), 10, Some(0)));
            let lq = local_queue(&mut e, &name);
            for i in 0..60i32 {
                t += 1;
                e.add_workload(workload(format!("{name}-{i}"), &lq, 1, 50 * (i % 2), t))
                    .unwrap();
            }
        }
    }
    let first = e.schedule(t);
    assert_eq!(first.admitted.len(), 1_000);
    let now = t + 1;
    let settings = ForecastSettings::default();
    let out = e.forecast(now, |uid| Some(now + spread(uid) / 2), spread, settings);
    eprintln!("forecast: {} of 5000 pending estimated", out.len());
    assert_eq!(out.len(), 5_000);
    g.bench_function("1000_admitted_5000_pending", |b| {
        b.iter(|| black_box(e.forecast(now, |uid| Some(now + spread(uid) / 2), spread, settings)))
    });
    g.finish();
}

const GPU: &str = "nvidia.com/gpu";
const FLAVORS: usize = 8;
const NODES_PER_FLAVOR: usize = 250;
const QUEUES_PER_FLAVOR: usize = 125;

/// (pods, GPUs per pod) of the i-th workload of a queue: mostly single
/// pods of 1 to 8 GPUs, some gangs of 8-GPU pods.
fn gpu_shape(i: usize) -> (u32, i64) {
    [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (1, 1), (4, 8), (1, 2)][i % 8]
}

fn gpu_workload(uid: String, lq: &str, (pods, gpus): (u32, i64), priority: i32, t: Millis) -> WorkloadSpec {
    WorkloadSpec {
        name: uid.clone(),
        uid,
        local_queue: lq.to_string(),
        priority,
        queue_order_time: t,
        pod_sets: vec![PodSetSpec {
            name: "main".into(),
            count: pods,
            requests: BTreeMap::from([(GPU.to_string(), gpus * 1000), (CPU.to_string(), gpus * 8000)]),
            ..Default::default()
        }],
        expected_runtime: None,
    }
}

/// Foreign usage of node `i`: 0 to 6 GPUs, so nodes are partly full.
fn foreign_gpus(i: usize, round: usize) -> i64 {
    ((i * 7 + round * 3) % 7) as i64
}

/// 8 flavors of 250 nodes with 8 GPUs (2 000 nodes) and, per flavor, a
/// cohort of 125 queues of 16 GPUs (1 000 queues) with `per_queue`
/// pending workloads each; nodes carry foreign pods, and two workloads
/// per queue are restored as admitted.
fn nodes_world(per_queue: usize) -> Engine {
    let mut e = Engine::with_config(EngineConfig {
        placement: PlacementMode::Nodes,
        ..Default::default()
    });
    for f in 0..FLAVORS {
        let pool = format!("gpu-{f}");
        e.upsert_flavor(FlavorSpec {
            name: pool.clone(),
            node_labels: BTreeMap::from([("pool".to_string(), pool.clone())]),
            ..Default::default()
        });
        for n in 0..NODES_PER_FLAVOR {
            let name = format!("{pool}-node-{n}");
            e.upsert_node(NodeSpec {
                name: name.clone(),
                labels: BTreeMap::from([
                    ("pool".to_string(), pool.clone()),
                    ("rack".to_string(), format!("rack-{}", n / 16)),
                ]),
                allocatable: BTreeMap::from([
                    (GPU.to_string(), 8_000),
                    (CPU.to_string(), 128_000),
                    ("pods".to_string(), 110_000),
                ]),
                schedulable: true,
                ..Default::default()
            });
            let g = foreign_gpus(f * NODES_PER_FLAVOR + n, 0);
            e.set_node_usage(
                &name,
                &NodeUsage {
                    requested: BTreeMap::from([(GPU.to_string(), g * 1000), ("pods".to_string(), g * 1000)]),
                    ..Default::default()
                },
            );
        }
    }
    let mut t = 0;
    for f in 0..FLAVORS {
        let pool = format!("gpu-{f}");
        for q in 0..QUEUES_PER_FLAVOR {
            let name = format!("cq-{f}-{q}");
            e.upsert_cluster_queue(ClusterQueueSpec {
                name: name.clone(),
                cohort: Some(format!("cohort-{f}")),
                resource_groups: vec![ResourceGroupSpec {
                    covered_resources: vec![GPU.into(), CPU.into()],
                    flavors: vec![FlavorQuotaSpec {
                        flavor: pool.clone(),
                        resources: vec![
                            ResourceQuotaSpec {
                                resource: GPU.into(),
                                nominal: 16_000,
                                borrowing_limit: Some(32_000),
                                lending_limit: None,
                            },
                            ResourceQuotaSpec {
                                resource: CPU.into(),
                                nominal: 1_000_000,
                                borrowing_limit: None,
                                lending_limit: None,
                            },
                        ],
                    }],
                }],
                preemption: PreemptionPolicy {
                    within_cluster_queue: WithinClusterQueue::LowerPriority,
                    reclaim_within_cohort: ReclaimWithinCohort::LowerPriority,
                    borrow_within_cohort: BorrowWithinCohort::Never,
                    ..Default::default()
                },
                ..Default::default()
            });
            let lq = local_queue(&mut e, &name);
            for i in 0..2 {
                let shape = gpu_shape(i);
                let spec = gpu_workload(format!("{name}-running-{i}"), &lq, shape, 50, 0);
                let assignment = PodSetAssignment {
                    name: "main".into(),
                    count: shape.0,
                    flavors: BTreeMap::from([(GPU.to_string(), pool.clone()), (CPU.to_string(), pool.clone())]),
                    usage: BTreeMap::from([
                        (GPU.to_string(), shape.1 * 1000 * shape.0 as i64),
                        (CPU.to_string(), shape.1 * 8000 * shape.0 as i64),
                    ]),
                    topology: None,
                };
                e.restore_admitted(spec, &name, &[assignment], 0).unwrap();
            }
            for i in 0..per_queue {
                t += 1;
                let priority = [0, 50, 100][i % 3];
                e.add_workload(gpu_workload(format!("{name}-{i}"), &lq, gpu_shape(i), priority, t))
                    .unwrap();
            }
        }
    }
    e
}

fn placement_cycles(c: &mut Criterion) {
    let mut g = c.benchmark_group("placement");
    g.sample_size(10);
    g.bench_function("first_cycle_50000_pending_2000_nodes", |b| {
        b.iter_batched(
            || nodes_world(50),
            |mut e| {
                let c = e.schedule(1);
                (e, black_box(c))
            },
            BatchSize::LargeInput,
        )
    });
    // Steady state: per round, 10 admitted workloads finish (their pods
    // leave their nodes), 10 arrive, foreign pods move on 10 nodes; then a
    // cycle.
    let mut e = nodes_world(50);
    let first = e.schedule(1);
    let mut admitted: BTreeSet<String> = first.admitted.iter().map(|a| a.uid.to_string()).collect();
    eprintln!(
        "placement: {} admitted, {} preempted by the first cycle",
        admitted.len(),
        first.preempted.len()
    );
    // Settle: evictions complete until a cycle decides nothing more.
    let mut now = 1;
    let mut c = first;
    while !c.admitted.is_empty() || !c.preempted.is_empty() {
        for p in &c.preempted {
            e.eviction_complete(&p.victim, now).unwrap();
            admitted.remove(&*p.victim);
        }
        now += 1;
        c = e.schedule(now);
        admitted.extend(c.admitted.iter().map(|a| a.uid.to_string()));
    }
    let (mut next, mut round) = (0usize, 0usize);
    g.bench_function("steady_cycle_2000_nodes", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                now += 1;
                round += 1;
                let start = Instant::now();
                for _ in 0..10 {
                    let Some(uid) = admitted.pop_first() else { break };
                    e.finish(&uid).unwrap();
                    e.remove_workload(&uid).unwrap();
                }
                for _ in 0..10 {
                    next += 1;
                    let (f, q) = (next % FLAVORS, next % QUEUES_PER_FLAVOR);
                    let lq = format!("ns/cq-{f}-{q}");
                    let spec = gpu_workload(
                        format!("new-{next}"),
                        &lq,
                        gpu_shape(next),
                        50,
                        1_000_000 + next as Millis,
                    );
                    e.add_workload(spec).unwrap();
                }
                for k in 0..10 {
                    let i = (round * 10 + k) * 37 % (FLAVORS * NODES_PER_FLAVOR);
                    let g = foreign_gpus(i, round);
                    let name = format!("gpu-{}-node-{}", i / NODES_PER_FLAVOR, i % NODES_PER_FLAVOR);
                    e.set_node_usage(
                        &name,
                        &NodeUsage {
                            requested: BTreeMap::from([(GPU.to_string(), g * 1000)]),
                            ..Default::default()
                        },
                    );
                }
                let c = e.schedule(now);
                spent += start.elapsed();
                for p in &c.preempted {
                    e.eviction_complete(&p.victim, now).unwrap();
                    admitted.remove(&*p.victim);
                }
                admitted.extend(c.admitted.iter().map(|a| a.uid.to_string()));
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    baseline_drain,
    full_cycle_50k,
    incremental_cycle,
    preemption_heavy,
    forecast_6000,
    placement_cycles
);
criterion_main!(benches);
