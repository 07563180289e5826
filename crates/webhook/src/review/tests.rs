use std::collections::BTreeMap;

use super::*;
use crate::cache::MemoryView;
use crate::config::WebhookConfig;
use crate::testing::{fixture, patch_of, reviewer_with};
use serde_json::json;

fn reviewer() -> Reviewer {
    reviewer_with(Arc::new(MemoryView::synced_with_nvidia_runtime_class()))
}

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn response_of(reply: &Reply) -> Value {
    let v: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(v["apiVersion"], ADMISSION_V1);
    assert_eq!(v["kind"], "AdmissionReview");
    v["response"].clone()
}

fn apply_reply(object: &Value, reply: &Reply) -> Value {
    let mut doc = object.clone();
    let ops = patch_of(&reply.body);
    json_patch::patch(&mut doc, &ops).unwrap();
    doc
}

/// Checks uid echo, applies the patch to the request object and checks that
/// reviewing the patched object again yields no patch.
fn review_applied(r: &Reviewer, endpoint: Endpoint, review: &Value) -> (Reply, Value) {
    let reply = r.handle(endpoint, &body(review)).unwrap();
    assert_eq!(response_of(&reply)["uid"], review["request"]["uid"]);
    let patched = apply_reply(&review["request"]["object"], &reply);
    let mut again = review.clone();
    again["request"]["object"] = patched.clone();
    let second = r.handle(endpoint, &body(&again)).unwrap();
    assert!(
        response_of(&second).get("patch").is_none(),
        "not idempotent: {:?}",
        patch_of(&second.body)
    );
    (reply, patched)
}

#[test]
fn recorded_pod_requests_only_gets_the_recorded_limits_patch() {
    let review = fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json");
    let (reply, patched) = review_applied(&reviewer(), Endpoint::MutatePods, &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    let ours = serde_json::to_value(patch_of(&reply.body)).unwrap();
    let recorded = fixture("jsonpatch-pod-gpu-requests-to-limits-decoded.json");
    for op in recorded.as_array().unwrap() {
        assert!(
            ours.as_array().unwrap().contains(op),
            "recorded op {op} missing from {ours}"
        );
    }
    // The stored Pod after the recorded patch has the same resources as ours.
    let stored = fixture("webhook-patched-pod-requests-moved-to-limits-create-response.json");
    assert_eq!(
        patched["spec"]["containers"][0]["resources"],
        stored["spec"]["containers"][0]["resources"]
    );
    assert_eq!(patched["spec"]["runtimeClassName"], "nvidia");
    let warnings = response_of(&reply)["warnings"].as_array().unwrap().len();
    assert_eq!(warnings, 4, "one warning per fix");
}

#[test]
fn recorded_job_gets_the_recorded_runtimeclass_and_toleration_and_affinity() {
    let review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let (reply, ours) = review_applied(&reviewer(), Endpoint::MutateQueued(JobKind::Job), &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    let mut theirs = review["request"]["object"].clone();
    let recorded: json_patch::Patch =
        serde_json::from_value(fixture("jsonpatch-job-runtimeclass-toleration-decoded.json")).unwrap();
    json_patch::patch(&mut theirs, &recorded).unwrap();
    // Same result as the recorded patch, plus the node affinity this webhook adds.
    let mut without_affinity = ours.clone();
    let affinity = without_affinity["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("affinity")
        .unwrap();
    assert_eq!(without_affinity, theirs);
    assert_eq!(
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
            [0]["key"],
        "nvidia.com/gpu.present"
    );
    // Already suspended: no suspend op.
    assert!(!reply.fixes.contains(&FixKind::Suspend));
    // The stored Job kept what the patch set.
    let stored = fixture("webhook-patched-job-stored.json");
    assert_eq!(
        stored["spec"]["template"]["spec"]["tolerations"],
        ours["spec"]["template"]["spec"]["tolerations"]
    );
}

#[test]
fn recorded_dry_run_job_is_suspended_like_a_real_one() {
    let review = fixture("admissionreview-request-job-create-dryrun.json");
    assert_eq!(review["request"]["dryRun"], true);
    let r = reviewer();
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::Job), &review);
    assert_eq!(patched["spec"]["suspend"], true);
    assert!(reply.fixes.contains(&FixKind::Suspend));
    let ops = serde_json::to_value(patch_of(&reply.body)).unwrap();
    assert_eq!(ops[0], json!({"op": "add", "path": "/spec/suspend", "value": true}));
    let mut real = review.clone();
    real["request"]["dryRun"] = json!(false);
    let real_reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&real)).unwrap();
    assert_eq!(real_reply.body, reply.body, "dryRun changes nothing");
}

