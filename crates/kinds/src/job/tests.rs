use super::*;
use crate::testing::{fixture, job_fixture};
use sluice_api::v1alpha1::ResourceFlavorSpec;

fn flavor(name: &str, labels: &[(&str, &str)], tolerations: Value) -> ResourceFlavor {
    ResourceFlavor {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ResourceFlavorSpec {
            node_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            tolerations: serde_json::from_value(tolerations).unwrap(),
            ..Default::default()
        },
    }
}

/// Applies a merge patch the way the API server does, and reads the Job back.
fn patched(job: &Job, patch: &Value) -> Job {
    let mut v = serde_json::to_value(job).unwrap();
    json_patch::merge(&mut v, patch);
    serde_json::from_value(v).unwrap()
}

fn template_spec(job: &Job) -> Value {
    serde_json::to_value(job.spec.as_ref().unwrap().template.spec.as_ref().unwrap()).unwrap()
}

fn no_class(_: &str) -> Option<i32> {
    None
}

#[test]
fn recorded_suspended_job_becomes_one_owned_workload_of_parallelism_pods() {
    let job = job_fixture("job-suspended-create-response.json");
    let wl = workload_for_job(&job, false, no_class, no_class).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("job-train-research"));
    assert_eq!(wl.metadata.namespace.as_deref(), Some("research"));
    let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        serde_json::to_value(owner).unwrap(),
        json!({"apiVersion": "batch/v1", "kind": "Job", "name": "train-research",
               "uid": "b21e282e-4c15-4a08-a4c6-a30c1f7b7773", "controller": true, "blockOwnerDeletion": true})
    );
    assert_eq!(
        owning_job(&wl),
        Some(("train-research", "b21e282e-4c15-4a08-a4c6-a30c1f7b7773"))
    );
    assert_eq!(wl.spec.queue_name, "team-a");
    assert_eq!(wl.spec.priority, Some(0));
    assert_eq!(wl.spec.pod_sets.len(), 1);
    let ps = &wl.spec.pod_sets[0];
    assert_eq!((ps.name.as_str(), ps.count), ("main", 4));
    assert_eq!(&ps.template, &job.spec.as_ref().unwrap().template);
    assert_eq!(ps.pod_requests("spec.podSets[0]").unwrap()["nvidia.com/gpu"], 2000);
}

#[test]
fn init_containers_and_overhead_count_as_kubernetes_counts_them() {
    let mut job = job_fixture("job-suspended-create-response.json");
    let pod = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod.containers[0].resources.as_mut().unwrap().requests = Some(BTreeMap::from([(
        "cpu".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
    )]));
    pod.init_containers = Some(vec![
        serde_json::from_value(json!({
            "name": "prep", "image": "x", "resources": {"requests": {"cpu": "3"}}
        }))
        .unwrap(),
    ]);
    pod.overhead = Some(BTreeMap::from([(
        "cpu".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("250m".into()),
    )]));
    let wl = workload_for_job(&job, false, no_class, no_class).unwrap();
    // max(containers 2, init 3) + overhead 0.25
    assert_eq!(wl.spec.pod_sets[0].pod_requests("p").unwrap()["cpu"], 3250);
}

#[test]
fn jobs_that_cannot_be_queued_say_why() {
    let job = job_fixture("job-suspended-create-response.json");
    let mut unlabelled = job.clone();
    unlabelled.metadata.labels = None;
    assert_eq!(
        workload_for_job(&unlabelled, false, no_class, no_class).unwrap_err(),
        JobError::NotQueued
    );
    let mut kueue = unlabelled.clone();
    kueue.metadata.labels = Some(BTreeMap::from([(
        labels::KUEUE_QUEUE_NAME.to_string(),
        "kq".to_string(),
    )]));
    assert_eq!(
        workload_for_job(&kueue, false, no_class, no_class).unwrap_err(),
        JobError::NotQueued
    );
    assert_eq!(
        workload_for_job(&kueue, true, no_class, no_class)
            .unwrap()
            .spec
            .queue_name,
        "kq"
    );
    let mut zero = job.clone();
    zero.spec.as_mut().unwrap().parallelism = Some(0);
    assert_eq!(
        workload_for_job(&zero, false, no_class, no_class).unwrap_err(),
        JobError::Parallelism(0)
    );
    let mut no_uid = job;
    no_uid.metadata.uid = None;
    assert_eq!(
        workload_for_job(&no_uid, false, no_class, no_class)
            .unwrap_err()
            .to_string(),
        "metadata.uid: must be set"
    );
}

