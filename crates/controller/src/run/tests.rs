//! The run loop: the cache, a new leader's index, queue status, and the
//! whole loop against a mocked API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use serde_json::json;
use sluice_api::v1alpha1::{Workload, WorkloadStatus};
use sluice_scheduler::WorkloadState;

use super::cache::{Cache, build_index, handle};
use super::event_loop::wake_instant;
use super::queue_status::QueueStatusWriter;
use super::watches::{Msg, Obj};
use super::*;
use crate::index::Kind;
use crate::plan::{ObjKey, Purpose, QueueRef, Step};
use crate::testing::{cq, flavor, job_fixture, lq};

fn cqr(name: &str) -> QueueRef {
    QueueRef::ClusterQueue(name.into())
}

fn lqr(namespace: &str, name: &str) -> QueueRef {
    QueueRef::LocalQueue(ObjKey::new(namespace, name))
}

#[test]
fn a_far_wake_up_never_overflows_an_instant() {
    let now = Instant::now();
    assert_eq!(wake_instant(now, 1_000, 3_000), Some(now + Duration::from_secs(2)));
    assert_eq!(wake_instant(now, 5_000, 3_000), Some(now), "past: at once");
    // i64::MAX ms from now does not fit an Instant: no panic.
    let _ = wake_instant(now, 0, i64::MAX);
    let _ = wake_instant(now, i64::MIN, i64::MAX);
}

fn admitted_workload() -> Workload {
    let j = job_fixture("job-suspended-create-response.json");
    let mut wl = sluice_kinds::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    wl.metadata.uid = Some("wl-uid".into());
    let mut status = WorkloadStatus::default();
    for t in ["QuotaReserved", "Admitted"] {
        crate::index::set_condition(&mut status.conditions, t, "True", t, "", 0, None);
    }
    status.admission = Some(
        serde_json::from_value(json!({"clusterQueue": "cluster-gpu", "podSetAssignments": [
            {"name": "main", "count": 4, "flavors": {"nvidia.com/gpu": "a100"}, "resourceUsage": {"nvidia.com/gpu": "8"}}]}))
        .unwrap(),
    );
    wl.status = Some(status);
    wl
}

fn listed(cache: &mut Cache, objs: Vec<Obj>) {
    for k in Kind::all() {
        handle(cache, None, Msg::Init(k), 0);
    }
    for o in objs {
        handle(cache, None, Msg::Apply(o), 0);
    }
    for k in Kind::all() {
        handle(cache, None, Msg::InitDone(k), 0);
    }
}

#[test]
fn a_new_leader_rebuilds_the_ledger_from_the_cache_before_any_cycle() {
    let mut cache = Cache::default();
    // Workloads listed before the queues: order in the cache does not matter.
    listed(
        &mut cache,
        vec![
            Obj::Workload(Arc::new(admitted_workload())),
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
        ],
    );
    let mut ix = build_index(&cache, &IndexConfig::default());
    assert!(ix.is_ready());
    assert_eq!(ix.engine().workload_state("wl-uid"), Some(WorkloadState::Admitted));
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        8000
    );
    let (plans, _) = ix.cycle(now_ms());
    assert!(
        plans.iter().all(|p| p.purpose.label() != "admit"),
        "never admitted twice"
    );
}