#[test]
fn recorded_requests_only_job_gets_limits_and_suspend() {
    let review = fixture("admissionreview-request-job-create-gpu-requests-only.json");
    let (reply, patched) = review_applied(&reviewer(), Endpoint::MutateQueued(JobKind::Job), &review);
    let c = &patched["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(c["limits"]["nvidia.com/gpu"], c["requests"]["nvidia.com/gpu"]);
    assert_eq!(patched["spec"]["suspend"], true);
    let mut kinds = reply.fixes.clone();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            FixKind::RuntimeClass,
            FixKind::Toleration,
            FixKind::NodeAffinity,
            FixKind::GpuLimits,
            FixKind::Suspend
        ]
    );
}

#[test]
fn recorded_job_controller_pod_is_fixed() {
    let review = fixture("admissionreview-request-pod-create-by-job-controller.json");
    let (reply, patched) = review_applied(&reviewer(), Endpoint::MutatePods, &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(
        patched["metadata"]["generateName"],
        review["request"]["object"]["metadata"]["generateName"]
    );
}

#[test]
fn recorded_delete_and_non_queue_updates_pass_validation() {
    let r = reviewer();
    let review = fixture("admissionreview-request-job-delete.json");
    for endpoint in [
        Endpoint::ValidateQueued(JobKind::Job),
        Endpoint::MutateQueued(JobKind::Job),
    ] {
        let reply = r.handle(endpoint, &body(&review)).unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed, "{endpoint:?}");
        assert_eq!(
            response_of(&reply),
            json!({"uid": review["request"]["uid"], "allowed": true})
        );
    }
    // The mutating endpoint ignores UPDATEs.
    let review = fixture("admissionreview-request-job-update-unsuspend.json");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
}

#[test]
fn queued_job_is_unsuspended_only_by_the_controller() {
    // Fixture (d): alice flips spec.suspend true -> false on a Job in
    // LocalQueue team-a. The Job would start before Sluice admitted it.
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    assert_eq!(review["request"]["oldObject"]["spec"]["suspend"], true);
    assert_eq!(review["request"]["object"]["spec"]["suspend"], false);
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let resp = response_of(&reply);
    assert_eq!(resp["status"]["code"], 403);
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("spec.suspend: cannot be changed from true to false by \"alice@example.com\""),
        "{msg}"
    );
    assert!(
        msg.contains("LocalQueue \"team-a\"") && msg.contains("only the Sluice controller"),
        "{msg}"
    );

    // The controller may.
    review["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
    // Staying suspended, or a Job that is not queued: allowed.
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["spec"]["suspend"] = json!(true);
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    for which in ["object", "oldObject"] {
        review["request"][which]["metadata"]["labels"] = json!({"app": "x"});
    }
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
    // Nor does removing the label first, while the Job is suspended.
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["spec"]["suspend"] = json!(true);
    review["request"]["object"]["metadata"]["labels"] = json!({"app": "x"});
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = reply.response.result.message.clone();
    assert!(
        msg.starts_with("metadata.labels[sluice.dev/queue]: cannot be removed by \"alice@example.com\""),
        "{msg}"
    );
    // Moving it to another LocalQueue while suspended stays allowed.
    review["request"]["object"]["metadata"]["labels"] = json!({"sluice.dev/queue": "team-b"});
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
    // Removing the label in the same update does not get around it.
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["metadata"]["labels"] = json!({});
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
        .unwrap();
    assert!(
        reply
            .response
            .result
            .message
            .contains("spec.suspend: cannot be changed"),
        "{:?}",
        reply.response
    );
}

#[test]
fn queue_label_cannot_change_while_the_job_runs() {
    let r = reviewer();
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["metadata"]["labels"]["sluice.dev/queue"] = json!("team-b");
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let resp = response_of(&reply);
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 403);
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("metadata.labels[sluice.dev/queue]: cannot change from \"team-a\" to \"team-b\""),
        "{msg}"
    );

    // Both suspended: allowed.
    review["request"]["object"]["spec"]["suspend"] = json!(true);
    review["request"]["oldObject"]["spec"]["suspend"] = json!(true);
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );

    // Removing the label from a running Job is a change too.
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("sluice.dev/queue");
    review["request"]["oldObject"]["spec"]["suspend"] = json!(false);
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Denied
    );
}

