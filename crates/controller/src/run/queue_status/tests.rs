//! Queue status as typed values, table by table, and the JSON applied for
//! them: the same as the `json!` bodies written before the status was
//! typed (reproduced here as `untyped_*`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use sluice_scheduler::{QueueUsage, ResourceUsage as EngineUsage};

use super::*;

/// A queue's problem, if any: (reason, message).
type Problem = Option<(&'static str, &'static str)>;

fn at(s: &str) -> Time {
    Time(s.parse().unwrap())
}

fn resource(flavor: &str, resource: &str, used: i64, borrowed: i64) -> EngineUsage {
    EngineUsage {
        flavor: flavor.into(),
        resource: resource.into(),
        used,
        nominal: 8000,
        borrowed,
        reserved: 0,
    }
}

fn usage(pending: usize, admitted: usize, resources: Vec<EngineUsage>) -> QueueUsage {
    QueueUsage {
        name: "cluster-gpu".into(),
        cohort: None,
        pending,
        admitted,
        resources,
    }
}

/// The `Active` condition as the untyped code wrote it.
fn untyped_condition(problem: Option<(&str, &str)>, ok: &str, since: &str) -> Value {
    let (reason, message) = problem.unwrap_or(("Ready", ok));
    json!([{
        "type": "Active",
        "status": if problem.is_none() { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }])
}

/// A ClusterQueue's status as the untyped code wrote it.
fn untyped_cluster_queue(condition: Value, u: Option<&QueueUsage>) -> Value {
    let mut status = json!({"conditions": condition});
    if let Some(u) = u {
        let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
        for r in &u.resources {
            flavors.entry(r.flavor.clone()).or_default().push(ResourceUsage {
                name: r.resource.clone(),
                total: to_quantity(&r.resource, i128::from(r.used)),
                borrowed: (r.borrowed > 0).then(|| to_quantity(&r.resource, i128::from(r.borrowed))),
            });
        }
        status["pendingWorkloads"] = json!(u.pending);
        status["admittedWorkloads"] = json!(u.admitted);
        status["flavorsUsage"] = serde_json::to_value(
            flavors
                .into_iter()
                .map(|(name, resources)| FlavorUsage { name, resources })
                .collect::<Vec<_>>(),
        )
        .unwrap();
    }
    status
}

#[test]
fn the_active_condition_says_ready_or_why_not() {
    let cases = [
        (
            None,
            json!({"status": "True", "reason": "Ready", "message": "Can admit workloads"}),
        ),
        (
            Some(("FlavorNotFound", "no a100".to_string())),
            json!({"status": "False", "reason": "FlavorNotFound", "message": "no a100"}),
        ),
    ];
    for (problem, want) in cases {
        let c = active_condition(problem, "Can admit workloads", at("2027-01-01T00:00:00Z"));
        let v = serde_json::to_value(&c).unwrap();
        for field in ["status", "reason", "message"] {
            assert_eq!(v[field], want[field], "{field}");
        }
        assert_eq!(v["type"], "Active");
        assert_eq!(v["lastTransitionTime"], "2027-01-01T00:00:00Z");
        assert!(v.get("observedGeneration").is_none(), "no null: {v}");
    }
}

#[test]
fn cluster_queue_status_is_typed_and_applied_as_before() {
    let since = "2027-01-01T00:00:00Z";
    let cases: Vec<(&str, Problem, Option<QueueUsage>)> = vec![
        (
            "not held by the engine (invalid)",
            Some(("InvalidClusterQueue", "bad")),
            None,
        ),
        (
            "held, nothing admitted",
            None,
            Some(usage(0, 0, vec![resource("a100", "nvidia.com/gpu", 0, 0)])),
        ),
        (
            "held, two flavors, one borrowing",
            None,
            Some(usage(
                3,
                2,
                vec![
                    resource("h100", "nvidia.com/gpu", 4000, 0),
                    resource("a100", "nvidia.com/gpu", 10_000, 2000),
                    resource("a100", "cpu", 1500, 0),
                ],
            )),
        ),
        (
            "held, no resources",
            Some(("FlavorNotFound", "gone")),
            Some(usage(1, 0, vec![])),
        ),
    ];
    for (name, problem, u) in cases {
        let condition = active_condition(
            problem.map(|(r, m)| (r, m.to_string())),
            "Can admit workloads",
            at(since),
        );
        let status = cluster_queue_status(condition, u.as_ref());
        let body = cluster_queue_body(&status, u.is_some());
        let want = untyped_cluster_queue(untyped_condition(problem, "Can admit workloads", since), u.as_ref());
        assert_eq!(body, want, "{name}");
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            serde_json::to_string(&want).unwrap(),
            "{name}: byte for byte"
        );
        if let Some(u) = &u {
            assert_eq!(
                (status.pending_workloads, status.admitted_workloads),
                (u.pending as i32, u.admitted as i32),
                "{name}"
            );
        }
    }
}

