use super::*;
use crate::plan::PlannedWorkload;
use crate::track::{Holding, Limit, Observation, QueueQuota, QuotaModel, Slot, Tracker};

#[test]
fn usage_is_the_integral_over_nominal_times_elapsed() {
    // 13 CPU·s used of 20 CPU over 4 s: 13 / (20 × 4) = 0.1625.
    // In milli-CPU·ms: 13 000 000 / (20 000 × 4 000) = 0.1625.
    assert_eq!(usage_fraction(13_000_000.0, 20_000, 4_000), Some(0.1625));
    // Borrowing: 30 CPU for 2 s in a 20-CPU queue = 60 / 40 = 1.5.
    assert_eq!(usage_fraction(60_000_000.0, 20_000, 2_000), Some(1.5));
    assert_eq!(usage_fraction(1.0, 0, 4_000), None);
    assert_eq!(usage_fraction(1.0, 20_000, 0), None);
}

#[test]
fn admission_rates_mean_and_peak() {
    // 30 admissions over a 20 s run: mean 30 / 20 = 1.5 /s. 25 of them
    // within 1 s (at 5 000..5 960 ms, every 40 ms): the best 10-s window
    // [5 000, 15 000) holds those 25 and the 3 at 12 000, 13 000, 14 000
    // = 28 → 2.8 /s; the 2 at 19 000 and 19 500 fall outside.
    let mut a: Vec<Ms> = (0..25).map(|i| 5_000 + 40 * i).collect();
    a.extend([12_000, 13_000, 14_000, 19_000, 19_500]);
    a.sort_unstable();
    let r = admission_rate(&a, 20_000, 10_000);
    assert_eq!(r.mean_per_second, 1.5);
    assert!((r.peak_per_second - 2.8).abs() < 1e-9, "{}", r.peak_per_second);
    assert_eq!(r.window_seconds, 10.0);
    // A run shorter than the window: the window is the run (4 in 2 s → 2 /s
    // both ways), so the peak is never below the mean.
    let short = admission_rate(&[0, 500, 1_000, 1_999], 2_000, 10_000);
    assert_eq!(
        (short.mean_per_second, short.peak_per_second, short.window_seconds),
        (2.0, 2.0, 2.0)
    );
    let none = admission_rate(&[], 0, 10_000);
    assert_eq!((none.mean_per_second, none.peak_per_second), (0.0, 0.0));
}

#[test]
fn floor_figures_from_latencies() {
    // 4 patches of 2, 4, 6 and 20 ms in 100 ms, one more failed:
    // 4 / 0.1 s = 40 patches/s; mean (2 + 4 + 6 + 20) / 4 = 8 ms;
    // p50 at rank ⌈2⌉ = 4 ms; p95 at rank ⌈3.8⌉ = 4 → 20 ms.
    let f = floor_figures("r", (50.0, 100, 1), vec![6_000, 2_000, 20_000, 4_000], 1, 100.0);
    assert_eq!((f.patches, f.failed), (5, 1));
    assert_eq!(f.patches_per_second, 40.0);
    // Burst 100 > 4 patches: no sustained rate to go by.
    assert_eq!(floor_time_ms(&f, 1_000), None);
    // 2 000 patches (none failed) in 38 s with burst 100: 1 900 in 38 s
    // = 50 /s after the burst; 15 000 writes need 100 at once and 14 900
    // at 50 /s = 298 s.
    let mut big = f.clone();
    (big.patches, big.failed, big.elapsed_ms) = (2_000, 0, 38_000.0);
    assert!((floor_time_ms(&big, 15_000).unwrap() - 298_000.0).abs() < 1e-6);
    assert_eq!(floor_time_ms(&big, 50), Some(0.0), "within the burst");
    // Without a limit: all at the measured rate (2 000 in 4 s).
    (big.kube_qps, big.elapsed_ms) = (0.0, 4_000.0);
    assert!((floor_time_ms(&big, 15_000).unwrap() - 30_000.0).abs() < 1e-6);
    assert_eq!(
        f.latency,
        Latency {
            mean_ms: 8.0,
            p50_ms: 4.0,
            p95_ms: 20.0,
            max_ms: 20.0
        }
    );
    assert!(render_floor(&f).contains("40.0 patches/s"));
}