#[test]
fn malformed_bodies_are_errors_not_panics() {
    let r = reviewer();
    for bad in [
        &b""[..],
        b"{",
        b"[]",
        b"null",
        b"{\"kind\":\"AdmissionReview\"}",
        b"\xff\xfe",
    ] {
        assert!(
            matches!(r.handle(Endpoint::MutatePods, bad), Err(ReviewError::Malformed(_))),
            "{bad:?}"
        );
    }
    let no_request = json!({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview"});
    assert!(matches!(
        r.handle(Endpoint::MutatePods, &body(&no_request)),
        Err(ReviewError::NoRequest)
    ));
    // A spec that is not a pod spec is a denial naming the field.
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    review["request"]["object"]["spec"]["containers"] = json!("nope");
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        response_of(&reply)["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("spec: not a valid pod spec")
    );
}

#[test]
fn unknown_version_or_kind_is_allowed_with_a_warning() {
    let r = reviewer();
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    review["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Skipped);
    let resp: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(resp["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(resp["response"]["allowed"], true);
    assert!(
        resp["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("admission.k8s.io/v1beta1")
    );

    let review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Skipped);
    let w = response_of(&reply)["warnings"][0].as_str().unwrap().to_owned();
    assert!(w.contains("batch/v1 Job") && w.contains("v1 Pod"), "{w}");
}

#[test]
fn excluded_namespaces_are_never_touched() {
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    review["request"]["namespace"] = json!("kube-system");
    let reply = reviewer().handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
    let r = reviewer_with(Arc::new(MemoryView::synced_with_nvidia_runtime_class()));
    let cfg = r.config().clone().with_own_namespace("team-a");
    let r = Reviewer::new(cfg, Arc::new(MemoryView::synced_with_nvidia_runtime_class()));
    let review = fixture("admissionreview-request-job-create-gpu-requests-only.json");
    assert_eq!(
        r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
}

fn unlabelled_job_review(namespace: &str, labels: Option<Value>) -> Value {
    let mut review = fixture("admissionreview-request-job-create-dryrun.json");
    review["request"]["namespace"] = json!(namespace);
    review["request"]["dryRun"] = json!(false);
    let meta = &mut review["request"]["object"]["metadata"];
    meta["namespace"] = json!(namespace);
    match labels {
        Some(l) => meta["labels"] = l,
        None => {
            meta.as_object_mut().unwrap().remove("labels");
        }
    }
    review
}

#[test]
fn default_queue_namespaces_label_and_suspend_unlabelled_jobs() {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    let opt_in = BTreeMap::from([("sluice.dev/default-queue".to_owned(), "enabled".to_owned())]);
    view.upsert_namespace("ml", opt_in.clone());
    view.upsert_namespace("ml-empty", opt_in);
    view.upsert_namespace("web", BTreeMap::new());
    view.upsert_local_queue("ml", "default");
    let r = reviewer_with(view);

    // No labels at all: the labels map is created.
    let review = unlabelled_job_review("ml", None);
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::Job), &review);
    assert_eq!(patched["metadata"]["labels"], json!({"sluice.dev/queue": "default"}));
    assert_eq!(patched["spec"]["suspend"], true);
    assert!(reply.fixes.contains(&FixKind::QueueLabel));

    // Other labels kept, ours added with an escaped path.
    let review = unlabelled_job_review("ml", Some(json!({"app": "train"})));
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::Job), &review);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "train", "sluice.dev/queue": "default"})
    );
    let ops = serde_json::to_value(patch_of(&reply.body)).unwrap();
    assert_eq!(ops[0]["path"], "/metadata/labels/sluice.dev~1queue");

    // Opted in without a default LocalQueue: not queued, told why.
    let review = unlabelled_job_review("ml-empty", None);
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    let patched = apply_reply(&review["request"]["object"], &reply);
    assert_eq!(patched["spec"]["suspend"], false);
    assert!(
        response_of(&reply)["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("no LocalQueue \"default\""))
    );

    // Not opted in: only GPU fixes.
    let review = unlabelled_job_review("web", None);
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert!(!reply.fixes.contains(&FixKind::Suspend));
    assert!(!reply.fixes.contains(&FixKind::QueueLabel));
}

