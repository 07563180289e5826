//! Every Kueue field the importer knows, and what becomes of it: the one
//! table the importer's notes and docs/migrating-from-kueue.md are made
//! from. A row covers its path and everything below it. Paths write a list
//! element as `[]`.

/// What becomes of a Kueue field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Copied to the Sluice field named, same meaning.
    Mapped,
    /// Copied, with a difference the note states.
    Difference,
    /// Not copied: Sluice has no such thing; reported with its path.
    Unsupported,
    /// Not configuration (set by the API server, or status): not copied,
    /// not reported.
    Ignored,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Mapped => "mapped",
            Status::Difference => "mapped, with a difference",
            Status::Unsupported => "not supported",
            Status::Ignored => "not configuration",
        }
    }
}

/// One field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `ClusterQueue`, `Cohort`, `ResourceFlavor`, `LocalQueue`,
    /// `WorkloadPriorityClass`, `Configuration`, or `*` (every kind).
    pub kind: &'static str,
    pub kueue: &'static str,
    /// The Sluice field or flag (empty when not copied).
    pub sluice: &'static str,
    pub status: Status,
    pub note: &'static str,
}

const fn row(kind: &'static str, kueue: &'static str, sluice: &'static str, status: Status, note: &'static str) -> Row {
    Row {
        kind,
        kueue,
        sluice,
        status,
        note,
    }
}

use Status::*;

/// The table.
pub fn mapping() -> &'static [Row] {
    ROWS
}

