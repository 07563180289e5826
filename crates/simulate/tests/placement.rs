//! Nodes in a scenario (`spec.nodes`): how they are read, what placement
//! on them does to a run, and the report's split of waiting into waiting
//! for nodes and waiting for quota. Timelines are worked out in the
//! comments.

use std::collections::BTreeMap;

use sluice_scheduler::{NodeSpec, Taint, TaintEffect};
use sluice_simulate::report::{self, Report};
use sluice_simulate::sim::{self, SimOptions, SimResult};
use sluice_simulate::trace::ScenarioNode;
use sluice_simulate::{scenario, trace::Diagnostic};

const MIN: i64 = 60_000;

/// A flavor `h100` (labelled and tainted like examples/flavors.yaml, with
/// `extra` added to its spec), a ClusterQueue `team` with `quota` GPUs on
/// it and a LocalQueue `team/jobs`. 17 lines.
fn cluster(quota: u32, extra: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {{name: h100}}
spec:
  nodeLabels: {{gpu: h100}}
  nodeTaints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
{extra}---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {{name: team}}
spec: {{namespaceSelector: {{}}, resourceGroups: [{{coveredResources: [nvidia.com/gpu], flavors: [{{name: h100, resources: [{{name: nvidia.com/gpu, nominalQuota: {quota}}}]}}]}}]}}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {{name: jobs, namespace: team}}
spec: {{clusterQueue: team}}
"
    )
}

/// A Trace with these `nodes` entries (YAML list items) and jobs.
fn trace(nodes: &str, jobs: &[String]) -> String {
    format!(
        "---\napiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata: {{name: nodes}}\nspec:\n  nodes:\n{nodes}  jobs:\n{}",
        jobs.concat()
    )
}

fn job(name: &str, arrival: &str, pods: u32, gpus: u32, duration: &str, extra: &str) -> String {
    format!(
        "  - {{name: {name}, namespace: team, queue: jobs, arrival: {arrival}, pods: {pods}, requests: {{nvidia.com/gpu: {gpus}}}, duration: {duration}{extra}}}\n"
    )
}