#[test]
fn default_queue_path_queues_unlabelled_jobs_without_a_synced_cache() {
    // The API server only sends Jobs of opted-in namespaces to this path, so
    // it must queue them even when the cache cannot say so (unsynced,
    // namespace not seen yet, --no-watch): failing open would start the Job.
    for view in [MemoryView::default(), MemoryView::synced_with_nvidia_runtime_class()] {
        let synced = view.synced();
        if synced {
            // Synced, namespace unknown to the cache, LocalQueue present.
            view.upsert_local_queue("ml", "default");
        }
        let r = reviewer_with(Arc::new(view));
        let review = unlabelled_job_review("ml", Some(json!({"app": "train"})));
        let (reply, patched) = review_applied(&r, Endpoint::MutateQueuedDefaultQueue(JobKind::Job), &review);
        assert_eq!(patched["spec"]["suspend"], true, "synced={synced}");
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"app": "train", "sluice.dev/queue": "default"}),
            "synced={synced}"
        );
        assert!(reply.fixes.contains(&FixKind::QueueLabel));
        let warned = response_of(&reply)["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("has not yet listed LocalQueues"));
        assert_eq!(warned, !synced, "unsynced cache is warned about");

        // The plain path still trusts only the cache.
        let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
        assert!(!reply.fixes.contains(&FixKind::Suspend));
    }
    // Synced and known to have no LocalQueue default: not queued, told why.
    let r = reviewer();
    let review = unlabelled_job_review("ml", None);
    let reply = r
        .handle(Endpoint::MutateQueuedDefaultQueue(JobKind::Job), &body(&review))
        .unwrap();
    assert!(!reply.fixes.contains(&FixKind::Suspend));
    let warnings = reply.response.warnings.clone().unwrap_or_default();
    assert!(
        warnings.iter().any(|w| w.contains("no LocalQueue \"default\"")),
        "{warnings:?}"
    );
    // A labelled Job on this path is handled like on /mutate/jobs.
    let review = fixture("admissionreview-request-job-create-dryrun.json");
    let a = r
        .handle(Endpoint::MutateQueuedDefaultQueue(JobKind::Job), &body(&review))
        .unwrap();
    let b = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(a.body, b.body);
    assert_eq!(
        Endpoint::from_path("/mutate/jobs/default-queue"),
        Some(Endpoint::MutateQueuedDefaultQueue(JobKind::Job))
    );
}

#[test]
fn empty_queue_label_is_denied_and_missing_queue_warned() {
    let r = reviewer();
    let review = unlabelled_job_review("team-a", Some(json!({"sluice.dev/queue": ""})));
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        response_of(&reply)["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("metadata.labels[sluice.dev/queue]: is empty")
    );

    let review = fixture("admissionreview-request-job-create-dryrun.json");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    let warnings = response_of(&reply)["warnings"].clone();
    assert!(
        warnings
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("LocalQueue \"team-a\" does not exist")),
        "{warnings}"
    );
}

#[test]
fn gpu_denial_names_container_and_values() {
    let mut review = fixture("admissionreview-request-job-create-gpu-requests-only.json");
    review["request"]["object"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
        json!({"nvidia.com/gpu": "2"});
    let reply = reviewer()
        .handle(Endpoint::MutateQueued(JobKind::Job), &body(&review))
        .unwrap();
    let resp = response_of(&reply);
    assert_eq!(resp["allowed"], false);
    assert!(resp.get("patch").is_none());
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("spec.template.spec.containers[0]") && msg.contains("requests 1") && msg.contains("limits 2"),
        "{msg}"
    );
}

