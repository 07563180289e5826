//! `sluice simulate` end to end: trace parsing with error positions, and
//! golden summaries of small scenarios whose figures are worked out by hand
//! in the comments.

use sluice_simulate::report::{self, Report};
use sluice_simulate::sim::{self, SimOptions, SimResult};
use sluice_simulate::{scenario, trace::Diagnostic};

const HEADER: &str = "\
apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h100}
spec: {}
---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
";

fn queue(name: &str, cohort: Option<&str>, nominal: u32, borrowing: Option<u32>, preemption: &str) -> String {
    format!(
        "---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
  {cohort}preemption: {preemption}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: {nominal}{borrow}}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: {name}}}
spec: {{clusterQueue: {name}}}
",
        cohort = cohort.map(|c| format!("cohort: {c}\n  ")).unwrap_or_default(),
        borrow = borrowing.map(|b| format!(", borrowingLimit: {b}")).unwrap_or_default(),
    )
}

fn job(name: &str, ns: &str, arrival: &str, gpus: u32, duration: &str) -> String {
    format!(
        "  - {{name: {name}, namespace: {ns}, queue: jobs, arrival: {arrival}, requests: {{nvidia.com/gpu: {gpus}}}, duration: {duration}, class: {name}}}\n"
    )
}

fn trace(jobs: &[String]) -> String {
    format!(
        "---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata: {{name: golden}}\nspec:\n  jobs:\n{}",
        jobs.concat()
    )
}

fn simulate(text: &str, opts: &SimOptions) -> (Report, SimResult) {
    let s = scenario::load("golden.yaml", text).unwrap_or_else(|e| panic!("scenario does not load: {e:?}"));
    let result = sim::run(&s, opts, &mut |_| {}).expect("simulation runs");
    (report::build(&s.name, opts, &result), result)
}

fn load_errors(text: &str) -> Vec<Diagnostic> {
    match scenario::load("bad.yaml", text) {
        Ok(_) => panic!("scenario should not load"),
        Err(e) => e,
    }
}

fn utilisation(r: &Report, queue: &str) -> f64 {
    let g = if queue == "cluster" {
        &r.totals
    } else {
        r.cluster_queues.iter().find(|g| g.name == queue).unwrap()
    };
    g.resources[0].utilisation.unwrap()
}

/// One queue of 8 GPUs, no preemption, unthrottled.
/// - a: 8 GPUs at 0 for 10m → runs 0–10m, waits 0.
/// - b: 4 GPUs at 1m for 5m and c: 4 GPUs at 2m for 5m → both fit once a
///   finishes: admitted together at 10m (waits 9m and 8m), finish at 15m.
///
/// Waits sorted [0, 8m, 9m]: mean 17m/3 = 5m40s, p50 (rank ⌈1.5⌉ = 2) 8m,
/// p95 (rank ⌈2.85⌉ = 3) 9m, max 9m. Utilisation: 8 GPUs in use for all
/// 15 minutes = 100 %.
#[test]
fn golden_fifo_on_one_queue() {
    let text = format!(
        "{HEADER}{}{}",
        queue("team", None, 8, None, "{}"),
        trace(&[
            job("a", "team", "0s", 8, "10m"),
            job("b", "team", "1m", 4, "5m"),
            job("c", "team", "2m", 4, "5m")
        ])
    );
    let (r, _) = simulate(
        &text,
        &SimOptions {
            eviction_delay: 0,
            // Each event decided at its own instant (the controller gathers
            // 50 ms of events into a cycle): the times below stay round.
            coalesce: 0,
            ..SimOptions::default()
        },
    );
    assert_eq!(r.makespan_ms, 15 * 60_000);
    let t = &r.totals;
    assert_eq!((t.workloads, t.admitted, t.finished, t.preemptions), (3, 3, 3, 0));
    assert_eq!(t.wait.mean_ms, 340_000.0);
    assert_eq!(
        (t.wait.p50_ms, t.wait.p95_ms, t.wait.max_ms),
        (480_000, 540_000, 540_000)
    );
    assert!((utilisation(&r, "team") - 1.0).abs() < 1e-9);
    insta::assert_snapshot!("fifo_on_one_queue", report::table::render(&r));
}