#[test]
fn the_leaders_cache_keeps_workload_keys_only_and_a_relist_still_finds_deletions() {
    let mut cache = Cache::default();
    let wl = admitted_workload();
    listed(
        &mut cache,
        vec![
            Obj::Workload(Arc::new(wl.clone())),
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
        ],
    );
    let key = "research/job-train-research".to_string();
    assert!(matches!(cache.objects[&Kind::Workload][&key], Obj::WorkloadJson(_)));
    // Leading: the index has the Workload; the cache keeps its key.
    let mut ix = build_index(&cache, &IndexConfig::default());
    cache.keep_workload_keys_only();
    assert!(matches!(cache.objects[&Kind::Workload][&key], Obj::Indexed));
    // Created directly (no Job), waiting.
    let mut other = wl.clone();
    other.metadata.name = Some("job-other".into());
    other.metadata.uid = Some("other-uid".into());
    other.metadata.owner_references = None;
    other.metadata.labels = None;
    other.status = None;
    handle(
        &mut cache,
        Some(&mut ix),
        Msg::Apply(Obj::Workload(Arc::new(other.clone()))),
        0,
    );
    assert!(matches!(
        cache.objects[&Kind::Workload]["research/job-other"],
        Obj::Indexed
    ));
    assert_eq!(ix.engine().workload_state("other-uid"), Some(WorkloadState::Pending));
    // 410 Gone: listed again without the admitted one, deleted while the
    // watch was down: its quota is released.
    handle(&mut cache, Some(&mut ix), Msg::Init(Kind::Workload), 0);
    handle(&mut cache, Some(&mut ix), Msg::Apply(Obj::Workload(Arc::new(other))), 0);
    handle(&mut cache, Some(&mut ix), Msg::InitDone(Kind::Workload), 0);
    assert_eq!(ix.engine().workload_state("wl-uid"), None);
    assert_eq!(cache.objects[&Kind::Workload].len(), 1);
    assert_eq!(
        ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used,
        0
    );
}

#[test]
fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
    let mut cache = Cache::default();
    listed(
        &mut cache,
        vec![
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::ClusterQueue(Box::new(cq("gone", 8))),
        ],
    );
    let mut ix = build_index(&cache, &IndexConfig::default());
    assert_eq!(ix.engine().cluster_queue_names().len(), 2);
    // 410 Gone: the watcher lists again; "gone" is not in the new list.
    handle(&mut cache, Some(&mut ix), Msg::Init(Kind::ClusterQueue), 0);
    handle(
        &mut cache,
        Some(&mut ix),
        Msg::Apply(Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8)))),
        0,
    );
    handle(&mut cache, Some(&mut ix), Msg::InitDone(Kind::ClusterQueue), 0);
    let names: Vec<String> = ix
        .engine()
        .cluster_queue_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["cluster-gpu"]);
    assert_eq!(cache.objects[&Kind::ClusterQueue].len(), 1);
}

#[test]
fn queue_status_is_wanted_only_when_it_changes_and_invalid_queues_say_why() {
    let mut cache = Cache::default();
    let mut bad = cq("bad", 4);
    bad.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
    listed(
        &mut cache,
        vec![
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::ClusterQueue(Box::new(bad)),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
        ],
    );
    let ix = build_index(&cache, &IndexConfig::default());
    let m = Metrics::new();
    let mut w = QueueStatusWriter::default();
    let wanted = w.wanted(&ix, &m, "2027-01-01T00:00:00Z");
    let ids: Vec<_> = wanted.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, [cqr("bad"), cqr("cluster-gpu"), lqr("research", "team-a")]);
    let bad_status = &wanted[0].1;
    assert_eq!(bad_status["conditions"][0]["status"], "False");
    assert_eq!(bad_status["conditions"][0]["reason"], "InvalidClusterQueue");
    let good = &wanted[1].1;
    assert_eq!(good["conditions"][0]["status"], "True");
    assert_eq!(
        (good["pendingWorkloads"].as_u64(), good["admittedWorkloads"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(good["flavorsUsage"][0]["resources"][0]["total"], "0");
    // Written: nothing is wanted again until something changes.
    for (id, status) in wanted {
        w.last.insert(id, status);
    }
    assert!(w.wanted(&ix, &m, "2027-01-01T00:00:05Z").is_empty());
    assert!(m.encode().contains("sluice_cluster_queue_nominal_quota{cluster_queue=\"cluster-gpu\",flavor=\"a100\",resource=\"nvidia.com/gpu\"} 8000"));
}

#[test]
fn queue_status_is_handed_to_the_writer_once_and_remembered_when_written() {
    let mut cache = Cache::default();
    listed(
        &mut cache,
        vec![
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
        ],
    );
    let ix = build_index(&cache, &IndexConfig::default());
    let m = Metrics::new();
    let cfg = test_config(IndexConfig::default());
    let mut w = QueueStatusWriter::default();
    let plans = w.plans(&ix, &m, &cfg);
    assert_eq!(plans.len(), 2, "the ClusterQueue and the LocalQueue");
    assert!(plans.iter().all(|p| p.purpose == Purpose::QueueStatus));
    // Queued, not written yet: not handed out again.
    assert!(w.plans(&ix, &m, &cfg).is_empty());
    // A failed write is handed out again; a written one is not.
    w.written(&plans[0], false);
    w.written(&plans[1], true);
    let again = w.plans(&ix, &m, &cfg);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].steps, plans[0].steps);
    w.written(&again[0], true);
    assert!(w.plans(&ix, &m, &cfg).is_empty());
}

