//! Fair sharing in a scenario: Cohort documents and ClusterQueue weights
//! as a cluster takes them, the Trace's `fairSharing` switch, a pod set's
//! `minCount`, and the report's `fairness` section. Figures are worked out
//! in the comments; what depends on the engine's fair ordering is asserted
//! as a property, not a number.

use sluice_scheduler::{
    CohortSpec, FairShareStrategies, FairSharing, FlavorQuotaSpec, ResourceGroupSpec, ResourceQuotaSpec, Weight,
};
use sluice_simulate::report::fairness::{FairQueue, FairnessReport};
use sluice_simulate::report::{self, Report};
use sluice_simulate::sim::{self, Scenario, SimOptions, SimResult};
use sluice_simulate::{scenario, trace::Diagnostic};

/// A ClusterQueue of the scenario: name, cohort (none when empty),
/// nominal GPUs, `fairSharing.weight` (none when empty).
type Queue<'a> = (&'a str, &'a str, u32, &'a str);

/// A flavor `h100`, the Cohort documents `cohorts`, a ClusterQueue and a
/// LocalQueue `<name>/jobs` for each queue, then a Trace with `spec`
/// (indented two spaces).
fn scenario_text(cohorts: &[String], queues: &[Queue<'_>], spec: &str) -> String {
    let mut text =
        "apiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: h100}\nspec: {}\n".to_string();
    for c in cohorts {
        text.push_str(c);
    }
    for (name, cohort, nominal, weight) in queues {
        let cohort = if cohort.is_empty() {
            String::new()
        } else {
            format!("cohort: {cohort}, ")
        };
        let weight = if weight.is_empty() {
            String::new()
        } else {
            format!("fairSharing: {{weight: {weight}}}, ")
        };
        text.push_str(&format!(
            "---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: {name}}}
spec: {{namespaceSelector: {{}}, {cohort}{weight}preemption: {{reclaimWithinCohort: Any}}, resourceGroups: {}}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: {name}}}
spec: {{clusterQueue: {name}}}
",
            pool(*nominal)
        ));
    }
    format!("{text}---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata: {{name: fair}}\nspec:\n{spec}")
}

/// A Cohort document; `spec` is its spec's fields, in flow style.
fn cohort(name: &str, spec: &str) -> String {
    format!("---\napiVersion: sluice.dev/v1alpha1\nkind: Cohort\nmetadata: {{name: {name}}}\nspec: {{{spec}}}\n")
}

/// `  - {name: …}` for a job of `gpus` GPUs in `<queue>/jobs`.
fn job(name: &str, queue: &str, arrival: &str, gpus: u32, duration: &str) -> String {
    format!(
        "  - {{name: {name}, namespace: {queue}, queue: jobs, arrival: {arrival}, requests: {{nvidia.com/gpu: {gpus}}}, duration: {duration}}}\n"
    )
}

/// `gpus` H100s, as a `resourceGroups` value.
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
        // Each event decided at its own instant (the controller gathers
        // 50 ms of events into a cycle): the times below stay round.
        coalesce: 0,
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

/// `bad.yaml:<line>:<column>` of the first `needle` on the first line that
/// holds `line` (1-based, as the diagnostics count).
fn at(text: &str, line: &str, needle: &str) -> String {
    at_nth(text, 0, line, needle)
}

