//! Fair sharing: borrowers served lowest weighted share first, shares as
//! Kueue defines them, and fair-share preemption with its two strategies.

use crate::common::*;
use sluice_scheduler::*;

/// Queues with no quota of their own in cohort `pool`, which has 8 GPUs.
fn pool_of_eight(queues: Vec<CqBuilder>) -> World {
    pool_with(World::new(queues))
}

fn pool_with(mut w: World) -> World {
    w.cohort(cohort("pool").quota("a100", vec![q(GPU, 8)]));
    w
}

fn borrower(name: &str) -> CqBuilder {
    cq(name).cohort("pool").quota("a100", vec![q(GPU, 0)])
}

/// `n` one-GPU jobs `<queue>-<i>` submitted at `from`, `from + 1`, ...
fn flood(w: &mut World, queue: &str, n: i64, from: Millis) {
    for i in 0..n {
        w.add(
            wl(&format!("{queue}-{i}"))
                .queue(queue)
                .at(from + i)
                .pods(1, &[(GPU, 1)]),
        );
    }
}

#[test]
fn equal_weights_split_what_the_cohort_lends_however_early_one_queue_submitted() {
    let mut w = pool_of_eight(vec![borrower("a"), borrower("b")]);
    flood(&mut w, "a", 8, 0);
    flood(&mut w, "b", 8, 100);
    w.cycle(0);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (4, 4));
    assert_eq!((w.share("a"), w.share("b")), (500, 500), "4 of the 8 the pool lends");

    // Kueue's classic order: the earlier queue takes everything.
    let mut w = pool_with(World::classic(vec![borrower("a"), borrower("b")]));
    flood(&mut w, "a", 8, 0);
    flood(&mut w, "b", 8, 100);
    w.cycle(0);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (8, 0));
}

#[test]
fn weights_divide_the_share_so_a_heavier_queue_gets_proportionally_more() {
    let mut w = pool_of_eight(vec![borrower("a").weight(3000), borrower("b")]);
    flood(&mut w, "a", 8, 0);
    flood(&mut w, "b", 8, 0);
    w.cycle(0);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (6, 2));
    assert_eq!((w.share("a"), w.share("b")), (250, 250), "750/3 and 250/1");
}

