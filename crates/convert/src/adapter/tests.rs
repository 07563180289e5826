use super::*;
use sluice_api::manifest::{SluiceObject, parse_manifests};

fn objects(yaml: &str) -> Vec<SluiceObject> {
    parse_manifests(yaml)
        .expect("parses")
        .into_iter()
        .filter_map(|d| d.as_sluice().cloned())
        .collect()
}

fn example(file: &str) -> String {
    std::fs::read_to_string(format!("{}/../../examples/{file}", env!("CARGO_MANIFEST_DIR"))).expect("example exists")
}

#[test]
fn every_shipped_example_converts_and_the_engine_admits_a_gpu_gang() {
    let mut engine = eng::Engine::new();
    for file in ["flavors.yaml", "cluster-queues.yaml", "local-queues.yaml"] {
        for obj in objects(&example(file)) {
            match obj {
                SluiceObject::ResourceFlavor(rf) => engine.upsert_flavor(flavor(&rf).unwrap()),
                SluiceObject::ClusterQueue(cq) => engine.upsert_cluster_queue(cluster_queue(&cq).unwrap()),
                SluiceObject::LocalQueue(lq) => engine.upsert_local_queue(local_queue(&lq).unwrap()),
                _ => {}
            }
        }
    }
    assert!(engine.cluster_queue_names().len() >= 3);
    // The flavors' GPU taint is tolerated the way the webhook makes pods tolerate it.
    let lq = objects(&example("local-queues.yaml"))
        .into_iter()
        .find_map(|o| match o {
            SluiceObject::LocalQueue(lq) => Some(lq),
            _ => None,
        })
        .unwrap();
    let wl: Workload = serde_json::from_value(serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "train", "namespace": lq.metadata.namespace, "uid": "u-1"},
        "spec": {"queueName": lq.metadata.name, "podSets": [{"name": "workers", "count": 2, "template": {"spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]}
    }))
    .unwrap();
    engine.add_workload(workload(&wl, 0, 0).unwrap()).unwrap();
    let cycle = engine.schedule(0);
    assert_eq!(
        cycle.admitted.len(),
        1,
        "{:?}",
        engine.explanation("u-1").map(crate::text::explanation)
    );
    let status = admission_status(&cycle.admitted[0]);
    assert_eq!(status.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "2");
    assert_eq!(admission(&status).unwrap(), &cycle.admitted[0].pod_sets[..]);
}

#[test]
fn quotas_become_milli_units_and_policies_map_one_to_one() {
    let cq = match objects(
        r#"
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: research
  queueingStrategy: StrictFIFO
  minRuntimeSeconds: 600
  stopPolicy: Hold
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    victimOrder: LeastWorkLost
    recentlyPreemptedGraceMinutes: 30
  backfill: {policy: Reserve, maxDelayMinutes: 20, depth: 3}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "2"}
      - {name: memory, nominalQuota: 1Gi, lendingLimit: 512Mi}
"#,
    )
    .remove(0)
    {
        SluiceObject::ClusterQueue(cq) => cq,
        other => panic!("not a ClusterQueue: {other:?}"),
    };
    let spec = cluster_queue(&cq).unwrap();
    assert_eq!(spec.cohort.as_deref(), Some("research"));
    assert_eq!(spec.strategy, eng::QueueingStrategy::StrictFifo);
    assert_eq!(spec.min_runtime, 600_000);
    assert_eq!(spec.stop_policy, eng::StopPolicy::Hold);
    assert_eq!(
        (spec.backfill, spec.backfill_max_delay, spec.backfill_depth),
        (eng::Backfill::Reserve, 20 * 60_000, 3)
    );
    assert_eq!(
        spec.preemption,
        eng::PreemptionPolicy {
            within_cluster_queue: eng::WithinClusterQueue::LowerOrNewerEqualPriority,
            reclaim_within_cohort: eng::ReclaimWithinCohort::Any,
            borrow_within_cohort: eng::BorrowWithinCohort::LowerPriority {
                max_priority_threshold: Some(100)
            },
            victim_order: eng::VictimOrderPolicy::LeastWorkLost,
            recently_preempted_grace: Some(30 * 60_000),
        }
    );
    let r = &spec.resource_groups[0].flavors[0].resources;
    assert_eq!(
        (r[0].nominal, r[0].borrowing_limit, r[0].lending_limit),
        (500, Some(2000), None)
    );
    assert_eq!(
        (r[1].nominal, r[1].lending_limit),
        (1024 * 1024 * 1024 * 1000, Some(512 * 1024 * 1024 * 1000))
    );
}

