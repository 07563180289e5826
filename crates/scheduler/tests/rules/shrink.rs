//! Shrinking an admitted workload: an owner scaled it down and the extra
//! pods are gone, so it holds only what its pods use and the rest is
//! offered to waiting work.

use crate::common::*;
use sluice_scheduler::*;

fn counts(w: &World, uid: &str) -> Vec<u32> {
    let adm = w.e.admission(uid).expect("admitted");
    adm.pod_sets.iter().map(|p| p.count).collect()
}

#[test]
fn a_scaled_down_workload_gives_back_its_quota_and_a_waiting_one_takes_it() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("wide").queue("a").pods(6, &[(GPU, 1)]));
    w.cycle(0);
    w.add(wl("next").queue("a").at(1).pods(4, &[(GPU, 1)]));
    assert!(w.cycle(1).admitted.is_empty(), "2 of 8 GPUs free");
    assert!(w.e.shrink_admitted("wide", &[("main".into(), 4)]).unwrap());
    assert_eq!(counts(&w, "wide"), [4]);
    assert_eq!(w.e.admission("wide").unwrap().pod_sets[0].usage[GPU], u(4));
    assert_eq!(w.used("a", "a100", GPU), 4);
    w.e.check_consistency().unwrap();
    let c = w.cycle(2);
    assert_eq!(c.admitted.len(), 1, "the freed GPUs admit the waiting workload");
    assert_eq!(w.used("a", "a100", GPU), 8);
}

#[test]
fn a_count_at_or_above_the_admission_changes_nothing() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("job").queue("a").pods(3, &[(GPU, 1)]));
    w.cycle(0);
    assert!(!w.e.shrink_admitted("job", &[("main".into(), 3)]).unwrap());
    assert!(!w.e.shrink_admitted("job", &[("main".into(), 9)]).unwrap());
    assert!(!w.e.shrink_admitted("job", &[("other".into(), 1)]).unwrap());
    assert_eq!(w.used("a", "a100", GPU), 3);
}

#[test]
fn at_least_one_pod_is_kept() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("job").queue("a").pods(3, &[(GPU, 2)]));
    w.cycle(0);
    assert!(w.e.shrink_admitted("job", &[("main".into(), 0)]).unwrap());
    assert_eq!(counts(&w, "job"), [1]);
    assert_eq!(w.used("a", "a100", GPU), 2);
    w.e.check_consistency().unwrap();
}

#[test]
fn only_an_admitted_workload_shrinks() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("big").queue("a").pods(9, &[(GPU, 1)]));
    w.cycle(0);
    let err = w.e.shrink_admitted("big", &[("main".into(), 1)]).unwrap_err();
    assert!(err.to_string().contains("not admitted"), "{err}");
}

#[test]
fn a_shrunk_workload_requeued_asks_for_what_it_asked_for() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("job").queue("a").pods(6, &[(GPU, 1)]));
    w.cycle(0);
    w.e.shrink_admitted("job", &[("main".into(), 2)]).unwrap();
    w.e.evict("job").unwrap();
    w.e.eviction_complete("job", 1).unwrap();
    assert_eq!(w.used("a", "a100", GPU), 0);
    let c = w.cycle(2);
    assert_eq!(c.admitted[0].pod_sets[0].count, 6);
}

#[test]
fn a_partially_admitted_workload_shrinks_below_its_admission() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("other").queue("a").pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("elastic").queue("a").at(1).pods(8, &[(GPU, 1)]).min_count(2));
    w.cycle(1);
    assert_eq!(counts(&w, "elastic"), [4]);
    assert!(w.e.shrink_admitted("elastic", &[("main".into(), 3)]).unwrap());
    assert_eq!(counts(&w, "elastic"), [3]);
    assert_eq!(w.used("a", "a100", GPU), 7);
    w.e.check_consistency().unwrap();
}
