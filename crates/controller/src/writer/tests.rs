//! Every API interaction of the writer against a mocked API server: each
//! expected call is checked (method, path, query, content type, body) and
//! answered with a payload recorded from a real API server
//! (ApiServerVerifier pattern). A call that never comes fails after 2 s; a
//! call that should not come is caught by `no_more_requests`.

use std::collections::BTreeMap;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use sluice_api::v1alpha1::WorkloadStatus;
use sluice_scheduler::WorkloadState;
use tokio::sync::Mutex;

use super::*;
use crate::index::{Index, IndexConfig, Kind};
use crate::plan::{JobRef, ObjKey, Purpose};
use crate::testing::{cq, fixture, flavor, job_fixture, lq};
use sluice_kinds::ObjPatch;
use sluice_kinds::job;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Reply = tower_test::mock::SendResponse<Response<Body>>;

const T0: i64 = 1_800_000_000_000;
const WL_STATUS: &str = "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research/status";
const JOB: &str = "/apis/batch/v1/namespaces/research/jobs/train-research";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/research/events";

fn mock() -> (Writer, Handle) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Writer::new(Client::new(svc, "default"), "sluice-controller-0"), handle)
}

struct Call {
    query: BTreeMap<String, String>,
    content_type: String,
    body: Value,
    reply: Reply,
}

