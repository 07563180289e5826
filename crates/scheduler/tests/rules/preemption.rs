//! Preemption: policies within the queue and the cohort, minimal victim sets, claims, minimum runtime.

use crate::common::*;
use sluice_scheduler::*;

#[test]
fn a_higher_priority_workload_preempts_lower_priority_in_its_queue() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty(), "the preemptor waits for its victim");
    assert_eq!(victims(&c), ["low"]);
    assert_eq!(c.preempted[0].reason, PreemptionReason::InClusterQueue);
    assert!(
        sluice_convert::text::preemption(&c.preempted[0], &c.preempted[0].preemptor_name).contains("ns/high"),
        "{:?}",
        c.preempted[0]
    );
    assert_eq!(w.state("low"), WorkloadState::Evicting);
    assert_eq!(w.state("high"), WorkloadState::Preempting);
}

#[test]
fn the_preemptor_is_admitted_once_its_victims_are_gone_and_they_requeue() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    w.cycle(1);
    assert!(w.cycle(2).admitted.is_empty(), "victim still holds its quota");
    w.e.eviction_complete("low", 3).unwrap();
    let c = w.cycle(3);
    assert_eq!(admitted(&c), ["high"]);
    assert_eq!(w.state("low"), WorkloadState::Pending);
    w.e.finish("high").unwrap();
    assert_eq!(admitted(&w.cycle(4)), ["low"]);
}

#[test]
fn never_preempts_when_the_policy_is_never() {
    let mut w = single_queue(WithinClusterQueue::Never);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty());
    assert_eq!(w.e.explanation("high").unwrap().reason, PendingReason::NoFit);
}

#[test]
fn lower_priority_policy_spares_equal_priority() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("old").queue("a").prio(5).at(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("new").queue("a").prio(5).at(1).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty());
    assert!(
        w.why("new")
            .contains("no workloads the preemption policy allows to preempt"),
        "{}",
        w.why("new")
    );
}

#[test]
fn lower_or_newer_equal_priority_preempts_a_newer_equal_but_not_an_older_one() {
    let mut w = single_queue(WithinClusterQueue::LowerOrNewerEqualPriority);
    // "newer" is queue order: the running one arrived later than the waiting one.
    w.add(wl("newer-running").queue("a").prio(5).at(10).pods(1, &[(GPU, 8)]));
    w.cycle(10);
    w.add(wl("older-waiting").queue("a").prio(5).at(5).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(11)), ["newer-running"]);

    let mut w = single_queue(WithinClusterQueue::LowerOrNewerEqualPriority);
    w.add(wl("older-running").queue("a").prio(5).at(5).pods(1, &[(GPU, 8)]));
    w.cycle(5);
    w.add(wl("newer-waiting").queue("a").prio(5).at(10).pods(1, &[(GPU, 8)]));
    assert!(w.cycle(11).preempted.is_empty());
}

#[test]
fn the_victim_set_is_greedy_minimal() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("v1").queue("a").prio(1).at(0).pods(1, &[(GPU, 2)]));
    w.add(wl("v2").queue("a").prio(1).at(1).pods(1, &[(GPU, 2)]));
    w.add(wl("v3").queue("a").prio(1).at(2).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("needs4").queue("a").prio(10).pods(1, &[(GPU, 4)]));
    // Order tried: lowest priority, then most recently admitted (all admitted at
    // t=0, so UID breaks the tie: v1, v2, v3). Removing v1 and v2 frees 4: the
    // greedy pass stops there and neither can be put back.
    assert_eq!(victims(&w.cycle(1)), ["v1", "v2"]);
}

#[test]
fn the_victim_set_drops_candidates_that_turn_out_unneeded() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("small").queue("a").prio(0).pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.add(wl("big").queue("a").prio(1).pods(1, &[(GPU, 6)]));
    w.cycle(1);
    w.add(wl("needs6").queue("a").prio(10).pods(1, &[(GPU, 6)]));
    // Lowest priority first: small (2) then big (6) make it fit; small is then
    // found unneeded and put back.
    assert_eq!(victims(&w.cycle(2)), ["big"]);
}

