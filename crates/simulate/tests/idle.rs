//! Idle-GPU reclaim in the simulator: utilisation profiles, the checks, the
//! actions and the report's `idle` section. Times are worked out by hand in
//! the comments; checks run every minute, evictions take no time.

use sluice_api::v1alpha1::IdleAction;
use sluice_simulate::report::{self, Report};
use sluice_simulate::sim::{self, RunEnd, SimOptions, SimResult};
use sluice_simulate::{scenario, trace::Diagnostic};

const MIN: i64 = 60_000;

/// One queue of 2 H100s with `idle_reclaim` (a flow mapping, or empty for
/// none) and `extra` spec lines; `jobs` in its Trace.
fn scenario_text(idle_reclaim: &str, extra: &str, jobs: &[String]) -> String {
    let policy = if idle_reclaim.is_empty() {
        String::new()
    } else {
        format!("  idleReclaim: {idle_reclaim}\n")
    };
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: h100}}
spec: {{}}
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec:
  namespaceSelector: {{}}
{policy}{extra}  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 2}}
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
        jobs.concat()
    )
}

/// `nb`: both GPUs from 0 for 4h; 90 % for 10 minutes, then 0 %.
fn notebook(profile: &str) -> String {
    format!(
        "  - {{name: nb, namespace: team, queue: jobs, arrival: 0s, requests: {{nvidia.com/gpu: 2}}, duration: 4h, utilization: {profile}}}\n"
    )
}

const IDLE_AFTER_10M: &str = "[{percent: 90, for: 10m}, {percent: 0}]";

/// `batch`: both GPUs for 1h, always busy (no profile).
fn batch(arrival: &str) -> String {
    format!(
        "  - {{name: batch, namespace: team, queue: jobs, arrival: {arrival}, requests: {{nvidia.com/gpu: 2}}, duration: 1h}}\n"
    )
}

fn simulate(text: &str, opts: &SimOptions) -> (Report, SimResult) {
    let s = scenario::load("idle.yaml", text).unwrap_or_else(|e| panic!("scenario does not load: {e:#?}"));
    let result = sim::run(&s, opts, &mut |_| {}).expect("simulation runs");
    (report::build(&s.name, opts, &result), result)
}

/// Unthrottled, evictions take no time.
fn opts() -> SimOptions {
    SimOptions {
        eviction_delay: 0,
        // Each event decided at its own instant (the controller gathers
        // 50 ms of events into a cycle): the times below stay round.
        coalesce: 0,
        ..SimOptions::default()
    }
}

fn run(text: &str) -> (Report, SimResult) {
    simulate(text, &opts())
}

