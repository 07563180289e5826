//! Flavors: tried in the queue's order, nominal before borrowing, ruled out by taints, node labels or absence.

use crate::common::*;
use sluice_scheduler::*;

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
