//! RayClusters: the recorded Job CREATE review with its pod template as a
//! RayCluster's head and worker group; queued on their own, or left to
//! the RayJob that made them (only when that RayJob is verified).

use super::*;
use crate::cache::OwnerKind;

const RAYJOB_UID: &str = "rj-uid-1";

/// The recorded Job CREATE (namespace team-b, queue label, by alice) as a
/// RayCluster CREATE: a head and a worker group `gpu` of 2, running.
fn raycluster_review() -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "ray.io", "version": "v1", "kind": "RayCluster"});
    let gvr = json!({"group": "ray.io", "version": "v1", "resource": "rayclusters"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let template = job["spec"]["template"].clone();
    review["request"]["object"] = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "lab", "namespace": job["metadata"]["namespace"], "labels": job["metadata"]["labels"]},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template.clone()},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                                  "rayStartParams": {}, "template": template}]
        }
    });
    review
}

/// The same RayCluster as an UPDATE from `old` to `new` (their specs and
/// ownerReferences as given), by alice.
fn raycluster_update(old: impl Fn(&mut Value), new: impl Fn(&mut Value)) -> Value {
    let mut review = raycluster_review();
    review["request"]["operation"] = json!("UPDATE");
    let mut before = review["request"]["object"].clone();
    before["spec"]["suspend"] = json!(false);
    let mut after = before.clone();
    old(&mut before);
    new(&mut after);
    review["request"]["oldObject"] = before;
    review["request"]["object"] = after;
    review
}

/// KubeRay's service account (one of the default operators).
const KUBERAY_OPERATOR: &str = "system:serviceaccount:ray-system:kuberay-operator";

fn rayjob_owner(name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}])
}

/// A cluster where RayJob `tune` exists in team-b, and one in team-c.
fn cluster_with_rayjobs() -> Arc<MemoryView> {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.replace_owners(
        OwnerKind::Queued(JobKind::RayJob),
        BTreeMap::from([
            (("team-b".to_owned(), "tune".to_owned()), RAYJOB_UID.to_owned()),
            (("team-c".to_owned(), "other".to_owned()), "rj-uid-2".to_owned()),
        ]),
    );
    view
}

const MUTATE: Endpoint = Endpoint::MutateQueued(JobKind::RayCluster);
const VALIDATE: Endpoint = Endpoint::ValidateQueued(JobKind::RayCluster);

#[test]
fn a_queued_raycluster_is_suspended_and_its_head_and_worker_groups_are_fixed() {
    let r = reviewer();
    let (reply, patched) = review_applied(&r, MUTATE, &raycluster_review());
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["spec"]["suspend"], true);
    for at in [
        "/spec/headGroupSpec/template/spec",
        "/spec/workerGroupSpecs/0/template/spec",
    ] {
        let pod = patched.pointer(at).unwrap();
        assert_eq!(pod["runtimeClassName"], "nvidia", "{at}: {pod}");
    }
    let warnings = response_of(&reply)["warnings"].to_string();
    assert!(
        warnings.contains("set spec.suspend to true: the RayCluster waits in LocalQueue"),
        "{warnings}"
    );
}

#[test]
fn a_raycluster_that_would_outgrow_its_admission_is_refused_with_the_field() {
    let r = reviewer();
    let refused = |f: &dyn Fn(&mut Value)| {
        let mut review = raycluster_review();
        f(&mut review["request"]["object"]);
        let reply = r.handle(MUTATE, &body(&review)).unwrap();
        assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
        reply.response.result.message.clone()
    };
    let msg = refused(&|o| o["spec"]["enableInTreeAutoscaling"] = json!(true));
    assert!(
        msg.starts_with("spec.enableInTreeAutoscaling: must not be true for a queued RayCluster"),
        "{msg}"
    );
    let msg = refused(&|o| o["spec"]["workerGroupSpecs"][0]["groupName"] = json!("head"));
    assert!(
        msg.starts_with("spec.workerGroupSpecs[0].groupName: \"head\" is the head's pod set"),
        "{msg}"
    );
    let msg = refused(&|o| {
        let g = o["spec"]["workerGroupSpecs"][0].clone();
        o["spec"]["workerGroupSpecs"] = json!(
            (0..8)
                .map(|i| {
                    let mut g = g.clone();
                    g["groupName"] = json!(format!("g{i}"));
                    g
                })
                .collect::<Vec<_>>()
        );
    });
    assert!(
        msg.starts_with("spec.workerGroupSpecs: has 8 worker groups: with the head that is 9 pod sets, and a queued RayCluster may have at most 8"),
        "{msg}"
    );
    // Without the queue label it is not queued: nothing to refuse.
    let mut review = raycluster_review();
    review["request"]["object"]["metadata"]["labels"] = json!({});
    review["request"]["object"]["spec"]["enableInTreeAutoscaling"] = json!(true);
    assert_ne!(r.handle(MUTATE, &body(&review)).unwrap().verdict, Verdict::Denied);
}

