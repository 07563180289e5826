//! Updates of a running queued object: its admission covers what it runs
//! now, so an update that asks for more is refused (every kind), and in a
//! namespace that queues every object its queue label stays.

use super::*;

/// The recorded unsuspend review (Job train-a: 4 pods × 2 GPUs, team-a),
/// turned into an update of the running Job by `f`.
fn running_job_update(f: impl FnOnce(&mut Value)) -> Value {
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["oldObject"]["spec"]["suspend"] = json!(false);
    let mut new = review["request"]["oldObject"].clone();
    f(&mut new);
    review["request"]["object"] = new;
    review
}

fn verdict(r: &Reviewer, ep: Endpoint, review: &Value) -> (Verdict, String) {
    let reply = r.handle(ep, &body(review)).unwrap();
    (reply.verdict, reply.response.result.message.clone())
}

#[test]
fn a_running_job_cannot_be_scaled_up_nor_given_larger_pods() {
    let r = reviewer();
    let scaled = running_job_update(|j| {
        j["spec"]["parallelism"] = json!(8);
        j["spec"]["completions"] = json!(16);
    });
    let (v, msg) = verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &scaled);
    assert_eq!(v, Verdict::Denied);
    assert!(
        msg.starts_with("spec.parallelism: 8 pods at once, was 4: cannot grow while the Job runs"),
        "{msg}"
    );
    assert!(msg.contains("set spec.suspend to true in the same update"), "{msg}");
    let larger = running_job_update(|j| {
        j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!("4")
    });
    let (v, msg) = verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &larger);
    assert_eq!(v, Verdict::Denied);
    assert!(
        msg.contains("spec.template.spec: a pod asks for 4 of nvidia.com/gpu, was 2"),
        "{msg}"
    );
}

#[test]
fn scaling_down_suspending_or_the_controller_are_allowed() {
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let down = running_job_update(|j| j["spec"]["parallelism"] = json!(1));
    assert_eq!(
        verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &down).0,
        Verdict::Allowed
    );
    let suspended = running_job_update(|j| {
        j["spec"]["parallelism"] = json!(8);
        j["spec"]["suspend"] = json!(true);
    });
    assert_eq!(
        verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &suspended).0,
        Verdict::Allowed
    );
    let mut by_controller = running_job_update(|j| j["spec"]["parallelism"] = json!(8));
    by_controller["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    assert_eq!(
        verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &by_controller).0,
        Verdict::Allowed
    );
    // A suspended Job's shape is free to change (its Workload follows).
    let mut waiting = fixture("admissionreview-request-job-update-unsuspend.json");
    waiting["request"]["object"]["spec"]["suspend"] = json!(true);
    waiting["request"]["object"]["spec"]["parallelism"] = json!(8);
    assert_eq!(
        verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &waiting).0,
        Verdict::Allowed
    );
}

/// A running object of `kind` (group/version/kind/resource) in team-a,
/// updated from `old` to `new`.
fn running_update(kind: JobKind, old: Value, new: Value) -> Value {
    let (group, version, k) = kind.gvk();
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    let gvk = json!({"group": group, "version": version, "kind": k});
    let gvr = json!({"group": group, "version": version, "resource": kind.plural()});
    review["request"]["kind"] = gvk.clone();
    review["request"]["requestKind"] = gvk;
    review["request"]["resource"] = gvr.clone();
    review["request"]["requestResource"] = gvr;
    let meta = json!({"name": "x", "namespace": "team-a", "labels": {"sluice.dev/queue": "team-a"}});
    for (which, spec) in [("oldObject", old), ("object", new)] {
        review["request"][which] =
            json!({"apiVersion": format!("{group}/{version}"), "kind": k, "metadata": meta, "spec": spec});
    }
    review
}

fn pod(gpus: &str) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
}

