//! `sluice import kueue` and `sluice simulate --kueue`, run as the binary:
//! what they print, where, and their exit codes; an imported sample and a
//! trace give the very `--json` text of their hand-written Sluice
//! equivalent.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn root(path: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../")).join(path)
}

fn sample(name: &str) -> PathBuf {
    root(&format!("import/tests/samples/{name}"))
}

fn sluice(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        let mut input = input;
        input.write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-cli-kueue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Manifests on stdout, the report on stderr: the golden files of the
/// import crate; the same from stdin.
#[test]
fn import_prints_the_manifests_and_the_report_of_the_golden_files() {
    for name in ["preemption", "configuration-v1beta1"] {
        let input = sample(&format!("{name}.kueue.yaml"));
        let out = sluice(&["import", "kueue", input.to_str().unwrap()], None);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let golden = |suffix: &str| std::fs::read_to_string(sample(&format!("{name}{suffix}"))).unwrap();
        assert_eq!(text(&out.stdout), golden(".sluice.yaml"), "{name}");
        assert_eq!(text(&out.stderr), golden(".notes.txt"), "{name}");
        let piped = sluice(
            &["import", "kueue", "-"],
            Some(&std::fs::read_to_string(&input).unwrap()),
        );
        assert_eq!(
            (text(&piped.stdout), text(&piped.stderr)),
            (golden(".sluice.yaml"), golden(".notes.txt"))
        );
    }
}

/// `--strict` with fields Sluice lacks: exit 1, each listed, nothing on
/// stdout; `--out` and `--chart-values` write files.
#[test]
fn strict_fails_listing_the_paths_and_out_writes_files() {
    let input = sample("unsupported-admission-checks-multikueue-tas.kueue.yaml");
    let out = sluice(&["import", "kueue", "--strict", input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let err = text(&out.stderr);
    assert!(
        err.starts_with("sluice: strict import: 10 field(s) Sluice does not support:\n"),
        "{err}"
    );
    assert!(
        err.contains("\n  ClusterQueue tas-cluster-queue: spec.admissionChecksStrategy: not copied:"),
        "{err}"
    );
    let (manifests, values) = (scratch("out.yaml"), scratch("values.yaml"));
    let config = sample("configuration-v1beta1.kueue.yaml");
    let queues = sample("single-clusterqueue.kueue.yaml");
    let out = sluice(
        &[
            "import",
            "kueue",
            queues.to_str().unwrap(),
            config.to_str().unwrap(),
            "--out",
            manifests.to_str().unwrap(),
            "--chart-values",
            values.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    let written = std::fs::read_to_string(&manifests).unwrap();
    assert_eq!(
        written,
        std::fs::read_to_string(sample("single-clusterqueue.sluice.yaml")).unwrap()
    );
    let values = std::fs::read_to_string(&values).unwrap();
    assert!(values.starts_with("controller:\n"), "{values}");
    assert!(values.contains("podsReadyTimeout: 5m"), "{values}");
}

/// `sluice simulate --kueue SAMPLE --trace TRACE --json` prints exactly what
/// the hand-written Sluice scenario prints; so does one scenario file
/// holding the Kueue documents and the trace.
#[test]
fn an_imported_sample_simulates_byte_for_byte_as_its_hand_written_equivalent() {
    let kueue = sample("hierarchical-cohorts-fair-sharing.kueue.yaml");
    let trace = root("simulate/tests/kueue/hierarchical.trace.yaml");
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    let fair = "spec:\n  fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}\n";
    let by_hand = scratch("by-hand.yaml");
    let sluice_text = std::fs::read_to_string(root("simulate/tests/kueue/hierarchical.sluice.yaml")).unwrap();
    std::fs::write(
        &by_hand,
        format!("{sluice_text}---\n{}", trace_text.replacen("spec:\n", fair, 1)),
    )
    .unwrap();
    let joined = scratch("joined.yaml");
    let kueue_text = std::fs::read_to_string(&kueue).unwrap();
    std::fs::write(&joined, format!("{kueue_text}---\n{trace_text}")).unwrap();

    let hand = sluice(&["simulate", "--json", "-q", by_hand.to_str().unwrap()], None);
    assert!(hand.status.success(), "{}", text(&hand.stderr));
    let flags = sluice(
        &[
            "simulate",
            "--json",
            "-q",
            "--kueue",
            kueue.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        None,
    );
    assert!(flags.status.success(), "{}", text(&flags.stderr));
    let one_file = sluice(&["simulate", "--json", "-q", joined.to_str().unwrap()], None);
    assert!(one_file.status.success(), "{}", text(&one_file.stderr));
    assert_eq!(text(&flags.stdout), text(&hand.stdout));
    assert_eq!(text(&one_file.stdout), text(&hand.stdout));
    // The importer's notes, on stderr.
    assert!(
        text(&flags.stderr).contains("note: Configuration: waitForPodsReady (mapped, with a difference): "),
        "{}",
        text(&flags.stderr)
    );
}

/// An error in the --trace file is reported in that file, at its line.
#[test]
fn an_error_in_the_trace_is_placed_in_the_trace_file() {
    let kueue = sample("cohort-borrowing-lending.kueue.yaml");
    let trace = scratch("bad.trace.yaml");
    std::fs::write(
        &trace,
        "apiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec:\n  jobs:\n  - {name: a, arrival: 0s, namespace: team-a, queue: nope, pods: 1, requests: {cpu: 1}, duration: 1m}\n",
    )
    .unwrap();
    let out = sluice(
        &[
            "simulate",
            "-q",
            "--kueue",
            kueue.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.starts_with(&format!("error: {}:5:", trace.display())), "{err}");
}

/// Input with nothing to import — a Deployment, a text file, a file of
/// comments — exits 1 with one line saying so at the place, and prints no
/// manifests; a Deployment beside Kueue's objects is only noted.
#[test]
fn nothing_to_import_is_an_error_of_one_line() {
    let deployment = scratch("deployment.yaml");
    std::fs::write(
        &deployment,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n",
    )
    .unwrap();
    let notes = scratch("notes.txt");
    std::fs::write(&notes, "hello world\nthis is not YAML of objects\n").unwrap();
    let comments = scratch("comments.yaml");
    std::fs::write(&comments, "# nothing here\n").unwrap();
    for (file, said) in [
        (
            &deployment,
            ":1: nothing to import: apps/v1 Deployment is not a Kueue ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass or Configuration\n",
        ),
        (
            &notes,
            ":1:1: not a Kubernetes object: expected a YAML mapping with apiVersion and kind, found text (a YAML string)\n",
        ),
        (&comments, ": nothing to import: no YAML document in it\n"),
    ] {
        let out = sluice(&["import", "kueue", file.to_str().unwrap()], None);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "");
        assert_eq!(text(&out.stderr), format!("sluice: {}{said}", file.display()));
    }
    // Beside a Kueue object, the Deployment is a note and the import goes on.
    let queues = sample("single-clusterqueue.kueue.yaml");
    let out = sluice(
        &[
            "import",
            "kueue",
            queues.to_str().unwrap(),
            deployment.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("(apps/v1 Deployment) (not supported): not a Kueue object: left out"),
        "{}",
        text(&out.stderr)
    );
}

/// YAML that does not parse: one line, at the line and column of the file
/// (not of the document), exit 1.
#[test]
fn a_yaml_error_is_one_line_at_its_place_in_the_file() {
    let bad = scratch("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: a\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata:\n  name: q\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu\n    flavors: []\n",
    )
    .unwrap();
    let out = sluice(&["import", "kueue", bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("sluice: {}:14:12: illegal placement of ':' indicator\n", bad.display())
    );
}