/// Two queues of 4 GPUs in a cohort; `lender` reclaims (reclaimWithinCohort:
/// Any), `borrower` may borrow 4. Eviction delay 1m.
/// - big: 8 GPUs in borrower at 0 for 60m → admitted at 0 (4 own + 4 borrowed).
/// - small: 4 GPUs in lender at 10m for 10m → its quota is lent out, so it
///   preempts big at 10m; big's pods are gone at 11m, small is admitted at
///   11m (wait 1m) and finishes at 21m. big requeues but needs 8 and only 4
///   are free until 21m: re-admitted at 21m, finishes at 81m = the
///   makespan. Its time to admission is 21m (to its latest admission, as
///   Kueue's recorder counts it; 0 to the first), completion 81m, slowdown
///   81/60 = 1.35, and the 10 minutes it ran on 8 GPUs before being
///   preempted are 8 × 10/60 = 1.33 GPU-hours lost.
///
/// Utilisation over 81m: lender 4×10 / (4×81) = 12.3 %; borrower holds 8
/// over [0,11m] and [21m,81m] = 568 GPU·min / (4×81) = 175.3 %, of which
/// 4×11 + 4×60 = 284 is above nominal: borrowed share 50 %. Cluster:
/// (568 + 40) / (8×81) = 93.8 %.
#[test]
fn golden_borrow_then_reclaim() {
    let text = format!(
        "{HEADER}{}{}{}",
        queue("lender", Some("pool"), 4, None, "{reclaimWithinCohort: Any}"),
        queue("borrower", Some("pool"), 4, Some(4), "{}"),
        trace(&[
            job("big", "borrower", "0s", 8, "60m"),
            job("small", "lender", "10m", 4, "10m")
        ])
    );
    let (r, result) = simulate(
        &text,
        &SimOptions {
            eviction_delay: 60_000,
            // Each event decided at its own instant (the controller gathers
            // 50 ms of events into a cycle): the times below stay round.
            coalesce: 0,
            ..SimOptions::default()
        },
    );
    assert_eq!(r.makespan_ms, 81 * 60_000);
    assert_eq!(r.totals.preemptions, 1);
    let big = &result.records[0];
    assert_eq!(big.runs.len(), 2, "big runs twice: preempted, then to completion");
    assert_eq!(big.runs[0].ended_at, Some(10 * 60_000));
    assert_eq!(big.runs[1].started_at, Some(21 * 60_000));
    let small = r.classes.iter().find(|g| g.name == "small").unwrap();
    assert_eq!(small.wait.max_ms, 60_000);
    let big_class = r.classes.iter().find(|g| g.name == "big").unwrap();
    assert_eq!(big_class.wait.max_ms, 21 * 60_000);
    assert_eq!(big_class.wait_to_first_admission.max_ms, 0);
    assert_eq!(big_class.completion.max_ms, 81 * 60_000);
    assert!((big_class.slowdown.max - 1.35).abs() < 1e-9);
    assert!((big_class.gpu_hours_lost - 8.0 * 10.0 / 60.0).abs() < 1e-9);
    let big_out = r.workloads.iter().find(|w| w.class == "big").unwrap();
    assert_eq!(
        (big_out.wait_ms, big_out.wait_to_first_admission_ms),
        (Some(21 * 60_000), Some(0))
    );
    assert_eq!(big_out.preemptions, 1);
    assert!((r.totals.gpu_hours_lost - big_out.gpu_hours_lost).abs() < 1e-9);
    assert!((utilisation(&r, "lender") - 40.0 / 324.0).abs() < 1e-9);
    assert!((utilisation(&r, "borrower") - 568.0 / 324.0).abs() < 1e-9);
    let borrower = r.cluster_queues.iter().find(|g| g.name == "borrower").unwrap();
    assert!((borrower.resources[0].borrowed_share.unwrap() - 0.5).abs() < 1e-9);
    assert!((utilisation(&r, "cluster") - 608.0 / 648.0).abs() < 1e-9);
    // Fairness: the borrower borrows 4 of the 8 the cohort can lend (500
    // thousandths) over [0, 11m] and [21m, 81m], mean 500 × 71/81 = 438;
    // the lender never borrows. Time shares of the GPU time: 568/608 and
    // 40/608; Jain's index over mean use [40/81, 568/81] = 0.570.
    let f = r.fairness.as_ref().expect("queues in a cohort");
    let q = |n: &str| f.cluster_queues.iter().find(|q| q.name == n).unwrap();
    assert!((q("borrower").mean_share.unwrap() - 500.0 * 71.0 / 81.0).abs() < 1e-9);
    assert_eq!(
        (q("borrower").max_share, q("lender").max_share),
        (Some(500.0), Some(0.0))
    );
    assert!((q("borrower").time_share.unwrap() - 568.0 / 608.0).abs() < 1e-9);
    let jain = 608.0f64.powi(2) / (2.0 * (40.0f64.powi(2) + 568.0f64.powi(2)));
    assert!((f.trees[0].jain_index.unwrap() - jain).abs() < 1e-9);
    insta::assert_snapshot!("borrow_then_reclaim", report::table::render(&r));
}

