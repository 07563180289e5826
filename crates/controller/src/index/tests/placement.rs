//! Placement in the index: Nodes and bound pods reach the engine, pods of
//! admitted workloads are told apart by their owner label, and pod sets
//! are pinned to their topology domain.

use super::*;
use std::sync::Arc;

fn placing_index(cq_gpus: u32) -> Index {
    let mut ix = Index::new(IndexConfig {
        placement: sluice_scheduler::PlacementMode::Nodes,
        ..IndexConfig::default()
    });
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", cq_gpus));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix
}

fn gpu_node(name: &str, gpus: i64, labels: &[(&str, &str)]) -> eng::NodeSpec {
    let mut l: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    l.insert("gpu".into(), "a100".into());
    eng::NodeSpec {
        name: name.into(),
        labels: l,
        taints: Vec::new(),
        allocatable: BTreeMap::from([("nvidia.com/gpu".to_string(), gpus * 1000)]),
        schedulable: true,
    }
}

fn pod(node: &str, gpus: i64, owner: Option<&str>) -> Option<Arc<PodEntry>> {
    let bound = sluice_convert::nodes::BoundPod {
        node: node.into(),
        requests: BTreeMap::from([("nvidia.com/gpu".to_string(), gpus * 1000), ("pods".to_string(), 1000)]),
        terminating: false,
    };
    let labels = owner.map(|uid| BTreeMap::from([("controller-uid".to_string(), uid.to_string())]));
    Some(Arc::new(PodEntry::new(NS, labels.as_ref(), bound)))
}

/// Job `name` and its stored Workload.
fn queue_job(ix: &mut Index, name: &str, pods: i32, gpus: u32, created_s: i64) {
    let j = mk_job(name, "team-a", pods, gpus);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, created_s), T0);
}

fn admitted(plans: &[Plan]) -> Vec<String> {
    plans
        .iter()
        .filter_map(|p| match &p.purpose {
            Purpose::Admit { uid } => Some(uid.clone()),
            _ => None,
        })
        .collect()
}

fn pending_reason(ix: &Index, job: &str) -> Option<String> {
    ix.workload_status(&wkey(job))
        .and_then(|s| s.condition(cond::QUOTA_RESERVED))
        .filter(|c| c.status == "False")
        .map(|c| c.reason.clone())
}