/// Waits for the next request; checks method and path, returns the rest.
async fn expect(handle: &mut Handle, method: Method, path: &str) -> Call {
    let (req, reply) = tokio::time::timeout(Duration::from_secs(2), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request came for {method} {path}"))
        .expect("service dropped");
    assert_eq!(req.method(), method, "{}", req.uri());
    assert_eq!(req.uri().path(), path);
    let query = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Call {
        query,
        content_type,
        body,
        reply,
    }
}

fn respond(reply: Reply, status: StatusCode, body: &Value) {
    reply.send_response(
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn no_more_requests(handle: &mut Handle) {
    if let Ok(Some((req, _))) = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await {
        panic!("unexpected request {} {}", req.method(), req.uri());
    }
}

/// Answers an admission's status write and Job patch with the recorded
/// replies (resourceVersion 891 for the status).
async fn answer_admission_writes(handle: &mut Handle) {
    let call = expect(handle, Method::PATCH, WL_STATUS).await;
    respond(
        call.reply,
        StatusCode::OK,
        &fixture("workload-status-apply-force-response.json"),
    );
    let call = expect(handle, Method::PATCH, JOB).await;
    respond(
        call.reply,
        StatusCode::OK,
        &fixture("job-unsuspend-merge-patch-response.json"),
    );
}

/// Writes plans the way the run loop does: queued, written by [`drain`],
/// and what it reports handed to [`Index::feedback`]. Every plan here
/// writes a status, so each one is reported. Returns how many failed.
async fn apply_plans(writer: Writer, index: &Mutex<Index>, plans: Vec<Plan>, now_ms: impl Fn() -> i64) -> usize {
    assert!(plans.iter().all(|p| p.steps.iter().any(Step::wants_feedback)));
    let queue = Arc::new(WriteQueue::default());
    let n = plans.len();
    for plan in plans {
        assert!(queue.push(plan).is_empty());
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let drainer = tokio::spawn(drain(writer, queue, tx, Arc::new(Metrics::new())));
    let mut failed = 0;
    for _ in 0..n {
        let (_, plan, result) = rx.recv().await.expect("the writer reports every plan");
        failed += usize::from(result.is_err());
        index.lock().await.feedback(&plan, &result, now_ms());
    }
    drainer.abort();
    failed
}

/// An index that has just admitted the recorded Job `research/train-research`
/// (4 pods × 2 GPUs) onto flavor a100, and that admission's plan.
fn admitted() -> (Index, Plan) {
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    ix.apply_local_queue(lq("research", "team-a", "cluster-gpu"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    let j = job_fixture("job-suspended-create-response.json");
    let mut wl = job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    wl.metadata.uid = Some("wl-uid".into());
    wl.metadata.generation = Some(1);
    ix.apply_job(j, T0);
    ix.take_plans();
    ix.apply_workload(wl, T0);
    let (mut plans, _) = ix.cycle(T0);
    assert_eq!(plans.len(), 1);
    (ix, plans.remove(0))
}

#[tokio::test]
async fn admission_applies_status_then_unsuspends_the_job_then_records_events() {
    let (writer, mut handle) = mock();
    let (ix, plan) = admitted();
    let ix = std::sync::Arc::new(Mutex::new(ix));
    let ix2 = ix.clone();
    let task = tokio::spawn(async move { apply_plans(writer, &ix2, vec![plan], || T0).await });

    let call = expect(&mut handle, Method::PATCH, WL_STATUS).await;
    assert_eq!(
        call.query,
        query(&[("fieldManager", "sluice-controller"), ("force", "true")])
    );
    assert_eq!(call.content_type, "application/apply-patch+yaml");
    assert_eq!(call.body["apiVersion"], "sluice.dev/v1alpha1");
    assert_eq!(call.body["kind"], "Workload");
    assert_eq!(
        call.body["metadata"],
        json!({"name": "job-train-research", "namespace": "research", "uid": "wl-uid"}),
        "the uid is a precondition: a Workload created again under the name is not written"
    );
    let status: WorkloadStatus = serde_json::from_value(call.body["status"].clone()).unwrap();
    assert_eq!(status.admission.as_ref().unwrap().cluster_queue, "cluster-gpu");
    assert_eq!(
        call.body["status"]["admission"]["podSetAssignments"][0],
        json!({"name": "main", "count": 4, "flavors": {"nvidia.com/gpu": "a100"}, "resourceUsage": {"nvidia.com/gpu": "8"}})
    );
    let types: Vec<_> = status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(types, [("QuotaReserved", "True"), ("Admitted", "True")]);
    respond(
        call.reply,
        StatusCode::OK,
        &fixture("workload-status-apply-force-response.json"),
    );

    let call = expect(&mut handle, Method::PATCH, JOB).await;
    assert_eq!(call.query, query(&[("fieldManager", "sluice-controller")]));
    assert_eq!(call.content_type, "application/merge-patch+json");
    assert_eq!(call.body["spec"]["suspend"], json!(false));
    assert_eq!(
        call.body["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu": "a100"})
    );
    assert_eq!(
        call.body["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        "the Job's own GPU toleration, not duplicated"
    );
    let recorded: job::SchedulingDirectives = serde_json::from_str(
        call.body["metadata"]["annotations"][job::ORIGINAL_SCHEDULING]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(recorded.node_selector, None);
    respond(
        call.reply,
        StatusCode::OK,
        &fixture("job-unsuspend-merge-patch-response.json"),
    );

    for kind in ["Workload", "Job"] {
        let call = expect(&mut handle, Method::POST, EVENTS).await;
        assert_eq!(call.query, query(&[("fieldManager", "sluice-controller")]));
        let b = &call.body;
        assert_eq!(b["apiVersion"], "events.k8s.io/v1");
        assert!(b["eventTime"].is_string(), "eventTime is required: {b}");
        assert_eq!(b["reportingController"], "sluice.dev/controller");
        assert_eq!(b["reportingInstance"], "sluice-controller-0");
        assert_eq!(
            (b["reason"].as_str(), b["action"].as_str()),
            (Some("Admitted"), Some("Admit"))
        );
        assert_eq!(b["regarding"]["kind"], kind);
        assert!(b["note"].as_str().unwrap().contains("cluster-gpu"));
        respond(
            call.reply,
            StatusCode::CREATED,
            &fixture("event-events.k8s.io-v1-about-job-create-response.json"),
        );
    }
    assert_eq!(task.await.unwrap(), 0);
    no_more_requests(&mut handle).await;
    // The status write was acknowledged with the resourceVersion of the
    // recorded answer (891): a watch event from before it does not undo the
    // admission in the index; a later one is taken as it is.
    let mut ix = ix.lock().await;
    let key = ObjKey::new("research", "job-train-research");
    let j = job_fixture("job-suspended-create-response.json");
    let mut before = job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    before.metadata.uid = Some("wl-uid".into());
    before.metadata.resource_version = Some("890".into());
    ix.apply_workload(before.clone(), T0 + 1);
    assert!(ix.workload_status(&key).unwrap().admission.is_some());
    before.metadata.resource_version = Some("892".into());
    ix.apply_workload(before, T0 + 2);
    assert!(ix.workload_status(&key).unwrap().admission.is_none());
}

#[tokio::test]
async fn a_conflicting_status_write_rolls_the_admission_back_and_touches_nothing_else() {
    let (writer, mut handle) = mock();
    let (ix, plan) = admitted();
    let ix = std::sync::Arc::new(Mutex::new(ix));
    let ix2 = ix.clone();
    let task = tokio::spawn(async move { apply_plans(writer, &ix2, vec![plan], || T0 + 1).await });
    let call = expect(&mut handle, Method::PATCH, WL_STATUS).await;
    respond(
        call.reply,
        StatusCode::CONFLICT,
        &fixture("error-409-workload-status-apply-conflict.json"),
    );
    assert_eq!(task.await.unwrap(), 1);
    no_more_requests(&mut handle).await;
    let mut ix = ix.lock().await;
    assert_eq!(ix.engine().workload_state("wl-uid"), Some(WorkloadState::Pending));
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 0);
    // Retried by the next cycle, once.
    let (plans, _) = ix.cycle(T0 + 2);
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].purpose, Purpose::Admit { uid: "wl-uid".into() });
}

#[tokio::test]
async fn a_server_error_on_the_status_write_is_rolled_back_too() {
    let (writer, mut handle) = mock();
    let (ix, plan) = admitted();
    let ix = std::sync::Arc::new(Mutex::new(ix));
    let ix2 = ix.clone();
    let task = tokio::spawn(async move { apply_plans(writer, &ix2, vec![plan], || T0 + 1).await });
    let call = expect(&mut handle, Method::PATCH, WL_STATUS).await;
    respond(
        call.reply,
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "etcdserver: request timed out", "reason": "InternalError", "code": 500}),
    );
    assert_eq!(task.await.unwrap(), 1);
    assert_eq!(
        ix.lock().await.engine().workload_state("wl-uid"),
        Some(WorkloadState::Pending)
    );
}

#[tokio::test]
async fn restoring_a_started_job_suspends_clears_start_time_then_patches_the_template() {
    let (writer, mut handle) = mock();
    let key = ObjKey::new("research", "train-research");
    let resuspended = job_fixture("job-resuspended-after-running.json");
    let plan = Plan {
        purpose: Purpose::Requeue { uid: "u".into() },
        steps: vec![
            Step::PatchJob {
                job: JobRef::job(key.namespace.clone(), key.name.clone()),
                patch: ObjPatch::Merge(job::suspend_patch()),
            },
            Step::PatchJobStatus {
                key: key.clone(),
                patch: job::clear_start_time_patch(),
            },
            Step::PatchJob {
                job: JobRef::job(key.namespace.clone(), key.name.clone()),
                patch: ObjPatch::Merge(json!({"spec": {"template": {"spec": {"nodeSelector": null}}}})),
            },
        ],
    };
    let metrics = Metrics::new();
    let task = tokio::spawn(async move {
        writer
            .apply(&plan, Some(&metrics))
            .await
            .map_err(|e| (e.step, e.error.code()))
    });
    let call = expect(&mut handle, Method::PATCH, JOB).await;
    assert_eq!(call.body, json!({"spec": {"suspend": true}}));
    respond(call.reply, StatusCode::OK, &serde_json::to_value(&resuspended).unwrap());
    let call = expect(&mut handle, Method::PATCH, &format!("{JOB}/status")).await;
    assert_eq!(call.content_type, "application/merge-patch+json");
    assert_eq!(call.body, json!({"status": {"startTime": null}}));
    respond(call.reply, StatusCode::OK, &serde_json::to_value(&resuspended).unwrap());
    // Had startTime still been set, the server refuses the template patch (recorded 422).
    let call = expect(&mut handle, Method::PATCH, JOB).await;
    assert_eq!(call.body["spec"]["template"]["spec"]["nodeSelector"], Value::Null);
    respond(
        call.reply,
        StatusCode::UNPROCESSABLE_ENTITY,
        &fixture("job-resuspended-template-nodeselector-patch-error-422.json"),
    );
    assert_eq!(task.await.unwrap(), Err((2, Some(422))));
}

#[tokio::test]
async fn workloads_are_created_by_server_side_apply() {
    let (writer, mut handle) = mock();
    let j = job_fixture("job-suspended-create-response.json");
    let wl = job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
    let task = tokio::spawn(async move { writer.step(&Step::ApplyWorkload(Box::new(wl))).await.is_ok() });
    let call = expect(
        &mut handle,
        Method::PATCH,
        "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/job-train-research",
    )
    .await;
    assert_eq!(
        call.query,
        query(&[("fieldManager", "sluice-controller"), ("force", "true")])
    );
    assert_eq!(call.content_type, "application/apply-patch+yaml");
    assert_eq!(call.body["kind"], "Workload");
    assert_eq!(call.body["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(call.body["spec"]["podSets"][0]["count"], 4);
    assert_eq!(call.body["spec"]["queueName"], "team-a");
    assert!(call.body.get("status").is_none() || call.body["status"].is_null());
    respond(
        call.reply,
        StatusCode::CREATED,
        &fixture("workload-apply-create-response.json"),
    );
    assert!(task.await.unwrap());
}

#[tokio::test]
async fn a_lost_event_does_not_stop_the_plan() {
    let (writer, mut handle) = mock();
    let (_, plan) = admitted();
    let task = tokio::spawn(async move { writer.apply(&plan, None).await.is_ok() });
    answer_admission_writes(&mut handle).await;
    let call = expect(&mut handle, Method::POST, EVENTS).await;
    respond(
        call.reply,
        StatusCode::UNPROCESSABLE_ENTITY,
        &fixture("error-422-event-missing-eventtime.json"),
    );
    let call = expect(&mut handle, Method::POST, EVENTS).await;
    respond(
        call.reply,
        StatusCode::CREATED,
        &fixture("event-events.k8s.io-v1-about-job-create-response.json"),
    );
    assert!(task.await.unwrap());
}

#[tokio::test]
async fn a_follower_makes_no_calls() {
    let (writer, mut handle) = mock();
    let (_tx, rx) = watch::channel(false);
    let writer = writer.with_leader(rx);
    let (_, plan) = admitted();
    let err = writer.apply(&plan, None).await.unwrap_err();
    assert!(matches!(err.error, WriteError::NotLeader { .. }));
    no_more_requests(&mut handle).await;
}

#[tokio::test]
async fn pods_of_an_evicted_job_are_listed_until_none_runs_or_terminates() {
    // The recorded pod: deleted by the job controller after a suspend, still
    // in its grace period (a 1.24 server counts it in neither `active` nor
    // anything else).
    let pod = fixture("pod-of-job-terminating-after-suspend.json");
    let job_uid = pod["metadata"]["labels"]["controller-uid"]
        .as_str()
        .unwrap()
        .to_string();
    let plan = Plan {
        purpose: Purpose::ConfirmPodsGone { uid: "wl-uid".into() },
        steps: vec![Step::ConfirmPodsGone {
            job: JobRef::job("research", "train-preempted"),
            selector: format!("controller-uid={job_uid}"),
        }],
    };
    let metrics = Metrics::new();
    let (writer, mut handle) = mock();
    let answer = |items: Vec<Value>| {
        json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
               "metadata": {"resourceVersion": "460"},
               "items": items.into_iter().map(|m| json!({"kind": "PartialObjectMetadata",
                   "apiVersion": "meta.k8s.io/v1", "metadata": m})).collect::<Vec<_>>()})
    };
    let server = tokio::spawn(async move {
        for items in [vec![pod["metadata"].clone()], vec![]] {
            let call = expect(&mut handle, Method::GET, "/api/v1/namespaces/research/pods").await;
            assert_eq!(
                call.query,
                query(&[
                    ("labelSelector", &format!("controller-uid%3D{job_uid}")),
                    (
                        "fieldSelector",
                        "status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
                    ),
                    ("limit", "1"),
                ])
            );
            respond(call.reply, StatusCode::OK, &answer(items));
        }
        no_more_requests(&mut handle).await;
    });
    let err = writer.apply(&plan, Some(&metrics)).await.unwrap_err();
    assert!(matches!(err.error, WriteError::PodsRemain { .. }), "{err}");
    assert_eq!(err.error.metric_label(), "pods_remain");
    writer.apply(&plan, Some(&metrics)).await.unwrap();
    server.await.unwrap();
    assert!(
        !metrics.encode().contains("kind=\"pod_list\""),
        "a read is not counted as a write"
    );
}

fn lease(holder: &str, renew: &str, seconds: i32) -> k8s_openapi::api::coordination::v1::Lease {
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "sluice-controller", "namespace": "sluice-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds,
                 "acquireTime": renew, "renewTime": renew}
    }))
    .unwrap()
}

