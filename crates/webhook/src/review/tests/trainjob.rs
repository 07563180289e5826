//! TrainJobs: suspended on CREATE, resumed only by the controller, and an
//! admitted one may not grow its nodes; the JobSet Trainer makes for one
//! is left to it only when Trainer makes it and the TrainJob exists.

use super::*;
use crate::cache::OwnerKind;

const MUTATE: Endpoint = Endpoint::MutateQueued(JobKind::TrainJob);
const VALIDATE: Endpoint = Endpoint::ValidateQueued(JobKind::TrainJob);
const TRAINER: &str = "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager";

/// The recorded Job CREATE (team-b, queue label, by alice) as a TrainJob
/// CREATE of 2 nodes on the `torch-distributed` runtime.
fn trainjob_review(spec: Value) -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"});
    let gvr = json!({"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    review["request"]["object"] = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": job["metadata"]["namespace"], "labels": job["metadata"]["labels"]},
        "spec": spec,
    });
    review
}

fn spec(suspend: Option<bool>, nodes: i64) -> Value {
    let mut s = json!({"runtimeRef": {"name": "torch-distributed"},
                       "trainer": {"numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}});
    if let Some(v) = suspend {
        s["suspend"] = json!(v);
    }
    s
}

/// The TrainJob as an UPDATE from `old` to `new` specs, by `user`.
fn trainjob_update(old: Value, new: Value, user: &str) -> Value {
    let mut review = trainjob_review(new);
    review["request"]["operation"] = json!("UPDATE");
    let mut before = review["request"]["object"].clone();
    before["spec"] = old;
    review["request"]["oldObject"] = before;
    review["request"]["userInfo"]["username"] = json!(user);
    review
}

#[test]
fn a_queued_trainjob_is_suspended_on_create() {
    let r = reviewer();
    let (reply, patched) = review_applied(&r, MUTATE, &trainjob_review(spec(None, 2)));
    assert_eq!(reply.verdict, Verdict::Patched);
    assert_eq!(patched["spec"]["suspend"], true);
    assert_eq!(patched["spec"]["trainer"]["numNodes"], 2, "the rest is as written");
    let warnings = response_of(&reply)["warnings"].to_string();
    assert!(warnings.contains("the TrainJob waits in LocalQueue"), "{warnings}");
    // Created running: suspended too.
    let (_, patched) = review_applied(&r, MUTATE, &trainjob_review(spec(Some(false), 2)));
    assert_eq!(patched["spec"]["suspend"], true);
    // Already suspended: nothing to suspend.
    let (reply, _) = review_applied(&r, MUTATE, &trainjob_review(spec(Some(true), 2)));
    assert!(!reply.fixes.contains(&FixKind::Suspend), "{:?}", reply.fixes);
    // Without the queue label it is not Sluice's.
    let mut review = trainjob_review(spec(Some(false), 2));
    review["request"]["object"]["metadata"]["labels"] = json!({});
    let (_, patched) = review_applied(&r, MUTATE, &review);
    assert_eq!(patched["spec"]["suspend"], false);
}

#[test]
fn a_queued_trainjob_is_resumed_only_by_the_controller() {
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let review = trainjob_update(spec(Some(true), 2), spec(Some(false), 2), "alice@example.com");
    let reply = r.handle(VALIDATE, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = reply.response.result.message.clone();
    assert!(
        msg.starts_with("spec.suspend: cannot be changed from true to false by \"alice@example.com\""),
        "{msg}"
    );
    let review = trainjob_update(
        spec(Some(true), 2),
        spec(Some(false), 2),
        "system:serviceaccount:sluice-system:sluice-controller",
    );
    assert_eq!(r.handle(VALIDATE, &body(&review)).unwrap().verdict, Verdict::Allowed);
}

#[test]
fn an_admitted_trainjob_may_not_grow_its_nodes_but_may_shrink_or_wait() {
    let r = reviewer();
    let reply = r
        .handle(
            VALIDATE,
            &body(&trainjob_update(
                spec(Some(false), 2),
                spec(Some(false), 4),
                "alice@example.com",
            )),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    let msg = reply.response.result.message.clone();
    assert!(msg.contains("spec.trainer.numNodes: 4 pods at once, was 2"), "{msg}");
    // Fewer nodes: allowed.
    let reply = r
        .handle(
            VALIDATE,
            &body(&trainjob_update(
                spec(Some(false), 2),
                spec(Some(false), 1),
                "alice@example.com",
            )),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // Suspended (waiting): it may ask for more, its Workload is made again.
    let reply = r
        .handle(
            VALIDATE,
            &body(&trainjob_update(
                spec(Some(true), 2),
                spec(Some(true), 8),
                "alice@example.com",
            )),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
}

/// A JobSet CREATE (queue label copied onto it, running) controlled by
/// TrainJob `llama` with `uid`, by `user`.
fn jobset_of_trainjob(uid: &str, user: &str) -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let job = review["request"]["object"].clone();
    let gvk = json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"});
    let gvr = json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let mut jspec = job["spec"].clone();
    jspec.as_object_mut().unwrap().remove("suspend");
    review["request"]["object"] = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": job["metadata"]["namespace"], "labels": job["metadata"]["labels"],
                     "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                          "name": "llama", "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"suspend": false, "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": jspec}}]}
    });
    review["request"]["userInfo"]["username"] = json!(user);
    review
}

#[test]
fn a_trainjobs_jobset_is_left_to_it_only_when_trainer_makes_it_and_the_trainjob_exists() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    view.replace_owners(
        OwnerKind::Queued(JobKind::TrainJob),
        BTreeMap::from([(("team-b".to_owned(), "llama".to_owned()), "tj-uid".to_owned())]),
    );
    let r = reviewer_with(Arc::new(view));
    let mutate = Endpoint::MutateQueued(JobKind::JobSet);
    // Made by Trainer for an existing TrainJob: not suspended, not queued.
    let (reply, patched) = review_applied(&r, mutate, &jobset_of_trainjob("tj-uid", TRAINER));
    assert!(!reply.fixes.contains(&FixKind::Suspend), "{:?}", reply.fixes);
    assert_eq!(patched["spec"]["suspend"], false);
    // Made by a user naming the TrainJob: refused, naming the setting.
    let reply = r
        .handle(mutate, &body(&jobset_of_trainjob("tj-uid", "alice@example.com")))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply.response.result.message.contains("webhook.config.operators"),
        "{}",
        reply.response.result.message
    );
    // A TrainJob of another uid: refused.
    let reply = r.handle(mutate, &body(&jobset_of_trainjob("forged", TRAINER))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        reply.response.result.message.contains("there is no TrainJob \"llama\""),
        "{}",
        reply.response.result.message
    );
}
