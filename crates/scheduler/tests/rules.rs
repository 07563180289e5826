//! The engine's rules, one scenario each. Read a test as a specification:
//! the queues, the workloads, a cycle, what must happen.

mod common;

use common::*;
use sluice_scheduler::*;

// ----- admission basics -------------------------------------------------------------

#[test]
fn admits_a_workload_that_fits() {
    let mut w = World::new(vec![cq("team-a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("team-a").pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["job"]);
    assert_eq!(flavor_of(&c, "job", GPU), "a100");
    assert_eq!(c.admitted[0].pod_sets[0].usage[GPU], u(4));
    assert!(!c.admitted[0].borrowing);
    assert_eq!(w.used("team-a", "a100", GPU), 4);
}

#[test]
fn queues_when_full_and_admits_when_quota_is_released() {
    let mut w = World::new(vec![cq("team-a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("first").queue("team-a").at(1).pods(1, &[(GPU, 8)]));
    w.add(wl("second").queue("team-a").at(2).pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["first"]);
    assert_eq!(w.state("second"), WorkloadState::Pending);
    w.e.finish("first").unwrap();
    assert_eq!(admitted(&w.cycle(10)), ["second"]);
}

#[test]
fn one_cycle_admits_as_many_as_fit_not_one_per_queue() {
    let mut w = World::new(vec![cq("team-a").quota("default", vec![q(CPU, 10)])]);
    for i in 0..12 {
        w.add(wl(&format!("w{i:02}")).queue("team-a").at(i).pods(1, &[(CPU, 1)]));
    }
    let c = w.cycle(0);
    assert_eq!(c.admitted.len(), 10);
    assert_eq!(admitted(&c)[..3], ["w00", "w01", "w02"]);
    assert_eq!(w.state("w10"), WorkloadState::Pending);
}

#[test]
fn one_cycle_admits_across_all_queues() {
    let mut w = World::new(vec![
        cq("a").quota("default", vec![q(CPU, 2)]),
        cq("b").quota("default", vec![q(CPU, 2)]),
        cq("c").quota("default", vec![q(CPU, 2)]),
    ]);
    for queue in ["a", "b", "c"] {
        for i in 0..3 {
            w.add(wl(&format!("{queue}{i}")).queue(queue).at(i).pods(1, &[(CPU, 1)]));
        }
    }
    let mut got = admitted(&w.cycle(0)).into_iter().map(String::from).collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["a0", "a1", "b0", "b1", "c0", "c1"]);
}

#[test]
fn order_is_priority_then_queue_time_then_uid() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 3)])]);
    w.add(wl("late-high").queue("a").prio(10).at(50).pods(1, &[(CPU, 1)]));
    w.add(wl("early-low").queue("a").prio(0).at(1).pods(1, &[(CPU, 1)]));
    w.add(wl("b-same").queue("a").prio(5).at(7).pods(1, &[(CPU, 1)]));
    w.add(wl("a-same").queue("a").prio(5).at(7).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["late-high", "a-same", "b-same"]);
    assert_eq!(w.state("early-low"), WorkloadState::Pending);
}

#[test]
fn a_gang_is_admitted_whole_or_not_at_all() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 24)])]);
    w.add(wl("gang").queue("a").pods(4, &[(GPU, 8)]));
    let c = w.cycle(0);
    assert!(c.admitted.is_empty());
    assert_eq!(w.used("a", "a100", GPU), 0);
    assert!(w.why("gang").contains("needs 32 nvidia.com/gpu"), "{}", w.why("gang"));
}

#[test]
fn pod_sets_of_one_workload_add_up_on_a_shared_flavor() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 10)])]);
    w.add(
        wl("mpi")
            .queue("a")
            .pod_set("launcher", 1, &[(GPU, 2)])
            .pod_set("workers", 2, &[(GPU, 4)]),
    );
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["mpi"]);
    assert_eq!(c.admitted[0].pod_sets.len(), 2);
    assert_eq!(c.admitted[0].pod_sets[1].usage[GPU], u(8));
    assert_eq!(w.used("a", "a100", GPU), 10);

    w.add(
        wl("too-big")
            .queue("a")
            .pod_set("launcher", 1, &[(GPU, 2)])
            .pod_set("workers", 3, &[(GPU, 4)]),
    );
    w.e.finish("mpi").unwrap();
    assert!(
        w.cycle(1).admitted.is_empty(),
        "2 + 12 GPUs exceed 10 even though each pod set alone fits"
    );
}