/// (action, time) of every idle event.
fn actions(r: &SimResult) -> Vec<(IdleAction, i64)> {
    r.idle
        .as_ref()
        .expect("an idle outcome")
        .events
        .iter()
        .map(|e| (e.action, e.at))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Evict, `for: 10m`, no grace. nb is idle from 10m, so judged idle from
/// 20m on, but nobody waits until batch arrives at 60m. The check at 60m
/// comes before that arrival; at 61m batch waits (NoFit): nb is evicted
/// with the idle reason, batch admitted at 61m (wait 1m) and done at 121m,
/// when nb runs again from zero, alone, to 361m: no second reclaim.
///
/// Reclaimed: 2 GPUs × (0 + 4h − 61m) = 2 × 179m. Idle: 2 GPUs × (51m of
/// the first run + 230m of the second). Without reclaim batch waits until
/// nb ends at 240m: 180m; saved 179m.
#[test]
fn evict_acts_only_while_someone_waits_and_frees_the_gpus_for_them() {
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 0s}",
        "",
        &[notebook(IDLE_AFTER_10M), batch("60m")],
    );
    let (r, result) = run(&text);
    assert_eq!(actions(&result), [(IdleAction::Evict, 61 * MIN)]);
    let event = &result.idle.as_ref().unwrap().events[0];
    assert_eq!((event.workload, event.waiter), (0, Some(1)), "nb, for batch");
    assert_eq!(event.mean_percent, 0.0);
    let nb = &result.records[0];
    assert_eq!(nb.runs.len(), 2);
    assert_eq!(
        (nb.runs[0].end, nb.runs[0].ended_at),
        (RunEnd::IdleReclaimed, Some(61 * MIN))
    );
    assert_eq!(nb.runs[1].started_at, Some(121 * MIN));
    assert_eq!(nb.finished_at(), Some(361 * MIN));
    assert_eq!(
        (nb.preempted, nb.evicted),
        (0, 0),
        "not a preemption, not a stop policy"
    );
    assert_eq!(result.records[1].first_start(), Some(61 * MIN));

    let idle = r.idle.as_ref().expect("an idle section");
    assert_eq!((idle.evictions, idle.warnings, idle.deactivations), (1, 0, 0));
    assert!(
        close(idle.gpu_hours_reclaimed, 2.0 * 179.0 / 60.0),
        "{}",
        idle.gpu_hours_reclaimed
    );
    assert!(
        close(idle.gpu_hours_idle, 2.0 * (51.0 + 230.0) / 60.0),
        "{}",
        idle.gpu_hours_idle
    );
    assert_eq!(idle.cluster_queues.len(), 1);
    assert_eq!(idle.cluster_queues[0].policy.as_ref().unwrap().action, "Evict");
    let saved = idle
        .wait_saved
        .as_ref()
        .expect("compared with a run without idleReclaim");
    assert_eq!(saved.workloads, 1, "batch only: nb was reclaimed");
    assert_eq!(
        (saved.mean_ms_without_reclaim, saved.mean_ms_with_reclaim),
        (180.0 * MIN as f64, MIN as f64)
    );
    assert_eq!(saved.mean_saved_ms, 179.0 * MIN as f64);
    assert_eq!(saved.p90_saved_ms, 179 * MIN);
    // Idle reclaims are not GPU-hours lost to preemption.
    assert_eq!(r.totals.gpu_hours_lost, 0.0);

    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["idle"]["events"][0]["workload"], "team/nb");
    assert_eq!(json["idle"]["events"][0]["waiter"], "team/batch");
    assert_eq!(json["idle"]["waitSaved"]["meanSavedMs"], 179.0 * MIN as f64);
    let table = report::table::render(&r);
    assert!(
        table.contains("Evict <10% for 10m00s after 0s, when contended"),
        "{table}"
    );
    assert!(table.contains("(2h59m saved)"), "{table}");
    let html = report::html::render(&r, &result);
    assert!(html.contains("<h2>Idle GPUs</h2>") && html.contains("team/batch"));
}

/// `onlyWhenContended: false`: nb alone is evicted as soon as it is idle
/// for 10m (20m), requeued, admitted again at once, idle again 20m later…
/// With a requeue limit of 2, the third idle eviction deactivates it: it
/// never runs again and does not finish.
#[test]
fn without_contention_idle_work_is_evicted_even_with_nobody_waiting() {
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 0s, onlyWhenContended: false}",
        "",
        &[notebook(IDLE_AFTER_10M)],
    );
    let opts = SimOptions {
        requeue_limit: 2,
        ..opts()
    };
    let (r, result) = simulate(&text, &opts);
    assert_eq!(
        actions(&result),
        [
            (IdleAction::Evict, 20 * MIN),
            (IdleAction::Evict, 40 * MIN),
            (IdleAction::Deactivate, 60 * MIN)
        ]
    );
    let events = &result.idle.as_ref().unwrap().events;
    assert!(events.iter().all(|e| e.waiter.is_none()));
    assert_eq!(
        events.iter().map(|e| e.over_requeue_limit).collect::<Vec<_>>(),
        [false, false, true]
    );
    let nb = &result.records[0];
    assert!(nb.deactivated);
    assert_eq!(nb.runs.len(), 3);
    assert!(nb.runs.iter().all(|run| run.end == RunEnd::IdleReclaimed));
    assert_eq!(nb.finished_at(), None);
    assert_eq!(r.makespan_ms, 60 * MIN, "nothing is left after the deactivation");
    assert_eq!((r.totals.finished, r.totals.admitted), (0, 1));
    let idle = r.idle.as_ref().unwrap();
    assert_eq!((idle.evictions, idle.deactivations), (2, 1));
    // Every reclaim cut a 4h run short after 20m: 3 × 2 GPUs × 220m.
    assert!(close(idle.gpu_hours_reclaimed, 3.0 * 2.0 * 220.0 / 60.0));
}

