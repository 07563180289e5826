//! JobSets: the recorded Job CREATE review with its Job turned into the
//! template of a JobSet's two replicated Jobs.

use super::*;

/// The recorded Job CREATE (4 pods × 2 GPUs, queued in team-a) as a
/// JobSet CREATE: a driver and workers with the recorded Job's spec.
fn jobset_review(suspend: Option<bool>) -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"});
    let gvr = json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let mut spec = job["spec"].clone();
    spec.as_object_mut().unwrap().remove("suspend");
    let mut js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "pretrain", "namespace": job["metadata"]["namespace"],
                     "labels": job["metadata"]["labels"]},
        "spec": {"replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": spec.clone()}},
            {"name": "workers", "replicas": 2, "template": {"spec": spec}}
        ]}
    });
    if let Some(s) = suspend {
        js["spec"]["suspend"] = json!(s);
    }
    review["request"]["object"] = js;
    review
}

#[test]
fn a_queued_jobset_is_suspended_and_every_pod_template_gets_the_gpu_fixes() {
    let r = reviewer();
    let review = jobset_review(None);
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::JobSet), &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["spec"]["suspend"], true);
    // The same fixes the recorded Job gets, in both pod templates.
    let job = review_applied(
        &r,
        Endpoint::MutateQueued(JobKind::Job),
        &fixture("admissionreview-request-job-create-before-jsonpatch.json"),
    )
    .1;
    for i in 0..2 {
        let pod = &patched["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"];
        assert!(
            !pod["tolerations"].is_null() && !pod["runtimeClassName"].is_null(),
            "{pod}"
        );
        assert_eq!(
            pod["runtimeClassName"],
            job["spec"]["template"]["spec"]["runtimeClassName"]
        );
        assert_eq!(pod["tolerations"], job["spec"]["template"]["spec"]["tolerations"]);
        assert_eq!(pod["affinity"], job["spec"]["template"]["spec"]["affinity"]);
    }
    let warnings = response_of(&reply)["warnings"].to_string();
    assert!(warnings.contains("the JobSet waits in LocalQueue"), "{warnings}");
    // Already suspended: only the GPU fixes.
    let (reply, _) = review_applied(&r, Endpoint::MutateQueued(JobKind::JobSet), &jobset_review(Some(true)));
    assert!(!reply.fixes.contains(&FixKind::Suspend));
    // A Job review posted to the JobSet path is not a JobSet: allowed unchanged.
    let reply = r
        .handle(
            Endpoint::MutateQueued(JobKind::JobSet),
            &body(&fixture("admissionreview-request-job-create-before-jsonpatch.json")),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Skipped);
}

#[test]
fn a_queued_jobset_is_unsuspended_only_by_the_controller() {
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let mut review = jobset_review(Some(false));
    review["request"]["operation"] = json!("UPDATE");
    let mut old = review["request"]["object"].clone();
    old["spec"]["suspend"] = json!(true);
    review["request"]["oldObject"] = old;
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::JobSet), &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = reply.response.result.message.clone();
    assert!(
        msg.starts_with("spec.suspend: cannot be changed from true to false by \"alice@example.com\"")
            && msg.contains("the JobSet is admitted"),
        "{msg}"
    );
    review["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::JobSet), &body(&review))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
}

#[test]
fn a_jobset_child_job_with_the_queue_label_is_left_to_its_jobset() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    // The JobSet exists in both recorded namespaces (create: team-b,
    // update: team-a), as the webhook's cache would list it.
    view.replace_owners(
        crate::cache::OwnerKind::Queued(JobKind::JobSet),
        ["team-a", "team-b"]
            .into_iter()
            .map(|ns| ((ns.to_owned(), "pretrain".to_owned()), "js-uid".to_owned()))
            .collect(),
    );
    let r = reviewer_with(Arc::new(view));
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    review["request"]["object"]["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "pretrain",
        "uid": "js-uid", "controller": true, "blockOwnerDeletion": true}]);
    review["request"]["object"]["spec"]["suspend"] = json!(false);
    review["request"]["userInfo"]["username"] = json!("system:serviceaccount:jobset-system:jobset-controller-manager");
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueued(JobKind::Job), &review);
    assert!(!reply.fixes.contains(&FixKind::Suspend), "{:?}", reply.fixes);
    assert_eq!(patched["spec"]["suspend"], json!(false));
    // Its GPU fixes still apply.
    assert_eq!(patched["spec"]["template"]["spec"]["runtimeClassName"], "nvidia");
    // The JobSet controller resumes it: allowed.
    let mut update = fixture("admissionreview-request-job-update-unsuspend.json");
    for which in ["object", "oldObject"] {
        update["request"][which]["metadata"]["ownerReferences"] =
            review["request"]["object"]["metadata"]["ownerReferences"].clone();
    }
    update["request"]["userInfo"]["username"] = json!("system:serviceaccount:jobset-system:jobset-controller-manager");
    assert_eq!(
        r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&update))
            .unwrap()
            .verdict,
        Verdict::Allowed
    );
}

#[test]
fn an_unlabelled_jobset_in_a_namespace_that_queues_every_object_is_queued_in_default() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    let mut review = jobset_review(None);
    let ns = review["request"]["namespace"].as_str().unwrap().to_owned();
    view.upsert_local_queue(&ns, "default");
    let r = reviewer_with(Arc::new(view));
    review["request"]["object"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    let (reply, patched) = review_applied(&r, Endpoint::MutateQueuedDefaultQueue(JobKind::JobSet), &review);
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["metadata"]["labels"]["sluice.dev/queue"], "default");
    assert_eq!(patched["spec"]["suspend"], true);
    assert_eq!(
        Endpoint::from_path("/mutate/jobsets/default-queue"),
        Some(Endpoint::MutateQueuedDefaultQueue(JobKind::JobSet))
    );
}
