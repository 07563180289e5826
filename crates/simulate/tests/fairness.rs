//! Fair sharing in a scenario: the Trace's cohorts, weights and switch, a
//! pod set's `minCount`, and the report's `fairness` section. Figures are
//! worked out in the comments; what depends on the engine's fair ordering
//! (still being finished) is asserted as a property, not a number.

use sluice_scheduler::{CohortSpec, FairSharing, FlavorQuotaSpec, ResourceGroupSpec, ResourceQuotaSpec, Weight};
use sluice_simulate::report::fairness::FairnessReport;
use sluice_simulate::report::{self, Report};
use sluice_simulate::sim::{self, Scenario, SimOptions, SimResult};
use sluice_simulate::{scenario, trace::Diagnostic};

/// A flavor `h100`, a ClusterQueue `<name>` with `nominal` GPUs in
/// `cohort` (none when empty) and a LocalQueue `<name>/jobs` for each
/// queue, then a Trace with `spec` (indented two spaces).
fn scenario_text(queues: &[(&str, &str, u32)], spec: &str) -> String {
    let mut text =
        "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec: {}\n".to_string();
    for (name, cohort, nominal) in queues {
        let cohort = if cohort.is_empty() {
            String::new()
        } else {
            format!("cohort: {cohort}, ")
        };
        text.push_str(&format!(
            "---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: {name}}}
spec: {{{cohort}preemption: {{reclaimWithinCohort: Any}}, resourceGroups: [{{coveredResources: [nvidia.com/gpu], flavors: [{{name: h100, resources: [{{name: nvidia.com/gpu, nominalQuota: {nominal}}}]}}]}}]}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: {name}}}
spec: {{clusterQueue: {name}}}
"
        ));
    }
    format!("{text}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata: {{name: fair}}\nspec:\n{spec}")
}

/// `  - {name: …}` for a job of `gpus` GPUs in `<queue>/jobs`.
fn job(name: &str, queue: &str, arrival: &str, gpus: u32, duration: &str) -> String {
    format!(
        "  - {{name: {name}, namespace: {queue}, queue: jobs, arrival: {arrival}, requests: {{nvidia.com/gpu: {gpus}}}, duration: {duration}}}\n"
    )
}

/// A cohort pool of `gpus` H100s, as a `resourceGroups` value.
fn pool(gpus: u32) -> String {
    format!(
        "[{{coveredResources: [nvidia.com/gpu], flavors: [{{name: h100, resources: [{{name: nvidia.com/gpu, nominalQuota: {gpus}}}]}}]}}]"
    )
}

fn load(text: &str) -> Scenario {
    scenario::load("fair.yaml", text).unwrap_or_else(|e| panic!("scenario does not load: {e:#?}"))
}

fn run(s: &Scenario) -> (Report, SimResult) {
    let opts = SimOptions {
        eviction_delay: 0,
        ..SimOptions::default()
    };
    let result = sim::run(s, &opts, &mut |_| {}).expect("simulation runs");
    (report::build(&s.name, &opts, &result), result)
}

fn errors(text: &str) -> Vec<String> {
    match scenario::load("bad.yaml", text) {
        Ok(_) => panic!("scenario should not load"),
        Err(e) => e.iter().map(Diagnostic::to_string).collect(),
    }
}

fn has(errors: &[String], needle: &str) {
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "no error contains {needle:?}: {errors:#?}"
    );
}

fn gpus(n: i64) -> Vec<ResourceGroupSpec> {
    vec![ResourceGroupSpec {
        covered_resources: vec!["nvidia.com/gpu".into()],
        flavors: vec![FlavorQuotaSpec {
            flavor: "h100".into(),
            resources: vec![ResourceQuotaSpec {
                resource: "nvidia.com/gpu".into(),
                nominal: n * 1000,
                borrowing_limit: None,
                lending_limit: None,
            }],
        }],
    }]
}