#[test]
fn a_new_leader_does_not_rewrite_queue_status_the_server_already_has() {
    let objects = |statuses: Option<(serde_json::Value, serde_json::Value)>| {
        let mut cq = cq("cluster-gpu", 8);
        let mut lq = lq("research", "team-a", "cluster-gpu");
        if let Some((c, l)) = statuses {
            cq.status = serde_json::from_value(c).unwrap();
            lq.status = serde_json::from_value(l).unwrap();
        }
        vec![
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::ClusterQueue(Box::new(cq)),
            Obj::LocalQueue(Box::new(lq)),
        ]
    };
    let cfg = test_config(IndexConfig::default());
    let m = Metrics::new();
    let mut cache = Cache::default();
    listed(&mut cache, objects(None));
    let mut first = QueueStatusWriter::default();
    let plans = first.plans(&build_index(&cache, &IndexConfig::default()), &m, &cfg);
    let status = |i: usize| match &plans[i].steps[0] {
        Step::ApplyQueueStatus { status, .. } => status.clone(),
        _ => unreachable!(),
    };
    // Written by the first leader; a second one starts from the cache.
    let mut cache = Cache::default();
    listed(&mut cache, objects(Some((status(0), status(1)))));
    let mut second = QueueStatusWriter::default();
    let ix = build_index(&cache, &IndexConfig::default());
    assert!(second.plans(&ix, &m, &cfg).is_empty(), "nothing to write");
}

#[test]
fn a_cluster_queue_without_selector_says_so_and_warns_once_about_its_local_queues() {
    let mut cache = Cache::default();
    let mut open = cq("cluster-gpu", 8);
    open.spec.namespace_selector = None;
    listed(
        &mut cache,
        vec![
            Obj::Flavor(Box::new(flavor("a100"))),
            Obj::ClusterQueue(Box::new(open.clone())),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
        ],
    );
    let m = Metrics::new();
    let mut w = QueueStatusWriter::default();
    let ix = build_index(&cache, &IndexConfig::default());
    let (wanted, events) = w.wanted_and_events(&ix, &m, "2027-01-01T00:00:00Z");
    let wanted: BTreeMap<_, _> = wanted.into_iter().collect();
    let conditions = wanted[&cqr("cluster-gpu")]["conditions"].as_array().unwrap().clone();
    let selected = conditions.iter().find(|c| c["type"] == "NamespacesSelected").unwrap();
    assert_eq!(
        (selected["status"].as_str(), selected["reason"].as_str()),
        (Some("False"), Some("NoNamespaceSelector"))
    );
    let message = selected["message"].as_str().unwrap();
    assert!(message.contains("research/team-a"), "{message}");
    // Still active: it can admit once it selects namespaces.
    assert_eq!(conditions[0]["status"], "True");
    let l = &wanted[&lqr("research", "team-a")]["conditions"][0];
    assert_eq!(
        (l["status"].as_str(), l["reason"].as_str()),
        (Some("False"), Some("NamespaceNotSelected"))
    );
    // One Warning Event on the ClusterQueue, with the same words.
    assert_eq!(
        events.iter().map(|p| &p.purpose).collect::<Vec<_>>(),
        [&Purpose::Report]
    );
    let Step::Event(e) = &events[0].steps[0] else {
        panic!("not an event: {events:?}")
    };
    assert_eq!(e.regarding.kind.as_deref(), Some("ClusterQueue"));
    assert_eq!(
        (e.type_, e.reason.as_str(), e.note.as_str()),
        ("Warning", "NoNamespaceSelector", message)
    );
    assert_eq!(events.len(), 1);
    // Not again while nothing changes.
    assert!(w.wanted_and_events(&ix, &m, "2027-01-01T00:00:05Z").1.is_empty());
    // `{}`: selected, no Event.
    open.spec.namespace_selector = Some(Default::default());
    handle(&mut cache, None, Msg::Apply(Obj::ClusterQueue(Box::new(open))), 0);
    let ix = build_index(&cache, &IndexConfig::default());
    let (wanted, events) = w.wanted_and_events(&ix, &m, "2027-01-01T00:01:00Z");
    assert!(events.is_empty());
    let wanted: BTreeMap<_, _> = wanted.into_iter().collect();
    let conditions = wanted[&cqr("cluster-gpu")]["conditions"].as_array().unwrap().clone();
    let selected = conditions.iter().find(|c| c["type"] == "NamespacesSelected").unwrap();
    assert_eq!(
        (selected["status"].as_str(), selected["lastTransitionTime"].as_str()),
        (Some("True"), Some("2027-01-01T00:01:00Z"))
    );
    assert_eq!(wanted[&lqr("research", "team-a")]["conditions"][0]["status"], "True");
}

