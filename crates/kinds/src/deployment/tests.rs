use super::*;
use crate::job::ORIGINAL_SCHEDULING;
use crate::testing::{apply_patches, flavor};
use serde_json::json;
use sluice_api::labels::{HELD_REPLICAS, POD_OWNER};
use std::collections::BTreeMap;

/// A Deployment of `replicas` pods of 2 GPUs each, as the API server
/// returns it (defaults filled in: a RollingUpdate of 25%), queued in
/// team-a, with a nodeSelector of its own.
fn deployment(replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "serving", "uid": "d-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "llm"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {"nodeSelector": {"zone": "a"},
                         "containers": [{"name": "vllm", "image": "vllm",
                             "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
            }
        }
    })
}

fn held(obj: &Value) -> Value {
    let v = DeploymentKind.view(obj, false).unwrap();
    apply_patches(obj, &[(false, DeploymentKind.suspend_patch(&v))])
}

#[test]
fn a_running_deployment_is_held_at_zero_with_its_replicas_kept() {
    let obj = deployment(3);
    let running = DeploymentKind.view(&obj, false).unwrap();
    assert!(!running.suspended);
    assert_eq!(running.replicas, Some(3));
    let h = held(&obj);
    assert_eq!(h["spec"]["replicas"], json!(0));
    assert_eq!(h["metadata"]["annotations"][HELD_REPLICAS], json!("3"));
    let v = DeploymentKind.view(&h, false).unwrap();
    assert!(v.suspended);
    assert_eq!(v.replicas, Some(3));
    // Held twice: the same.
    assert_eq!(held(&h), h);
}

#[test]
fn its_workload_asks_for_its_replicas_and_rollout_surge() {
    let wl = DeploymentKind
        .workload(&held(&deployment(4)), false, &|_| None, &|_| None)
        .unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("deployment-llm"));
    assert_eq!(wl.spec.queue_name, "team-a");
    let ps = &wl.spec.pod_sets;
    assert_eq!(ps.len(), 1);
    // 4 replicas and 25% of them (1) above during a rollout.
    assert_eq!((ps[0].name.as_str(), ps[0].count), ("main", 5));
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.api_version.as_str()),
        ("Deployment", "apps/v1")
    );

    let mut no_surge = deployment(4);
    no_surge["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = json!(0);
    let wl = DeploymentKind.workload(&no_surge, false, &|_| None, &|_| None).unwrap();
    assert_eq!(wl.spec.pod_sets[0].count, 4);
    let mut recreate = deployment(4);
    recreate["spec"]["strategy"] = json!({"type": "Recreate"});
    assert_eq!(DeploymentKind.view(&recreate, false).unwrap().pods, 4);
}

#[test]
fn nothing_is_queued_for_a_deployment_that_asks_for_no_replicas() {
    let err = DeploymentKind
        .workload(&held(&deployment(0)), false, &|_| None, &|_| None)
        .unwrap_err();
    assert_eq!(
        err,
        JobError::NothingAsked {
            field: "spec.replicas".into()
        }
    );
}

#[test]
fn it_starts_on_its_flavor_and_is_put_back_exactly() {
    let h = held(&deployment(2));
    let v = DeploymentKind.view(&h, false).unwrap();
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("main".to_string(), vec![&a100])]);
    let started = apply_patches(
        &h,
        &DeploymentKind.start_patches(&v, &flavors, &BTreeMap::new()).unwrap(),
    );
    assert_eq!(started["spec"]["replicas"], json!(2));
    assert!(started["metadata"]["annotations"].get(HELD_REPLICAS).is_none());
    let pod = &started["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"zone": "a", "gpu": "a100"}));
    assert_eq!(pod["tolerations"][0]["key"], json!("nvidia.com/gpu"));
    assert_eq!(
        started["spec"]["template"]["metadata"]["labels"][POD_OWNER],
        json!("d-uid")
    );
    assert_eq!(started["spec"]["template"]["metadata"]["labels"]["app"], json!("llm"));
    let running = DeploymentKind.view(&started, false).unwrap();
    assert!(!running.suspended);
    assert_eq!(
        crate::pods_selector_of(&running),
        format!("{POD_OWNER}=d-uid"),
        "its pods are found by the label Sluice put on them"
    );
    // Evicted: held, then put back as the user wrote it.
    let evicted = held(&started);
    let v = DeploymentKind.view(&evicted, false).unwrap();
    let restored = apply_patches(&evicted, &DeploymentKind.restore_patches(&v).unwrap());
    assert_eq!(restored["spec"]["template"], h["spec"]["template"]);
    assert!(restored["metadata"]["annotations"].get(ORIGINAL_SCHEDULING).is_none());
    assert_eq!(restored["metadata"]["annotations"][HELD_REPLICAS], json!("2"));
}

#[test]
fn the_webhook_defaults_the_api_surge_to_zero_and_keeps_a_written_one() {
    let d = DeploymentKind.create_defaults(&deployment(2));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].pointer, "/spec/strategy/rollingUpdate/maxSurge");
    assert_eq!(d[0].value, json!(0));
    assert!(
        d[0].why
            .starts_with("spec.strategy.rollingUpdate.maxSurge: set to 0 (was \"25%\")"),
        "{}",
        d[0].why
    );
    let mut written = deployment(2);
    written["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = json!(1);
    assert!(DeploymentKind.create_defaults(&written).is_empty());
    let mut recreate = deployment(2);
    recreate["spec"]["strategy"] = json!({"type": "Recreate"});
    assert!(DeploymentKind.create_defaults(&recreate).is_empty());
    let mut bare = deployment(2);
    bare["spec"].as_object_mut().unwrap().remove("strategy");
    let d = DeploymentKind.create_defaults(&bare);
    assert_eq!(d[0].pointer, "/spec/strategy");
    assert_eq!(
        d[0].value,
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}})
    );
}

#[test]
fn its_counts_are_its_replicas_and_surge() {
    let counts: Vec<(String, i64)> = DeploymentKind
        .counts(&deployment(4))
        .into_iter()
        .map(|c| (c.field, c.value))
        .collect();
    assert_eq!(counts[0], ("spec.replicas".to_string(), 4));
    assert_eq!(counts[1].1, 1);
    let t = DeploymentKind.templates(&deployment(1));
    assert_eq!(t[0].spec, "/spec/template/spec");
    assert_eq!(t[0].field, "spec.template.spec");
}

#[test]
fn ready_when_every_replica_is() {
    let mut obj = deployment(2);
    obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = json!(1);
    obj["status"] = json!({"replicas": 2, "readyReplicas": 1});
    let v = DeploymentKind.view(&obj, false).unwrap();
    assert!(!v.all_pods_ready(3));
    obj["status"]["readyReplicas"] = json!(2);
    let v = DeploymentKind.view(&obj, false).unwrap();
    assert!(v.all_pods_ready(3), "its surge pods are not waited for");
    assert_eq!(v.live, 2);
}