#[test]
fn the_trace_declares_cohorts_weights_and_the_switch() {
    let spec = format!(
        "  cohorts:
  - {{name: org, resourceGroups: {}}}
  - {{name: research, parent: org, fairSharing: {{weight: 2}}}}
  clusterQueues:
  - {{name: a, fairSharing: {{weight: 0.5}}}}
  - {{name: b, fairSharing: {{weight: 250m}}}}
  - {{name: c, fairSharing: {{weight: 0}}}}
  jobs:
{}",
        pool(16),
        job("x", "a", "0s", 1, "1m")
    );
    let queues = [
        ("a", "research", 8),
        ("b", "research", 8),
        ("c", "org", 0),
        ("d", "", 4),
    ];
    let s = load(&scenario_text(&queues, &spec));
    assert_eq!(
        s.cohorts,
        vec![
            CohortSpec {
                name: "org".into(),
                parent: None,
                resource_groups: gpus(16),
                fair_weight: Weight(1000),
            },
            CohortSpec {
                name: "research".into(),
                parent: Some("org".into()),
                resource_groups: Vec::new(),
                fair_weight: Weight(2000),
            },
        ]
    );
    let weights: Vec<(&str, i64)> = s
        .cluster_queues
        .iter()
        .map(|c| (c.name.as_str(), c.fair_weight.0))
        .collect();
    // Decimals and quantities are thousandths; a queue not listed keeps 1.
    assert_eq!(weights, [("a", 500), ("b", 250), ("c", 0), ("d", 1000)]);
    assert_eq!(s.fair_sharing, FairSharing::default());

    let off = load(&scenario_text(
        &queues,
        &spec.replace("  cohorts:", "  fairSharing: {enable: false}\n  cohorts:"),
    ));
    assert_eq!(off.fair_sharing, FairSharing::Off);
    let on = load(&scenario_text(
        &queues,
        &spec.replace("  cohorts:", "  fairSharing: {enable: true}\n  cohorts:"),
    ));
    assert_eq!(on.fair_sharing, FairSharing::default());
}

#[test]
fn min_count_marks_the_pod_set_it_is_given_on() {
    let spec = "  jobs:
  - {name: solo, namespace: a, queue: jobs, arrival: 0s, pods: 8, minCount: 2, requests: {nvidia.com/gpu: 1}, duration: 1m}
  - {name: learner, gang: rl, namespace: a, queue: jobs, arrival: 0s, pods: 1, requests: {nvidia.com/gpu: 1}, duration: 1m}
  - {name: actors, gang: rl, namespace: a, queue: jobs, arrival: 0s, pods: 6, minCount: 3, requests: {nvidia.com/gpu: 1}, duration: 1m}
  generators:
  - {class: sweep, count: 1, interval: 1m, duration: 1m, pods: 4, minCount: 1, requests: {nvidia.com/gpu: 1}, namespace: a, queue: jobs}
";
    let s = load(&scenario_text(&[("a", "", 16)], spec));
    let min_counts = |name: &str| {
        let w = s.workloads.iter().find(|w| w.name == name).expect("workload");
        w.min_counts.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>()
    };
    assert_eq!(min_counts("a/solo"), [("solo".to_string(), 2)]);
    // A gang member's minCount is its own pod set's; the learner has none.
    assert_eq!(min_counts("a/rl"), [("actors".to_string(), 3)]);
    assert_eq!(min_counts("a/sweep-jobs-0"), [("main".to_string(), 1)]);

    let bad = spec
        .replace("minCount: 2", "minCount: 9")
        .replace("minCount: 1,", "minCount: 0,");
    let e = errors(&scenario_text(&[("a", "", 16)], &bad));
    has(&e, "spec.jobs[0].minCount: minCount must be from 1 to pods (8), got 9");
    has(
        &e,
        "spec.generators[0].minCount: minCount must be from 1 to pods (4), got 0",
    );
    let negative = spec.replace("minCount: 2", "minCount: -1");
    has(
        &errors(&scenario_text(&[("a", "", 16)], &negative)),
        "spec.jobs[0].minCount",
    );
}

