//! What LocalQueue users see: the ClusterQueue's numbers, positions and
//! estimated starts, refreshed on their own tick.

use super::*;
use sluice_api::labels::EXPECTED_RUNTIME;

const MIN: i64 = 60_000;

/// Job `name` of `gpus` GPUs (one pod), expected to run `runtime`.
fn job_with_runtime(name: &str, gpus: u32, runtime: Option<&str>) -> Job {
    let mut j = mk_job(name, "team-a", 1, gpus);
    if let Some(r) = runtime {
        j.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(EXPECTED_RUNTIME.into(), r.into());
    }
    j
}

fn submit(ix: &mut Index, j: &Job, created_s: i64, now: i64) {
    ix.apply_job(j.clone(), now);
    ix.apply_workload(stored_workload(j, 0, created_s), now);
}

#[test]
fn positions_and_estimates_follow_the_expected_run_times() {
    let mut ix = ready_index();
    let big = job_with_runtime("big", 8, Some("2h"));
    submit(&mut ix, &big, 0, T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    observe_status(&mut ix, &big, 0, 0, T0);
    let (b, c) = (job_with_runtime("b", 4, Some("30m")), job_with_runtime("c", 4, None));
    submit(&mut ix, &b, 1, T0 + 1000);
    submit(&mut ix, &c, 2, T0 + 2000);
    ix.take_plans();
    ix.cycle(T0 + 3000);
    // Explanations written (and observed): positions are then published.
    for p in ix.take_explanations(10, T0 + 3000) {
        ix.feedback(&p, &Ok(Default::default()), T0 + 3000);
    }
    observe_status(&mut ix, &b, 0, 1, T0 + 3000);
    observe_status(&mut ix, &c, 0, 2, T0 + 3000);

    let now = T0 + 10 * MIN;
    let estimates = ix.forecast_job(now).run();
    // big ends at T0 + 2 h; b and c (4 GPUs each) both start then.
    assert_eq!(estimates.get("wl-uid-b"), Some(&(T0 + 120 * MIN)));
    assert_eq!(estimates.get("wl-uid-c"), Some(&(T0 + 120 * MIN)));
    assert!(!estimates.contains_key("wl-uid-big"), "admitted: nothing to estimate");
    // While state changes wait to be written: the lists only.
    ix.refresh_positions(estimates.clone(), now, false);
    assert_eq!(ix.explanations_due(), 0, "no workload write while admissions wait");
    ix.refresh_positions(estimates, now, true);

    let snap = ix.pending_snapshot(&ObjKey::new(NS, "team-a")).unwrap();
    let listed: Vec<(&str, i32, i32)> = snap
        .workloads
        .iter()
        .map(|p| (p.name.as_str(), p.position_in_cluster_queue, p.position_in_local_queue))
        .collect();
    assert_eq!(listed, [("job-b", 1, 1), ("job-c", 2, 2)]);
    assert_eq!(snap.workloads[0].reason, "InsufficientQuota");
    assert_eq!(snap.workloads[0].estimated_start, Some(time_of(T0 + 120 * MIN)));
    assert_eq!(snap.as_of, Some(time_of(now)));

    // Their own statuses get the estimate through the explanation lane.
    assert_eq!(ix.explanations_due(), 2);
    let plans = ix.take_explanations(10, now);
    let pending = status_step(&plans[0]).pending.clone().unwrap();
    assert_eq!(pending.estimated_start, Some(time_of(T0 + 120 * MIN)));
    for p in &plans {
        ix.feedback(p, &Ok(Default::default()), now);
    }
    // Nothing moved: nothing to write on the next refresh.
    let again = ix.forecast_job(now + MIN).run();
    ix.refresh_positions(again, now + MIN, true);
    assert_eq!(ix.explanations_due(), 0);

    let summary = ix.cluster_queue_summary("cluster-gpu").unwrap();
    let gpu = &summary.flavors[0].resources[0];
    assert_eq!((summary.pending_workloads, summary.admitted_workloads), (2, 1));
    assert_eq!((gpu.nominal.0.as_str(), gpu.used.0.as_str()), ("8", "8"));
    assert_eq!(ix.cluster_queue_gpus("cluster-gpu").as_deref(), Some("8/8"));
}

#[test]
fn without_an_annotation_the_median_of_finished_runs_is_expected() {
    let mut ix = ready_index();
    // Three 8-GPU Jobs run one after another: 10, 30 and 20 minutes.
    let mut t = T0;
    for (i, ran) in [10, 30, 20].into_iter().enumerate() {
        let j = job_with_runtime(&format!("r{i}"), 8, None);
        submit(&mut ix, &j, 0, t);
        ix.take_plans();
        ix.cycle(t);
        observe_status(&mut ix, &j, 0, 0, t);
        t += ran * MIN;
        let mut done = j.clone();
        done.status =
            serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}))
                .unwrap();
        ix.apply_job(done, t);
        ix.take_plans();
    }
    let running = job_with_runtime("running", 8, None);
    submit(&mut ix, &running, 0, t);
    ix.take_plans();
    ix.cycle(t);
    let next = job_with_runtime("next", 8, None);
    submit(&mut ix, &next, 1, t);
    ix.cycle(t);
    let estimates = ix.forecast_job(t).run();
    assert_eq!(
        estimates.get("wl-uid-next"),
        Some(&(t + 20 * MIN)),
        "the median, 20 min"
    );
}

