//! GPU-equivalents: MIG slices, whole GPUs and time-sliced replicas
//! charged against one quota, by resource transformations
//! (`engine/charge.rs`) and the replicas of the flavors' nodes
//! (`sharing.rs`).

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::common::*;
use sluice_scheduler::sharing::{REPLICAS_LABEL, STRATEGY_LABEL};
use sluice_scheduler::*;

const EQ: &str = "sluice.dev/gpu-equivalent";
const SLICE: &str = "nvidia.com/mig-1g.10gb";
/// Engine units of one GPU-equivalent (what the API's units give it).
const PER_EQ: Amount = 720_720;

/// `n/d` equivalents per unit (1 000 milli-units) of the input.
fn per_unit(n: Amount, d: Amount) -> Ratio {
    Ratio {
        num: PER_EQ * n,
        den: 1000 * d,
    }
}

fn transformations() -> Vec<Transformation> {
    vec![
        Transformation {
            input: SLICE.into(),
            strategy: TransformStrategy::Replace,
            outputs: vec![(EQ.into(), per_unit(1, 7))],
        },
        Transformation {
            input: GPU.into(),
            strategy: TransformStrategy::Retain,
            outputs: vec![(EQ.into(), per_unit(1, 1))],
        },
    ]
}

fn quota(resource: &str, nominal: Amount) -> ResourceQuotaSpec {
    ResourceQuotaSpec {
        resource: resource.into(),
        nominal,
        borrowing_limit: None,
        lending_limit: None,
    }
}

/// Queue `team`: whole A100s (8) or time-sliced ones (8 cards × 4
/// replicas) in one group, `equivalents` GPU-equivalents across them in
/// another (one flavor, `pool`, that selects no node).
fn team(equivalents: Amount) -> ClusterQueueSpec {
    ClusterQueueSpec {
        name: "team".into(),
        resource_groups: vec![
            ResourceGroupSpec {
                covered_resources: vec![GPU.into()],
                flavors: vec![
                    FlavorQuotaSpec {
                        flavor: "a100-shared".into(),
                        resources: vec![quota(GPU, u(32))],
                    },
                    FlavorQuotaSpec {
                        flavor: "a100".into(),
                        resources: vec![quota(GPU, u(8))],
                    },
                ],
            },
            ResourceGroupSpec {
                covered_resources: vec![EQ.into()],
                flavors: vec![FlavorQuotaSpec {
                    flavor: "pool".into(),
                    resources: vec![quota(EQ, equivalents * PER_EQ)],
                }],
            },
        ],
        ..Default::default()
    }
}

fn shared_flavor(labels: &[(&str, &str)]) -> FlavorSpec {
    FlavorSpec {
        name: "a100-shared".into(),
        node_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    }
}

/// Flavors `a100`, `pool` and `a100-shared` (its nodes say 4 replicas).
fn world(equivalents: Amount) -> World {
    let mut e = Engine::new();
    e.set_transformations(&transformations()).expect("valid");
    e.upsert_flavor(flavor("a100"));
    e.upsert_flavor(flavor("pool"));
    e.upsert_flavor(shared_flavor(&[("gpu", "a100-shared"), (REPLICAS_LABEL, "4")]));
    let mut w = World { e };
    w.e.upsert_cluster_queue(team(equivalents));
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "team".into(),
        stop_policy: StopPolicy::None,
    });
    w
}

#[derive(Clone, Copy, Debug)]
enum Ask {
    Slice,
    Whole,
    Replica,
}

impl Ask {
    /// Its cost in 28ths of an equivalent (1/7 = 4/28, 1 = 28/28, 1/4 = 7/28).
    fn cost_28ths(self) -> i64 {
        match self {
            Ask::Slice => 4,
            Ask::Whole => 28,
            Ask::Replica => 7,
        }
    }

    fn workload(self, uid: &str, at: Millis) -> WlBuilder {
        let w = wl(uid).queue("team").at(at);
        match self {
            Ask::Slice => w.pods(1, &[(SLICE, 1)]),
            Ask::Whole => w.pods(1, &[(GPU, 1)]),
            Ask::Replica => w.pods(1, &[(GPU, 1)]).selector(STRATEGY_LABEL, "time-slicing"),
        }
    }
}