#[test]
fn queues_are_inactive_while_a_flavor_or_their_cluster_queue_is_missing() {
    let mut cache = Cache::default();
    listed(
        &mut cache,
        vec![
            Obj::ClusterQueue(Box::new(cq("cluster-gpu", 8))),
            Obj::LocalQueue(Box::new(lq("research", "team-a", "cluster-gpu"))),
            Obj::LocalQueue(Box::new(lq("research", "orphan", "nowhere"))),
        ],
    );
    let m = Metrics::new();
    let mut w = QueueStatusWriter::default();
    let ix = build_index(&cache, &IndexConfig::default());
    let wanted: BTreeMap<_, _> = w.wanted(&ix, &m, "2027-01-01T00:00:00Z").into_iter().collect();
    let cond = |id: QueueRef| wanted[&id]["conditions"][0].clone();
    let c = cond(cqr("cluster-gpu"));
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("FlavorNotFound"))
    );
    assert!(c["message"].as_str().unwrap().contains("a100"), "{c}");
    let l = cond(lqr("research", "team-a"));
    assert_eq!(
        (l["status"].as_str(), l["reason"].as_str()),
        (Some("False"), Some("ClusterQueueIsInactive"))
    );
    let o = cond(lqr("research", "orphan"));
    assert_eq!(o["reason"], "ClusterQueueDoesNotExist");
    assert_eq!(o["message"], "ClusterQueue nowhere does not exist");
    for (id, status) in wanted {
        w.last.insert(id, status);
    }
    // The flavor appears: both become active, with a new transition time.
    handle(&mut cache, None, Msg::Apply(Obj::Flavor(Box::new(flavor("a100")))), 0);
    let ix = build_index(&cache, &IndexConfig::default());
    let again: BTreeMap<_, _> = w.wanted(&ix, &m, "2027-01-01T00:01:00Z").into_iter().collect();
    let c = &again[&cqr("cluster-gpu")]["conditions"][0];
    assert_eq!(
        (c["status"].as_str(), c["lastTransitionTime"].as_str()),
        (Some("True"), Some("2027-01-01T00:01:00Z"))
    );
    let l = &again[&lqr("research", "team-a")]["conditions"][0];
    assert_eq!(l["status"], "True");
    assert!(
        !again.contains_key(&lqr("research", "orphan")),
        "unchanged: not written again"
    );
}

#[test]
fn the_cache_keeps_a_job_whole_only_until_its_workload_exists() {
    let mut cache = Cache::default();
    let j = job_fixture("job-suspended-create-response.json");
    let mut wl = sluice_kinds::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    wl.metadata.uid = Some("wl-uid".into());
    handle(&mut cache, None, Msg::Apply(Obj::Job(Arc::new(j.clone()))), 0);
    let key = "research/train-research".to_string();
    assert!(matches!(cache.objects[&Kind::JOB][&key], Obj::JobJson(_)));
    // A new leader would create the Workload from the cached Job.
    let mut ix = build_index(&cache, &IndexConfig::default());
    assert!(ix.take_refetch().is_empty());
    handle(&mut cache, None, Msg::Apply(Obj::Workload(Arc::new(wl))), 0);
    assert!(matches!(cache.objects[&Kind::JOB][&key], Obj::JobView(_)));
    handle(&mut cache, None, Msg::Apply(Obj::Job(Arc::new(j))), 0);
    assert!(matches!(cache.objects[&Kind::JOB][&key], Obj::JobView(_)));
}