#[test]
fn strict_fifo_head_blocks_the_queue() {
    let mut w = World::new(vec![cq("a").strict().quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty(), "StrictFIFO: small must wait behind big-head");
    assert_eq!(w.e.explanation("small").unwrap().reason, PendingReason::BlockedByHead);
    w.e.finish("running").unwrap();
    assert_eq!(admitted(&w.cycle(2)), ["big-head", "small"]);
}

#[test]
fn best_effort_fifo_lets_smaller_workloads_pass() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(1)), ["small"]);
    assert_eq!(w.state("big-head"), WorkloadState::Pending);
}

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
fn zero_requests_need_no_quota() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 4)])]);
    w.add(wl("job").queue("a").pods(1, &[(CPU, 1), (GPU, 0)]));
    assert_eq!(admitted(&w.cycle(0)), ["job"]);
}

#[test]
fn fractional_requests_are_exact_in_milli_units() {
    let mut w = World::new(vec![cq("a").quota("default", vec![q(CPU, 1)])]);
    w.e.add_workload(wl("a").queue("a").at(0).pods_milli(2, &[(CPU, 250)]).build())
        .unwrap();
    w.e.add_workload(wl("b").queue("a").at(1).pods_milli(2, &[(CPU, 250)]).build())
        .unwrap();
    w.e.add_workload(wl("c").queue("a").at(2).pods_milli(1, &[(CPU, 1)]).build())
        .unwrap();
    assert_eq!(admitted(&w.cycle(0)), ["a", "b"]);
    assert!(
        w.why("c").contains("needs 1m cpu, 0 free of 1 nominal"),
        "{}",
        w.why("c")
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
fn more_than_the_queue_can_ever_hold_never_fits() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8).borrow(0)])]);
    w.add(wl("huge").queue("a").pods(2, &[(GPU, 8)]));
    let c = w.cycle(0);
    let e = &c.pending_changed[0].1;
    assert_eq!(e.reason, PendingReason::NeverFits);
    assert_eq!(
        e.to_string(),
        "exceeds what the ClusterQueue can ever admit; pod set main: a100: needs 16 nvidia.com/gpu, more than the 8 this queue can ever use"
    );
}

// ----- flavors ----------------------------------------------------------------------

#[test]
fn flavors_are_tried_in_the_queue_order() {
    let mut w = World::new(vec![
        cq("a").group(vec![("h100", vec![q(GPU, 8)]), ("a100", vec![q(GPU, 8)])]),
    ]);
    w.add(wl("one").queue("a").at(1).pods(1, &[(GPU, 6)]));
    w.add(wl("two").queue("a").at(2).pods(1, &[(GPU, 6)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "one", GPU), "h100");
    assert_eq!(flavor_of(&c, "two", GPU), "a100", "h100 has only 2 left");
}

#[test]
fn a_flavor_that_fits_without_borrowing_beats_an_earlier_one_that_must_borrow() {
    let mut w = World::new(vec![
        cq("a")
            .cohort("co")
            .group(vec![("h100", vec![q(GPU, 4)]), ("a100", vec![q(GPU, 8)])]),
        cq("lender")
            .cohort("co")
            .group(vec![("h100", vec![q(GPU, 8)]), ("a100", vec![q(GPU, 0)])]),
    ]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 6)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "job", GPU), "a100");
    assert!(!c.admitted[0].borrowing);
}

#[test]
fn borrows_on_the_first_flavor_when_none_fits_within_nominal() {
    let mut w = World::new(vec![
        cq("a")
            .cohort("co")
            .group(vec![("h100", vec![q(GPU, 4)]), ("a100", vec![q(GPU, 2)])]),
        cq("lender")
            .cohort("co")
            .group(vec![("h100", vec![q(GPU, 8)]), ("a100", vec![q(GPU, 8)])]),
    ]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 6)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "job", GPU), "h100");
    assert!(c.admitted[0].borrowing);
    let usage = w.e.cluster_queue_usage("a").unwrap();
    let h100 = usage.resources.iter().find(|r| r.flavor == "h100").unwrap();
    assert_eq!((h100.used, h100.borrowed), (u(6), u(2)));
}