/// Adds `n` workloads of one kind, runs a cycle, returns how many were admitted.
fn admit_many(w: &mut World, ask: Ask, n: usize) -> usize {
    for i in 0..n {
        w.add(ask.workload(&format!("{ask:?}-{i}"), i as Millis));
    }
    w.cycle(1_000).admitted.len()
}

#[test]
fn eight_equivalents_hold_56_slices() {
    let mut w = world(8);
    assert_eq!(admit_many(&mut w, Ask::Slice, 57), 56);
    assert_eq!(w.state("Slice-56"), WorkloadState::Pending);
    let why = w.why("Slice-56");
    assert!(why.contains(EQ), "{why}");
}

#[test]
fn eight_equivalents_hold_eight_whole_gpus() {
    let mut w = world(8);
    assert_eq!(admit_many(&mut w, Ask::Whole, 9), 8);
}

#[test]
fn eight_equivalents_hold_32_replicas_of_4() {
    let mut w = world(8);
    assert_eq!(admit_many(&mut w, Ask::Replica, 33), 32);
    let c = w.e.cluster_queue_usage("team").expect("queue");
    let eq_used: Amount = c.resources.iter().filter(|r| r.resource == EQ).map(|r| r.used).sum();
    assert_eq!(eq_used, 8 * PER_EQ, "32 replicas are exactly 8 equivalents");
}

#[test]
fn a_whole_gpu_is_never_a_replica_even_when_the_shared_flavor_comes_first() {
    let mut w = world(16);
    w.add(Ask::Whole.workload("whole", 0));
    w.add(Ask::Replica.workload("replica", 1));
    let c = w.cycle(1_000);
    assert_eq!(flavor_of(&c, "whole", GPU), "a100");
    assert_eq!(flavor_of(&c, "replica", GPU), "a100-shared");
    // With the whole GPUs taken, a ninth whole GPU waits: it is told why
    // the shared flavor does not take it.
    for i in 0..8 {
        w.add(Ask::Whole.workload(&format!("more-{i}"), 10 + i));
    }
    w.cycle(2_000);
    assert_eq!(w.state("more-7"), WorkloadState::Pending);
    let why = w.why("more-7");
    assert!(why.contains("a100-shared") && why.contains("4 replicas"), "{why}");
}

#[test]
fn a_flavor_that_takes_every_request_charges_a_replica() {
    let mut w = world(8);
    let mut f = shared_flavor(&[("gpu", "a100-shared"), (REPLICAS_LABEL, "4")]);
    f.shared_gpu_requests = SharedGpuRequests::All;
    w.e.upsert_flavor(f);
    // Unmarked whole-GPU asks now go to the shared flavor first: 32 fit.
    assert_eq!(admit_many(&mut w, Ask::Whole, 33), 32);
}

#[test]
fn replicas_come_from_the_nodes_when_the_flavor_does_not_say() {
    let mut e = Engine::with_config(EngineConfig {
        placement: PlacementMode::Nodes,
        ..Default::default()
    });
    e.set_transformations(&transformations()).expect("valid");
    e.upsert_flavor(labelled_flavor("a100", "gpu", "a100"));
    e.upsert_flavor(flavor("pool"));
    e.upsert_flavor(shared_flavor(&[("gpu", "a100-shared")]));
    let mut w = World { e };
    w.e.upsert_cluster_queue(team(3));
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "team".into(),
        stop_policy: StopPolicy::None,
    });
    // Two cards time-sliced 4 ways: 8 replicas on the node, labelled as
    // the GPU Operator labels it.
    let shared = |gpus, replicas| {
        node("ts-1", "a100-shared", gpus)
            .label(REPLICAS_LABEL, replicas)
            .label(STRATEGY_LABEL, "time-slicing")
    };
    w.node(shared(8, "4"));
    assert_eq!(admit_many(&mut w, Ask::Replica, 9), 8, "the node holds 8 replicas");
    let eq_used = |w: &World| -> Amount {
        let u = w.e.cluster_queue_usage("team").expect("queue");
        u.resources.iter().filter(|r| r.resource == EQ).map(|r| r.used).sum()
    };
    assert_eq!(eq_used(&w), 2 * PER_EQ, "8 replicas of 4 are 2 equivalents");
    // The node is set to 8 replicas per card: what the next ones are
    // charged follows (admitted ones keep what they hold).
    w.node(shared(16, "8"));
    for i in 0..9 {
        w.add(Ask::Replica.workload(&format!("later-{i}"), 100 + i));
    }
    let c = w.cycle(2_000);
    // The one waiting from before and 7 more: 8 replicas of 8, 1 equivalent.
    assert_eq!(c.admitted.len(), 8, "{:?}", admitted(&c));
    assert_eq!(eq_used(&w), 3 * PER_EQ);
}