#[test]
fn the_min_parallelism_annotation_sets_the_pod_sets_min_count() {
    // 4 pods (parallelism 4, completions 4).
    let base = job_fixture("job-suspended-create-response.json");
    let with = |value: &str, completions: i32| {
        let mut job = base.clone();
        job.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::MIN_PARALLELISM.to_string(), value.to_string());
        job.spec.as_mut().unwrap().completions = Some(completions);
        workload_for_job(&job, false, no_class, no_class)
            .map(|wl| (wl.spec.pod_sets[0].count, wl.spec.pod_sets[0].min_count))
    };
    let plain = workload_for_job(&base, false, no_class, no_class).unwrap();
    assert_eq!(plain.spec.pod_sets[0].min_count, None);
    assert_eq!(with("2", 4), Ok((4, Some(2))));
    assert_eq!(with("4", 4), Ok((4, Some(4))));
    // Three completions make three pods: the minimum is at most that.
    assert_eq!(with("4", 3), Ok((3, Some(3))));
    for bad in ["0", "5", "half"] {
        let err = with(bad, 4).unwrap_err();
        assert_eq!(
            err,
            JobError::Invalid {
                field: "metadata.annotations[sluice.dev/min-parallelism]".into(),
                problem: format!(
                    "annotation sluice.dev/min-parallelism: expected an integer from 1 to spec.parallelism (4), got {bad:?}"
                ),
            }
        );
        assert_eq!(err.metric_label(), "job_invalid");
    }
}

#[test]
fn priority_label_then_template_class_then_zero() {
    let base = job_fixture("job-suspended-create-response.json");
    let wpc = |n: &str| match n {
        "urgent" => Some(1000),
        _ => None,
    };
    let pc = |n: &str| match n {
        "high" => Some(50),
        _ => None,
    };
    // (label, template class, expected priority, expected class name)
    type Case<'a> = (Option<&'a str>, Option<&'a str>, i32, Option<&'a str>);
    let cases: &[Case] = &[
        (None, None, 0, None),
        (Some("urgent"), None, 1000, Some("urgent")),
        (Some("urgent"), Some("high"), 1000, Some("urgent")),
        (None, Some("high"), 50, None),
        (Some("missing"), Some("high"), 50, None),
        (Some("missing"), None, 0, None),
        (None, Some("missing"), 0, None),
    ];
    for &(label, class, want, want_class) in cases {
        let mut job = base.clone();
        if let Some(l) = label {
            job.metadata
                .labels
                .get_or_insert_default()
                .insert(labels::PRIORITY_CLASS.into(), l.into());
        }
        job.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .priority_class_name = class.map(String::from);
        assert_eq!(
            resolve_priority(&job, wpc, pc),
            (want, want_class.map(String::from)),
            "label {label:?} class {class:?}"
        );
        let wl = workload_for_job(&job, false, wpc, pc).unwrap();
        assert_eq!(wl.spec.priority, Some(want));
        assert_eq!(wl.spec.priority_class_name.as_deref(), want_class);
    }
}