#[test]
fn victims_are_taken_lowest_priority_first_then_most_recently_admitted() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("p3").queue("a").prio(3).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("p1-old").queue("a").prio(1).pods(1, &[(GPU, 2)]));
    w.cycle(1);
    w.add(wl("p1-new").queue("a").prio(1).pods(1, &[(GPU, 2)]));
    w.cycle(2);
    w.add(wl("needs2").queue("a").prio(10).pods(1, &[(GPU, 2)]));
    assert_eq!(victims(&w.cycle(3)), ["p1-new"]);
}

/// Classic rules (fair sharing off): the fair-sharing equivalents are in
/// `fair_sharing.rs`.
fn cohort_with_borrower(reclaim: ReclaimWithinCohort) -> World {
    let mut w = World::classic(vec![
        cq("owner").cohort("co").quota("a100", vec![q(GPU, 8)]).reclaim(reclaim),
        cq("borrower").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("b-own").queue("borrower").prio(50).at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("b-borrowed").queue("borrower").prio(50).at(1).pods(1, &[(GPU, 8)]));
    assert_eq!(w.cycle(0).admitted.len(), 2);
    w
}

#[test]
fn reclaim_any_takes_back_borrowed_quota_whatever_its_priority() {
    let mut w = cohort_with_borrower(ReclaimWithinCohort::Any);
    w.add(wl("owner-job").queue("owner").prio(0).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert_eq!(victims(&c), ["b-borrowed"], "newest of the borrowing queue first");
    assert_eq!(c.preempted[0].reason, PreemptionReason::InCohortReclamation);
    w.e.eviction_complete("b-borrowed", 2).unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["owner-job"]);
}

#[test]
fn reclaim_lower_priority_spares_higher_priority_borrowers() {
    let mut w = cohort_with_borrower(ReclaimWithinCohort::LowerPriority);
    w.add(wl("owner-low").queue("owner").prio(10).pods(1, &[(GPU, 8)]));
    assert!(w.cycle(1).preempted.is_empty());
    w.add(wl("owner-high").queue("owner").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(2)), ["b-borrowed"]);
}

#[test]
fn reclaim_never_preempts_a_queue_that_is_within_its_nominal_quota() {
    let mut w = World::new(vec![
        cq("owner")
            .cohort("co")
            .quota("a100", vec![q(GPU, 8)])
            .reclaim(ReclaimWithinCohort::Any),
        cq("other").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("hog").cohort("co").quota("a100", vec![q(GPU, 0)]),
    ]);
    // other runs within its own 8; hog borrows owner's 8 at high priority.
    w.add(wl("other-running").queue("other").prio(0).pods(1, &[(GPU, 8)]));
    w.add(wl("hog-borrowed").queue("hog").prio(1000).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    // owner has room within its nominal quota; only hog is borrowing.
    w.add(wl("owner-job").queue("owner").prio(0).pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert_eq!(
        victims(&c),
        ["hog-borrowed"],
        "reclaim takes from the borrower, never from other"
    );
}

#[test]
fn borrow_within_cohort_preempts_borrowers_below_the_threshold_to_borrow() {
    let mut w = World::classic(vec![
        cq("hungry")
            .cohort("co")
            .quota("a100", vec![q(GPU, 4)])
            .borrow_within(Some(10)),
        cq("other").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("lender").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    // other runs 8 on a nominal of 4: it borrows 4 of lender's 8.
    w.add(wl("other-cheap").queue("other").prio(5).at(1).pods(1, &[(GPU, 4)]));
    w.add(wl("other-important").queue("other").prio(50).at(0).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    // hungry wants 12 (8 borrowed): the cohort has 16, 8 in use.
    w.add(wl("hungry-job").queue("hungry").prio(100).pods(1, &[(GPU, 12)]));
    let c = w.cycle(1);
    assert_eq!(victims(&c), ["other-cheap"], "priority 50 is above the threshold 10");
    assert_eq!(c.preempted[0].reason, PreemptionReason::InCohortReclaimWhileBorrowing);
}

#[test]
fn cohort_peers_within_their_nominal_quota_are_never_preempted_to_borrow() {
    let mut w = World::new(vec![
        cq("hungry")
            .cohort("co")
            .quota("a100", vec![q(GPU, 4)])
            .borrow_within(None),
        cq("other").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("other-cheap").queue("other").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("hungry-job").queue("hungry").prio(100).pods(1, &[(GPU, 8)]));
    assert!(w.cycle(1).preempted.is_empty(), "other's nominal quota is its own");
}

#[test]
fn min_runtime_protects_victims_and_a_timer_retries_when_it_ends() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority)
            .min_runtime(60_000),
    ]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(1_000);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    let c = w.cycle(2_000);
    assert!(c.preempted.is_empty());
    assert_eq!(c.next_wakeup, Some(61_000));
    assert!(
        w.why("high").contains("1 protected by minimum runtime"),
        "{}",
        w.why("high")
    );
    assert!(
        w.cycle(30_000).preempted.is_empty(),
        "nothing new: no retry before the timer"
    );
    assert_eq!(victims(&w.cycle(61_000)), ["low"]);
}

#[test]
fn a_preemptors_claim_keeps_freed_capacity_from_others() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("low1").queue("a").prio(0).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("low2").queue("a").prio(0).at(1).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low1", "low2"]);
    w.e.eviction_complete("low1", 2).unwrap();
    w.add(wl("sneaky").queue("a").prio(50).pods(1, &[(GPU, 4)]));
    let c = w.cycle(2);
    assert!(c.admitted.is_empty(), "the 4 freed GPUs are claimed by high");
    assert_eq!(
        w.e.explanation("low1").map(|e| e.reason.clone()),
        Some(PendingReason::NoFit)
    );
    w.e.eviction_complete("low2", 3).unwrap();
    assert_eq!(admitted(&w.cycle(3)), ["high"]);
}

#[test]
fn a_victim_that_finishes_while_being_evicted_counts_as_gone() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    w.cycle(1);
    w.e.finish("low").unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["high"]);
    assert_eq!(w.state("low"), WorkloadState::Finished);
}

