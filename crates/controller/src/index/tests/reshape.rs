//! An object whose shape changed after its Workload was made: scaled up
//! while admitted (evicted and queued again), scaled down (the admission
//! shrinks once the pods are gone), changed while waiting (made again).

use super::*;
use sluice_kinds::JobKind;

/// Job `train` (`pods` pods of 1 GPU) admitted and running; the GPUs held.
fn admitted(pods: i32) -> (Index, Job) {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", pods, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit"]);
    observe_status(&mut ix, &j, 0, 0, T0 + 2000);
    let running = with(&j, |s| s.suspend = Some(false), pods);
    ix.apply_job(running.clone(), T0 + 2000);
    ix.take_plans();
    (ix, running)
}

/// `j` changed by `f`, with `active` pods.
fn with(j: &Job, f: impl FnOnce(&mut k8s_openapi::api::batch::v1::JobSpec), active: i32) -> Job {
    let mut j = j.clone();
    f(j.spec.as_mut().unwrap());
    j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
        active: Some(active),
        ..Default::default()
    });
    j
}

fn used_gpus(ix: &Index) -> i64 {
    ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used / 1000
}

#[test]
fn an_admitted_job_scaled_up_is_suspended_evicted_and_queued_again() {
    let (mut ix, running) = admitted(2);
    let scaled = with(&running, |s| s.parallelism = Some(8), 2);
    ix.apply_job(scaled.clone(), T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    let s = status_step(&plans[0]);
    let (status, reason, message) = condition(s, cond::EVICTED);
    assert_eq!((status, reason), ("True", "WorkloadShapeChanged"));
    assert!(message.contains("pod set main runs 8 pods, 2 admitted"), "{message}");
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    assert_eq!(
        ix.engine().workload_state("wl-uid-train"),
        Some(WorkloadState::Evicting)
    );
    // Suspended, its pods gone: the quota is released, and the Workload,
    // which asks for 2 pods, is not requeued but made again for 8.
    let gone = with(&scaled, |s| s.suspend = Some(true), 0);
    ix.apply_job(gone.clone(), T0 + 4000);
    // (This server does not report terminating pods: they are looked up.)
    assert_eq!(purposes(&ix.take_plans()), ["confirm_pods_gone"]);
    ix.pods_gone("wl-uid-train", T0 + 4500);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["reshape"]);
    assert!(
        plans[0]
            .steps
            .iter()
            .any(|s| matches!(s, Step::DeleteWorkload { uid, .. } if uid == "wl-uid-train"))
    );
    assert_eq!(used_gpus(&ix), 0);
    assert_eq!(
        ix.engine().workload_state("wl-uid-train"),
        None,
        "never admitted again as it was"
    );
    ix.delete_workload(&wkey("train"), T0 + 5000);
    ix.apply_job(gone, T0 + 5000);
    let made = ix.take_plans().iter().find_map(|p| match &p.steps[0] {
        Step::ApplyWorkload(wl) => Some(wl.spec.pod_sets[0].count),
        _ => None,
    });
    assert_eq!(made, Some(8));
}

#[test]
fn more_per_pod_is_growth_too() {
    let (mut ix, running) = admitted(2);
    let mut bigger = running.clone();
    let c = &mut bigger.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0];
    c.resources.as_mut().unwrap().limits.as_mut().unwrap().insert(
        "nvidia.com/gpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
    );
    ix.apply_job(bigger, T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    let (_, _, message) = condition(status_step(&plans[0]), cond::EVICTED);
    assert!(
        message.contains("asks for 2 nvidia.com/gpu, 1 admitted per pod"),
        "{message}"
    );
}

