//! A cycle within a budget of decisions (`Engine::schedule_within`): it
//! stops after that many admissions, preemptions and evictions; what it did
//! not get to is decided by the next cycles, in the same order, every
//! cohort domain in turn.

use crate::common::*;
use sluice_scheduler::*;

fn cycle_within(w: &mut World, now: Millis, budget: usize) -> Cycle {
    let c = w.e.schedule_within(now, budget);
    w.e.check_consistency().expect("ledger consistent");
    c
}

#[test]
fn a_cut_cycle_leaves_the_rest_for_the_next_in_the_same_order() {
    let queues = || vec![cq("a").quota("default", vec![q(CPU, 10)])];
    let add = |w: &mut World| {
        for i in 0..10 {
            w.add(
                wl(&format!("w{i}"))
                    .queue("a")
                    .at(i)
                    .prio((i % 3) as i32)
                    .pods(1, &[(CPU, 1)]),
            );
        }
    };
    let mut whole = World::new(queues());
    add(&mut whole);
    let expected: Vec<String> = admitted(&whole.cycle(0)).into_iter().map(String::from).collect();
    assert_eq!(expected.len(), 10);

    let mut cut = World::new(queues());
    add(&mut cut);
    let mut got: Vec<String> = Vec::new();
    let mut sizes = Vec::new();
    for _ in 0..10 {
        let c = cycle_within(&mut cut, 0, 3);
        sizes.push(c.admitted.len());
        got.extend(admitted(&c).into_iter().map(String::from));
        if c.next_wakeup != Some(0) {
            break;
        }
    }
    assert_eq!(sizes, [3, 3, 3, 1], "three at a time, then the last one");
    assert_eq!(got, expected, "the same admissions, in the same order");
}

#[test]
fn a_cut_cycle_asks_for_the_next_one_at_once() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    for i in 0..3 {
        w.add(wl(&format!("w{i}")).queue("a").at(i).pods(1, &[(CPU, 1)]));
    }
    let c = cycle_within(&mut w, 5, 2);
    assert_eq!(admitted(&c), ["w0", "w1"]);
    assert_eq!(c.next_wakeup, Some(5), "work left: cycle again now");
    let c = cycle_within(&mut w, 6, 2);
    assert_eq!(admitted(&c), ["w2"]);
    assert_eq!(c.next_wakeup, None, "nothing left");
}

#[test]
fn a_budget_of_zero_still_allows_one_decision() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("w0").queue("a").pods(1, &[(CPU, 1)]));
    w.add(wl("w1").queue("a").at(1).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&cycle_within(&mut w, 0, 0)), ["w0"]);
}

#[test]
fn cohort_domains_take_turns_when_cycles_are_cut() {
    // Three independent domains (no cohort), each with room for all.
    let mut w = World::new(vec![
        cq("a").quota("default", vec![q(CPU, 10)]),
        cq("b").quota("default", vec![q(CPU, 10)]),
        cq("c").quota("default", vec![q(CPU, 10)]),
    ]);
    for queue in ["a", "b", "c"] {
        for i in 0..4 {
            w.add(wl(&format!("{queue}{i}")).queue(queue).at(i).pods(1, &[(CPU, 1)]));
        }
    }
    let mut firsts = Vec::new();
    for _ in 0..3 {
        let c = cycle_within(&mut w, 0, 2);
        let got = admitted(&c);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0][..1], got[1][..1], "one domain per cycle of two: {got:?}");
        firsts.push(got[0][..1].to_string());
    }
    firsts.sort();
    assert_eq!(firsts, ["a", "b", "c"], "each domain had a turn before any had two");
    // The rest follows, and nothing is lost.
    let mut left = 0;
    for _ in 0..10 {
        let c = cycle_within(&mut w, 0, 2);
        left += c.admitted.len();
        if c.next_wakeup != Some(0) {
            break;
        }
    }
    assert_eq!(left, 6);
}

#[test]
fn a_woken_queue_cut_short_is_looked_at_again() {
    // Parked for lack of quota, woken by a finish: more fit than the budget.
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("big").queue("a").pods(1, &[(CPU, 4)]));
    for i in 0..4 {
        w.add(wl(&format!("w{i}")).queue("a").at(i + 1).pods(1, &[(CPU, 1)]));
    }
    assert_eq!(admitted(&w.cycle(0)), ["big"]);
    assert_eq!(w.state("w0"), WorkloadState::Pending);
    w.e.finish("big").unwrap();
    let mut got = Vec::new();
    for now in 1..10 {
        let c = cycle_within(&mut w, now, 1);
        got.extend(admitted(&c).into_iter().map(String::from));
        if c.next_wakeup != Some(now) {
            break;
        }
    }
    assert_eq!(got, ["w0", "w1", "w2", "w3"]);
}
