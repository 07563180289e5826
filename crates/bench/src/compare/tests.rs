use std::collections::BTreeMap;
use std::sync::Arc;

use super::figures::{ClassWait, Row, Unit, ratio, rows, sim_figures};
use super::*;
use crate::report::{self, Extras};
use crate::scrape::WriteCounts;
use crate::track::{Observation, Tracker};
use sluice_simulate::scenario::{LoadOptions, load_with};
use sluice_simulate::sim::{Run, RunEnd, WorkloadRecord};

fn run(started: Option<i64>, ended: i64, end: RunEnd) -> Run {
    Run {
        admitted_at: started.unwrap_or(ended),
        started_at: started,
        ended_at: Some(ended),
        end,
        ran_on_ms: 0,
        kept_ms: 0,
        borrowing: false,
        flavors: Vec::new(),
    }
}

/// A simulator record with these runs (the one place that builds one).
fn record(runs: Vec<Run>) -> WorkloadRecord {
    WorkloadRecord {
        cluster_queue: Arc::from("cq"),
        runs,
        preempted: 0,
        evicted: 0,
        rejected: None,
        last_pending: None,
        deactivated: false,
        removed: false,
    }
}

fn class(name: &str, admitted: u64, mean_ms: f64, p95_ms: i64) -> ClassWait {
    ClassWait {
        name: name.into(),
        admitted,
        mean_ms,
        p95_ms,
    }
}

#[test]
fn simulated_figures_from_records() {
    // w0 small, arrives 0: written at 100, finishes 1 100. Waits 100.
    // w1 small, arrives 0: written at 200, preempted at 300; written again
    //    at 700, finishes 1 700. Waits 700 (to its latest admission); two
    //    admissions, one eviction.
    // w2 large, arrives 500: preempted at 520 before its write went
    //    through (both writes are made in order: a watch sees it admitted,
    //    then evicted); written again at 900, finishes 2 500. Waits 400.
    let workloads = [("small", 0), ("small", 0), ("large", 500)];
    let records = vec![
        record(vec![run(Some(100), 1_100, RunEnd::Finished)]),
        record(vec![
            run(Some(200), 300, RunEnd::Preempted),
            run(Some(700), 1_700, RunEnd::Finished),
        ]),
        record(vec![
            run(None, 520, RunEnd::Preempted),
            run(Some(900), 2_500, RunEnd::Finished),
        ]),
    ];
    let f = sim_figures(workloads, &records, 3_000, 6);
    // 5 admissions over the last finish, 2.5 s: 2 /s; 6 writes ÷ 5 = 1.2.
    // small: 100 and 700, mean 400, p95 at rank ⌈1.9⌉ = 2: 700.
    assert_eq!(
        f,
        Figures {
            complete: true,
            wall_ms: 2_500,
            admissions: 5,
            admissions_per_second: 2.0,
            classes: vec![class("large", 1, 400.0, 400), class("small", 2, 400.0, 700)],
            writes_per_admission: Some(1.2),
            evictions: 2,
        }
    );

    // One more small workload that never ran: incomplete, the wall is the
    // simulation's end (3 s: 5 / 3 per second); its class's waits as before.
    let mut records = records;
    records.push(record(Vec::new()));
    let workloads = [("small", 0), ("small", 0), ("large", 500), ("small", 0)];
    let f = sim_figures(workloads, &records, 3_000, 0);
    assert!(!f.complete);
    assert_eq!(f.wall_ms, 3_000);
    assert!((f.admissions_per_second - 5.0 / 3.0).abs() < 1e-12);
    assert_eq!(f.classes[1], class("small", 2, 400.0, 700));
    assert_eq!(f.writes_per_admission, Some(0.0));
    // Nothing admitted: no writes per admission, no rate.
    let none = sim_figures([("small", 0)], &[record(Vec::new())], 0, 0);
    assert_eq!((none.writes_per_admission, none.admissions_per_second), (None, 0.0));
    assert_eq!(none.classes, vec![class("small", 0, 0.0, 0)]);
}

