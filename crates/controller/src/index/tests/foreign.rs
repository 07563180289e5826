//! Switching over from Kueue: the quota Kueue's admitted Workloads hold is
//! counted in Sluice's ClusterQueue of the same name until Kueue lets go.

use std::sync::Arc;

use sluice_convert::foreign::ForeignAdmission;

use super::*;

/// Kueue's admission of `gpus` GPUs into `cluster_queue`, owned by Job
/// uid `owner`.
fn kueue(uid: &str, cluster_queue: &str, gpus: i64, owner: &str) -> Arc<ForeignAdmission> {
    let wl = json!({
        "metadata": {"name": uid, "namespace": NS, "uid": uid,
                     "ownerReferences": [{"kind": "Job", "name": owner, "uid": owner, "controller": true}]},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                   "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [
                       {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "a100"},
                        "resourceUsage": {"nvidia.com/gpu": gpus.to_string()}}]}}
    });
    Arc::new(sluice_convert::foreign::kueue_workload(&wl).unwrap().unwrap())
}

fn used(ix: &Index) -> i64 {
    ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used
}

fn queue(ix: &mut Index, name: &str, gpus: u32, t: i64) {
    let j = mk_job(name, "team-a", 1, gpus);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, t), T0);
}

#[test]
fn kueues_admissions_hold_quota_until_kueue_lets_go() {
    let mut ix = ready_index();
    ix.apply_foreign("ns/kueue-train", Some(kueue("k1", "cluster-gpu", 6, "job-uid-1")));
    assert_eq!(used(&ix), 6_000);
    assert_eq!(ix.foreign_counts(), (1, 0));
    queue(&mut ix, "first", 2, 1);
    queue(&mut ix, "second", 2, 2);
    ix.take_plans();
    let (plans, _) = ix.cycle(T0 + 10);
    let admitted: Vec<&Purpose> = plans
        .iter()
        .map(|p| &p.purpose)
        .filter(|p| matches!(p, Purpose::Admit { .. }))
        .collect();
    assert_eq!(
        admitted,
        [&Purpose::Admit {
            uid: "wl-uid-first".into()
        }]
    );
    // The same object observed again changes nothing.
    ix.apply_foreign("ns/kueue-train", Some(kueue("k1", "cluster-gpu", 6, "job-uid-1")));
    assert_eq!(used(&ix), 8_000);
    // Kueue finished it: its quota goes to the next one.
    ix.apply_foreign("ns/kueue-train", None);
    assert_eq!(used(&ix), 2_000);
    let (plans, _) = ix.cycle(T0 + 20);
    assert!(plans.iter().any(|p| p.purpose
        == Purpose::Admit {
            uid: "wl-uid-second".into()
        }));
    assert_eq!(ix.foreign_counts(), (0, 0));
}

#[test]
fn a_deleted_kueue_workload_releases_its_quota() {
    let mut ix = ready_index();
    ix.apply_foreign("ns/k", Some(kueue("k2", "cluster-gpu", 4, "job-uid-2")));
    assert_eq!(used(&ix), 4_000);
    ix.delete_foreign("ns/k");
    assert_eq!(used(&ix), 0);
}

#[test]
fn an_admission_into_a_cluster_queue_sluice_lacks_is_reported_then_counted_when_it_appears() {
    let mut ix = ready_index();
    ix.apply_foreign("ns/k", Some(kueue("k3", "research", 4, "job-uid-3")));
    assert_eq!(ix.foreign_counts(), (0, 1));
    let warned: Vec<String> = ix
        .take_plans()
        .iter()
        .flat_map(|p| p.steps.iter())
        .filter_map(|s| match s {
            Step::Event(e) if e.reason == "KueueQuotaNotCounted" => Some(e.note.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("ClusterQueue research, which Sluice does not have"),
        "{}",
        warned[0]
    );
    // Said once.
    ix.apply_foreign("ns/k", Some(kueue("k3", "research", 4, "job-uid-3")));
    assert!(ix.take_plans().is_empty());
    ix.apply_cluster_queue(cq("research", 8));
    assert_eq!(ix.foreign_counts(), (1, 0));
    assert_eq!(
        ix.engine().cluster_queue_usage("research").unwrap().resources[0].used,
        4_000
    );
}

#[test]
fn in_a_namespace_that_queues_every_object_kueues_running_job_is_left_alone() {
    let mut ix = ready_index();
    ix.apply_local_queue(lq("default", "cluster-gpu"));
    ix.apply_namespace(
        NS,
        BTreeMap::from([("sluice.dev/default-queue".into(), "enabled".into())]),
        T0,
    );
    ix.take_plans();
    let mut j = mk_job("kueues", "x", 1, 1);
    j.metadata.labels = Some(BTreeMap::from([(
        "kueue.x-k8s.io/queue-name".into(),
        "user-queue".into(),
    )]));
    j.metadata.uid = Some("kueue-job-uid".into());
    j.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_foreign("ns/k", Some(kueue("k4", "cluster-gpu", 1, "kueue-job-uid")));
    ix.apply_job(j.clone(), T0);
    assert!(ix.take_plans().is_empty(), "Kueue's admitted Job was touched");
    // Without Kueue's admission, it is queued in the namespace's default queue.
    let mut other = j.clone();
    other.metadata.name = Some("other".into());
    other.metadata.uid = Some("other-uid".into());
    ix.apply_job(other, T0);
    assert_eq!(purposes(&ix.take_plans()), ["suspend_job", "create_workload"]);
}
