//! Bare GPU pods where GPUs are queued: refused where the server has no
//! scheduling gates, gated where it has; made by a queued object's
//! controller, left to it. GPU ReplicaSets only from Deployments.

use super::*;
use sluice_api::labels::{ADMISSION_GATE, MANAGED_POD};

/// The recorded bare GPU pod (alice, team-a), without its queue label,
/// in a namespace that queues every object (or not).
fn pod_review(opted_in: bool) -> (Reviewer, Value) {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    let mut labels = BTreeMap::new();
    if opted_in {
        labels.insert("sluice.dev/default-queue".to_owned(), "enabled".to_owned());
    }
    view.upsert_namespace("team-a", labels);
    let mut review = fixture("admissionreview-request-pod-create-gpu-requests-only.json");
    review["request"]["object"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    (reviewer_with(Arc::new(view)), review)
}

fn message(reply: &Reply) -> String {
    response_of(reply)["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_bare_gpu_pod_where_gpus_are_queued_is_refused_with_how_to_run_it() {
    let (r, review) = pod_review(true);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = message(&reply);
    assert!(
        msg.starts_with("spec.containers[0].resources.requests[nvidia.com/gpu]: a Pod that asks for a GPU must wait for admission here (namespace \"team-a\" queues every GPU (sluice.dev/default-queue=enabled))"),
        "{msg}"
    );
    assert!(
        msg.contains("no pod scheduling gates (Kubernetes 1.27+)") && msg.contains("run it as a Job"),
        "{msg}"
    );
    // Elsewhere, without the label: the GPU fixes only.
    let (r, review) = pod_review(false);
    assert_eq!(
        r.handle(Endpoint::MutatePods, &body(&review)).unwrap().verdict,
        Verdict::Patched
    );
    // A CPU pod is never held.
    let (r, mut review) = pod_review(true);
    review["request"]["object"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
    assert_ne!(
        r.handle(Endpoint::MutatePods, &body(&review)).unwrap().verdict,
        Verdict::Denied
    );
}

#[test]
fn a_queued_objects_pods_are_its_controllers_to_make() {
    let owner =
        |api: &str, kind: &str| json!([{"apiVersion": api, "kind": kind, "name": "x", "uid": "u", "controller": true}]);
    for (user, api, kind, allowed) in [
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            "apps/v1",
            "ReplicaSet",
            true,
        ),
        (
            "system:serviceaccount:kube-system:statefulset-controller",
            "apps/v1",
            "StatefulSet",
            true,
        ),
        (
            "system:serviceaccount:kube-system:job-controller",
            "batch/v1",
            "Job",
            true,
        ),
        ("system:kube-controller-manager", "batch/v1", "Job", true),
        (
            "system:serviceaccount:kubeflow:training-operator",
            "kubeflow.org/v1",
            "PyTorchJob",
            true,
        ),
        // A controller making a pod for another kind's object, or a tenant
        // claiming an owner: a bare pod.
        (
            "system:serviceaccount:kube-system:daemon-set-controller",
            "apps/v1",
            "DaemonSet",
            false,
        ),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            "batch/v1",
            "Job",
            false,
        ),
        ("alice@example.com", "apps/v1", "ReplicaSet", false),
    ] {
        let (r, mut review) = pod_review(true);
        review["request"]["userInfo"]["username"] = json!(user);
        review["request"]["object"]["metadata"]["ownerReferences"] = owner(api, kind);
        let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
        assert_eq!(
            reply.verdict != Verdict::Denied,
            allowed,
            "{user} {kind}: {}",
            message(&reply)
        );
    }
}

#[test]
fn with_scheduling_gates_a_bare_gpu_pod_is_gated_and_labelled() {
    let (r, review) = pod_review(true);
    let r = r.with_server_gates(true);
    let (reply, pod) = review_applied(&r, Endpoint::MutatePods, &review);
    assert_eq!(reply.verdict, Verdict::Patched, "{}", message(&reply));
    assert_eq!(pod["spec"]["schedulingGates"], json!([{"name": ADMISSION_GATE}]));
    assert_eq!(pod["metadata"]["labels"][MANAGED_POD], "true");
    assert_eq!(pod["metadata"]["labels"]["sluice.dev/queue"], "default");
    // Gated once: applying the webhook to its output adds nothing.
    let mut again = review.clone();
    again["request"]["object"] = pod.clone();
    let reply = r.handle(Endpoint::MutatePods, &body(&again)).unwrap();
    assert!(
        patch_of(&reply.body)
            .0
            .iter()
            .all(|op| !op.path().as_str().contains("schedulingGates"))
    );
    // A pod group must say its size.
    let mut grouped = review.clone();
    grouped["request"]["object"]["metadata"]["labels"] = json!({"sluice.dev/pod-group": "g"});
    let reply = r.handle(Endpoint::MutatePods, &body(&grouped)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        message(&reply).starts_with("metadata.annotations[sluice.dev/pod-group-total-count]: a pod of group \"g\"")
    );
    // `pods: refuse` refuses even there.
    let cfg = WebhookConfig {
        pods: crate::config::PodHolding::Refuse,
        ..WebhookConfig::default()
    };
    let view = MemoryView::synced_with_nvidia_runtime_class();
    view.upsert_namespace(
        "team-a",
        BTreeMap::from([("sluice.dev/default-queue".to_owned(), "enabled".to_owned())]),
    );
    let r = Reviewer::new(cfg, Arc::new(view)).with_server_gates(true);
    assert_eq!(
        r.handle(Endpoint::MutatePods, &body(&review)).unwrap().verdict,
        Verdict::Denied
    );
}

/// A ReplicaSet CREATE of GPU pods by `user` in team-a.
fn replica_set_review(user: &str) -> Value {
    let job = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    let gvk = json!({"group": "apps", "version": "v1", "kind": "ReplicaSet"});
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-2", "kind": gvk, "requestKind": gvk,
        "resource": {"group": "apps", "version": "v1", "resource": "replicasets"},
        "name": "rs", "namespace": "team-a", "operation": "CREATE", "userInfo": {"username": user},
        "object": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "team-a"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                            "template": job["request"]["object"]["spec"]["template"]}},
        "dryRun": false}})
}

