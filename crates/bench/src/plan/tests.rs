use super::*;
use sluice_simulate::scenario::{LoadOptions, load_with};

fn baseline(scale: f64) -> Plan {
    let src = scenario_text("kueue-baseline").expect("built in");
    let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale }).expect("loads");
    build("sb-test", &s, &m, scale).expect("plans")
}

#[test]
fn builtin_names_and_files_resolve() {
    assert!(scenario_text("kueue-baseline").unwrap().text.contains("cq-4-5"));
    assert!(scenario_text("kueue-large-scale").unwrap().text.contains("cq-9-99"));
    assert!(scenario_text("deep-queue").unwrap().text.contains("count: 1000"));
    let path = format!("{}/../../examples/simulate/gpu-teams.yaml", env!("CARGO_MANIFEST_DIR"));
    assert!(scenario_text(&path).unwrap().text.contains("kind: Trace"));
    let err = scenario_text("kueue-basline").unwrap_err();
    assert!(err.contains("--scenario \"kueue-basline\""), "{err}");
    assert!(err.contains("kueue-baseline, kueue-large-scale, deep-queue"), "{err}");
}

#[test]
fn run_ids_are_short_dns_labels() {
    for _ in 0..20 {
        let id = new_run_id();
        assert_eq!(check_run_id(&id), Ok(()), "{id}");
        assert_eq!(id.len(), 11);
    }
    assert!(check_run_id("my-run-1").is_ok());
    for bad in ["", "-x", "x-", "Upper", "a_b", "a-very-long-run-id-over-20"] {
        assert!(check_run_id(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn baseline_at_scale_shapes_the_run() {
    // Per ClusterQueue the baseline has 350 small, 100 medium, 50 large.
    // At 0.1: round(35) = 35, round(10) = 10, round(5) = 5 → 50 per queue,
    // × 30 queues = 1 500 workloads.
    let plan = baseline(0.1);
    assert_eq!(plan.workloads.len(), 1500);
    let count = |class: &str| plan.workloads.iter().filter(|w| w.class == class).count();
    assert_eq!(
        (count("small"), count("medium"), count("large")),
        (35 * 30, 10 * 30, 5 * 30)
    );
    // At 0.02: round(7) = 7, round(2) = 2, round(1) = 1 → 10 × 30 = 300.
    let small = baseline(0.02);
    assert_eq!(small.workloads.len(), 300);
    assert_eq!(small.workloads.iter().filter(|w| w.class == "large").count(), 30);

    // Queue shapes are kept: 5 cohorts × 6 queues, 5 namespaces of 6
    // LocalQueues, one flavor, whatever the scale.
    assert_eq!(plan.cluster_queues.len(), 30);
    assert_eq!(plan.local_queues.len(), 30);
    assert_eq!(plan.flavors.len(), 1);
    assert_eq!(
        plan.namespaces,
        (0..5).map(|c| format!("sb-test-cohort-{c}")).collect::<Vec<_>>()
    );
    let cohorts: BTreeSet<_> = plan.quotas.queues.values().filter_map(|q| q.cohort.clone()).collect();
    assert_eq!(cohorts.len(), 5);
    assert!(cohorts.contains("sb-test-cohort-0"));
}

#[test]
fn the_schedule_priorities_and_run_times_follow_the_classes() {
    let plan = baseline(0.02);
    let of = |class: &str| -> Vec<&PlannedWorkload> { plan.workloads.iter().filter(|w| w.class == class).collect() };
    // small: every 100 ms from 0, 200 ms run, priority 50, 1 CPU.
    // The 7 of queue cohort-0/lq-0 arrive at 0, 100, …, 600 ms.
    let q0: Vec<Millis> = of("small")
        .iter()
        .filter(|w| w.namespace == "sb-test-cohort-0" && w.queue == "lq-0")
        .map(|w| w.arrival)
        .collect();
    assert_eq!(q0, vec![0, 100, 200, 300, 400, 500, 600]);
    for (class, runtime, priority, cpu) in [
        ("small", 200, 50, 1_000),
        ("medium", 500, 100, 5_000),
        ("large", 1_000, 200, 20_000),
    ] {
        for w in of(class) {
            assert_eq!((w.runtime, w.priority), (runtime, priority), "{class}");
            assert_eq!(w.pod_sets[0].requests["cpu"], cpu, "{class}");
        }
    }
    // medium every 500 ms: its 2 per queue at 0 and 500 ms; the one large at 0.
    let mut medium: Vec<Millis> = of("medium").iter().map(|w| w.arrival).collect();
    medium.dedup();
    assert_eq!(medium, vec![0, 500]);
    assert!(of("large").iter().all(|w| w.arrival == 0));
    // Sorted by arrival; the last small one arrives at 600 ms.
    assert!(plan.workloads.windows(2).all(|p| p[0].arrival <= p[1].arrival));
    assert_eq!(plan.workloads.last().map(|w| w.arrival), Some(600));
}

#[test]
fn objects_carry_the_run_id_and_label() {
    let plan = baseline(0.02);
    let cq = &plan.cluster_queues[0];
    assert_eq!(cq.name, "sb-test-cq-0-0");
    assert_eq!(cq.body["metadata"]["labels"][RUN_LABEL], "sb-test");
    assert_eq!(cq.body["spec"]["cohort"], "sb-test-cohort-0");
    assert_eq!(
        cq.body["spec"]["resourceGroups"][0]["flavors"][0]["name"],
        "sb-test-default"
    );
    assert_eq!(
        cq.body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"],
        "20"
    );
    assert!(cq.body.get("status").is_none());
    let lq = &plan.local_queues[0];
    assert_eq!(lq.namespace.as_deref(), Some("sb-test-cohort-0"));
    assert_eq!(lq.body["spec"]["clusterQueue"], "sb-test-cq-0-0");
    assert_eq!(plan.flavors[0].name, "sb-test-default");
    assert_eq!(plan.scenario_name("sb-test-cq-1-2"), "cq-1-2");
    assert_eq!(plan.scenario_name("other"), "other");

    let w = plan
        .workloads
        .iter()
        .find(|w| w.class == "medium")
        .expect("a medium one");
    let json = serde_json::to_value(w.object(&plan.run_id)).expect("serializes");
    assert_eq!(json["apiVersion"], "sluice.dev/v1alpha1");
    assert_eq!(json["kind"], "Workload");
    assert_eq!(json["metadata"]["labels"][RUN_LABEL], "sb-test");
    assert_eq!(json["metadata"]["annotations"][RUNTIME_ANNOTATION], "500");
    assert_eq!(json["spec"]["queueName"], w.queue);
    assert_eq!(json["spec"]["priority"], 100);
    assert_eq!(json["spec"]["podSets"][0]["count"], 1);
    assert_eq!(
        json["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "5"
    );
    assert_eq!(json.get("status"), None);
}

#[test]
fn applied_objects_hold_no_nulls() {
    // A null in an applied configuration is not "unset" everywhere:
    // the bodies leave absent fields out.
    fn nulls(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Null => out.push(path.to_string()),
            Value::Object(m) => m.iter().for_each(|(k, v)| nulls(v, &format!("{path}.{k}"), out)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, v)| nulls(v, &format!("{path}[{i}]"), out)),
            _ => {}
        }
    }
    let plan = baseline(0.02);
    let mut found = Vec::new();
    for o in plan
        .flavors
        .iter()
        .chain(&plan.cluster_queues)
        .chain(&plan.local_queues)
    {
        nulls(&o.body, &o.name, &mut found);
    }
    let wl = serde_json::to_value(plan.workloads[0].object(&plan.run_id)).expect("serializes");
    nulls(&wl, "workload", &mut found);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_quota_model_has_the_cluster_names() {
    let plan = baseline(0.02);
    let q = &plan.quotas.queues["sb-test-cq-2-3"];
    assert_eq!(q.cohort.as_deref(), Some("sb-test-cohort-2"));
    let l = q.limits[&("sb-test-default".to_string(), "cpu".to_string())];
    assert_eq!(
        (l.nominal, l.borrowing_limit, l.lending_limit),
        (20_000, Some(100_000), None)
    );
}

#[test]
fn a_run_id_too_long_for_the_names_is_refused() {
    let src = scenario_text("kueue-baseline").expect("built in");
    let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale: 0.02 }).expect("loads");
    let errors = build("not a run id", &s, &m, 0.02).unwrap_err();
    assert!(errors[0].contains("is not a run id"), "{errors:?}");
}

#[test]
fn the_deep_queue_is_a_thousand_workloads_at_once_in_one_queue_with_room_for_all() {
    let src = scenario_text("deep-queue").expect("built in");
    let (s, m) = load_with(&src.file, &src.text, &LoadOptions { scale: 1.0 }).expect("loads");
    let plan = build("sb-test", &s, &m, 1.0).expect("plans");
    assert_eq!(plan.workloads.len(), 1000);
    let w = &plan.workloads[999];
    assert_eq!(
        (w.arrival, w.queue.as_str(), w.namespace.as_str()),
        (0, "lq", "sb-test-deep"),
        "{w:?}"
    );
    assert!(plan.workloads.iter().all(|w| w.arrival == 0 && w.queue == "lq"));
    assert_eq!(plan.cluster_queues.len(), 1);
    assert_eq!(plan.namespaces, ["sb-test-deep"]);
    // Quota for every one of them (1 CPU each, nominal 1 000).
    let quota = plan.quotas.queues.values().next().expect("one queue");
    assert_eq!(quota.limits.values().map(|l| l.nominal).sum::<i64>(), 1_000_000);
}

#[test]
fn a_scenario_with_cohort_objects_is_refused_not_run_without_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/simulate/fair-share.yaml");
    let text = std::fs::read_to_string(path).expect("shipped scenario");
    let (s, m) = load_with(path, &text, &LoadOptions { scale: 1.0 }).expect("loads");
    assert!(!m.cohorts.is_empty(), "the scenario declares a Cohort");
    let Err(errors) = build("sb-test", &s, &m, 1.0) else {
        panic!("a scenario with a Cohort is refused");
    };
    assert!(
        errors
            .iter()
            .any(|e| e.contains("sluice bench does not create Cohort objects")),
        "{errors:?}"
    );
}
