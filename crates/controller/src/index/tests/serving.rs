//! Serving objects in the index (Deployments here; StatefulSets and
//! LeaderWorkerSets share the protocol), and the GPU quota backstop of a
//! namespace that queues every object.

use super::*;
use sluice_api::labels::HELD_REPLICAS;
use sluice_kinds::JobKind;

/// A Deployment of `replicas` pods of 2 GPUs each in team-a, as observed:
/// held by the webhook (`held`), or running without admission.
fn deployment(replicas: i64, held: bool) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": NS, "uid": "d-uid", "labels": {"sluice.dev/queue": "team-a"},
                     "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "llm"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                 "template": {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [
                     {"name": "vllm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}},
        "status": {}
    });
    if held {
        d["metadata"]["annotations"] = json!({HELD_REPLICAS: replicas.to_string()});
        d["spec"]["replicas"] = json!(0);
    }
    d
}

fn serving_index() -> Index {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::Deployment);
    ready_index_with(config)
}

/// Applies `obj` and stores the Workload its plan creates, as the API
/// server would; returns the plans.
fn observe(ix: &mut Index, obj: &Value, now: i64) -> Vec<Plan> {
    ix.apply_object(JobKind::Deployment, obj, now);
    let plans = ix.take_plans();
    for p in &plans {
        if let Some(Step::ApplyWorkload(wl)) = p.steps.first() {
            let mut wl = (**wl).clone();
            wl.metadata.uid = Some("wl-uid-llm".into());
            wl.metadata.generation = Some(1);
            wl.metadata.creation_timestamp = Some(time_of(T0));
            ix.apply_workload(wl, now);
        }
    }
    plans
}

fn merge_patches(plans: &[Plan]) -> Vec<Value> {
    plans.iter().flat_map(job_patches).map(|(_, p)| p.clone()).collect()
}

#[test]
fn a_deployment_runs_once_admitted_and_grows_only_through_its_queue() {
    let mut ix = serving_index();
    let plans = observe(&mut ix, &deployment(3, true), T0);
    assert_eq!(purposes(&plans), ["create_workload"]);
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit"]);
    let start = &merge_patches(&plans)[0];
    assert_eq!(start["spec"]["replicas"], json!(3));
    assert_eq!(start["metadata"]["annotations"][HELD_REPLICAS], Value::Null);
    assert_eq!(
        start["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu": "a100"})
    );
    // It runs 3 as started: nothing more to do.
    let mut running = deployment(3, false);
    json_patch::merge(&mut running, start);
    assert!(observe(&mut ix, &running, T0 + 2000).is_empty());
    // Scaled to 8 (16 GPUs on an 8-GPU queue) without the webhook: held
    // again, its workload evicted, to be made again for what it asks now.
    let mut grown = running.clone();
    grown["spec"]["replicas"] = json!(8);
    let plans = observe(&mut ix, &grown, T0 + 3000);
    assert_eq!(purposes(&plans), ["evict"], "{plans:?}");
    let hold = &merge_patches(&plans)[0];
    assert_eq!(hold["spec"]["replicas"], json!(0));
    assert_eq!(hold["metadata"]["annotations"][HELD_REPLICAS], json!("8"));
}

#[test]
fn a_deployment_that_runs_without_admission_is_held_with_its_replicas_kept() {
    let mut ix = serving_index();
    let plans = observe(&mut ix, &deployment(2, false), T0);
    assert_eq!(purposes(&plans), ["suspend_job", "create_workload"]);
    let hold = &merge_patches(&plans)[0];
    assert_eq!(
        hold,
        &json!({"metadata": {"annotations": {HELD_REPLICAS: "2"}}, "spec": {"replicas": 0}})
    );
}

#[test]
fn a_deployment_held_with_nothing_asked_has_no_workload() {
    let mut ix = serving_index();
    let plans = observe(&mut ix, &deployment(0, true), T0);
    assert!(plans.is_empty(), "{plans:?}");
    assert!(ix.errors().is_empty(), "{:?}", ix.errors());
}

#[test]
fn a_namespace_that_queues_every_object_gets_a_gpu_quota_raised_before_its_admissions() {
    let mut config = IndexConfig::default();
    config.integrations.insert(JobKind::Deployment);
    let mut ix = ready_index_with(config);
    ix.apply_namespace(
        NS,
        BTreeMap::from([("sluice.dev/default-queue".to_string(), "enabled".to_string())]),
        T0,
    );
    ix.take_plans();
    // Nothing admitted yet: the quota says 0.
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["gpu_quota"]);
    let Step::ApplyGpuQuota { key, hard } = &plans[0].steps[0] else {
        panic!("{:?}", plans[0])
    };
    assert_eq!(key, &ObjKey::new(NS, "sluice-admitted-gpus"));
    assert_eq!(
        hard,
        &BTreeMap::from([("requests.nvidia.com/gpu".to_string(), "0".to_string())])
    );
    // A Deployment of 3 × 2 GPUs is admitted: the raise to 6 goes first.
    observe(&mut ix, &deployment(3, true), T0 + 500);
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["gpu_quota", "admit"]);
    let Step::ApplyGpuQuota { hard, .. } = &plans[0].steps[0] else {
        panic!()
    };
    assert_eq!(hard["requests.nvidia.com/gpu"], "6");
    // Nothing changed: nothing written (until the minute's re-assertion).
    assert!(ix.cycle(T0 + 2000).0.is_empty());
    assert_eq!(purposes(&ix.cycle(T0 + 62_000).0), ["gpu_quota"]);
    // The namespace stops queueing every object: its quota is deleted.
    ix.apply_namespace(NS, BTreeMap::new(), T0 + 63_000);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 64_000);
    assert!(
        plans.iter().any(|p| matches!(p.steps[0], Step::DeleteGpuQuota { .. })),
        "{plans:?}"
    );
}

#[test]
fn a_namespace_the_admin_trusts_with_gpu_system_pods_gets_no_quota() {
    let mut ix = serving_index();
    ix.apply_namespace(
        NS,
        BTreeMap::from([
            ("sluice.dev/default-queue".to_string(), "enabled".to_string()),
            ("sluice.dev/allow-gpu-fixes-skip".to_string(), "true".to_string()),
        ]),
        T0,
    );
    ix.take_plans();
    assert!(ix.cycle(T0).0.is_empty());
    // Off by flag: none either.
    let mut config = IndexConfig {
        gpu_quota_backstop: false,
        ..IndexConfig::default()
    };
    config.integrations.insert(JobKind::Deployment);
    let mut ix = ready_index_with(config);
    ix.apply_namespace(
        NS,
        BTreeMap::from([("sluice.dev/default-queue".to_string(), "enabled".to_string())]),
        T0,
    );
    ix.take_plans();
    assert!(ix.cycle(T0).0.is_empty());
}
