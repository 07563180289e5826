//! Multi-Job gangs in the index: made whole, admitted in one status
//! write, evicted and retired together.

use super::*;
use crate::plan::JobRef;
use sluice_kinds::ObjPatch;
use sluice_kinds::gang;

fn gang_job(name: &str, gang_name: &str, size: &str, pods: i32, gpus: u32) -> Job {
    let mut j = mk_job(name, "team-a", pods, gpus);
    let labels = j.metadata.labels.as_mut().unwrap();
    labels.insert("sluice.dev/gang".into(), gang_name.into());
    labels.insert("sluice.dev/gang-size".into(), size.into());
    j
}

/// The gang Workload as the API server holds it once created.
fn stored_gang(jobs: &[&Job]) -> Workload {
    let mut wl = gang::workload_for_gang("ft", "team-a", jobs, |_| None, |_| None).unwrap();
    wl.metadata.uid = Some("wl-uid-ft".into());
    wl.metadata.generation = Some(1);
    wl.metadata.creation_timestamp = Some(time_of(T0));
    wl
}

fn gkey() -> ObjKey {
    ObjKey::new(NS, "gang-ft")
}

fn with(j: &Job, f: impl FnOnce(&mut Value)) -> Job {
    let mut v = serde_json::to_value(j).unwrap();
    f(&mut v);
    serde_json::from_value(v).unwrap()
}

fn events(plan: &Plan) -> Vec<(String, String, String)> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) => Some((
                e.regarding.name.clone().unwrap_or_default(),
                e.reason.clone(),
                e.note.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// Two 4-GPU Jobs of gang `ft` (size 2), both seen, their Workload stored.
fn whole_gang(ix: &mut Index) -> (Job, Job) {
    let a = gang_job("workers", "ft", "2", 2, 2);
    let b = gang_job("launcher", "ft", "2", 4, 1);
    ix.apply_job(a.clone(), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["report"], "no Workload for half a gang");
    assert_eq!(
        events(&plans[0]),
        [(
            "workers".to_string(),
            "WaitingForGang".to_string(),
            "1 of 2 Jobs of gang ft exist; admission waits for all of them".to_string()
        )]
    );
    ix.apply_job(b.clone(), T0 + 1000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["create_workload"]);
    let Step::ApplyWorkload(wl) = &plans[0].steps[0] else {
        panic!("{:?}", plans[0].steps[0]);
    };
    assert_eq!(wl.metadata.name.as_deref(), Some("gang-ft"));
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("launcher", 4), ("workers", 2)]);
    ix.apply_workload(stored_gang(&[&b, &a]), T0 + 1000);
    assert!(ix.take_plans().is_empty());
    (a, b)
}

#[test]
fn a_gang_larger_than_its_queue_is_never_partly_admitted() {
    let mut ix = ready_index();
    ix.apply_cluster_queue(cq("cluster-gpu", 6));
    whole_gang(&mut ix);
    let (plans, _) = ix.cycle(T0 + 2000);
    assert!(!purposes(&plans).contains(&"admit"), "{:?}", purposes(&plans));
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Pending));
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 0);
}

