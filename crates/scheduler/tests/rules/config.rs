//! Configuration changes: quota raised or lowered, queues deleted, recreated or moved.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn raising_quota_wakes_waiting_workloads() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("waiting").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 16)]).build());
    assert_eq!(admitted(&w.cycle(1)), ["waiting"]);
}

#[test]
fn lowering_quota_keeps_running_work_and_admits_nothing_above_it() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 4)]).build());
    w.add(wl("one").queue("a").at(1).pods(1, &[(GPU, 1)]));
    assert!(w.cycle(1).admitted.is_empty());
    assert_eq!(w.state("running"), WorkloadState::Admitted);
    w.e.finish("running").unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["one"]);
}

#[test]
fn deleting_a_local_queue_parks_its_work_and_recreating_it_elsewhere_moves_it() {
    let mut w = World::new(vec![
        cq("full").quota("a100", vec![q(GPU, 1)]),
        cq("roomy").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "full".into(),
        ..Default::default()
    });
    w.add(wl("running").queue("team").at(0).pods(1, &[(GPU, 1)]));
    w.add(wl("waiting").queue("team").at(1).pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(0)), ["running"]);
    w.e.remove_local_queue("ns/team");
    let c = w.cycle(1);
    assert_eq!(
        w.e.explanation("waiting").unwrap().reason,
        PendingReason::LocalQueueMissing {
            local_queue: "ns/team".into()
        }
    );
    assert!(c.pending_changed.iter().any(|(uid, _)| &**uid == "waiting"));
    assert_eq!(
        w.state("running"),
        WorkloadState::Admitted,
        "admitted work keeps running"
    );
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/team".into(),
        cluster_queue: "roomy".into(),
        ..Default::default()
    });
    let c = w.cycle(2);
    assert_eq!(admitted(&c), ["waiting"]);
    assert_eq!(&*c.admitted[0].cluster_queue, "roomy");
}

#[test]
fn deleting_a_cluster_queue_parks_its_work_and_keeps_running_work_accounted() {
    let mut w = World::new(vec![
        cq("doomed").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("peer").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("running").queue("doomed").at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("waiting").queue("doomed").at(1).pods(1, &[(GPU, 4)]));
    assert_eq!(
        admitted(&w.cycle(0)),
        ["running", "waiting"],
        "waiting borrows peer's idle 4"
    );
    w.add(wl("peer-job").queue("peer").at(2).pods(1, &[(GPU, 4)]));
    w.e.finish("waiting").unwrap();
    w.add(wl("waiting-2").queue("doomed").at(3).pods(1, &[(GPU, 1)]));
    w.e.remove_cluster_queue("doomed");
    let c = w.cycle(1);
    assert_eq!(admitted(&c), ["peer-job"]);
    assert_eq!(
        w.e.explanation("waiting-2").unwrap().reason,
        PendingReason::ClusterQueueMissing {
            cluster_queue: "doomed".into()
        }
    );
    // The running workload still holds its quota; finishing it releases it.
    assert_eq!(w.state("running"), WorkloadState::Admitted);
    w.e.finish("running").unwrap();
    w.e.upsert_cluster_queue(cq("doomed").cohort("co").quota("a100", vec![q(GPU, 4)]).build());
    assert_eq!(admitted(&w.cycle(2)), ["waiting-2"]);
}
