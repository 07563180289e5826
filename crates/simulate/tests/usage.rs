//! Usage over time in the simulator: the shipped scenarios where usage
//! history changes who waits, and where a budget warns, deprioritizes and
//! stops a queue, each run as `sluice simulate` runs it.

use sluice_simulate::report::{self, Report};
use sluice_simulate::scenario;
use sluice_simulate::sim::{self, SimOptions};

const HOUR: i64 = 3_600_000;

fn shipped(file: &str, half_life: Option<i64>) -> Report {
    run_shipped(file, half_life).0
}

/// The report and the run's HTML report.
fn run_shipped(file: &str, half_life: Option<i64>) -> (Report, String) {
    let path = format!("{}/../../examples/simulate/{file}", env!("CARGO_MANIFEST_DIR"));
    let s = scenario::load(file, &std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions {
        usage_half_life: half_life,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    let r = report::build(&s.name, &opts, &result);
    let html = report::html::render(&r, &result);
    (r, html)
}

/// Mean wait of a workload class, ms.
fn mean_wait(r: &Report, class: &str) -> i64 {
    let waits: Vec<i64> = (r.workloads.iter())
        .filter(|w| w.class == class)
        .map(|w| w.wait_ms.expect("admitted"))
        .collect();
    waits.iter().sum::<i64>() / waits.len() as i64
}

/// First admission of a class, ms.
fn first_start(r: &Report, class: &str) -> i64 {
    (r.workloads.iter())
        .filter(|w| w.class == class)
        .map(|w| w.arrival_ms + w.wait_ms.expect("admitted"))
        .min()
        .unwrap()
}

#[test]
fn with_usage_history_the_team_that_used_the_pool_waits_behind_the_one_that_did_not() {
    // The Trace's usageHalfLife: 12h.
    let with = shipped("usage-history.yaml", None);
    // Off: shares count current borrowing only.
    let without = shipped("usage-history.yaml", Some(0));
    assert!(without.usage.is_none(), "no half-life, no budget: nothing accounted");
    let (a, b) = (mean_wait(&without, "sweep-a"), mean_wait(&without, "sweep-b"));
    assert!((a - b).abs() <= HOUR, "without history the teams wait alike: {a} {b}");
    let (a, b) = (mean_wait(&with, "sweep-a"), mean_wait(&with, "sweep-b"));
    assert!(a > b + HOUR, "team-a, which used the pool, waits longer: {a} {b}");
    assert!(first_start(&with, "sweep-b") <= first_start(&with, "sweep-a"));
    let usage = with.usage.expect("accounted");
    assert_eq!(usage.half_life_ms, Some(12 * HOUR));
    let team_a = usage.cluster_queues.iter().find(|q| q.name == "team-a").unwrap();
    // 4 × 4 GPUs × 10 h, then 12 × 4 GPUs × 2 h.
    assert_eq!(team_a.gpu_hours, 160.0 + 96.0);
}

#[test]
fn a_budget_warns_then_deprioritizes_then_stops_and_each_day_starts_again() {
    let r = shipped("budgets.yaml", None);
    let usage = r.usage.expect("team-a has a budget");
    let team_a = usage.cluster_queues.iter().find(|q| q.name == "team-a").unwrap();
    let actions: Vec<Option<&str>> = team_a.actions.iter().map(|a| a.action.as_deref()).collect();
    assert_eq!(
        actions[..4],
        [Some("Warn"), Some("Deprioritize"), Some("Stop"), None],
        "{actions:?}"
    );
    let stop = team_a.actions[2].at_ms;
    let midnight = team_a.actions[3].at_ms;
    assert_eq!(midnight, 24 * HOUR, "the next calendar day starts within budget");
    // While stopped, team-a admits nothing; team-b's jobs run.
    let admitted_between = |class: &str| {
        (r.workloads.iter())
            .filter(|w| w.class == class)
            .filter(|w| {
                w.wait_to_first_admission_ms
                    .is_some_and(|x| (stop..midnight).contains(&(w.arrival_ms + x)))
            })
            .count()
    };
    assert_eq!(admitted_between("team-a-jobs"), 0);
    assert!(admitted_between("team-b-jobs") > 0);
    // What team-a used on the first day is its budget, within what a
    // workload admitted just before the stop adds.
    let at = |t: i64| {
        (team_a.series.iter())
            .take_while(|p| p.at_ms <= t)
            .last()
            .unwrap()
            .gpu_hours
    };
    assert!(
        at(24 * HOUR) >= 150.0 && at(24 * HOUR) < 150.0 + 16.0,
        "{}",
        at(24 * HOUR)
    );
}

#[test]
fn the_html_report_has_the_usage_section_only_when_usage_is_accounted() {
    let (r, html) = run_shipped("budgets.yaml", None);
    assert!(html.contains("<h2>GPU-hours by queue</h2>"), "no usage section");
    let team_a = (r.usage.as_ref().unwrap().cluster_queues.iter())
        .find(|q| q.name == "team-a")
        .unwrap();
    let first = report::usage::action_text(&team_a.actions[0]);
    assert!(html.contains(&first), "{first} not in the HTML report");
    let (_, html) = run_shipped("usage-history.yaml", Some(0));
    assert!(!html.contains("GPU-hours by queue"));
}