/// With the default requeue limit the same loop ends too.
#[test]
fn an_idle_loop_always_ends() {
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 0s, onlyWhenContended: false}",
        "",
        &[notebook(IDLE_AFTER_10M)],
    );
    let (r, result) = run(&text);
    let limit = SimOptions::default().requeue_limit as usize;
    assert_eq!(actions(&result).len(), limit + 1);
    assert_eq!(r.idle.unwrap().deactivations, 1);
}

/// `Deactivate`: batch waits from 1m; nb is idle at 20m, evicted and gone
/// for good; batch runs 20m–80m.
#[test]
fn deactivate_evicts_and_never_requeues() {
    let text = scenario_text(
        "{action: Deactivate, for: 10m, gracePeriod: 0s}",
        "",
        &[notebook(IDLE_AFTER_10M), batch("1m")],
    );
    let (r, result) = run(&text);
    assert_eq!(actions(&result), [(IdleAction::Deactivate, 20 * MIN)]);
    let nb = &result.records[0];
    assert!(nb.deactivated);
    assert_eq!(nb.runs.len(), 1);
    assert_eq!(result.records[1].first_start(), Some(20 * MIN));
    assert_eq!(r.makespan_ms, 80 * MIN);
    let idle = r.idle.as_ref().unwrap();
    assert_eq!((idle.evictions, idle.deactivations), (0, 1));
    assert!(close(idle.gpu_hours_reclaimed, 2.0 * 220.0 / 60.0));
    // nb is admitted but neither finished nor pending.
    assert_eq!(
        (r.totals.admitted, r.totals.finished, r.totals.never_admitted),
        (2, 1, 0)
    );
    assert!(r.pending_at_end.is_empty());
}

/// `Warn` changes nothing: the schedule is the one without a policy. nb
/// is warned once at 61m though it stays idle (and contended) for hours.
#[test]
fn warn_evicts_nothing_and_warns_once_per_idle_stretch() {
    let jobs = [notebook(IDLE_AFTER_10M), batch("60m")];
    let (r, result) = run(&scenario_text("{action: Warn, for: 10m, gracePeriod: 0s}", "", &jobs));
    let (_, plain) = run(&scenario_text("", "", &jobs));
    assert_eq!(actions(&result), [(IdleAction::Warn, 61 * MIN)]);
    for (a, b) in result.records.iter().zip(&plain.records) {
        assert_eq!(a.latest_start(), b.latest_start());
        assert_eq!(a.finished_at(), b.finished_at());
    }
    assert_eq!(result.records[1].first_start(), Some(240 * MIN));
    let idle = r.idle.as_ref().unwrap();
    assert_eq!((idle.warnings, idle.evictions), (1, 0));
    assert_eq!(idle.gpu_hours_reclaimed, 0.0);
    assert_eq!(idle.wait_saved.as_ref().unwrap().mean_saved_ms, 0.0);

    // Idle 10–30m, busy 30–40m, idle again: judged idle at 20m and from
    // 50m; busy in between, so warned twice (batch waits from 1m).
    let jobs = [
        notebook("[{percent: 90, for: 10m}, {percent: 0, for: 20m}, {percent: 90, for: 10m}, {percent: 0}]"),
        batch("1m"),
    ];
    let (_, result) = run(&scenario_text("{action: Warn, for: 10m, gracePeriod: 0s}", "", &jobs));
    assert_eq!(
        actions(&result),
        [(IdleAction::Warn, 20 * MIN), (IdleAction::Warn, 50 * MIN)]
    );
}

/// Grace 45m: batch waits from 1m and nb is idle from 10m, but the 10m
/// window may not start before 45m: evicted at 55m.
#[test]
fn the_grace_period_is_respected() {
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 45m}",
        "",
        &[notebook(IDLE_AFTER_10M), batch("1m")],
    );
    let (_, result) = run(&text);
    assert_eq!(actions(&result)[0], (IdleAction::Evict, 55 * MIN));
    assert_eq!(result.records[1].first_start(), Some(55 * MIN));
}

