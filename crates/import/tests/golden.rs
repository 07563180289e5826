//! Golden tests: every Kueue sample `tests/samples/<name>.kueue.yaml`
//! (written from Kueue's documented API: its site's examples and
//! concept pages, v1beta1 and v1beta2) is imported, and
//!
//! - its Sluice manifests equal `<name>.sluice.yaml` and its report (the
//!   notes, the controller flags and chart values) `<name>.notes.txt`;
//! - the manifests read back as Sluice objects that pass Sluice's
//!   validation and carry no field the CRDs do not declare (what the API
//!   server would prune);
//! - a strict import fails exactly when a note says "not supported",
//!   listing each of them.
//!
//! `SLUICE_BLESS=1 cargo test -p sluice-import --test golden` writes the
//! expected files from the importer's output; review the diff.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_api::validation::Validate;
use sluice_api::{parse_manifests, strict};
use sluice_import::{Status, import};

fn samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".kueue.yaml"))
        .collect();
    files.sort();
    files
}

/// The documents of a YAML stream, as JSON.
fn documents(text: &str) -> Vec<Value> {
    parse_manifests(text)
        .unwrap()
        .into_iter()
        .map(|d| d.as_other().expect("a Kueue document, not a Sluice one").value.clone())
        .collect()
}

fn expected(sample: &Path, suffix: &str) -> PathBuf {
    let name = sample.to_string_lossy().replace(".kueue.yaml", suffix);
    PathBuf::from(name)
}

/// `got` is what `path` holds; with SLUICE_BLESS set, it is written there.
fn golden(path: &Path, got: &str) -> Result<(), String> {
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(path, got).unwrap();
        return Ok(());
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    if want == got {
        return Ok(());
    }
    Err(format!(
        "{} differs from the importer's output (SLUICE_BLESS=1 cargo test -p sluice-import --test golden writes it):\n--- expected\n{want}\n--- got\n{got}",
        path.display()
    ))
}

#[test]
fn every_sample_imports_as_its_golden_files() {
    let mut failures = Vec::new();
    for sample in samples() {
        let docs = documents(&std::fs::read_to_string(&sample).unwrap());
        let out = import(&docs, false).unwrap_or_else(|e| panic!("{}: {e}", sample.display()));
        for (suffix, got) in [(".sluice.yaml", out.manifests()), (".notes.txt", out.report())] {
            if let Err(e) = golden(&expected(&sample, suffix), &got) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What is printed is what Sluice takes: each document reads as a Sluice
/// object, passes `validate()` and has only fields its CRD declares.
#[test]
fn every_samples_manifests_are_valid_sluice_objects() {
    for sample in samples() {
        let out = import(&documents(&std::fs::read_to_string(&sample).unwrap()), false).unwrap();
        let read = parse_manifests(&out.manifests()).unwrap();
        assert_eq!(read.len(), out.objects.len(), "{}", sample.display());
        for (doc, value) in read.iter().zip(&out.objects) {
            let object = doc
                .as_sluice()
                .unwrap_or_else(|| panic!("{}: not a Sluice object: {value}", sample.display()));
            assert_eq!(object.validate(), [], "{}: {value}", sample.display());
            let crd = strict::crd_of(object.kind()).unwrap();
            assert_eq!(strict::unknown_fields(crd, value), [], "{}: {value}", sample.display());
        }
    }
}

#[test]
fn a_strict_import_fails_exactly_on_the_unsupported_fields() {
    for sample in samples() {
        let docs = documents(&std::fs::read_to_string(&sample).unwrap());
        let unsupported: Vec<String> = (import(&docs, false).unwrap().notes.into_iter())
            .filter(|n| n.status == Status::Unsupported)
            .map(|n| format!("{}: {}", n.place, n.message))
            .collect();
        match import(&docs, true) {
            Ok(_) => assert_eq!(unsupported, Vec::<String>::new(), "{}", sample.display()),
            Err(sluice_import::ImportError::Strict(listed)) => {
                assert_eq!(listed, unsupported, "{}", sample.display())
            }
            Err(e) => panic!("{}: {e}", sample.display()),
        }
    }
}

/// The samples cover what issue #33 asks for: a single queue, cohorts with
/// limits, hierarchical cohorts with weights, several flavors, preemption,
/// both API versions, Kueue's Configuration, and what Sluice lacks.
#[test]
fn the_samples_cover_each_kind_of_configuration() {
    let names: Vec<String> = samples()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().replace(".kueue.yaml", ""))
        .collect();
    for want in [
        "single-clusterqueue",
        "cohort-borrowing-lending",
        "hierarchical-cohorts-fair-sharing",
        "multiple-flavors",
        "preemption",
        "unsupported-admission-checks-multikueue-tas",
        "configuration-v1beta1",
        "configuration-v1beta2",
    ] {
        assert!(names.iter().any(|n| n == want), "no sample {want} in {names:?}");
    }
    let text: String = samples().iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    for version in [
        "kueue.x-k8s.io/v1beta1",
        "kueue.x-k8s.io/v1beta2",
        "config.kueue.x-k8s.io/v1beta1",
        "config.kueue.x-k8s.io/v1beta2",
    ] {
        assert!(text.contains(&format!("apiVersion: {version}")), "no {version} sample");
    }
}