/// Five 1-GPU jobs arrive at 0 on an 8-GPU queue; the API allows 2
/// writes/s (burst 1), paced as the controller paces them: the cycle
/// gathers the arrivals and runs at 50 ms; the backlog is 2 writes
/// (`cycle_backlog(2, 1)`), so the cycle decides at most 4 (j0–j3, written
/// at 50, 550, 1 050 and 1 550 ms) and asks for another at once; that one
/// waits, in 20 ms steps, until at most 2 writes are queued (550 ms) and
/// admits j4 with the 2 decisions left, written at 2 050 ms (1.5 s after
/// its decision). Waits 50, 550, 1 050, 1 550, 2 050: mean 1 050 ms, p50
/// (rank 3) 1 050, p95 (rank ⌈4.75⌉ = 5) 2 050. Each runs 10 s from its
/// write: the last finishes at 12 050 ms. Quota is held from the decision:
/// 4 × 50 ms to 10 050, 10 550, 11 050, 11 550 and 550 to 12 050 =
/// 54 500 GPU·ms of 8 × 12 050.
#[test]
fn golden_api_rate_limit_delays_admissions() {
    let jobs: Vec<String> = (0..5).map(|i| job(&format!("j{i}"), "team", "0s", 1, "10s")).collect();
    let text = format!("{HEADER}{}{}", queue("team", None, 8, None, "{}"), trace(&jobs));
    let opts = SimOptions {
        api_qps: Some(2.0),
        api_burst: 1,
        eviction_delay: 0,
        ..SimOptions::default()
    };
    let (r, result) = simulate(&text, &opts);
    assert_eq!(r.api_writes.count, 5);
    assert_eq!(r.api_writes.max_delay_ms, 1_500);
    assert_eq!(result.cycles, 2 + 5, "two that admit, then one after each finish");
    assert_eq!(r.makespan_ms, 12_050);
    assert_eq!(
        (r.totals.wait.mean_ms, r.totals.wait.p50_ms, r.totals.wait.p95_ms),
        (1_050.0, 1_050, 2_050)
    );
    assert!((utilisation(&r, "team") - 54_500.0 / 96_400.0).abs() < 1e-9);
    insta::assert_snapshot!("api_rate_limit", report::table::render(&r));
}

/// The same scenario gives byte-identical output, run after run.
#[test]
fn runs_are_deterministic() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/simulate/gpu-teams.yaml"
    ))
    .unwrap();
    let opts = SimOptions::default();
    let (a, ra) = simulate(&text, &opts);
    let (b, rb) = simulate(&text, &opts);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert_eq!(report::html::render(&a, &ra), report::html::render(&b, &rb));
    // The shipped default scenario shows what it promises.
    assert!(a.totals.preemptions > 0, "gpu-teams should preempt");
    assert!(
        a.cluster_queues
            .iter()
            .any(|g| g.resources[0].borrowed_share.unwrap_or(0.0) > 0.0),
        "and borrow"
    );
    assert_eq!(a.totals.finished, a.totals.workloads);
}

#[test]
fn gangs_become_one_workload_with_a_pod_set_per_job() {
    let text = format!(
        "{HEADER}{}---
apiVersion: sluice.dev/v1alpha1
kind: Trace
spec:
  jobs:
  - {{name: learner, gang: rl, namespace: team, queue: jobs, arrival: 0s, requests: {{nvidia.com/gpu: 4}}, duration: 1h}}
  - {{name: actors, gang: rl, namespace: team, queue: jobs, arrival: 10m, priorityClass: high, pods: 4, requests: {{nvidia.com/gpu: 1, cpu: 500m}}, duration: 2h}}
",
        // The actors request cpu too: the queue must cover it, or the gang
        // could never be admitted (and the scenario is refused).
        queue("team", None, 8, None, "{}").replace(
            "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: h100\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 8}",
            "  - coveredResources: [nvidia.com/gpu, cpu]\n    flavors:\n    - name: h100\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 8}\n      - {name: cpu, nominalQuota: 64}"
        )
    );
    let s = scenario::load("gang.yaml", &text).unwrap();
    assert_eq!(s.workloads.len(), 1);
    let w = &s.workloads[0];
    assert_eq!(w.name, "team/rl");
    assert_eq!(w.pod_sets.len(), 2);
    assert_eq!(w.pod_sets[1].count, 4);
    assert_eq!(w.pod_sets[1].requests["cpu"], 500);
    assert_eq!(w.total("nvidia.com/gpu"), 8_000);
    assert_eq!(w.duration, 7_200_000, "a gang runs as long as its longest member");
    // As in the controller, its Workload comes with its last Job.
    assert_eq!(w.arrival, 600_000, "a gang arrives with its last member");
    assert_eq!(w.priority, 1000, "at the highest priority of its members");
}