#[test]
fn a_pod_larger_than_every_node_is_told_no_node_could_ever_hold_it_and_a_gang_that_fits_the_nodes_is_admitted() {
    let mut ix = placing_index(16);
    ix.apply_node(gpu_node("n-a", 4, &[]));
    ix.apply_node(gpu_node("n-b", 4, &[]));
    queue_job(&mut ix, "big", 1, 8, 0);
    queue_job(&mut ix, "pair", 2, 4, 1);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(admitted(&plans), ["wl-uid-pair"]);
    assert_eq!(pending_reason(&ix, "big").as_deref(), Some("NeverPlaceable"));
    // A Warning Event on the Workload and on the Job, once.
    let later = ix.take_plans();
    let warned: Vec<crate::plan::EventSpec> = plans
        .iter()
        .chain(&later)
        .flat_map(|p| p.steps.iter())
        .filter_map(|s| match s {
            Step::Event(e) if e.reason == "NeverPlaceable" => Some(e.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        warned
            .iter()
            .map(|e| (e.type_, e.regarding.kind.as_deref()))
            .collect::<Vec<_>>(),
        [("Warning", Some("Workload")), ("Warning", Some("Job"))]
    );
    assert!(
        warned[0]
            .note
            .contains("a pod needs 8 nvidia.com/gpu; none of its 2 node(s) has that much allocatable"),
        "{}",
        warned[0].note
    );
    // The index keeps statuses without the explanation's text: read the write.
    let written = plans
        .iter()
        .filter(|p| !matches!(p.purpose, Purpose::Admit { .. }))
        .find_map(|p| match &p.steps[0] {
            Step::ApplyWorkloadStatus { key, status, .. } if key.name == "job-big" => Some(status.clone()),
            _ => None,
        })
        .expect("job-big's explanation is written");
    let message = condition(&written, cond::QUOTA_RESERVED).2.to_string();
    assert!(
        message.contains(
            "no node could ever hold it, even with nothing else running: more quota or waiting does not help"
        ),
        "{message}"
    );
    let flavors = &written.pending.as_ref().expect("pending").flavors;
    assert_eq!(flavors[0].reason, "NeverOnNodes");
    assert!(
        flavors[0]
            .message
            .contains("none of its 2 node(s) has that much allocatable: the largest has 4 allocatable (n-a)"),
        "{}",
        flavors[0].message
    );
}

#[test]
fn foreign_pods_take_room_and_their_end_admits_what_waited() {
    let mut ix = placing_index(8);
    ix.apply_node(gpu_node("n-a", 8, &[]));
    ix.apply_pod("kube-system/hog", pod("n-a", 6, None));
    queue_job(&mut ix, "train", 1, 4, 0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert!(admitted(&plans).is_empty());
    assert_eq!(pending_reason(&ix, "train").as_deref(), Some("NoPlacement"));
    ix.delete_pod("kube-system/hog");
    let (plans, _) = ix.cycle(T0 + 6000);
    assert_eq!(admitted(&plans), ["wl-uid-train"]);
}

#[test]
fn bound_pods_of_an_admitted_workload_replace_its_reservation_instead_of_adding_to_it() {
    let mut ix = placing_index(16);
    ix.apply_node(gpu_node("n-a", 8, &[]));
    ix.apply_node(gpu_node("n-b", 8, &[]));
    queue_job(&mut ix, "first", 2, 4, 0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(admitted(&plans), ["wl-uid-first"]);
    // Best fit reserved both pods on one node; the scheduler spread them.
    ix.apply_pod(&format!("{NS}/first-0"), pod("n-a", 4, Some("job-uid-first")));
    ix.apply_pod(&format!("{NS}/first-1"), pod("n-b", 4, Some("job-uid-first")));
    queue_job(&mut ix, "second", 2, 4, 1);
    // Counted twice, n-a would have no room left and only one pod fit.
    let (plans, _) = ix.cycle(T0 + 6000);
    assert_eq!(admitted(&plans), ["wl-uid-second"]);
}

#[test]
fn pods_without_an_owner_the_index_knows_count_only_on_their_node() {
    let mut ix = placing_index(16);
    ix.apply_node(gpu_node("n-a", 8, &[]));
    queue_job(&mut ix, "first", 1, 4, 0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(admitted(&plans), ["wl-uid-first"]);
    // A pod of some other object on the node: the reservation stays.
    ix.apply_pod(&format!("{NS}/other"), pod("n-a", 4, Some("someone-else")));
    queue_job(&mut ix, "second", 1, 4, 1);
    let (plans, _) = ix.cycle(T0 + 6000);
    assert!(admitted(&plans).is_empty());
    assert_eq!(pending_reason(&ix, "second").as_deref(), Some("NoPlacement"));
}

#[test]
fn a_pod_set_that_requires_one_domain_is_pinned_to_it() {
    let mut ix = placing_index(16);
    let mut f = flavor("a100");
    f.spec.topology_key = Some("rack".into());
    ix.apply_flavor(f);
    ix.apply_node(gpu_node("n-a", 4, &[("rack", "r1")]));
    ix.apply_node(gpu_node("n-b", 4, &[("rack", "r2")]));
    ix.apply_node(gpu_node("n-c", 4, &[("rack", "r2")]));
    let mut j = mk_job("ring", "team-a", 2, 4);
    j.metadata
        .annotations
        .get_or_insert_default()
        .insert(sluice_api::labels::TOPOLOGY.into(), "required".into());
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(admitted(&plans), ["wl-uid-ring"]);
    let adm = ix
        .workload_status(&wkey("ring"))
        .and_then(|s| s.admission.clone())
        .unwrap();
    let domain = adm.pod_set_assignments[0].topology_domain.clone().unwrap();
    assert_eq!((domain.key.as_str(), domain.value.as_str()), ("rack", "r2"));
    let patches = job_patches(&plans[0]);
    let selector = &patches
        .iter()
        .find(|(k, _)| *k == "job")
        .map(|(_, p)| p["spec"]["template"]["spec"]["nodeSelector"].clone())
        .unwrap();
    assert_eq!(selector, &json!({"gpu": "a100", "rack": "r2"}));
}

#[test]
fn a_bad_topology_annotation_is_reported_with_the_field() {
    let mut ix = placing_index(16);
    let mut j = mk_job("ring", "team-a", 2, 4);
    j.metadata
        .annotations
        .get_or_insert_default()
        .insert(sluice_api::labels::TOPOLOGY.into(), "preferred".into());
    ix.apply_job(j, T0);
    let e = &ix.errors()[&(Kind::JOB, format!("{NS}/ring"))];
    assert!(
        e.message.contains("metadata.annotations[sluice.dev/topology]") && e.message.contains("\"preferred\""),
        "{}",
        e.message
    );
}

#[test]
fn recorded_node_and_pod_payloads_decode_to_what_placement_needs() {
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(crate::testing::fixture("node-gpu-create-response.json")).unwrap();
    let spec = sluice_convert::nodes::node(&node).unwrap();
    assert_eq!(spec.allocatable["nvidia.com/gpu"], 8000);
    assert!(spec.schedulable);
    assert_eq!(spec.taints.len(), 1);
    for (file, bound) in [
        ("pod-of-job-running.json", true),
        ("pod-of-job-scheduled-pending.json", true),
        ("pod-of-job-succeeded.json", false),
        ("pod-of-job-failed.json", false),
    ] {
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(crate::testing::fixture(file)).unwrap();
        let b = sluice_convert::nodes::bound_pod(&p).unwrap();
        assert_eq!(b.is_some(), bound, "{file}");
        if let Some(b) = b {
            let e = PodEntry::new("ns", p.metadata.labels.as_ref(), b);
            let (key, value) = e.owners.first().cloned().expect("a Job's pod names its Job");
            assert_eq!(&*key, "controller-uid");
            assert_eq!(Some(&value), p.metadata.labels.as_ref().unwrap().get("controller-uid"));
            assert_eq!(&*e.node, p.spec.as_ref().unwrap().node_name.as_deref().unwrap());
        }
    }
    let p: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(crate::testing::fixture("pod-of-job-terminating-after-suspend.json")).unwrap();
    if let Some(b) = sluice_convert::nodes::bound_pod(&p).unwrap() {
        assert!(b.terminating);
    }
}

#[test]
fn a_terminating_pod_of_an_admitted_workload_does_not_stand_for_its_replacement() {
    let mut ix = placing_index(16);
    ix.apply_node(gpu_node("n-a", 8, &[]));
    queue_job(&mut ix, "first", 1, 4, 0);
    let (plans, _) = ix.cycle(T0 + 5000);
    assert_eq!(admitted(&plans), ["wl-uid-first"]);
    // Its pod was bound, then is being deleted (to be replaced).
    let mut p = (*pod("n-a", 4, Some("job-uid-first")).unwrap()).clone();
    p.terminating = true;
    ix.apply_pod(&format!("{NS}/first-0"), Some(Arc::new(p)));
    ix.cycle(T0 + 5500);
    assert_eq!(ix.engine().node_reserved("n-a").unwrap()["nvidia.com/gpu"], 4000);
    // The room of the leaving pod and of its replacement are both held.
    queue_job(&mut ix, "second", 1, 4, 1);
    let (plans, _) = ix.cycle(T0 + 6000);
    assert!(admitted(&plans).is_empty());
}

#[test]
fn a_workload_restored_after_its_pods_were_seen_is_told_about_them() {
    let mut ix = Index::new(IndexConfig {
        placement: sluice_scheduler::PlacementMode::Nodes,
        ..IndexConfig::default()
    });
    ix.apply_flavor(flavor("a100"));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    // Room for the restored placement on top of the bound pods.
    ix.apply_node(gpu_node("n-a", 16, &[]));
    let j = mk_job("first", "team-a", 2, 4);
    ix.apply_job(j.clone(), T0);
    ix.apply_pod(&format!("{NS}/first-0"), pod("n-a", 4, Some("job-uid-first")));
    ix.apply_pod(&format!("{NS}/first-1"), pod("n-a", 4, Some("job-uid-first")));
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = Some(admitted_status(2, 8));
    ix.apply_workload(wl, T0);
    // Its ClusterQueue is not known yet: kept out of the engine.
    ix.cycle(T0 + 1000);
    ix.apply_cluster_queue(cq("cluster-gpu", 16));
    ix.cycle(T0 + 2000);
    assert_eq!(
        ix.engine().workload_state("wl-uid-first"),
        Some(WorkloadState::Admitted)
    );
    // Both pods are bound: nothing is reserved on top of them.
    assert_eq!(ix.engine().node_reserved("n-a").unwrap().get("nvidia.com/gpu"), None);
}

#[test]
fn a_rayjobs_cluster_leaves_its_pods_to_the_rayjob() {
    let mut config = IndexConfig {
        placement: sluice_scheduler::PlacementMode::Nodes,
        ..IndexConfig::default()
    };
    config.integrations.extend([JobKind::RayJob, JobKind::RayCluster]);
    let mut ix = Index::new(config);
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    let template = json!({"spec": {"containers": [{"name": "ray", "image": "x"}]}});
    let cluster_spec = json!({"headGroupSpec": {"template": template}, "workerGroupSpecs": []});
    let rj = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": NS, "uid": "rj-uid", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": false, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster_spec},
        "status": {"jobDeploymentStatus": "Running", "rayClusterName": "tune-rc"}
    });
    let rc = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tune-rc", "namespace": NS, "uid": "rc-uid", "labels": {"sluice.dev/queue": "team-a"},
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune", "uid": "rj-uid", "controller": true}]},
        "spec": {"suspend": false, "headGroupSpec": {"template": template}, "workerGroupSpecs": []}
    });
    ix.apply_object(JobKind::RayJob, &rj, T0);
    ix.apply_object(JobKind::RayCluster, &rc, T0);
    let rayjob = crate::plan::JobRef::new(JobKind::RayJob, NS, "tune");
    let key = super::super::placement::owner_key(&ix.queued.jobs[&rayjob]).unwrap();
    assert_eq!(&*key.1, "ray.io/cluster");
    // Pods labelled ray.io/cluster=tune-rc count for the RayJob's Workload.
    assert_eq!(ix.placement.owner_jobs.get(&key), Some(&rayjob));
}