#[test]
fn ephemeral_containers_are_checked_for_the_visible_devices_escape() {
    let r = reviewer();
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json");
    let req = &mut review["request"];
    req["operation"] = json!("UPDATE");
    req["subResource"] = json!("ephemeralcontainers");
    req["oldObject"] = req["object"].clone();
    let debug = |name: &str, value: &str| json!({"name": name, "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]});
    req["object"]["spec"]["ephemeralContainers"] = json!([debug("debugger", "all")]);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = reply.response.result.message.clone();
    assert!(
        msg.starts_with("spec.ephemeralContainers[0] (\"debugger\").env[NVIDIA_VISIBLE_DEVICES]"),
        "{msg}"
    );
    assert!(response_of(&reply).get("patch").is_none());

    // Harmless values, or one that was already there: allowed, unpatched.
    review["request"]["object"]["spec"]["ephemeralContainers"] = json!([debug("debugger", "void")]);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    review["request"]["oldObject"]["spec"]["ephemeralContainers"] = json!([debug("old", "all")]);
    review["request"]["object"]["spec"]["ephemeralContainers"] = json!([debug("old", "all"), debug("new", "none")]);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // A new harmful one next to an old one is still found.
    review["request"]["object"]["spec"]["ephemeralContainers"] = json!([debug("old", "all"), debug("new", "0")]);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply
            .response
            .result
            .message
            .contains("ephemeralContainers[1] (\"new\")")
    );
}

#[test]
fn response_patch_is_base64_json_patch() {
    let review = fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json");
    let reply = reviewer().handle(Endpoint::MutatePods, &body(&review)).unwrap();
    let resp = response_of(&reply);
    assert_eq!(resp["patchType"], "JSONPatch");
    assert!(resp["patch"].is_string());
    // Same shape as the recorded accepted response.
    let recorded = fixture("admissionreview-response-jsonpatch-pod-gpu-requests-to-limits.json");
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let mut ours = keys(&resp);
    ours.retain(|k| k != "warnings");
    assert_eq!(ours, keys(&recorded["response"]));
}

mod sluice_kinds {
    use super::*;

    pub(super) fn review_of(kind: &str, plural: &str, op: &str, object: Value, old: Value, user: &str) -> Value {
        json!({
            "apiVersion": ADMISSION_V1,
            "kind": "AdmissionReview",
            "request": {
                "uid": "00000000-0000-0000-0000-000000000001",
                "kind": {"group": "sluice.dev", "version": "v1alpha1", "kind": kind},
                "resource": {"group": "sluice.dev", "version": "v1alpha1", "resource": plural},
                "name": object["metadata"]["name"],
                "operation": op,
                "userInfo": {"username": user},
                "object": object,
                "oldObject": old,
                "dryRun": false
            }
        })
    }

    fn local_queue(cq: &str) -> Value {
        json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "team-a"}, "spec": {"clusterQueue": cq}})
    }

    #[test]
    fn local_queue_cluster_queue_is_immutable() {
        let r = reviewer();
        let ep = Endpoint::Validate(SluiceKind::LocalQueue);
        let create = review_of(
            "LocalQueue",
            "localqueues",
            "CREATE",
            local_queue("gpus"),
            Value::Null,
            "alice",
        );
        assert_eq!(r.handle(ep, &body(&create)).unwrap().verdict, Verdict::Allowed);
        let same = review_of(
            "LocalQueue",
            "localqueues",
            "UPDATE",
            local_queue("gpus"),
            local_queue("gpus"),
            "alice",
        );
        assert_eq!(r.handle(ep, &body(&same)).unwrap().verdict, Verdict::Allowed);
        let moved = review_of(
            "LocalQueue",
            "localqueues",
            "UPDATE",
            local_queue("cpus"),
            local_queue("gpus"),
            "alice",
        );
        let reply = r.handle(ep, &body(&moved)).unwrap();
        assert_eq!(reply.verdict, Verdict::Denied);
        let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
        assert!(msg.starts_with("spec.clusterQueue: is immutable"), "{msg}");
    }

    /// Issue 39: a LocalQueue pointing at a ClusterQueue that does not
    /// select its namespace, and a selector change that leaves LocalQueues
    /// out, are allowed with a warning.
    #[test]
    fn namespace_selection_is_warned_not_denied() {
        let view = Arc::new(MemoryView::synced_empty());
        view.upsert_namespace("team-a", BTreeMap::from([("team".into(), "a".into())]));
        view.replace_cluster_queues(BTreeMap::from([("gpus".to_owned(), None)]));
        view.replace_local_queue_targets(BTreeMap::from([(("team-a".into(), "team-a".into()), "gpus".into())]));
        let r = reviewer_with(view.clone());
        let warnings = |reply: &Reply| -> Vec<String> {
            response_of(reply)["warnings"]
                .as_array()
                .map(|w| w.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default()
        };
        let ep = Endpoint::Validate(SluiceKind::LocalQueue);
        let create = review_of(
            "LocalQueue",
            "localqueues",
            "CREATE",
            local_queue("gpus"),
            Value::Null,
            "alice",
        );
        let reply = r.handle(ep, &body(&create)).unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed);
        assert_eq!(
            warnings(&reply),
            [
                "sluice: LocalQueue team-a/team-a cannot admit workloads: namespace team-a is not selected by \
              ClusterQueue gpus: it has no namespaceSelector, which selects no namespace (set namespaceSelector: {} \
              to serve every namespace); its workloads wait with reason NamespaceNotSelected"
            ]
        );
        view.upsert_cluster_queue("gpus", Some(Default::default()));
        let reply = r.handle(ep, &body(&create)).unwrap();
        assert_eq!(warnings(&reply), Vec::<String>::new());

        let ep = Endpoint::Validate(SluiceKind::ClusterQueue);
        let cq = |selector: Value| {
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "gpus"},
                   "spec": {"namespaceSelector": selector}})
        };
        let team_b = json!({"matchLabels": {"team": "b"}});
        let update = |new: Value, old: Value| review_of("ClusterQueue", "clusterqueues", "UPDATE", new, old, "admin");
        let reply = r.handle(ep, &body(&update(cq(team_b.clone()), cq(json!({}))))).unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed);
        let w = warnings(&reply);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("sluice: the namespaceSelector {matchLabels: team=b} of ClusterQueue gpus does not select the namespace of 1 LocalQueue(s)"),
            "{w:?}"
        );
        // The selector unchanged (another field edited): not told again.
        let mut edited = cq(team_b.clone());
        edited["spec"]["minRuntimeSeconds"] = json!(60);
        let reply = r.handle(ep, &body(&update(edited, cq(team_b)))).unwrap();
        assert_eq!(warnings(&reply), Vec::<String>::new());
        // Dropped (unset): serves no namespace.
        let mut unset = cq(Value::Null);
        unset["spec"].as_object_mut().unwrap().remove("namespaceSelector");
        let reply = r.handle(ep, &body(&update(unset, cq(json!({}))))).unwrap();
        assert!(
            warnings(&reply)[0].contains("has no namespaceSelector"),
            "{:?}",
            warnings(&reply)
        );
    }

    #[test]
    fn invalid_cluster_queue_is_denied_with_the_field_path() {
        let r = reviewer();
        let cq = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "gpus"}, "spec": {"resourceGroups": [], "minRuntimeSeconds": -5}});
        let review = review_of("ClusterQueue", "clusterqueues", "CREATE", cq, Value::Null, "admin");
        let reply = r
            .handle(Endpoint::Validate(SluiceKind::ClusterQueue), &body(&review))
            .unwrap();
        assert_eq!(reply.verdict, Verdict::Denied);
        let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("spec.minRuntimeSeconds"), "{msg}");
    }

    #[test]
    fn stored_invalid_objects_can_lose_finalizers_and_be_deleted() {
        let r = reviewer();
        let ep = Endpoint::Validate(SluiceKind::ClusterQueue);
        // Stored before a rule existed: validate() rejects it now.
        let invalid = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "gpus", "finalizers": ["sluice.dev/cleanup"]}, "spec": {"resourceGroups": [], "minRuntimeSeconds": -5}});
        let update = |new: Value| review_of("ClusterQueue", "clusterqueues", "UPDATE", new, invalid.clone(), "admin");
        // Metadata-only change (a label, the finalizer removed): allowed.
        let mut relabelled = invalid.clone();
        relabelled["metadata"]["labels"] = json!({"team": "a"});
        assert_eq!(
            r.handle(ep, &body(&update(relabelled))).unwrap().verdict,
            Verdict::Allowed
        );
        let mut deleting = invalid.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-21T00:00:00Z");
        deleting["metadata"]["finalizers"] = json!([]);
        assert_eq!(
            r.handle(ep, &body(&update(deleting.clone()))).unwrap().verdict,
            Verdict::Allowed
        );
        // Even a spec change while deleting does not get stuck on validate().
        deleting["spec"]["minRuntimeSeconds"] = json!(-6);
        assert_eq!(
            r.handle(ep, &body(&update(deleting))).unwrap().verdict,
            Verdict::Allowed
        );
        // A spec change of a live object is validated.
        let mut changed = invalid.clone();
        changed["spec"]["minRuntimeSeconds"] = json!(-6);
        assert_eq!(r.handle(ep, &body(&update(changed))).unwrap().verdict, Verdict::Denied);

        // A LocalQueue whose stored form no longer decodes: the finalizer
        // can still be removed, and clusterQueue is compared as JSON.
        let ep = Endpoint::Validate(SluiceKind::LocalQueue);
        let broken = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "x", "namespace": "y", "finalizers": ["f"]}, "spec": {"clusterQueue": 7}});
        let mut released = broken.clone();
        released["metadata"]["finalizers"] = json!([]);
        released["metadata"]["deletionTimestamp"] = json!("2026-11-21T00:00:00Z");
        let rv = review_of("LocalQueue", "localqueues", "UPDATE", released, broken.clone(), "alice");
        let reply = r.handle(ep, &body(&rv)).unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
        let rv = review_of(
            "LocalQueue",
            "localqueues",
            "UPDATE",
            local_queue("gpus"),
            broken,
            "alice",
        );
        let reply = r.handle(ep, &body(&rv)).unwrap();
        assert_eq!(reply.verdict, Verdict::Denied);
        let msg = reply.response.result.message.clone();
        assert!(
            msg.starts_with("spec.clusterQueue: is immutable (was 7, now \"gpus\")"),
            "{msg}"
        );
    }

    #[test]
    fn undecodable_sluice_object_is_denied_with_a_reason() {
        let r = reviewer();
        let lq = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "x", "namespace": "y"}, "spec": {"clusterQueue": 7}});
        let review = review_of("LocalQueue", "localqueues", "CREATE", lq, Value::Null, "alice");
        let reply = r
            .handle(Endpoint::Validate(SluiceKind::LocalQueue), &body(&review))
            .unwrap();
        assert_eq!(reply.verdict, Verdict::Denied);
        let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("not a valid sluice.dev/v1alpha1 LocalQueue"), "{msg}");
    }

    #[test]
    fn workload_admission_is_written_only_by_the_controller() {
        let cfg = WebhookConfig::default().with_own_namespace("queues");
        let r = Reviewer::new(cfg, Arc::new(MemoryView::synced_with_nvidia_runtime_class()));
        let controller = "system:serviceaccount:queues:sluice-controller";
        let base = json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": "job-train", "namespace": "research"},
            "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}]}
        });
        let with_admission = |cq: &str| {
            let mut w = base.clone();
            w["status"] = json!({"admission": {"clusterQueue": cq, "podSetAssignments": []}});
            w
        };
        let ep = Endpoint::Validate(SluiceKind::Workload);
        let status_update = |new: Value, old: Value, user: &str| {
            let mut rv = review_of("Workload", "workloads", "UPDATE", new, old, user);
            rv["request"]["subResource"] = json!("status");
            rv
        };
        let verdict = |rv: &Value| r.handle(ep, &body(rv)).unwrap();

        // A user admitting their own Workload (None -> Some) is denied.
        let set_once = status_update(with_admission("gpus"), base.clone(), "alice");
        let reply = verdict(&set_once);
        assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
        let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
        assert!(msg.starts_with("status.admission: cannot be set by \"alice\""), "{msg}");
        assert!(msg.contains(controller), "{msg}");
        // So is changing or clearing it.
        for (new, old, what) in [
            (with_admission("other"), with_admission("gpus"), "cannot be changed"),
            (base.clone(), with_admission("gpus"), "cannot be removed"),
        ] {
            let rv = status_update(new, old, "alice");
            let reply = verdict(&rv);
            assert_eq!(reply.verdict, Verdict::Denied);
            let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
            assert!(msg.starts_with(&format!("status.admission: {what}")), "{msg}");
            // The controller of this namespace may; the old hard-coded
            // sluice-system account may not.
            let mut rv = rv;
            rv["request"]["userInfo"]["username"] = json!(controller);
            assert_eq!(verdict(&rv).verdict, Verdict::Allowed);
            rv["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
            assert_eq!(verdict(&rv).verdict, Verdict::Denied);
        }
        let mut rv = set_once.clone();
        rv["request"]["userInfo"]["username"] = json!(controller);
        assert_eq!(verdict(&rv).verdict, Verdict::Allowed);
        // Also through the main resource, and on CREATE.
        let mut rv = status_update(with_admission("gpus"), base.clone(), "alice");
        rv["request"]["subResource"] = Value::Null;
        assert_eq!(verdict(&rv).verdict, Verdict::Denied);
        let rv = review_of(
            "Workload",
            "workloads",
            "CREATE",
            with_admission("gpus"),
            Value::Null,
            "alice",
        );
        assert_eq!(verdict(&rv).verdict, Verdict::Denied);
        // Unchanged admission: anyone may update other fields.
        let mut relabelled = with_admission("gpus");
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        let rv = status_update(relabelled, with_admission("gpus"), "alice");
        assert_eq!(verdict(&rv).verdict, Verdict::Allowed);
    }
}