#[test]
fn every_kind_refuses_growth_while_it_runs() {
    let r = reviewer();
    let jobset = |replicas: i64, parallelism: i64| {
        json!({"suspend": false, "replicatedJobs": [{"name": "workers", "replicas": replicas,
            "template": {"spec": {"parallelism": parallelism, "template": pod("1")}}}]})
    };
    let kubeflow = |field: &str, workers: i64| {
        let mut s = json!({"runPolicy": {"suspend": false}});
        s[field] = json!({"Master": {"replicas": 1, "template": pod("1")}, "Worker": {"replicas": workers, "template": pod("1")}});
        s
    };
    let ray = |replicas: i64, max: i64| {
        json!({"suspend": false, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": pod("0")},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": replicas, "minReplicas": 1, "maxReplicas": max, "template": pod("1")}]}})
    };
    let cases: Vec<(JobKind, Value, Value, Value, &str)> = vec![
        (
            JobKind::JobSet,
            jobset(2, 2),
            jobset(3, 2),
            jobset(1, 2),
            "spec.replicatedJobs[0] (workers).replicas × parallelism: 6 pods at once, was 4",
        ),
        (
            JobKind::JobSet,
            jobset(2, 2),
            jobset(2, 4),
            jobset(2, 1),
            "spec.replicatedJobs[0] (workers).replicas × parallelism: 8 pods at once, was 4",
        ),
        (
            JobKind::PyTorchJob,
            kubeflow("pytorchReplicaSpecs", 2),
            kubeflow("pytorchReplicaSpecs", 5),
            kubeflow("pytorchReplicaSpecs", 1),
            "spec.pytorchReplicaSpecs.Worker.replicas: 5 pods at once, was 2",
        ),
        (
            JobKind::MpiJob,
            kubeflow("mpiReplicaSpecs", 2),
            kubeflow("mpiReplicaSpecs", 3),
            kubeflow("mpiReplicaSpecs", 1),
            "spec.mpiReplicaSpecs.Worker.replicas: 3 pods at once, was 2",
        ),
        (
            JobKind::RayJob,
            ray(2, 2),
            ray(4, 4),
            ray(1, 2),
            "spec.rayClusterSpec.workerGroupSpecs[0] (gpu).replicas × numOfHosts: 4 pods at once, was 2",
        ),
        (
            JobKind::RayJob,
            ray(2, 2),
            ray(2, 8),
            ray(2, 2),
            "spec.rayClusterSpec.workerGroupSpecs[0] (gpu).maxReplicas × numOfHosts: 8 pods at once, was 2",
        ),
    ];
    for (kind, old, grown, shrunk, want) in cases {
        let (v, msg) = verdict(
            &r,
            Endpoint::ValidateQueued(kind),
            &running_update(kind, old.clone(), grown),
        );
        assert_eq!(v, Verdict::Denied, "{kind:?}: {msg}");
        assert!(msg.starts_with(want), "{kind:?}: {msg}");
        let (v, msg) = verdict(&r, Endpoint::ValidateQueued(kind), &running_update(kind, old, shrunk));
        assert_eq!(v, Verdict::Allowed, "{kind:?} scaled down: {msg}");
    }
}

#[test]
fn in_a_namespace_that_queues_every_job_the_label_stays() {
    let view = MemoryView::synced_with_nvidia_runtime_class();
    view.upsert_namespace(
        "team-a",
        BTreeMap::from([("sluice.dev/default-queue".to_owned(), "enabled".to_owned())]),
    );
    let r = Reviewer::new(
        WebhookConfig::default().with_own_namespace("sluice-system"),
        Arc::new(view),
    );
    // Suspended, label taken off: refused for anyone, the controller too.
    let mut review = fixture("admissionreview-request-job-update-unsuspend.json");
    review["request"]["object"]["spec"]["suspend"] = json!(true);
    review["request"]["object"]["metadata"]["labels"] = json!({"app": "x"});
    for user in [
        "alice@example.com",
        "system:serviceaccount:sluice-system:sluice-controller",
    ] {
        review["request"]["userInfo"]["username"] = json!(user);
        let (v, msg) = verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &review);
        assert_eq!(v, Verdict::Denied, "{user}");
        assert!(
            msg.starts_with(
                "metadata.labels[sluice.dev/queue]: cannot be removed: namespace \"team-a\" queues every Job"
            ),
            "{msg}"
        );
    }
    // Moving it to another LocalQueue while suspended stays allowed.
    review["request"]["object"]["metadata"]["labels"] = json!({"sluice.dev/queue": "default"});
    assert_eq!(
        verdict(&r, Endpoint::ValidateQueued(JobKind::Job), &review).0,
        Verdict::Allowed
    );
}