#[test]
fn an_untolerated_taint_rules_out_a_flavor() {
    let mut w = World::new(vec![
        cq("a").group(vec![("a100", vec![q(GPU, 8)]), ("l4", vec![q(GPU, 8)])]),
    ]);
    w.e.upsert_flavor(tainted_flavor("a100", GPU));
    w.add(wl("plain").queue("a").at(1).pods(1, &[(GPU, 1)]));
    w.add(wl("tolerant").queue("a").at(2).pods(1, &[(GPU, 1)]).tolerating(GPU));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "plain", GPU), "l4");
    assert_eq!(flavor_of(&c, "tolerant", GPU), "a100");
}

#[test]
fn an_untolerated_taint_is_named_in_the_explanation() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.e.upsert_flavor(tainted_flavor("a100", GPU));
    w.add(wl("plain").queue("a").pods(1, &[(GPU, 1)]));
    w.cycle(0);
    assert_eq!(
        w.why("plain"),
        "exceeds what the ClusterQueue can ever admit; pod set main: a100: untolerated taint nvidia.com/gpu=present:NoSchedule"
    );
}

#[test]
fn a_flavors_own_tolerations_tolerate_its_taints() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    let mut f = tainted_flavor("a100", GPU);
    f.tolerations.push(tolerate(GPU));
    w.e.upsert_flavor(f);
    w.add(wl("plain").queue("a").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["plain"]);
}

#[test]
fn prefer_no_schedule_taints_do_not_rule_out_a_flavor() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    let mut f = tainted_flavor("a100", GPU);
    f.taints[0].effect = TaintEffect::PreferNoSchedule;
    w.e.upsert_flavor(f);
    w.add(wl("plain").queue("a").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["plain"]);
}

#[test]
fn a_node_selector_that_contradicts_flavor_labels_rules_it_out() {
    let mut w = World::new(vec![
        cq("a").group(vec![("a100", vec![q(GPU, 8)]), ("h100", vec![q(GPU, 8)])]),
    ]);
    w.e.upsert_flavor(labelled_flavor(
        "a100",
        "nvidia.com/gpu.product",
        "NVIDIA-A100-SXM4-80GB",
    ));
    w.e.upsert_flavor(labelled_flavor(
        "h100",
        "nvidia.com/gpu.product",
        "NVIDIA-H100-80GB-HBM3",
    ));
    w.add(
        wl("wants-h100")
            .queue("a")
            .pods(1, &[(GPU, 1)])
            .selector("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    );
    w.add(
        wl("unrelated-selector")
            .queue("a")
            .pods(1, &[(GPU, 1)])
            .selector("zone", "a"),
    );
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "wants-h100", GPU), "h100");
    assert_eq!(flavor_of(&c, "unrelated-selector", GPU), "a100");
}

#[test]
fn a_flavor_that_does_not_exist_is_skipped_and_explained() {
    let mut w = World::new(vec![cq("a").quota("ghost", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 1)]));
    w.cycle(0);
    assert!(w.why("job").contains("ghost: flavor not found"), "{}", w.why("job"));
    w.e.upsert_flavor(flavor("ghost"));
    assert_eq!(admitted(&w.cycle(1)), ["job"]);
}

#[test]
fn each_resource_group_gets_its_own_flavor() {
    let mut w = World::new(vec![
        cq("a")
            .quota("default", vec![q(CPU, 64)])
            .group(vec![("a100", vec![q(GPU, 0)]), ("h100", vec![q(GPU, 8)])]),
    ]);
    w.add(wl("job").queue("a").pods(2, &[(CPU, 8), (GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "job", CPU), "default");
    assert_eq!(flavor_of(&c, "job", GPU), "h100");
    assert_eq!((w.used("a", "default", CPU), w.used("a", "h100", GPU)), (16, 8));
}

#[test]
fn mig_profiles_are_distinct_resources() {
    let mig1 = "nvidia.com/mig-1g.10gb";
    let mig3 = "nvidia.com/mig-3g.40gb";
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(mig1, 7), q(mig3, 2)])]);
    w.add(wl("small").queue("a").at(1).pods(7, &[(mig1, 1)]));
    w.add(wl("big").queue("a").at(2).pods(3, &[(mig3, 1)]));
    let c = w.cycle(0);
    assert_eq!(
        admitted(&c),
        ["small"],
        "three 3g slices never fit in two, however many 1g slices are free"
    );
}