#[test]
fn bad_fair_sharing_settings_are_errors_naming_the_field() {
    let queues = [("a", "teams", 8), ("b", "teams", 8)];
    let bad = |spec: &str| {
        errors(&scenario_text(
            &queues,
            &format!("{spec}  jobs:\n{}", job("x", "a", "0s", 1, "1m")),
        ))
    };

    let e = bad("  clusterQueues:\n  - {name: a, fairSharing: {weight: -1}}\n");
    has(
        &e,
        "spec.clusterQueues[0].fairSharing.weight: a weight must be at least 0, got -1",
    );
    let e = bad("  cohorts:\n  - {name: teams, fairSharing: {weight: -0.5}}\n");
    has(
        &e,
        "spec.cohorts[0].fairSharing.weight: a weight must be at least 0, got -0.5",
    );
    has(
        &bad("  clusterQueues:\n  - {name: team-a, fairSharing: {weight: 1}}\n"),
        "spec.clusterQueues[0].name: `team-a` is not a ClusterQueue of the scenario",
    );
    has(
        &bad("  clusterQueues:\n  - {name: a}\n  - {name: a}\n"),
        "spec.clusterQueues[1].name: ClusterQueue a is given a weight twice",
    );
    has(
        &bad("  clusterQueues:\n  - {name: a, fairSharing: {wieght: 2}}\n"),
        "unknown field `wieght`",
    );
    has(&bad("  fairSharing: {enable: maybe}\n"), "spec.fairSharing.enable");

    // A cycle is refused with the chain, by the engine's rule.
    let e = bad("  cohorts:\n  - {name: teams, parent: org}\n  - {name: org, parent: teams}\n");
    has(
        &e,
        "spec.cohorts[1].parent: cohort org: parent chain org -> teams -> org leads back to itself",
    );
    has(
        &bad("  cohorts:\n  - {name: teams, parent: teams}\n"),
        "spec.cohorts[0].parent: cohort teams: parent chain teams -> teams leads back to itself",
    );
    has(
        &bad("  cohorts:\n  - {name: teams}\n  - {name: teams}\n"),
        "spec.cohorts[1].name: cohort teams is declared twice",
    );
    has(
        &bad("  cohorts:\n  - {name: team}\n"),
        "spec.cohorts[0].name: cohort team has nothing under it: no ClusterQueue names it in spec.cohort and no cohort as its parent, did you mean `teams`?",
    );
    has(
        &bad("  cohorts:\n  - {name: Teams}\n"),
        "spec.cohorts[0].name: cohort \"Teams\" is not a DNS-1123 subdomain",
    );

    // A cohort's quota is read by a ClusterQueue's rules.
    let quota = |groups: &str| bad(&format!("  cohorts:\n  - name: teams\n    resourceGroups: {groups}\n"));
    has(
        &quota(&pool(8).replace("h100", "h10")),
        "spec.cohorts[0].resourceGroups[0].flavors[0].name: cohort teams: flavor `h10` is not a ResourceFlavor of the scenario, did you mean `h100`?",
    );
    has(
        &quota(&pool(8).replace("nominalQuota: 8", "nominalQuota: 8, lendingLimt: 4")),
        "spec.cohorts[0].resourceGroups[0].flavors[0].resources[0].lendingLimt: cohort teams: unknown field `lendingLimt`, did you mean `lendingLimit`?",
    );
    has(
        &quota(&pool(8).replace("nominalQuota", "nominalQuta")),
        "spec.cohorts[0].resourceGroups[0].flavors[0].resources[0]: missing field `nominalQuota`",
    );
    has(
        &quota(&pool(8).replace("nominalQuota: 8", "nominalQuota: 8x")),
        "spec.cohorts[0].resourceGroups[0].flavors[0].resources[0].nominalQuota: cohort teams: quantity \"8x\"",
    );
    has(
        &quota(&pool(8).replace("coveredResources: [nvidia.com/gpu]", "coveredResources: [cpu]")),
        "spec.cohorts[0].resourceGroups[0]",
    );
}

/// Two queues of nominal 0 under a cohort with a pool of 8 GPUs; x has
/// weight 2, y weight 1. Each runs a 4-GPU job from 0 to 10m: both borrow
/// 4 of the 8 the cohort can lend, 500 thousandths, so x's share is
/// 500 / 2 = 250 and y's 500 for the whole run. Mean use 4 GPUs each (time
/// share 50 %); Jain's index over use ÷ weight = [2, 4]:
/// (2 + 4)² / (2 · (4 + 16)) = 36 / 40 = 0.9.
#[test]
fn weights_divide_shares_and_jains_index_counts_use_per_weight() {
    let spec = format!(
        "  cohorts:\n  - {{name: pool, resourceGroups: {}}}\n  clusterQueues:\n  - {{name: x, fairSharing: {{weight: 2}}}}\n  jobs:\n{}{}",
        pool(8),
        job("jx", "x", "0s", 4, "10m"),
        job("jy", "y", "0s", 4, "10m"),
    );
    let (r, _) = run(&load(&scenario_text(&[("x", "pool", 0), ("y", "pool", 0)], &spec)));
    assert_eq!(r.totals.admitted, 2, "the cohort's own quota is lent to its queues");
    let f = r.fairness.clone().expect("a fairness section");
    assert!(f.enabled);
    let q = |name: &str| f.cluster_queues.iter().find(|q| q.name == name).unwrap();
    assert_eq!(
        (q("x").weight, q("x").mean_share, q("x").max_share),
        (2.0, Some(250.0), Some(250.0))
    );
    assert_eq!(
        (q("y").weight, q("y").mean_share, q("y").max_share),
        (1.0, Some(500.0), Some(500.0))
    );
    assert_eq!((q("x").mean_use, q("x").time_share), (4.0, Some(0.5)));
    assert_eq!(f.trees.len(), 1);
    let t = &f.trees[0];
    assert_eq!(
        (t.root.as_str(), t.resource.as_str(), t.queues, t.counted),
        ("pool", "nvidia.com/gpu", 2, 2)
    );
    assert!((t.jain_index.unwrap() - 0.9).abs() < 1e-12, "{:?}", t.jain_index);
}

