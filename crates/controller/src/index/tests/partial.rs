//! Partial admission of batch/v1 Jobs in the index: started with the
//! parallelism admitted, put back on eviction; a gang member's own.

use super::*;
use sluice_kinds::ObjPatch;

/// `mk_job` with `sluice.dev/min-parallelism: "<min>"`.
fn min_job(name: &str, pods: i32, gpus: u32, min: i32) -> Job {
    let mut j = mk_job(name, "team-a", pods, gpus);
    j.metadata
        .annotations
        .get_or_insert_default()
        .insert(sluice_api::labels::MIN_PARALLELISM.into(), min.to_string());
    j
}

/// The Job as the API server holds it after a merge patch, then `f`.
fn merged(j: &Job, patch: &Value, f: impl FnOnce(&mut Value)) -> Job {
    let mut v = serde_json::to_value(j).unwrap();
    json_patch::merge(&mut v, patch);
    f(&mut v);
    serde_json::from_value(v).unwrap()
}

/// Admits a 6-GPU Job first: 2 of cluster-gpu's 8 GPUs stay free.
fn two_free(ix: &mut Index) {
    let big = mk_job("big", "team-a", 3, 2);
    ix.apply_job(big.clone(), T0);
    ix.apply_workload(stored_workload(&big, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
}

#[test]
fn a_job_admitted_with_fewer_pods_runs_with_that_parallelism_until_it_is_evicted() {
    let mut ix = ready_index();
    two_free(&mut ix);
    let j = min_job("sweep", 4, 1, 2);
    ix.apply_job(j.clone(), T0 + 1000);
    ix.apply_workload(stored_workload(&j, 0, 1), T0 + 1000);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit"]);
    let adm = status_step(&plans[0]).admission.as_ref().unwrap();
    assert_eq!(adm.pod_set_assignments[0].count, 2);
    let patches = job_patches(&plans[0]);
    assert_eq!(patches.len(), 1);
    let start = patches[0].1.clone();
    assert_eq!(start["spec"]["suspend"], json!(false));
    assert_eq!(start["spec"]["parallelism"], json!(2));
    assert_eq!(
        start["metadata"]["annotations"]["sluice.dev/original-parallelism"],
        json!("4")
    );
    // Running its 2 pods, none ready yet.
    let running = merged(&j, &start, |v| v["status"] = json!({"active": 2, "ready": 0}));
    ix.apply_job(running.clone(), T0 + 2000);
    assert!(ix.take_plans().is_empty());
    // Its pods never all get ready: evicted, suspended.
    let (plans, _) = ix.cycle(T0 + 1000 + 600_000);
    assert_eq!(purposes(&plans), ["evict"]);
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    // Pods gone: requeued, with the parallelism the user wrote back.
    let gone = merged(&running, &json!({"spec": {"suspend": true}}), |v| {
        v["status"] = json!({"active": 0, "terminating": 0})
    });
    ix.apply_job(gone.clone(), T0 + 602_000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["requeue"]);
    let restore = job_patches(&plans[0]);
    assert_eq!(restore.len(), 1);
    assert_eq!(restore[0].1["spec"]["parallelism"], json!(4));
    assert_eq!(
        restore[0].1["metadata"]["annotations"],
        json!({"sluice.dev/original-parallelism": null, "sluice.dev/original-scheduling": null})
    );
    let restored = merged(&gone, restore[0].1, |_| {});
    assert_eq!(restored.spec.as_ref().unwrap().parallelism, Some(4));
    assert_eq!(
        restored.spec.as_ref().unwrap().template,
        j.spec.as_ref().unwrap().template
    );
}

#[test]
fn a_job_admitted_whole_keeps_its_parallelism() {
    let mut ix = ready_index();
    let j = min_job("sweep", 4, 1, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0);
    assert_eq!(purposes(&plans), ["admit"]);
    assert_eq!(
        status_step(&plans[0]).admission.as_ref().unwrap().pod_set_assignments[0].count,
        4
    );
    let start = job_patches(&plans[0])[0].1;
    assert!(start["spec"].get("parallelism").is_none(), "{start}");
    assert!(
        start["metadata"]["annotations"]
            .get("sluice.dev/original-parallelism")
            .is_none(),
        "{start}"
    );
}

#[test]
fn a_gang_member_with_a_minimum_runs_its_own_pods_admitted() {
    let mut ix = ready_index();
    two_free(&mut ix);
    // workers: 2 pods of 1 GPU, at least 1; launcher: 1 pod of 1 GPU.
    let member = |j: Job| {
        let mut j = j;
        let labels = j.metadata.labels.as_mut().unwrap();
        labels.insert("sluice.dev/gang".into(), "ft".into());
        labels.insert("sluice.dev/gang-size".into(), "2".into());
        j
    };
    let workers = member(min_job("workers", 2, 1, 1));
    let launcher = member(mk_job("launcher", "team-a", 1, 1));
    ix.apply_job(workers.clone(), T0 + 1000);
    ix.apply_job(launcher.clone(), T0 + 1000);
    let made = ix.take_plans();
    assert!(purposes(&made).contains(&"create_workload"), "{:?}", purposes(&made));
    let mut wl =
        sluice_kinds::gang::workload_for_gang("ft", "team-a", &[&launcher, &workers], |_| None, |_| None).unwrap();
    wl.metadata.uid = Some("wl-uid-ft".into());
    wl.metadata.generation = Some(1);
    wl.metadata.creation_timestamp = Some(time_of(T0 + 1000));
    ix.apply_workload(wl, T0 + 1000);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 2000);
    assert_eq!(purposes(&plans), ["admit"]);
    let counts: Vec<(&str, i32)> = status_step(&plans[0])
        .admission
        .as_ref()
        .unwrap()
        .pod_set_assignments
        .iter()
        .map(|a| (a.name.as_str(), a.count))
        .collect();
    assert_eq!(counts, [("launcher", 1), ("workers", 1)]);
    let parallelism: Vec<(&str, Value)> = plans[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::PatchJob {
                job,
                patch: ObjPatch::Merge(p),
            } => Some((job.name(), p["spec"].get("parallelism").cloned().unwrap_or(Value::Null))),
            _ => None,
        })
        .collect();
    assert_eq!(parallelism, [("launcher", Value::Null), ("workers", json!(1))]);
}
