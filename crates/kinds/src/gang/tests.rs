use super::*;
use serde_json::json;

fn member_job(name: &str, uid: &str, gang: &str, size: &str, parallelism: i32, gpus: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": uid,
                     "labels": {"sluice.dev/queue": "team-a", "sluice.dev/gang": gang, "sluice.dev/gang-size": size}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": true,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}
    }))
    .unwrap()
}

fn labels(name: &str, size: Option<&str>) -> Labels {
    Labels {
        name: name.into(),
        size: size.map(String::from),
    }
}

#[test]
fn labels_are_read_and_the_size_must_be_a_positive_integer() {
    let j = member_job("w", "u1", "ft", "2", 4, "8");
    let l = Labels::of(&j.metadata).unwrap();
    assert_eq!(l, labels("ft", Some("2")));
    assert_eq!(l.size(), Ok(2));
    assert_eq!(
        labels("ft", None).size(),
        Err(GangError::MissingSize { gang: "ft".into() })
    );
    for bad in ["0", "-1", "two", ""] {
        let err = labels("ft", Some(bad)).size().unwrap_err();
        assert_eq!(err.reason(), "InvalidGangSize");
        assert!(err.to_string().contains("sluice.dev/gang-size"), "{err}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    assert_eq!(workload_name_of("w", Some(&l)), "gang-ft");
    assert_eq!(workload_name_of("w", None), "job-w");
}

#[test]
fn a_gang_is_whole_only_when_all_its_jobs_exist_and_agree() {
    let two = labels("ft", Some("2"));
    let three = labels("ft", Some("3"));
    let m = |job, labels, queue| Member { job, labels, queue };
    assert_eq!(
        assess("ft", &[m("a", &two, Some("q"))]),
        Assessment::Incomplete { have: 1, want: 2 }
    );
    assert_eq!(
        assess("ft", &[m("a", &two, Some("q")), m("b", &two, Some("q"))]),
        Assessment::Complete {
            size: 2,
            queue: "q".into()
        }
    );
    let Assessment::Conflict(err) = assess("ft", &[m("a", &two, Some("q")), m("b", &three, Some("q"))]) else {
        panic!("sizes conflict");
    };
    assert_eq!(err.reason(), "GangConflict");
    assert_eq!(
        err.to_string(),
        "gang \"ft\": its Jobs disagree on sluice.dev/gang-size: 2 (a); 3 (b)"
    );
    let Assessment::Conflict(err) = assess("ft", &[m("a", &two, Some("q")), m("b", &two, Some("r"))]) else {
        panic!("queues conflict");
    };
    assert_eq!(
        err.to_string(),
        "gang \"ft\": its Jobs are queued in different LocalQueues: q (a); r (b)"
    );
    // A member without a queue label conflicts with queued ones.
    let Assessment::Conflict(err) = assess("ft", &[m("a", &two, Some("q")), m("b", &two, None)]) else {
        panic!("a missing queue conflicts");
    };
    assert!(err.to_string().contains("no queue label (b)"), "{err}");
    let Assessment::Conflict(err) = assess(
        "ft",
        &[
            m("a", &two, Some("q")),
            m("b", &two, Some("q")),
            m("c", &two, Some("q")),
        ],
    ) else {
        panic!("too many");
    };
    assert_eq!(
        err,
        GangError::TooMany {
            gang: "ft".into(),
            have: 3,
            want: 2
        }
    );
    let Assessment::Conflict(err) = assess("ft", &[m("a", &labels("ft", Some("x")), Some("q"))]) else {
        panic!("bad size");
    };
    assert_eq!(err.reason(), "InvalidGangSize");
}

#[test]
fn a_gangs_workload_has_a_pod_set_per_job_and_every_job_as_owner() {
    let launcher = member_job("launcher", "u-l", "ft", "2", 1, "0");
    let mut workers = member_job("workers", "u-w", "ft", "2", 4, "8");
    workers
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("sluice.dev/priority-class".into(), "training".into());
    let wl = workload_for_gang(
        "ft",
        "team-a",
        &[&launcher, &workers],
        |n| (n == "training").then_some(1000),
        |_| None,
    )
    .unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("gang-ft"));
    assert_eq!(wl.metadata.namespace.as_deref(), Some("team-a"));
    let l = wl.metadata.labels.as_ref().unwrap();
    assert_eq!(l.get("sluice.dev/gang").map(String::as_str), Some("ft"));
    assert_eq!(l.get("sluice.dev/queue").map(String::as_str), Some("team-a"));
    assert_eq!(wl.spec.queue_name, "team-a");
    let sets: Vec<(&str, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
    assert_eq!(sets, [("launcher", 1), ("workers", 4)]);
    let owners = wl.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 2);
    for (o, (name, uid)) in owners.iter().zip([("launcher", "u-l"), ("workers", "u-w")]) {
        assert_eq!((o.kind.as_str(), o.name.as_str(), o.uid.as_str()), ("Job", name, uid));
        assert_eq!(o.controller, Some(false), "a gang has no controlling Job");
    }
    // The highest priority of its Jobs, and the class it came from.
    assert_eq!(wl.spec.priority, Some(1000));
    assert_eq!(wl.spec.priority_class_name.as_deref(), Some("training"));
    assert_eq!(
        members_of(&wl),
        Some(vec![
            ("launcher".to_string(), Some("u-l".to_string())),
            ("workers".to_string(), Some("u-w".to_string())),
        ])
    );
    // The garbage collector dropped the reference of a deleted member.
    let mut gc = wl.clone();
    gc.metadata.owner_references.as_mut().unwrap().remove(0);
    assert_eq!(members_of(&gc).unwrap()[0], ("launcher".to_string(), None));
    // A Job's own Workload is not a gang's.
    let own = crate::job::workload_for_job(&launcher, false, |_| None, |_| None).unwrap();
    assert_eq!(members_of(&own), None);
}

#[test]
fn a_bad_member_names_itself_and_its_field() {
    let ok = member_job("a", "u-a", "ft", "2", 1, "1");
    let bad = member_job("b", "u-b", "ft", "2", 0, "1");
    let err = workload_for_gang("ft", "q", &[&ok, &bad], |_| None, |_| None).unwrap_err();
    assert_eq!(err.reason(), "InvalidGangMember");
    assert_eq!(
        err.to_string(),
        "gang \"ft\": Job b: spec.parallelism: 0 must be at least 1 for a queued Job"
    );
}

/// Each member is a batch/v1 Job: its `sluice.dev/min-parallelism` is its
/// pod set's minCount, and a bad value names the member.
#[test]
fn a_members_min_parallelism_is_its_pod_sets_min_count() {
    let annotated = |value: &str| {
        let mut j = member_job("workers", "u-w", "ft", "2", 4, "1");
        j.metadata.annotations = Some(BTreeMap::from([(
            labels::MIN_PARALLELISM.to_string(),
            value.to_string(),
        )]));
        j
    };
    let launcher = member_job("launcher", "u-l", "ft", "2", 1, "1");
    let wl = workload_for_gang("ft", "q", &[&launcher, &annotated("3")], |_| None, |_| None).unwrap();
    let mins: Vec<_> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.min_count))
        .collect();
    assert_eq!(mins, [("launcher", None), ("workers", Some(3))]);
    let err = workload_for_gang("ft", "q", &[&launcher, &annotated("8")], |_| None, |_| None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gang \"ft\": Job workers: metadata.annotations[sluice.dev/min-parallelism]: annotation sluice.dev/min-parallelism: expected an integer from 1 to spec.parallelism (4), got \"8\""
    );
}