#[test]
fn a_gpu_replicaset_is_a_deployments_or_refused() {
    let r = reviewer();
    let reply = r
        .handle(
            Endpoint::ValidateReplicaSets,
            &body(&replica_set_review("alice@example.com")),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        message(&reply).contains("create a Deployment instead"),
        "{}",
        message(&reply)
    );
    for user in [
        "system:serviceaccount:kube-system:deployment-controller",
        "system:kube-controller-manager",
    ] {
        let reply = r
            .handle(Endpoint::ValidateReplicaSets, &body(&replica_set_review(user)))
            .unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed, "{user}");
    }
}

#[test]
fn a_gated_pods_gate_and_label_stay_until_sluice_admits_it() {
    let (r, review) = pod_review(true);
    let r = r.with_server_gates(true);
    let (_, gated) = review_applied(&r, Endpoint::MutatePods, &review);
    let update = |new: Value, user: &str| {
        let mut u = review.clone();
        u["request"]["operation"] = json!("UPDATE");
        u["request"]["oldObject"] = gated.clone();
        u["request"]["object"] = new;
        u["request"]["userInfo"]["username"] = json!(user);
        u
    };
    let mut ungated = gated.clone();
    ungated["spec"]["schedulingGates"] = json!([]);
    let reply = r
        .handle(
            Endpoint::ValidateGatedPods,
            &body(&update(ungated.clone(), "alice@example.com")),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert!(
        message(&reply)
            .starts_with("spec.schedulingGates: sluice.dev/admission cannot be removed by \"alice@example.com\"")
    );
    let mut unlabelled = gated.clone();
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(MANAGED_POD);
    let reply = r
        .handle(
            Endpoint::ValidateGatedPods,
            &body(&update(unlabelled, "alice@example.com")),
        )
        .unwrap();
    assert!(message(&reply).starts_with("metadata.labels[sluice.dev/managed]: cannot be removed"));
    // The controller removes the gate.
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_empty()),
    );
    let reply = r
        .handle(
            Endpoint::ValidateGatedPods,
            &body(&update(
                ungated,
                "system:serviceaccount:sluice-system:sluice-controller",
            )),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
}
