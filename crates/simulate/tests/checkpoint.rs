//! Preemption notices and checkpoints in a scenario: a ClusterQueue's
//! `preemption.noticeSeconds` lets its victims run on, `checkpointOnNotice`
//! saves everything, `checkpointInterval` saves up to the last periodic
//! checkpoint, and the report counts only what was not kept as lost.

use sluice_simulate::report::{self, Report};
use sluice_simulate::scenario;
use sluice_simulate::sim::{self, SimOptions};

const MIN: i64 = 60_000;

/// Queue `team`, 8 GPUs, preempting lower priority within it, giving
/// `notice` (none when empty): `low` (8 GPUs, 100 m, saving as `saving`
/// says) from 0, `high` (8 GPUs, 10 m, higher priority) at 50 m.
fn text(notice: &str, saving: &str) -> String {
    let notice = if notice.is_empty() {
        String::new()
    } else {
        format!(", noticeSeconds: {notice}")
    };
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: h100}}\nspec: {{}}\n---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 100
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec: {{namespaceSelector: {{}}, preemption: {{withinClusterQueue: LowerPriority{notice}}}, resourceGroups: [{{coveredResources: [nvidia.com/gpu], flavors: [{{name: h100, resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]}}]}}]}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
metadata: {{name: notice}}
spec:
  jobs:
  - {{name: low, namespace: team, queue: jobs, arrival: 0s, requests: {{nvidia.com/gpu: 8}}, duration: 100m{saving}}}
  - {{name: high, namespace: team, queue: jobs, arrival: 50m, priorityClass: high, requests: {{nvidia.com/gpu: 8}}, duration: 10m}}
"
    )
}

fn run(text: &str) -> Report {
    let s = scenario::load("notice.yaml", text).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions {
        eviction_delay: 0,
        coalesce: 0,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    report::build(&s.name, &opts, &result)
}

/// `low`'s GPU-hours lost, when `high` was admitted (after arrival), and
/// when `low` finished (after its arrival).
fn figures(r: &Report) -> (f64, i64, i64) {
    let of = |n: &str| r.workloads.iter().find(|w| w.name == format!("team/{n}")).unwrap();
    let (low, high) = (of("low"), of("high"));
    (low.gpu_hours_lost, high.wait_ms.unwrap(), low.completion_ms.unwrap())
}

#[test]
fn without_notice_or_checkpoints_the_whole_run_is_lost_and_done_again() {
    // 50 m × 8 GPUs lost; high runs 50–60 m; low runs 100 m again from 60 m.
    let (lost, high_wait, low_done) = figures(&run(&text("", "")));
    assert!((lost - 50.0 / 60.0 * 8.0).abs() < 1e-6, "{lost}");
    assert_eq!(high_wait, 0);
    assert_eq!(low_done, 160 * MIN);
}

#[test]
fn periodic_checkpoints_keep_the_work_up_to_the_last_one() {
    // Checkpoints at 30 m: 20 m lost; 70 m left after high (60 m) → 130 m.
    let (lost, _, low_done) = figures(&run(&text("", ", checkpointInterval: 30m")));
    assert!((lost - 20.0 / 60.0 * 8.0).abs() < 1e-6, "{lost}");
    assert_eq!(low_done, 130 * MIN);
}

#[test]
fn a_notice_with_a_checkpoint_on_it_keeps_all_the_work_and_holds_the_preemptor_off_that_long() {
    // Notice 300 s; low saves in 2 m: high is admitted at 52 m, runs to
    // 62 m; low has 50 m left → done at 112 m. Only the 2 m of saving are
    // lost (GPUs busy, no progress).
    let (lost, high_wait, low_done) = figures(&run(&text("300", ", checkpointOnNotice: 2m")));
    assert!((lost - 2.0 / 60.0 * 8.0).abs() < 1e-6, "{lost}");
    assert_eq!(high_wait, 2 * MIN);
    assert_eq!(low_done, 112 * MIN);
}

#[test]
fn a_notice_without_a_checkpoint_runs_it_out_and_loses_what_was_not_saved() {
    // Notice 300 s, checkpoints every 30 m: runs to 55 m, keeps 30 m.
    let (lost, high_wait, _) = figures(&run(&text("300", ", checkpointInterval: 30m")));
    assert!((lost - 25.0 / 60.0 * 8.0).abs() < 1e-6, "{lost}");
    assert_eq!(high_wait, 5 * MIN);
}