// ----- cohorts: borrowing and lending ---------------------------------------------------

#[test]
fn borrowing_stops_at_the_borrowing_limit() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8).borrow(4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 16)]),
    ]);
    w.add(wl("twelve").queue("a").at(1).pods(1, &[(GPU, 12)]));
    w.add(wl("one-more").queue("a").at(2).pods(1, &[(GPU, 1)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["twelve"]);
    assert!(
        w.why("one-more")
            .contains("needs 1 nvidia.com/gpu, 0 free of 8 nominal, 0 borrowable"),
        "{}",
        w.why("one-more")
    );
}

#[test]
fn a_queue_outside_a_cohort_never_borrows() {
    let mut w = World::new(vec![
        cq("a").quota("a100", vec![q(GPU, 8)]),
        cq("b").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("nine").queue("a").pods(1, &[(GPU, 9)]));
    w.cycle(0);
    assert_eq!(w.e.explanation("nine").unwrap().reason, PendingReason::NeverFits);
}

#[test]
fn borrowing_is_limited_by_what_the_cohort_has_free() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("b-uses-6").queue("b").pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("a-wants-12").queue("a").pods(1, &[(GPU, 12)]));
    w.add(wl("a-wants-10").queue("a").pods(1, &[(GPU, 10)]));
    let c = w.cycle(1);
    assert_eq!(admitted(&c), ["a-wants-10"]);
    assert!(
        w.why("a-wants-12").contains("needs 12 nvidia.com/gpu"),
        "{}",
        w.why("a-wants-12")
    );
}

#[test]
fn a_lending_limit_keeps_quota_back_from_the_cohort() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("keeper").cohort("co").quota("a100", vec![q(GPU, 8).lend(2)]),
    ]);
    w.add(wl("greedy").queue("a").at(1).pods(1, &[(GPU, 11)]));
    w.add(wl("fits").queue("a").at(2).pods(1, &[(GPU, 10)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["fits"], "keeper lends only 2 of its 8");
    w.add(wl("keeper-job").queue("keeper").pods(1, &[(GPU, 6)]));
    assert_eq!(
        admitted(&w.cycle(1)),
        ["keeper-job"],
        "the 6 kept back stay available to keeper"
    );
}

#[test]
fn a_queue_can_use_its_own_nominal_quota_only_when_the_cohort_has_not_lent_it() {
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(wl("a-borrows").queue("a").pods(1, &[(GPU, 14)]));
    w.cycle(0);
    w.add(wl("b-own").queue("b").pods(1, &[(GPU, 4)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty());
    assert!(
        w.why("b-own")
            .contains("needs 4 nvidia.com/gpu, 2 free of 8 nominal, 0 borrowable"),
        "{}",
        w.why("b-own")
    );
}

// ----- preemption ----------------------------------------------------------------------

fn single_queue(within: WithinClusterQueue) -> World {
    World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).within(within)])
}

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
    assert!(c.preempted[0].message.contains("ns/high"), "{}", c.preempted[0].message);
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

fn cohort_with_borrower(reclaim: ReclaimWithinCohort) -> World {
    let mut w = World::new(vec![
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
    let mut w = World::new(vec![
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

// ----- lifecycle ----------------------------------------------------------------------

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

// ----- stop policies ------------------------------------------------------------------

#[test]
fn a_held_queue_admits_nothing_new_and_keeps_what_runs() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).stop(StopPolicy::Hold).build());
    w.add(wl("new").queue("a").pods(1, &[(GPU, 2)]));
    let c = w.cycle(1);
    assert!(c.admitted.is_empty() && c.evicted.is_empty());
    assert_eq!(
        w.e.explanation("new").unwrap().reason,
        PendingReason::Held { by_local_queue: false }
    );
    assert_eq!(w.state("running"), WorkloadState::Admitted);
    w.e.upsert_cluster_queue(cq("a").quota("a100", vec![q(GPU, 8)]).build());
    assert_eq!(admitted(&w.cycle(2)), ["new"]);
}

#[test]
fn hold_and_drain_evicts_what_the_queue_admitted() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.cycle(0);
    w.e.upsert_cluster_queue(
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .stop(StopPolicy::HoldAndDrain)
            .build(),
    );
    let c = w.cycle(1);
    assert_eq!(c.evicted.len(), 1);
    assert_eq!(c.evicted[0].reason, EvictionReason::ClusterQueueStopped);
    w.e.eviction_complete("running", 2).unwrap();
    assert!(w.cycle(2).admitted.is_empty(), "requeued but held");
    assert_eq!(w.used("a", "a100", GPU), 0);
}

#[test]
fn a_drained_workload_that_finishes_before_the_next_cycle_is_not_reported_evicted() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 2)]));
    w.add(wl("removed").queue("a").pods(1, &[(GPU, 2)]));
    assert_eq!(admitted(&w.cycle(0)).len(), 2);
    w.e.upsert_cluster_queue(
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .stop(StopPolicy::HoldAndDrain)
            .build(),
    );
    // Both are being evicted; one finishes, the other is deleted, before
    // the cycle that would report them.
    w.e.finish("running").unwrap();
    w.e.remove_workload("removed").unwrap();
    let c = w.cycle(1);
    assert!(c.evicted.is_empty(), "{:?}", c.evicted);
    assert_eq!(w.used("a", "a100", GPU), 0);
}