#[test]
fn a_malformed_object_is_reported_not_fatal() {
    let mut cache = Cache::default();
    listed(
        &mut cache,
        vec![Obj::Malformed(
            Kind::ClusterQueue,
            "bad".into(),
            "spec: missing field".into(),
        )],
    );
    let ix = build_index(&cache, &IndexConfig::default());
    assert_eq!(
        ix.errors()[&(Kind::ClusterQueue, "bad".to_string())].reason,
        "Malformed"
    );
    assert!(ix.is_ready());
}

mod fair_share;
mod memory;

// ----- the whole loop against a mocked API server ---------------------------------

use ::http::{Request, Response};
use kube::client::Body;
use tokio::sync::mpsc;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn list(kind: &str, items: Vec<serde_json::Value>) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": format!("{kind}List"), "metadata": {"resourceVersion": "7"}, "items": items})
}

/// Serves lists from `lists` (by path), leaves watches open, echoes
/// writes back, and reports every write (method, path, body).
async fn serve(
    mut handle: Handle,
    lists: BTreeMap<&'static str, serde_json::Value>,
    writes: mpsc::UnboundedSender<(String, String, serde_json::Value)>,
    mut conflicts: usize,
) {
    let mut open_watches = Vec::new();
    while let Some((req, send)) = handle.next_request().await {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let bytes = req.into_body().collect_bytes().await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let reply = |v: &serde_json::Value| {
            Response::builder()
                .status(200)
                .body(Body::from(serde_json::to_vec(v).unwrap()))
                .unwrap()
        };
        if method == "GET" && query.contains("watch=true") {
            open_watches.push(send);
        } else if method == "GET" {
            let v = lists
                .get(path.as_str())
                .cloned()
                .unwrap_or_else(|| panic!("unexpected list {path}"));
            send.send_response(reply(&v));
        } else if conflicts > 0 && path.ends_with("/status") && path.contains("/workloads/") {
            // The recorded 409 of a conflicting status apply.
            conflicts -= 1;
            let conflict = crate::testing::fixture("error-409-workload-status-apply-conflict.json");
            send.send_response(
                Response::builder()
                    .status(409)
                    .body(Body::from(serde_json::to_vec(&conflict).unwrap()))
                    .unwrap(),
            );
            let _ = writes.send(("409".into(), path, body));
        } else {
            let answer = if path.starts_with("/apis/batch/v1/") {
                crate::testing::fixture("job-unsuspend-merge-patch-response.json")
            } else {
                body.clone()
            };
            send.send_response(reply(&answer));
            let _ = writes.send((method, path, body));
        }
    }
}

async fn start(
    lists: BTreeMap<&'static str, serde_json::Value>,
    conflicts: usize,
) -> (
    mpsc::UnboundedReceiver<(String, String, serde_json::Value)>,
    u16,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), RunError>>,
) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(serve(handle, lists, tx, conflicts));
    let port = free_port();
    let cfg = RunConfig {
        kube_qps: 1000.0,
        kube_burst: 1000,
        identity: "test-0".into(),
        metrics_addr: ([127, 0, 0, 1], port).into(),
        ..test_config(IndexConfig::default())
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(client, cfg, async move {
        let _ = stopped.await;
    }));
    (rx, port, stop, task)
}