#[test]
fn a_malformed_expected_runtime_is_not_used_and_said_once() {
    let j = job_with_runtime("x", 1, Some("a while"));
    let v = sluice_kinds::job::JobView::of(&j, false);
    assert!(v.expected_runtime.unwrap_err().contains("expected a duration"));
    let mut ix = ready_index();
    ix.apply_job(j.clone(), T0);
    let plans = ix.take_plans();
    let warned: Vec<&str> = plans
        .iter()
        .flat_map(|p| &p.steps)
        .filter_map(|s| match s {
            Step::Event(e) if e.reason == "InvalidExpectedRuntime" => Some(e.note.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(warned.len(), 1, "{plans:?}");
    assert!(warned[0].ends_with("start-time estimates use the next source instead"));
    ix.apply_job(j, T0 + 1);
    assert!(
        ix.take_plans()
            .iter()
            .flat_map(|p| &p.steps)
            .all(|s| !matches!(s, Step::Event(e) if e.reason == "InvalidExpectedRuntime"))
    );
    let mut j = mk_job("y", "team-a", 1, 1);
    j.spec.as_mut().unwrap().active_deadline_seconds = Some(600);
    assert_eq!(
        sluice_kinds::job::JobView::of(&j, false).expected_runtime,
        Ok(Some(600_000))
    );
}

/// The GPUs column never adds MIG slices to whole GPUs.
#[test]
fn the_gpus_column_counts_mig_slices_apart() {
    let mut ix = ready_index();
    let mixed: sluice_api::v1alpha1::ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "mixed"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "48"}]}]},
            {"coveredResources": ["nvidia.com/mig-1g.10gb"], "flavors": [
                {"name": "a100-mig", "resources": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "28"}]}]}]}
    }))
    .unwrap();
    ix.apply_flavor(flavor("a100-mig"));
    ix.apply_cluster_queue(mixed);
    // Before: "0/76" (48 GPUs + 28 slices).
    assert_eq!(ix.cluster_queue_gpus("mixed").as_deref(), Some("0/48, MIG 0/28"));
    assert_eq!(ix.cluster_queue_gpus("cluster-gpu").as_deref(), Some("0/8"));
}

/// A Job naming a LocalQueue that does not exist (a typo) is told so on
/// the Job itself, not only in its Workload's condition.
#[test]
fn a_job_naming_a_missing_local_queue_gets_a_warning_event() {
    let mut ix = ready_index();
    let j = mk_job("typo", "taem-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (mut plans, _) = ix.cycle(T0 + 1);
    plans.extend(ix.take_explanations(10, T0 + 2));
    let missing = format!("LocalQueue {NS}/taem-a does not exist");
    let warned: Vec<(&str, Option<&str>, &str)> = plans
        .iter()
        .flat_map(|p| p.steps.iter())
        .filter_map(|s| match s {
            Step::Event(e) => Some((e.reason.as_str(), e.regarding.kind.as_deref(), e.note.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        warned,
        [
            ("LocalQueueMissing", Some("Workload"), missing.as_str()),
            ("LocalQueueMissing", Some("Job"), missing.as_str()),
        ]
    );
}

/// The one list of reasons waiting cannot end holds the engine's codes for
/// them, and none a wait does end.
#[test]
fn the_engines_inadmissible_reasons_are_the_ones_listed() {
    use cond::reasons::waiting_cannot_admit;
    use sluice_scheduler::{Explanation, PendingReason};
    let code = |r: PendingReason| {
        Explanation {
            reason: r,
            flavors: Vec::new(),
        }
        .reason_code()
    };
    for r in [
        PendingReason::NeverFits,
        PendingReason::NeverPlaceable,
        PendingReason::LocalQueueMissing {
            local_queue: "q".into(),
        },
        PendingReason::ClusterQueueMissing {
            cluster_queue: "c".into(),
        },
        PendingReason::ResourceNotCovered {
            pod_set: "p".into(),
            resource: "r".into(),
        },
    ] {
        assert!(waiting_cannot_admit(code(r.clone())), "{r:?}");
    }
    for r in [
        PendingReason::NoFit,
        PendingReason::NoPlacement,
        PendingReason::BlockedByHead,
        PendingReason::Queued,
    ] {
        assert!(!waiting_cannot_admit(code(r.clone())), "{r:?}");
    }
}