#[test]
fn job_without_metadata_or_spec_is_denied_not_patched_blindly() {
    // Found by fuzzing: patches must only target paths that exist.
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.upsert_namespace(
        "ml",
        BTreeMap::from([("sluice.dev/default-queue".to_owned(), "enabled".to_owned())]),
    );
    view.upsert_local_queue("ml", "default");
    let r = reviewer_with(view);
    let mut review = unlabelled_job_review("ml", None);
    review["request"]["object"].as_object_mut().unwrap().remove("metadata");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        response_of(&reply)["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("metadata.name: required")
    );

    let mut review = fixture("admissionreview-request-job-create-dryrun.json");
    review["request"]["object"]["spec"] = json!(7);
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        response_of(&reply)["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("spec: missing or not an object")
    );
}

#[test]
fn kueue_label_is_honoured_only_with_kueue_compat() {
    let review = unlabelled_job_review("team-a", Some(json!({"kueue.x-k8s.io/queue-name": "team-a"})));
    let off = reviewer();
    let reply = off
        .handle(Endpoint::MutateQueued(JobKind::Job), &body(&review))
        .unwrap();
    assert!(!reply.fixes.contains(&FixKind::Suspend));

    let cfg = WebhookConfig {
        kueue_compat: true,
        ..WebhookConfig::default()
    };
    let on = Reviewer::new(cfg, Arc::new(MemoryView::synced_with_nvidia_runtime_class()));
    let (reply, patched) = review_applied(&on, Endpoint::MutateQueued(JobKind::Job), &review);
    assert!(reply.fixes.contains(&FixKind::Suspend));
    assert_eq!(patched["spec"]["suspend"], true);

    // Changing it on a running Job is denied like the Sluice label.
    let mut update = fixture("admissionreview-request-job-update-unsuspend.json");
    for which in ["object", "oldObject"] {
        update["request"][which]["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "team-a"});
    }
    update["request"]["object"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("team-b");
    assert_eq!(
        on.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&update))
            .unwrap()
            .verdict,
        Verdict::Denied
    );
    assert_eq!(
        off.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&update))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
}