#[test]
fn the_fence_allows_writes_only_while_the_observed_lease_is_ours_and_fresh() {
    let fence = LeaseFence::new("sluice-controller-0", Duration::from_secs(1));
    let renewed = Timestamp::from_second(1_800_000_000).unwrap().as_millisecond();
    assert!(!fence.allows(renewed), "nothing observed yet: no writes");
    fence.observe(Some(&lease("sluice-controller-0", "2027-01-15T08:00:00.000000Z", 15)));
    let renewed = "2027-01-15T08:00:00Z".parse::<Timestamp>().unwrap().as_millisecond();
    assert!(fence.allows(renewed + 13_999));
    // A call started 13 s after the renewal may take 1 s at most.
    assert_eq!(fence.remaining(renewed + 13_000), Some(Duration::from_secs(1)));
    // 15 s lease, 1 s margin: refused from 14 s on, even if no newer Lease
    // was seen (the renewal failed, or the watch is down).
    assert!(!fence.allows(renewed + 14_000));
    fence.observe(Some(&lease("sluice-controller-1", "2027-01-15T08:00:10.000000Z", 15)));
    assert!(!fence.allows(renewed + 10_001), "another replica holds it");
    fence.observe(None);
    assert!(!fence.allows(renewed + 10_001), "deleted");
}