fn config_lists(
    workloads: Vec<serde_json::Value>,
    jobs: Vec<serde_json::Value>,
) -> BTreeMap<&'static str, serde_json::Value> {
    BTreeMap::from([
        (
            "/apis/sluice.dev/v1alpha1/resourceflavors",
            list("ResourceFlavor", vec![serde_json::to_value(flavor("a100")).unwrap()]),
        ),
        (
            "/apis/sluice.dev/v1alpha1/clusterqueues",
            list(
                "ClusterQueue",
                vec![serde_json::to_value(cq("cluster-gpu", 8)).unwrap()],
            ),
        ),
        (
            "/apis/sluice.dev/v1alpha1/localqueues",
            list(
                "LocalQueue",
                vec![serde_json::to_value(lq("research", "team-a", "cluster-gpu")).unwrap()],
            ),
        ),
        ("/apis/sluice.dev/v1alpha1/cohorts", list("Cohort", vec![])),
        (
            "/apis/sluice.dev/v1alpha1/workloadpriorityclasses",
            list("WorkloadPriorityClass", vec![]),
        ),
        ("/apis/sluice.dev/v1alpha1/workloads", list("Workload", workloads)),
        ("/apis/batch/v1/jobs", list("Job", jobs)),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            list("PriorityClass", vec![]),
        ),
        (
            "/api/v1/namespaces",
            list("Namespace", vec![json!({"metadata": {"name": "research"}})]),
        ),
    ])
}

async fn next_write(
    rx: &mut mpsc::UnboundedReceiver<(String, String, serde_json::Value)>,
) -> (String, String, serde_json::Value) {
    // Queue status writes come on their own schedule: not what these tests look at.
    loop {
        let w = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a write within 5 s")
            .expect("server running");
        if !w.1.contains("/clusterqueues/") && !w.1.contains("/localqueues/") {
            return w;
        }
    }
}

/// The recorded suspended Job (as the API returns it) and the Workload
/// the controller makes for it, with a UID as the API server would set.
fn recorded_job_and_workload() -> (serde_json::Value, Workload) {
    let job = crate::testing::fixture("job-suspended-create-response.json");
    let mut wl = sluice_kinds::job::workload_for_job(
        &job_fixture("job-suspended-create-response.json"),
        false,
        |_| None,
        |_| None,
    )
    .unwrap();
    wl.metadata.uid = Some("wl-uid".into());
    (job, wl)
}