const SAVED: &str = r#"{
  "format": 1, "scenario": "hand", "scale": 0.5, "runId": "sb-1",
  "complete": true, "timedOut": false, "stalled": null, "wallMs": 2000,
  "workloads": {"planned": 3, "created": 3, "admitted": 3, "finished": 3, "admissions": 5, "evictions": 2},
  "classes": [
    {"name": "large", "workloads": 1, "timeToAdmission": {"count": 1, "meanMs": 300.0, "p50Ms": 300, "p95Ms": 300, "maxMs": 300}},
    {"name": "small", "workloads": 2, "timeToAdmission": {"count": 2, "meanMs": 500.0, "p50Ms": 200, "p95Ms": 800, "maxMs": 800},
     "timeToAdmissionFromSchedule": {"count": 2, "meanMs": 650.0, "p50Ms": 300, "p95Ms": 1000, "maxMs": 1000}}
  ],
  "admissionRate": {"meanPerSecond": 2.5, "peakPerSecond": 2.5, "windowSeconds": 2.0},
  "apiWrites": {"total": 9.0, "perKind": {}, "perAdmission": 1.8, "perLane": {"state": 6.0}, "writesPerAdmission": 1.2}
}"#;

#[test]
fn the_real_side_from_a_saved_report() {
    let real = Real::from_json(SAVED).expect("a report");
    assert_eq!((real.scenario.as_str(), real.scale), ("hand", 0.5));
    // 5 admissions in 2 s: 2.5 /s (the report's mean, recomputed).
    assert_eq!(
        real.figures,
        Figures {
            complete: true,
            wall_ms: 2_000,
            admissions: 5,
            admissions_per_second: 2.5,
            // small: from the schedule (the simulator's origin); large:
            // a report without it, from creation.
            classes: vec![class("large", 1, 300.0, 300), class("small", 2, 650.0, 1_000)],
            writes_per_admission: Some(1.2),
            evictions: 2,
        }
    );
    assert!(real.check_matches("hand", 0.5).is_ok());
    let err = real.check_matches("hand", 1.0).unwrap_err().to_string();
    assert!(err.contains("scale 0.5, not of \"hand\" at scale 1"), "{err}");
    // No --controller-metrics: writes unknown.
    let no_writes = SAVED.replace(r#""writesPerAdmission": 1.2"#, r#""writesPerAdmission": null"#);
    assert_eq!(
        Real::from_json(&no_writes)
            .expect("a report")
            .figures
            .writes_per_admission,
        None
    );
    let newer = SAVED.replace(r#""format": 1"#, r#""format": 2"#);
    assert!(matches!(
        Real::from_json(&newer),
        Err(CompareError::Format { found: 2 })
    ));
    assert!(matches!(
        Real::from_json("{\"format\": 1}"),
        Err(CompareError::NotAReport(_))
    ));
}

#[test]
fn the_real_side_of_a_run_just_made_reads_its_report() {
    // A bench run's own report (not hand-written JSON): its field names are
    // the ones the saved-report reader expects. One workload of the plan
    // created at 0 and admitted at 250; the run ends at 1 000.
    let src = crate::plan::scenario_text("kueue-baseline").expect("built in");
    let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale: 0.01 }).expect("loads");
    let plan = crate::plan::build("sb-cmp", &s, &m, 0.01).expect("plans");
    let mut t = Tracker::new(plan.quotas.clone(), plan.workloads.iter().map(|w| (w.key(), w.runtime)));
    t.created(0, 0);
    let admitted = Observation {
        admitted: true,
        ..Observation::default()
    };
    t.observe(0, 250, admitted);
    let extras = Extras {
        writes: Some(WriteCounts {
            total: 3.0,
            per_kind: BTreeMap::new(),
            per_lane: BTreeMap::from([("state".into(), 2.0)]),
        }),
        ..Extras::default()
    };
    let report = report::build(&plan, &t.close(1_000), extras);
    let real = Real::from_report(&report).expect("readable");
    assert_eq!(real.scenario, s.name);
    let f = &real.figures;
    assert_eq!((f.complete, f.wall_ms, f.admissions), (false, 1_000, 1));
    assert_eq!((f.admissions_per_second, f.writes_per_admission), (1.0, Some(2.0)));
    let first = f
        .classes
        .iter()
        .find(|c| c.name == plan.workloads[0].class)
        .expect("its class");
    assert_eq!(*first, class(&plan.workloads[0].class, 1, 250.0, 250));
}

