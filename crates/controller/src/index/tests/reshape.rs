//! An object whose shape changed after its Workload was made: scaled up
//! while admitted (evicted and queued again), scaled down (the admission
//! shrinks once the pods are gone), changed while waiting (made again).

use super::*;

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
    // Suspended, its pods gone: the quota is released, and the waiting
    // Workload, which asks for 2 pods, is made again for 8.
    let gone = with(&scaled, |s| s.suspend = Some(true), 0);
    ix.apply_job(gone.clone(), T0 + 4000);
    // (This server does not report terminating pods: they are looked up.)
    assert_eq!(purposes(&ix.take_plans()), ["confirm_pods_gone"]);
    ix.pods_gone("wl-uid-train", T0 + 4500);
    assert_eq!(purposes(&ix.take_plans()), ["requeue"]);
    assert_eq!(used_gpus(&ix), 0);
    ix.apply_job(gone, T0 + 5000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["reshape"]);
    assert!(
        plans[0]
            .steps
            .iter()
            .any(|s| matches!(s, Step::DeleteWorkload { uid, .. } if uid == "wl-uid-train"))
    );
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
