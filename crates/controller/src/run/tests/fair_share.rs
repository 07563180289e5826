//! Weighted shares in ClusterQueue and Cohort status and metrics, and the
//! Cohorts' `Active` condition, through the queue-status writer.

use super::*;
use crate::index::Index;
use crate::testing::{borrowing_cq, cohort};

/// Cohort `pool` (16 GPUs) with ClusterQueues cluster-gpu and other (no
/// GPUs of their own); cluster-gpu's workload holds 8 GPUs; Cohort
/// `broken` fails validation. `statuses`: what the server holds, by object.
fn objects(statuses: &BTreeMap<QueueRef, serde_json::Value>) -> Vec<Obj> {
    fn status<T: serde::de::DeserializeOwned>(
        statuses: &BTreeMap<QueueRef, serde_json::Value>,
        id: QueueRef,
    ) -> Option<T> {
        statuses.get(&id).map(|s| serde_json::from_value(s.clone()).unwrap())
    }
    let mut pool = cohort("pool", None, 16);
    pool.status = status(statuses, QueueRef::Cohort("pool".into()));
    let mut broken = cohort("broken", None, 4);
    broken.spec.resource_groups[0].flavors[0].resources[0].lending_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()));
    broken.status = status(statuses, QueueRef::Cohort("broken".into()));
    let mut queue = borrowing_cq("cluster-gpu", "pool");
    queue.status = status(statuses, cqr("cluster-gpu"));
    let mut other = borrowing_cq("other", "pool");
    other.status = status(statuses, cqr("other"));
    let mut team = lq("research", "team-a", "cluster-gpu");
    team.status = status(statuses, lqr("research", "team-a"));
    vec![
        Obj::Flavor(Box::new(flavor("a100"))),
        Obj::Cohort(Box::new(pool)),
        Obj::Cohort(Box::new(broken)),
        Obj::ClusterQueue(Box::new(queue)),
        Obj::ClusterQueue(Box::new(other)),
        Obj::LocalQueue(Box::new(team)),
        Obj::Workload(Arc::new(admitted_workload())),
    ]
}

fn index(config: &IndexConfig, statuses: &BTreeMap<QueueRef, serde_json::Value>) -> Index {
    let mut cache = Cache::default();
    listed(&mut cache, objects(statuses));
    build_index(&cache, config)
}

#[test]
fn with_fair_sharing_queues_and_cohorts_carry_their_weighted_share() {
    let ix = index(&IndexConfig::default(), &BTreeMap::new());
    let m = Metrics::new();
    let mut w = QueueStatusWriter::default();
    let wanted: BTreeMap<_, _> = w.wanted(&ix, &m, "2027-01-01T00:00:00Z").into_iter().collect();
    // cluster-gpu borrows 8 of the 16 GPUs its cohort can lend.
    assert_eq!(
        wanted[&cqr("cluster-gpu")]["fairSharing"],
        json!({"weightedShare": 500})
    );
    assert_eq!(wanted[&cqr("other")]["fairSharing"], json!({"weightedShare": 0}));
    assert_eq!(
        wanted[&QueueRef::Cohort("pool".into())],
        json!({
            "fairSharing": {"weightedShare": 0},
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                            "message": "Its parent, quota and weight are in effect",
                            "lastTransitionTime": "2027-01-01T00:00:00Z"}]
        })
    );
    // The invalid one says why, and has no share (the engine never had it).
    let broken = &wanted[&QueueRef::Cohort("broken".into())];
    assert!(broken.get("fairSharing").is_none(), "{broken}");
    let c = &broken["conditions"][0];
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("InvalidCohort"))
    );
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("Ignored by the controller: spec.resourceGroups"),
        "{c}"
    );
    let text = m.encode();
    for line in [
        "sluice_cluster_queue_weighted_share{cluster_queue=\"cluster-gpu\"} 500.0",
        "sluice_cluster_queue_weighted_share{cluster_queue=\"other\"} 0.0",
        "sluice_cohort_weighted_share{cohort=\"pool\"} 0.0",
    ] {
        assert!(text.contains(line), "missing {line}:\n{text}");
    }
    assert!(!text.contains("cohort=\"broken\""), "{text}");
}

#[test]
fn without_fair_sharing_no_share_is_written_or_exported() {
    let config = IndexConfig {
        fair_sharing: sluice_scheduler::FairSharing::Off,
        ..IndexConfig::default()
    };
    let ix = index(&config, &BTreeMap::new());
    let m = Metrics::new();
    let wanted = QueueStatusWriter::default().wanted(&ix, &m, "2027-01-01T00:00:00Z");
    assert_eq!(wanted.len(), 5, "two ClusterQueues, a LocalQueue, two Cohorts");
    for (id, status) in &wanted {
        assert!(status.get("fairSharing").is_none(), "{id}: {status}");
    }
    let pool = &wanted
        .iter()
        .find(|(id, _)| *id == QueueRef::Cohort("pool".into()))
        .unwrap()
        .1;
    assert_eq!(pool["conditions"][0]["status"], "True");
    assert!(!m.encode().contains("weighted_share{"), "{}", m.encode());
}

#[test]
fn cohort_status_goes_through_the_queue_status_lane_and_a_new_leader_keeps_what_the_server_has() {
    let config = IndexConfig::default();
    let cfg = test_config(config.clone());
    let m = Metrics::new();
    let mut first = QueueStatusWriter::default();
    let plans = first.plans(&index(&config, &BTreeMap::new()), &m, &cfg);
    let written: BTreeMap<QueueRef, serde_json::Value> = plans
        .iter()
        .map(|p| {
            assert_eq!(p.purpose, Purpose::QueueStatus);
            assert_eq!(crate::writer::Lane::of(&p.purpose), crate::writer::Lane::Bookkeeping);
            match &p.steps[..] {
                [Step::ApplyQueueStatus { queue, status }] => (queue.clone(), status.clone()),
                other => panic!("{other:?}"),
            }
        })
        .collect();
    let ids: Vec<&QueueRef> = written.keys().collect();
    assert_eq!(
        ids,
        [
            &cqr("cluster-gpu"),
            &cqr("other"),
            &lqr("research", "team-a"),
            &QueueRef::Cohort("broken".into()),
            &QueueRef::Cohort("pool".into()),
        ]
    );
    // Written by the first leader; a second one starts from the cache.
    let mut second = QueueStatusWriter::default();
    assert!(
        second.plans(&index(&config, &written), &m, &cfg).is_empty(),
        "nothing to write"
    );
    // The share changes (the workload is gone): only the queue's status
    // and nothing else is written again.
    let mut cache = Cache::default();
    let mut objs = objects(&written);
    objs.retain(|o| !matches!(o, Obj::Workload(_)));
    listed(&mut cache, objs);
    let again = second.plans(&build_index(&cache, &config), &m, &cfg);
    let changed: Vec<String> = again
        .iter()
        .map(|p| match &p.steps[0] {
            Step::ApplyQueueStatus { queue, status } => {
                format!("{queue}: {}", status["fairSharing"]["weightedShare"])
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        changed,
        ["ClusterQueue cluster-gpu: 0", "LocalQueue research/team-a: null"]
    );
}