#[test]
fn the_simulator_gets_the_workloads_the_run_creates() {
    // The same load at the same scale: the plan's Workloads and the
    // simulated ones are the same, in the same order.
    let asked = Asked::new(
        <Flags as clap::Parser>::parse_from(["x", "--scenario", "kueue-baseline", "--scale", "0.01"]).run,
        OutputArgs {
            run_id: Some("sb-cmp".into()),
            keep: false,
            json: false,
            quiet: true,
        },
    )
    .expect("flags");
    let (plan, scenario) = load_plan(&asked).expect("loads").expect("plans");
    assert!(!plan.workloads.is_empty());
    let planned: Vec<(&str, i64, i64, i32)> = (plan.workloads.iter())
        .map(|w| (w.class.as_str(), w.arrival, w.runtime, w.priority))
        .collect();
    let simulated: Vec<(&str, i64, i64, i32)> = (scenario.workloads.iter())
        .map(|w| (w.class.as_str(), w.arrival, w.duration, w.priority))
        .collect();
    assert_eq!(planned, simulated);
}

#[derive(clap::Parser)]
struct Flags {
    #[command(flatten)]
    run: crate::RunFlags,
}

#[test]
fn deep_queue_simulated_at_the_write_rate() {
    // deep-queue at 0.01: 10 workloads at once, quota for all, 1 s each.
    // The cycle gathers the arrivals for 50 ms; at 50 writes/s with a
    // burst of 100 all 10 are then written at once, and are seen finished
    // 1 s and the 50 ms finish lag later: one write per admission, nothing
    // evicted.
    let src = crate::plan::scenario_text("deep-queue").expect("built in");
    let (mut s, _) = load_with(&src.file, &src.text, &LoadOptions { scale: 0.01 }).expect("loads");
    let n = s.workloads.len() as u64;
    let runtime = s.workloads[0].duration;
    let lags = Lags {
        finish_ms: 50,
        api_latency_ms: 0,
    };
    let f = simulate(&mut s, Switch::Off, (50.0, 100), lags, true).expect("simulates");
    assert_eq!(s.fair_sharing, FairSharing::Off);
    assert!(f.complete, "{f:?}");
    assert_eq!((f.admissions, f.evictions, f.writes_per_admission), (n, 0, Some(1.0)));
    assert_eq!(f.wall_ms, 50 + runtime + 50, "{f:?}");
    // Without a limit the same; on, fair sharing is the controller's default.
    simulate(&mut s, Switch::On, (0.0, 1), lags, true).expect("simulates");
    assert_eq!(s.fair_sharing, FairSharing::default());
}

fn figures(wall_ms: i64, admissions: u64, classes: Vec<ClassWait>, writes: Option<f64>, evictions: u64) -> Figures {
    Figures {
        complete: true,
        wall_ms,
        admissions,
        admissions_per_second: figures::per_second(admissions, wall_ms),
        classes,
        writes_per_admission: writes,
        evictions,
    }
}

