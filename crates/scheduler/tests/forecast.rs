//! Start-time estimates ([`Engine::forecast`]), one scenario each: the
//! queues, what runs and when it is expected to end, what the forecast says.
//! Property tests (termination, the original untouched) are in
//! `forecast_properties.rs`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use sluice_scheduler::*;

/// Expected ends of running workloads and run times of the rest, by UID.
struct Expect {
    ends: BTreeMap<&'static str, Millis>,
    runtimes: BTreeMap<&'static str, Millis>,
    default_runtime: Millis,
}

fn expect(ends: &[(&'static str, Millis)], default_runtime: Millis) -> Expect {
    Expect {
        ends: ends.iter().copied().collect(),
        runtimes: BTreeMap::new(),
        default_runtime,
    }
}

impl Expect {
    fn runtime(mut self, uid: &'static str, ms: Millis) -> Self {
        self.runtimes.insert(uid, ms);
        self
    }
}

fn forecast(w: &World, now: Millis, x: &Expect) -> BTreeMap<String, Millis> {
    forecast_with(w, now, x, ForecastSettings::default())
}

fn forecast_with(w: &World, now: Millis, x: &Expect, settings: ForecastSettings) -> BTreeMap<String, Millis> {
    let out: BTreeMap<Arc<str>, Millis> = w.e.forecast(
        now,
        |uid| x.ends.get(uid).copied(),
        |uid| x.runtimes.get(uid).copied().unwrap_or(x.default_runtime),
        settings,
    );
    out.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn est(pairs: &[(&str, Millis)]) -> BTreeMap<String, Millis> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn gpu_queue() -> World {
    World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])])
}

fn eight(uid: &str) -> WlBuilder {
    wl(uid).queue("a").pods(1, &[(GPU, 8)])
}

#[test]
fn the_head_starts_when_the_running_workload_ends() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("next").at(5));
    assert!(w.cycle(5).admitted.is_empty());
    assert_eq!(forecast(&w, 10, &expect(&[("run", 100)], 50)), est(&[("next", 100)]));
}

#[test]
fn workloads_in_line_start_one_after_the_other() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("p1").at(1));
    w.add(eight("p2").at(2));
    w.add(wl("p3").queue("a").at(3).pods(1, &[(GPU, 4)]));
    w.cycle(3);
    // p1 at run's end, p2 at p1's (run time 30), p3 (4 GPUs) after p2 (40)
    // since it is behind p2 in order and p2 takes all 8.
    let x = expect(&[("run", 100)], 50).runtime("p1", 30).runtime("p2", 40);
    assert_eq!(forecast(&w, 10, &x), est(&[("p1", 100), ("p2", 130), ("p3", 170)]));
}

#[test]
fn small_workloads_start_together_when_they_fit_together() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    for uid in ["s1", "s2"] {
        w.add(wl(uid).queue("a").pods(1, &[(GPU, 4)]));
    }
    w.cycle(1);
    assert_eq!(
        forecast(&w, 1, &expect(&[("run", 60)], 10)),
        est(&[("s1", 60), ("s2", 60)])
    );
}

#[test]
fn a_workload_that_never_fits_has_no_estimate() {
    let mut w = gpu_queue();
    w.add(wl("huge").queue("a").pods(2, &[(GPU, 8)]));
    w.add(eight("ok"));
    w.cycle(0);
    assert_eq!(forecast(&w, 0, &expect(&[("ok", 20)], 50)), est(&[]));
    w.add(eight("later").at(1));
    w.cycle(1);
    assert_eq!(forecast(&w, 1, &expect(&[("ok", 20)], 50)), est(&[("later", 20)]));
}

#[test]
fn a_held_queue_admits_nothing_in_the_forecast() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).stop(StopPolicy::Hold)]);
    w.add(eight("held"));
    w.cycle(0);
    assert_eq!(w.state("held"), WorkloadState::Pending);
    assert_eq!(forecast(&w, 0, &expect(&[], 50)), est(&[]));
}