/// A GPU-operator-like pod: sees every GPU through NVIDIA_VISIBLE_DEVICES
/// without requesting one (as the device plugin and DCGM exporter do).
fn system_pod_review(namespace: &str, labels: Value, owner: Option<&str>) -> Value {
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    review["request"]["namespace"] = json!(namespace);
    let pod = &mut review["request"]["object"];
    pod["metadata"]["namespace"] = json!(namespace);
    pod["metadata"]["labels"] = labels;
    if let Some(kind) = owner {
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": kind, "name": "nvidia-device-plugin",
            "uid": "0b6c9b5e-5a37-4c8e-9e55-3f1d2b9a7c10", "controller": true
        }]);
    }
    pod["spec"]["containers"] = json!([{
        "name": "dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    }]);
    review
}

#[test]
fn gpu_system_pods_are_left_alone() {
    let r = reviewer();
    // Denied in a user namespace, and the message says how to exempt it.
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review("team-a", json!({}), None)),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = &reply.response.result.message;
    assert!(msg.contains("NVIDIA_VISIBLE_DEVICES"), "{msg}");
    for hint in [
        "excluded namespace (kube-system, gpu-operator, nvidia-gpu-operator)",
        "from a DaemonSet",
        "sluice.dev/gpu-fixes=skip",
        "sluice.dev/allow-gpu-fixes-skip=true",
    ] {
        assert!(msg.contains(hint), "{hint:?} missing from {msg}");
    }
    // The GPU operator's namespaces are excluded by default.
    for ns in ["gpu-operator", "nvidia-gpu-operator"] {
        let reply = r
            .handle(Endpoint::MutatePods, &body(&system_pod_review(ns, json!({}), None)))
            .unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed, "{ns}");
    }
    // A DaemonSet's pod in a namespace the admin did not mark trusted is
    // denied like any pod, and told how an admin would exempt it (the
    // exemptions table tests, in tests/exemptions.rs, cover the rest).
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review("monitoring", json!({}), Some("DaemonSet"))),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply
            .response
            .result
            .message
            .contains("a cluster admin can label namespace \"monitoring\" sluice.dev/allow-gpu-fixes-skip=true"),
        "{}",
        reply.response.result.message
    );
    // Another owner kind is no exemption.
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review("monitoring", json!({}), Some("ReplicaSet"))),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
}

