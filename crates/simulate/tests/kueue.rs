//! Kueue's documents in a scenario are read through the importer: an
//! imported sample plus a trace simulates exactly as its hand-written
//! Sluice equivalent (the same `sluice simulate --json` text), Kueue's
//! Configuration sets the fair sharing unless the Trace does, the
//! importer's notes come back, and what the importer refuses is an error
//! at the Kueue document.

use sluice_simulate::scenario::{self, LoadOptions};
use sluice_simulate::{report, sim};

fn read(path: &str) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
    std::fs::read_to_string(format!("{root}{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What `sluice simulate --json` prints for `text`, and the importer's notes.
fn simulate_json(text: &str) -> (String, Vec<String>) {
    let (s, manifests) = scenario::load_with("scenario.yaml", text, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e:#?}\n{text}"));
    let opts = sim::SimOptions::default();
    let result = sim::run(&s, &opts, &mut |_| {}).unwrap();
    let json = serde_json::to_string_pretty(&report::build(&s.name, &opts, &result)).unwrap() + "\n";
    (json, manifests.kueue_notes)
}

const SAMPLES: &str = "import/tests/samples/";
const FAIR: &str =
    "spec:\n  fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}\n";

/// Kueue's v1beta1 cohort sample (no Configuration: Sluice's fair sharing)
/// and a trace where team A borrows and team B reclaims.
#[test]
fn an_imported_cohort_simulates_as_its_hand_written_equivalent() {
    let trace = read("simulate/tests/kueue/cohort.trace.yaml");
    let kueue = read(&format!("{SAMPLES}cohort-borrowing-lending.kueue.yaml"));
    let (imported, notes) = simulate_json(&format!("{kueue}---\n{trace}"));
    let (by_hand, _) = simulate_json(&format!(
        "{}---\n{trace}",
        read("simulate/tests/kueue/cohort.sluice.yaml")
    ));
    assert_eq!(imported, by_hand);
    assert_eq!(notes, Vec::<String>::new());
    // The replay did something: B reclaimed what A borrowed.
    let report: serde_json::Value = serde_json::from_str(&imported).unwrap();
    assert!(report["totals"]["preemptions"].as_u64() > Some(0), "{report:#}");
}

/// Kueue's v1beta2 cohort tree with weights and its Configuration (fair
/// sharing on, both strategies): the same as the hand-written objects with
/// the Trace's spec.fairSharing saying so; with fair sharing off in the
/// Configuration, the same as the Trace saying `enable: false`.
#[test]
fn an_imported_cohort_tree_simulates_as_its_hand_written_equivalent_with_kueues_fair_sharing() {
    let trace = read("simulate/tests/kueue/hierarchical.trace.yaml");
    let sluice = read("simulate/tests/kueue/hierarchical.sluice.yaml");
    let kueue = read(&format!("{SAMPLES}hierarchical-cohorts-fair-sharing.kueue.yaml"));
    let (imported, notes) = simulate_json(&format!("{kueue}---\n{trace}"));
    let (by_hand, _) = simulate_json(&format!("{sluice}---\n{}", trace.replacen("spec:\n", FAIR, 1)));
    assert_eq!(imported, by_hand);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("Configuration: waitForPodsReady (mapped, with a difference)")),
        "{notes:#?}"
    );
    // v1beta2 without fairSharing: off, as Kueue.
    let off = kueue.replace(
        "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n",
        "",
    );
    assert_ne!(off, kueue);
    let (imported_off, _) = simulate_json(&format!("{off}---\n{trace}"));
    let (by_hand_off, _) = simulate_json(&format!(
        "{sluice}---\n{}",
        trace.replacen("spec:\n", "spec:\n  fairSharing: {enable: false}\n", 1)
    ));
    assert_eq!(imported_off, by_hand_off);
    assert_ne!(imported_off, imported, "fair sharing changes this replay");
    // The Trace's own setting wins over the Configuration's.
    let (traced, _) = simulate_json(&format!("{off}---\n{}", trace.replacen("spec:\n", FAIR, 1)));
    assert_eq!(traced, imported);
}

/// A Kueue document the importer refuses is an error at its first line;
/// Kueue's kinds without a Sluice counterpart leave the scenario.
#[test]
fn what_the_importer_refuses_is_an_error_at_the_kueue_document() {
    let trace = read("simulate/tests/kueue/cohort.trace.yaml");
    let kueue = read(&format!("{SAMPLES}cohort-borrowing-lending.kueue.yaml"));
    let bad = kueue.replacen("        lendingLimit: 1\n", "        lendingLimit: 100\n", 1);
    let errors = scenario::load("scenario.yaml", &format!("{bad}---\n{trace}"))
        .err()
        .unwrap();
    let lines: Vec<&str> = bad.lines().collect();
    let name = lines.iter().position(|l| *l == "  name: \"team-b-cq\"").unwrap();
    // The document's first line.
    let line = 1 + (0..name).rev().find(|i| lines[*i].starts_with("apiVersion:")).unwrap();
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!(
            "scenario.yaml:{line}:1: ClusterQueue team-b-cq: Sluice would refuse the translation: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be at most nominalQuota (12), got 100"
        )]
    );
    let extra = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: kueue.x-k8s.io/provisioning-request}\n---\n";
    let (_, notes) = simulate_json(&format!("{extra}{kueue}---\n{trace}"));
    assert_eq!(
        notes,
        [
            "AdmissionCheck prov (not supported): not copied: admission checks (ProvisioningRequest, MultiKueue) are not implemented"
        ]
    );
}
