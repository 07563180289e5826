//! Random worlds for the placement property: nodes, queues, workloads,
//! events, and the model's state (see `placement_properties.rs`).

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use sluice_scheduler::*;

pub const GPU: &str = "nvidia.com/gpu";
pub const CPU: &str = "cpu";
pub const PODS: &str = "pods";
pub const RES: [&str; 3] = [GPU, CPU, PODS];
pub const FLAVORS: [&str; 2] = ["f0", "f1"];

#[derive(Clone, Debug)]
pub struct NodeGen {
    pub flavor: usize,
    pub rack: u8,
    pub gpus: i64,
    pub cpus: i64,
    pub pods: i64,
    pub tainted: bool,
    pub cordoned: bool,
}

#[derive(Clone, Debug)]
pub struct QueueGen {
    pub cohort: bool,
    pub gpu: [i64; 2],
    pub borrowing: Option<i64>,
    pub within: WithinClusterQueue,
    pub reclaim: ReclaimWithinCohort,
    pub borrow_within: Option<i32>,
}

#[derive(Clone, Debug)]
pub struct WlGen {
    pub queue: usize,
    pub priority: i32,
    /// (pods, GPUs per pod, CPUs per pod).
    pub pod_sets: Vec<(u32, i64, i64)>,
    pub single_domain: bool,
    pub tolerates: bool,
}

#[derive(Clone, Debug)]
pub enum Op {
    Add(WlGen),
    Cycle,
    Finish(u16),
    Evict(u16),
    Complete(u16),
    /// Foreign pods on a node: GPUs, CPUs, pods; how many are terminating
    /// (none, half, all).
    Foreign(u8, i64, i64, i64, u8),
    Bind(u16),
    Cordon(u8, bool),
    Tick,
}

pub fn node_gen() -> impl Strategy<Value = NodeGen> {
    let gpus = prop_oneof![1 => 1i64..=3, 3 => 4i64..=8];
    (
        0usize..2,
        0u8..2,
        gpus,
        2i64..=8,
        2i64..=8,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(flavor, rack, gpus, cpus, pods, tainted, cordoned)| NodeGen {
            flavor,
            rack,
            gpus,
            cpus,
            pods,
            tainted,
            cordoned,
        })
}

pub fn queue_gen() -> impl Strategy<Value = QueueGen> {
    (
        any::<bool>(),
        [0i64..32, 0i64..32],
        prop::option::of(0i64..8),
        prop_oneof![
            1 => Just(WithinClusterQueue::Never),
            2 => Just(WithinClusterQueue::LowerPriority),
            1 => Just(WithinClusterQueue::LowerOrNewerEqualPriority)
        ],
        prop_oneof![
            Just(ReclaimWithinCohort::Never),
            Just(ReclaimWithinCohort::LowerPriority),
            Just(ReclaimWithinCohort::Any)
        ],
        prop::option::of(0i32..3),
    )
        .prop_map(|(cohort, gpu, borrowing, within, reclaim, borrow_within)| QueueGen {
            cohort,
            gpu,
            borrowing,
            within,
            reclaim,
            borrow_within,
        })
}

pub fn op_gen(queues: usize, nodes: u8) -> impl Strategy<Value = Op> {
    // Mostly small gangs of small pods, sometimes up to 4 pods of 8 GPUs.
    let pods = prop_oneof![3 => 1u32..=2, 1 => 3u32..=4];
    let gpus = prop_oneof![3 => 1i64..=2, 2 => 3i64..=4, 1 => 5i64..=8];
    let wl = (
        0..queues,
        0i32..4,
        prop::collection::vec((pods, gpus, 0i64..=2), 1..=2),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(queue, priority, pod_sets, single_domain, tolerates)| {
            Op::Add(WlGen {
                queue,
                priority,
                pod_sets,
                single_domain,
                tolerates,
            })
        });
    prop_oneof![
        5 => wl,
        5 => Just(Op::Cycle),
        2 => any::<u16>().prop_map(Op::Finish),
        1 => any::<u16>().prop_map(Op::Evict),
        2 => any::<u16>().prop_map(Op::Complete),
        2 => (0..nodes, 0i64..=8, 0i64..=4, 0i64..=3, 0u8..3).prop_map(|(n, g, c, p, t)| Op::Foreign(n, g, c, p, t)),
        2 => any::<u16>().prop_map(Op::Bind),
        1 => (0..nodes, prop::bool::weighted(0.4)).prop_map(|(n, c)| Op::Cordon(n, c)),
        1 => Just(Op::Tick),
    ]
}