#[test]
fn rows_and_ratios_are_simulated_over_real() {
    assert_eq!(ratio(Some(4.0), Some(5.0)), Some(1.25));
    assert_eq!(ratio(Some(0.0), Some(5.0)), None);
    assert_eq!(ratio(None, Some(5.0)), None);
    // Real: 400 admissions in 10 s (40 /s); simulated 400 in 8 s (50 /s).
    // "medium" only real, "tiny" only simulated (admitted none really).
    let real = figures(
        10_000,
        400,
        vec![
            class("medium", 3, 900.0, 1_500),
            class("small", 10, 2_000.0, 4_000),
            class("tiny", 0, 0.0, 0),
        ],
        Some(1.25),
        4,
    );
    let sim = figures(
        8_000,
        400,
        vec![class("small", 10, 1_500.0, 5_000), class("tiny", 2, 10.0, 10)],
        None,
        0,
    );
    let rows = rows(&real, &sim);
    let find = |name: &str| rows.iter().find(|r| r.figure == name).cloned().expect(name);
    let r = |figure: &str, unit, real: Option<f64>, simulated: Option<f64>, ratio: Option<f64>| Row {
        figure: figure.into(),
        unit,
        real,
        simulated,
        ratio,
    };
    assert_eq!(
        find("wall time"),
        r("wall time", Unit::Ms, Some(10_000.0), Some(8_000.0), Some(0.8))
    );
    let rate = "admissions/s (mean over wall)";
    assert_eq!(find(rate), r(rate, Unit::PerSecond, Some(40.0), Some(50.0), Some(1.25)));
    let (mean, p95) = ("time to admission small, mean", "time to admission small, p95");
    assert_eq!(find(mean), r(mean, Unit::Ms, Some(2_000.0), Some(1_500.0), Some(0.75)));
    assert_eq!(find(p95), r(p95, Unit::Ms, Some(4_000.0), Some(5_000.0), Some(1.25)));
    let medium = find("time to admission medium, mean");
    assert_eq!((medium.real, medium.simulated, medium.ratio), (Some(900.0), None, None));
    let tiny = find("time to admission tiny, p95");
    assert_eq!((tiny.real, tiny.simulated, tiny.ratio), (None, Some(10.0), None));
    let w = find("writes per admission");
    assert_eq!((w.real, w.simulated, w.ratio), (Some(1.25), None, None));
    let e = find("evictions");
    assert_eq!((e.real, e.simulated, e.ratio), (Some(4.0), Some(0.0), Some(0.0)));
    // In order: wall, admissions, rate, medium ×2, small ×2, tiny ×2, writes, evictions.
    let order: Vec<&str> = rows.iter().map(|r| r.figure.as_str()).collect();
    assert_eq!(
        order[..4],
        ["wall time", "admissions", rate, "time to admission medium, mean"]
    );
    assert_eq!(order[9..], ["writes per admission", "evictions"]);
}

#[test]
fn the_comparison_as_a_table_and_json() {
    let real = figures(10_000, 400, vec![class("small", 10, 2_000.0, 4_000)], Some(1.25), 4);
    let mut sim = figures(8_000, 400, vec![class("small", 10, 1_500.0, 5_000)], Some(1.0), 0);
    sim.complete = false;
    let setting = Setting {
        scenario: "deep".into(),
        scale: 0.1,
        kube_qps: 50.0,
        kube_burst: 100,
        fair_sharing: false,
        finish_lag_ms: 50,
        api_latency_ms: 0,
        real_source: "report r.json".into(),
    };
    let c = Comparison::new(setting, real, sim);
    let text = render(&c);
    // Columns: the figure names up to 29 wide ("admissions/s (mean over
    // wall)"), real 6 ("10.0 s"), simulated 9 (its header), ratio 5; two
    // spaces between; values right-aligned.
    let sp = |n: usize| " ".repeat(n);
    let want = format!(
        "sluice bench compare: deep × 0.1, --kube-qps 50 --kube-burst 100, fair sharing off\n\
         real: report r.json; simulated: sluice simulate's engine in virtual time, eviction delay 0, finish lag 50 ms, write latency 0 ms\n\n\
         figure{}real  simulated  ratio\n{}\n\
         wall time{}10.0 s{}8.0 s  0.800\n",
        sp(23 + 2 + 2),
        "─".repeat(29 + 6 + 9 + 5 + 6),
        sp(20 + 2),
        sp(2 + 4)
    );
    assert!(text.starts_with(&want), "{text}");
    let line = |l: String| assert!(text.contains(&format!("\n{l}\n")), "{l:?} in\n{text}");
    line(format!(
        "admissions/s (mean over wall){}40.0{}50.0  1.250",
        sp(2 + 2),
        sp(2 + 5)
    ));
    line(format!(
        "writes per admission{}1.250{}1.000  0.800",
        sp(9 + 2 + 1),
        sp(2 + 4)
    ));
    line(format!("evictions{}4{}0  0.000", sp(20 + 2 + 5), sp(2 + 8)));
    assert!(
        text.ends_with("warning: the simulated side did not finish every workload: its figures are of a partial run\n")
    );
    let json = serde_json::to_value(&c).expect("serializes");
    assert_eq!(json["realSource"], "report r.json");
    assert_eq!(json["kubeQps"], 50.0);
    assert_eq!(json["fairSharing"], false);
    assert_eq!(
        (json["finishLagMs"].as_i64(), json["apiLatencyMs"].as_i64()),
        (Some(50), Some(0))
    );
    assert_eq!(json["real"]["wallMs"], 10_000);
    assert_eq!(json["simulated"]["classes"][0]["p95Ms"], 5_000);
    assert_eq!(json["rows"][0]["figure"], "wall time");
    assert_eq!(json["rows"][0]["unit"], "ms");
    assert_eq!(json["rows"][0]["ratio"], 0.8);
    assert_eq!(json["simulated"]["writesPerAdmission"], 1.0);
}