#[test]
fn priority_goes_first_whatever_the_arrival() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("low").prio(0).at(1));
    w.add(eight("high").prio(10).at(2));
    w.cycle(2);
    let x = expect(&[("run", 100)], 50);
    assert_eq!(forecast(&w, 2, &x), est(&[("high", 100), ("low", 150)]));
}

#[test]
fn behind_a_workload_of_unknown_end_there_is_no_estimate() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("next").at(1));
    w.cycle(1);
    assert_eq!(forecast(&w, 1, &expect(&[], 50)), est(&[]));
}

#[test]
fn an_overdue_end_means_any_moment() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("next").at(1));
    w.cycle(1);
    // Expected to end at 40, still running at 90: it ends right after the
    // cycle at 90, and next starts in the cycle after it, at 90 too.
    assert_eq!(forecast(&w, 90, &expect(&[("run", 40)], 50)), est(&[("next", 90)]));
}

#[test]
fn what_fits_now_is_estimated_now() {
    let mut w = gpu_queue();
    w.add(eight("fresh"));
    assert_eq!(forecast(&w, 7, &expect(&[], 50)), est(&[("fresh", 7)]));
    // The forecast admitted it in a copy only.
    assert_eq!(w.state("fresh"), WorkloadState::Pending);
}

#[test]
fn the_horizon_cuts_off_later_admissions() {
    let mut w = gpu_queue();
    w.add(eight("run"));
    w.cycle(0);
    w.add(eight("p1").at(1));
    w.add(eight("p2").at(2));
    w.cycle(2);
    let x = expect(&[("run", 100)], 50);
    let settings = ForecastSettings {
        horizon_ms: 120,
        max_cycles: 1000,
    };
    // p1 at 100 is within 2 + 120; p2 at 150 is not.
    assert_eq!(forecast_with(&w, 2, &x, settings), est(&[("p1", 100)]));
    let one_cycle = ForecastSettings {
        horizon_ms: 1_000_000,
        max_cycles: 1,
    };
    assert_eq!(forecast_with(&w, 2, &x, one_cycle), est(&[]));
}

#[test]
fn a_backoff_delays_the_estimate_until_it_ends() {
    let mut w = gpu_queue();
    let spec = eight("back").build();
    w.e.add_workload_backing_off(spec, 300).unwrap();
    w.cycle(0);
    assert_eq!(forecast(&w, 0, &expect(&[], 50)), est(&[("back", 300)]));
}

#[test]
fn a_preemptor_starts_when_its_victims_are_gone() {
    let mut w = preempting_queue();
    w.add(eight("low").prio(0));
    w.cycle(0);
    w.add(eight("high").prio(10).at(1));
    let c = w.cycle(1);
    assert_eq!(victims(&c), vec!["low"]);
    assert_eq!(w.state("high"), WorkloadState::Preempting);
    // The victim's pods are expected gone at 31.
    assert_eq!(forecast(&w, 2, &expect(&[("low", 31)], 50)), est(&[("high", 31)]));
    // A fresh preemption in the copy is instant: the preemptor starts now,
    // and the victim (not pending at the call) is not estimated.
    let mut w = preempting_queue();
    w.add(eight("low").prio(0));
    w.cycle(0);
    w.add(eight("high").prio(10).at(1));
    assert_eq!(forecast(&w, 1, &expect(&[("low", 1000)], 50)), est(&[("high", 1)]));
}

#[test]
fn a_workload_preempted_in_the_forecast_keeps_its_first_start() {
    let mut w = preempting_queue();
    w.add(eight("run").prio(20));
    w.cycle(0);
    w.add(eight("low").prio(0).at(1));
    w.cycle(1);
    // High-priority work back from a backoff at 150 preempts low, which
    // was admitted at 100 and is admitted again when high ends at 150 + 50.
    w.e.add_workload_backing_off(eight("high").prio(10).at(2).build(), 150)
        .unwrap();
    w.cycle(2);
    let x = expect(&[("run", 100)], 50).runtime("low", 100);
    assert_eq!(forecast(&w, 2, &x), est(&[("low", 100), ("high", 150)]));
}