/// minRuntimeSeconds 3600: idle and contended from 20m, evicted at 60m.
#[test]
fn the_minimum_runtime_is_respected() {
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 0s}",
        "  minRuntimeSeconds: 3600\n",
        &[notebook(IDLE_AFTER_10M), batch("1m")],
    );
    let (_, result) = run(&text);
    assert_eq!(actions(&result)[0], (IdleAction::Evict, 60 * MIN));
    assert_eq!(result.records[1].first_start(), Some(60 * MIN));
}

/// A profile never below the threshold (the threshold itself is busy), or
/// no profile at all, is never reclaimed even under the harshest policy.
#[test]
fn work_that_is_never_idle_is_never_reclaimed() {
    for profile in ["[{percent: 90, for: 10m}, {percent: 10}]", "[{percent: 50}]"] {
        let text = scenario_text(
            "{action: Evict, for: 10m, gracePeriod: 0s, onlyWhenContended: false}",
            "",
            &[notebook(profile), batch("1m")],
        );
        let (r, result) = run(&text);
        assert!(actions(&result).is_empty(), "{profile}");
        assert_eq!(result.records[0].finished_at(), Some(240 * MIN), "{profile}");
        assert_eq!(r.idle.as_ref().unwrap().gpu_hours_idle, 0.0, "{profile}");
    }
    let text = scenario_text(
        "{action: Evict, for: 10m, gracePeriod: 0s, onlyWhenContended: false}",
        "",
        &[
            notebook(IDLE_AFTER_10M).replace(", utilization: [{percent: 90, for: 10m}, {percent: 0}]", ""),
            batch("1m"),
        ],
    );
    let (_, result) = run(&text);
    assert!(actions(&result).is_empty());
}

/// Profiles without any policy: idle GPU-hours below 10 %, nothing done,
/// no second run (nothing to compare).
#[test]
fn profiles_alone_report_idle_hours_only() {
    let (r, result) = run(&scenario_text("", "", &[notebook(IDLE_AFTER_10M)]));
    assert!(actions(&result).is_empty());
    let idle = r.idle.as_ref().expect("a profile makes the section");
    assert!(close(idle.gpu_hours_idle, 2.0 * 230.0 / 60.0));
    assert!(idle.wait_saved.is_none());
    assert_eq!(idle.cluster_queues[0].policy.as_ref().map(|p| p.action), None);
}

/// Scenarios without profiles or policies have no idle section at all.
#[test]
fn no_idle_section_without_profiles_or_policies() {
    let (r, result) = run(&scenario_text("", "", &[batch("0s")]));
    assert!(result.idle.is_none() && r.idle.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("idle").is_none());
    assert!(!report::table::render(&r).contains("Idle GPUs"));
}

/// gpu-teams has a policy (on team-b-research, as examples/ has) but no
/// profiles: nothing is idle, nothing changes, nothing is saved.
#[test]
fn a_policy_without_profiles_changes_nothing() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/simulate/gpu-teams.yaml"
    ))
    .unwrap();
    let (r, result) = run(&text);
    let idle = r.idle.as_ref().expect("a policy makes the section");
    assert_eq!(idle.cluster_queues.len(), 1);
    assert_eq!(idle.cluster_queues[0].name, "team-b-research");
    assert!(idle.events.is_empty());
    assert_eq!((idle.gpu_hours_idle, idle.gpu_hours_reclaimed), (0.0, 0.0));
    let saved = idle.wait_saved.as_ref().unwrap();
    assert_eq!((saved.mean_saved_ms, saved.p90_saved_ms), (0.0, 0));
    assert_eq!(saved.workloads, r.totals.admitted);
    // The same schedule as with the policy removed.
    let policy = "  idleReclaim:\n    utilizationBelow: 10\n    for: 30m\n    gracePeriod: 15m\n    action: Evict\n    onlyWhenContended: true\n";
    assert!(text.contains(policy));
    let (plain, _) = run(&text.replace(policy, ""));
    assert!(plain.idle.is_none());
    assert_eq!(r.workloads.len(), plain.workloads.len());
    for (a, b) in r.workloads.iter().zip(&plain.workloads) {
        assert_eq!((a.wait_ms, a.completion_ms), (b.wait_ms, b.completion_ms), "{}", a.name);
    }
    assert!(result.idle.as_ref().unwrap().events.is_empty());
}

