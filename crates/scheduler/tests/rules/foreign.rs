//! Foreign admissions (another controller's, e.g. Kueue's during a
//! switch-over) hold quota like any admission, are never preempted,
//! drained or evicted by Sluice, and free their quota when released.

use crate::common::*;
use sluice_scheduler::*;

/// Kueue's admission of `gpus` GPUs into queue `a`, as the controller
/// hands it over.
fn kueue_holds(w: &mut World, uid: &str, gpus: i64) {
    let spec = wl(uid).queue("a").pods(1, &[(GPU, gpus)]).build();
    w.e.hold_foreign(spec, "a", &[a100_assignment(1, gpus)], 0).unwrap();
}

#[test]
fn a_foreign_admission_takes_its_quota_and_releasing_it_gives_it_back() {
    let mut w = single_queue(WithinClusterQueue::Never);
    kueue_holds(&mut w, "kueue-train", 6);
    assert_eq!(w.used("a", "a100", GPU), 6);
    assert!(w.e.is_foreign("kueue-train"));
    w.add(wl("first").queue("a").at(1).pods(1, &[(GPU, 2)]));
    w.add(wl("second").queue("a").at(2).pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(1)), ["first"]);
    assert_eq!(w.used("a", "a100", GPU), 8);
    w.e.release_foreign("kueue-train").unwrap();
    assert_eq!(w.used("a", "a100", GPU), 2);
    assert_eq!(admitted(&w.cycle(2)), ["second"]);
    assert!(!w.e.is_foreign("kueue-train"));
}

#[test]
fn above_the_quota_it_is_counted_as_it_is_and_nothing_new_is_admitted() {
    let mut w = single_queue(WithinClusterQueue::Never);
    kueue_holds(&mut w, "kueue-big", 10);
    assert_eq!(w.used("a", "a100", GPU), 10);
    w.add(wl("small").queue("a").at(1).pods(1, &[(GPU, 1)]));
    assert!(w.cycle(1).admitted.is_empty());
}

#[test]
fn it_is_never_a_victim_while_sluices_own_admissions_are() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    kueue_holds(&mut w, "kueue-low", 4);
    w.add(wl("sluice-low").queue("a").prio(0).at(1).pods(1, &[(GPU, 4)]));
    assert_eq!(admitted(&w.cycle(1)), ["sluice-low"]);
    // Needs 4: only Sluice's own lower-priority admission may make room.
    w.add(wl("urgent").queue("a").prio(100).at(2).pods(1, &[(GPU, 4)]));
    let c = w.cycle(2);
    let victims: Vec<&str> = c.preempted.iter().map(|p| &*p.victim).collect();
    assert_eq!(victims, ["sluice-low"]);
    // Needing all 8, nothing allowed makes room: the foreign one stays.
    w.add(wl("huge").queue("a").prio(200).at(3).pods(1, &[(GPU, 8)]));
    w.e.eviction_complete("sluice-low", 3).unwrap();
    let c = w.cycle(3);
    assert!(
        c.preempted.iter().all(|p| &*p.victim != "kueue-low"),
        "{:?}",
        c.preempted
    );
    assert_eq!(w.state("kueue-low"), WorkloadState::Admitted);
}

#[test]
fn a_stop_policy_does_not_drain_it_and_the_caller_cannot_evict_it() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    kueue_holds(&mut w, "kueue-run", 2);
    w.e.upsert_cluster_queue(
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .stop(StopPolicy::HoldAndDrain)
            .build(),
    );
    assert!(w.cycle(1).evicted.is_empty());
    assert!(w.e.evict("kueue-run").is_err());
    assert_eq!(w.state("kueue-run"), WorkloadState::Admitted);
    assert_eq!(w.used("a", "a100", GPU), 2);
}

#[test]
fn only_a_foreign_admission_is_released_as_one() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("mine").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    assert!(w.e.release_foreign("mine").is_err());
    assert_eq!(w.state("mine"), WorkloadState::Admitted);
}