#[test]
fn injection_adds_flavor_directives_and_restoration_is_exact() {
    // The never-started suspended Job whose template the server let us patch.
    let job = job_fixture("job-suspended-create-response.json");
    let original = template_spec(&job);
    let a100 = flavor(
        "a100",
        &[("nvidia.com/gpu.product", "A100"), ("pool", "gpu")],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]),
    );
    let patch = injection_patch(&job, &[&a100], None).unwrap();
    assert_eq!(patch["spec"]["suspend"], json!(false));
    let admitted = patched(&job, &patch);
    assert!(!is_suspended(&admitted));
    let pod = admitted.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(
        pod.node_selector.as_ref().unwrap(),
        &BTreeMap::from([
            ("nvidia.com/gpu.product".to_string(), "A100".to_string()),
            ("pool".to_string(), "gpu".to_string())
        ])
    );
    // The existing GPU toleration is not duplicated; the pool one is added.
    let tols = pod.tolerations.as_ref().unwrap();
    assert_eq!(tols.len(), 2);
    assert_eq!(tols[1].key.as_deref(), Some("pool"));
    // Injecting again (a retry after a crash) changes nothing.
    assert_eq!(
        patched(&admitted, &injection_patch(&admitted, &[&a100], None).unwrap()),
        admitted
    );
    // The Workload of the injected Job asks for what the user wrote.
    let wl = workload_for_job(&admitted, false, no_class, no_class).unwrap();
    assert_eq!(
        serde_json::to_value(wl.spec.pod_sets[0].template.spec.as_ref().unwrap()).unwrap(),
        original
    );

    let suspended = patched(&admitted, &suspend_patch());
    let restore = restoration_patch(&suspended).unwrap().expect("something to restore");
    let restored = patched(&suspended, &restore);
    assert_eq!(template_spec(&restored), original, "exact restoration");
    assert!(
        !restored
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(ORIGINAL_SCHEDULING),
        "annotation dropped"
    );
    assert_eq!(restoration_patch(&restored).unwrap(), None, "nothing left to restore");
}

#[test]
fn a_users_own_node_selector_survives_injection_and_restoration() {
    let mut job = job_fixture("job-suspended-create-response.json");
    let pod = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod.node_selector = Some(BTreeMap::from([
        ("zone".to_string(), "a".to_string()),
        ("pool".to_string(), "mine".to_string()),
    ]));
    pod.tolerations = None;
    let original = template_spec(&job);
    let flavor_b = flavor("b", &[("pool", "gpu"), ("gpu", "h100")], json!([]));
    let admitted = patched(&job, &injection_patch(&job, &[&flavor_b], None).unwrap());
    let sel = admitted
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone()
        .unwrap();
    assert_eq!(sel.get("zone").map(String::as_str), Some("a"));
    assert_eq!(
        sel.get("pool").map(String::as_str),
        Some("gpu"),
        "the flavor's label wins"
    );
    assert_eq!(sel.get("gpu").map(String::as_str), Some("h100"));
    // Restored after a "restart": only the Job (with its annotation) is known.
    let reread: Job = serde_json::from_value(serde_json::to_value(&admitted).unwrap()).unwrap();
    let restored = patched(&reread, &restoration_patch(&reread).unwrap().unwrap());
    assert_eq!(template_spec(&restored), original);
}

#[test]
fn a_corrupt_annotation_is_an_error_not_a_guess() {
    let mut job = job_fixture("job-suspended-create-response.json");
    job.metadata
        .annotations
        .get_or_insert_default()
        .insert(ORIGINAL_SCHEDULING.into(), "{not json".into());
    assert!(matches!(restoration_patch(&job), Err(JobError::BadAnnotation(_))));
    assert!(matches!(
        injection_patch(&job, &[], None),
        Err(JobError::BadAnnotation(_))
    ));
}

