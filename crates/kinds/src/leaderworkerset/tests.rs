use super::*;
use crate::testing::{apply_patches, flavor};
use serde_json::json;
use sluice_api::labels::{HELD_REPLICAS, POD_OWNER};
use std::collections::BTreeMap;

/// 2 groups of a leader (no GPU) and 3 workers (8 GPUs each).
fn lws() -> Value {
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": "serving", "uid": "lws-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 4,
                "leaderTemplate": {"metadata": {"labels": {"role": "leader"}},
                    "spec": {"containers": [{"name": "leader", "image": "x"}]}},
                "workerTemplate": {"metadata": {"labels": {"role": "worker"}}, "spec": {"containers": [{"name": "worker", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
            },
            "rolloutStrategy": {"type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}}
        }
    })
}

fn pod_sets(obj: &Value) -> Vec<(String, i32)> {
    LeaderWorkerSetKind
        .workload(obj, false, &|_| None, &|_| None)
        .unwrap()
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect()
}

#[test]
fn a_leaderworkerset_asks_for_its_groups_leaders_and_workers() {
    assert_eq!(pod_sets(&lws()), [("leader".into(), 2), ("worker".into(), 6)]);
    let mut surging = lws();
    surging["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] = json!(1);
    assert_eq!(pod_sets(&surging), [("leader".into(), 3), ("worker".into(), 9)]);
    // Without a leader template every pod is a worker's.
    let mut workers_only = lws();
    workers_only["spec"]["leaderWorkerTemplate"]
        .as_object_mut()
        .unwrap()
        .remove("leaderTemplate");
    assert_eq!(pod_sets(&workers_only), [("worker".into(), 8)]);
    let mut bad = lws();
    bad["spec"]["leaderWorkerTemplate"]["size"] = json!(0);
    assert_eq!(
        LeaderWorkerSetKind.view(&bad, false).unwrap_err().to_string(),
        "spec.leaderWorkerTemplate.size: 0 must be at least 1"
    );
}

#[test]
fn it_is_held_and_started_on_each_pod_sets_flavors() {
    let obj = lws();
    let v = LeaderWorkerSetKind.view(&obj, false).unwrap();
    let h = apply_patches(&obj, &[(false, LeaderWorkerSetKind.suspend_patch(&v))]);
    assert_eq!(h["metadata"]["annotations"][HELD_REPLICAS], json!("2"));
    let v = LeaderWorkerSetKind.view(&h, false).unwrap();
    assert!(v.suspended);
    let (cpu, h100) = (flavor("cpu"), flavor("h100"));
    let flavors = BTreeMap::from([("leader".to_string(), vec![&cpu]), ("worker".to_string(), vec![&h100])]);
    let started = apply_patches(
        &h,
        &LeaderWorkerSetKind
            .start_patches(&v, &flavors, &BTreeMap::new())
            .unwrap(),
    );
    let t = &started["spec"]["leaderWorkerTemplate"];
    assert_eq!(t["leaderTemplate"]["spec"]["nodeSelector"], json!({"gpu": "cpu"}));
    assert_eq!(t["workerTemplate"]["spec"]["nodeSelector"], json!({"gpu": "h100"}));
    assert_eq!(t["workerTemplate"]["metadata"]["labels"][POD_OWNER], json!("lws-uid"));
    assert_eq!(started["spec"]["replicas"], json!(2));
    let v = LeaderWorkerSetKind.view(&started, false).unwrap();
    let evicted = apply_patches(&started, &[(false, LeaderWorkerSetKind.suspend_patch(&v))]);
    let v = LeaderWorkerSetKind.view(&evicted, false).unwrap();
    let restored = apply_patches(&evicted, &LeaderWorkerSetKind.restore_patches(&v).unwrap());
    assert_eq!(
        restored["spec"]["leaderWorkerTemplate"],
        h["spec"]["leaderWorkerTemplate"]
    );
}

#[test]
fn ready_when_every_group_is() {
    let mut obj = lws();
    obj["status"] = json!({"replicas": 2, "readyReplicas": 1});
    let v = LeaderWorkerSetKind.view(&obj, false).unwrap();
    assert_eq!((v.ready, v.live), (Some(4), 8));
    assert!(!v.all_pods_ready(8));
    obj["status"]["readyReplicas"] = json!(2);
    assert!(LeaderWorkerSetKind.view(&obj, false).unwrap().all_pods_ready(8));
}