#[test]
fn the_skip_label_counts_only_where_the_namespace_allows_it() {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.upsert_namespace(
        "gpu-infra",
        BTreeMap::from([("sluice.dev/allow-gpu-fixes-skip".to_owned(), "true".to_owned())]),
    );
    view.upsert_namespace("team-a", BTreeMap::new());
    let r = reviewer_with(view);
    let skip = json!({"sluice.dev/gpu-fixes": "skip"});
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review("gpu-infra", skip.clone(), None)),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
    // A pod author cannot grant it to itself.
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review("team-a", skip.clone(), None)),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    // Any other value is no opt-out.
    let reply = r
        .handle(
            Endpoint::MutatePods,
            &body(&system_pod_review(
                "gpu-infra",
                json!({"sluice.dev/gpu-fixes": "yes"}),
                None,
            )),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
}

#[test]
fn a_skipped_job_template_is_still_queued_but_not_fixed() {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.upsert_namespace(
        "team-a",
        BTreeMap::from([("sluice.dev/allow-gpu-fixes-skip".to_owned(), "true".to_owned())]),
    );
    let r = reviewer_with(view);
    let mut review = fixture("admissionreview-request-job-create-gpu-requests-only.json");
    review["request"]["object"]["spec"]["template"]["metadata"]["labels"] = json!({"sluice.dev/gpu-fixes": "skip"});
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.fixes, [FixKind::Suspend], "{:?}", reply.response);
}

#[test]
fn without_a_nvidia_runtime_class_none_is_written() {
    // The cluster has no RuntimeClass `nvidia` (CDI, or nvidia as the
    // default runtime): the recorded Job gets every fix but that one.
    let r = reviewer_with(Arc::new(MemoryView::synced_empty()));
    let review = fixture("admissionreview-request-job-create-gpu-requests-only.json");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert!(!reply.fixes.contains(&FixKind::RuntimeClass), "{:?}", reply.fixes);
    assert!(reply.fixes.contains(&FixKind::Toleration), "{:?}", reply.fixes);
    let patched = apply_reply(&review["request"]["object"], &reply);
    assert!(patched.pointer("/spec/template/spec/runtimeClassName").is_none());
}

mod cohorts;
mod exemptions;
mod jobsets;
mod kubeflow;
mod pods;
mod raycluster;
mod serving;
mod shape;
mod trainjob;
