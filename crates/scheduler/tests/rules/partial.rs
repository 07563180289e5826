//! Partial admission: a pod set with a `min_count` runs with the most pods
//! that fit now, never fewer than `min_count`, and asks for all of them
//! again once back in its queue.

use crate::common::*;
use sluice_scheduler::*;

fn count_of(c: &Cycle, uid: &str) -> Vec<u32> {
    c.admitted
        .iter()
        .find(|a| &*a.uid == uid)
        .map(|a| a.pod_sets.iter().map(|p| p.count).collect())
        .unwrap_or_default()
}

#[test]
fn the_largest_count_that_fits_is_admitted() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("other").queue("a").pods(1, &[(GPU, 3)]));
    w.cycle(0);
    w.add(wl("elastic").queue("a").at(1).pods(8, &[(GPU, 1)]).min_count(2));
    let c = w.cycle(1);
    assert_eq!(count_of(&c, "elastic"), [5], "5 of 8 GPUs are free");
    let a = &c.admitted[0].pod_sets[0];
    assert_eq!(a.usage[GPU], u(5), "usage is of the admitted pods");
    assert_eq!(w.used("a", "a100", GPU), 8);
}

#[test]
fn never_fewer_than_min_count() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("other").queue("a").pods(1, &[(GPU, 7)]));
    w.cycle(0);
    w.add(wl("elastic").queue("a").at(1).pods(8, &[(GPU, 1)]).min_count(2));
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(w.state("elastic"), WorkloadState::Pending);
    // Explained at its minimum, its full count beside.
    assert_eq!(
        w.why("elastic"),
        "insufficient quota; pod set main: a100: needs at least 2 nvidia.com/gpu (up to 8), 1 free of 8 nominal, 0 borrowable"
    );
}

/// More than the queue can ever hold with all its pods, less with its
/// minimum: it is not told it can never be admitted, but what its minimum
/// waits for.
#[test]
fn a_workload_whose_minimum_fits_the_quota_is_not_told_it_never_fits() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("other").queue("a").pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("elastic").queue("a").at(1).pods(16, &[(GPU, 1)]).min_count(3));
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(
        w.why("elastic"),
        "insufficient quota; pod set main: a100: needs at least 3 nvidia.com/gpu (up to 16), 2 free of 8 nominal, 0 borrowable"
    );
    // Its minimum above the quota too: it never fits, and says both.
    w.add(wl("huge").queue("a").at(2).pods(16, &[(GPU, 1)]).min_count(12));
    w.cycle(2);
    assert_eq!(
        w.why("huge"),
        "exceeds what the ClusterQueue can ever admit; pod set main: a100: needs at least 12 nvidia.com/gpu (up to 16), more than the 8 this queue can ever use"
    );
}

#[test]
fn a_pod_set_larger_than_the_quota_ever_is_admitted_reduced() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("wide").queue("a").pods(16, &[(GPU, 1)]).min_count(4));
    assert_eq!(count_of(&w.cycle(0), "wide"), [8]);
}

#[test]
fn without_min_count_a_gang_stays_all_or_nothing() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("gang").queue("a").pods(9, &[(GPU, 1)]));
    assert!(w.cycle(0).admitted.is_empty());
}

#[test]
fn pod_sets_shrink_together_and_the_rigid_one_keeps_its_count() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(
        wl("job")
            .queue("a")
            .pod_set("launcher", 1, &[(GPU, 2)])
            .pod_set("workers", 10, &[(GPU, 1)])
            .min_count(2),
    );
    // 8 GPUs: launcher 2 + 6 workers.
    assert_eq!(count_of(&w.cycle(0), "job"), [1, 6]);
}

#[test]
fn a_requeued_partial_workload_asks_for_all_its_pods_again() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("other").queue("a").pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("elastic").queue("a").at(1).pods(8, &[(GPU, 1)]).min_count(2));
    assert_eq!(count_of(&w.cycle(1), "elastic"), [4]);
    w.e.evict("elastic").unwrap();
    w.e.finish("other").unwrap();
    w.e.eviction_complete("elastic", 2).unwrap();
    assert_eq!(count_of(&w.cycle(3), "elastic"), [8], "the quota is free again: all 8");
}

#[test]
fn a_restored_partial_admission_holds_what_it_was_admitted_with() {
    let mut e = Engine::new();
    e.upsert_flavor(flavor("a100"));
    e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).build());
    e.upsert_local_queue(LocalQueueSpec {
        key: "ns/a".into(),
        cluster_queue: "a".into(),
        ..Default::default()
    });
    let spec = wl("elastic").queue("a").pods(8, &[(GPU, 1)]).min_count(2).build();
    let admitted = PodSetAssignment {
        name: "main".into(),
        count: 3,
        flavors: [(GPU.to_string(), "a100".to_string())].into(),
        usage: [(GPU.to_string(), u(3))].into(),
        topology: None,
    };
    e.restore_admitted(spec, "a", &[admitted], 0).unwrap();
    e.check_consistency().unwrap();
    assert_eq!(e.cluster_queue_usage("a").unwrap().resources[0].used, u(3));
    assert_eq!(e.admission("elastic").unwrap().pod_sets[0].count, 3);
}