fn run(text: &str) -> (Report, SimResult) {
    let s = scenario::load("nodes.yaml", text).unwrap_or_else(|e| panic!("scenario does not load: {e:#?}"));
    let opts = SimOptions {
        eviction_delay: 0,
        // Each event decided at its own instant (the controller gathers
        // 50 ms of events into a cycle): the times below stay round.
        coalesce: 0,
        ..SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    (report::build(&s.name, &opts, &result), result)
}

fn errors(text: &str) -> Vec<String> {
    match scenario::load("bad.yaml", text) {
        Ok(_) => panic!("scenario should not load"),
        Err(e) => e.iter().map(Diagnostic::to_string).collect(),
    }
}

const EIGHT_GPUS: &str = "  - {flavor: h100, count: 2, allocatable: {nvidia.com/gpu: 8}}\n";

#[test]
fn nodes_are_named_labelled_and_tainted_per_flavor() {
    let nodes = "  - flavor: h100
    count: 3
    allocatable: {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti, pods: 110}
    labels: {example.com/rack: [r1, r2], zone: 1}
  - {flavor: h100, allocatable: {nvidia.com/gpu: 4}, labels: {example.com/rack: r3}}
";
    let text = format!(
        "{}{}",
        cluster(16, "  topologyKey: example.com/rack\n"),
        trace(nodes, &[job("a", "0s", 1, 1, "1m", "")])
    );
    let s = scenario::load("nodes.yaml", &text).unwrap_or_else(|e| panic!("{e:#?}"));
    let node = |name: &str, rack: &str, zone: Option<&str>, allocatable: &[(&str, i64)]| {
        let mut labels = BTreeMap::from([
            ("gpu".to_string(), "h100".to_string()),
            ("example.com/rack".to_string(), rack.to_string()),
        ]);
        if let Some(z) = zone {
            labels.insert("zone".into(), z.into());
        }
        ScenarioNode {
            flavor: "h100".into(),
            spec: NodeSpec {
                name: name.into(),
                labels,
                taints: vec![Taint {
                    key: "nvidia.com/gpu".into(),
                    value: Some("present".into()),
                    effect: TaintEffect::NoSchedule,
                }],
                allocatable: allocatable.iter().map(|&(r, a)| (r.to_string(), a)).collect(),
                schedulable: true,
            },
        }
    };
    let big = [
        ("nvidia.com/gpu", 8_000),
        ("cpu", 96_000),
        ("memory", 1_000 << 40),
        ("pods", 110_000),
    ];
    // A list of values goes round-robin; a single value (a number here)
    // is every node's; count defaults to 1; names go on across entries.
    assert_eq!(
        s.nodes,
        vec![
            node("h100-0", "r1", Some("1"), &big),
            node("h100-1", "r2", Some("1"), &big),
            node("h100-2", "r1", Some("1"), &big),
            node("h100-3", "r3", None, &[("nvidia.com/gpu", 4_000)]),
        ]
    );
    // topology: required marks the pod set it makes: a generator's `main`,
    // a gang member's own (each member asks for itself).
    let asks = text.replace(
        "  jobs:\n",
        "  generators:\n  - {class: g, count: 1, interval: 1m, duration: 1m, requests: {nvidia.com/gpu: 8}, namespace: team, queue: jobs, topology: required}\n  jobs:\n",
    ) + &job("learner", "0s", 1, 8, "1m", ", gang: rl, topology: required")
        + &job("actors", "0s", 4, 1, "1m", ", gang: rl");
    let s = scenario::load("nodes.yaml", &asks).unwrap_or_else(|e| panic!("{e:#?}"));
    let single = |name: &str| {
        let w = s.workloads.iter().find(|w| w.name == name).unwrap();
        w.require_single_domain.iter().cloned().collect::<Vec<_>>()
    };
    assert_eq!(single("team/g-jobs-0"), ["main"]);
    assert_eq!(single("team/rl"), ["learner"]);
    assert!(single("team/a").is_empty());

    // A scenario without nodes has none, and runs on quota alone.
    let plain =
        format!("{}{}", cluster(16, ""), trace("", &[job("a", "0s", 1, 1, "1m", "")])).replace("  nodes:\n", "");
    let s = scenario::load("plain.yaml", &plain).unwrap();
    assert!(s.nodes.is_empty());
    let (r, result) = run(&plain);
    assert!(result.placement.is_none() && r.placement.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("placement").is_none());
    assert!(json["workloads"][0].get("nodeWaitMs").is_none());
    assert!(!report::table::render(&r).contains("Placement on nodes"));
}

#[test]
fn bad_nodes_are_errors_naming_the_field() {
    // The cluster is 17 lines, the Trace's `---` line 18: `nodes:` is on
    // line 23, its first entry on line 24, the first job on line 26
    // (one line later with a topologyKey).
    let one = |nodes: &str| {
        errors(&format!(
            "{}{}",
            cluster(16, ""),
            trace(nodes, &[job("a", "0s", 1, 1, "1m", "")])
        ))
    };
    assert_eq!(
        one("  - {flavor: h10, count: 2, allocatable: {nvidia.com/gpu: 8}}\n"),
        ["bad.yaml:24:14: spec.nodes[0].flavor: `h10` is not a ResourceFlavor of the scenario, did you mean `h100`?"]
    );
    assert_eq!(
        one("  - {flavor: h100, count: 0, allocatable: {nvidia.com/gpu: 8}}\n"),
        ["bad.yaml:24:20: spec.nodes[0].count: count must be at least 1"]
    );
    assert_eq!(
        one("  - {flavor: h100, allocatable: {}}\n"),
        [
            "bad.yaml:24:20: spec.nodes[0].allocatable: a node needs at least one allocatable resource, e.g. {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}"
        ]
    );
    assert_eq!(
        one("  - {flavor: h100, allocatable: {nvidia.com/gpu: lots}}\n"),
        [
            "bad.yaml:24:50: spec.nodes[0].allocatable.nvidia.com/gpu: quantity \"lots\" is not a Kubernetes quantity (expected forms like 8, 500m, 1.5, 64Gi, 1e3)"
        ]
    );
    assert_eq!(
        one("  - {flavor: h100, allocatable: {nvidia.com/gpu: 8}, labels: {gpu: a100}}\n"),
        [
            "bad.yaml:24:63: spec.nodes[0].labels[gpu]: ResourceFlavor h100 gives its nodes gpu=h100: a node's labels add to its flavor's, they cannot change them"
        ]
    );
    assert_eq!(
        one("  - {flavor: h100, allocatable: {nvidia.com/gpu: 8}, labels: {rack: []}}\n"),
        ["bad.yaml:24:63: spec.nodes[0].labels[rack]: give a value, or a list of at least one"]
    );
    assert_eq!(
        one("  - {flavor: h100, allocatable: {nvidia.com/gpu: 8}, labels: {rack: {r: 1}}}\n"),
        [
            "bad.yaml:24:69: spec.nodes[0].labels.rack: invalid type: map, expected a label value, or a list of values spread over the nodes"
        ]
    );
    assert_eq!(
        one("  - {flavor: h100, alocatable: {nvidia.com/gpu: 8}}\n"),
        [
            "bad.yaml:24:20: spec.nodes[0].alocatable: unknown field `alocatable`, expected one of flavor, count, allocatable, labels"
        ]
    );
    // Work that could never be placed: a resource no node has.
    let text = format!(
        "{}{}",
        cluster(16, ""),
        trace(
            "  - {flavor: h100, allocatable: {cpu: 8}}\n",
            &[job("a", "0s", 1, 1, "1m", "")]
        )
    );
    assert_eq!(
        errors(&text),
        [
            "bad.yaml:23:3: spec.nodes: team/a requests nvidia.com/gpu, which no node has allocatable: its pods would fit nowhere"
        ]
    );

    // A flavor with a topologyKey: its nodes need that label.
    let text = format!(
        "{}{}",
        cluster(16, "  topologyKey: rack\n"),
        trace(EIGHT_GPUS, &[job("a", "0s", 1, 1, "1m", "")])
    );
    assert_eq!(
        errors(&text),
        [
            "bad.yaml:25:5: spec.nodes[0].labels: ResourceFlavor h100 has topologyKey rack: its nodes need the label rack (e.g. labels: {rack: [a, b]}), or they are in no topology domain"
        ]
    );

    // A ClusterQueue's flavor without nodes: its work would never be placed.
    let two_flavors = cluster(16, "").replace(
        "flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 16}]}]",
        "flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 16}]}, {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]",
    ) + "---\napiVersion: sluice.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a100}\nspec: {nodeLabels: {gpu: a100}}\n";
    let text = format!("{two_flavors}{}", trace(EIGHT_GPUS, &[job("a", "0s", 1, 1, "1m", "")]));
    assert_eq!(
        errors(&text),
        [
            "bad.yaml:28:3: spec.nodes: ResourceFlavor a100 (quota of ClusterQueue team) has no node: with spec.nodes a workload is admitted only where its pods fit, so its work would wait for ever; add nodes with flavor: a100"
        ]
    );

    // topology: required needs nodes, and takes one value.
    let no_nodes = format!(
        "{}{}",
        cluster(16, ""),
        trace("", &[job("a", "0s", 2, 8, "1m", ", topology: required")])
    )
    .replace("  nodes:\n", "");
    assert_eq!(
        errors(&no_nodes),
        [
            "bad.yaml:24:122: spec.jobs[0].topology: topology: required places pods on nodes, and this Trace declares none (spec.nodes)"
        ]
    );
    let typo = format!(
        "{}{}",
        cluster(16, ""),
        trace(EIGHT_GPUS, &[job("a", "0s", 2, 8, "1m", ", topology: requird")])
    );
    assert_eq!(
        errors(&typo),
        ["bad.yaml:26:122: spec.jobs[0].topology: unknown variant `requird`, expected one of required"]
    );
}

/// Two nodes of 8 GPUs, 16 GPUs of quota, no preemption.
/// - a, b, d, e: 4 GPUs each at 0, for 1h, 2h, 3h and 1h. Best fit puts a
///   and b on h100-0 (both empty: the first; then the fullest that fits),
///   d and e on h100-1. All 16 GPUs are in use.
/// - y: one pod of 8 GPUs at 30m, for 1h. Until 1h the quota is full: it
///   waits for quota (30m). At 1h a and e finish: 8 GPUs of quota are
///   free, but 4 on each node: it waits for a node (NoPlacement) until b
///   finishes at 2h and h100-0 is empty, then runs 2h–3h.
///
/// On quota alone (no nodes) y would start at 1h.
#[test]
fn an_eight_gpu_pod_waits_for_a_whole_node_while_quota_is_free() {
    let jobs = [
        job("a", "0s", 1, 4, "1h", ""),
        job("b", "0s", 1, 4, "2h", ""),
        job("d", "0s", 1, 4, "3h", ""),
        job("e", "0s", 1, 4, "1h", ""),
        job("y", "30m", 1, 8, "1h", ""),
    ];
    let text = format!("{}{}", cluster(16, ""), trace(EIGHT_GPUS, &jobs));
    let (r, result) = run(&text);
    let y = 4;
    assert_eq!(result.workloads[y].name, "team/y");
    assert_eq!(result.records[y].first_start(), Some(120 * MIN));
    let split = result.placement.as_ref().expect("nodes were declared").waits[y];
    assert_eq!((split.nodes_ms, split.other_ms), (60 * MIN, 30 * MIN));
    // While y waited for a node, the queue used 8 of its 16 GPUs.
    let samples = &result.queues[0].samples;
    let at = |t: i64| samples.iter().rev().find(|s| s.at <= t).unwrap().used[0];
    assert_eq!((at(30 * MIN), at(60 * MIN), at(119 * MIN)), (16_000, 8_000, 8_000));
    // Nobody else waited.
    for (i, w) in result.placement.as_ref().unwrap().waits.iter().enumerate() {
        if i != y {
            assert_eq!((w.nodes_ms, w.other_ms), (0, 0), "{}", result.workloads[i].name);
        }
    }
    let yw = &r.workloads[y];
    assert_eq!(
        (yw.wait_ms, yw.node_wait_ms, yw.quota_wait_ms),
        (Some(90 * MIN), Some(60 * MIN), Some(30 * MIN))
    );

    // The same trace on quota alone: y starts when a and e finish.
    let quota_only = text.replace(EIGHT_GPUS, "").replace("  nodes:\n", "");
    let (plain, result) = run(&quota_only);
    assert!(plain.placement.is_none());
    assert_eq!(result.records[y].first_start(), Some(60 * MIN));
}

/// The report's split: the run above, summed per ClusterQueue and for the
/// cluster, in the JSON and the terminal table.
#[test]
fn the_report_splits_waiting_for_nodes_from_waiting_for_quota() {
    let jobs = [
        job("a", "0s", 1, 4, "1h", ""),
        job("b", "0s", 1, 4, "2h", ""),
        job("d", "0s", 1, 4, "3h", ""),
        job("e", "0s", 1, 4, "1h", ""),
        job("y", "30m", 1, 8, "1h", ""),
    ];
    let (r, result) = run(&format!("{}{}", cluster(16, ""), trace(EIGHT_GPUS, &jobs)));
    let p = r.placement.as_ref().expect("a placement section");
    assert_eq!((p.nodes, p.gpus, p.waited_for_nodes), (2, 16.0, 1));
    assert!((p.node_wait_hours - 1.0).abs() < 1e-9);
    assert!((p.quota_wait_hours - 0.5).abs() < 1e-9);
    assert_eq!(p.flavors.len(), 1);
    let f = &p.flavors[0];
    assert_eq!(
        (f.flavor.as_str(), f.nodes, f.gpus, f.gpu_quota),
        ("h100", 2, 16.0, 16.0)
    );
    assert_eq!((f.topology_key.as_deref(), f.domains), (None, None));
    let q = &p.cluster_queues[0];
    assert_eq!((q.name.as_str(), q.workloads, q.waited_for_nodes), ("team", 5, 1));
    assert!((q.node_wait_hours - 1.0).abs() < 1e-9 && (q.quota_wait_hours - 0.5).abs() < 1e-9);

    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["placement"]["nodeWaitHours"], 1.0);
    assert_eq!(json["placement"]["quotaWaitHours"], 0.5);
    assert_eq!(json["placement"]["clusterQueues"][0]["waitedForNodes"], 1);
    assert_eq!(json["workloads"][4]["nodeWaitMs"], 60 * MIN);
    assert_eq!(json["workloads"][4]["quotaWaitMs"], 30 * MIN);
    assert_eq!(json["workloads"][0]["nodeWaitMs"], 0);

    let table = report::table::render(&r);
    let section = &table[table.find("Placement on nodes").expect("the section")..];
    assert!(
        section.starts_with("Placement on nodes (2 nodes, 16 GPUs;"),
        "{section}"
    );
    let row = |name: &str| {
        section
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name) && !l.contains("queue"))
            .unwrap_or_else(|| panic!("no {name} row in {section}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row("h100"), ["h100", "2", "16", "16", "—"]);
    assert_eq!(row("team"), ["team", "1", "1.0", "0.5", "67%"]);
    assert_eq!(row("cluster"), ["cluster", "1", "1.0", "0.5", "67%"]);
    // Every column of the queue table is explained, in both reports.
    for column in ["waited for nodes", "node wait h / quota wait h", "node share"] {
        assert!(
            section.contains(&format!("  {column}: ")),
            "{column} unexplained: {section}"
        );
    }
    let html = report::html::render(&r, &result);
    assert!(html.contains("<h2>Placement on nodes</h2>"));
    let lede = &html[html.find("<h2>Placement on nodes</h2>").unwrap()..];
    let lede = &lede[..lede.find("</p>").unwrap()];
    for column in ["Node wait", "Quota wait", "Waited for nodes", "node share"] {
        assert!(lede.contains(&format!("{column}: ")), "{column} unexplained: {lede}");
    }
}

/// Four nodes of 8 GPUs in two racks (h100-0 and h100-2 in r1, h100-1 and
/// h100-3 in r2), 32 GPUs of quota.
/// - p0–p3: 8 GPUs each at 0, one per node, for 1h, 1h, 3h and 2h.
/// - pair: 2 pods × 8 GPUs at 1h that must run in one rack. At 1h h100-0
///   (r1) and h100-1 (r2) are empty: 16 GPUs of quota and two whole nodes
///   are free, but not in one rack. At 2h p3 leaves h100-3 and r2 has two
///   empty nodes: pair runs 2h–3h. Without `topology: required` it would
///   start at 1h.
#[test]
fn a_pod_set_that_requires_one_domain_waits_for_room_in_one_rack() {
    let nodes = "  - {flavor: h100, count: 4, allocatable: {nvidia.com/gpu: 8}, labels: {rack: [r1, r2]}}\n";
    let jobs = |pair: &str| {
        [
            job("p0", "0s", 1, 8, "1h", ""),
            job("p1", "0s", 1, 8, "1h", ""),
            job("p2", "0s", 1, 8, "3h", ""),
            job("p3", "0s", 1, 8, "2h", ""),
            job("pair", "1h", 2, 8, "1h", pair),
        ]
    };
    let text = |pair: &str| format!("{}{}", cluster(32, "  topologyKey: rack\n"), trace(nodes, &jobs(pair)));
    let (r, result) = run(&text(", topology: required"));
    let pair = 4;
    assert_eq!(result.workloads[pair].name, "team/pair");
    assert!(result.workloads[pair].require_single_domain.contains("pair"));
    assert_eq!(result.records[pair].first_start(), Some(120 * MIN));
    let split = result.placement.as_ref().unwrap().waits[pair];
    assert_eq!((split.nodes_ms, split.other_ms), (60 * MIN, 0));
    let f = &r.placement.as_ref().unwrap().flavors[0];
    assert_eq!((f.topology_key.as_deref(), f.domains), (Some("rack"), Some(2)));

    let (_, result) = run(&text(""));
    assert_eq!(result.records[pair].first_start(), Some(60 * MIN));
}