#[test]
fn an_unset_victim_order_is_kueues_without_a_grace() {
    let cq: ClusterQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"},
        "spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}
    }))
    .unwrap();
    let spec = cluster_queue(&cq).unwrap();
    let p = spec.preemption;
    assert_eq!(
        (p.victim_order, p.recently_preempted_grace),
        (eng::VictimOrderPolicy::Newest, None)
    );
    // Nor backfill: no reservation, and one deep once it reserves.
    assert_eq!((spec.backfill, spec.backfill_depth), (eng::Backfill::None, 1));
}

#[test]
fn a_bad_quantity_names_its_field() {
    let mut cq: ClusterQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
            {"name": "cpu", "nominalQuota": "1"}]}]}]}
    }))
    .unwrap();
    cq.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()));
    let err = cluster_queue(&cq).unwrap_err().to_string();
    assert!(
        err.contains("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
        "{err}"
    );
}

#[test]
fn tolerations_and_taints_follow_kubernetes_defaults() {
    let t = toleration(
        &Toleration {
            key: Some("nvidia.com/gpu".into()),
            ..Default::default()
        },
        "spec.tolerations[0]",
    )
    .unwrap();
    assert_eq!(t.operator, eng::TolerationOperator::Equal, "operator defaults to Equal");
    assert_eq!(t.effect, None, "no effect tolerates every effect");
    let err = toleration(
        &Toleration {
            operator: Some("Sometimes".into()),
            ..Default::default()
        },
        "spec.tolerations[3]",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.tolerations[3].operator: unknown toleration operator \"Sometimes\" (expected Exists or Equal)"
    );
    let err = taint(
        &Taint {
            key: "k".into(),
            effect: "Sometimes".into(),
            ..Default::default()
        },
        "spec.nodeTaints[0]",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("spec.nodeTaints[0].effect"), "{err}");
}

#[test]
fn workload_priority_prefers_spec_then_class_then_zero() {
    let mut wl: Workload = serde_json::from_value(serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "q", "priorityClassName": "training", "podSets": [{"name": "main", "count": 1, "template": {}}]}
    }))
    .unwrap();
    let classes = |n: &str| (n == "training").then_some(100);
    assert_eq!(priority(&wl, classes), 100);
    wl.spec.priority = Some(7);
    assert_eq!(priority(&wl, classes), 7);
    wl.spec.priority = None;
    wl.spec.priority_class_name = Some("unknown".into());
    assert_eq!(priority(&wl, classes), 0);
    let spec = workload(&wl, 0, 42).unwrap();
    assert_eq!(
        (spec.uid.as_str(), spec.local_queue.as_str(), spec.queue_order_time),
        ("ns/w", "ns/q", 42)
    );
}

fn one_cohort(yaml: &str) -> Cohort {
    match objects(yaml).remove(0) {
        SluiceObject::Cohort(c) => c,
        other => panic!("not a Cohort: {other:?}"),
    }
}

#[test]
fn a_cohort_keeps_its_parent_quota_and_weight() {
    let c = one_cohort(
        r#"
apiVersion: sluice.dev/v1alpha1
kind: Cohort
metadata: {name: research}
spec:
  parent: company
  fairSharing: {weight: 500m}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: "8", borrowingLimit: "4", lendingLimit: "2"}
"#,
    );
    let spec = cohort(&c).unwrap();
    assert_eq!(
        spec,
        eng::CohortSpec {
            name: "research".into(),
            parent: Some("company".into()),
            resource_groups: vec![eng::ResourceGroupSpec {
                covered_resources: vec!["nvidia.com/gpu".into()],
                flavors: vec![eng::FlavorQuotaSpec {
                    flavor: "h100-80gb".into(),
                    resources: vec![eng::ResourceQuotaSpec {
                        resource: "nvidia.com/gpu".into(),
                        nominal: 8000,
                        borrowing_limit: Some(4000),
                        lending_limit: Some(2000),
                    }],
                }],
            }],
            fair_weight: eng::Weight(500),
        }
    );
    // The engine takes it; a parent chain back to it is then refused.
    let mut engine = eng::Engine::new();
    engine.upsert_cohort(spec).unwrap();
    let company = one_cohort(
        "apiVersion: sluice.dev/v1alpha1\nkind: Cohort\nmetadata: {name: company}\nspec: {parent: research}\n",
    );
    assert!(matches!(
        engine.upsert_cohort(cohort(&company).unwrap()),
        Err(eng::EngineError::CohortCycle { .. })
    ));
}