#[test]
fn borrowing_follows_the_cohort() {
    // b lends its 8 GPUs; a's second workload borrows them at once, the
    // third waits for a's first to end.
    let mut w = World::new(vec![
        cq("a").cohort("c").quota("a100", vec![q(GPU, 8)]),
        cq("b").cohort("c").quota("a100", vec![q(GPU, 8)]),
    ]);
    w.add(eight("a1"));
    w.cycle(0);
    w.add(eight("a2").at(1));
    w.add(eight("a3").at(2));
    let x = expect(&[("a1", 70)], 100);
    assert_eq!(forecast(&w, 3, &x), est(&[("a2", 3), ("a3", 70)]));
}

#[test]
fn the_forecast_leaves_the_engine_as_it_was() {
    let mut w = preempting_queue();
    w.add(eight("run").prio(5));
    w.cycle(0);
    w.add(eight("p").prio(0).at(1));
    w.add(eight("hi").prio(10).at(2));
    let before = w.e.clone();
    let out = forecast(&w, 3, &expect(&[("run", 50)], 20));
    // hi preempts run at once; run (requeued, priority 5) goes again
    // before p when hi ends at 23, and p follows at 43.
    assert_eq!(out, est(&[("hi", 3), ("p", 43)]));
    w.e.check_consistency().unwrap();
    assert_eq!(w.state("run"), WorkloadState::Admitted);
    assert_eq!(w.state("hi"), WorkloadState::Pending);
    assert_eq!(w.e.admission("run"), before.admission("run"));
    // The next real cycle decides as if no forecast had run.
    let mut twin = before;
    assert_eq!(w.cycle(3), twin.schedule(3));
}

/// One ClusterQueue of 8 GPUs whose workloads preempt lower priority.
fn preempting_queue() -> World {
    World::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority),
    ])
}

/// Placement: one 8-GPU a100 node, a queue of 16 (quota is not the limit).
fn one_node(within: WithinClusterQueue) -> World {
    let mut w = World::placement(vec![cq("a").quota("a100", vec![q(GPU, 16)]).within(within)]);
    w.node(node("n1", "a100", 8));
    w
}

#[test]
fn with_placement_the_node_frees_when_the_running_workload_ends() {
    let mut w = one_node(WithinClusterQueue::Never);
    w.add(eight("run"));
    w.cycle(0);
    // Its pod is bound: the node's usage says so, the reservation is gone.
    w.usage("n1", &[(GPU, 8), ("pods", 1)]);
    w.bind("run", &[("n1", 1, &[(GPU, 8), ("pods", 1)])]);
    w.add(eight("next").at(5));
    assert!(w.cycle(5).admitted.is_empty());
    assert_eq!(w.state("next"), WorkloadState::Pending);
    assert_eq!(forecast(&w, 10, &expect(&[("run", 100)], 50)), est(&[("next", 100)]));
}

#[test]
fn with_placement_a_preemptor_starts_when_its_bound_victim_is_gone() {
    let mut w = one_node(WithinClusterQueue::LowerPriority);
    w.add(eight("low").prio(0));
    w.cycle(0);
    w.usage("n1", &[(GPU, 8), ("pods", 1)]);
    w.bind("low", &[("n1", 1, &[(GPU, 8), ("pods", 1)])]);
    w.add(eight("high").prio(10).at(1));
    let c = w.cycle(1);
    assert_eq!(victims(&c), vec!["low"]);
    assert_eq!(forecast(&w, 2, &expect(&[("low", 31)], 50)), est(&[("high", 31)]));
}