#[test]
fn many_queues_are_shown_per_cohort() {
    // The large-scale shape: 10 cohorts × 100 queues of 20 CPU. Nothing
    // admitted over 1 s: every queue at 0 %, all 1 000 in the JSON, the
    // table one row per cohort (100 × 20 = 2 000 CPU nominal each).
    use sluice_simulate::scenario::{LoadOptions, load_with};
    let src = crate::plan::scenario_text("kueue-large-scale").expect("built in");
    let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale: 0.01 }).expect("loads");
    let plan = crate::plan::build("sb-ls", &s, &m, 0.01).expect("plans");
    // 35 → round(0.35) = 0 → at least 1; likewise 11 and 4: 3 per queue.
    assert_eq!(plan.workloads.len(), 3_000);
    let t = Tracker::new(plan.quotas.clone(), plan.workloads.iter().map(|w| (w.key(), w.runtime)));
    let r = build(&plan, &t.close(1_000), Extras::default());
    assert!(!r.complete);
    assert_eq!(r.cluster_queues.len(), 1_000);
    assert_eq!(r.total_usage[0].nominal, 20_000.0);
    assert_eq!(r.total_usage[0].usage, Some(0.0));
    let text = render(&r);
    assert!(text.contains("INCOMPLETE: 0 of 3000 workloads finished"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("100 queues")).collect();
    assert_eq!(rows.len(), 10, "{text}");
    assert!(rows[0].contains("cohort-0") && rows[0].contains("2000"), "{}", rows[0]);
}

#[test]
fn a_preempted_workload_counts_until_the_admission_it_finished_in() {
    // Kueue's recorder: created at 0, admitted at 100, preempted at 200
    // (released at 250), admitted again at 400, finished at 1 400: time
    // to admission 400 ms (Kueue's), 100 ms to the first admission.
    let slot: Slot = ("r-rf".into(), "cpu".into());
    let limits = BTreeMap::from([(slot.clone(), Limit::default())]);
    let quotas = QuotaModel::new(BTreeMap::from([(
        "r-cq".to_string(),
        QueueQuota { cohort: None, limits },
    )]));
    let plan = Plan {
        run_id: "r".into(),
        scenario: "hand".into(),
        scale: 1.0,
        namespaces: Vec::new(),
        flavors: Vec::new(),
        cluster_queues: Vec::new(),
        local_queues: Vec::new(),
        workloads: vec![PlannedWorkload {
            namespace: "r-ns".into(),
            name: "w".into(),
            class: "small".into(),
            queue: "lq".into(),
            priority: 0,
            arrival: 0,
            runtime: 1_000,
            pod_sets: Vec::new(),
        }],
        quotas: quotas.clone(),
    };
    let mut t = Tracker::new(quotas, [("r-ns/w".to_string(), 1_000)]);
    let admitted = Observation {
        admitted: true,
        ..Observation::default()
    };
    t.created(0, 0);
    t.observe(0, 100, admitted.clone());
    t.observe(
        0,
        200,
        Observation {
            evicted: true,
            ..admitted.clone()
        },
    );
    t.observe(
        0,
        250,
        Observation {
            evicted: true,
            ..Observation::default()
        },
    );
    t.observe(0, 400, admitted.clone());
    t.observe(
        0,
        1_400,
        Observation {
            finished: true,
            ..admitted
        },
    );
    let r = build(&plan, &t.close(1_400), Extras::default());
    let c = &r.classes[0];
    assert_eq!((c.evictions, r.workloads.admissions), (1, 2));
    assert_eq!((c.time_to_admission.mean_ms, c.time_to_admission.max_ms), (400.0, 400));
    assert_eq!(c.time_to_first_admission.mean_ms, 100.0);
    assert!(render(&r).contains("mean to 1st"));
}