#[test]
fn placement_fits_the_slice_itself_not_its_equivalents() {
    let mut e = Engine::with_config(EngineConfig {
        placement: PlacementMode::Nodes,
        ..Default::default()
    });
    e.set_transformations(&transformations()).expect("valid");
    e.upsert_flavor(flavor("pool"));
    let mut w = World { e };
    w.e.upsert_cluster_queue(team(8));
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "team".into(),
        stop_policy: StopPolicy::None,
    });
    let mut mig = node("mig-1", "a100", 0).build();
    mig.allocatable.insert(SLICE.into(), u(7));
    w.e.upsert_node(mig);
    // Quota holds 56; the one node holds 7 slices.
    assert_eq!(admit_many(&mut w, Ask::Slice, 10), 7);
    let why = w.why("Slice-7");
    assert!(why.contains(SLICE), "{why}");
}

#[test]
fn a_restored_admission_holds_its_equivalents() {
    let mut w = world(8);
    let spec = Ask::Slice.workload("restored", 0).build();
    let assignment = PodSetAssignment {
        name: "main".into(),
        count: 1,
        flavors: BTreeMap::from([(EQ.to_string(), "pool".to_string())]),
        usage: BTreeMap::new(),
        topology: None,
    };
    w.e.restore_admitted(spec, "team", &[assignment], 0).expect("restored");
    assert_eq!(admit_many(&mut w, Ask::Slice, 56), 55);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// In any mix and order, what is admitted never exceeds 8
    /// equivalents (in exact 28ths), and a workload waits only when its
    /// cost would.
    #[test]
    fn never_more_than_the_equivalents_in_any_mix(asks in prop::collection::vec(0u8..3, 1..80)) {
        let mut w = world(8);
        let asks: Vec<Ask> = asks.iter().map(|a| [Ask::Slice, Ask::Whole, Ask::Replica][*a as usize]).collect();
        let mut held = 0i64;
        for (i, ask) in asks.iter().enumerate() {
            let uid = format!("w{i}");
            w.add(ask.workload(&uid, i as Millis));
            let c = w.cycle(1_000 + i as Millis);
            let fits = held + ask.cost_28ths() <= 8 * 28;
            prop_assert_eq!(c.admitted.len(), usize::from(fits), "{:?} with {}/28 held", ask, held);
            if fits {
                held += ask.cost_28ths();
            }
        }
        prop_assert!(held <= 8 * 28);
    }
}

#[test]
fn a_replica_never_takes_a_flavor_whose_nodes_give_whole_gpus() {
    let mut e = Engine::with_config(EngineConfig {
        placement: PlacementMode::Nodes,
        ..Default::default()
    });
    e.set_transformations(&transformations()).expect("valid");
    e.upsert_flavor(labelled_flavor("a100", "gpu", "a100"));
    e.upsert_flavor(flavor("pool"));
    e.upsert_flavor(shared_flavor(&[("gpu", "a100-shared")]));
    let mut w = World { e };
    // Whole GPUs first in the queue's order.
    let mut spec = team(1);
    spec.resource_groups[0].flavors.reverse();
    w.e.upsert_cluster_queue(spec);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "team".into(),
        stop_policy: StopPolicy::None,
    });
    w.node(node("whole-1", "a100", 8));
    w.node(
        node("ts-1", "a100-shared", 8)
            .label(REPLICAS_LABEL, "4")
            .label(STRATEGY_LABEL, "time-slicing"),
    );
    // One equivalent: four replicas, all on the shared flavor (on the
    // whole one each would cost a whole equivalent and fit only one).
    let n = admit_many(&mut w, Ask::Replica, 5);
    assert_eq!(n, 4, "{}", w.why("Replica-0"));
    let c = w.e.cluster_queue_usage("team").expect("queue");
    let on_whole: Amount = (c.resources.iter())
        .filter(|r| r.flavor == "a100" && r.resource == GPU)
        .map(|r| r.used)
        .sum();
    assert_eq!(on_whole, 0, "a replica was put on a whole GPU");
    let why = w.why("Replica-4");
    assert!(why.contains("needs 0.25 sluice.dev/gpu-equivalent"), "{why}");
}