#[test]
fn a_stopped_local_queue_holds_only_its_own_workloads() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/other".into(),
        cluster_queue: "a".into(),
        ..Default::default()
    });
    w.e.upsert_local_queue(LocalQueueSpec {
        key: "ns/paused".into(),
        cluster_queue: "a".into(),
        stop_policy: StopPolicy::Hold,
    });
    w.add(wl("p").queue("paused").pods(1, &[(GPU, 1)]));
    w.add(wl("o").queue("other").pods(1, &[(GPU, 1)]));
    assert_eq!(admitted(&w.cycle(0)), ["o"]);
    assert_eq!(
        w.e.explanation("p").unwrap().reason,
        PendingReason::Held { by_local_queue: true }
    );
}

// ----- explanations and events ----------------------------------------------------------

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
fn nothing_happens_without_an_event() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("running").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("waiting").queue("a").at(1).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    let c = w.cycle(1);
    assert!(c.is_empty());
    assert_eq!(c.next_wakeup, None);
}

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
fn moving_a_queue_between_cohorts_moves_its_quota() {
    let mut w = World::new(vec![
        cq("a").cohort("one").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("one").quota("a100", vec![q(GPU, 4)]),
        cq("c").cohort("two").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("borrow").queue("a").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(0)), ["borrow"]);
    w.e.finish("borrow").unwrap();
    w.e.upsert_cluster_queue(cq("b").cohort("two").quota("a100", vec![q(GPU, 4)]).build());
    w.add(wl("borrow-again").queue("a").pods(1, &[(GPU, 8)]));
    w.add(wl("c-borrows").queue("c").pods(1, &[(GPU, 8)]));
    assert_eq!(admitted(&w.cycle(1)), ["c-borrows"]);
}

