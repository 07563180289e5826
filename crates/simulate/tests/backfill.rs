//! Backfill in a scenario: a ClusterQueue with `backfill: {policy:
//! Reserve}` reaches the engine, declared run times come from the trace or
//! the run's `declared_runtimes`, and the report sets the run beside the
//! same run with no queue reserving. Times are worked out in the comments.

use sluice_simulate::report::{self, Report};
use sluice_simulate::scenario;
use sluice_simulate::sim::{self, DeclaredRuntimes, SimOptions};

/// One queue `team` of 8 H100s (reserving when `reserve`): `run` holds 6
/// GPUs from 0 for 2 h (declaring it), `big` (8 GPUs, 1 h) arrives at 1 m,
/// then a 2-GPU job every 10 minutes from 2 m, each running `small` and
/// declaring nothing.
fn text(reserve: bool, small: &str) -> String {
    let backfill = if reserve { "backfill: {policy: Reserve}, " } else { "" };
    let mut jobs = String::from(
        "  - {name: run, namespace: team, queue: jobs, arrival: 0s, requests: {nvidia.com/gpu: 6}, duration: 2h, expectedRuntime: 2h}\n\
         \x20 - {name: big, class: big, namespace: team, queue: jobs, arrival: 1m, requests: {nvidia.com/gpu: 8}, duration: 1h}\n",
    );
    for i in 0..6 {
        jobs.push_str(&format!(
            "  - {{name: small-{i}, class: small, namespace: team, queue: jobs, arrival: {}m, requests: {{nvidia.com/gpu: 2}}, duration: {small}}}\n",
            2 + 10 * i
        ));
    }
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: h100}}\nspec: {{}}\n---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec: {{namespaceSelector: {{}}, {backfill}resourceGroups: [{{coveredResources: [nvidia.com/gpu], flavors: [{{name: h100, resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]}}]}}]}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
metadata: {{name: backfill}}
spec:
  jobs:
{jobs}"
    )
}

fn run(text: &str, declared: DeclaredRuntimes) -> Report {
    let s = scenario::load("backfill.yaml", text).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions {
        eviction_delay: 0,
        coalesce: 0,
        declared_runtimes: declared,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    report::build(&s.name, &opts, &result)
}

fn wait_of(r: &Report, name: &str) -> i64 {
    let w = r.workloads.iter().find(|w| w.name == format!("team/{name}")).unwrap();
    w.wait_ms.expect("admitted")
}

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;

#[test]
fn without_a_reservation_small_jobs_keep_the_big_one_waiting_until_they_all_end() {
    // small-0 takes the 2 free GPUs at 2 m; when `run` ends at 2 h the
    // smaller ones go first, and `big` waits for all of them.
    let r = run(&text(false, "3h"), DeclaredRuntimes::Trace);
    assert!(wait_of(&r, "big") > 4 * HOUR, "{}", wait_of(&r, "big"));
    assert!(r.backfill.is_none());
}

#[test]
fn with_a_reservation_the_big_one_starts_when_declared_work_ends_and_the_report_compares() {
    // `big` reserves from 2 h; the small jobs declare nothing and would not
    // fit beside it, so they wait; `big` starts at 2 h (waits 1 h 59 m).
    let r = run(&text(true, "3h"), DeclaredRuntimes::Trace);
    assert_eq!(wait_of(&r, "big"), 2 * HOUR - MIN);
    let b = r.backfill.as_ref().expect("compared");
    assert_eq!(b.reserving, ["team"]);
    let big = b.classes.iter().find(|c| c.name == "big").unwrap();
    assert_eq!(big.with_backfill.max_wait_ms, 2 * HOUR - MIN);
    assert!(big.without_backfill.max_wait_ms > 4 * HOUR);
    let table = report::table::render(&r);
    assert!(table.contains("Backfill (team reserve;"), "{table}");
}

#[test]
fn short_work_that_declares_its_run_time_backfills_without_delaying_the_reservation() {
    // 30-minute small jobs: declaring nothing (the trace), they wait behind
    // `big`'s reservation; declaring their run time exactly, each ends
    // before 2 h (the last arrives at 52 m) and goes at once, 2 GPUs at a
    // time: small-0 at 2 m, small-1 when it ends at 32 m, and so on.
    let trace = run(&text(true, "30m"), DeclaredRuntimes::Trace);
    assert!(wait_of(&trace, "small-1") > 0);
    let exact = run(&text(true, "30m"), DeclaredRuntimes::Exact);
    assert_eq!(wait_of(&exact, "small-0"), 0);
    assert_eq!(wait_of(&exact, "small-1"), 20 * MIN);
    // `big` starts at 2 h either way.
    assert_eq!(wait_of(&trace, "big"), 2 * HOUR - MIN);
    assert_eq!(wait_of(&exact, "big"), 2 * HOUR - MIN);
}

/// The shipped scenario: the reservation starts the 32-GPU run hours
/// earlier than the same run without one (docs/backfill.md quotes the
/// figures).
#[test]
fn the_shipped_big_gang_scenario_starts_the_pretrain_far_sooner_with_its_reservation() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/simulate/big-gang.yaml");
    let r = run(&std::fs::read_to_string(path).unwrap(), DeclaredRuntimes::Trace);
    let b = r.backfill.expect("the queue reserves");
    let pretrain = b.classes.iter().find(|c| c.name == "pretrain").unwrap();
    let (with, without) = (pretrain.with_backfill, pretrain.without_backfill);
    assert!(with.max_wait_ms * 4 < without.max_wait_ms, "{with:?} {without:?}");
    assert!(
        with.max_slowdown < 1.5 && without.max_slowdown > 2.0,
        "{with:?} {without:?}"
    );
}