#[test]
fn values_in_their_units() {
    use super::render::{ratio as show_ratio, value};
    assert_eq!(value(Unit::Ms, Some(1_234.0)), "1.2 s");
    assert_eq!(value(Unit::PerSecond, Some(49.96)), "50.0");
    assert_eq!(value(Unit::Count, Some(15_034.0)), "15034");
    assert_eq!(value(Unit::WritesPerAdmission, Some(1.0104)), "1.010");
    assert_eq!(value(Unit::Ms, None), "—");
    assert_eq!(
        (show_ratio(Some(0.96449)), show_ratio(None)),
        ("0.964".into(), "—".into())
    );
}

/// A saved report of deep-queue at 0.01 (10 workloads), by hand: 2 s of
/// wall, 10 admissions, waits of 500 ms on average, 900 at p95.
const DEEP_SAVED: &str = r#"{
  "format": 1, "scenario": "deep-queue", "scale": 0.01, "complete": true, "wallMs": 2000,
  "workloads": {"admissions": 10, "evictions": 0},
  "classes": [{"name": "deep", "timeToAdmission": {"count": 10, "meanMs": 500.0, "p95Ms": 900}}],
  "apiWrites": {"writesPerAdmission": 1.0}
}"#;

#[derive(clap::Parser)]
struct CompareCli {
    #[command(flatten)]
    args: CompareArgs,
}

#[tokio::test]
async fn compare_against_a_saved_report_needs_no_cluster() {
    let dir = std::env::temp_dir().join(format!("sluice-bench-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let (saved, out) = (dir.join("real.json"), dir.join("compare.json"));
    std::fs::write(&saved, DEEP_SAVED).expect("written");
    let argv = |scale: &str| {
        let args = [
            "compare",
            "--scenario",
            "deep-queue",
            "--scale",
            scale,
            "--fair-sharing",
            "off",
            "--kube-qps",
            "50",
            "--kube-burst",
            "100",
            "--quiet",
        ];
        let files = [
            "--real-report",
            saved.to_str().expect("a path"),
            "--json",
            out.to_str().expect("a path"),
        ];
        <CompareCli as clap::Parser>::parse_from(args.into_iter().chain(files)).args
    };
    let code = command(argv("0.01")).await.expect("compares");
    assert_eq!(code, ExitCode::SUCCESS);
    // Simulated: the 10 decided by the cycle at 50 ms and written at once
    // (burst 100), seen finished 1 s and the 50 ms finish lag later: wall
    // 1.1 s against 2 s (0.55), 10 / 1.1 s against 5 /s (1.818), a wait of
    // 50 ms (0.1 × the real 500 ms), one write per admission as measured
    // (1).
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("JSON");
    let ratio = |figure: &str| {
        let rows = json["rows"].as_array().expect("rows");
        rows.iter().find(|r| r["figure"] == figure).expect(figure)["ratio"].clone()
    };
    assert_eq!(ratio("wall time"), 0.55);
    let per_second = ratio("admissions/s (mean over wall)").as_f64().expect("a ratio");
    assert!((per_second - 10.0 / 1.1 / 5.0).abs() < 1e-9, "{per_second}");
    assert_eq!(ratio("time to admission deep, mean"), 0.1);
    assert_eq!(ratio("writes per admission"), 1.0);
    assert_eq!(ratio("evictions"), serde_json::Value::Null);
    assert_eq!(json["fairSharing"], false);
    assert_eq!(json["realSource"], format!("report {}", saved.display()));
    // Another scale than the report's: refused, naming both.
    let err = command(argv("0.02")).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("at scale 0.01, not of \"deep-queue\" at scale 0.02"),
        "{err:#}"
    );
    std::fs::remove_dir_all(&dir).expect("removed");
}