#[test]
fn a_bare_cohort_is_a_root_of_weight_one() {
    let c =
        one_cohort("apiVersion: sluice.dev/v1alpha1\nkind: Cohort\nmetadata: {name: company}\nspec: {parent: \"\"}\n");
    let spec = cohort(&c).unwrap();
    assert_eq!((spec.parent, spec.fair_weight), (None, eng::Weight(1000)));
    assert!(spec.resource_groups.is_empty());
    let mut nameless = c.clone();
    nameless.metadata.name = None;
    assert_eq!(cohort(&nameless).unwrap_err().to_string(), "metadata.name: must be set");
}

#[test]
fn fair_sharing_weight_becomes_milli_units() {
    let cq = |weight: &str| -> ClusterQueue {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"cohort": "research", "fairSharing": {"weight": weight}}
        }))
        .unwrap()
    };
    for (weight, milli) in [("2", 2000), ("0.5", 500), ("500m", 500), ("0", 0)] {
        assert_eq!(
            cluster_queue(&cq(weight)).unwrap().fair_weight,
            eng::Weight(milli),
            "{weight}"
        );
    }
    let mut unset = cq("1");
    unset.spec.fair_sharing = None;
    assert_eq!(cluster_queue(&unset).unwrap().fair_weight, eng::Weight::default());
    assert_eq!(
        cluster_queue(&cq("-1")).unwrap_err().to_string(),
        "spec.fairSharing.weight: quantity \"-1\" must not be negative"
    );
}

#[test]
fn pod_set_min_count_is_kept_within_one_and_count() {
    let wl = |min: Option<i32>| -> Workload {
        let mut w: Workload = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 4, "template": {}}]}
        }))
        .unwrap();
        w.spec.pod_sets[0].min_count = min;
        w
    };
    let min_of = |min| workload(&wl(min), 0, 0).map(|s| s.pod_sets[0].min_count);
    assert_eq!(min_of(None), Ok(None));
    assert_eq!(min_of(Some(2)), Ok(Some(2)));
    assert_eq!(min_of(Some(4)), Ok(Some(4)));
    assert_eq!(
        min_of(Some(0)).unwrap_err().to_string(),
        "spec.podSets[0].minCount: 0 must be at least 1"
    );
    assert_eq!(
        min_of(Some(5)).unwrap_err().to_string(),
        "spec.podSets[0].minCount: 5 must be at most count (4)"
    );
}

#[test]
fn an_admission_ahead_of_a_reservation_by_its_run_time_keeps_a_record_a_restart_reads_back() {
    let admitted = |backfill: Option<eng::Backfilled>| eng::Admission {
        uid: "u-1".into(),
        cluster_queue: "team-a".into(),
        pod_sets: Vec::new().into(),
        borrowing: false,
        backfill,
    };
    let note = |ends_before: bool| eng::Backfilled {
        reserved_for: "team-a/pretrain".into(),
        start: eng::ReservedStart::At(7_200_000),
        ends_before,
        delay: 0,
        queue: "team-a".into(),
        due: ends_before.then_some(1_764_000_000_000),
    };
    let status = admission_status(&admitted(Some(note(true))));
    let record = status.backfill.as_ref().expect("recorded");
    assert_eq!(
        serde_json::to_value(record).unwrap(),
        serde_json::json!({"clusterQueue": "team-a", "reservedFor": "team-a/pretrain", "until": "2025-11-24T16:00:00Z"})
    );
    assert_eq!(
        restored_backfill(&status),
        Some(("team-a", "team-a/pretrain", 1_764_000_000_000))
    );
    // Fitting beside a reservation, or none: nothing to keep.
    assert_eq!(admission_status(&admitted(Some(note(false)))).backfill, None);
    assert_eq!(restored_backfill(&admission_status(&admitted(None))), None);
}
