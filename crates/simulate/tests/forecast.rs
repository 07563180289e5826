//! Start-time estimates in the simulator (`--forecast`): the estimate made
//! at each submission against the actual first admission, on small
//! scenarios worked out by hand, and on the shipped gpu-teams scenario.

use sluice_simulate::report::forecast::{ForecastReport, WorkloadEstimate};
use sluice_simulate::report::{self, Report};
use sluice_simulate::scenario;
use sluice_simulate::sim::{self, Scenario, SimOptions, SimResult};

const MIN: i64 = 60_000;

/// One queue of 1 H100 without preemption, and `jobs` in its Trace.
fn one_gpu(jobs: &[&str]) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: h100}}
spec: {{}}
---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 1000
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 1}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
spec:
  evictionDelay: 0s
  jobs:
{}",
        jobs.iter()
            .map(|j| format!("  - {{namespace: team, queue: jobs, requests: {{nvidia.com/gpu: 1}}, {j}}}\n"))
            .collect::<String>()
    )
}

fn forecast_opts() -> SimOptions {
    SimOptions {
        eviction_delay: 0,
        forecast: true,
        // Each event decided at its own instant (the controller gathers
        // 50 ms of events into a cycle): the times below stay round.
        coalesce: 0,
        ..SimOptions::default()
    }
}

fn run_scenario(s: &Scenario, opts: &SimOptions) -> (Report, SimResult) {
    let result = sim::run(s, opts, &mut |_| {}).expect("simulation runs");
    (report::build(&s.name, opts, &result), result)
}

fn simulate(text: &str) -> ForecastReport {
    let s = scenario::load("forecast.yaml", text).unwrap_or_else(|e| panic!("scenario does not load: {e:#?}"));
    run_scenario(&s, &forecast_opts())
        .0
        .forecast
        .expect("a forecast section")
}

fn estimate<'a>(f: &'a ForecastReport, name: &str) -> &'a WorkloadEstimate {
    f.workloads
        .iter()
        .find(|w| w.name == format!("team/{name}"))
        .unwrap_or_else(|| panic!("{name} was not forecast"))
}

/// a runs 0–10m; b (at 1m) and c (at 2m) wait behind it, each saying how
/// long it runs. At b's arrival a ends at 10m: b at 10m. At c's, b is
/// expected to run 10m–30m: c at 30m. Both exact; a was admitted at once.
#[test]
fn exact_expected_run_times_give_exact_estimates() {
    let f = simulate(&one_gpu(&[
        "name: a, arrival: 0s, duration: 10m, expectedRuntime: 10m",
        "name: b, arrival: 1m, duration: 20m, expectedRuntime: 20m",
        "name: c, arrival: 2m, duration: 5m, expectedRuntime: 5m",
    ]));
    assert_eq!((f.forecast, f.admitted_on_arrival), (2, 1));
    assert_eq!(estimate(&f, "b").estimate_ms, Some(10 * MIN));
    assert_eq!(estimate(&f, "c").estimate_ms, Some(30 * MIN));
    assert_eq!(estimate(&f, "c").admitted_ms, Some(30 * MIN));
    let a = &f.expected_run_times;
    assert_eq!((a.estimated, a.not_estimated, a.compared), (2, 0, 2));
    assert_eq!(
        (a.abs_error_p50_ms, a.abs_error_p90_ms, a.too_early, a.too_late),
        (0, 0, 0, 0)
    );
    // Waits of b (9m) and c (28m): p50 at rank 1, p90 at rank 2.
    assert_eq!((a.wait_p50_ms, a.wait_p90_ms), (9 * MIN, 28 * MIN));
    assert_eq!(f.exact_run_times.abs_error_p90_ms, 0);
}

/// b (at 1m) is told 10m, when a ends. At 5m `urgent`, of higher
/// priority, arrives and is told 10m too; it goes first at 10m, and b
/// follows at 20m: b's estimate was 10 minutes too early. Exact run times
/// do not help: the forecast cannot know what arrives later.
#[test]
fn a_later_higher_priority_arrival_makes_the_estimate_too_early() {
    let f = simulate(&one_gpu(&[
        "name: a, arrival: 0s, duration: 10m, expectedRuntime: 10m",
        "name: b, arrival: 1m, duration: 10m, expectedRuntime: 10m",
        "name: urgent, arrival: 5m, duration: 10m, expectedRuntime: 10m, priorityClass: high",
    ]));
    let b = estimate(&f, "b");
    assert_eq!((b.estimate_ms, b.admitted_ms), (Some(10 * MIN), Some(20 * MIN)));
    let u = estimate(&f, "urgent");
    assert_eq!((u.estimate_ms, u.admitted_ms), (Some(10 * MIN), Some(10 * MIN)));
    for a in [&f.expected_run_times, &f.exact_run_times] {
        // Signed errors sorted [-10m, 0]: p10 and p50 at rank 1, p90 at 2.
        assert_eq!(
            (a.error_p10_ms, a.error_p50_ms, a.error_p90_ms),
            (-10 * MIN, -10 * MIN, 0)
        );
        assert_eq!((a.too_early, a.too_late, a.abs_error_max_ms), (1, 0, 10 * MIN));
    }
}