#[test]
fn local_queue_status_is_typed_and_applied_as_before() {
    let since = "2027-01-01T00:00:00Z";
    let mut busy = LocalQueueStats {
        pending: 2,
        admitted: 1,
        ..Default::default()
    };
    busy.usage.insert(("a100".into(), "nvidia.com/gpu".into()), 8000);
    busy.usage.insert(("a100".into(), "cpu".into()), 500);
    busy.usage.insert(("h100".into(), "nvidia.com/gpu".into()), 2000);
    let cases = [
        ("empty", None, LocalQueueStats::default()),
        ("busy", None, busy),
        (
            "its ClusterQueue is missing",
            Some(("ClusterQueueDoesNotExist", "ClusterQueue x does not exist")),
            LocalQueueStats::default(),
        ),
    ];
    let ok = "Can submit new workloads to its ClusterQueue";
    for (name, problem, stats) in cases {
        let condition = active_condition(problem.map(|(r, m)| (r, m.to_string())), ok, at(since));
        let status = local_queue_status(condition, &stats, None, None, None);
        // The untyped body.
        let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
        for ((flavor, resource), used) in &stats.usage {
            flavors.entry(flavor.clone()).or_default().push(ResourceUsage {
                name: resource.clone(),
                total: to_quantity(resource, i128::from(*used)),
                borrowed: None,
            });
        }
        let usage: Vec<FlavorUsage> = flavors
            .into_iter()
            .map(|(name, resources)| FlavorUsage { name, resources })
            .collect();
        let want = json!({
            "conditions": untyped_condition(problem, ok, since),
            "pendingWorkloads": stats.pending,
            "admittedWorkloads": stats.admitted,
            "flavorsUsage": usage,
        });
        let body = local_queue_body(&status);
        assert_eq!(body, want, "{name}");
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            serde_json::to_string(&want).unwrap(),
            "{name}: byte for byte"
        );
    }
}

#[test]
fn the_api_types_alone_would_differ_so_the_body_keeps_the_old_shape() {
    // Why `cluster_queue_body` / `local_queue_body` exist: the API types
    // write counts a queue the engine does not hold never had, and leave
    // out an empty `flavorsUsage`.
    let c = active_condition(None, "ok", at("2027-01-01T00:00:00Z"));
    let unheld = cluster_queue_status(c.clone(), None);
    let typed = serde_json::to_value(&unheld).unwrap();
    assert_eq!(typed["pendingWorkloads"], 0);
    assert!(cluster_queue_body(&unheld, false).get("pendingWorkloads").is_none());
    let empty = local_queue_status(c, &LocalQueueStats::default(), None, None, None);
    assert!(serde_json::to_value(&empty).unwrap().get("flavorsUsage").is_none());
    assert_eq!(local_queue_body(&empty)["flavorsUsage"], json!([]));
}
