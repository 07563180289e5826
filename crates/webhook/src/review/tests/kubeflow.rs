//! Kubeflow jobs: the recorded Job CREATE review with its pod template as
//! the roles of a PyTorchJob.

use super::*;

/// The recorded Job CREATE as a PyTorchJob CREATE: Master and Worker with
/// the recorded Job's pod template, and no runPolicy.
fn pytorchjob_review() -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"});
    let gvr = json!({"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let template = job["spec"]["template"].clone();
    review["request"]["object"] = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": job["metadata"]["namespace"], "labels": job["metadata"]["labels"]},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template.clone()},
            "Worker": {"replicas": 3, "template": template}
        }}
    });
    review
}

#[test]
fn a_queued_pytorchjob_is_suspended_through_its_run_policy_and_every_role_is_fixed() {
    let r = reviewer();
    let review = pytorchjob_review();
    let ep = Endpoint::MutateQueued(JobKind::PyTorchJob);
    let (reply, patched) = review_applied(&r, ep, &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    // No runPolicy: the whole object is added.
    assert_eq!(patched["spec"]["runPolicy"], json!({"suspend": true}));
    for role in ["Master", "Worker"] {
        let pod = &patched["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"];
        assert_eq!(pod["runtimeClassName"], "nvidia", "{role}: {pod}");
        assert!(!pod["tolerations"].is_null(), "{role}: {pod}");
    }
    let warnings = response_of(&reply)["warnings"].to_string();
    assert!(
        warnings.contains("set spec.runPolicy.suspend to true: the PyTorchJob waits"),
        "{warnings}"
    );
    // With a runPolicy: only its suspend is added, the rest kept.
    let mut review = pytorchjob_review();
    review["request"]["object"]["spec"]["runPolicy"] = json!({"cleanPodPolicy": "None"});
    let (_, patched) = review_applied(&r, ep, &review);
    assert_eq!(
        patched["spec"]["runPolicy"],
        json!({"cleanPodPolicy": "None", "suspend": true})
    );
}

#[test]
fn a_queued_pytorchjob_is_resumed_only_by_the_controller() {
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let mut review = pytorchjob_review();
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["object"]["spec"]["runPolicy"] = json!({"suspend": false});
    let mut old = review["request"]["object"].clone();
    old["spec"]["runPolicy"]["suspend"] = json!(true);
    review["request"]["oldObject"] = old;
    let ep = Endpoint::ValidateQueued(JobKind::PyTorchJob);
    let reply = r.handle(ep, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = reply.response.result.message.clone();
    assert!(
        msg.starts_with("spec.runPolicy.suspend: cannot be changed from true to false by \"alice@example.com\""),
        "{msg}"
    );
    review["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    assert_eq!(r.handle(ep, &body(&review)).unwrap().verdict, Verdict::Allowed);
}

#[test]
fn a_queued_rayjob_is_suspended_and_its_head_and_every_worker_group_are_fixed() {
    let r = reviewer();
    let mut review = pytorchjob_review();
    let template = review["request"]["object"]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].clone();
    let gvk = json!({"group": "ray.io", "version": "v1", "kind": "RayJob"});
    let gvr = json!({"group": "ray.io", "version": "v1", "resource": "rayjobs"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    review["request"]["object"]["apiVersion"] = json!("ray.io/v1");
    review["request"]["object"]["kind"] = json!("RayJob");
    review["request"]["object"]["spec"] = json!({"entrypoint": "python tune.py", "shutdownAfterJobFinishes": true, "rayClusterSpec": {
        "headGroupSpec": {"template": template.clone()},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": template}]
    }});
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::RayJob), &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["spec"]["suspend"], true);
    for at in [
        "/spec/rayClusterSpec/headGroupSpec/template/spec",
        "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec",
    ] {
        let pod = patched.pointer(at).unwrap();
        assert_eq!(pod["runtimeClassName"], "nvidia", "{at}: {pod}");
    }
    // One KubeRay would not suspend, or that runs on a cluster of others:
    // refused, with the field.
    let mut keeps = review.clone();
    keeps["request"]["object"]["spec"]["shutdownAfterJobFinishes"] = json!(false);
    let reply = r
        .handle(Endpoint::MutateQueued(JobKind::RayJob), &body(&keeps))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply
            .response
            .result
            .message
            .starts_with("spec.shutdownAfterJobFinishes: must be true"),
        "{}",
        reply.response.result.message
    );
    let mut shared = review;
    shared["request"]["object"]["spec"]["clusterSelector"] = json!({"ray.io/cluster": "shared"});
    let reply = r
        .handle(Endpoint::MutateQueued(JobKind::RayJob), &body(&shared))
        .unwrap();
    assert!(
        reply.response.result.message.contains("spec.clusterSelector"),
        "{:?}",
        reply.response
    );
}

#[test]
fn jobs_made_by_an_mpijob_or_a_rayjob_are_left_to_their_owner() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    for kind in [JobKind::MpiJob, JobKind::RayJob] {
        view.replace_owners(
            crate::cache::OwnerKind::Queued(kind),
            BTreeMap::from([(("team-b".to_owned(), "x".to_owned()), "u".to_owned())]),
        );
    }
    let r = reviewer_with(Arc::new(view));
    for (api_version, kind, operator) in [
        (
            "kubeflow.org/v2beta1",
            "MPIJob",
            "system:serviceaccount:mpi-operator:mpi-operator",
        ),
        (
            "ray.io/v1",
            "RayJob",
            "system:serviceaccount:ray-system:kuberay-operator",
        ),
    ] {
        let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
        review["request"]["object"]["spec"]["suspend"] = json!(false);
        review["request"]["userInfo"]["username"] = json!(operator);
        review["request"]["object"]["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api_version, "kind": kind, "name": "x", "uid": "u", "controller": true}]);
        let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::Job), &review);
        assert_eq!(reply.verdict, Verdict::Patched, "{kind}: {:?}", reply.response);
        assert!(!reply.fixes.contains(&FixKind::Suspend), "{kind}: {:?}", reply.fixes);
        assert_eq!(patched["spec"]["suspend"], json!(false), "{kind}");
    }
}