#[test]
fn a_whole_gang_is_admitted_in_one_status_write_and_every_job_starts() {
    let mut ix = ready_index();
    let (a, b) = whole_gang(&mut ix);
    let (plans, _) = ix.cycle(T0 + 2000);
    assert_eq!(purposes(&plans), ["admit"]);
    let p = &plans[0];
    let writes = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::ApplyWorkloadStatus { .. }))
        .count();
    assert_eq!(writes, 1);
    let adm = status_step(p).admission.as_ref().unwrap();
    let sets: Vec<(&str, i32)> = adm
        .pod_set_assignments
        .iter()
        .map(|a| (a.name.as_str(), a.count))
        .collect();
    assert_eq!(sets, [("launcher", 4), ("workers", 2)]);
    let started: Vec<&str> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::PatchJob {
                job: key,
                patch: ObjPatch::Merge(patch),
            } => {
                assert_eq!(patch["spec"]["suspend"], json!(false));
                assert_eq!(
                    patch["spec"]["template"]["spec"]["nodeSelector"],
                    json!({"gpu": "a100"})
                );
                Some(key.name())
            }
            _ => None,
        })
        .collect();
    assert_eq!(started, ["launcher", "workers"]);
    // An Admitted Event on the Workload and each Job.
    let told: Vec<String> = events(p).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(told, ["gang-ft", "launcher", "workers"]);
    // Both Jobs finish: the Workload finishes, once.
    observe_status(&mut ix, &a, 0, 0, T0 + 3000);
    let done = |j: &Job| {
        with(j, |v| {
            v["spec"]["suspend"] = json!(false);
            v["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        })
    };
    ix.apply_job(done(&a), T0 + 4000);
    assert!(
        !purposes(&ix.take_plans()).contains(&"finish"),
        "finished only when every Job did"
    );
    ix.apply_job(done(&b), T0 + 5000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["release"]);
    assert_eq!(condition(status_step(&plans[0]), cond::FINISHED).1, "Succeeded");
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 0);
}

#[test]
fn a_deleted_member_evicts_the_gang_releases_its_quota_and_retires_its_workload() {
    let mut ix = ready_index();
    let (a, b) = whole_gang(&mut ix);
    assert_eq!(purposes(&ix.cycle(T0 + 2000).0), ["admit"]);
    let gk = gkey();
    let mut wl = stored_gang(&[&b, &a]);
    wl.status = ix.workload_status(&gk).cloned();
    ix.apply_workload(wl, T0 + 2000);
    let running = with(&a, |v| {
        v["spec"]["suspend"] = json!(false);
        v["status"] = json!({"startTime": "2027-01-15T08:00:01Z", "active": 2});
    });
    ix.apply_job(running.clone(), T0 + 3000);
    ix.delete_job(&JobRef::job(NS, "launcher"), T0 + 4000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    let (st, reason, msg) = condition(status_step(&plans[0]), cond::EVICTED);
    assert_eq!((st, reason), ("True", "GangIncomplete"));
    assert_eq!(
        msg,
        "Job launcher of gang ft was deleted: a gang runs whole or not at all"
    );
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Evicting));
    // The other Job's pods are gone: quota released, Workload deleted.
    let gone = with(&running, |v| {
        v["spec"]["suspend"] = json!(true);
        v["status"] = json!({"startTime": "2027-01-15T08:00:01Z", "active": 0, "terminating": 0});
    });
    ix.apply_job(gone.clone(), T0 + 5000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["retire_gang"]);
    assert_eq!(
        plans[0].steps.last(),
        Some(&Step::DeleteWorkload {
            key: gk.clone(),
            uid: "wl-uid-ft".into()
        })
    );
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), None);
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 0);
    // Not requeued: nothing is admitted while the gang is not whole.
    assert!(!purposes(&ix.cycle(T0 + 6000).0).contains(&"admit"));
    // Its deletion observed: the remaining Job is told what it waits for.
    ix.delete_workload(&gk, T0 + 7000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["report"]);
    assert_eq!(events(&plans[0])[0].1, "WaitingForGang");
    // The member comes back (a new uid): a new Workload is made.
    let back = with(&b, |v| v["metadata"]["uid"] = json!("job-uid-launcher-2"));
    ix.apply_job(back, T0 + 8000);
    // The Job kept since is known by its view only: read again, then made.
    assert_eq!(ix.take_refetch(), [JobRef::job(NS, "workers")]);
    assert!(!purposes(&ix.take_plans()).contains(&"create_workload"));
    ix.apply_job(gone, T0 + 9000);
    assert_eq!(purposes(&ix.take_plans()), ["create_workload"]);
}

#[test]
fn a_pending_gang_that_loses_a_member_is_retired_at_once() {
    let mut ix = ready_index();
    ix.apply_cluster_queue(cq("cluster-gpu", 6));
    whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    ix.delete_job(&JobRef::job(NS, "workers"), T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["retire_gang"]);
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), None);
    // A failed deletion is read back and tried again.
    fail(&mut ix, &plans[0], 0, T0 + 4000);
    assert_eq!(ix.take_workload_refetch(), [gkey()]);
}