/// One queue `r-cq` (cohort `r-co`, 10 CPU of flavor `r-rf`) and three
/// workloads of two classes, observed by hand.
#[test]
fn a_run_report_from_observations() {
    let slot: Slot = ("r-rf".into(), "cpu".into());
    let quotas = QuotaModel::new(BTreeMap::from([(
        "r-cq".to_string(),
        QueueQuota {
            cohort: Some("r-co".into()),
            limits: BTreeMap::from([(
                slot.clone(),
                Limit {
                    nominal: 10_000,
                    borrowing_limit: Some(0),
                    lending_limit: None,
                },
            )]),
        },
    )]));
    let wl = |name: &str, class: &str, arrival: Ms| PlannedWorkload {
        namespace: "r-ns".into(),
        name: name.into(),
        class: class.into(),
        queue: "lq".into(),
        priority: 0,
        arrival,
        runtime: 1_000,
        pod_sets: Vec::new(),
    };
    let plan = Plan {
        run_id: "r".into(),
        scenario: "hand".into(),
        scale: 1.0,
        namespaces: vec!["r-ns".into()],
        flavors: Vec::new(),
        cluster_queues: Vec::new(),
        local_queues: Vec::new(),
        workloads: vec![wl("a", "small", 0), wl("b", "small", 0), wl("c", "large", 100)],
        quotas: quotas.clone(),
    };
    let mut t = Tracker::new(quotas, plan.workloads.iter().map(|w| (w.key(), w.runtime)));
    let hold = |cpu: i64| Observation {
        admitted: true,
        holding: Some(Holding {
            cluster_queue: "r-cq".into(),
            usage: BTreeMap::from([(slot.clone(), cpu)]),
        }),
        ..Observation::default()
    };
    let done = Observation {
        admitted: true,
        finished: true,
        ..Observation::default()
    };
    // a: created 10 (10 ms late), admitted 110, finished 1 110, 4 CPU.
    // b: created 20, admitted 520, finished 1 520, 4 CPU.
    // c: created 150 (50 ms late), admitted 1 200, finished 2 200, 10 CPU.
    t.created(0, 10);
    t.created(1, 20);
    t.created(2, 150);
    t.observe(0, 110, hold(4_000));
    t.observe(1, 520, hold(4_000));
    t.observe(0, 1_110, done.clone());
    t.observe(2, 1_200, hold(10_000)); // 4 + 10 = 14 > 10 + 0 until b finishes
    t.observe(1, 1_520, done.clone());
    t.observe(2, 2_200, done);
    let closed = t.close(2_200);
    let floor = floor_figures("r", (50.0, 100, 1), vec![10_000; 100], 0, 2_000.0); // 50 /s
    let r = build(
        &plan,
        &closed,
        Extras {
            writes: Some(WriteCounts {
                total: 9.0,
                per_kind: BTreeMap::from([("workload_status".into(), 6.0), ("event".into(), 3.0)]),
                per_lane: BTreeMap::from([("state".into(), 3.0), ("bookkeeping".into(), 3.0)]),
            }),
            floor: Some(floor),
            cpu: crate::scrape::CpuSeconds {
                controller: Some(1.5),
                apiserver: Some(6.5),
                etcd: None,
            },
            ..Extras::default()
        },
    );
    assert!(r.complete && !r.timed_out);
    assert_eq!(r.wall_ms, 2_200);
    // CPU: 1.5 s for 3 admissions = 500 s per 1 000; etcd not measured.
    assert_eq!(r.controller_cpu_seconds_per_1000_admissions, Some(500.0));
    let json = serde_json::to_value(&r).expect("serializes");
    assert_eq!(json["controllerCpuSeconds"], 1.5);
    assert_eq!(json["controllerCpuSecondsPer1000Admissions"], 500.0);
    assert_eq!(json["apiserverCpuSeconds"], 6.5);
    assert_eq!(json["etcdCpuSeconds"], serde_json::Value::Null);
    let text = render(&r);
    let cpu = text.lines().find(|l| l.starts_with("CPU time")).expect("a CPU line");
    assert!(
        cpu.ends_with(
            "  controller 1.5 s (500.00 s per 1 000 admissions), kube-apiserver 6.5 s (user + system, over the run)"
        ),
        "{cpu}"
    );
    assert_eq!(
        r.workloads,
        Counts {
            planned: 3,
            created: 3,
            admitted: 3,
            finished: 3,
            admissions: 3,
            evictions: 0
        }
    );
    // Lag: a 10 − 0, b 20 − 0, c 150 − 100: mean (10 + 20 + 50) / 3 ≈ 26.7, max 50.
    assert!((r.creation_lag.mean_ms - 80.0 / 3.0).abs() < 1e-9);
    assert_eq!(r.creation_lag.max_ms, 50);
    // small: a 110 − 10 = 100, b 520 − 20 = 500: mean 300, p50 rank ⌈1⌉ = 100,
    // p95 rank ⌈1.9⌉ = 2 → 500. large: c 1 200 − 150 = 1 050.
    let small = &r.classes[1];
    assert_eq!(small.name, "small");
    let s = &small.time_to_admission;
    assert_eq!((s.count, s.mean_ms, s.p50_ms, s.p95_ms), (2, 300.0, 100, 500));
    assert_eq!(r.classes[0].time_to_admission.p95_ms, 1_050);
    // Usage: 4 CPU 110–520, 8 CPU 520–1 110, 4 CPU 1 110–1 200, 14 CPU
    // 1 200–1 520, 10 CPU 1 520–2 200:
    // 4·410 + 8·590 + 4·90 + 14·320 + 10·680 = 1 640 + 4 720 + 360 + 4 480
    // + 6 800 = 18 000 CPU·ms = 18 CPU·s; ÷ (10 CPU × 2.2 s) = 0.8181…
    let u = &r.cluster_queues[0].resources[0];
    assert_eq!(r.cluster_queues[0].name, "cq");
    assert_eq!(r.cluster_queues[0].cohort.as_deref(), Some("co"));
    assert!((u.used_unit_seconds - 18.0).abs() < 1e-9, "{}", u.used_unit_seconds);
    assert!((u.usage.unwrap_or(0.0) - 18.0 / 22.0).abs() < 1e-9);
    assert_eq!(r.total_usage, r.cluster_queues[0].resources);
    // Rates: 3 admissions in 2.2 s → 1.3636… /s; peak window = the whole
    // 2.2 s run (shorter than 10 s) → the same. Floor 50 /s.
    assert!((r.admission_rate.mean_per_second - 3.0 / 2.2).abs() < 1e-9);
    let vs = r.vs_floor.as_ref().expect("with a floor");
    assert!((vs.mean - 3.0 / 2.2 / 50.0).abs() < 1e-9);
    // 100 patches, burst 100: no sustained rate, no floor time.
    assert_eq!((vs.floor_wall_ms, vs.wall), (None, None));
    // Writes: 9 for 3 admissions = 3 per admission.
    assert_eq!(r.api_writes.as_ref().and_then(|a| a.per_admission), Some(3.0));
    assert_eq!(r.api_writes.as_ref().and_then(|a| a.writes_per_admission), Some(1.0));
    // The queue held 14 > 10 CPU from 1 200 to 1 520 ms; the cohort (one
    // queue, pool 10) too.
    let v: Vec<(Scope, &str, f64, f64, Ms, Ms)> = r
        .quota_violations
        .iter()
        .map(|v| (v.scope, v.name.as_str(), v.limit, v.peak, v.from_ms, v.to_ms))
        .collect();
    assert_eq!(
        v,
        vec![
            (Scope::ClusterQueue, "cq", 10.0, 14.0, 1_200, 1_520),
            (Scope::Cohort, "co", 10.0, 14.0, 1_200, 1_520)
        ]
    );
    let text = render(&r);
    assert!(text.contains("all workloads finished"), "{text}");
    assert!(text.contains("3.00 per admission"), "{text}");
    assert!(text.contains("quota violations (observed)"), "{text}");
    let json = serde_json::to_value(&r).expect("serializes");
    assert_eq!(json["quotaViolations"][0]["scope"], "clusterQueue");
    assert_eq!(json["classes"][1]["timeToAdmission"]["p95Ms"], 500);
    // Nobody was preempted: to the first admission is the same.
    assert_eq!(
        json["classes"][1]["timeToFirstAdmission"],
        json["classes"][1]["timeToAdmission"]
    );
    assert_eq!(json["controllerPeakRss"], serde_json::Value::Null);
}

