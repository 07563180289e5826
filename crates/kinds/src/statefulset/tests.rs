use super::*;
use crate::testing::{apply_patches, flavor};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;
use sluice_api::labels::HELD_REPLICAS;
use std::collections::BTreeMap;

fn statefulset(replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "serving", "uid": "s-uid",
                     "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {
            "replicas": replicas, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "main", "image": "x",
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        }
    })
}

#[test]
fn a_statefulset_is_held_started_and_asks_for_its_replicas() {
    let obj = statefulset(3);
    let v = StatefulSetKind.view(&obj, false).unwrap();
    let h = apply_patches(&obj, &[(false, StatefulSetKind.suspend_patch(&v))]);
    assert_eq!(h["metadata"]["annotations"][HELD_REPLICAS], json!("3"));
    let v = StatefulSetKind.view(&h, false).unwrap();
    assert!(v.suspended);
    let wl = StatefulSetKind.workload(&h, false, &|_| None, &|_| None).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("statefulset-db"));
    assert_eq!(wl.spec.pod_sets[0].count, 3);
    let a100 = flavor("a100");
    let flavors = BTreeMap::from([("main".to_string(), vec![&a100])]);
    let started = apply_patches(
        &h,
        &StatefulSetKind.start_patches(&v, &flavors, &BTreeMap::new()).unwrap(),
    );
    assert_eq!(started["spec"]["replicas"], json!(3));
    assert_eq!(
        started["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu": "a100"})
    );
    assert!(!StatefulSetKind.view(&started, false).unwrap().suspended);
}

#[test]
fn a_leaderworkersets_statefulsets_are_its_own() {
    // The leaders': controlled by the LeaderWorkerSet.
    let mut leaders = statefulset(2);
    leaders["metadata"]["ownerReferences"] = json!([{"apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet", "name": "llm", "uid": "lws-uid", "controller": true}]);
    let v = StatefulSetKind.view(&leaders, false).unwrap();
    let m = v.managed_by.unwrap();
    assert_eq!(
        (m.kind, m.name.as_str(), m.uid.as_str()),
        (JobKind::LeaderWorkerSet, "llm", "lws-uid")
    );
    // A group's workers': controlled by its leader pod, named by the label.
    let mut workers = statefulset(3);
    workers["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = json!("llm");
    workers["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "llm-0", "uid": "pod-uid", "controller": true}]);
    let v = StatefulSetKind.view(&workers, false).unwrap();
    let m = v.managed_by.unwrap();
    assert_eq!(
        (m.kind, m.name.as_str(), m.uid.as_str()),
        (JobKind::LeaderWorkerSet, "llm", "")
    );
    // The label alone (no pod controls it) names no maker.
    let mut labelled = statefulset(3);
    labelled["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = json!("llm");
    assert!(StatefulSetKind.view(&labelled, false).unwrap().managed_by.is_none());
    let _unused: Option<OwnerReference> = None;
}