#[tokio::test]
async fn the_loop_lists_everything_becomes_ready_and_admits_through_the_api() {
    let (job, wl) = recorded_job_and_workload();
    let (mut writes, port, stop, task) =
        start(config_lists(vec![serde_json::to_value(&wl).unwrap()], vec![job]), 0).await;
    let (method, path, body) = next_write(&mut writes).await;
    assert_eq!(
        (method.as_str(), path.as_str()),
        (
            "PATCH",
            "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research/status"
        )
    );
    assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
    let (method, path, body) = next_write(&mut writes).await;
    assert_eq!(
        (method.as_str(), path.as_str()),
        ("PATCH", "/apis/batch/v1/namespaces/research/jobs/train-research")
    );
    assert_eq!(body["spec"]["suspend"], false);
    let (code, _) = tokio::task::spawn_blocking(move || http_get(port, "/readyz"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    let (_, metrics) = tokio::task::spawn_blocking(move || http_get(port, "/metrics"))
        .await
        .unwrap();
    assert!(metrics.contains("sluice_admitted_workloads_total 1"), "{metrics}");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("graceful stop")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn after_a_restart_the_loop_restores_admissions_and_admits_nothing_twice() {
    let first = admitted_workload();
    let mut second_job = job_fixture("job-suspended-create-response.json");
    second_job.metadata.name = Some("second".into());
    second_job.metadata.uid = Some("job-uid-second".into());
    let mut second = sluice_kinds::job::workload_for_job(&second_job, false, |_| None, |_| None).unwrap();
    second.metadata.uid = Some("wl-uid-second".into());
    let mut running = job_fixture("job-running-pods-ready.json");
    running.metadata.namespace = Some("research".into());
    let lists = config_lists(
        vec![
            serde_json::to_value(&first).unwrap(),
            serde_json::to_value(&second).unwrap(),
        ],
        vec![
            serde_json::to_value(&running).unwrap(),
            serde_json::to_value(&second_job).unwrap(),
        ],
    );
    let (mut writes, _port, stop, task) = start(lists, 0).await;
    // The only Workload write: "second" explained (it does not fit beside the restored one).
    loop {
        let (method, path, body) = next_write(&mut writes).await;
        if path.contains("clusterqueues") || path.contains("localqueues") {
            continue;
        }
        assert_eq!(method, "PATCH");
        assert_eq!(
            path,
            "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-second/status"
        );
        assert!(body["status"].get("admission").is_none(), "{body}");
        assert_eq!(body["status"]["pending"]["reason"], "InsufficientQuota");
        break;
    }
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("graceful stop")
        .unwrap()
        .unwrap();
    // Nothing else was written for the workloads.
    while let Ok(w) = writes.try_recv() {
        assert!(!w.1.contains("/workloads/"), "unexpected write {w:?}");
    }
}

#[tokio::test]
async fn a_conflicting_admission_write_is_rolled_back_and_retried_by_the_loop() {
    let (job, wl) = recorded_job_and_workload();
    let mut lists = config_lists(vec![serde_json::to_value(&wl).unwrap()], vec![job]);
    // After the failed write the loop reads the Workload again.
    lists.insert(
        "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research",
        serde_json::to_value(&wl).unwrap(),
    );
    let (mut writes, _port, stop, task) = start(lists, 1).await;
    let (code, path, body) = next_write(&mut writes).await;
    assert_eq!(code, "409");
    assert!(path.ends_with("/workloads/job-train-research/status"));
    assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
    // Rolled back, and not followed by the Job patch: the retry comes next.
    let (method, path, body) = next_write(&mut writes).await;
    assert_eq!(
        (method.as_str(), path.as_str()),
        (
            "PATCH",
            "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research/status"
        )
    );
    assert_eq!(body["status"]["admission"]["clusterQueue"], "cluster-gpu");
    let (_, path, body) = next_write(&mut writes).await;
    assert_eq!(path, "/apis/batch/v1/namespaces/research/jobs/train-research");
    assert_eq!(body["spec"]["suspend"], false);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("graceful stop")
        .unwrap()
        .unwrap();
}

#[test]
fn a_superseded_explanation_is_counted_as_dropped_and_the_newest_is_written() {
    use crate::index::Index;
    use crate::writer::{Lane, WriteQueue};
    let queue = WriteQueue::default();
    let mut ix = Index::new(IndexConfig::default());
    let metrics = crate::metrics::Metrics::new();
    let pending = |reason: &str| crate::plan::Plan {
        purpose: Purpose::Pending { uid: "u".into() },
        steps: vec![Step::workload_status(
            crate::plan::ObjKey {
                namespace: "research".into(),
                name: "w".into(),
            },
            "u".into(),
            WorkloadStatus {
                pending: Some(serde_json::from_value(json!({"reason": reason, "message": reason})).unwrap()),
                ..WorkloadStatus::default()
            },
            1,
        )],
    };
    super::event_loop::enqueue(&queue, &mut ix, pending("first"), &metrics);
    super::event_loop::enqueue(&queue, &mut ix, pending("second"), &metrics);
    let text = metrics.encode();
    assert!(
        text.contains(r#"sluice_dropped_writes_total{lane="explanation",reason="superseded"} 1"#),
        "{text}"
    );
    assert_eq!(queue.lane_len(Lane::Explanation), 1);
    let (_, plan) = queue.pop().expect("queued");
    match &plan.steps[0] {
        Step::ApplyWorkloadStatus { status, .. } => {
            assert_eq!(status.pending.as_ref().unwrap().reason, "second");
        }
        other => panic!("{other:?}"),
    }
}

/// The run configuration of these tests: the default limits, one replica
/// without leader election, a metrics port the OS picks.
fn test_config(index: IndexConfig) -> RunConfig {
    RunConfig {
        kube_qps: 50.0,
        kube_burst: 100,
        index,
        idle: crate::idle::IdleSettings::default(),
        positions_interval: Duration::from_secs(60),
        lease: None,
        identity: "test".into(),
        metrics_addr: "127.0.0.1:0".parse().unwrap(),
        queue_status_interval: Duration::from_secs(1),
        explain_qps: 0.0,
        kueue_workloads: None,
    }
}