#[test]
fn generators_are_deterministic_and_spread_over_queues() {
    let gen_ = |seed: u32| {
        format!(
            "{HEADER}{}{}---
apiVersion: sluice.dev/v1alpha1
kind: Trace
spec:
  generators:
  - {{class: exp, count: 3, start: 1m, interval: 10s, duration: 1m, requests: {{nvidia.com/gpu: 1}}, queues: [a/jobs, b/jobs], jitter: {{seed: {seed}, arrival: 0.5, duration: 0.2}}}}
",
            queue("a", None, 8, None, "{}"),
            queue("b", None, 8, None, "{}")
        )
    };
    let one = scenario::load("g.yaml", &gen_(1)).unwrap().workloads;
    let again = scenario::load("g.yaml", &gen_(1)).unwrap().workloads;
    let other = scenario::load("g.yaml", &gen_(2)).unwrap().workloads;
    assert_eq!(one, again);
    assert_ne!(one, other);
    assert_eq!(one.len(), 6);
    assert_eq!(one.iter().filter(|w| w.local_queue == "a/jobs").count(), 3);
    for w in &one {
        let n: i64 = w.name.rsplit('-').next().unwrap().parse().unwrap();
        let base = 60_000 + 10_000 * n;
        assert!(
            (base..=base + 5_000).contains(&w.arrival),
            "{} arrives at {}",
            w.name,
            w.arrival
        );
        assert!((48_000..=72_000).contains(&w.duration));
    }
}

fn one_error(text: &str) -> String {
    let errors = load_errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors[0].to_string()
}

#[test]
fn errors_name_file_line_column_and_field_path() {
    let q = queue("team", None, 8, None, "{}");
    // Line numbers: HEADER is 9 lines, the queue documents 17 more.
    let base = format!("{HEADER}{q}");
    let first_trace_line = base.lines().count() + 1;
    let doc = |jobs: &str| format!("{base}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec:\n  jobs:\n{jobs}");
    let jobs_line = first_trace_line + 5; // first line of the first job

    // A bad duration: the line of the value, column of the value.
    let e = one_error(&doc(
        "  - name: a\n    namespace: team\n    queue: jobs\n    arrival: 0s\n    requests: {nvidia.com/gpu: 1}\n    duration: 10 minutes\n",
    ));
    assert!(
        e.starts_with(&format!("bad.yaml:{}:15: spec.jobs[0].duration: ", jobs_line + 5)),
        "{e}"
    );
    assert!(
        e.contains("invalid duration \"10 minutes\": write it without spaces"),
        "{e}"
    );

    // A bad quantity, in the second job.
    let e = one_error(&doc(&format!(
        "{}  - {{name: b, namespace: team, queue: jobs, arrival: 1m, requests: {{cpu: 2 cores}}, duration: 1m}}\n",
        job("a", "team", "0s", 1, "1m")
    )));
    assert!(e.starts_with(&format!("bad.yaml:{}:", jobs_line + 1)), "{e}");
    assert!(e.contains("spec.jobs[1].requests.cpu"), "{e}");
    assert!(e.contains("2 cores"), "{e}");

    // A misspelt field.
    let e = one_error(&doc(
        "  - {name: a, namespace: team, queue: jobs, arival: 0s, requests: {cpu: 1}, duration: 1m}\n",
    ));
    assert!(e.starts_with(&format!("bad.yaml:{jobs_line}:")), "{e}");
    assert!(e.contains("arival"), "{e}");

    // Unknown queue and priority class: the position of the name itself
    // ("  - {name: a, namespace: team, queue: " is 38 characters).
    let errors = load_errors(&doc(
        "  - {name: a, namespace: team, queue: nope, priorityClass: urgent, arrival: 0s, requests: {cpu: 1}, duration: 1m}\n",
    ));
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 2, "{text:#?}");
    assert!(
        text[0].starts_with(&format!(
            "bad.yaml:{jobs_line}:39: spec.jobs[0].queue: no LocalQueue \"team/nope\""
        )),
        "{}",
        text[0]
    );
    assert!(text[1].starts_with(&format!("bad.yaml:{jobs_line}:60: spec.jobs[0].priorityClass: unknown WorkloadPriorityClass \"urgent\" (known: high)")), "{}", text[1]);
}