#[test]
fn a_scaled_down_job_gives_back_its_quota_once_its_pods_are_gone() {
    let (mut ix, running) = admitted(4);
    assert_eq!(used_gpus(&ix), 4);
    // Scaled to 1: while 4 pods still run, the admission stays.
    ix.apply_job(with(&running, |s| s.parallelism = Some(1), 4), T0 + 3000);
    assert!(ix.take_plans().is_empty());
    assert_eq!(used_gpus(&ix), 4);
    // One pod left: the admission holds 1 pod.
    ix.apply_job(with(&running, |s| s.parallelism = Some(1), 1), T0 + 4000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["reshape"]);
    let adm = status_step(&plans[0]).admission.as_ref().unwrap();
    assert_eq!(adm.pod_set_assignments[0].count, 1);
    assert_eq!(adm.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "1");
    assert_eq!(used_gpus(&ix), 1);
    assert_eq!(
        ix.engine().workload_state("wl-uid-train"),
        Some(WorkloadState::Admitted)
    );
    // Seen again: nothing more to do.
    ix.apply_job(with(&running, |s| s.parallelism = Some(1), 1), T0 + 5000);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn a_waiting_job_changed_gets_its_workload_made_again() {
    let mut ix = ready_index();
    let j = mk_job("big", "team-a", 9, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.cycle(T0 + 1000);
    ix.take_plans();
    assert_eq!(ix.engine().workload_state("wl-uid-big"), Some(WorkloadState::Pending));
    // Unchanged: nothing.
    ix.apply_job(j.clone(), T0 + 2000);
    assert!(ix.take_plans().is_empty());
    let smaller = with(&j, |s| s.parallelism = Some(4), 0);
    ix.apply_job(smaller.clone(), T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["reshape"]);
    // The deletion seen, the Workload is made again from the Job.
    ix.delete_workload(&wkey("big"), T0 + 4000);
    ix.apply_job(smaller, T0 + 4000);
    let plans = ix.take_plans();
    let made = plans.iter().find_map(|p| match &p.steps[0] {
        Step::ApplyWorkload(wl) => Some(wl.spec.pod_sets[0].count),
        _ => None,
    });
    assert_eq!(made, Some(4));
}

/// A pod template of `gpus` GPUs.
fn pod(gpus: u32) -> Value {
    json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x",
        "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

/// An object of `kind` named `x` in team-a, suspended, with `spec`.
fn object(kind: JobKind, spec: Value) -> Value {
    json!({
        "apiVersion": kind.api_version(), "kind": kind.kind(),
        "metadata": {"name": "x", "namespace": NS, "uid": "obj-uid", "labels": {"sluice.dev/queue": "team-a"},
                     "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": spec
    })
}

/// Where the kind's suspend flag is.
fn suspend_at(kind: JobKind) -> &'static str {
    match kind.integration().hold() {
        sluice_kinds::Hold::Suspend(f) => f.pointer,
        sluice_kinds::Hold::Replicas => panic!("{kind:?} is held at zero replicas"),
    }
}

/// `obj` of `kind` admitted and running in a ClusterQueue of 16 GPUs.
fn admitted_object(kind: JobKind, obj: &Value) -> (Index, Value) {
    let mut config = IndexConfig::default();
    config.integrations.insert(kind);
    let mut ix = ready_index_with(config);
    ix.apply_cluster_queue(cq("cluster-gpu", 16));
    ix.apply_object(kind, obj, T0);
    let mut wl = sluice_kinds::Full::Dynamic(kind, obj)
        .workload(false, |_| None, |_| None)
        .unwrap();
    wl.metadata.uid = Some("wl-uid-x".into());
    wl.metadata.creation_timestamp = Some(time_of(T0));
    ix.apply_workload(wl.clone(), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0 + 1000).0), ["admit"], "{kind:?}");
    wl.status = ix.workload_status(&ObjKey::new(NS, kind.workload_name("x"))).cloned();
    ix.apply_workload(wl, T0 + 2000);
    let mut running = obj.clone();
    *running.pointer_mut(suspend_at(kind)).unwrap() = json!(false);
    ix.apply_object(kind, &running, T0 + 2000);
    ix.take_plans();
    (ix, running)
}

#[test]
fn every_kind_that_grows_while_admitted_is_evicted_and_one_that_shrinks_is_not() {
    let jobset = |replicas: i64| {
        json!({"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": replicas,
            "template": {"spec": {"parallelism": 1, "completions": 1, "template": pod(1)}}}]})
    };
    let kubeflow = |field: &str, workers: i64| {
        let mut s = json!({"runPolicy": {"suspend": true}});
        s[field] =
            json!({"Master": {"replicas": 1, "template": pod(1)}, "Worker": {"replicas": workers, "template": pod(1)}});
        s
    };
    let mpi = |workers: i64| {
        json!({"runPolicy": {"suspend": true}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": pod(0)}, "Worker": {"replicas": workers, "template": pod(1)}}})
    };
    let ray = |replicas: i64| {
        json!({"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": {
            "headGroupSpec": {"template": pod(0)},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": replicas, "minReplicas": 0, "maxReplicas": 8, "template": pod(1)}]}})
    };
    let cases: Vec<(JobKind, Value, Value, Value)> = vec![
        (JobKind::JobSet, jobset(2), jobset(5), jobset(1)),
        (
            JobKind::PyTorchJob,
            kubeflow("pytorchReplicaSpecs", 2),
            kubeflow("pytorchReplicaSpecs", 4),
            kubeflow("pytorchReplicaSpecs", 1),
        ),
        (JobKind::MpiJob, mpi(2), mpi(3), mpi(1)),
        (JobKind::RayJob, ray(2), ray(6), ray(1)),
    ];
    for (kind, spec, grown, shrunk) in cases {
        let (mut ix, _) = admitted_object(kind, &object(kind, spec.clone()));
        let mut bigger = object(kind, grown);
        *bigger.pointer_mut(suspend_at(kind)).unwrap() = json!(false);
        ix.apply_object(kind, &bigger, T0 + 3000);
        let plans = ix.take_plans();
        assert_eq!(purposes(&plans), ["evict"], "{kind:?}");
        let (_, reason, message) = condition(status_step(&plans[0]), cond::EVICTED);
        assert_eq!(reason, "WorkloadShapeChanged", "{kind:?}");
        assert!(message.contains("admitted"), "{kind:?}: {message}");
        assert_eq!(
            ix.engine().workload_state("wl-uid-x"),
            Some(WorkloadState::Evicting),
            "{kind:?}"
        );
        // Scaled down instead: it keeps running on its admission.
        let (mut ix, _) = admitted_object(kind, &object(kind, spec));
        let mut smaller = object(kind, shrunk);
        *smaller.pointer_mut(suspend_at(kind)).unwrap() = json!(false);
        ix.apply_object(kind, &smaller, T0 + 3000);
        assert!(!purposes(&ix.take_plans()).contains(&"evict"), "{kind:?}");
        assert_eq!(
            ix.engine().workload_state("wl-uid-x"),
            Some(WorkloadState::Admitted),
            "{kind:?}"
        );
    }
}

#[test]
fn pods_beyond_the_admission_for_longer_than_a_reconcile_are_reported_once() {
    let (mut ix, running) = admitted(2);
    // Something other than Sluice runs 4 pods of a Job admitted for 2.
    ix.apply_job(with(&running, |_| {}, 4), T0 + 3000);
    assert!(ix.take_plans().is_empty(), "a reconcile's grace");
    let (plans, _) = ix.cycle(T0 + 4000);
    let warned: Vec<(&str, Option<&str>)> = plans
        .iter()
        .flat_map(|p| &p.steps)
        .filter_map(|s| match s {
            Step::Event(e) if e.reason == "PodsOverAdmission" => Some((e.type_, e.regarding.kind.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(warned, [("Warning", Some("Workload")), ("Warning", Some("Job"))]);
    assert_eq!(ix.take_stats().pods_over_admission, 1);
    // Reported once.
    ix.apply_job(with(&running, |_| {}, 4), T0 + 5000);
    ix.cycle(T0 + 6000);
    assert_eq!(ix.take_stats().pods_over_admission, 0);
    // Back within its admission, then over again: reported again.
    ix.apply_job(with(&running, |_| {}, 2), T0 + 7000);
    ix.apply_job(with(&running, |_| {}, 3), T0 + 8000);
    ix.cycle(T0 + 9000);
    assert_eq!(ix.take_stats().pods_over_admission, 1);
}