pub type Scenario = (Vec<NodeGen>, Vec<QueueGen>, bool, Vec<Op>);

pub fn scenario() -> impl Strategy<Value = Scenario> {
    (2u8..=8, 1usize..=3).prop_flat_map(|(n, q)| {
        (
            prop::collection::vec(node_gen(), n as usize),
            prop::collection::vec(queue_gen(), q),
            any::<bool>(),
            prop::collection::vec(op_gen(q, n), 1..150),
        )
    })
}

/// Amounts of GPU, CPU, pods (milli-units).
pub type Res = [i64; 3];

pub fn res_map(r: &Res) -> BTreeMap<String, Amount> {
    RES.iter()
        .zip(r)
        .filter(|(_, a)| **a != 0)
        .map(|(k, a)| (k.to_string(), *a))
        .collect()
}

pub fn res_of(m: &BTreeMap<String, Amount>, pods: u32) -> Res {
    let get = |k: &str| m.get(k).copied().unwrap_or(0);
    [get(GPU), get(CPU), pods as i64 * 1000]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Admitted,
    Evicting,
    Finished,
}

pub struct Wm {
    pub spec: WlGen,
    /// Queue-order time (requeued at the eviction's completion).
    pub ts: Millis,
    pub phase: Phase,
    pub admission: Option<Admission>,
    /// Its pods, bound where planned (per node, pods and requests).
    pub bound: Vec<(usize, Res)>,
}

pub struct Model {
    pub e: Engine,
    pub strict: bool,
    pub nodes: Vec<NodeSpec>,
    pub gens: Vec<NodeGen>,
    pub queues: Vec<QueueGen>,
    pub foreign: Vec<(Res, Res)>,
    pub reported: Vec<NodeUsage>,
    pub wls: BTreeMap<String, Wm>,
    pub uids: Vec<String>,
    /// The last explanation reported for each workload.
    pub told: HashMap<String, Explanation>,
    pub now: Millis,
    /// Excess of (now, later) per node and resource after the last step.
    pub excess: Vec<[(i64, i64); 3]>,
}

pub fn cq_spec(i: usize, g: &QueueGen) -> ClusterQueueSpec {
    ClusterQueueSpec {
        name: format!("q{i}"),
        cohort: g.cohort.then(|| "c".to_string()),
        resource_groups: vec![ResourceGroupSpec {
            covered_resources: vec![GPU.into(), CPU.into()],
            flavors: FLAVORS
                .iter()
                .enumerate()
                .map(|(fi, f)| FlavorQuotaSpec {
                    flavor: f.to_string(),
                    resources: vec![
                        ResourceQuotaSpec {
                            resource: GPU.into(),
                            nominal: g.gpu[fi] * 1000,
                            borrowing_limit: g.cohort.then_some(g.borrowing).flatten().map(|b| b * 1000),
                            lending_limit: None,
                        },
                        ResourceQuotaSpec {
                            resource: CPU.into(),
                            nominal: 64_000,
                            borrowing_limit: None,
                            lending_limit: None,
                        },
                    ],
                })
                .collect(),
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
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn node_spec(i: usize, g: &NodeGen) -> NodeSpec {
    NodeSpec {
        name: format!("n{i}"),
        labels: BTreeMap::from([
            ("pool".to_string(), FLAVORS[g.flavor].to_string()),
            ("rack".to_string(), format!("r{}", g.rack)),
        ]),
        taints: if g.tainted {
            vec![Taint {
                key: "special".into(),
                value: None,
                effect: TaintEffect::NoSchedule,
            }]
        } else {
            Vec::new()
        },
        allocatable: res_map(&[g.gpus * 1000, g.cpus * 1000, g.pods * 1000]),
        schedulable: !g.cordoned,
    }
}
