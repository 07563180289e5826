//! Cohort objects in the index: fed to the engine, invalid or cyclic ones
//! recorded with the last good version kept, refused ones tried again when
//! the tree changes.

use super::*;
use crate::testing::{borrowing_cq, cohort};

/// Flavor a100, ClusterQueues a and b (no GPUs of their own) in cohort
/// `pool`, LocalQueues qa and qb, everything listed; no Cohort object.
fn pool_index() -> Index {
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(borrowing_cq("a", "pool"));
    ix.apply_cluster_queue(borrowing_cq("b", "pool"));
    ix.apply_local_queue(lq("qa", "a"));
    ix.apply_local_queue(lq("qb", "b"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix
}

/// Queues Job `name` (`pods` pods of `gpus` GPUs) in LocalQueue `queue`
/// `at` seconds after T0, runs a cycle then; the purposes of its plans.
fn submit(ix: &mut Index, name: &str, queue: &str, pods: i32, gpus: u32, at: i64) -> Vec<&'static str> {
    let j = mk_job(name, queue, pods, gpus);
    ix.apply_job(j.clone(), T0 + at * 1000);
    ix.apply_workload(stored_workload(&j, 0, at), T0 + at * 1000);
    ix.take_plans();
    purposes(&ix.cycle(T0 + at * 1000).0)
}

fn state(ix: &Index, job: &str) -> Option<WorkloadState> {
    ix.engine().workload_state(&format!("wl-uid-{job}"))
}

fn warning(plans: &[Plan]) -> (String, String, String) {
    assert_eq!(purposes(plans), ["report"]);
    match &plans[0].steps[0] {
        Step::Event(e) => (
            format!(
                "{}/{}",
                e.regarding.api_version.as_deref().unwrap_or_default(),
                e.regarding.kind.as_deref().unwrap_or_default()
            ),
            e.reason.clone(),
            e.note.clone(),
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cohorts_own_quota_is_lent_to_its_queues_and_applying_it_again_changes_nothing() {
    let mut ix = pool_index();
    assert_eq!(
        submit(&mut ix, "first", "qa", 1, 2, 0),
        ["pending"],
        "no quota anywhere yet"
    );
    let mut pool = cohort("pool", None, 4);
    ix.apply_cohort(pool.clone());
    assert!(ix.take_plans().is_empty());
    assert_eq!(purposes(&ix.cycle(T0 + 1000).0), ["admit"]);
    assert_eq!(state(&ix, "first"), Some(WorkloadState::Admitted));
    // a borrows 2 of the 4 GPUs its cohort can lend: share 500.
    let share = ix.engine().cluster_queue_share("a").unwrap();
    assert_eq!(
        (share.weighted_share, share.dominant_resource.as_deref()),
        (500, Some("nvidia.com/gpu"))
    );
    assert_eq!(ix.cohort_names(), BTreeSet::from(["pool".to_string()]));
    // The same object again, with a status (our own write): nothing changes.
    pool.status = Some(serde_json::from_value(json!({"fairSharing": {"weightedShare": 0}})).unwrap());
    ix.apply_cohort(pool);
    assert!(ix.take_plans().is_empty());
    assert!(ix.errors().is_empty());
    assert_eq!(ix.engine().cluster_queue_share("a").unwrap().weighted_share, 500);
    assert_eq!(
        ix.observed_queue_status(&crate::plan::QueueRef::Cohort("pool".into())),
        Some(json!({"fairSharing": {"weightedShare": 0}}))
    );
    // Gone: the quota goes with it.
    ix.delete_cohort("pool");
    assert_eq!(submit(&mut ix, "second", "qa", 1, 2, 2), ["pending"]);
}

#[test]
fn an_invalid_cohort_is_reported_once_and_its_last_good_version_stays_in_effect() {
    let mut ix = pool_index();
    ix.apply_cohort(cohort("pool", None, 4));
    assert_eq!(submit(&mut ix, "big", "qa", 2, 2, 0), ["admit"]);
    // 8 GPUs, but a borrowingLimit without a parent: refused by validate().
    let mut bad = cohort("pool", None, 8);
    bad.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
    ix.apply_cohort(bad.clone());
    assert_eq!(ix.errors()[&(Kind::Cohort, "pool".to_string())].reason, "InvalidCohort");
    let (regarding, reason, note) = warning(&ix.take_plans());
    assert_eq!(
        (regarding.as_str(), reason.as_str()),
        ("sluice.dev/v1alpha1/Cohort", "InvalidCohort")
    );
    assert!(note.contains("borrowingLimit"), "{note}");
    let (reason, message) = ix.cohort_problem("pool").unwrap();
    assert_eq!(reason, "InvalidCohort");
    assert!(
        message.starts_with("Ignored by the controller (its previous version stays in effect): "),
        "{message}"
    );
    // The 4 GPUs of the good version are in effect, not 8.
    assert_eq!(submit(&mut ix, "more", "qa", 1, 2, 1), ["pending"]);
    // Seen again (a resync): not reported twice.
    ix.apply_cohort(bad);
    assert!(ix.take_plans().is_empty());
    // Fixed, with 8 GPUs: taken, the error is gone, the waiting Job admitted.
    ix.apply_cohort(cohort("pool", None, 8));
    assert!(ix.cohort_problem("pool").is_none());
    assert_eq!(purposes(&ix.cycle(T0 + 2000).0), ["admit"]);
    assert_eq!(state(&ix, "more"), Some(WorkloadState::Admitted));
}

#[test]
fn a_cohort_whose_parent_chain_is_a_cycle_is_refused_until_the_chain_breaks() {
    let mut ix = pool_index();
    // pool → top (implicit, no quota), then top (4 GPUs) → pool: a cycle.
    ix.apply_cohort(cohort("pool", Some("top"), 0));
    ix.apply_cohort(cohort("top", Some("pool"), 4));
    let e = &ix.errors()[&(Kind::Cohort, "top".to_string())];
    assert_eq!(e.reason, "InvalidCohort");
    assert_eq!(
        e.message,
        "cohort top: parent chain top -> pool -> top leads back to itself"
    );
    let (_, reason, _) = warning(&ix.take_plans());
    assert_eq!(reason, "InvalidCohort");
    let (_, message) = ix.cohort_problem("top").unwrap();
    assert_eq!(
        message,
        "Ignored by the controller: cohort top: parent chain top -> pool -> top leads back to itself"
    );
    // Refused: top's 4 GPUs are not in the tree.
    assert_eq!(submit(&mut ix, "waits", "qa", 1, 2, 0), ["pending"]);
    ix.apply_cohort(cohort("top", Some("pool"), 4));
    assert!(ix.take_plans().is_empty(), "not reported twice");
    // pool drops its parent: top is tried again, taken, and lends its GPUs.
    ix.apply_cohort(cohort("pool", None, 0));
    assert!(ix.errors().is_empty(), "{:?}", ix.errors());
    assert_eq!(purposes(&ix.cycle(T0 + 1000).0), ["admit"]);
    assert_eq!(state(&ix, "waits"), Some(WorkloadState::Admitted));
    assert_eq!(
        ix.cohort_names(),
        BTreeSet::from(["pool".to_string(), "top".to_string()])
    );
}

#[test]
fn a_cluster_queue_set_back_to_the_version_the_engine_holds_is_valid_again() {
    let mut ix = ready_index();
    let mut bad = cq("cluster-gpu", 8);
    bad.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()));
    ix.apply_cluster_queue(bad);
    assert_eq!(
        ix.cluster_queue_problem("cluster-gpu").unwrap().0,
        "InvalidClusterQueue"
    );
    ix.apply_cluster_queue(cq("cluster-gpu", 8));
    assert_eq!(ix.cluster_queue_problem("cluster-gpu"), None);
    assert!(ix.errors().is_empty());
}
