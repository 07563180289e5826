use super::events::decode;
use super::*;
use crate::track;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::json;
use sluice_api::v1alpha1::Workload;

#[test]
fn the_finished_mark_is_a_job_completion() {
    let now: Timestamp = "2025-01-02T03:04:05Z".parse().expect("a time");
    let b = finish_body("sb-1-cohort-0", "small-lq-0-3", Some(1), 200, now);
    assert_eq!(b["apiVersion"], "sluice.dev/v1alpha1");
    assert_eq!(b["metadata"]["name"], "small-lq-0-3");
    let c = &b["status"]["conditions"][0];
    assert_eq!(c["type"], "Finished");
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "Succeeded");
    assert_eq!(c["observedGeneration"], 1);
    // Only the condition: the rest of the status stays the controller's.
    assert_eq!(b["status"].as_object().map(|o| o.len()), Some(1));
    // It reads back as Finished, releasing quota.
    let wl: Workload = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "template": {}}]},
        "status": b["status"].clone(),
    }))
    .expect("a Workload");
    let obs = track::observe(&wl).expect("readable");
    assert!(obs.finished && obs.holding.is_none());
}

#[tokio::test]
async fn a_scenario_that_cannot_be_planned_exits_2_before_any_call() {
    // A LocalQueue namespace of 58 characters: with the run id in front
    // it is no DNS label. Refused with the scenario errors' exit status,
    // before a kubeconfig is even read.
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }
    let ns = "n".repeat(58);
    let scenario = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {{name: default}}\nspec: {{}}\n---\n\
         apiVersion: sluice.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec: {{namespaceSelector: {{}}, resourceGroups: [{{coveredResources: [cpu], flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 2}}]}}]}}]}}\n---\n\
         apiVersion: sluice.dev/v1alpha1\nkind: LocalQueue\nmetadata: {{name: lq, namespace: {ns}}}\nspec: {{clusterQueue: cq}}\n---\n\
         apiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata: {{name: t}}\nspec:\n  generators:\n  - {{class: c, count: 1, interval: 1s, duration: 1s, requests: {{cpu: 1}}, queues: [{ns}/lq]}}\n"
    );
    let path = std::env::temp_dir().join(format!("sluice-bench-plan-{}.yaml", std::process::id()));
    std::fs::write(&path, scenario).expect("written");
    let cli = <Cli as clap::Parser>::try_parse_from([
        "run",
        "--scenario",
        path.to_str().expect("a path"),
        "--run-id",
        "sb-long",
        "--quiet",
    ])
    .expect("arguments");
    let code = command(cli.args).await.expect("refused, not failed");
    let _ = std::fs::remove_file(&path);
    assert_eq!(code, ExitCode::from(2));
}

#[test]
fn watch_objects_are_decoded_by_key() {
    let o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "generation": 3},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "template": {}}]},
    }))
    .expect("an object");
    let (key, obs) = decode(o);
    assert_eq!(key, "ns/w");
    assert_eq!(obs.map(|o| o.generation), Ok(Some(3)));
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": "no"},
    }))
    .expect("an object");
    assert!(decode(bad).1.unwrap_err().contains("not a readable Workload"));
}

#[tokio::test]
async fn an_unwritable_json_file_fails_before_the_run() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }
    let dir = std::env::temp_dir().join(format!("sluice-bench-json-{}", std::process::id()));
    let missing = dir.join("no-such-dir/report.json");
    let cli = <Cli as clap::Parser>::try_parse_from([
        "run",
        "--scenario",
        "deep-queue",
        "--json-file",
        missing.to_str().expect("a path"),
        "--quiet",
    ])
    .expect("arguments");
    let err = command(cli.args).await.unwrap_err();
    assert!(format!("{err:#}").starts_with("cannot write --json-file "), "{err:#}");

    // A writable one gets the value as pretty JSON, one line feed at the end.
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("report.json");
    let file = create_file(&path, "--json-file").expect("created");
    write_json(&path, file, &json!({"format": 1, "wallMs": 5})).expect("written");
    let text = std::fs::read_to_string(&path).expect("readable");
    assert_eq!(text, "{\n  \"format\": 1,\n  \"wallMs\": 5\n}\n");
    std::fs::remove_dir_all(&dir).expect("removed");
}