#[tokio::test]
async fn a_leader_whose_lease_ran_out_makes_no_calls() {
    let (writer, mut handle) = mock();
    let (_tx, rx) = watch::channel(true);
    let fence = Arc::new(LeaseFence::new("sluice-controller-0", Duration::from_secs(1)));
    // Renewed by us long ago: the manager still says "leader", the fence not.
    fence.observe(Some(&lease("sluice-controller-0", "2020-01-01T00:00:00.000000Z", 15)));
    let writer = writer.with_leader(rx).with_fence(fence);
    let (_, plan) = admitted();
    let err = writer.apply(&plan, None).await.unwrap_err();
    assert!(matches!(err.error, WriteError::NotLeader { .. }));
    no_more_requests(&mut handle).await;
}

#[test]
fn events_about_cluster_scoped_objects_go_to_the_default_namespace() {
    let spec = EventSpec {
        regarding: k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("sluice.dev/v1alpha1".into()),
            kind: Some("ClusterQueue".into()),
            name: Some("broken".into()),
            ..Default::default()
        },
        type_: "Warning",
        reason: "InvalidClusterQueue".into(),
        action: "Skip",
        note: "x".repeat(2000),
    };
    let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let ev = event(&spec, "sluice-0", now);
    assert_eq!(ev.metadata.namespace.as_deref(), Some("default"));
    assert!(ev.metadata.name.as_deref().unwrap().starts_with("broken."));
    assert_eq!(
        ev.note.as_ref().unwrap().len(),
        1024,
        "notes are capped at the API's 1 kB"
    );
    let v = serde_json::to_value(&ev).unwrap();
    assert_eq!(v["eventTime"], "2027-01-15T08:00:00.000000Z");
}

