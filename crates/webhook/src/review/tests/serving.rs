//! Serving objects (Deployments, StatefulSets, LeaderWorkerSets): held at
//! zero replicas on CREATE, kept held by their owners' updates, grown only
//! by the controller, scaled through `scale` within what runs.

use super::*;
use crate::cache::ServingMeta;
use sluice_api::labels::HELD_REPLICAS;

/// A Deployment CREATE by alice: `replicas` GPU pods, labelled for
/// team-a's queue (or not), as the API server sends it (defaults filled).
fn deployment_review(replicas: i64, labelled: bool) -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let gvr = json!({"group": "apps", "version": "v1", "resource": "deployments"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let labels = if labelled {
        json!({"sluice.dev/queue": "team-a"})
    } else {
        json!({"app": "llm"})
    };
    review["request"]["object"] = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": job["metadata"]["namespace"], "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "llm"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                 "template": job["spec"]["template"]}
    });
    review
}

/// `review` turned into an UPDATE by `user` from `old` to `new`.
fn update(review: &Value, old: Value, new: Value, user: &str) -> Value {
    let mut u = review.clone();
    u["request"]["operation"] = json!("UPDATE");
    u["request"]["oldObject"] = old;
    u["request"]["object"] = new;
    u["request"]["userInfo"]["username"] = json!(user);
    u
}

#[test]
fn a_queued_deployment_is_held_at_zero_with_its_replicas_kept_and_no_surge() {
    let r = reviewer();
    let ep = Endpoint::MutateQueued(JobKind::Deployment);
    let (reply, held) = review_applied(&r, ep, &deployment_review(3, true));
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(held["spec"]["replicas"], json!(0));
    assert_eq!(held["metadata"]["annotations"][HELD_REPLICAS], json!("3"));
    assert_eq!(held["spec"]["strategy"]["rollingUpdate"]["maxSurge"], json!(0));
    assert_eq!(held["spec"]["template"]["spec"]["runtimeClassName"], "nvidia");
    let warnings = response_of(&reply)["warnings"].to_string();
    assert!(
        warnings.contains("set spec.replicas to 0 and kept its 3 in metadata.annotations[sluice.dev/held-replicas]: the Deployment waits in LocalQueue \\\"team-a\\\""),
        "{warnings}"
    );
    assert!(warnings.contains("maxSurge: set to 0 (was \\\"25%\\\")"), "{warnings}");
    // The webhook applied to its own output changes nothing.
    let mut again = deployment_review(3, true);
    again["request"]["object"] = held.clone();
    assert_eq!(r.handle(ep, &body(&again)).unwrap().verdict, Verdict::Allowed);
}

#[test]
fn in_a_namespace_that_queues_every_object_only_a_gpu_deployment_is_queued() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    view.upsert_local_queue("team-b", "default");
    let r = reviewer_with(Arc::new(view));
    let ep = Endpoint::MutateQueuedDefaultQueue(JobKind::Deployment);
    let (_, held) = review_applied(&r, ep, &deployment_review(2, false));
    assert_eq!(held["metadata"]["labels"]["sluice.dev/queue"], "default");
    assert_eq!(held["metadata"]["annotations"][HELD_REPLICAS], json!("2"));
    // A CPU-only Deployment runs as it would without Sluice.
    let mut cpu = deployment_review(2, false);
    cpu["request"]["object"]["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({});
    let (reply, same) = review_applied(&r, ep, &cpu);
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", response_of(&reply));
    assert_eq!(same, cpu["request"]["object"]);
}

