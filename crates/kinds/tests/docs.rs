//! What the documents say is queued and watched, against the registry
//! (`JobKind::ALL`): every place that lists the queued kinds names each one,
//! so a kind added to the registry fails here until the docs name it.

use std::path::Path;

use sluice_kinds::JobKind;

fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The paragraph (text between blank lines) of `doc` that contains `marker`.
fn paragraph<'a>(doc: &'a str, file: &str, marker: &str) -> &'a str {
    doc.split("\n\n")
        .find(|p| p.contains(marker))
        .unwrap_or_else(|| panic!("{file}: no paragraph containing {marker:?}"))
}

/// The line of `doc` that starts with `start`.
fn line<'a>(doc: &'a str, file: &str, start: &str) -> &'a str {
    doc.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("{file}: no line starting with {start:?}"))
}

/// Every queued kind's name (`RayCluster`, `TrainJob`, …) is in `text`;
/// the failure names the place and the missing kinds.
fn names_every_kind(text: &str, place: &str) {
    let missing: Vec<&str> = JobKind::ALL
        .iter()
        .map(|k| k.kind())
        .filter(|kind| !text.contains(kind))
        .collect();
    assert!(
        missing.is_empty(),
        "{place} does not name the queued kind(s) {missing:?} (JobKind::ALL): {text}"
    );
}

/// docs/controller.md opens (the paragraph under its title) with what the
/// controller watches.
#[test]
fn the_controller_doc_says_every_queued_kind_is_watched() {
    let doc = read("docs/controller.md");
    let opening = doc
        .split("\n\n")
        .nth(1)
        .expect("docs/controller.md has a first paragraph");
    names_every_kind(opening, "docs/controller.md's first paragraph");
}

/// The `--integrations` row lists every kind's flag name but batch/job's,
/// which is always on.
#[test]
fn the_integrations_flag_row_lists_every_kind() {
    let doc = read("docs/controller.md");
    let row = line(&doc, "docs/controller.md", "| `--integrations` |");
    for k in JobKind::ALL.into_iter().filter(|k| *k != JobKind::Job) {
        assert!(
            row.contains(&format!("`{}`", k.flag_name())),
            "docs/controller.md's --integrations row does not list `{}`: {row}",
            k.flag_name()
        );
    }
}

/// docs/install.md says, in three places, which kinds are queued and
/// watched.
#[test]
fn the_install_doc_names_every_queued_kind() {
    let doc = read("docs/install.md");
    for marker in [
        "labelled `sluice.dev/queue` stay",
        "`sluice.dev/default-queue: enabled` (Namespace labels are a cluster",
        "To see all of this, the controller watches every Job",
    ] {
        let text = paragraph(&doc, "docs/install.md", marker);
        names_every_kind(text, &format!("docs/install.md's paragraph with {marker:?}"));
    }
}

/// docs/integrations.md has a row per kind, starting with its apiVersion
/// and kind.
#[test]
fn the_integrations_doc_has_a_row_per_kind() {
    let doc = read("docs/integrations.md");
    for k in JobKind::ALL {
        let start = format!("| `{}` {}", k.api_version(), k.kind());
        assert!(
            doc.lines().any(|l| l.starts_with(&start)),
            "docs/integrations.md has no row starting {start:?}"
        );
    }
}

/// The README's layout table says what `crates/kinds` queues.
#[test]
fn the_readme_names_every_queued_kind() {
    let doc = read("README.md");
    let row = line(&doc, "README.md", "| `crates/kinds` |");
    names_every_kind(row, "README.md's crates/kinds row");
}

/// The webhook's README lists every other kind's endpoint, and the kinds
/// it watches to verify owners (`JobKind::webhook_access`).
#[test]
fn the_webhook_readme_lists_every_kind_and_its_rbac() {
    let doc = read("crates/webhook/README.md");
    let file = "crates/webhook/README.md";
    let row = line(&doc, file, "| `POST /mutate/<plural>` for every other queued kind");
    for k in JobKind::others() {
        assert!(
            row.contains(&format!("`{}`", k.plural())),
            "{file}'s /mutate/<plural> row does not list `{}`: {row}",
            k.plural()
        );
        assert!(
            row.contains(k.kind()),
            "{file}'s /mutate/<plural> row does not name {}",
            k.kind()
        );
    }
    let rbac = paragraph(&doc, file, "RBAC the webhook needs");
    for k in JobKind::ALL {
        for access in k.webhook_access() {
            let named = format!("`{}.{}`", access.resource, access.group);
            assert!(
                rbac.contains(&named),
                "{file}'s RBAC paragraph does not name {named} (JobKind::webhook_access): {rbac}"
            );
        }
    }
}