/// [`at`] on the `nth` (from 0) line that holds `line`.
fn at_nth(text: &str, nth: usize, line: &str, needle: &str) -> String {
    let (n, l) = (text.lines().enumerate())
        .filter(|(_, l)| l.contains(line))
        .nth(nth)
        .expect("the line is in the text");
    format!("bad.yaml:{}:{}", n + 1, l.find(needle).expect("on that line") + 1)
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
fn cohort_documents_and_queue_weights_reach_the_engine() {
    let cohorts = [
        cohort("org", &format!("resourceGroups: {}", pool(16))),
        cohort("research", "parent: org, fairSharing: {weight: 2}"),
    ];
    let queues = [
        ("a", "research", 8, "0.5"),
        ("b", "research", 8, "250m"),
        ("c", "org", 0, "0"),
        ("d", "", 4, ""),
    ];
    let text = scenario_text(&cohorts, &queues, &format!("  jobs:\n{}", job("x", "a", "0s", 1, "1m")));
    let (s, manifests) = scenario::load_with("fair.yaml", &text, &Default::default()).expect("loads");
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
    let weights: Vec<(&str, i64)> = (s.cluster_queues.iter())
        .map(|c| (c.name.as_str(), c.fair_weight.0))
        .collect();
    // Quantities in thousandths; a queue without fairSharing has weight 1.
    assert_eq!(weights, [("a", 500), ("b", 250), ("c", 0), ("d", 1000)]);
    assert_eq!(s.fair_sharing, FairSharing::default());
    // The objects as written, for `sluice bench`.
    let names: Vec<_> = manifests.cohorts.iter().map(|c| c.metadata.name.as_deref()).collect();
    assert_eq!(names, [Some("org"), Some("research")]);
}

#[test]
fn the_trace_switch_sets_fair_sharing_and_its_strategies() {
    let on = |strategies| FairSharing::On { strategies };
    let cases = [
        ("", on(FairShareStrategies::Both)),
        ("fairSharing: {}", on(FairShareStrategies::Both)),
        ("fairSharing: {enable: true}", on(FairShareStrategies::Both)),
        ("fairSharing: {enable: false}", FairSharing::Off),
        (
            "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}",
            on(FairShareStrategies::LessThanOrEqualToFinalShare),
        ),
        (
            "fairSharing: {preemptionStrategies: [LessThanInitialShare]}",
            on(FairShareStrategies::LessThanInitialShare),
        ),
        (
            "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}",
            on(FairShareStrategies::Both),
        ),
        // As in Kueue's configuration: empty is the default.
        ("fairSharing: {preemptionStrategies: []}", on(FairShareStrategies::Both)),
        (
            "fairSharing: {enable: false, preemptionStrategies: [LessThanInitialShare]}",
            FairSharing::Off,
        ),
    ];
    let queues = [("a", "teams", 8, ""), ("b", "teams", 8, "")];
    let text = |setting: &str| {
        let spec = format!("  {setting}\n  jobs:\n{}", job("x", "a", "0s", 1, "1m"));
        scenario_text(&[], &queues, &spec)
    };
    for (setting, expected) in cases {
        assert_eq!(load(&text(setting)).fair_sharing, expected, "{setting}");
    }

    // Lists Kueue refuses: the two in the other order, a repeat.
    for list in [
        "[LessThanInitialShare, LessThanOrEqualToFinalShare]",
        "[LessThanInitialShare, LessThanInitialShare]",
    ] {
        let bad = text(&format!("fairSharing: {{preemptionStrategies: {list}}}"));
        assert_eq!(
            errors(&bad),
            [format!(
                "{}: spec.fairSharing.preemptionStrategies: {list} is not a list Kueue accepts; use one of [LessThanOrEqualToFinalShare], [LessThanInitialShare], [LessThanOrEqualToFinalShare, LessThanInitialShare]",
                at(&bad, "preemptionStrategies", "[")
            )]
        );
    }
    has(
        &errors(&text("fairSharing: {preemptionStrategies: [LessThanFinalShare]}")),
        "spec.fairSharing.preemptionStrategies[0]: unknown variant `LessThanFinalShare`, expected one of LessThanOrEqualToFinalShare, LessThanInitialShare",
    );
    has(
        &errors(&text("fairSharing: {enable: maybe}")),
        "spec.fairSharing.enable",
    );
    has(
        &errors(&text("fairSharing: {enabled: true}")),
        "unknown field `enabled`",
    );
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
    let queues = [("a", "", 16, "")];
    let s = load(&scenario_text(&[], &queues, spec));
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
    let e = errors(&scenario_text(&[], &queues, &bad));
    has(&e, "spec.jobs[0].minCount: minCount must be from 1 to pods (8), got 9");
    has(
        &e,
        "spec.generators[0].minCount: minCount must be from 1 to pods (4), got 0",
    );
    let negative = spec.replace("minCount: 2", "minCount: -1");
    has(
        &errors(&scenario_text(&[], &queues, &negative)),
        "spec.jobs[0].minCount",
    );
}

#[test]
fn bad_cohorts_and_weights_are_errors_at_their_place() {
    let queues = [("a", "teams", 8, ""), ("b", "teams", 8, "")];
    let spec = format!("  jobs:\n{}", job("x", "a", "0s", 1, "1m"));
    let text = |cohorts: &[String], queues: &[Queue<'_>]| scenario_text(cohorts, queues, &spec);

    // A cycle, refused by the engine: at the Cohort that closes it, in file
    // order, with the chain.
    let cycle = text(
        &[cohort("teams", "parent: org"), cohort("org", "parent: teams")],
        &queues,
    );
    assert_eq!(
        errors(&cycle),
        [format!(
            "{}: spec.parent: cohort org: parent chain org -> teams -> org leads back to itself",
            at(&cycle, "spec: {parent: teams}", "parent")
        )]
    );
    // The same name twice would replace the first, as a second apply does.
    let twice = text(
        &[cohort("teams", ""), cohort("teams", "fairSharing: {weight: 2}")],
        &queues,
    );
    let first = at(&twice, "metadata: {name: teams}", "name");
    let first_line = first.split(':').nth(1).unwrap();
    assert_eq!(
        errors(&twice),
        [format!(
            "{}: metadata.name: Cohort teams is declared twice; the first is at line {first_line}",
            at_nth(&twice, 1, "metadata: {name: teams}", "name")
        )]
    );
    let typo = text(&[cohort("team", "")], &queues);
    assert_eq!(
        errors(&typo),
        [format!(
            "{}: metadata.name: Cohort team: nothing is under it (no ClusterQueue names it in spec.cohort, no Cohort in spec.parent), did you mean `teams`?",
            at(&typo, "metadata: {name: team}", "name")
        )]
    );
    let unknown = text(&[cohort("teams", "fairSharing: {wieght: 2}")], &queues);
    assert_eq!(
        errors(&unknown),
        [format!(
            "{}: spec.fairSharing.wieght: Cohort: unknown field `wieght`, did you mean `weight`?",
            at(&unknown, "wieght", "wieght")
        )]
    );

    // What validate() refuses, as for any Sluice kind.
    let bad = |cohorts: &[String], queues: &[Queue<'_>]| errors(&text(cohorts, queues));
    has(
        &bad(&[cohort("teams", "parent: teams")], &queues),
        "spec.parent: Cohort teams: \"teams\" is this cohort itself; a cohort cannot be its own parent",
    );
    has(
        &bad(&[cohort("teams", "fairSharing: {weight: -0.5}")], &queues),
        "spec.fairSharing.weight: Cohort teams: quantity \"-0.5\" must not be negative",
    );
    has(
        &bad(&[], &[("a", "teams", 8, "-1"), ("b", "teams", 8, "")]),
        "spec.fairSharing.weight: ClusterQueue a: quantity \"-1\" must not be negative",
    );
    let lending = pool(8).replace("nominalQuota: 8", "nominalQuota: 8, lendingLimit: 4");
    has(
        &bad(&[cohort("teams", &format!("resourceGroups: {lending}"))], &queues),
        "lendingLimit: Cohort teams: requires spec.parent",
    );
    // A Cohort's quota is checked as a ClusterQueue's.
    let quota = |groups: String| bad(&[cohort("teams", &format!("resourceGroups: {groups}"))], &queues);
    has(
        &quota(pool(8).replace("h100", "h10")),
        "spec.resourceGroups[0].flavors[0].name: Cohort teams: flavor `h10` is not a ResourceFlavor of the scenario, did you mean `h100`?",
    );
    has(
        &quota(pool(8).replace("nominalQuota: 8", "nominalQuota: 8, lendingLimt: 4")),
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimt: Cohort: unknown field `lendingLimt`, did you mean `lendingLimit`?",
    );
    has(
        &quota(pool(8).replace("coveredResources: [nvidia.com/gpu]", "coveredResources: [cpu]")),
        "spec.resourceGroups[0]",
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
        "  jobs:\n{}{}",
        job("jx", "x", "0s", 4, "10m"),
        job("jy", "y", "0s", 4, "10m")
    );
    let cohorts = [cohort("pool", &format!("resourceGroups: {}", pool(8)))];
    let queues = [("x", "pool", 0, "2"), ("y", "pool", 0, "")];
    let (r, _) = run(&load(&scenario_text(&cohorts, &queues, &spec)));
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
        "  jobs:\n{}{}",
        job("ja", "a", "0s", 4, "10m"),
        job("jz", "z", "0s", 4, "10m")
    );
    let cohorts = [
        cohort("org", &format!("resourceGroups: {}", pool(8))),
        cohort("research", "parent: org"),
    ];
    let queues = [
        ("a", "research", 4, ""),
        ("idle", "research", 4, ""),
        ("z", "org", 0, "0"),
    ];
    let (r, _) = run(&load(&scenario_text(&cohorts, &queues, &spec)));
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

/// A 2-level tree: the root `org` holds a pool of 16 GPUs, its children
/// `research` (weight 1; queues r1 and r2) and `product` (weight 3; queue
/// p1) have none, and every queue has nominal 0, so all of it is borrowed
/// from the root. Each queue gets 20 two-GPU jobs of an hour, one a second.
/// With fair sharing the pool is split between the child cohorts by their
/// weights (4 : 12), then within research between its queues (2 : 2); a
/// split by queue alone would give each about 16 / 3. With it off the
/// cohorts' weights count for nothing.
#[test]
fn a_two_level_tree_is_shared_level_by_level() {
    let cohorts = [
        cohort("org", &format!("resourceGroups: {}", pool(16))),
        cohort("research", "parent: org"),
        cohort("product", "parent: org, fairSharing: {weight: 3}"),
    ];
    let queues = [
        ("r1", "research", 0, ""),
        ("r2", "research", 0, ""),
        ("p1", "product", 0, ""),
    ];
    let spec = "  generators:
  - {class: work, count: 20, interval: 1s, duration: 1h, requests: {nvidia.com/gpu: 2}, queues: [r1/jobs, r2/jobs, p1/jobs]}
";
    // Each queue's mean use while all three had work waiting.
    let contended = |setting: &str| {
        let text = scenario_text(
            &cohorts,
            &queues,
            &format!("  fairSharing: {{enable: {setting}}}\n{spec}"),
        );
        let (r, _) = run(&load(&text));
        assert_eq!(r.totals.finished, 60, "every job runs in the end");
        let f = r.fairness.expect("a fairness section");
        assert_eq!((f.trees.len(), f.trees[0].root.as_str()), (1, "org"));
        assert!(f.trees[0].contended_ms > 0, "all three wait at once");
        let used = |name: &str| {
            let q = f.cluster_queues.iter().find(|q| q.name == name).unwrap();
            q.contended_mean_use.expect("counted")
        };
        (used("r1"), used("r2"), used("p1"))
    };
    let workload = 2.0;
    let (r1, r2, p1) = contended("true");
    assert!(r1 + r2 + p1 <= 16.0 + 1e-9);
    assert!((r1 - r2).abs() <= workload, "research's part splits evenly: {r1} {r2}");
    assert!(
        (r1 + r2 - p1 / 3.0).abs() <= workload,
        "product gets three times research's part: {r1} + {r2} vs {p1}"
    );
    assert!(p1 >= 12.0 - workload, "{p1}");
    let (r1, r2, p1) = contended("false");
    assert!(
        (r1 + r2 - p1 / 3.0).abs() > workload,
        "without fair sharing the cohorts' weights do not count: {r1} + {r2} vs {p1}"
    );
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
/// gets done, each with some of the GPU time; with fair sharing on, while
/// all three wait, they hold the same number of GPUs give or take one
/// four-GPU job, which fair sharing off does not do.
#[test]
fn the_fair_share_scenario_splits_the_pool_evenly_with_fair_sharing_on() {
    let mut contended_index = Vec::new();
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
        // The cluster's capacity holds the Cohort's own 24 GPUs besides the
        // queues' 3 × 8 (what the queues borrow): used at most whole.
        let gpus = r
            .totals
            .flavors
            .iter()
            .find(|x| x.resource == "nvidia.com/gpu")
            .expect("GPUs in the capacity");
        assert_eq!(gpus.nominal, 48.0);
        assert!(gpus.utilisation.is_some_and(|u| u <= 1.0), "{:?}", gpus.utilisation);
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
        // team-a's burst and the steady teams overlap: all three wait at
        // once for a while.
        assert!(t.contended_ms > 0);
        contended_index.push(t.contended_jain_index.expect("defined"));
        let used: Vec<f64> = (f.cluster_queues.iter())
            .map(|q: &FairQueue| q.contended_mean_use.expect("counted"))
            .collect();
        let spread = used.iter().cloned().fold(f64::MIN, f64::max) - used.iter().cloned().fold(f64::MAX, f64::min);
        if enabled {
            assert!(spread <= 4.0, "within one job's 4 GPUs of each other: {used:?}");
        } else {
            assert!(spread > 4.0, "team-a keeps what it took first: {used:?}");
        }

        let text = report::table::render(&r);
        assert!(text.contains(if enabled {
            "Fair sharing (on;"
        } else {
            "Fair sharing (off;"
        }));
        assert!(text.contains("Jain's index"));
        let html = report::html::render(&r, &result);
        assert!(html.contains("<h2>Fair sharing</h2>") && html.contains("weighted share over time"));
        // Every column is explained, in both reports (mean use with its unit).
        for column in ["mean use", "time share", "use when contended", "counted"] {
            assert!(text.contains(&format!("  {column}: ")), "{column} unexplained: {text}");
        }
        assert!(text.contains("(in its units, e.g. GPUs)"), "{text}");
        let lede = &html[html.find("<h2>Fair sharing</h2>").unwrap()..];
        let lede = &lede[..lede.find("</p>").unwrap()];
        for words in [
            "Mean use and time share",
            "(the counted ones)",
            "Contended:",
            "in the resource's units",
        ] {
            assert!(lede.contains(words), "{words:?} not in {lede}");
        }
    }
    assert!(
        contended_index[0] > contended_index[1],
        "Jain's index when contended, on vs off: {contended_index:?}"
    );
}

#[test]
fn no_fairness_section_without_cohorts() {
    let spec = format!("  jobs:\n{}", job("x", "a", "0s", 1, "1m"));
    let (r, result) = run(&load(&scenario_text(&[], &[("a", "", 8, "")], &spec)));
    assert!(r.fairness.is_none() && result.fairness.is_none());
    assert!(!report::table::render(&r).contains("Fair sharing"));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("fairness").is_none());
}