#[test]
fn the_waiting_message_counts_jobs() {
    assert_eq!(
        waiting_message("ft", 2, 3),
        "2 of 3 Jobs of gang ft exist; admission waits for all of them"
    );
}

/// A gang runs until its longest Job ends; one Job that declares nothing
/// leaves the gang undeclared (unbounded for backfill).
#[test]
fn a_gangs_declared_run_time_is_its_longest_jobs_and_none_if_one_declares_none() {
    let with = |name: &str, runtime: Option<&str>| {
        let mut j = member_job(name, &format!("u-{name}"), "ft", "2", 1, "1");
        if let Some(r) = runtime {
            j.metadata.annotations = Some(BTreeMap::from([(labels::EXPECTED_RUNTIME.to_string(), r.to_string())]));
        }
        j
    };
    let declared = |jobs: &[&Job]| {
        let wl = workload_for_gang("ft", "q", jobs, |_| None, |_| None).unwrap();
        wl.metadata
            .annotations
            .unwrap_or_default()
            .get(labels::EXPECTED_RUNTIME)
            .cloned()
    };
    let (a, b) = (with("launcher", Some("30m")), with("workers", Some("2h")));
    assert_eq!(declared(&[&a, &b]).as_deref(), Some("7200s"));
    assert_eq!(declared(&[&a, &with("workers", None)]), None);
}