#[test]
fn an_owner_asking_a_held_deployment_to_run_keeps_it_held_asking_for_that() {
    let r = reviewer();
    let ep = Endpoint::MutateQueued(JobKind::Deployment);
    let (_, held) = review_applied(&r, ep, &deployment_review(2, true));
    // kubectl apply of the manifest again (replicas: 2), or a new count.
    for (asked, want) in [(2, "2"), (5, "5")] {
        let mut new = held.clone();
        new["spec"]["replicas"] = json!(asked);
        let u = update(&deployment_review(2, true), held.clone(), new, "alice@example.com");
        let (reply, after) = review_applied(&r, ep, &u);
        assert_eq!(reply.verdict, Verdict::Patched);
        assert_eq!(after["spec"]["replicas"], json!(0));
        assert_eq!(after["metadata"]["annotations"][HELD_REPLICAS], json!(want));
    }
    // The controller starts it.
    let mut started = held.clone();
    started["spec"]["replicas"] = json!(2);
    started["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(HELD_REPLICAS);
    let controller = "system:serviceaccount:sluice-system:sluice-controller";
    let u = update(&deployment_review(2, true), held.clone(), started.clone(), controller);
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_empty()),
    );
    assert_eq!(r.handle(ep, &body(&u)).unwrap().verdict, Verdict::Allowed);
    // Validation: nobody else raises it (had the mutation not run).
    let v = r
        .handle(
            Endpoint::ValidateQueued(JobKind::Deployment),
            &body(&update(
                &deployment_review(2, true),
                held.clone(),
                started.clone(),
                "alice@example.com",
            )),
        )
        .unwrap();
    assert_eq!(v.verdict, Verdict::Denied);
    let msg = response_of(&v)["status"]["message"].as_str().unwrap().to_owned();
    assert!(msg.starts_with("spec.replicas: cannot be raised from 0 by \"alice@example.com\": the Deployment waits in LocalQueue \"team-a\""), "{msg}");
    // Running: growing is refused, scaling down allowed.
    let mut grown = started.clone();
    grown["spec"]["replicas"] = json!(4);
    let v = r
        .handle(
            Endpoint::ValidateQueued(JobKind::Deployment),
            &body(&update(
                &deployment_review(2, true),
                started.clone(),
                grown,
                "alice@example.com",
            )),
        )
        .unwrap();
    let msg = response_of(&v)["status"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.starts_with("spec.replicas: 2 → 4") || msg.contains("cannot grow while the Deployment runs"),
        "{msg}"
    );
    assert!(
        msg.contains("set spec.replicas to 0 and the metadata.annotations[sluice.dev/held-replicas] annotation"),
        "{msg}"
    );
    let mut down = started.clone();
    down["spec"]["replicas"] = json!(1);
    let v = r
        .handle(
            Endpoint::ValidateQueued(JobKind::Deployment),
            &body(&update(&deployment_review(2, true), started, down, "alice@example.com")),
        )
        .unwrap();
    assert_eq!(v.verdict, Verdict::Allowed);
}

/// A `deployments/scale` UPDATE of Deployment `llm` from `old` to `new`.
fn scale_review(old: i64, new: i64) -> Value {
    let scale = |n: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "llm", "namespace": "team-a"}, "spec": {"replicas": n}})
    };
    let gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": gvk, "requestKind": gvk,
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "subResource": "scale", "name": "llm", "namespace": "team-a", "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
        "object": scale(new), "oldObject": scale(old), "dryRun": false}})
}

#[test]
fn scale_grows_no_queued_deployment_past_what_it_runs() {
    let view = MemoryView::synced_empty();
    view.replace_serving(JobKind::Deployment, BTreeMap::new());
    let queued = BTreeMap::from([("sluice.dev/queue".to_owned(), "team-a".to_owned())]);
    let view = Arc::new(view);
    let r = reviewer_with(view.clone());
    let ep = Endpoint::ValidateScale(JobKind::Deployment);
    // Not known to the cache (or not queued): left alone.
    assert_eq!(
        r.handle(ep, &body(&scale_review(2, 4))).unwrap().verdict,
        Verdict::Allowed
    );
    view.upsert_serving(
        JobKind::Deployment,
        "team-a",
        "llm",
        ServingMeta {
            labels: queued.clone(),
            held_replicas: None,
        },
    );
    let reply = r.handle(ep, &body(&scale_review(2, 4))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
    assert!(msg.starts_with("spec.replicas: cannot grow from 2 to 4 while the Deployment runs: Sluice admitted it in LocalQueue \"team-a\""), "{msg}");
    assert_eq!(
        r.handle(ep, &body(&scale_review(2, 1))).unwrap().verdict,
        Verdict::Allowed
    );
    // Held: not raised through scale.
    view.upsert_serving(
        JobKind::Deployment,
        "team-a",
        "llm",
        ServingMeta {
            labels: queued,
            held_replicas: Some("3".into()),
        },
    );
    let msg = response_of(&r.handle(ep, &body(&scale_review(0, 3))).unwrap())["status"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        msg.contains("held at 0 replicas until Sluice admits it, then runs the 3"),
        "{msg}"
    );
}

/// The unsuspend the acceptance run found: a Job queued by its namespace
/// (no label on the object: it was there before the namespace opted in,
/// or the webhook was down) reaches the default-queue validating entry,
/// where only the controller unsuspends it.
#[test]
fn an_owners_unsuspend_of_a_job_queued_by_its_namespace_is_refused() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    view.upsert_namespace(
        "ml",
        BTreeMap::from([("sluice.dev/default-queue".to_owned(), "enabled".to_owned())]),
    );
    let r = reviewer_with(Arc::new(view));
    let mut review = unlabelled_job_review("ml", None);
    let mut old = review["request"]["object"].clone();
    old["spec"]["suspend"] = json!(true);
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    review = update(&review, old.clone(), new, "alice@example.com");
    let reply = r
        .handle(Endpoint::ValidateQueuedDefaultQueue(JobKind::Job), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.starts_with("spec.suspend: cannot be changed from true to false by \"alice@example.com\": the Job waits in LocalQueue \"default\""),
        "{msg}"
    );
    // Other updates of it pass.
    let mut relabelled = old.clone();
    relabelled["metadata"]["annotations"] = json!({"note": "x"});
    let review = update(&review, old, relabelled, "alice@example.com");
    let reply = r
        .handle(Endpoint::ValidateQueuedDefaultQueue(JobKind::Job), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
}
