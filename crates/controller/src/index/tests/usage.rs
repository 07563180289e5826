//! Usage over time in the index: charged from admission, flushed into
//! queue status, restored by a restarted controller without loss or
//! double counting, budgets governing the queue with Events.

use super::*;
use sluice_api::v1alpha1::{BudgetAction as ApiAction, BudgetStep};
use sluice_scheduler::BudgetAction;
use sluice_scheduler::usage::{Account, HOUR};

fn cq_account() -> Account {
    Account::ClusterQueue("cluster-gpu".into())
}

fn gpu_hours(ix: &Index, account: &Account) -> f64 {
    let status = ix.usage_status(account).expect("flushed");
    status
        .resources
        .iter()
        .filter(|r| r.resource == "nvidia.com/gpu")
        .map(|r| r.total.parse::<f64>().unwrap())
        .sum()
}

/// Admits a 4-GPU Job at T0.
fn admitted_index() -> (Index, Job) {
    let mut ix = ready_index();
    let j = mk_job("train", "team-a", 2, 2);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    (ix, j)
}

#[test]
fn usage_is_charged_from_admission_and_flushed_for_the_cluster_queue_and_the_local_queue() {
    let (mut ix, _) = admitted_index();
    assert!(ix.flush_usage(T0 + HOUR));
    assert_eq!(gpu_hours(&ix, &cq_account()), 4.0);
    assert_eq!(gpu_hours(&ix, &Account::LocalQueue(format!("{NS}/team-a").into())), 4.0);
    assert!(!ix.flush_usage(T0 + HOUR + 1000), "not again before the flush interval");
    let s = ix.usage_status(&cq_account()).unwrap();
    assert_eq!(s.flushed_at.0.as_millisecond(), T0 + HOUR);
    assert_eq!(s.resources[0].hourly.len(), 1, "one hour bucket: {s:?}");
}

#[test]
fn a_restarted_controller_counts_on_from_the_flush_without_losing_or_double_counting() {
    let (mut ix, j) = admitted_index();
    ix.flush_usage(T0 + HOUR);
    let cq_status = ix.usage_status(&cq_account()).unwrap();
    let wl_status = ix.workload_status(&wkey("train")).cloned();

    // Second life, three hours later: the queue with its status.usage,
    // then the admitted Workload.
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    let mut queue = cq("cluster-gpu", 8);
    queue.status = Some(sluice_api::v1alpha1::ClusterQueueStatus {
        usage: Some(Box::new(cq_status)),
        ..Default::default()
    });
    ix.apply_cluster_queue(queue);
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = wl_status;
    ix.apply_workload(wl, T0 + 3 * HOUR);
    let mut running = j.clone();
    running.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_job(running, T0 + 3 * HOUR);
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix.cycle(T0 + 3 * HOUR);
    ix.flush_usage(T0 + 4 * HOUR);
    assert_eq!(
        gpu_hours(&ix, &cq_account()),
        16.0,
        "4 GPUs for 4 hours, the first from the record"
    );
}

#[test]
fn a_budget_warns_then_stops_the_queue_with_events_and_conditions_while_admitted_work_runs() {
    let (mut ix, _) = admitted_index();
    let mut queue = cq("cluster-gpu", 8);
    queue.spec.budget = Some(Box::new(sluice_api::v1alpha1::Budget {
        hours: k8s_openapi::apimachinery::pkg::api::resource::Quantity("8".into()),
        period: sluice_api::v1alpha1::BudgetPeriod::Day,
        actions: vec![
            BudgetStep {
                at_percent: 50,
                action: ApiAction::Warn,
            },
            BudgetStep {
                at_percent: 100,
                action: ApiAction::Stop,
            },
        ],
        ..Default::default()
    }));
    ix.apply_cluster_queue(queue);
    let events = |plans: &[Plan]| -> Vec<String> {
        plans
            .iter()
            .flat_map(|p| &p.steps)
            .filter_map(|s| match s {
                Step::Event(e) if e.regarding.kind.as_deref() == Some("ClusterQueue") => Some(e.reason.clone()),
                _ => None,
            })
            .collect()
    };
    // T0 is 08:00 UTC: the day's budget counts from the admission.
    let (plans, wake) = ix.cycle(T0 + HOUR + 1);
    assert_eq!(events(&plans), ["BudgetWarn"], "4 of 8 GPU-hours");
    assert!(
        wake.is_some_and(|w| w <= T0 + HOUR + 1 + 2_000),
        "budgets are looked at again soon"
    );
    assert_eq!(ix.budget_action("cluster-gpu"), Some(Some(BudgetAction::Warn)));
    let (plans, _) = ix.cycle(T0 + 2 * HOUR + 1);
    assert_eq!(events(&plans), ["BudgetStop"]);
    ix.flush_usage(T0 + 2 * HOUR + 1);
    let b = ix.budget_status("cluster-gpu").unwrap();
    assert_eq!((b.spent.as_str(), b.limit.as_str(), b.percent), ("8.000001", "8", 100));
    assert_eq!(b.action, Some(ApiAction::Stop));
    // A new Job waits with the arithmetic; the admitted one runs on.
    let j2 = mk_job("next", "team-a", 1, 1);
    ix.apply_job(j2.clone(), T0 + 2 * HOUR + 2);
    ix.apply_workload(stored_workload(&j2, 0, 10), T0 + 2 * HOUR + 2);
    let (plans, _) = ix.cycle(T0 + 2 * HOUR + 3);
    assert!(!purposes(&plans).contains(&"admit"));
    assert_eq!(
        ix.engine().workload_state("wl-uid-train"),
        Some(WorkloadState::Admitted)
    );
    let why = sluice_convert::text::explanation(ix.engine().explanation("wl-uid-next").unwrap());
    assert!(
        why.starts_with("the ClusterQueue's budget stops new admissions: it spent 8"),
        "{why}"
    );
}

#[test]
fn a_queue_that_used_nothing_since_the_last_flush_keeps_its_record_and_is_not_written_again() {
    let (mut ix, _) = admitted_index();
    ix.flush_usage(T0 + HOUR);
    let running = ix.usage_status(&cq_account()).unwrap();
    // The Job finishes: its usage up to then is in the next flush.
    ix.engine.finish("wl-uid-train").unwrap();
    ix.cycle(T0 + 2 * HOUR);
    assert!(ix.flush_usage(T0 + 3 * HOUR));
    let finished = ix.usage_status(&cq_account()).unwrap();
    assert_ne!(finished, running);
    assert_eq!(gpu_hours(&ix, &cq_account()), 8.0);
    // Nothing held since: the same record, flushedAt and all.
    assert!(ix.flush_usage(T0 + 5 * HOUR));
    assert_eq!(ix.usage_status(&cq_account()).unwrap(), finished);
}