#[test]
fn a_raycluster_is_left_to_its_rayjob_only_when_that_rayjob_exists() {
    enum Want {
        LeftToOwner,
        Queued,
        Denied(&'static str),
    }
    let jobset = json!([{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "tune",
                         "uid": "js", "controller": true}]);
    let mut not_controller = rayjob_owner("tune", RAYJOB_UID);
    not_controller[0]["controller"] = json!(false);
    let table = [
        (
            "its RayJob exists with that uid",
            rayjob_owner("tune", RAYJOB_UID),
            Want::LeftToOwner,
        ),
        (
            "a forged uid",
            rayjob_owner("tune", "forged"),
            Want::Denied(
                "metadata.ownerReferences[0]: there is no RayJob \"tune\" with uid \"forged\" in namespace \"team-b\"; a RayCluster is left to the RayJob that controls it only when that RayJob exists",
            ),
        ),
        (
            "a RayJob of another namespace",
            rayjob_owner("other", "rj-uid-2"),
            Want::Denied("there is no RayJob \"other\""),
        ),
        ("a RayJob that is not the controller", not_controller, Want::Queued),
        ("a JobSet, which makes no RayClusters", jobset, Want::Queued),
        ("no owner", json!([]), Want::Queued),
    ];
    let r = reviewer_with(cluster_with_rayjobs());
    for (case, owners, want) in table {
        let mut review = raycluster_review();
        review["request"]["object"]["metadata"]["ownerReferences"] = owners;
        review["request"]["userInfo"]["username"] = json!(KUBERAY_OPERATOR);
        // KubeRay copies the RayJob's cluster spec, autoscaler and all: the
        // RayJob is what was checked and queued.
        review["request"]["object"]["spec"]["enableInTreeAutoscaling"] = json!(true);
        let reply = r.handle(MUTATE, &body(&review)).unwrap();
        let msg = &reply.response.result.message;
        match want {
            Want::LeftToOwner => {
                assert_ne!(reply.verdict, Verdict::Denied, "{case}: {msg}");
                assert!(!reply.fixes.contains(&FixKind::Suspend), "{case}: {:?}", reply.fixes);
            }
            Want::Queued => {
                // Queued on its own: the autoscaler is refused.
                assert_eq!(reply.verdict, Verdict::Denied, "{case}");
                assert!(msg.starts_with("spec.enableInTreeAutoscaling"), "{case}: {msg}");
            }
            Want::Denied(says) => {
                assert_eq!(reply.verdict, Verdict::Denied, "{case}");
                assert!(msg.contains(says), "{case}: {says:?} missing from {msg}");
            }
        }
    }
    // Alice's own RayJob (perhaps small and admitted) does not take her
    // RayCluster out of the queue: only KubeRay's RayClusters are its.
    let mut review = raycluster_review();
    review["request"]["object"]["metadata"]["ownerReferences"] = rayjob_owner("tune", RAYJOB_UID);
    let reply = r.handle(MUTATE, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply.response.result.message.starts_with(
            "metadata.ownerReferences[0]: RayJob \"tune\" controls this RayCluster, but \"alice@example.com\" is not one of the job operators"
        ),
        "{}",
        reply.response.result.message
    );
    // Before RayJobs are listed, no RayJob vouches for anything.
    let r = reviewer_with(Arc::new(MemoryView::synced_with_nvidia_runtime_class()));
    let mut review = raycluster_review();
    review["request"]["object"]["metadata"]["ownerReferences"] = rayjob_owner("tune", RAYJOB_UID);
    let reply = r.handle(MUTATE, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply
            .response
            .result
            .message
            .contains("RayJob \"tune\" cannot be verified: the webhook has not listed RayJobs"),
        "{}",
        reply.response.result.message
    );
}

#[test]
fn only_a_verified_rayjob_resumes_its_raycluster_and_none_can_adopt_one_later() {
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        cluster_with_rayjobs(),
    );
    let suspended = |o: &mut Value| o["spec"]["suspend"] = json!(true);
    let owned = |uid: &'static str| move |o: &mut Value| o["metadata"]["ownerReferences"] = rayjob_owner("tune", uid);
    fn both<'a>(f: &'a dyn Fn(&mut Value), g: &'a dyn Fn(&mut Value)) -> impl Fn(&mut Value) + 'a {
        move |o: &mut Value| {
            f(o);
            g(o)
        }
    }
    let table: Vec<(&str, Value, Verdict, &str)> = vec![
        (
            "its RayJob exists, but alice resumes it",
            raycluster_update(both(&suspended, &owned(RAYJOB_UID)), owned(RAYJOB_UID)),
            Verdict::Denied,
            "spec.suspend: cannot be changed from true to false by \"alice@example.com\"",
        ),
        (
            "a forged RayJob",
            raycluster_update(both(&suspended, &owned("forged")), owned("forged")),
            Verdict::Denied,
            "spec.suspend: cannot be changed from true to false by \"alice@example.com\"",
        ),
        (
            "a RayJob added as it is resumed",
            raycluster_update(suspended, owned(RAYJOB_UID)),
            Verdict::Denied,
            "metadata.ownerReferences[0]: cannot be changed by \"alice@example.com\" to name RayJob \"tune\" as the controller of a queued RayCluster; the controller of a RayCluster made by a RayJob is set when the RayCluster is created",
        ),
        (
            "a RayJob added to a suspended one, to resume it in a second step",
            raycluster_update(suspended, both(&suspended, &owned(RAYJOB_UID))),
            Verdict::Denied,
            "metadata.ownerReferences[0]: cannot be changed",
        ),
        (
            "its RayJob swapped for another",
            raycluster_update(owned("forged"), owned(RAYJOB_UID)),
            Verdict::Denied,
            "metadata.ownerReferences[0]: cannot be changed",
        ),
    ];
    for (case, review, verdict, says) in table {
        let reply = r.handle(VALIDATE, &body(&review)).unwrap();
        assert_eq!(reply.verdict, verdict, "{case}: {:?}", reply.response);
        let msg = &reply.response.result.message;
        assert!(msg.contains(says), "{case}: {says:?} missing from {msg}");
    }
    // Its RayJob's operator resumes it: allowed.
    let mut review = raycluster_update(both(&suspended, &owned(RAYJOB_UID)), owned(RAYJOB_UID));
    review["request"]["userInfo"]["username"] = json!(KUBERAY_OPERATOR);
    assert_eq!(r.handle(VALIDATE, &body(&review)).unwrap().verdict, Verdict::Allowed);
    // The Sluice controller (an admission writer) is not refused.
    let mut review = raycluster_update(suspended, owned(RAYJOB_UID));
    review["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    assert_eq!(r.handle(VALIDATE, &body(&review)).unwrap().verdict, Verdict::Allowed);
}

#[test]
fn a_running_raycluster_may_shrink_but_not_grow_or_start_autoscaling() {
    let r = reviewer();
    let replicas = |n: i64| move |o: &mut Value| o["spec"]["workerGroupSpecs"][0]["replicas"] = json!(n);
    let reply = r
        .handle(VALIDATE, &body(&raycluster_update(replicas(2), replicas(3))))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = &reply.response.result.message;
    assert!(
        msg.starts_with("spec.workerGroupSpecs[0] (gpu): replicas within [minReplicas, maxReplicas] × numOfHosts: 3 pods at once, was 2: cannot grow while the RayCluster runs"),
        "{msg}"
    );
    // Raising minReplicas past replicas grows it too (KubeRay runs the minimum).
    let min = |n: i64| move |o: &mut Value| o["spec"]["workerGroupSpecs"][0]["minReplicas"] = json!(n);
    let reply = r.handle(VALIDATE, &body(&raycluster_update(min(0), min(4)))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    // Scaling down is allowed.
    let reply = r
        .handle(VALIDATE, &body(&raycluster_update(replicas(2), replicas(1))))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // Suspended in the same update: requeued with its new shape.
    let reply = r
        .handle(
            VALIDATE,
            &body(&raycluster_update(replicas(2), |o| {
                o["spec"]["workerGroupSpecs"][0]["replicas"] = json!(3);
                o["spec"]["suspend"] = json!(true);
            })),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // The autoscaler cannot be switched on later, running or not.
    for suspend in [false, true] {
        let reply = r
            .handle(
                VALIDATE,
                &body(&raycluster_update(
                    move |o| o["spec"]["suspend"] = json!(suspend),
                    move |o| {
                        o["spec"]["suspend"] = json!(suspend);
                        o["spec"]["enableInTreeAutoscaling"] = json!(true);
                    },
                )),
            )
            .unwrap();
        assert_eq!(reply.verdict, Verdict::Denied, "suspend {suspend}");
        let msg = &reply.response.result.message;
        assert!(
            msg.starts_with("spec.enableInTreeAutoscaling: must not be true for a queued RayCluster")
                && msg.contains("(the RayCluster is queued in LocalQueue"),
            "{msg}"
        );
    }
}