#[test]
fn a_member_deleted_after_it_finished_does_not_break_the_gang() {
    let mut ix = ready_index();
    let (a, b) = whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    observe_status(&mut ix, &a, 0, 0, T0 + 2000);
    let done = with(&b, |v| {
        v["spec"]["suspend"] = json!(false);
        v["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}]});
    });
    ix.apply_job(done, T0 + 3000);
    // Deleted by its TTL.
    ix.delete_job(&JobRef::job(NS, "launcher"), T0 + 4000);
    assert!(ix.take_plans().is_empty());
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Admitted));
    let finished = with(&a, |v| {
        v["spec"]["suspend"] = json!(false);
        v["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    });
    ix.apply_job(finished, T0 + 5000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["release"]);
    assert_eq!(condition(status_step(&plans[0]), cond::FINISHED).1, "Failed");
}

#[test]
fn conflicting_gang_labels_are_reported_and_nothing_is_made() {
    let mut ix = ready_index();
    let a = gang_job("a", "ft", "2", 1, 1);
    let b = gang_job("b", "ft", "3", 1, 1);
    ix.apply_job(a, T0);
    ix.take_plans();
    ix.apply_job(b, T0);
    let plans = ix.take_plans();
    assert!(!purposes(&plans).contains(&"create_workload"));
    let errors = ix.errors();
    let e = &errors[&(Kind::JOB, format!("{NS}/a"))];
    assert_eq!(e.reason, "GangConflict");
    assert_eq!(
        e.message,
        "gang \"ft\": its Jobs disagree on sluice.dev/gang-size: 2 (a); 3 (b)"
    );
    // Both Jobs carry a Warning Event saying so.
    let warned: Vec<String> = plans.iter().flat_map(events).map(|(n, _, _)| n).collect();
    assert!(
        warned.contains(&"a".to_string()) && warned.contains(&"b".to_string()),
        "{warned:?}"
    );
    // Fixed: the error goes and the Workload is made.
    ix.apply_job(gang_job("b", "ft", "2", 1, 1), T0 + 1000);
    assert_eq!(purposes(&ix.take_plans()), ["create_workload"]);
    assert!(ix.errors().is_empty());
}

#[test]
fn a_running_member_of_an_incomplete_gang_is_suspended() {
    let mut ix = ready_index();
    let a = with(&gang_job("a", "ft", "2", 1, 1), |v| v["spec"]["suspend"] = json!(false));
    ix.apply_job(a, T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job", "report"]);
}

#[test]
fn a_member_finished_then_deleted_in_the_foreground_does_not_break_the_gang() {
    // The TTL controller deletes a finished Job in the foreground: the
    // garbage collector drops the Workload's owner reference to it first.
    let mut ix = ready_index();
    let (a, b) = whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    let done = with(&b, |v| {
        v["spec"]["suspend"] = json!(false);
        v["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    });
    ix.apply_job(done, T0 + 3000);
    let mut wl = stored_gang(&[&b, &a]);
    wl.status = ix.workload_status(&gkey()).cloned();
    wl.metadata
        .owner_references
        .as_mut()
        .unwrap()
        .retain(|o| o.name != "launcher");
    ix.apply_workload(wl, T0 + 4000);
    ix.delete_job(&JobRef::job(NS, "launcher"), T0 + 5000);
    assert!(
        !purposes(&ix.take_plans()).contains(&"evict"),
        "a finished member's going is not a broken gang"
    );
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Admitted));
}

#[test]
fn a_member_relabelled_out_stays_in_its_gang_and_gets_no_workload_of_its_own() {
    let mut ix = ready_index();
    let (a, _) = whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    let out = with(&a, |v| {
        v["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("sluice.dev/gang");
        v["spec"]["suspend"] = json!(false);
    });
    ix.apply_job(out, T0 + 3000);
    let plans = ix.take_plans();
    assert!(
        !purposes(&plans).contains(&"create_workload") && !purposes(&plans).contains(&"suspend_job"),
        "{:?}",
        purposes(&plans)
    );
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Admitted));
}

#[test]
fn a_job_queued_on_its_own_then_labelled_into_a_gang_stays_its_own() {
    let mut ix = ready_index();
    let j = mk_job("solo", "team-a", 1, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0 + 1000).0), ["admit"]);
    let labelled = with(&j, |v| {
        v["metadata"]["labels"]["sluice.dev/gang"] = json!("ft");
        v["metadata"]["labels"]["sluice.dev/gang-size"] = json!("1");
        v["spec"]["suspend"] = json!(false);
    });
    ix.apply_job(labelled, T0 + 2000);
    let plans = ix.take_plans();
    assert!(!purposes(&plans).contains(&"create_workload"), "{:?}", purposes(&plans));
    assert_eq!(ix.errors()[&(Kind::JOB, format!("{NS}/solo"))].reason, "GangConflict");
    // Its own Workload still holds the quota, and is released when it goes.
    ix.delete_job(&JobRef::job(NS, "solo"), T0 + 3000);
    assert_eq!(ix.engine().cluster_queue_usage("cluster-gpu").unwrap().admitted, 0);
}

#[test]
fn a_gang_whose_workload_would_be_refused_is_reported() {
    let mut ix = ready_index();
    // Nine Jobs: a Workload holds at most eight pod sets.
    for i in 0..9 {
        ix.apply_job(gang_job(&format!("m{i}"), "big", "9", 1, 0), T0);
    }
    let plans = ix.take_plans();
    assert!(!purposes(&plans).contains(&"create_workload"));
    let e = &ix.errors()[&(Kind::JOB, format!("{NS}/m0"))];
    assert_eq!(e.reason, "InvalidGangMember");
    assert!(e.message.contains("spec.podSets"), "{}", e.message);
}

#[test]
fn a_new_job_in_a_gang_that_already_ran_is_told_why_it_waits() {
    let mut ix = ready_index();
    let (a, b) = whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    for j in [&a, &b] {
        let done = with(j, |v| {
            v["spec"]["suspend"] = json!(false);
            v["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        });
        ix.apply_job(done, T0 + 3000);
    }
    let mut wl = stored_gang(&[&b, &a]);
    wl.status = ix.workload_status(&gkey()).cloned();
    ix.apply_workload(wl, T0 + 4000);
    ix.take_plans();
    ix.apply_job(gang_job("again", "ft", "2", 1, 1), T0 + 5000);
    let e = &ix.errors()[&(Kind::JOB, format!("{NS}/again"))];
    assert_eq!(e.reason, "GangConflict");
    assert!(e.message.contains("already ran"), "{}", e.message);
}

#[test]
fn a_member_scaled_up_while_admitted_evicts_the_whole_gang() {
    let mut ix = ready_index();
    ix.apply_cluster_queue(cq("cluster-gpu", 16));
    let (a, b) = whole_gang(&mut ix);
    assert_eq!(purposes(&ix.cycle(T0 + 2000).0), ["admit"]);
    let mut wl = stored_gang(&[&b, &a]);
    wl.status = ix.workload_status(&gkey()).cloned();
    ix.apply_workload(wl, T0 + 2000);
    let running = |j: &Job, parallelism: i32| {
        with(j, |v| {
            v["spec"]["suspend"] = json!(false);
            v["spec"]["parallelism"] = json!(parallelism);
        })
    };
    ix.apply_job(running(&b, 4), T0 + 3000);
    ix.apply_job(running(&a, 2), T0 + 3000);
    ix.take_plans();
    // workers: 2 pods → 6 (2 GPUs each).
    ix.apply_job(running(&a, 6), T0 + 4000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["evict"]);
    let (_, reason, message) = condition(status_step(&plans[0]), cond::EVICTED);
    assert_eq!(reason, "WorkloadShapeChanged");
    assert!(message.contains("Job workers of the gang"), "{message}");
    assert!(message.contains("pod set workers runs 6 pods, 2 admitted"), "{message}");
    let suspended: Vec<&str> = plans[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::PatchJob { job, .. } => Some(job.name()),
            _ => None,
        })
        .collect();
    assert_eq!(suspended, ["launcher", "workers"], "every Job of the gang is suspended");
    // Scaling a member down keeps the gang's admission.
    let mut ix2 = ready_index();
    let (a, b) = whole_gang(&mut ix2);
    ix2.cycle(T0 + 2000);
    ix2.apply_job(running(&b, 4), T0 + 3000);
    ix2.apply_job(running(&a, 1), T0 + 3000);
    assert!(!purposes(&ix2.take_plans()).contains(&"evict"));
    assert_eq!(ix2.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Admitted));
}

#[test]
fn a_member_changed_while_the_gang_waits_gets_the_workload_made_again() {
    let mut ix = ready_index();
    ix.apply_cluster_queue(cq("cluster-gpu", 6));
    let (a, _b) = whole_gang(&mut ix);
    ix.cycle(T0 + 2000);
    ix.take_plans();
    assert_eq!(ix.engine().workload_state("wl-uid-ft"), Some(WorkloadState::Pending));
    ix.apply_job(with(&a, |v| v["spec"]["parallelism"] = json!(1)), T0 + 3000);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["reshape"]);
    assert!(plans[0].steps.iter().any(|s| matches!(s, Step::DeleteWorkload { .. })));
}