/// The shipped scenario shows what it promises: team-a (Evict) reclaims
/// GPUs from idle notebooks, each time for a waiting job, and everyone
/// else waits less; team-b (Warn) only warns.
#[test]
fn the_idle_notebooks_scenario_reclaims_gpus_and_saves_waiting() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/simulate/idle-notebooks.yaml"
    ))
    .unwrap();
    let s = scenario::load("idle-notebooks.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions {
        eviction_delay: s.eviction_delay.unwrap(),
        api_qps: Some(50.0),
        api_burst: 100,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).unwrap();
    let r = report::build(&s.name, &opts, &result);
    let idle = r.idle.as_ref().unwrap();
    assert!(idle.gpu_hours_reclaimed > 0.0);
    assert!(idle.gpu_hours_idle > 0.0);
    let saved = idle.wait_saved.as_ref().unwrap();
    assert!(saved.mean_saved_ms > 0.0 && saved.p90_saved_ms > 0, "{saved:?}");
    let queue = |name: &str| idle.cluster_queues.iter().find(|q| q.name == name).unwrap();
    assert!(queue("team-a").evictions > 0);
    assert_eq!(queue("team-a").warnings, 0);
    assert!(queue("team-b").warnings > 0);
    assert_eq!(
        (queue("team-b").evictions, queue("team-b").gpu_hours_reclaimed),
        (0, 0.0)
    );
    let events = &result.idle.as_ref().unwrap().events;
    assert!(events.iter().all(|e| e.waiter.is_some()), "only when contended");
    // Only notebooks are acted on, never before 15m grace + 30m window
    // after their admission.
    for e in events {
        assert_eq!(result.workloads[e.workload].class, "notebook");
        let run = result.records[e.workload]
            .runs
            .iter()
            .find(|run| run.admitted_at <= e.at && run.ended_at.is_none_or(|end| e.at <= end))
            .expect("acted on while admitted");
        assert!(e.at >= run.admitted_at + 45 * MIN, "{e:?}");
        if e.action == IdleAction::Evict {
            assert_eq!((run.end, run.ended_at), (RunEnd::IdleReclaimed, Some(e.at)));
        }
    }
    // Everything still finishes.
    assert_eq!(r.totals.finished, r.totals.workloads);
    // The same figures run after run.
    let again = sim::run(&s, &opts, &mut |_| {}).unwrap();
    let r2 = report::build(&s.name, &opts, &again);
    assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&r2).unwrap());
}

fn load_errors(text: &str) -> Vec<String> {
    match scenario::load("bad.yaml", text) {
        Ok(_) => panic!("scenario should not load"),
        Err(e) => e.iter().map(Diagnostic::to_string).collect(),
    }
}

#[test]
fn bad_profiles_are_errors_naming_the_field() {
    let errors = load_errors(&scenario_text(
        "",
        "",
        &[notebook("[{percent: 140}, {percent: 0, for: 5m}]")],
    ));
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors[0].contains("spec.jobs[0].utilization[0].percent: percent must be from 0 to 100, got 140"));
    assert!(errors[1].contains("spec.jobs[0].utilization[0].for: every segment but the last needs `for`"));
    assert!(errors[2].contains("spec.jobs[0].utilization[1].for: the last segment lasts until the run ends"));
    let errors = load_errors(&scenario_text("", "", &[notebook("[]")]));
    assert!(errors[0].contains("spec.jobs[0].utilization: a utilization profile needs at least one segment"));
    let errors = load_errors(&scenario_text(
        "",
        "",
        &[notebook("[{percent: 5, for: 1h, when: now}]")],
    ));
    assert!(
        errors[0].contains("spec.jobs[0].utilization[0].when: unknown field `when`"),
        "{errors:?}"
    );
    let errors = load_errors(&scenario_text(
        "",
        "",
        &[notebook("[{percent: 5, for: 1 hour}, {percent: 0}]")],
    ));
    assert!(
        errors[0].contains("spec.jobs[0].utilization[0].for: invalid duration"),
        "{errors:?}"
    );
    let errors = load_errors(&scenario_text("", "", &[notebook("[{percent: lots}]")]));
    assert!(
        errors[0].contains("spec.jobs[0].utilization[0].percent: "),
        "{errors:?}"
    );
    // A position: `bad.yaml:LINE:COLUMN:` of the value.
    let text = scenario_text("", "", &[notebook("[{percent: 101}]")]);
    let line = text.lines().position(|l| l.contains("percent: 101")).unwrap() + 1;
    let column = text.lines().nth(line - 1).unwrap().find("101").unwrap() + 1;
    assert!(
        load_errors(&text)[0].starts_with(&format!(
            "bad.yaml:{line}:{column}: spec.jobs[0].utilization[0].percent"
        )),
        "{:?}",
        load_errors(&text)
    );
}

