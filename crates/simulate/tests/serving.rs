//! Serving objects in a scenario (`serving: true`): they hold their GPUs
//! until removed, a preempted one waits again losing nothing, and one
//! removed while it waits is withdrawn, not left unadmitted.

use sluice_simulate::report::{self, Report};
use sluice_simulate::scenario;
use sluice_simulate::sim::{self, SimOptions};

const MIN: i64 = 60_000;

/// Queue `team`, 8 GPUs, preempting lower priority: `svc` (serving, 8
/// GPUs, removed 300 m after it arrives at 0), `urgent` (8 GPUs, 30 m,
/// higher priority) at 60 m, `late` (serving, 8 GPUs, removed 20 m after it
/// arrives at 100 m: it never gets in before).
fn text() -> String {
    "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec: {}\n---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team}
spec: {namespaceSelector: {}, preemption: {withinClusterQueue: LowerPriority}, resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]}]}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {name: jobs, namespace: team}
spec: {clusterQueue: team}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
metadata: {name: serving}
spec:
  jobs:
  - {name: svc, serving: true, namespace: team, queue: jobs, arrival: 0s, requests: {nvidia.com/gpu: 8}, duration: 300m}
  - {name: urgent, namespace: team, queue: jobs, arrival: 60m, priorityClass: high, requests: {nvidia.com/gpu: 8}, duration: 30m}
  - {name: late, serving: true, namespace: team, queue: jobs, arrival: 100m, requests: {nvidia.com/gpu: 8}, duration: 20m}
"
    .to_string()
}

fn run() -> Report {
    let s = scenario::load("serving.yaml", &text()).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions {
        eviction_delay: 0,
        coalesce: 0,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    report::build(&s.name, &opts, &result)
}

#[test]
fn a_serving_object_holds_its_gpus_until_removed_and_waits_again_when_preempted() {
    let r = run();
    let svc = r.workloads.iter().find(|w| w.name == "team/svc").unwrap();
    let urgent = r.workloads.iter().find(|w| w.name == "team/urgent").unwrap();
    // Preempted at 60 m by urgent, back at 90 m when urgent finishes, and
    // removed at 300 m: it never finished by running.
    assert_eq!(urgent.wait_ms, Some(0), "urgent preempts at once");
    let t = &r.totals;
    assert_eq!(t.preemptions, 1);
    assert_eq!(t.withdrawn, 1, "late was removed while it waited");
    assert_eq!(t.never_admitted, 0);
    assert!(r.pending_at_end.is_empty(), "{:?}", r.pending_at_end);
    // The makespan is svc's removal: nothing ran past it.
    assert_eq!(r.makespan_ms, 300 * MIN);
    // svc's GPUs were not freed by running: the run ends with its removal.
    assert_eq!(svc.gpu_hours_lost, 0.0, "a serving object loses no work when preempted");
}