#[tokio::test]
async fn queue_and_cohort_status_is_applied_to_the_status_subresource() {
    let (writer, mut handle) = mock();
    use crate::plan::QueueRef;
    let step = |queue: QueueRef| Step::ApplyQueueStatus {
        queue,
        status: json!({"pendingWorkloads": 3}),
    };
    let server = tokio::spawn(async move {
        for (path, kind) in [
            ("/apis/sluice.dev/v1alpha1/clusterqueues/team-a/status", "ClusterQueue"),
            (
                "/apis/sluice.dev/v1alpha1/namespaces/research/localqueues/team-a/status",
                "LocalQueue",
            ),
            ("/apis/sluice.dev/v1alpha1/cohorts/team-a/status", "Cohort"),
        ] {
            let call = expect(&mut handle, Method::PATCH, path).await;
            assert_eq!(
                call.query,
                query(&[("fieldManager", "sluice-controller"), ("force", "true")])
            );
            assert_eq!(call.content_type, "application/apply-patch+yaml");
            assert_eq!(call.body["kind"], kind);
            assert_eq!(call.body["status"], json!({"pendingWorkloads": 3}));
            let mut answer = call.body.clone();
            answer["metadata"]["resourceVersion"] = json!("7");
            respond(call.reply, StatusCode::OK, &answer);
        }
        no_more_requests(&mut handle).await;
    });
    writer
        .step(&step(QueueRef::ClusterQueue("team-a".into())))
        .await
        .unwrap();
    writer
        .step(&step(QueueRef::LocalQueue(crate::plan::ObjKey::new(
            "research", "team-a",
        ))))
        .await
        .unwrap();
    writer.step(&step(QueueRef::Cohort("team-a".into()))).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn with_an_event_lane_an_admission_makes_two_calls_and_hands_its_events_over() {
    let (writer, mut handle) = mock();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let writer = writer.with_event_lane(tx);
    let (_, plan) = admitted();
    let metrics = Metrics::new();
    let server = tokio::spawn(async move {
        answer_admission_writes(&mut handle).await;
        no_more_requests(&mut handle).await;
    });
    let acks = writer.apply(&plan, Some(&metrics)).await.unwrap();
    server.await.unwrap();
    assert_eq!(acks, [(0, "891".to_string())]);
    // The lane holds one: the Workload's Event; the Job's was dropped.
    let first = rx.try_recv().unwrap();
    assert_eq!(first.regarding.kind.as_deref(), Some("Workload"));
    assert!(rx.try_recv().is_err());
    let text = metrics.encode();
    assert!(text.contains("sluice_dropped_events_total 1"), "{text}");
    assert!(
        !text.contains("kind=\"event\""),
        "not written by the main writer: {text}"
    );
}

/// A plan writing the status of `research/<name>` (uid `<name>`).
fn status_plan(purpose: Purpose, name: &str) -> Plan {
    let key = ObjKey {
        namespace: "research".into(),
        name: name.into(),
    };
    Plan {
        purpose,
        steps: vec![Step::workload_status(key, name.into(), WorkloadStatus::default(), 1)],
    }
}

/// Answers the next request (a Workload status write) with its own body,
/// and returns the workload's name.
async fn answer_status_write(handle: &mut Handle) -> String {
    let (req, reply) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .expect("a write within 5 s")
        .expect("service dropped");
    let path = req.uri().path().to_string();
    let name = path
        .strip_prefix("/apis/sluice.dev/v1alpha1/namespaces/research/workloads/")
        .and_then(|p| p.strip_suffix("/status"))
        .unwrap_or_else(|| panic!("not a status write: {path}"))
        .to_string();
    let body = json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "research", "uid": name, "resourceVersion": "5"},
        "spec": {"queueName": "q", "podSets": []}
    });
    respond(reply, StatusCode::OK, &body);
    name
}