#[test]
fn manifests_are_validated_and_gangs_must_agree() {
    // A ClusterQueue with a borrowingLimit but no cohort fails its validate().
    let text = format!(
        "{HEADER}{}{}",
        queue("team", None, 8, Some(4), "{}"),
        trace(&[job("a", "team", "0s", 1, "1m")])
    );
    let errors = load_errors(&text);
    // It points at the key: line 22 is
    // `      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}`.
    let e = errors
        .iter()
        .find(|e| e.path.ends_with("borrowingLimit"))
        .expect("a borrowingLimit violation");
    assert_eq!(e.path, "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit");
    assert_eq!((e.line, e.column), (22, 49), "{e}");

    // Gang members must name one queue (the controller admits nothing of
    // such a gang).
    let text = format!(
        "{HEADER}{}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec:\n  jobs:\n  - {{name: a, gang: g, namespace: team, queue: jobs, arrival: 0s, requests: {{cpu: 1}}, duration: 1m}}\n  - {{name: b, gang: g, namespace: team, queue: other, arrival: 5s, requests: {{cpu: 1}}, duration: 1m}}\n",
        queue("team", None, 8, None, "{}")
    );
    let errors = load_errors(&text);
    assert!(
        errors.iter().any(|e| e
            .to_string()
            .contains("spec.jobs[1].gang: gang \"g\" members must share queue")),
        "{errors:?}"
    );

    // No Trace at all.
    let e = one_error(HEADER);
    assert!(e.contains("no Trace document"), "{e}");
}

#[test]
fn documents_keep_their_line_numbers() {
    let docs = scenario::split_documents("# comment\n---\na: 1\n---\n\n--- {b: 2}\nc: 3\n...\n");
    assert_eq!(docs.len(), 2);
    assert_eq!((docs[0].text, docs[0].line_offset), ("a: 1\n", 2));
    assert_eq!((docs[1].text, docs[1].line_offset), (" {b: 2}\nc: 3\n", 5));
}

/// With writes throttled hard, some victims are preempted before their
/// admission write goes out; they still count as admitted once they start.
#[test]
fn counts_add_up_under_heavy_throttling() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/simulate/gpu-teams.yaml"
    ))
    .unwrap();
    let opts = SimOptions {
        api_qps: Some(0.05),
        api_burst: 1,
        eviction_delay: 30_000,
        ..SimOptions::default()
    };
    let (r, result) = simulate(&text, &opts);
    assert!(r.api_writes.max_delay_ms > 0);
    for g in r.cluster_queues.iter().chain(&r.classes).chain([&r.totals]) {
        assert_eq!(g.admitted + g.never_admitted + g.rejected, g.workloads, "{}", g.name);
        assert_eq!(g.finished, g.workloads, "{}: everything finishes eventually", g.name);
        assert_eq!(g.wait.count, g.admitted, "{}", g.name);
    }
    // Every run that started did so no earlier than its admission decision,
    // and a workload's runs do not overlap.
    for rec in &result.records {
        for pair in rec.runs.windows(2) {
            assert!(pair[0].ended_at.unwrap() <= pair[1].admitted_at);
        }
        for run in &rec.runs {
            if let Some(s) = run.started_at {
                assert!(s >= run.admitted_at);
            }
        }
    }
}

/// The default scenario simulates the cluster of `examples/`, copied in
/// unchanged: keep them in step.
#[test]
fn gpu_teams_carries_the_example_cluster_verbatim() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let scenario = std::fs::read_to_string(format!("{root}/simulate/gpu-teams.yaml")).unwrap();
    for file in ["flavors", "priority-classes", "cluster-queues", "local-queues"] {
        let text = std::fs::read_to_string(format!("{root}/{file}.yaml")).unwrap();
        assert!(
            scenario.contains(&text),
            "examples/{file}.yaml changed: paste it again into examples/simulate/gpu-teams.yaml"
        );
    }
}