#[test]
fn the_idle_interval_is_read_and_checked() {
    let text =
        scenario_text("", "", &[notebook(IDLE_AFTER_10M)]).replace("  evictionDelay: 0s\n", "  idleInterval: 5m\n");
    assert_eq!(scenario::load("i.yaml", &text).unwrap().idle_interval, Some(5 * MIN));
    let errors = load_errors(&text.replace("idleInterval: 5m", "idleInterval: 100ms"));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("spec.idleInterval: the idle-check interval must be at least 1s"),
        "{errors:?}"
    );
}

/// Checks every 5 minutes fall on multiples of 5m: with Evict, no grace
/// and batch waiting from 1m, nb is judged idle first at 20m (a multiple).
/// With checks every 7m, the first check with a 10m idle window is 21m.
#[test]
fn checks_fall_on_multiples_of_the_interval() {
    let jobs = [notebook(IDLE_AFTER_10M), batch("1m")];
    let text = scenario_text("{action: Evict, for: 10m, gracePeriod: 0s}", "", &jobs);
    for (every, first) in [(5, 20), (7, 21)] {
        let opts = SimOptions {
            idle_interval: Some(every * MIN),
            ..opts()
        };
        let (r, result) = simulate(&text, &opts);
        assert_eq!(actions(&result)[0], (IdleAction::Evict, first * MIN), "every {every}m");
        assert_eq!(r.idle.unwrap().interval_ms, every * MIN);
    }
}

/// A generator's profile is every generated job's; gang members share one.
#[test]
fn generators_and_gangs_carry_profiles() {
    let text = scenario_text("", "", &[]).replace(
        "  jobs:\n",
        "  generators:\n  - {class: nb, count: 3, interval: 1m, duration: 1h, requests: {nvidia.com/gpu: 1}, namespace: team, queue: jobs, utilization: [{percent: 80, for: 5m}, {percent: 1}]}\n  jobs:\n  - {name: a, gang: g, namespace: team, queue: jobs, arrival: 0s, requests: {nvidia.com/gpu: 1}, duration: 1h, utilization: [{percent: 3}]}\n  - {name: b, gang: g, namespace: team, queue: jobs, arrival: 0s, requests: {nvidia.com/gpu: 1}, duration: 1h, utilization: [{percent: 3}]}\n",
    );
    let s = scenario::load("g.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"));
    let generated: Vec<_> = s.workloads.iter().filter(|w| w.class == "nb").collect();
    assert_eq!(generated.len(), 3);
    for w in &generated {
        let u = w.utilization.as_ref().expect("the generator's profile");
        assert_eq!((u.at(0), u.at(5 * MIN)), (80, 1));
    }
    let gang = s.workloads.iter().find(|w| w.name == "team/g").unwrap();
    assert_eq!(gang.utilization.as_ref().unwrap().at(0), 3);
    let b = "{name: b, gang: g, namespace: team, queue: jobs, arrival: 0s, requests: {nvidia.com/gpu: 1}, duration: 1h, utilization: [{percent: ";
    let errors = load_errors(&text.replace(&format!("{b}3}}]}}"), &format!("{b}4}}]}}")));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("spec.jobs[1].utilization: gang \"g\" members must all give the same utilization"));
}