/// A run stopped by the stall rule: its status line says so, the reasons
/// come first (most common first, at most five, the rest counted), the
/// placement hint when the controller says they wait for Nodes, and the
/// JSON has it all.
#[test]
fn a_stalled_run_says_why_its_workloads_wait() {
    let quotas = QuotaModel::new(BTreeMap::new());
    let plan = Plan {
        run_id: "r".into(),
        scenario: "hand".into(),
        scale: 1.0,
        namespaces: Vec::new(),
        flavors: Vec::new(),
        cluster_queues: Vec::new(),
        local_queues: Vec::new(),
        workloads: vec![PlannedWorkload {
            namespace: "r-ns".into(),
            name: "w".into(),
            class: "small".into(),
            queue: "lq".into(),
            priority: 0,
            arrival: 0,
            runtime: 1_000,
            pod_sets: Vec::new(),
        }],
        quotas: quotas.clone(),
    };
    let tracker = || Tracker::new(quotas.clone(), [("r-ns/w".to_string(), 1_000)]);
    let never = "NeverPlaceable: no node could ever hold it, even with nothing else running: more quota or waiting does not help; r-default: pod set main: no node matches its flavor's labels, its node selector and its tolerations";
    let mut reasons = vec![
        ReasonCount {
            workloads: 3_000,
            reason: Some(never.into()),
        },
        ReasonCount {
            workloads: 14_000,
            reason: None,
        },
    ];
    let stalled = |reasons: Vec<ReasonCount>| StallReport {
        window_ms: 60_000,
        since_ms: 2_000,
        pending: 17_000,
        reasons,
    };
    let r = build(
        &plan,
        &tracker().close(62_000),
        Extras {
            stalled: Some(stalled(reasons.clone())),
            ..Extras::default()
        },
    );
    assert!(!r.complete && !r.timed_out);
    let text = render(&r);
    let want = format!(
        "sluice bench run: hand × 1 (run r): STALLED: nothing admitted or finished for 1m00s while 17000 workloads waited and none ran; 0 of 1 workloads finished\n\n\
         why they wait (the Workloads' status, as the controller wrote it):\n\
         \x20  3000  {never}\n\
         \x20 14000  no reason written by the controller yet\n\
         they wait for room on Nodes, and a bench run makes none: run the controller with --placement=quota-only (docs/benchmarks.md)\n\n\
         wall time"
    );
    assert!(text.starts_with(&want), "{text}");
    let json = serde_json::to_value(&r).expect("serializes");
    assert_eq!(json["stalled"]["windowMs"], 60_000);
    assert_eq!(json["stalled"]["pending"], 17_000);
    assert_eq!(json["stalled"]["reasons"][0]["reason"], never);
    assert_eq!(json["stalled"]["reasons"][1]["reason"], serde_json::Value::Null);

    // Quota reasons: no placement hint; past five, the rest is counted.
    reasons = (1..=7)
        .map(|i| ReasonCount {
            workloads: 10 - i,
            reason: Some(format!(
                "InsufficientQuota: insufficient quota; r-default: pod set main: needs {i} cpu"
            )),
        })
        .collect();
    let r = build(
        &plan,
        &tracker().close(62_000),
        Extras {
            stalled: Some(stalled(reasons)),
            ..Extras::default()
        },
    );
    let text = render(&r);
    assert!(text.contains("  9  InsufficientQuota"), "{text}");
    assert!(!text.contains("needs 6 cpu"), "{text}");
    assert!(
        text.contains("  … 7 more workloads, 2 other reasons (--json lists them all)\n"),
        "{text}"
    );
    assert!(!text.contains("--placement=quota-only"), "{text}");
    let none = build(&plan, &tracker().close(1), Extras::default());
    assert_eq!(
        serde_json::to_value(&none).expect("serializes")["stalled"],
        serde_json::Value::Null
    );
    assert_eq!(none.controller_cpu_seconds_per_1000_admissions, None);
    assert!(render(&none).contains("— (no --controller-pid, --apiserver-pid or --etcd-pid)"));
}