#[test]
fn a_trace_may_set_the_eviction_delay() {
    let text = format!(
        "{HEADER}{}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec:\n  evictionDelay: 2m\n  jobs:\n{}",
        queue("team", None, 8, None, "{}"),
        job("a", "team", "0s", 1, "1m")
    );
    assert_eq!(scenario::load("d.yaml", &text).unwrap().eviction_delay, Some(120_000));
    let without = format!(
        "{HEADER}{}{}",
        queue("team", None, 8, None, "{}"),
        trace(&[job("a", "team", "0s", 1, "1m")])
    );
    assert_eq!(scenario::load("d.yaml", &without).unwrap().eviction_delay, None);
}

/// A gang bigger than the queue's whole quota is never admitted: it is
/// reported as pending with the engine's explanation, and the run still ends.
#[test]
fn workloads_that_never_fit_are_reported_with_a_reason() {
    let text = format!(
        "{HEADER}{}{}",
        queue("team", None, 8, None, "{}"),
        trace(&[job("fits", "team", "0s", 4, "1m"), job("huge", "team", "0s", 16, "1m")])
    );
    let (r, result) = simulate(&text, &SimOptions::default());
    assert_eq!((r.totals.admitted, r.totals.never_admitted), (1, 1));
    assert_eq!(r.pending_at_end.len(), 1);
    let p = &r.pending_at_end[0];
    assert_eq!((p.name.as_str(), p.cluster_queue.as_str()), ("team/huge", "team"));
    let reason = p.reason.as_deref().expect("the engine explains why");
    assert!(reason.contains("nvidia.com/gpu"), "{reason}");
    let table = report::table::render(&r);
    assert!(table.contains("1 workload was never admitted"), "{table}");
    // The HTML report lists it with its reason too.
    let html = report::html::render(&r, &result);
    assert!(html.contains("Never admitted (1)"), "no never-admitted section");
    assert!(
        html.contains("<td class=\"l\">team/huge</td>"),
        "the workload is listed"
    );
}

/// The Kueue shapes as issue 4 states them: 5 × 6 queues with 350/100/50
/// workloads each; 10 × 100 queues with 35/11/4 each.
#[test]
fn kueue_scenarios_have_the_published_shapes() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/simulate");
    for (file, queues, per_queue) in [
        ("kueue-baseline", 30, [350, 100, 50]),
        ("kueue-large-scale", 1000, [35, 11, 4]),
    ] {
        let text = std::fs::read_to_string(format!("{root}/{file}.yaml")).unwrap();
        let s = scenario::load(file, &text).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        assert_eq!(s.cluster_queues.len(), queues, "{file}");
        assert_eq!(s.eviction_delay, Some(0), "{file}");
        for (class, n) in ["small", "medium", "large"].iter().zip(per_queue) {
            let count = s.workloads.iter().filter(|w| w.class == *class).count();
            assert_eq!(count, n * queues, "{file}: {class}");
        }
        for cq in &s.cluster_queues {
            let quota = &cq.resource_groups[0].flavors[0].resources[0];
            assert_eq!(
                (quota.nominal, quota.borrowing_limit),
                (20_000, Some(100_000)),
                "{}",
                cq.name
            );
            assert!(cq.cohort.is_some());
        }
    }
}

#[test]
fn generator_errors_point_at_the_generator() {
    let base = format!("{HEADER}{}", queue("team", None, 8, None, "{}"));
    let line = base.lines().count() + 6; // apiVersion, kind, spec, generators, then the entry
    let text = format!(
        "{base}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec:\n  generators:\n  - class: exp\n    count: 2\n    interval: 1s\n    duration: 1s\n    requests: {{cpu: 1}}\n    namespace: team\n    queue: jobs\n    jitter: {{seed: 1, arrival: 2}}\n"
    );
    let e = one_error(&text);
    assert!(
        e.starts_with(&format!(
            "bad.yaml:{line}:12: spec.generators[0].jitter: jitter fractions must be between 0 and 1"
        )),
        "{e}"
    );
}

