//! Workload lifecycle: finishing, deleting, eviction and backoff, restore, invalid input.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn finishing_releases_exactly_what_was_taken() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("borrower").queue("a").pods(3, &[(GPU, 2)]));
    w.cycle(0);
    assert_eq!(w.used("a", "a100", GPU), 6);
    w.e.finish("borrower").unwrap();
    assert_eq!(w.used("a", "a100", GPU), 0);
    w.add(wl("b-all").queue("b").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(1)), ["b-all"]);
}

#[test]
fn deleting_an_admitted_workload_releases_its_quota() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("next").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.e.remove_workload("job").unwrap();
    assert_eq!(w.used("a", "a100", GPU), 0);
    assert_eq!(admitted(&w.cycle(1)), ["next"]);
}

#[test]
fn deleting_a_preemptor_releases_its_claim() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    w.cycle(1);
    w.e.remove_workload("high").unwrap();
    w.e.eviction_complete("low", 2).unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["low"]);
}

#[test]
fn an_evicted_workload_requeues_after_its_backoff() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.e.evict("job").unwrap();
    w.e.eviction_complete_with_backoff("job", 100, Some(60_100)).unwrap();
    let c = w.cycle(100);
    assert!(c.admitted.is_empty());
    assert_eq!(c.next_wakeup, Some(60_100));
    assert_eq!(
        w.e.explanation("job").unwrap().reason,
        PendingReason::Backoff { until: 60_100 }
    );
    assert_eq!(admitted(&w.cycle(60_100)), ["job"]);
}

#[test]
fn a_workload_is_never_added_or_admitted_twice() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 1)]));
    assert_eq!(
        w.e.add_workload(wl("job").queue("a").pods(1, &[(GPU, 1)]).build()),
        Err(EngineError::DuplicateWorkload("job".into()))
    );
    assert_eq!(admitted(&w.cycle(0)), ["job"]);
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(w.used("a", "a100", GPU), 1);
    assert!(matches!(
        w.e.eviction_complete("job", 2),
        Err(EngineError::WrongState { .. })
    ));
}

#[test]
fn restored_admissions_count_against_quota_before_anything_new_is_admitted() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    let spec = wl("survivor").queue("a").pods(1, &[(GPU, 6)]).build();
    let assignment = PodSetAssignment {
        name: "main".into(),
        count: 1,
        flavors: [(GPU.to_string(), "a100".to_string())].into(),
        usage: [(GPU.to_string(), u(6))].into(),
        topology: None,
    };
    w.e.restore_admitted(spec.clone(), "a", std::slice::from_ref(&assignment), 0)
        .unwrap();
    assert_eq!(
        w.e.restore_admitted(spec, "a", &[assignment], 0),
        Err(EngineError::DuplicateWorkload("survivor".into()))
    );
    w.add(wl("new").queue("a").pods(1, &[(GPU, 4)]));
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(w.used("a", "a100", GPU), 6);
}

#[test]
fn invalid_workloads_are_rejected_with_a_reason() {
    let mut w = World::new(vec![]);
    let mut spec = wl("bad").pods(0, &[(GPU, 1)]).build();
    assert_eq!(
        w.e.add_workload(spec.clone()),
        Err(EngineError::EmptyPodSet {
            uid: "bad".into(),
            pod_set: "main".into()
        })
    );
    spec.pod_sets[0].count = 1;
    spec.pod_sets[0].requests.insert(CPU.into(), -1);
    assert!(matches!(
        w.e.add_workload(spec),
        Err(EngineError::NegativeRequest { .. })
    ));
    assert_eq!(w.e.workload_count(), 0);
}

#[test]
fn workload_totals_that_overflow_across_pod_sets_are_rejected() {
    let mut w = World::new(vec![]);
    let mut spec = wl("huge").pod_set("a", 1, &[]).pod_set("b", 1, &[]).build();
    spec.pod_sets[0].requests.insert(CPU.into(), i64::MAX);
    spec.pod_sets[1].requests.insert(CPU.into(), i64::MAX);
    assert!(matches!(w.e.add_workload(spec), Err(EngineError::Overflow { .. })));
    assert_eq!(w.e.workload_count(), 0);
}