/// Queues under a child cohort belong to its root's tree; a queue without
/// work is not counted in Jain's index, and one of weight 0 that borrows
/// has share ∞.
#[test]
fn trees_are_rooted_and_only_queues_with_work_are_counted() {
    let spec = format!(
        "  cohorts:\n  - {{name: org, resourceGroups: {}}}\n  - {{name: research, parent: org}}\n  clusterQueues:\n  - {{name: z, fairSharing: {{weight: 0}}}}\n  jobs:\n{}{}",
        pool(8),
        job("ja", "a", "0s", 4, "10m"),
        job("jz", "z", "0s", 4, "10m"),
    );
    let queues = [("a", "research", 4), ("idle", "research", 4), ("z", "org", 0)];
    let (r, _) = run(&load(&scenario_text(&queues, &spec)));
    let f = r.fairness.clone().expect("a fairness section");
    assert_eq!(f.trees.len(), 1, "research hangs under org: one tree");
    assert!(f.cluster_queues.iter().all(|q| q.root == "org"));
    let q = |name: &str| f.cluster_queues.iter().find(|q| q.name == name).unwrap();
    assert_eq!((q("idle").workloads, q("a").workloads), (0, 1));
    assert_eq!(q("z").mean_share, None, "weight 0 while borrowing: ∞");
    // a (within its nominal 4) and idle are counted only if they had work
    // and a weight: a only; z has weight 0.
    assert_eq!((f.trees[0].queues, f.trees[0].counted), (3, 1));
    assert_eq!(f.trees[0].jain_index, Some(1.0));
    assert!(report::table::render(&r).contains("∞"));
}

fn fair_share_example() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/simulate/fair-share.yaml");
    std::fs::read_to_string(path).expect("the shipped scenario")
}

fn section(text: &str) -> (FairnessReport, Report, SimResult) {
    let s = scenario::load("fair-share.yaml", text).unwrap_or_else(|e| panic!("{e:#?}"));
    let opts = SimOptions::default();
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    let r = report::build(&s.name, &opts, &result);
    (r.fairness.clone().expect("a fairness section"), r, result)
}

/// The shipped scenario: three equal teams in one tree, all of whose work
/// gets done, each with some of the GPU time.
#[test]
fn the_fair_share_scenario_gives_every_team_gpu_time() {
    for (text, enabled) in [
        (fair_share_example(), true),
        (fair_share_example().replace("enable: true", "enable: false"), false),
    ] {
        let (f, r, result) = section(&text);
        assert_eq!(f.enabled, enabled);
        assert_eq!(r.totals.finished, r.totals.workloads, "every job runs in the end");
        let names: Vec<&str> = f.cluster_queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["team-a", "team-b", "team-c"]);
        for q in &f.cluster_queues {
            assert_eq!((q.root.as_str(), q.weight), ("teams", 1.0));
            assert!(q.time_share.is_some_and(|s| s > 0.0), "{}: {:?}", q.name, q.time_share);
            assert!(
                q.mean_use > 0.0 && q.max_share.is_some_and(|m| m > 0.0),
                "{} borrowed",
                q.name
            );
        }
        let shares: f64 = f.cluster_queues.iter().filter_map(|q| q.time_share).sum();
        assert!(
            (shares - 1.0).abs() < 1e-9,
            "time shares add up to the tree's use: {shares}"
        );
        let t = &f.trees[0];
        assert_eq!(
            (f.trees.len(), t.queues, t.counted, t.resource.as_str()),
            (1, 3, 3, "nvidia.com/gpu")
        );
        let j = t.jain_index.expect("defined");
        assert!((1.0 / 3.0..=1.0).contains(&j), "{j}");
        // team-a's burst and the steady teams overlap: all three wait at
        // once for a while, and each runs something then.
        assert!(t.contended_ms > 0);
        let j = t.contended_jain_index.expect("defined");
        assert!((1.0 / 3.0..=1.0).contains(&j), "{j}");
        assert!(
            f.cluster_queues
                .iter()
                .all(|q| q.contended_mean_use.is_some_and(|u| u > 0.0))
        );

        let text = report::table::render(&r);
        assert!(text.contains(if enabled {
            "Fair sharing (on;"
        } else {
            "Fair sharing (off;"
        }));
        assert!(text.contains("Jain's index"));
        let html = report::html::render(&r, &result);
        assert!(html.contains("<h2>Fair sharing</h2>") && html.contains("weighted share over time"));
    }
}

#[test]
fn no_fairness_section_without_cohorts() {
    let spec = format!("  jobs:\n{}", job("x", "a", "0s", 1, "1m"));
    let (r, result) = run(&load(&scenario_text(&[("a", "", 8)], &spec)));
    assert!(r.fairness.is_none() && result.fairness.is_none());
    assert!(!report::table::render(&r).contains("Fair sharing"));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("fairness").is_none());
}