#[test]
fn shares_count_only_what_a_queue_borrows() {
    let mut w = World::new(vec![
        cq("owner").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("light").cohort("co").quota("a100", vec![q(GPU, 0)]).weight(2000),
        cq("zero").cohort("co").quota("a100", vec![q(GPU, 0)]).weight(0),
    ]);
    w.add(wl("own").queue("owner").pods(1, &[(GPU, 4)]));
    w.add(wl("l").queue("light").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    assert_eq!(w.share("owner"), 0, "within its nominal quota");
    assert_eq!(w.share("light"), 125, "2 of 8 lendable is 250, over weight 2");
    assert_eq!(w.share("zero"), 0, "weight 0 but borrowing nothing");
    w.add(wl("z").queue("zero").at(1).pods(1, &[(GPU, 1)]));
    w.cycle(1);
    let zero = w.e.cluster_queue_share("zero").unwrap();
    assert_eq!(zero.weighted_share, i64::MAX, "weight 0 and borrowing: infinite");
    assert_eq!(zero.dominant_resource.as_deref(), Some(GPU));
}

#[test]
fn a_tree_is_shared_level_by_level() {
    // org has 12; research (r1, r2) and prod (p1) are its children.
    let mut w = World::new(vec![
        cq("r1").cohort("research").quota("a100", vec![q(GPU, 0)]),
        cq("r2").cohort("research").quota("a100", vec![q(GPU, 0)]),
        cq("p1").cohort("prod").quota("a100", vec![q(GPU, 0)]),
    ]);
    w.cohort(cohort("org").quota("a100", vec![q(GPU, 12)]));
    w.cohort(cohort("research").parent("org"));
    w.cohort(cohort("prod").parent("org"));
    flood(&mut w, "r1", 12, 0);
    flood(&mut w, "r2", 12, 0);
    flood(&mut w, "p1", 12, 0);
    w.cycle(0);
    let used = |w: &World, q: &str| w.used(q, "a100", GPU);
    assert_eq!((used(&w, "r1"), used(&w, "r2"), used(&w, "p1")), (3, 3, 6));
    let research = w.e.cohort_share("research").unwrap().weighted_share;
    let prod = w.e.cohort_share("prod").unwrap().weighted_share;
    assert_eq!((research, prod), (500, 500));
    assert_eq!(
        w.e.cohort_share("org").unwrap().weighted_share,
        0,
        "a root has no share"
    );
}

#[test]
fn within_a_queue_the_order_stays_priority_then_arrival() {
    let mut w = pool_of_eight(vec![borrower("a"), borrower("b")]);
    flood(&mut w, "b", 8, 0);
    w.add(wl("a-low").queue("a").prio(0).at(0).pods(1, &[(GPU, 1)]));
    for i in 0..4 {
        w.add(
            wl(&format!("a-high-{i}"))
                .queue("a")
                .prio(10)
                .at(50 + i)
                .pods(1, &[(GPU, 1)]),
        );
    }
    w.cycle(0);
    assert_eq!(
        w.state("a-low"),
        WorkloadState::Pending,
        "a's four go to its higher priority"
    );
    assert_eq!(w.used("a", "a100", GPU), 4);
}

/// `a` fills the pool first; `b` arrives later and may reclaim.
fn a_fills_then_b_arrives(strategies: FairShareStrategies) -> World {
    let mut w = pool_with(World::with_config(
        EngineConfig {
            fair_sharing: FairSharing::On { strategies },
            ..Default::default()
        },
        vec![borrower("a"), borrower("b").reclaim(ReclaimWithinCohort::Any)],
    ));
    flood(&mut w, "a", 8, 0);
    w.cycle(0);
    assert_eq!(w.used("a", "a100", GPU), 8);
    w
}

/// Cycles, completing every eviction, until nothing more happens.
fn settle(w: &mut World, mut now: Millis) -> Vec<Preemption> {
    let mut all = Vec::new();
    for _ in 0..50 {
        now += 1;
        let c = w.cycle(now);
        if c.preempted.is_empty() && c.admitted.is_empty() {
            break;
        }
        for p in &c.preempted {
            w.e.eviction_complete(&p.victim, now).unwrap();
        }
        all.extend(c.preempted);
    }
    all
}

#[test]
fn a_late_queue_preempts_its_way_to_its_fair_half_and_no_further() {
    let mut w = a_fills_then_b_arrives(FairShareStrategies::Both);
    flood(&mut w, "b", 8, 100);
    let preempted = settle(&mut w, 1);
    assert_eq!((w.used("a", "a100", GPU), w.used("b", "a100", GPU)), (4, 4));
    assert_eq!(preempted.len(), 4);
    assert!(
        preempted
            .iter()
            .all(|p| p.reason == PreemptionReason::InCohortFairSharing)
    );
    let mut victims: Vec<&str> = preempted.iter().map(|p| &*p.victim).collect();
    victims.sort();
    assert_eq!(
        victims,
        ["a-0", "a-1", "a-2", "a-3"],
        "equal priority, admitted together: by UID, as in the classic victim order"
    );
}

/// `a` holds one 6-GPU job and two 1-GPU jobs; `b` wants 4.
fn big_victim(strategies: FairShareStrategies) -> Vec<Preemption> {
    let mut w = pool_with(World::with_config(
        EngineConfig {
            fair_sharing: FairSharing::On { strategies },
            ..Default::default()
        },
        vec![borrower("a"), borrower("b").reclaim(ReclaimWithinCohort::Any)],
    ));
    w.add(wl("a-big").queue("a").prio(0).at(0).pods(1, &[(GPU, 6)]));
    w.add(wl("a-1").queue("a").prio(5).at(1).pods(1, &[(GPU, 1)]));
    w.add(wl("a-2").queue("a").prio(5).at(2).pods(1, &[(GPU, 1)]));
    w.cycle(0);
    w.add(wl("b-4").queue("b").at(10).pods(1, &[(GPU, 4)]));
    w.cycle(1).preempted
}

#[test]
fn less_than_or_equal_to_final_share_never_leaves_the_victims_queue_below_the_preemptors() {
    // b with 4 would have 500; a without a-big would have 250: refused.
    assert!(big_victim(FairShareStrategies::LessThanOrEqualToFinalShare).is_empty());
}

#[test]
fn less_than_initial_share_compares_with_the_victims_queue_as_it_is_now() {
    // 500 < 1000 (a now): a-big may go.
    let p = big_victim(FairShareStrategies::LessThanInitialShare);
    assert_eq!(p.iter().map(|p| &*p.victim).collect::<Vec<_>>(), ["a-big"]);
    // Both: the first strategy finds nothing, the second does.
    let p = big_victim(FairShareStrategies::Both);
    assert_eq!(p.iter().map(|p| &*p.victim).collect::<Vec<_>>(), ["a-big"]);
}

#[test]
fn a_queue_within_its_nominal_quota_is_never_a_fair_share_victim() {
    let mut w = World::new(vec![
        cq("owner").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b")
            .cohort("co")
            .quota("a100", vec![q(GPU, 0)])
            .reclaim(ReclaimWithinCohort::Any),
    ]);
    flood(&mut w, "owner", 8, 0);
    w.cycle(0);
    w.add(wl("b-1").queue("b").at(10).pods(1, &[(GPU, 1)]));
    assert!(w.cycle(1).preempted.is_empty());
}

#[test]
fn reclaiming_nominal_quota_passes_every_strategy() {
    // owner lent its 8 to a; owner's share with its job is 0.
    let mut w = World::new(vec![
        cq("owner")
            .cohort("co")
            .quota("a100", vec![q(GPU, 8)])
            .reclaim(ReclaimWithinCohort::Any),
        cq("a").cohort("co").quota("a100", vec![q(GPU, 0)]),
    ]);
    flood(&mut w, "a", 8, 0);
    w.cycle(0);
    w.add(wl("mine").queue("owner").at(10).pods(1, &[(GPU, 8)]));
    let p = w.cycle(1).preempted;
    assert_eq!(p.len(), 8);
    assert!(p.iter().all(|p| p.reason == PreemptionReason::InCohortFairSharing));
}

/// The worked example of docs/fair-sharing.md, step by step.
#[test]
fn the_documented_example_ends_with_equal_weighted_shares() {
    let mut w = World::new(vec![
        borrower("team-a").weight(2000).reclaim(ReclaimWithinCohort::Any),
        borrower("team-b").reclaim(ReclaimWithinCohort::Any),
        borrower("team-c").reclaim(ReclaimWithinCohort::Any),
    ]);
    w.cohort(cohort("pool").quota("a100", vec![q(GPU, 12)]));
    let used = |w: &World| ["team-a", "team-b", "team-c"].map(|q| w.used(q, "a100", GPU));
    flood(&mut w, "team-b", 12, 0);
    w.cycle(0);
    assert_eq!(used(&w), [0, 12, 0]);
    assert_eq!(w.share("team-b"), 1000);
    flood(&mut w, "team-c", 12, 100);
    settle(&mut w, 100);
    assert_eq!(used(&w), [0, 6, 6]);
    assert_eq!((w.share("team-b"), w.share("team-c")), (500, 500));
    flood(&mut w, "team-a", 12, 200);
    settle(&mut w, 200);
    assert_eq!(used(&w), [6, 3, 3]);
    assert_eq!(["team-a", "team-b", "team-c"].map(|q| w.share(q)), [250, 250, 250]);
}
