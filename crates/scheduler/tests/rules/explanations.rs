//! Explanations: why a workload waits, in numbers, reported once per change; positions.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn a_resource_no_group_covers_is_explained() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("gpu-job").queue("a").pods(1, &[(CPU, 1), (GPU, 1)]));
    let c = w.cycle(0);
    assert!(c.admitted.is_empty());
    assert_eq!(
        c.pending_changed[0].1.reason,
        PendingReason::ResourceNotCovered {
            pod_set: "main".into(),
            resource: GPU.into()
        }
    );
}

#[test]
fn a_missing_local_queue_is_explained_and_resolved_when_created() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("job").queue("nowhere").pods(1, &[(CPU, 1)]));
    let c = w.cycle(0);
    assert!(c.admitted.is_empty());
    assert_eq!(
        c.pending_changed[0].1.reason,
        PendingReason::LocalQueueMissing {
            local_queue: "ns/nowhere".into()
        }
    );
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/nowhere".into(),
        cluster_queue: "a".into(),
        ..Default::default()
    });
    assert_eq!(admitted(&w.cycle(1)), ["job"]);
}

#[test]
fn a_missing_cluster_queue_is_explained_and_resolved_when_created() {
    let mut w = World::new(vec![]);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/lq".into(),
        cluster_queue: "later".into(),
        ..Default::default()
    });
    w.add(wl("job").pods(1, &[(CPU, 1)]));
    let c = w.cycle(0);
    assert_eq!(
        c.pending_changed[0].1.reason,
        PendingReason::ClusterQueueMissing {
            cluster_queue: "later".into()
        }
    );
    w.e.upsert_cluster_queue(cq("later").quota("default", vec![q(CPU, 1)]).build());
    assert_eq!(admitted(&w.cycle(1)), ["job"]);
}

#[test]
fn a_pending_reason_is_reported_once_until_it_changes() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 6)]));
    w.add(wl("waiting").queue("a").at(1).pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(c.pending_changed.len(), 1);
    w.add(wl("tiny").queue("a").at(2).pods(1, &[(GPU, 1)]));
    let c = w.cycle(1);
    // tiny is admitted; waiting is not even looked at (nothing was freed).
    assert_eq!(admitted(&c), ["tiny"]);
    assert!(c.pending_changed.is_empty());
    w.e.finish("tiny").unwrap();
    let c = w.cycle(2);
    // Woken and retried: same reason, different numbers: nothing to write.
    assert!(c.pending_changed.is_empty(), "{:?}", c.pending_changed);
    assert!(w.why("waiting").contains("2 free of 8"), "{}", w.why("waiting"));
}

#[test]
fn the_explanation_gives_the_deficit_in_numbers() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 24).borrow(4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("big-running").queue("a").pods(18, &[(GPU, 1)]));
    w.cycle(0);
    w.add(wl("gang").queue("a").pods(2, &[(GPU, 8)]));
    w.cycle(1);
    assert_eq!(
        w.why("gang"),
        "insufficient quota; pod set main: a100: needs 16 nvidia.com/gpu, 6 free of 24 nominal, 4 borrowable"
    );
    assert_eq!(w.e.explanation("gang").unwrap().reason_code(), "InsufficientQuota");
}

#[test]
fn positions_in_cluster_queue_and_local_queue() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 1)])]);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/x".into(),
        cluster_queue: "a".into(),
        ..Default::default()
    });
    w.add(wl("runs").queue("a").at(0).pods(1, &[(GPU, 1)]));
    w.add(wl("p1").queue("x").at(1).pods(1, &[(GPU, 1)]));
    w.add(wl("p2").queue("a").at(2).pods(1, &[(GPU, 1)]));
    w.add(wl("p3").queue("x").at(3).pods(1, &[(GPU, 1)]));
    w.cycle(0);
    assert_eq!(
        w.e.position("p3"),
        Some(QueuePosition {
            in_cluster_queue: 2,
            in_local_queue: 1
        })
    );
    assert_eq!(
        w.e.position("p1"),
        Some(QueuePosition {
            in_cluster_queue: 0,
            in_local_queue: 0
        })
    );
    assert_eq!(w.e.position("runs"), None);
    assert_eq!(&*w.e.pending_in_order("a")[1], "p2");
}

#[test]
fn why_preemption_could_not_help_reads_as_a_sentence() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("old").queue("a").prio(5).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("new").queue("a").prio(5).pods(1, &[(GPU, 8)]));
    w.cycle(1);
    assert_eq!(
        w.why("new"),
        "insufficient quota; pod set main: a100: needs 8 nvidia.com/gpu, 0 free of 8 nominal, 0 borrowable; \
         preemption: insufficient quota and no workloads the preemption policy allows to preempt"
    );
}

#[test]
fn look_alike_workloads_are_told_about_their_own_pod_sets() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 1)])]);
    w.add(wl("first").queue("a").at(0).pod_set("trainer", 1, &[(GPU, 4)]));
    w.add(wl("second").queue("a").at(1).pod_set("worker", 1, &[(GPU, 4)]));
    w.cycle(0);
    assert!(w.why("first").contains("pod set trainer"), "{}", w.why("first"));
    assert!(w.why("second").contains("pod set worker"), "{}", w.why("second"));
}
