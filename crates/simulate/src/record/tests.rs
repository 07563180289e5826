use serde_json::json;

use super::*;

const T0: &str = "2026-11-20T00:00:00Z";

fn at(secs: i64) -> String {
    let t: k8s_openapi::jiff::Timestamp = T0.parse().unwrap();
    (t + k8s_openapi::jiff::SignedDuration::from_secs(secs)).to_string()
}

fn ms(secs: i64) -> Millis {
    T0.parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_millisecond() + secs * 1000
}

/// A Workload as Kueue or Sluice writes it, created at `created` (s after
/// T0), quota reserved at `reserved`, finished at `finished`.
fn workload(name: &str, created: i64, reserved: Option<i64>, finished: Option<i64>, pod_sets: Value) -> Value {
    let mut conditions = Vec::new();
    if let Some(r) = reserved {
        conditions.push(json!({"type": "QuotaReserved", "status": "True", "lastTransitionTime": at(r)}));
    }
    if let Some(f) = finished {
        conditions.push(json!({"type": "Finished", "status": "True", "lastTransitionTime": at(f)}));
    }
    json!({
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": at(created)},
        "spec": {"queueName": "user-queue", "priorityClassName": "high", "podSets": pod_sets},
        "status": {"conditions": conditions}
    })
}

fn gpus(count: u32, gpus: &str) -> Value {
    json!([{"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"nvidia.com/gpu": gpus, "cpu": "500m"}}},
        {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}])
}

fn window() -> Window {
    Window {
        since_ms: ms(0),
        now_ms: ms(600),
        unadmitted_runtime_ms: 3_600_000,
    }
}

#[test]
fn workloads_become_jobs_with_their_arrival_run_time_and_pod_requests() {
    let wls = [
        workload("finished", 10, Some(40), Some(100), gpus(2, "4")),
        workload("running", 20, Some(50), None, gpus(1, "1")),
        workload("waiting", 30, None, None, gpus(1, "8")),
        workload("before", -5, Some(0), None, gpus(1, "1")),
    ];
    let r = record(&wls, window());
    assert_eq!(
        r.trace,
        "apiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata:\n  name: recorded\nspec:\n  jobs:\n\
         \x20   - name: team-a-finished\n      namespace: team-a\n      queue: user-queue\n      priorityClass: high\n      arrival: 10s\n      duration: 60s\n      pods: 2\n      requests: {cpu: \"1500m\", memory: \"1Gi\", nvidia.com/gpu: \"4\"}\n\
         \x20   - name: team-a-running\n      namespace: team-a\n      queue: user-queue\n      priorityClass: high\n      arrival: 20s\n      duration: 550s\n      pods: 1\n      requests: {cpu: \"1500m\", memory: \"1Gi\", nvidia.com/gpu: \"1\"}\n\
         \x20   - name: team-a-waiting\n      namespace: team-a\n      queue: user-queue\n      priorityClass: high\n      arrival: 30s\n      duration: 3600s\n      pods: 1\n      requests: {cpu: \"1500m\", memory: \"1Gi\", nvidia.com/gpu: \"8\"}\n"
    );
    assert_eq!(r.waits["team-a/user-queue"], [Some(30_000), Some(30_000), None]);
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
}

#[test]
fn several_pod_sets_are_one_gang_and_bad_workloads_are_skipped_with_why() {
    let two = json!([
        {"name": "launcher", "count": 1, "template": {"spec": {"containers": [{"name": "l", "resources": {"requests": {"cpu": "1"}}}]}}},
        {"name": "worker", "count": 4, "minCount": 2, "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}
    ]);
    let mut no_queue = workload("lost", 5, None, None, gpus(1, "1"));
    no_queue["spec"]["queueName"] = json!("");
    let empty = workload(
        "empty",
        6,
        None,
        None,
        json!([{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}]),
    );
    let r = record(&[workload("mpi", 1, Some(2), Some(62), two), no_queue, empty], window());
    assert!(r.trace.contains("    - name: team-a-mpi-launcher\n"), "{}", r.trace);
    assert!(
        r.trace
            .contains("      pods: 4\n      minCount: 2\n      gang: team-a-mpi\n"),
        "{}",
        r.trace
    );
    assert_eq!(r.trace.matches("gang: team-a-mpi").count(), 2);
    assert_eq!(
        r.skipped,
        [
            "team-a/lost: no spec.queueName",
            "team-a/empty: spec.podSets[0] (main): its containers request nothing"
        ]
    );
}

#[test]
fn a_recorded_trace_loads_and_replays_in_the_simulator() {
    let wls = [
        workload("one", 0, Some(0), Some(60), gpus(1, "1")),
        workload("two", 1, Some(60), Some(120), gpus(1, "1")),
    ];
    let r = record(&wls, window());
    let scenario = format!(
        "apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: a100}}
spec: {{}}
---
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 100
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: a100
      resources:
      - {{name: nvidia.com/gpu, nominalQuota: 1}}
      - {{name: cpu, nominalQuota: 8}}
      - {{name: memory, nominalQuota: 64Gi}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: user-queue, namespace: team-a}}
spec: {{clusterQueue: team}}
---
{}",
        r.trace
    );
    let s = crate::scenario::load("recorded.yaml", &scenario).unwrap_or_else(|e| panic!("{e:#?}\n{scenario}"));
    let result = crate::sim::run(&s, &crate::sim::SimOptions::default(), &mut |_| {}).expect("runs");
    assert_eq!(result.workloads.len(), 2);
    // One GPU: the second waits for the first (60 s), as on the cluster,
    // where a cycle gathers the events of 50 ms: the first is admitted
    // 50 ms after it arrives, the second 50 ms after the first finishes.
    let admitted: Vec<Option<Millis>> = result.records.iter().map(|w| w.first_start()).collect();
    assert_eq!(admitted, [Some(50), Some(60_100)]);
}
