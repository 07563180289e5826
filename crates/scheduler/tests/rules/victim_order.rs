//! The victim order a ClusterQueue chooses: `Newest` (Kueue's) or
//! `LeastWorkLost`, and the grace for workloads preempted recently, on
//! quota and on nodes.

use crate::common::*;
use sluice_scheduler::*;

const MIN: Millis = 60_000;
const H: Millis = 60 * MIN;

/// Queue `a` with 8 GPUs: `old-small` (2 GPUs) runs from 0, `new-big` (6)
/// from 2 h; at 4 h a priority-10 workload needs 2 GPUs. Newest takes
/// new-big (12 GPU-hours lost); LeastWorkLost takes old-small: 2/2 × 4 h
/// = 4 against 6/2 × 2 h = 6 (8 GPU-hours lost).
#[test]
fn least_work_lost_spares_the_big_recent_run_for_the_small_old_one() {
    for (order, want) in [
        (VictimOrderPolicy::Newest, "new-big"),
        (VictimOrderPolicy::LeastWorkLost, "old-small"),
    ] {
        let mut w = World::new(vec![
            cq("a")
                .quota("a100", vec![q(GPU, 8)])
                .within(WithinClusterQueue::LowerPriority)
                .victim_order(order),
        ]);
        assert_eq!(small_then_big_then_preemptor(&mut w), [want], "{order:?}");
    }
}

/// In queue `a`: `old-small` (2 GPUs) from 0, `new-big` (6) from 2 h, and
/// at 4 h a priority-10 workload asking for 2; the victims it takes.
fn small_then_big_then_preemptor(w: &mut World) -> Vec<String> {
    w.add(wl("old-small").queue("a").prio(1).at(0).pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.add(wl("new-big").queue("a").prio(1).at(2 * H).pods(1, &[(GPU, 6)]));
    w.cycle(2 * H);
    w.add(wl("p").queue("a").prio(10).at(4 * H).pods(1, &[(GPU, 2)]));
    victims(&w.cycle(4 * H)).into_iter().map(String::from).collect()
}

/// The same on one 8-GPU node with quota to spare: the node's occupants
/// are taken in the victim order until the pod fits.
#[test]
fn on_nodes_the_order_decides_who_leaves_the_node() {
    for (order, want) in [
        (VictimOrderPolicy::Newest, "new-big"),
        (VictimOrderPolicy::LeastWorkLost, "old-small"),
    ] {
        let mut w = World::placement(vec![
            cq("a")
                .quota("a100", vec![q(GPU, 16)])
                .within(WithinClusterQueue::LowerPriority)
                .victim_order(order),
        ]);
        w.node(node("A", "a100", 8));
        assert_eq!(small_then_big_then_preemptor(&mut w), [want], "{order:?}");
    }
}

/// `a` and `b` (4 GPUs each, priority 1) run from 0; at 1 h `p1` takes
/// `a` (tie: UID), which runs again from 2 h. At 2 h 10 m `p2` needs 4:
/// `a` has lost least (10 min) and is the newest, so both orders take it,
/// unless the grace still covers its preemption 70 minutes ago.
#[test]
fn a_grace_spares_the_recently_preempted_while_others_can_go() {
    let table = [
        (VictimOrderPolicy::Newest, None, "a"),
        (VictimOrderPolicy::LeastWorkLost, None, "a"),
        (VictimOrderPolicy::LeastWorkLost, Some(70 * MIN), "a"),
        (VictimOrderPolicy::LeastWorkLost, Some(71 * MIN), "b"),
        (VictimOrderPolicy::Newest, Some(90 * MIN), "b"),
    ];
    for (order, grace, want) in table {
        let mut queue = cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority)
            .victim_order(order);
        if let Some(g) = grace {
            queue = queue.grace(g);
        }
        let mut w = World::new(vec![queue]);
        w.add(wl("a").queue("a").prio(1).at(0).pods(1, &[(GPU, 4)]));
        w.add(wl("b").queue("a").prio(1).at(0).pods(1, &[(GPU, 4)]));
        w.cycle(0);
        w.add(wl("p1").queue("a").prio(10).at(H).pods(1, &[(GPU, 4)]));
        assert_eq!(victims(&w.cycle(H)), ["a"], "{order:?} {grace:?}");
        w.e.eviction_complete("a", H).unwrap();
        assert_eq!(admitted(&w.cycle(H + 1)), ["p1"]);
        w.e.finish("p1").unwrap();
        assert_eq!(admitted(&w.cycle(2 * H)), ["a"]);
        w.add(wl("p2").queue("a").prio(10).at(2 * H).pods(1, &[(GPU, 4)]));
        assert_eq!(victims(&w.cycle(2 * H + 10 * MIN)), [want], "{order:?} {grace:?}");
    }
}

/// The grace orders within a priority: a recently preempted workload of
/// lower priority still goes before one of higher priority.
#[test]
fn a_grace_never_lifts_a_workload_above_higher_priority() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority)
            .victim_order(VictimOrderPolicy::LeastWorkLost)
            .grace(10 * H),
    ]);
    w.add(wl("low").queue("a").prio(1).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("mid").queue("a").prio(5).at(0).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("p1").queue("a").prio(10).at(H).pods(1, &[(GPU, 4)]));
    assert_eq!(victims(&w.cycle(H)), ["low"]);
    w.e.eviction_complete("low", H).unwrap();
    w.cycle(H + 1);
    w.e.finish("p1").unwrap();
    assert_eq!(admitted(&w.cycle(2 * H)), ["low"]);
    w.add(wl("p2").queue("a").prio(10).at(2 * H).pods(1, &[(GPU, 4)]));
    assert_eq!(victims(&w.cycle(3 * H)), ["low"]);
}