static ROWS: &[Row] = &[
    row("*", "metadata.name", "metadata.name", Mapped, ""),
    row("*", "metadata.namespace", "metadata.namespace", Mapped, "LocalQueues"),
    row("*", "metadata.labels", "metadata.labels", Mapped, ""),
    row("*", "metadata.annotations", "metadata.annotations", Mapped, ""),
    row(
        "*",
        "metadata",
        "",
        Ignored,
        "uid, resourceVersion, timestamps, managedFields: set by the API server",
    ),
    row("*", "status", "", Ignored, "written by the controller"),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].coveredResources",
        "spec.resourceGroups[].coveredResources",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].flavors[].name",
        "spec.resourceGroups[].flavors[].name",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].flavors[].resources[].name",
        "spec.resourceGroups[].flavors[].resources[].name",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].flavors[].resources[].nominalQuota",
        "spec.resourceGroups[].flavors[].resources[].nominalQuota",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.resourceGroups[].flavors[].resources[].lendingLimit",
        "spec.resourceGroups[].flavors[].resources[].lendingLimit",
        Mapped,
        "",
    ),
    row("ClusterQueue", "spec.cohort", "spec.cohort", Mapped, "v1beta1"),
    row("ClusterQueue", "spec.cohortName", "spec.cohort", Mapped, "v1beta2"),
    row(
        "ClusterQueue",
        "spec.queueingStrategy",
        "spec.queueingStrategy",
        Mapped,
        "StrictFIFO, BestEffortFIFO",
    ),
    row(
        "ClusterQueue",
        "spec.namespaceSelector",
        "spec.namespaceSelector",
        Difference,
        "unset selects every namespace in Kueue and none in Sluice: an unset selector is written as {}",
    ),
    row(
        "ClusterQueue",
        "spec.preemption.withinClusterQueue",
        "spec.preemption.withinClusterQueue",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.preemption.reclaimWithinCohort",
        "spec.preemption.reclaimWithinCohort",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.preemption.borrowWithinCohort.policy",
        "spec.preemption.borrowWithinCohort.policy",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.stopPolicy",
        "spec.stopPolicy",
        Mapped,
        "None, Hold, HoldAndDrain",
    ),
    row(
        "ClusterQueue",
        "spec.fairSharing.weight",
        "spec.fairSharing.weight",
        Mapped,
        "",
    ),
    row(
        "ClusterQueue",
        "spec.flavorFungibility",
        "",
        Unsupported,
        "not configurable: Sluice takes the first flavor that fits without borrowing, else the first that fits by borrowing, and tries preemption on the first choice",
    ),
    row(
        "ClusterQueue",
        "spec.admissionChecks",
        "",
        Unsupported,
        "admission checks (ProvisioningRequest, MultiKueue) are not implemented",
    ),
    row(
        "ClusterQueue",
        "spec.admissionChecksStrategy",
        "",
        Unsupported,
        "admission checks are not implemented",
    ),
    row(
        "ClusterQueue",
        "spec.admissionScope",
        "",
        Unsupported,
        "no admission scope",
    ),
    row(
        "ClusterQueue",
        "spec.concurrentAdmissionPolicy",
        "",
        Unsupported,
        "no concurrent admission",
    ),
    row("Cohort", "spec.parent", "spec.parent", Mapped, "v1alpha1"),
    row("Cohort", "spec.parentName", "spec.parent", Mapped, "v1beta1, v1beta2"),
    row(
        "Cohort",
        "spec.resourceGroups",
        "spec.resourceGroups",
        Mapped,
        "as a ClusterQueue's",
    ),
    row(
        "Cohort",
        "spec.fairSharing.weight",
        "spec.fairSharing.weight",
        Mapped,
        "",
    ),
    row("ResourceFlavor", "spec.nodeLabels", "spec.nodeLabels", Mapped, ""),
    row("ResourceFlavor", "spec.nodeTaints", "spec.nodeTaints", Mapped, ""),
    row("ResourceFlavor", "spec.tolerations", "spec.tolerations", Mapped, ""),
    row(
        "ResourceFlavor",
        "spec.topologyName",
        "",
        Unsupported,
        "Topology objects and their levels do not exist in Sluice: set spec.topologyKey to the node label of the one level a gang must fit in",
    ),
    row("LocalQueue", "spec.clusterQueue", "spec.clusterQueue", Mapped, ""),
    row("LocalQueue", "spec.stopPolicy", "spec.stopPolicy", Mapped, ""),
    row(
        "LocalQueue",
        "spec.fairSharing",
        "",
        Unsupported,
        "no fair sharing between LocalQueues (admission fair sharing)",
    ),
    row("WorkloadPriorityClass", "value", "value", Mapped, ""),
    row("WorkloadPriorityClass", "description", "description", Mapped, ""),
    row(
        "Configuration",
        "fairSharing.enable",
        "--fair-sharing",
        Difference,
        "Sluice's default is on; Kueue's off",
    ),
    row(
        "Configuration",
        "fairSharing.preemptionStrategies",
        "--fair-sharing-strategies",
        Mapped,
        "",
    ),
    row(
        "Configuration",
        "waitForPodsReady.enable",
        "--pods-ready-timeout",
        Difference,
        "Sluice checks readiness by default (10m): false gives 0",
    ),
    row(
        "Configuration",
        "waitForPodsReady.timeout",
        "--pods-ready-timeout",
        Mapped,
        "",
    ),
    row(
        "Configuration",
        "waitForPodsReady.blockAdmission",
        "",
        Unsupported,
        "Sluice never blocks admissions while pods start",
    ),
    row(
        "Configuration",
        "waitForPodsReady.requeuingStrategy",
        "--requeue-limit, --requeue-backoff-base, --requeue-backoff-max",
        Difference,
        "backoffLimitCount, backoffBaseSeconds, backoffMaxSeconds; the timestamp is always the eviction's",
    ),
    row(
        "Configuration",
        "manageJobsWithoutQueueName",
        "namespace label sluice.dev/default-queue: enabled",
        Difference,
        "per namespace, not for the whole cluster",
    ),
    row(
        "Configuration",
        "integrations.frameworks",
        "--integrations",
        Mapped,
        "batch/job, jobset.x-k8s.io/jobset, kubeflow.org/pytorchjob, kubeflow.org/mpijob, ray.io/rayjob; others are reported",
    ),
];

/// The table as Markdown, for docs/migrating-from-kueue.md.
pub fn markdown_table() -> String {
    let mut out = String::from("| kind | Kueue field | Sluice | status | note |\n|---|---|---|---|---|\n");
    for r in mapping() {
        let sluice = if r.sluice.is_empty() {
            "—".to_string()
        } else {
            format!("`{}`", r.sluice)
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            r.kind,
            r.kueue,
            sluice,
            r.status.as_str(),
            r.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    /// docs/migrating-from-kueue.md carries the table as generated here.
    /// `SLUICE_BLESS=1` writes it there.
    #[test]
    fn the_migration_doc_carries_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/migrating-from-kueue.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = (
            "<!-- mapping: generated by sluice_import::mapping::markdown_table -->\n",
            "<!-- end mapping -->",
        );
        let start = doc.find(begin).expect("the begin marker") + begin.len();
        let stop = doc.find(end).expect("the end marker");
        let table = super::markdown_table();
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[start..stop],
            table,
            "docs/migrating-from-kueue.md's table differs from the importer's: run SLUICE_BLESS=1 cargo test -p sluice-import"
        );
    }
}