#[tokio::test]
async fn lazy_writes_take_unused_budget_then_their_own_share() {
    // qps 1, burst 5; a share of 2 per second (burst 2).
    let (writer, _handle) = mock();
    let writer = writer.with_rate_limit(1.0, 5).with_explain_rate(2.0);
    // The bucket is full: that token would be lost, so it is unused.
    assert_eq!(writer.spare(1), Ok(()));
    // No longer full: the share pays, twice, then says how long to wait
    // (half a second at 2/s; the bucket is full again in a second).
    assert_eq!(writer.spare(1), Ok(()));
    assert_eq!(writer.spare(1), Ok(()));
    let wait = writer.spare(1).expect_err("no budget left");
    assert!(wait <= Duration::from_millis(500), "{wait:?}");
    assert!(wait >= Duration::from_millis(400), "{wait:?}");
    // The state lane still finds 4 tokens at once.
    for _ in 0..4 {
        assert_eq!(writer.limiter.as_ref().unwrap().try_acquire(1, 0), None);
    }
    // Without a share, only unused budget.
    let (writer, _handle) = mock();
    let writer = writer.with_rate_limit(1.0, 5);
    assert_eq!(writer.spare(2), Ok(()));
    assert!(writer.spare(1).is_err());
    // Without a client-side limit, nothing is held back.
    let (writer, _handle) = mock();
    for _ in 0..100 {
        assert_eq!(writer.spare(1), Ok(()));
    }
}

#[tokio::test]
async fn a_finished_state_is_a_merge_patch_of_that_field_with_the_uid() {
    let (writer, mut handle) = mock();
    let server = tokio::spawn(async move {
        let call = expect(&mut handle, Method::PATCH, WL_STATUS).await;
        assert_eq!(call.query, query(&[("fieldManager", "sluice-controller")]));
        assert_eq!(call.content_type, "application/merge-patch+json");
        assert_eq!(
            call.body,
            json!({"metadata": {"uid": "wl-uid"}, "status": {"state": "Finished"}})
        );
        respond(call.reply, StatusCode::OK, &json!({}));
        no_more_requests(&mut handle).await;
    });
    let step = Step::PatchWorkloadState {
        key: ObjKey::new("research", "job-train-research"),
        uid: "wl-uid".into(),
        state: sluice_api::v1alpha1::WorkloadState::Finished,
    };
    assert_eq!(step.kind(), "workload_status");
    assert!(step.wants_feedback());
    writer.step(&step).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn with_a_full_explanation_backlog_an_admission_goes_out_within_one_token() {
    // qps 200, burst 20: explanations take only tokens a full bucket would
    // lose; the lazy lanes have no share of their own here.
    let (writer, mut handle) = mock();
    let writer = writer.with_rate_limit(200.0, 20);
    let queue = Arc::new(WriteQueue::default());
    for i in 0..200 {
        assert!(
            queue
                .push(status_plan(Purpose::Pending { uid: format!("e{i}") }, &format!("e{i}")))
                .is_empty()
        );
    }
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let drainer = tokio::spawn(drain(writer, queue.clone(), tx, Arc::new(Metrics::new())));
    for _ in 0..30 {
        assert!(answer_status_write(&mut handle).await.starts_with('e'));
    }
    assert!(
        queue
            .push(status_plan(Purpose::Admit { uid: "admit".into() }, "admit"))
            .is_empty()
    );
    // At most the explanation already in flight is answered before it.
    let mut before = 0;
    while answer_status_write(&mut handle).await != "admit" {
        before += 1;
        assert!(before <= 1, "{before} explanation writes went before the admission");
    }
    drainer.abort();
}

#[tokio::test]
async fn explanation_writes_never_exceed_their_own_share_and_the_unused_budget() {
    // The client-side limit at 1/s (a burst of 1: one unused token at the
    // start, one more at most in 500 ms), the share at 20/s (a burst of
    // 20): in 500 ms, at most 2 + 20 + 10 (+1 in flight) of 200 waiting.
    let (writer, mut handle) = mock();
    let writer = writer.with_rate_limit(1.0, 1).with_explain_rate(20.0);
    let queue = Arc::new(WriteQueue::default());
    for i in 0..200 {
        let _ = queue.push(status_plan(Purpose::Pending { uid: format!("e{i}") }, &format!("e{i}")));
    }
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let drainer = tokio::spawn(drain(writer, queue.clone(), tx, Arc::new(Metrics::new())));
    let start = std::time::Instant::now();
    let mut written = 0;
    while start.elapsed() < Duration::from_millis(500) {
        match tokio::time::timeout(Duration::from_millis(50), handle.next_request()).await {
            Ok(Some((_, reply))) => {
                respond(reply, StatusCode::OK, &json!({}));
                written += 1;
            }
            Ok(None) => break,
            Err(_) => {}
        }
    }
    drainer.abort();
    assert!(written >= 20, "the burst goes out at once: {written}");
    assert!(written <= 33, "{written} explanation writes in 500 ms at 20/s");
    assert!(queue.lane_len(Lane::Explanation) >= 169);
}

#[tokio::test]
async fn a_retired_gang_workload_is_deleted_with_its_uid_as_precondition_and_gone_counts_as_done() {
    let (writer, mut handle) = mock();
    let path = "/apis/sluice.dev/v1alpha1/namespaces/research/workloads/gang-ft";
    let server = tokio::spawn(async move {
        let call = expect(&mut handle, Method::DELETE, path).await;
        assert_eq!(call.body["preconditions"], json!({"uid": "wl-uid-ft"}), "{}", call.body);
        respond(
            call.reply,
            StatusCode::OK,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        );
        // Deleted meanwhile (by the garbage collector, with its last Job).
        let call = expect(&mut handle, Method::DELETE, path).await;
        respond(
            call.reply,
            StatusCode::NOT_FOUND,
            &fixture("error-404-workload-status-apply-missing-object.json"),
        );
        no_more_requests(&mut handle).await;
    });
    let step = Step::DeleteWorkload {
        key: ObjKey::new("research", "gang-ft"),
        uid: "wl-uid-ft".into(),
    };
    assert_eq!(step.kind(), "workload");
    assert!(step.is_write() && step.is_budgeted());
    writer.step(&step).await.unwrap();
    writer.step(&step).await.unwrap();
    server.await.unwrap();
}

/// The answer of a patch of an object of another kind: the object, as
/// the API server returns it (its kind's JSON).
fn patched_object(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
           "metadata": {"name": name, "namespace": "research", "uid": "u", "resourceVersion": "7"},
           "spec": {}})
}