#[test]
fn a_local_queue_needs_a_namespace() {
    let text = format!(
        "{HEADER}{}---\napiVersion: sluice.dev/v1alpha1\nkind: LocalQueue\nmetadata:\n  name: orphan\nspec: {{clusterQueue: team}}\n{}",
        queue("team", None, 8, None, "{}"),
        trace(&[job("a", "team", "0s", 1, "1m")])
    );
    let errors = load_errors(&text);
    let e = errors
        .iter()
        .find(|e| e.to_string().contains("namespace"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    // The document starts on line 29; its `metadata:` key is line 31.
    assert_eq!(e.line, 31, "{e}");
}

/// A scenario with one typo-able ClusterQueue document; `{cq}` is its spec.
fn strict_doc(cq_spec: &str, trace_requests: &str) -> String {
    format!(
        "{HEADER}---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec:
  namespaceSelector: {{}}
{cq_spec}---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
spec:
  jobs:
  - {{name: a, namespace: team, queue: jobs, arrival: 0s, requests: {{{trace_requests}}}, duration: 1m}}
"
    )
}

const GOOD_GROUPS: &str = "  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
";

fn all_errors(text: &str) -> Vec<String> {
    load_errors(text).iter().map(ToString::to_string).collect()
}

#[test]
fn misspelt_fields_are_errors_with_the_name_meant() {
    // HEADER is 9 lines; the ClusterQueue's spec starts on line 15 with
    // `namespaceSelector: {}`, the keys under test on line 16.
    let text = strict_doc(
        &format!("  cohrt: shared\n  preemption:\n    withinClusterqueue: LowerPriority\n{GOOD_GROUPS}"),
        "nvidia.com/gpu: 1",
    );
    assert_eq!(
        all_errors(&text),
        [
            "bad.yaml:16:3: spec.cohrt: ClusterQueue: unknown field `cohrt`, did you mean `cohort`?",
            "bad.yaml:18:5: spec.preemption.withinClusterqueue: ClusterQueue: unknown field `withinClusterqueue`, did you mean `withinClusterQueue`?",
        ]
    );
    let text = strict_doc(
        "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: h100\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimt: 2}\n",
        "nvidia.com/gpu: 1",
    );
    assert_eq!(
        all_errors(&text),
        [
            "bad.yaml:21:49: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimt: ClusterQueue: unknown field `borrowingLimt`, did you mean `borrowingLimit`?"
        ]
    );
}

#[test]
fn unknown_kinds_are_errors_and_kueue_manifests_are_read_through_the_importer() {
    // The Kueue ClusterQueue becomes a Sluice one (tests/kueue.rs).
    let text = format!(
        "{}---\napiVersion: sluice.dev/v1alpha1\nkind: Clusterqueue\nmetadata: {{name: x}}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: k}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: ignored}}\n",
        strict_doc(GOOD_GROUPS, "nvidia.com/gpu: 1")
    );
    let base = strict_doc(GOOD_GROUPS, "nvidia.com/gpu: 1").lines().count();
    assert_eq!(
        all_errors(&text),
        [format!(
            "bad.yaml:{}:1: kind: unknown kind `Clusterqueue`, did you mean `ClusterQueue`?",
            base + 3
        )]
    );
}

#[test]
fn names_that_refer_to_nothing_are_errors() {
    // A flavor typo in the ClusterQueue, a resource typo in the Trace.
    let text = strict_doc(
        &GOOD_GROUPS.replace("- name: h100", "- name: h10o"),
        "nvidia.com/gpus: 1",
    );
    assert_eq!(
        all_errors(&text),
        [
            "bad.yaml:19:7: spec.resourceGroups[0].flavors[0].name: ClusterQueue team: flavor `h10o` is not a ResourceFlavor of the scenario, did you mean `h100`?",
            "bad.yaml:32:69: spec.jobs[0].requests[nvidia.com/gpus]: Trace: team/a requests nvidia.com/gpus, which no ClusterQueue of the scenario covers, did you mean `nvidia.com/gpu`?",
        ]
    );
    // A LocalQueue pointing at a ClusterQueue the scenario lacks.
    let text = strict_doc(GOOD_GROUPS, "nvidia.com/gpu: 1")
        .replace("spec: {clusterQueue: team}", "spec: {clusterQueue: teem}");
    assert_eq!(
        all_errors(&text),
        [
            "bad.yaml:26:8: spec.clusterQueue: LocalQueue team/jobs: ClusterQueue `teem` is not in the scenario, did you mean `team`?"
        ]
    );
}

/// A ClusterQueue refused for its own error is reported there once, not
/// again as "not in the scenario" at the LocalQueue that names it nor as
/// uncovered resources in the Trace.
#[test]
fn an_object_refused_is_not_reported_again_where_it_is_named() {
    let text = strict_doc(
        &GOOD_GROUPS.replace("nominalQuota: 8", "nominalQuota: 8x"),
        "nvidia.com/gpu: 1",
    );
    let errors = all_errors(&text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("nominalQuota: ClusterQueue team: quantity \"8x\" has unknown suffix \"x\""),
        "{}",
        errors[0]
    );
}

#[test]
fn absurd_sizes_are_refused_with_the_limit() {
    let text = format!(
        "{}  generators:\n  - {{class: flood, count: 2000000000, interval: 1s, duration: 1s, requests: {{nvidia.com/gpu: 1}}, namespace: team, queue: jobs}}\n",
        strict_doc(GOOD_GROUPS, "nvidia.com/gpu: 1")
    );
    let errors = all_errors(&text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].ends_with(
            "spec.generators[0].count: 2000000000 jobs in each of 1 queue(s) make 2000000001 workloads with those before, more than the simulator's limit of 5000000"
        ),
        "{}",
        errors[0]
    );
}

/// GPUs are reported per flavor: one queue with 8 H100 and 8 L4, a job
/// holding the 8 H100 for the whole run and nothing on L4. Summed, the
/// queue's GPUs look half used; per flavor, the H100 are full and the L4
/// idle, and the table says so.
#[test]
fn gpu_figures_are_per_flavor() {
    let text = format!(
        "{HEADER}---
apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: l4}}
spec: {{}}
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
      - {{name: nvidia.com/gpu, nominalQuota: 8}}
    - name: l4
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 8}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
{}",
        trace(&[job("big", "team", "0s", 8, "10m")])
    );
    // Decided at its arrival's own instant (no 50 ms coalescing): the
    // GPUs are in use for the whole run.
    let opts = SimOptions {
        coalesce: 0,
        ..SimOptions::default()
    };
    let (r, result) = simulate(&text, &opts);
    let team = r.cluster_queues.iter().find(|g| g.name == "team").unwrap();
    let util = |flavor: &str| {
        team.flavors
            .iter()
            .find(|x| x.flavor.as_deref() == Some(flavor))
            .and_then(|x| x.utilisation)
            .unwrap()
    };
    assert!((util("h100") - 1.0).abs() < 1e-9);
    assert_eq!(util("l4"), 0.0);
    assert!((team.resources[0].utilisation.unwrap() - 0.5).abs() < 1e-9, "summed");
    let table = report::table::render(&r);
    assert!(table.contains("gpu h100") && table.contains("gpu l4"), "{table}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["totals"]["flavors"][0]["flavor"], "h100");
    assert_eq!(json["workloads"][0]["name"], "team/big");
    // One chart per flavor, each against its own nominal quota.
    let html = report::html::render(&r, &result);
    assert!(html.contains("nvidia.com/gpu on h100") && html.contains("nvidia.com/gpu on l4"));
}