#[test]
fn an_admission_reclaimed_in_the_same_cycle_is_withdrawn_not_evicted() {
    let mut w = World::new(vec![
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
fn work_within_nominal_quota_goes_before_work_that_borrows_in_the_same_cycle() {
    // As in Kueue: a peer's guaranteed share is handed out before anyone
    // borrows it, whatever the priorities (no reclaim policy is needed).
    let mut w = World::new(vec![
        cq("owner").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("borrower").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("b-big").queue("borrower").prio(100).at(0).pods(1, &[(GPU, 8)]));
    w.add(wl("o-low").queue("owner").prio(1).at(1).pods(1, &[(GPU, 4)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["o-low"]);
    assert!(c.preempted.is_empty());
    assert_eq!(w.state("b-big"), WorkloadState::Pending);
    // Once nobody else needs it, borrowing proceeds.
    w.e.finish("o-low").unwrap();
    assert_eq!(admitted(&w.cycle(1)), ["b-big"]);
}

#[test]
fn a_queue_waiting_to_borrow_keeps_its_own_order() {
    // a-first must borrow, so queue a waits for the second pass; a-second
    // would fit within a's nominal quota but may not pass a-first.
    let mut w = World::new(vec![
        cq("a").cohort("co").quota("a100", vec![q(GPU, 4)]),
        cq("b").cohort("co").quota("a100", vec![q(GPU, 4)]),
    ]);
    w.add(wl("a-first").queue("a").prio(10).at(0).pods(1, &[(GPU, 6)]));
    w.add(wl("a-second").queue("a").prio(5).at(1).pods(1, &[(GPU, 2)]));
    w.add(wl("b-one").queue("b").prio(1).at(2).pods(1, &[(GPU, 2)]));
    let c = w.cycle(0);
    assert_eq!(admitted(&c), ["b-one", "a-first"]);
    assert_eq!(w.state("a-second"), WorkloadState::Pending);
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

#[test]
fn removing_a_flavor_stops_admissions_into_it() {
    let mut w = World::new(vec![
        cq("a").group(vec![("a100", vec![q(GPU, 8)]), ("h100", vec![q(GPU, 8)])]),
    ]);
    w.e.remove_flavor("a100");
    w.add(wl("job").queue("a").pods(1, &[(GPU, 1)]));
    let c = w.cycle(0);
    assert_eq!(flavor_of(&c, "job", GPU), "h100");
}

// ----- fixes from review -------------------------------------------------------------

#[test]
fn strict_fifo_head_parked_earlier_still_blocks_a_newcomer() {
    let mut w = World::new(vec![cq("a").strict().quota("default", vec![q(CPU, 4)])]);
    w.add(wl("running").queue("a").at(0).pods(1, &[(CPU, 3)]));
    w.cycle(0);
    w.add(wl("big-head").queue("a").at(1).pods(1, &[(CPU, 2)]));
    assert!(w.cycle(1).admitted.is_empty());
    w.add(wl("small").queue("a").at(2).pods(1, &[(CPU, 1)]));
    assert!(
        w.cycle(2).admitted.is_empty(),
        "small arrived later: it must wait behind big-head"
    );
    assert_eq!(w.e.explanation("small").unwrap().reason, PendingReason::BlockedByHead);
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
fn a_held_queue_admits_no_preemptor_either() {
    let spec = || {
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority)
    };
    let mut w = World::new(vec![spec()]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    w.cycle(0);
    w.add(wl("high").queue("a").prio(100).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low"]);
    w.e.upsert_cluster_queue(spec().stop(StopPolicy::Hold).build());
    w.e.eviction_complete("low", 2).unwrap();
    let c = w.cycle(2);
    assert!(c.admitted.is_empty(), "Hold admits nothing new");
    assert_eq!(
        w.e.explanation("high").unwrap().reason,
        PendingReason::Held { by_local_queue: false }
    );
    assert_eq!(
        w.e.cluster_queue_usage("a").unwrap().resources[0].reserved,
        0,
        "the claim is dropped"
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

#[test]
fn workload_totals_that_overflow_across_pod_sets_are_rejected() {
    let mut w = World::new(vec![]);
    let mut spec = wl("huge").pod_set("a", 1, &[]).pod_set("b", 1, &[]).build();
    spec.pod_sets[0].requests.insert(CPU.into(), i64::MAX);
    spec.pod_sets[1].requests.insert(CPU.into(), i64::MAX);
    assert!(matches!(w.e.add_workload(spec), Err(EngineError::Overflow { .. })));
    assert_eq!(w.e.workload_count(), 0);
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
fn a_strict_fifo_preemptor_does_not_block_higher_priority_newcomers() {
    let mut w = World::new(vec![
        cq("a")
            .strict()
            .quota("a100", vec![q(GPU, 8)])
            .quota("default", vec![q(CPU, 4)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 6)]));
    w.cycle(0);
    w.add(wl("mid").queue("a").prio(50).pods(1, &[(GPU, 8)]));
    assert_eq!(victims(&w.cycle(1)), ["low"], "mid waits for low's pods");
    // vip is ahead of mid in queue order, so StrictFIFO does not hold it
    // behind mid; it needs only cpu, which nobody claimed.
    w.add(wl("vip").queue("a").prio(100).pods(1, &[(CPU, 1)]));
    assert_eq!(admitted(&w.cycle(2)), ["vip"]);
    // A newcomer behind mid waits, whatever it needs.
    w.add(wl("late").queue("a").prio(10).pods(1, &[(CPU, 1)]));
    assert!(w.cycle(3).admitted.is_empty());
    assert_eq!(w.e.explanation("late").unwrap().reason, PendingReason::BlockedByHead);
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