#[tokio::test]
async fn a_jobset_is_started_with_a_merge_patch_of_its_annotation_then_a_guarded_json_patch() {
    use sluice_kinds::{self as kinds, JobKind};
    let js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "pretrain", "namespace": "research", "uid": "js-uid", "labels": {"sluice.dev/queue": "q"}},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
            "parallelism": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}}}]}
    });
    let view = kinds::jobset::view(&js, false).unwrap();
    let a100 = flavor("a100");
    let flavors = std::collections::BTreeMap::from([("workers".to_string(), vec![&a100])]);
    let job = JobRef::new(JobKind::JobSet, "research", "pretrain");
    let steps: Vec<Step> = kinds::start_patches(&view, &flavors, &BTreeMap::new())
        .unwrap()
        .into_iter()
        .map(|(_, patch)| Step::PatchJob {
            job: job.clone(),
            patch,
        })
        .collect();
    let (writer, mut handle) = mock();
    let path = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/research/jobsets/pretrain";
    let server = tokio::spawn(async move {
        let call = expect(&mut handle, Method::PATCH, path).await;
        assert_eq!(call.content_type, "application/merge-patch+json");
        assert_eq!(call.query, query(&[("fieldManager", "sluice-controller")]));
        assert!(call.body["metadata"]["annotations"]["sluice.dev/original-scheduling"].is_string());
        respond(
            call.reply,
            StatusCode::OK,
            &patched_object("jobset.x-k8s.io/v1alpha2", "JobSet", "pretrain"),
        );
        let call = expect(&mut handle, Method::PATCH, path).await;
        assert_eq!(call.content_type, "application/json-patch+json");
        assert_eq!(
            call.body,
            json!([
                {"op": "test", "path": "/spec/replicatedJobs/0/name", "value": "workers"},
                {"op": "add", "path": "/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector",
                 "value": {"gpu": "a100"}},
                {"op": "add", "path": "/spec/replicatedJobs/0/template/spec/template/spec/tolerations",
                 "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
                {"op": "add", "path": "/spec/suspend", "value": false}
            ])
        );
        respond(
            call.reply,
            StatusCode::OK,
            &patched_object("jobset.x-k8s.io/v1alpha2", "JobSet", "pretrain"),
        );
        no_more_requests(&mut handle).await;
    });
    writer
        .apply(
            &Plan {
                purpose: Purpose::StartJob { uid: "wl".into() },
                steps,
            },
            None,
        )
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn kubeflow_and_ray_jobs_are_suspended_at_their_own_paths_and_their_pods_found_by_their_labels() {
    use sluice_kinds::JobKind;
    let (writer, mut handle) = mock();
    let server = tokio::spawn(async move {
        let call = expect(
            &mut handle,
            Method::PATCH,
            "/apis/kubeflow.org/v1/namespaces/research/pytorchjobs/bert",
        )
        .await;
        assert_eq!(call.content_type, "application/merge-patch+json");
        assert_eq!(call.body, json!({"spec": {"runPolicy": {"suspend": true}}}));
        respond(
            call.reply,
            StatusCode::OK,
            &patched_object("kubeflow.org/v1", "PyTorchJob", "bert"),
        );
        let call = expect(
            &mut handle,
            Method::PATCH,
            "/apis/ray.io/v1/namespaces/research/rayjobs/tune",
        )
        .await;
        assert_eq!(call.body, json!({"spec": {"suspend": true}}));
        respond(
            call.reply,
            StatusCode::OK,
            &patched_object("ray.io/v1", "RayJob", "tune"),
        );
        let call = expect(&mut handle, Method::GET, "/api/v1/namespaces/research/pods").await;
        assert_eq!(call.query["labelSelector"], "ray.io%2Fcluster%3Dtune-rc-1");
        respond(
            call.reply,
            StatusCode::OK,
            &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": "9"}, "items": []}),
        );
        no_more_requests(&mut handle).await;
    });
    for (kind, name) in [(JobKind::PyTorchJob, "bert"), (JobKind::RayJob, "tune")] {
        writer
            .step(&Step::PatchJob {
                job: JobRef::new(kind, "research", name),
                patch: ObjPatch::Merge(kind.integration().hold().patch(None)),
            })
            .await
            .unwrap();
    }
    writer
        .step(&Step::ConfirmPodsGone {
            job: JobRef::new(JobKind::RayJob, "research", "tune"),
            selector: "ray.io/cluster=tune-rc-1".into(),
        })
        .await
        .unwrap();
    server.await.unwrap();
}

/// For each kind: the start patches, then (from the started, suspended
/// object) the restore patches, go to the kind's path with the content
/// type of each patch and exactly its body.
#[tokio::test]
async fn every_kind_is_started_and_restored_by_exact_requests_at_its_path() {
    use sluice_kinds::{self as kinds, JobKind};
    let pod = json!({"spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "x",
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
    let meta = |kind: &str, api: &str| {
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "research", "uid": "u",
               "labels": {"sluice.dev/queue": "q"}}})
    };
    let mut jobset = meta("JobSet", "jobset.x-k8s.io/v1alpha2");
    jobset["spec"] = json!({"suspend": true, "replicatedJobs": [{"name": "w", "replicas": 1,
        "template": {"spec": {"template": pod}}}]});
    let mut pytorch = meta("PyTorchJob", "kubeflow.org/v1");
    pytorch["spec"] =
        json!({"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": pod}}});
    let mut mpi = meta("MPIJob", "kubeflow.org/v2beta1");
    mpi["spec"] =
        json!({"runPolicy": {"suspend": true}, "mpiReplicaSpecs": {"Worker": {"replicas": 1, "template": pod}}});
    let mut ray = meta("RayJob", "ray.io/v1");
    ray["spec"] = json!({"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
        "headGroupSpec": {"template": pod}, "workerGroupSpecs": []}});
    let cases = [
        (
            JobKind::JobSet,
            jobset,
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/research/jobsets/x",
        ),
        (
            JobKind::PyTorchJob,
            pytorch,
            "/apis/kubeflow.org/v1/namespaces/research/pytorchjobs/x",
        ),
        (
            JobKind::MpiJob,
            mpi,
            "/apis/kubeflow.org/v2beta1/namespaces/research/mpijobs/x",
        ),
        (JobKind::RayJob, ray, "/apis/ray.io/v1/namespaces/research/rayjobs/x"),
    ];
    let a100 = flavor("a100");
    for (kind, obj, path) in cases {
        let view = kinds::view(kind, &obj, false).unwrap();
        let flavors = view
            .templates
            .iter()
            .map(|t| (t.pod_set.clone(), vec![&a100]))
            .collect();
        let start = kinds::start_patches(&view, &flavors, &BTreeMap::new()).unwrap();
        // The object as the server holds it once started and suspended again.
        let mut started = obj.clone();
        for (_, p) in &start {
            match p {
                ObjPatch::Merge(m) => json_patch::merge(&mut started, m),
                ObjPatch::Json(ops) => {
                    let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
                    json_patch::patch(&mut started, &ops).unwrap()
                }
            }
        }
        let suspend = kinds::suspend_patch(&kinds::view(kind, &started, false).unwrap());
        json_patch::merge(
            &mut started,
            match &suspend {
                ObjPatch::Merge(m) => m,
                ObjPatch::Json(_) => unreachable!("suspend is a merge patch"),
            },
        );
        let restore = kinds::restore_patches(&kinds::view(kind, &started, false).unwrap()).unwrap();
        assert!(!restore.is_empty(), "{kind:?}: something to restore");
        let expected: Vec<ObjPatch> = start.iter().chain(&restore).map(|(_, p)| p.clone()).collect();
        let job = JobRef::new(kind, "research", "x");
        let steps = expected
            .iter()
            .map(|p| Step::PatchJob {
                job: job.clone(),
                patch: p.clone(),
            })
            .collect();
        let (writer, mut handle) = mock();
        let answer = obj.clone();
        let server = tokio::spawn(async move {
            for p in expected {
                let call = expect(&mut handle, Method::PATCH, path).await;
                let (content_type, body) = match p {
                    ObjPatch::Merge(b) => ("application/merge-patch+json", b),
                    ObjPatch::Json(b) => ("application/json-patch+json", b),
                };
                assert_eq!(call.content_type, content_type, "{path}");
                assert_eq!(call.body, body, "{path}");
                respond(call.reply, StatusCode::OK, &answer);
            }
            no_more_requests(&mut handle).await;
        });
        writer
            .apply(
                &Plan {
                    purpose: Purpose::StartJob { uid: "wl".into() },
                    steps,
                },
                None,
            )
            .await
            .unwrap();
        server.await.unwrap();
    }
}