/// Without `expectedRuntime`: at b's arrival nothing has finished, so a is
/// expected to run the default hour (b: 60m, actually 30m, 30 minutes too
/// late). Once a finished in 30m, the queue's median is 30m: at c's
/// arrival (35m) b, admitted at 30m, is expected to end at 60m — exact.
/// With exact run times both are exact.
#[test]
fn without_expected_run_times_the_queue_median_then_the_default_is_used() {
    let f = simulate(&one_gpu(&[
        "name: a, arrival: 0s, duration: 30m",
        "name: b, arrival: 1m, duration: 30m",
        "name: c, arrival: 35m, duration: 5m",
    ]));
    let b = estimate(&f, "b");
    assert_eq!(
        (b.estimate_ms, b.exact_estimate_ms, b.admitted_ms),
        (Some(60 * MIN), Some(30 * MIN), Some(30 * MIN))
    );
    let c = estimate(&f, "c");
    assert_eq!((c.estimate_ms, c.admitted_ms), (Some(60 * MIN), Some(60 * MIN)));
    assert_eq!(f.expected_run_times.too_late, 1);
    assert_eq!(f.exact_run_times.abs_error_max_ms, 0);
}

/// Behind a workload that can never be admitted there is nothing to
/// estimate within the horizon; the workload itself is not estimated either.
#[test]
fn a_workload_that_never_fits_is_not_estimated() {
    let f = simulate(&one_gpu(&[
        "name: a, arrival: 0s, duration: 10m",
        "name: huge, arrival: 1m, duration: 10m, pods: 2",
    ]));
    let a = &f.expected_run_times;
    assert_eq!((f.forecast, a.estimated, a.not_estimated, a.compared), (1, 0, 1, 0));
}

/// `expectedRuntime` on a job, on gang members (the gang takes the
/// longest), and on a generator (every job, not jittered).
#[test]
fn expected_run_times_are_read_from_jobs_gangs_and_generators() {
    let text = one_gpu(&[
        "name: solo, arrival: 0s, duration: 1h, expectedRuntime: 50m",
        "name: plain, arrival: 0s, duration: 1h",
        "name: left, gang: pair, arrival: 0s, duration: 1h, expectedRuntime: 40m",
        "name: right, gang: pair, arrival: 0s, duration: 1h, expectedRuntime: 70m",
    ]) + "  generators:
  - {class: gen, count: 2, interval: 1m, duration: 5m, expectedRuntime: 4m, queues: [team/jobs],
     requests: {nvidia.com/gpu: 1}, jitter: {seed: 1, duration: 0.5}}
";
    let s = scenario::load("forecast.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"));
    let expected = |name: &str| {
        let w = s
            .workloads
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        w.expected_runtime
    };
    assert_eq!(expected("team/solo"), Some(50 * MIN));
    assert_eq!(expected("team/plain"), None);
    assert_eq!(expected("team/pair"), Some(70 * MIN));
    assert_eq!(expected("team/gen-jobs-0"), Some(4 * MIN));
    assert_eq!(expected("team/gen-jobs-1"), Some(4 * MIN));
}

#[test]
fn forecasts_are_off_by_default() {
    let s = scenario::load("forecast.yaml", &one_gpu(&["name: a, arrival: 0s, duration: 10m"])).unwrap();
    let (r, result) = run_scenario(&s, &SimOptions::default());
    assert!(r.forecast.is_none() && result.forecast.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("forecast").is_none());
}

/// On gpu-teams with exact run times, an estimate is wrong only because of
/// what arrives later: cut the trace after a forecast workload's arrival
/// and the exact estimate is its actual admission (evictions take no time,
/// as in the forecast's copy; writes are unthrottled).
#[test]
fn on_gpu_teams_exact_estimates_are_exact_without_later_arrivals() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/simulate/gpu-teams.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let full = scenario::load("gpu-teams.yaml", &text).unwrap();
    let (r, _) = run_scenario(&full, &forecast_opts());
    let f = r.forecast.expect("a forecast section");
    assert!(f.forecast > 20, "gpu-teams queues work: {}", f.forecast);
    for w in &f.workloads {
        let cut = Scenario {
            name: full.name.clone(),
            flavors: full.flavors.clone(),
            cluster_queues: full.cluster_queues.clone(),
            local_queues: full.local_queues.clone(),
            workloads: full
                .workloads
                .iter()
                .filter(|x| x.arrival <= w.arrival_ms)
                .cloned()
                .collect(),
            eviction_delay: full.eviction_delay,
            idle_reclaim: full.idle_reclaim.clone(),
            notice: full.notice.clone(),
            idle_interval: full.idle_interval,
            nodes: full.nodes.clone(),
            cohorts: full.cohorts.clone(),
            fair_sharing: full.fair_sharing,
            budgets: full.budgets.clone(),
            usage_half_life: full.usage_half_life,
            transformations: full.transformations.clone(),
        };
        let (r, _) = run_scenario(&cut, &forecast_opts());
        let f = r.forecast.expect("a forecast section");
        let e = f
            .workloads
            .iter()
            .find(|x| x.name == w.name)
            .expect("forecast in the cut trace too");
        assert_eq!(e.exact_estimate_ms, e.admitted_ms, "{}", w.name);
        assert_eq!(
            e.exact_estimate_ms, w.exact_estimate_ms,
            "{}: same state at its arrival",
            w.name
        );
    }
}