#[test]
fn a_workload_that_fits_once_evictions_complete_waits_instead_of_preempting_more() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("a1").queue("a").prio(0).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("a2").queue("a").prio(0).at(1).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.e.evict("a1").unwrap();
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert!(c.preempted.is_empty());
    assert_eq!(
        w.e.explanation("high").unwrap().reason,
        PendingReason::WaitingForEvictions
    );
    w.e.eviction_complete("a1", 2).unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["high"]);
}

#[test]
fn preemption_tries_the_next_flavor_when_the_first_has_no_victims() {
    let mut w = World::new(vec![
        cq("a")
            .group(vec![("a100", vec![q(GPU, 8)]), ("h100", vec![q(GPU, 8)])])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("vip-on-a100").queue("a").prio(1000).at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("low-on-h100").queue("a").prio(0).at(1).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("mid").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    let c = w.cycle(1);
    assert_eq!(victims(&c), ["low-on-h100"]);
    w.e.eviction_complete("low-on-h100", 2).unwrap();
    assert_eq!(flavor_of(&w.cycle(2), "mid", GPU), "h100");
}

#[test]
fn an_admission_reclaimed_in_the_same_cycle_is_withdrawn_not_evicted() {
    let mut w = World::classic(vec![
        cq("owner")
            .cohort("co")
            .quota("a100", vec![q(GPU, 4)])
            .reclaim(ReclaimWithinCohort::Any),
        cq("borrower").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    // Both queues' heads must borrow, so both wait for the second pass.
    // There b-big goes first (higher priority) and borrows owner's 4 GPUs;
    // o-big does not fit; o-small (BestEffortFIFO passes o-big), within
    // owner's nominal quota, reclaims them.
    w.add(wl("b-big").queue("borrower").prio(100).pods(1, &[(GPU, 8)]));
    w.add(wl("o-big").queue("owner").prio(10).at(1).pods(1, &[(GPU, 6)]));
    w.add(wl("o-small").queue("owner").prio(5).at(2).pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(
        c.next_wakeup,
        Some(0),
        "b-big was requeued during the cycle: cycle again at once"
    );
    assert_eq!(
        admitted(&c),
        ["o-small"],
        "b-big's admission was never applied: withdrawn"
    );
    assert!(c.preempted.is_empty(), "nothing to evict");
    assert_eq!(w.state("b-big"), WorkloadState::Pending);
    assert_eq!(w.used("borrower", "a100", GPU), 0);
}

#[test]
fn own_queue_preemption_may_borrow_instead_of_evicting_more() {
    let mut w = World::new(vec![
        cq("a")
            .cohort("co")
            .quota("a100", vec![q(GPU, 4)])
            .within(WithinClusterQueue::LowerPriority),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("b-job").queue("b").at(0).pods(1, &[(GPU, 2)]));
    w.add(wl("l1").queue("a").prio(0).at(1).pods(1, &[(GPU, 2)]));
    w.add(wl("l2").queue("a").prio(0).at(2).pods(1, &[(GPU, 2)]));
    w.cycle(0);
    // Cohort: 8, in use 6. P needs 4: evicting one of a's jobs and borrowing
    // b's free 2 is enough.
    w.add(wl("p").queue("a").prio(10).at(3).pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert_eq!(c.preempted.len(), 1, "{:?}", victims(&c));
}

#[test]
fn a_queue_borrowing_another_resource_is_no_victim_for_a_gpu_shortage() {
    let mut w = World::new(vec![
        cq("a")
            .cohort("co")
            .quota("a100", vec![q(GPU, 4), q(CPU, 8)])
            .reclaim(ReclaimWithinCohort::LowerPriority),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 4), q(CPU, 0)]),
        cq("c").cohort("co").quota("a100", vec![q(GPU, 0), q(CPU, 0)]),
    ]);
    // b is within its GPU quota but borrows cpu; c borrows a's 4 GPUs.
    w.add(wl("bj").queue("b").prio(0).pods(1, &[(GPU, 4), (CPU, 4)]));
    w.add(wl("cj").queue("c").prio(100).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("w").queue("a").prio(10).pods(1, &[(GPU, 4), (CPU, 1)]));
    let c = w.cycle(1);
    assert!(
        !victims(&c).contains(&"bj"),
        "b is within its GPU quota: {:?}",
        victims(&c)
    );
}

#[test]
fn preemption_admits_every_pod_set_even_ones_that_request_nothing() {
    let mut w = single_queue(WithinClusterQueue::LowerPriority);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(
        wl("high")
            .queue("a")
            .prio(100)
            .pod_set("workers", 1, &[(GPU, 8)])
            .pod_set("launcher", 1, &[]),
    );
    w.cycle(1);
    w.e.eviction_complete("low", 2).unwrap();
    let c = w.cycle(2);
    assert_eq!(admitted(&c), ["high"]);
    assert_eq!(c.admitted[0].pod_sets.len(), 2);
}

#[test]
fn a_preemptor_does_not_wait_on_an_unrelated_workload_that_reused_its_victims_slot() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority),
        cq("b").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("low1").queue("a").prio(0).at(0).pods(1, &[(GPU, 4)]));
    w.add(wl("low2").queue("a").prio(0).at(1).pods(1, &[(GPU, 4)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low1", "low2"]);
    // low1 is deleted; a newcomer elsewhere takes its internal slot, is
    // admitted, and is being evicted while low2 is still going.
    w.e.remove_workload("low1").unwrap();
    w.add(wl("newcomer").queue("b").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(2)), ["newcomer"]);
    w.e.evict("newcomer").unwrap();
    w.e.eviction_complete("low2", 3).unwrap();
    assert_eq!(admitted(&w.cycle(3)), ["high"], "high's victims are both gone");
}

/// A victim that takes long to evict (the controller gives it a notice
/// before suspending it) keeps its quota all along: the preemptor waits,
/// and nothing else is admitted into the capacity, not even once the
/// victim's quota is released; then the preemptor gets it.
#[test]
fn a_victim_slow_to_evict_keeps_the_preemptor_waiting_and_the_capacity_claimed() {
    let mut w = World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 12)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("low").queue("a").prio(0).at(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1_000)), ["low"]);
    w.add(wl("small").queue("a").prio(0).at(2).pods(1, &[(GPU, 6)]));
    for now in (2_000..300_000).step_by(30_000) {
        let c = w.cycle(now);
        assert!(c.admitted.is_empty(), "at {now}: {:?}", admitted(&c));
        assert!(c.preempted.is_empty(), "at {now}: no second preemption");
        assert_eq!(w.state("low"), WorkloadState::Evicting, "at {now}");
        assert_eq!(w.state("high"), WorkloadState::Preempting, "at {now}");
        assert_eq!(w.used("a", "a100", GPU), 8, "at {now}: the victim's 8 GPUs still count");
    }
    w.e.eviction_complete("low", 300_000).unwrap();
    let c = w.cycle(300_000);
    assert_eq!(admitted(&c), ["high"], "the freed GPUs go to the preemptor only");
    assert_eq!(w.state("small"), WorkloadState::Pending);
}
