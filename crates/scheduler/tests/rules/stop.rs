//! Stop policies: Hold and HoldAndDrain on ClusterQueues and LocalQueues.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn a_held_queue_admits_nothing_new_and_keeps_what_runs() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).stop(StopPolicy::Hold).build());
    w.add(wl("new").queue("a").pods(1, &[(GPU, 2)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty() && c.evicted.is_empty());
    assert_eq!(
        w.e.explanation("new").unwrap().reason,
        PendingReason::Held { by_local_queue: false }
    );
    assert_eq!(w.state("running"), WorkloadState::Admitted);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).build());
    assert_eq!(admitted(&w.cycle(2)), ["new"]);
}

#[test]
fn hold_and_drain_evicts_what_the_queue_admitted() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .stop(StopPolicy::HoldAndDrain)
            .build(),
    );
    let c = w.cycle(1);
    assert_eq!(c.evicted.len(), 1);
    assert_eq!(c.evicted[0].reason, EvictionReason::ClusterQueueStopped);
    w.e.eviction_complete("running", 2).unwrap();
    assert!(w.cycle(2).admitted.is_empty(), "requeued but held");
    assert_eq!(w.used("a", "a100", GPU), 0);
}

#[test]
fn a_drained_workload_that_finishes_before_the_next_cycle_is_not_reported_evicted() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.add(wl("removed").queue("a").pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(0)).len(), 2);
    w.e.upsert_cluster_queue(
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .stop(StopPolicy::HoldAndDrain)
            .build(),
    );
    // Both are being evicted; one finishes, the other is deleted, before
    // the cycle that would report them.
    w.e.finish("running").unwrap();
    w.e.remove_workload("removed").unwrap();
    let c = w.cycle(1);
    assert!(c.evicted.is_empty(), "{:?}", c.evicted);
    assert_eq!(w.used("a", "a100", GPU), 0);
}

#[test]
fn a_stopped_local_queue_holds_only_its_own_workloads() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/other".into(),
        cluster_queue: "a".into(),
        ..Default::default()
    });
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/paused".into(),
        cluster_queue: "a".into(),
        stop_policy: StopPolicy::Hold,
    });
    w.add(wl("p").queue("paused").pods(1, &[(GPU, 1)]));
    w.add(wl("o").queue("other").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["o"]);
    assert_eq!(
        w.e.explanation("p").unwrap().reason,
        PendingReason::Held { by_local_queue: true }
    );
}

#[test]
fn a_held_queue_admits_no_preemptor_either() {
    let spec = || {
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority)
    };
    let mut w = World::new(vec![spec()]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low"]);
    w.e.upsert_cluster_queue(spec().stop(StopPolicy::Hold).build());
    w.e.eviction_complete("low", 2).unwrap();
    let c = w.cycle(2);
    assert!(c.admitted.is_empty(), "Hold admits nothing new");
    assert_eq!(
        w.e.explanation("high").unwrap().reason,
        PendingReason::Held { by_local_queue: false }
    );
    assert_eq!(
        w.e.cluster_queue_usage("a").unwrap().resources[0].reserved,
        0,
        "the claim is dropped"
    );
}