#[test]
fn recorded_job_states_read_correctly() {
    let cases = [
        ("job-suspended-create-response.json", true, false, None),
        ("job-unsuspended-pods-created.json", false, true, None),
        ("job-running-pods-ready.json", false, true, None),
        ("job-complete.json", false, true, Some(true)),
        ("job-failed-backofflimitexceeded.json", false, true, Some(false)),
        // Re-suspended after running: startTime kept, so the template is immutable.
        ("job-resuspended-after-running.json", true, true, None),
    ];
    for (file, suspended, started, done) in cases {
        let job = job_fixture(file);
        assert_eq!(is_suspended(&job), suspended, "{file}");
        assert_eq!(has_started(&job), started, "{file}");
        assert_eq!(finished(&job), done, "{file}");
    }
    assert_eq!(live_pods(&job_fixture("job-running-pods-ready.json")), 4);
    assert_eq!(live_pods(&job_fixture("job-resuspended-after-running.json")), 0);
    // Clearing startTime is what makes the template patchable again.
    let resuspended = job_fixture("job-resuspended-after-running.json");
    assert!(!has_started(&patched(&resuspended, &clear_start_time_patch())));
    let err = fixture("job-resuspended-template-nodeselector-patch-error-422.json");
    assert_eq!(err["code"], 422);
}

/// The recorded Job (parallelism 4, completions 4) with
/// `sluice.dev/min-parallelism: "2"`, and `completions` as given.
fn partial_job(completions: Option<i32>) -> Job {
    let mut job = job_fixture("job-suspended-create-response.json");
    job.metadata
        .annotations
        .get_or_insert_default()
        .insert(labels::MIN_PARALLELISM.into(), "2".into());
    job.spec.as_mut().unwrap().completions = completions;
    job
}

fn parallelism(job: &Job) -> (Option<i32>, Option<i32>, Option<&str>) {
    let spec = job.spec.as_ref().unwrap();
    let recorded = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ORIGINAL_PARALLELISM))
        .map(String::as_str);
    (spec.parallelism, spec.completions, recorded)
}

#[test]
fn a_partial_admission_lowers_parallelism_and_restoration_puts_it_back() {
    let job = partial_job(Some(4));
    let a100 = flavor("a100", &[("gpu", "a100")], json!([]));
    let patch = injection_patch(&job, &[&a100], Some(2)).unwrap();
    assert_eq!(patch["spec"]["parallelism"], json!(2));
    assert_eq!(patch["metadata"]["annotations"][ORIGINAL_PARALLELISM], json!("4"));
    let admitted = patched(&job, &patch);
    assert_eq!(
        parallelism(&admitted),
        (Some(2), Some(4), Some("4")),
        "completions untouched"
    );
    // Injecting again (a retry, a restart) changes nothing.
    let again = injection_patch(&admitted, &[&a100], Some(2)).unwrap();
    assert!(again["spec"].get("parallelism").is_none(), "{again}");
    assert_eq!(patched(&admitted, &again), admitted);
    // Its Workload, made again from the running Job, asks for all 4 pods.
    let wl = workload_for_job(&admitted, false, no_class, no_class).unwrap();
    assert_eq!((wl.spec.pod_sets[0].count, wl.spec.pod_sets[0].min_count), (4, Some(2)));
    assert_eq!(original_parallelism(&admitted), Ok(4));
    // Evicted: parallelism and template back, both annotations gone.
    let suspended = patched(&admitted, &suspend_patch());
    let restore = restoration_patch(&suspended).unwrap().expect("something to restore");
    let restored = patched(&suspended, &restore);
    assert_eq!(parallelism(&restored), (Some(4), Some(4), None));
    assert_eq!(template_spec(&restored), template_spec(&job));
    assert_eq!(restoration_patch(&restored).unwrap(), None, "nothing left to restore");
    // The view a restarted controller keeps computes the same patches.
    let view = JobView::of(&suspended, false);
    assert_eq!((view.parallelism, view.pods), (Some(2), 2));
    assert_eq!(restoration_patch(&view.patch_base()).unwrap(), Some(restore));
    let view = JobView::of(&job, false);
    assert_eq!(
        injection_patch(&view.patch_base(), &[&a100], Some(2)).unwrap()["spec"]["parallelism"],
        json!(2)
    );
}

