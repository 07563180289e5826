//! The kinds as the Helm chart reads them (`charts/sluice/files/kinds.yaml`):
//! the controller's and the webhook's RBAC rules for them, and the kinds
//! the webhook configurations list. Generated from the registry; the chart
//! tests fail when the file differs (`SLUICE_BLESS=1` writes it).

use std::fmt::Write as _;

use crate::{Access, JobKind};

/// The text of `charts/sluice/files/kinds.yaml`.
pub fn chart_file() -> String {
    let mut out = String::from(
        "# The kinds Sluice queues, generated from the registry in crates/kinds\n\
         # (sluice_kinds::chart::chart_file): the chart's RBAC rules and webhook\n\
         # entries for them. Do not edit: `SLUICE_BLESS=1 cargo test -p sluice-e2e\n\
         # --test chart` writes it, and that test fails when it differs.\n",
    );
    out.push_str("# What the controller calls on them.\ncontrollerRules:\n");
    rules(&mut out, JobKind::ALL.into_iter().flat_map(JobKind::controller_access));
    out.push_str("# What the webhook lists and watches of them (owner verification).\nwebhookRules:\n");
    rules(&mut out, JobKind::ALL.into_iter().flat_map(JobKind::webhook_access));
    out.push_str(
        "# Every queued kind: the webhook configurations' entries (serving: held at\n# zero replicas, with UPDATE mutation and a scale entry).\nqueuedKinds:\n",
    );
    for k in JobKind::ALL {
        let (group, version, _) = k.gvk();
        let serving = k.integration().hold() == crate::Hold::Replicas;
        let _ = writeln!(
            out,
            "  - plural: {}\n    group: {}\n    version: {version}\n    serving: {serving}",
            k.plural(),
            if group.is_empty() { "\"\"" } else { group }
        );
    }
    out
}

/// `access` as RBAC rules, consecutive resources of one group with the
/// same verbs in one rule.
fn rules(out: &mut String, access: impl Iterator<Item = Access>) {
    let mut merged: Vec<(&'static str, &'static [&'static str], Vec<String>)> = Vec::new();
    for a in access {
        match merged.iter_mut().find(|(g, v, _)| *g == a.group && *v == a.verbs) {
            Some((_, _, resources)) => resources.push(a.resource),
            None => merged.push((a.group, a.verbs, vec![a.resource])),
        }
    }
    for (group, verbs, resources) in merged {
        let _ = writeln!(
            out,
            "  - apiGroups: [{group}]\n    resources: [{}]\n    verbs: [{}]",
            resources.join(", "),
            verbs.join(", ")
        );
    }
}
