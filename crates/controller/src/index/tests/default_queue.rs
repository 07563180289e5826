//! A namespace that queues every object: objects without a queue label
//! are queued in its LocalQueue `default` by the controller itself.

use super::*;

const OPT_IN: (&str, &str) = ("sluice.dev/default-queue", "enabled");

/// `ready_index()` plus LocalQueue `default`, and the namespace opted in
/// (or not).
fn index(opted_in: bool) -> Index {
    let mut ix = ready_index();
    ix.apply_local_queue(lq("default", "cluster-gpu"));
    let labels = if opted_in {
        BTreeMap::from([(OPT_IN.0.to_string(), OPT_IN.1.to_string())])
    } else {
        BTreeMap::new()
    };
    ix.apply_namespace(NS, labels, T0);
    ix.take_plans();
    ix
}

/// A running Job without a queue label (its label taken off, or created
/// while the webhook was down).
fn unlabelled_running(name: &str) -> Job {
    let mut j = mk_job(name, "x", 1, 1);
    j.metadata.labels = None;
    j.spec.as_mut().unwrap().suspend = Some(false);
    j
}

#[test]
fn an_unlabelled_job_is_suspended_and_queued_in_default_with_an_event() {
    let mut ix = index(true);
    ix.apply_job(unlabelled_running("escape"), T0);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job", "create_workload"]);
    assert_eq!(job_patches(&plans[0]), [("job", &json!({"spec": {"suspend": true}}))]);
    let Step::ApplyWorkload(wl) = &plans[1].steps[0] else {
        panic!("{:?}", plans[1].steps[0])
    };
    assert_eq!(wl.spec.queue_name, "default");
    let Step::Event(e) = &plans[1].steps[1] else {
        panic!("{:?}", plans[1].steps[1])
    };
    assert_eq!(
        (e.reason.as_str(), e.regarding.kind.as_deref()),
        ("QueuedByNamespace", Some("Job"))
    );
    assert!(e.note.contains("namespace research queues every Job"), "{}", e.note);
}

#[test]
fn elsewhere_an_unlabelled_job_is_not_sluices() {
    let mut ix = index(false);
    ix.apply_job(unlabelled_running("free"), T0);
    assert!(ix.take_plans().is_empty());
}

#[test]
fn a_namespace_opting_in_queues_the_jobs_already_there() {
    let mut ix = index(false);
    ix.apply_job(unlabelled_running("early"), T0);
    ix.take_plans();
    ix.apply_namespace(
        NS,
        BTreeMap::from([(OPT_IN.0.to_string(), OPT_IN.1.to_string())]),
        T0 + 1,
    );
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["suspend_job"]);
    // Its Workload is made from the Job, read again.
    assert_eq!(ix.take_refetch(), [crate::plan::JobRef::job(NS, "early")]);
}

#[test]
fn a_labelled_job_keeps_its_own_queue() {
    let mut ix = index(true);
    let mut j = mk_job("mine", "team-a", 1, 1);
    j.spec.as_mut().unwrap().suspend = Some(false);
    ix.apply_job(j, T0);
    let plans = ix.take_plans();
    let Step::ApplyWorkload(wl) = &plans[1].steps[0] else {
        panic!()
    };
    assert_eq!(wl.spec.queue_name, "team-a");
    assert_eq!(plans[1].steps.len(), 1, "no QueuedByNamespace event");
}