#[test]
fn parallelism_changes_only_below_the_pods_the_job_asks_for() {
    let a100 = flavor("a100", &[("gpu", "a100")], json!([]));
    // (completions, pods admitted, parallelism patched, original recorded)
    let cases = [
        (Some(4), None, None, None),
        (Some(4), Some(4), None, None),
        (Some(4), Some(3), Some(3), Some("4")),
        // Three completions: three pods at most; all three is whole.
        (Some(3), Some(3), None, None),
        (Some(3), Some(2), Some(2), Some("4")),
        // No completions: parallelism pods.
        (None, Some(2), Some(2), Some("4")),
        // More completions than parallelism: completions stay 8.
        (Some(8), Some(2), Some(2), Some("4")),
    ];
    for (completions, admitted, want, recorded) in cases {
        let job = partial_job(completions);
        let patch = injection_patch(&job, &[&a100], admitted).unwrap();
        assert_eq!(
            patch["spec"].get("parallelism"),
            want.map(|p| json!(p)).as_ref(),
            "{completions:?} {admitted:?}"
        );
        assert_eq!(
            patch["metadata"]["annotations"]
                .get(ORIGINAL_PARALLELISM)
                .and_then(Value::as_str),
            recorded,
            "{completions:?} {admitted:?}"
        );
        assert_eq!(parallelism(&patched(&job, &patch)).1, completions);
    }
}

#[test]
fn a_job_left_lowered_and_admitted_whole_gets_its_parallelism_back() {
    // Admitted with 2, suspended, and its restoration never written.
    let a100 = flavor("a100", &[("gpu", "a100")], json!([]));
    let job = partial_job(Some(4));
    let lowered = patched(&job, &injection_patch(&job, &[&a100], Some(2)).unwrap());
    let lowered = patched(&lowered, &suspend_patch());
    // Admitted again, whole (or with 3: lowered from the original, not from 2).
    let whole = patched(&lowered, &injection_patch(&lowered, &[&a100], Some(4)).unwrap());
    assert_eq!(parallelism(&whole), (Some(4), Some(4), None));
    let three = patched(&lowered, &injection_patch(&lowered, &[&a100], Some(3)).unwrap());
    assert_eq!(parallelism(&three), (Some(3), Some(4), Some("4")));
}

#[test]
fn a_corrupt_original_parallelism_is_an_error_not_a_guess() {
    let mut job = partial_job(Some(4));
    job.metadata
        .annotations
        .get_or_insert_default()
        .insert(ORIGINAL_PARALLELISM.into(), "many".into());
    let err = restoration_patch(&job).unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata.annotations[sluice.dev/original-parallelism]: expected the Job's original spec.parallelism (a positive integer), got \"many\""
    );
    assert_eq!(injection_patch(&job, &[], Some(2)).unwrap_err(), err);
    assert_eq!(workload_for_job(&job, false, no_class, no_class).unwrap_err(), err);
}

#[test]
fn the_workload_records_the_run_time_its_job_declares_for_backfill() {
    let declared = |job: &Job| {
        let wl = crate::Full::Job(job).workload(false, no_class, no_class).unwrap();
        let a = wl.metadata.annotations.unwrap_or_default();
        a.get(labels::EXPECTED_RUNTIME).cloned()
    };
    let mut job = job_fixture("job-suspended-create-response.json");
    job.spec.as_mut().unwrap().active_deadline_seconds = None;
    assert_eq!(declared(&job), None);
    // activeDeadlineSeconds, which Kubernetes enforces.
    job.spec.as_mut().unwrap().active_deadline_seconds = Some(5400);
    assert_eq!(declared(&job).as_deref(), Some("5400s"));
    // The annotation comes first, rounded up to whole seconds.
    job.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(labels::EXPECTED_RUNTIME.into(), "1500ms".into());
    assert_eq!(declared(&job).as_deref(), Some("2s"));
    // A malformed one declares nothing (the controller warns on the Job).
    job.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(labels::EXPECTED_RUNTIME.into(), "soon".into());
    assert_eq!(declared(&job), None);
}
