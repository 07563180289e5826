use serde_json::json;
use sluice_api::v1alpha1::Workload;

use super::*;

const WINDOW: Ms = 60_000;

/// A sample every second from `from` to `to` (inclusive) with the same
/// counts; the verdicts.
fn run(rule: &mut StallRule, from: Ms, to: Ms, s: Sample) -> Vec<(Ms, Verdict)> {
    (from..=to)
        .step_by(1000)
        .map(|at| (at, rule.sample(Sample { at, ..s })))
        .collect()
}

fn first_stall(verdicts: &[(Ms, Verdict)]) -> Option<(Ms, Stall)> {
    verdicts.iter().find_map(|(at, v)| match v {
        Verdict::Stalled(s) => Some((*at, *s)),
        Verdict::Moving => None,
    })
}

#[test]
fn nothing_admitted_for_the_window_with_work_waiting_is_a_stall() {
    // The run: 17 000 Workloads, none ever admitted (no Nodes,
    // --placement=nodes). Stalled one window after they first waited.
    let mut rule = StallRule::new(WINDOW);
    let waiting = Sample {
        pending: 17_000,
        ..Sample::default()
    };
    let v = run(&mut rule, 0, 120_000, waiting);
    assert_eq!(
        first_stall(&v),
        Some((
            60_000,
            Stall {
                since: 0,
                pending: 17_000
            }
        ))
    );
    assert!(v[..60].iter().all(|(_, v)| *v == Verdict::Moving));
}

#[test]
fn a_workload_running_longer_than_the_window_is_not_a_stall() {
    // One runs for 5 minutes and holds the quota the others wait for:
    // nothing is admitted meanwhile, but its Finished mark will come.
    let mut rule = StallRule::new(WINDOW);
    let v = run(
        &mut rule,
        0,
        300_000,
        Sample {
            admissions: 1,
            pending: 9,
            running: 1,
            ..Sample::default()
        },
    );
    assert_eq!(first_stall(&v), None);
    // It finishes and nothing else is admitted: stalled a window later.
    let v = run(
        &mut rule,
        301_000,
        400_000,
        Sample {
            admissions: 1,
            finished: 1,
            pending: 9,
            running: 0,
            ..Sample::default()
        },
    );
    assert_eq!(
        first_stall(&v),
        Some((
            361_000,
            Stall {
                since: 301_000,
                pending: 9
            }
        ))
    );
}

#[test]
fn an_admission_or_a_finish_starts_the_window_again() {
    let mut rule = StallRule::new(WINDOW);
    let waiting = Sample {
        pending: 4,
        ..Sample::default()
    };
    assert_eq!(first_stall(&run(&mut rule, 0, 30_000, waiting)), None);
    // At 31 s one is admitted and finishes before the next sample (a
    // short run time): the counts moved, nothing runs.
    let moved = Sample {
        admissions: 1,
        finished: 1,
        pending: 3,
        ..Sample::default()
    };
    let v = run(&mut rule, 31_000, 120_000, moved);
    assert_eq!(
        first_stall(&v),
        Some((
            91_000,
            Stall {
                since: 31_000,
                pending: 3
            }
        )),
        "a window after the last progress, not after the first wait"
    );
}

#[test]
fn no_work_waiting_is_not_a_stall() {
    // Between arrivals far apart, or once everything finished.
    let mut rule = StallRule::new(WINDOW);
    let idle = Sample {
        admissions: 5,
        finished: 5,
        ..Sample::default()
    };
    assert_eq!(first_stall(&run(&mut rule, 0, 200_000, idle)), None);
    // A workload arrives at 201 s and is never admitted: the window
    // counts from when it waits.
    let v = run(&mut rule, 201_000, 300_000, Sample { pending: 1, ..idle });
    assert_eq!(
        first_stall(&v),
        Some((
            261_000,
            Stall {
                since: 201_000,
                pending: 1
            }
        ))
    );
}

fn workload(name: &str, status: serde_json::Value) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "sb-1-cohort-0"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "template": {}}]},
        "status": status,
    }))
    .expect("a Workload")
}

/// What the controller writes on a workload no node could ever hold
/// (`--placement=nodes` and no Nodes), at position `pos`.
fn never_placeable(name: &str, pos: u32) -> Workload {
    let summary = "no node could ever hold it, even with nothing else running: more quota or waiting does not help";
    let flavor = "pod set main: no node matches its flavor's labels, its node selector and its tolerations";
    workload(
        name,
        json!({
            "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "NeverPlaceable",
                "message": format!("{summary}; pod set main: sb-1-default: no node matches … (position {pos} in ClusterQueue, {pos} in LocalQueue)"),
                "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "pending": {"reason": "NeverPlaceable",
                "message": format!("{summary} (position {pos} in ClusterQueue, {pos} in LocalQueue)"),
                "flavors": [{"name": "sb-1-default", "reason": "NeverOnNodes", "message": flavor}],
                "positionInClusterQueue": pos, "positionInLocalQueue": pos},
        }),
    )
}

#[test]
fn the_waiting_workloads_reasons_are_grouped_without_their_positions() {
    let t = "2025-01-01T00:00:00Z";
    let wls = vec![
        never_placeable("a", 0),
        never_placeable("b", 1),
        never_placeable("c", 2),
        // Not explained yet (the controller explains after --explain-after,
        // within its write budget).
        workload("d", json!({})),
        workload("e", json!(null)),
        // Only the condition.
        workload(
            "f",
            json!({"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "InsufficientQuota",
                "message": "insufficient quota (position 0 in ClusterQueue, 0 in LocalQueue)", "lastTransitionTime": t}]}),
        ),
        // Running and finished ones do not wait.
        workload(
            "g",
            json!({"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": t}]}),
        ),
        workload(
            "h",
            json!({"conditions": [
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": t},
                {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": t}]}),
        ),
    ];
    let got = pending_reasons(&wls);
    assert_eq!(
        got,
        vec![
            ReasonCount {
                workloads: 3,
                reason: Some(
                    "NeverPlaceable: no node could ever hold it, even with nothing else running: more quota or waiting does not help; sb-1-default: pod set main: no node matches its flavor's labels, its node selector and its tolerations".into()
                ),
            },
            ReasonCount {
                workloads: 1,
                reason: Some("InsufficientQuota: insufficient quota".into()),
            },
            ReasonCount {
                workloads: 2,
                reason: None
            },
        ]
    );
    // An evicted workload waits again.
    let evicted = workload(
        "i",
        json!({"conditions": [
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": t},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "", "lastTransitionTime": t}]}),
    );
    assert_eq!(
        pending_reasons([&evicted]),
        vec![ReasonCount {
            workloads: 1,
            reason: None
        }]
    );
}
