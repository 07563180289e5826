//! Table test: every manifest in `tests/data/invalid/` is rejected by
//! `validate()` with exactly the expected field paths. One case (at least)
//! per cross-field rule.

use std::path::Path;

use sluice_api::manifest::parse_manifests;
use sluice_api::validation::Validate;

/// (file, expected violations as `<metadata.name>#<field path>`)
const CASES: &[(&str, &[&str])] = &[
    // A flavor lists exactly the group's covered resources: missing ...
    (
        "cq-flavor-missing-covered-resource.yaml",
        &["q#spec.resourceGroups[0].flavors[1].resources"],
    ),
    // ... and extra.
    (
        "cq-flavor-extra-resource.yaml",
        &["q#spec.resourceGroups[0].flavors[0].resources[2].name"],
    ),
    // A resource is covered by at most one group.
    (
        "cq-resource-in-two-groups.yaml",
        &["q#spec.resourceGroups[1].coveredResources[0]"],
    ),
    // Flavor names are unique within a ClusterQueue.
    (
        "cq-duplicate-flavor.yaml",
        &["q#spec.resourceGroups[1].flavors[0].name"],
    ),
    // Resource names are unique (in coveredResources and in a flavor).
    (
        "cq-duplicate-resource.yaml",
        &[
            "q#spec.resourceGroups[0].coveredResources[1]",
            "q#spec.resourceGroups[0].flavors[0].resources[1].name",
        ],
    ),
    // borrowingLimit / lendingLimit only with a cohort.
    (
        "cq-limits-without-cohort.yaml",
        &[
            "q#spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "q#spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
        ],
    ),
    // lendingLimit <= nominalQuota, compared exactly across units.
    (
        "cq-lending-above-nominal.yaml",
        &["q#spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"],
    ),
    // Quantities parse and are non-negative.
    (
        "cq-bad-quantities.yaml",
        &[
            "q#spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "q#spec.resourceGroups[0].flavors[0].resources[1].nominalQuota",
            "q#spec.resourceGroups[0].flavors[0].resources[2].borrowingLimit",
        ],
    ),
    // DNS-1123 names and resource names.
    (
        "cq-bad-names.yaml",
        &[
            "Team_A#metadata.name",
            "Team_A#spec.cohort",
            "Team_A#spec.resourceGroups[0].coveredResources[0]",
            "Team_A#spec.resourceGroups[0].flavors[0].name",
            "Team_A#spec.resourceGroups[0].flavors[0].resources[0].name",
        ],
    ),
    // Preemption: borrowWithinCohort needs reclaimWithinCohort, a threshold
    // needs a policy; minRuntimeSeconds is non-negative; the
    // recently-preempted grace is 1 minute to a week; a notice 1 second to
    // an hour; a reservation's allowed delay 1 minute to a week, its depth
    // 1 to 8.
    (
        "cq-preemption.yaml",
        &[
            "q#spec.preemption.borrowWithinCohort.policy",
            "q2#spec.minRuntimeSeconds",
            "q2#spec.preemption.borrowWithinCohort.maxPriorityThreshold",
            "q3#spec.preemption.recentlyPreemptedGraceMinutes",
            "q4#spec.preemption.recentlyPreemptedGraceMinutes",
            "q5#spec.preemption.noticeSeconds",
            "q6#spec.preemption.noticeSeconds",
            "q7#spec.backfill.maxDelayMinutes",
            "q8#spec.backfill.maxDelayMinutes",
            "q9#spec.backfill.depth",
            "q10#spec.backfill.depth",
        ],
    ),
    // A budget: more than 0 hours, percentages 1 to 1000, steps that go
    // up in both percentage and action.
    (
        "cq-budget.yaml",
        &[
            "b1#spec.budget.hours",
            "b2#spec.budget.hours",
            "b3#spec.budget.actions[0].atPercent",
            "b4#spec.budget.actions[1]",
        ],
    ),
    // Groups are not empty.
    (
        "cq-empty-group.yaml",
        &[
            "q#spec.resourceGroups[0].coveredResources",
            "q#spec.resourceGroups[0].flavors",
        ],
    ),
    // namespaceSelector operators and values.
    (
        "cq-namespace-selector.yaml",
        &[
            "q#spec.namespaceSelector.matchExpressions[0].values",
            "q#spec.namespaceSelector.matchExpressions[1].values",
            "q#spec.namespaceSelector.matchExpressions[2].operator",
        ],
    ),
    // fairSharing.weight is a non-negative quantity.
    (
        "cq-fair-sharing.yaml",
        &["q#spec.fairSharing.weight", "q2#spec.fairSharing.weight"],
    ),
    // Cohort: DNS-1123 names (its own and its parent's) and resource names.
    (
        "cohort-bad-names.yaml",
        &[
            "Research_Org#metadata.name",
            "Research_Org#spec.parent",
            "Research_Org#spec.resourceGroups[0].coveredResources[0]",
            "Research_Org#spec.resourceGroups[0].flavors[0].name",
            "Research_Org#spec.resourceGroups[0].flavors[0].resources[0].name",
        ],
    ),
    // Cohort: not its own parent.
    ("cohort-own-parent.yaml", &["research#spec.parent"]),
    // Cohort: borrowingLimit / lendingLimit only with a parent.
    (
        "cohort-limits-without-parent.yaml",
        &[
            "company#spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "company#spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
        ],
    ),
    // Cohort: lendingLimit <= nominalQuota.
    (
        "cohort-lending-above-nominal.yaml",
        &["research#spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"],
    ),
    // Cohort: quotas and the weight parse and are non-negative.
    (
        "cohort-quantities.yaml",
        &[
            "research#spec.fairSharing.weight",
            "research#spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "research#spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit",
            "training#spec.fairSharing.weight",
        ],
    ),
    // Cohort: the resource group rules of a ClusterQueue.
    (
        "cohort-groups.yaml",
        &[
            "research#spec.resourceGroups[0].flavors[0].resources",
            "research#spec.resourceGroups[1].coveredResources[0]",
            "research#spec.resourceGroups[1].flavors[0].name",
            "research#spec.resourceGroups[1].flavors[0].resources[2].name",
        ],
    ),
    // LocalQueue: name is a DNS-1123 label, clusterQueue is set.
    ("lq-invalid.yaml", &["team.a#metadata.name", "team.a#spec.clusterQueue"]),
    // WorkloadPriorityClass value range.
    ("wpc-out-of-range.yaml", &["too-important#value"]),
    // ResourceFlavor labels, taints, tolerations.
    (
        "rf-invalid.yaml",
        &[
            "a100-80gb#spec.nodeLabels[nvidia.com/gpu.product]",
            "a100-80gb#spec.nodeTaints[0].effect",
            "a100-80gb#spec.tolerations[0].value",
            "a100-80gb#spec.tolerations[1].key",
            "a100-80gb#spec.topologyKey",
        ],
    ),
    // Workload: unique pod set names, count >= minCount >= 1, queueName set,
    // containers present, quantities parse.
    (
        "wl-invalid.yaml",
        &[
            "job-train-1a2b3#spec.queueName",
            "job-train-1a2b3#spec.podSets[0].minCount",
            "job-train-1a2b3#spec.podSets[1].name",
            "job-train-1a2b3#spec.podSets[1].count",
            "job-train-1a2b3#spec.podSets[1].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
            "job-train-1a2b3#spec.podSets[2].template.spec.containers",
        ],
    ),
    // Workload: minCount >= 1.
    ("wl-min-count.yaml", &["job-sweep#spec.podSets[0].minCount"]),
];

fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/invalid")
}

#[test]
fn invalid_manifests_report_expected_paths() {
    let mut failures = Vec::new();
    for (file, expected) in CASES {
        let text = std::fs::read_to_string(data_dir().join(file)).unwrap();
        let documents = parse_manifests(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!documents.is_empty(), "{file}: no documents");
        let mut actual = Vec::new();
        for document in &documents {
            let object = document
                .as_sluice()
                .unwrap_or_else(|| panic!("{file}: document {} is not a Sluice object", document.index));
            for violation in object.validate() {
                assert!(
                    !violation.message.is_empty(),
                    "{file}: empty message at {}",
                    violation.path
                );
                actual.push(format!("{}#{}", object.name().unwrap_or(""), violation.path));
            }
        }
        let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        actual.sort();
        expected.sort();
        if actual != expected {
            failures.push(format!("{file}:\n  expected {expected:#?}\n  actual   {actual:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_invalid_file_is_in_the_table() {
    let listed: Vec<&str> = CASES.iter().map(|(f, _)| *f).collect();
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(listed.contains(&name.as_str()), "{name} has no row in CASES");
    }
}

#[test]
fn messages_say_what_is_wrong() {
    let text = std::fs::read_to_string(data_dir().join("cq-flavor-missing-covered-resource.yaml")).unwrap();
    let docs = parse_manifests(&text).unwrap();
    let violations = docs[0].as_sluice().unwrap().validate();
    assert_eq!(
        violations[0].to_string(),
        "spec.resourceGroups[0].flavors[1].resources: missing quota for covered resource \"memory\"; every flavor lists exactly the group's coveredResources"
    );

    let text = std::fs::read_to_string(data_dir().join("cq-lending-above-nominal.yaml")).unwrap();
    let docs = parse_manifests(&text).unwrap();
    let violations = docs[0].as_sluice().unwrap().validate();
    assert_eq!(
        violations[0].message,
        "must be at most nominalQuota (32Gi), got 68719476736"
    );
}

/// The messages of the rules a Cohort adds or words its own way.
#[test]
fn cohort_messages_name_the_parent() {
    let messages = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(data_dir().join(file)).unwrap();
        parse_manifests(&text)
            .unwrap()
            .iter()
            .flat_map(|d| d.as_sluice().unwrap().validate())
            .map(|v| v.to_string())
            .collect()
    };
    assert_eq!(
        messages("cohort-limits-without-parent.yaml"),
        [
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: requires spec.parent: without a parent there is nothing to borrow",
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: requires spec.parent: without a parent there is nobody to lend to",
        ]
    );
    assert_eq!(
        messages("cohort-own-parent.yaml"),
        ["spec.parent: \"research\" is this cohort itself; a cohort cannot be its own parent"]
    );
    assert!(
        messages("cohort-groups.yaml").contains(
            &"spec.resourceGroups[1].flavors[0].name: duplicate flavor \"default-cpu\", already used at spec.resourceGroups[0].flavors[0].name; a flavor may appear once per Cohort"
                .to_string()
        )
    );
    assert_eq!(
        messages("cq-fair-sharing.yaml"),
        [
            "spec.fairSharing.weight: quantity \"-0.5\" must not be negative",
            "spec.fairSharing.weight: quantity \"twice\" is not a Kubernetes quantity (expected forms like 8, 500m, 1.5, 64Gi, 1e3)",
        ]
    );
    assert_eq!(
        messages("wl-min-count.yaml"),
        ["spec.podSets[0].minCount: must be at least 1, got 0"]
    );
    assert!(
        messages("wl-invalid.yaml").contains(&"spec.podSets[0].minCount: must be at most count (4), got 5".to_string())
    );
}