/// Issue 39: the simulator reads namespaceSelectors by the cluster's rule
/// (unset: no namespace, `{}`: all). A namespace has the labels of its `v1`
/// Namespace document, if any, and `kubernetes.io/metadata.name`.
#[test]
fn a_local_queue_its_cluster_queue_does_not_select_is_an_error() {
    let namespace = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {tier: gold}}\n";
    // (the ClusterQueue's selector line, the error's start; None: loads)
    let cases = [
        (
            "",
            Some(
                "LocalQueue team/jobs: namespace team is not selected by ClusterQueue team: it has no namespaceSelector",
            ),
        ),
        ("  namespaceSelector: {}\n", None),
        (
            "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team}}\n",
            None,
        ),
        ("  namespaceSelector: {matchLabels: {tier: gold}}\n", None),
        (
            "  namespaceSelector: {matchLabels: {tier: silver}}\n",
            Some(
                "LocalQueue team/jobs: namespace team is not selected by ClusterQueue team: its namespaceSelector {matchLabels: tier=silver} does not match",
            ),
        ),
    ];
    for (selector, want) in cases {
        let text =
            strict_doc(GOOD_GROUPS, "nvidia.com/gpu: 1").replace("  namespaceSelector: {}\n", selector) + namespace;
        let errors: Vec<String> = match scenario::load("bad.yaml", &text) {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(ToString::to_string).collect(),
        };
        match want {
            None => assert_eq!(errors, Vec::<String>::new(), "{selector}"),
            Some(start) => {
                assert_eq!(errors.len(), 1, "{selector}: {errors:?}");
                assert!(errors[0].contains(&format!("spec.clusterQueue: {start}")), "{errors:?}");
                assert!(
                    errors[0].ends_with("its workloads would never be admitted"),
                    "{errors:?}"
                );
            }
        }
    }
}
