//! The shape rule, as a table: what an object asks for now against what
//! was admitted.

use std::collections::BTreeMap;

use super::*;

const GPU: &str = "nvidia.com/gpu";

/// An admitted pod set: `count` pods holding `per_pod` GPUs each.
fn admitted(name: &str, count: u32, per_pod: Amount) -> PodSetAssignment {
    PodSetAssignment {
        name: name.into(),
        count,
        flavors: BTreeMap::from([(GPU.into(), "a100".into())]),
        usage: BTreeMap::from([(GPU.into(), per_pod * Amount::from(count))]),
        topology: None,
    }
}

/// A pod set as asked for now.
fn asked(name: &str, count: u32, reqs: &[(&str, Amount)]) -> PodSetSpec {
    PodSetSpec {
        name: name.into(),
        count,
        requests: reqs.iter().map(|(r, v)| ((*r).to_string(), *v)).collect(),
        ..PodSetSpec::default()
    }
}

#[test]
fn the_table() {
    let adm = vec![admitted("main", 2, 1000)];
    let grew = |what| {
        ShapeChange::Grew(Growth {
            pod_set: "main".into(),
            what,
        })
    };
    let cases: Vec<(&str, Vec<PodSetSpec>, ShapeChange)> = vec![
        ("unchanged", vec![asked("main", 2, &[(GPU, 1000)])], ShapeChange::Same),
        (
            "scaled up",
            vec![asked("main", 8, &[(GPU, 1000)])],
            grew(Grown::Pods { now: 8, admitted: 2 }),
        ),
        (
            "more per pod",
            vec![asked("main", 2, &[(GPU, 2000)])],
            grew(Grown::PerPod {
                resource: GPU.into(),
                now: 2000,
                admitted: 1000,
            }),
        ),
        (
            "a resource the admission does not hold",
            vec![asked("main", 2, &[(GPU, 1000), ("cpu", 500)])],
            grew(Grown::PerPod {
                resource: "cpu".into(),
                now: 500,
                admitted: 0,
            }),
        ),
        (
            "a pod set the admission does not have",
            vec![asked("main", 2, &[(GPU, 1000)]), asked("extra", 1, &[(GPU, 1000)])],
            ShapeChange::Grew(Growth {
                pod_set: "extra".into(),
                what: Grown::PodSet { now: 1 },
            }),
        ),
        (
            "scaled down",
            vec![asked("main", 1, &[(GPU, 1000)])],
            ShapeChange::Shrank(vec![("main".into(), 1)]),
        ),
        (
            "scaled down but more per pod is growth",
            vec![asked("main", 1, &[(GPU, 3000)])],
            grew(Grown::PerPod {
                resource: GPU.into(),
                now: 3000,
                admitted: 1000,
            }),
        ),
        (
            "less per pod is not shrinking",
            vec![asked("main", 2, &[(GPU, 500)])],
            ShapeChange::Same,
        ),
        (
            "a pod set with no pods now",
            vec![asked("extra", 0, &[(GPU, 1000)])],
            ShapeChange::Same,
        ),
    ];
    for (name, now, want) in cases {
        assert_eq!(compare(&adm, &now), want, "{name}");
    }
}

#[test]
fn every_pod_set_is_looked_at() {
    let adm = vec![admitted("launcher", 1, 0), admitted("workers", 4, 1000)];
    let now = vec![asked("launcher", 1, &[]), asked("workers", 5, &[(GPU, 1000)])];
    assert_eq!(
        compare(&adm, &now),
        ShapeChange::Grew(Growth {
            pod_set: "workers".into(),
            what: Grown::Pods { now: 5, admitted: 4 },
        })
    );
    let now = vec![asked("launcher", 1, &[]), asked("workers", 3, &[(GPU, 1000)])];
    assert_eq!(compare(&adm, &now), ShapeChange::Shrank(vec![("workers".into(), 3)]));
}

#[test]
fn a_waiting_workload_asks_for_the_same_when_pods_and_requests_agree() {
    let asked = vec![asked("main", 2, &[(GPU, 1000), ("cpu", 0)])];
    assert!(same_request(&asked, &[super::tests::asked("main", 2, &[(GPU, 1000)])]));
    assert!(!same_request(&asked, &[super::tests::asked("main", 3, &[(GPU, 1000)])]));
    assert!(!same_request(&asked, &[super::tests::asked("main", 2, &[(GPU, 2000)])]));
    assert!(!same_request(
        &asked,
        &[super::tests::asked("other", 2, &[(GPU, 1000)])]
    ));
    let mut elastic = super::tests::asked("main", 2, &[(GPU, 1000)]);
    elastic.min_count = Some(1);
    assert!(!same_request(&asked, &[elastic]));
}

#[test]
fn with_transformations_requests_compare_with_what_was_asked_not_the_charge() {
    const SLICE: &str = "nvidia.com/mig-1g.10gb";
    // Admitted holding GPU-equivalents only (the slice was replaced).
    let mut adm = admitted("main", 2, 0);
    adm.usage = [("sluice.dev/gpu-equivalent".to_string(), 2 * 102_960)].into();
    let was = vec![asked("main", 2, &[(SLICE, 1000)])];
    let now = vec![asked("main", 2, &[(SLICE, 1000)])];
    assert_eq!(compare_asked(&[adm.clone()], &was, &now), ShapeChange::Same);
    // Against the charge alone the slice would look new.
    assert!(matches!(compare(&[adm.clone()], &now), ShapeChange::Grew(_)));
    let more = vec![asked("main", 2, &[(SLICE, 2000)])];
    assert_eq!(
        compare_asked(&[adm], &was, &more),
        ShapeChange::Grew(Growth {
            pod_set: "main".into(),
            what: Grown::PerPod {
                resource: SLICE.into(),
                now: 2000,
                admitted: 1000,
            },
        })
    );
}
