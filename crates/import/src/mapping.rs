//! Every Kueue field the importer knows, and what becomes of it: the one
//! table the importer's notes and docs/migrating-from-kueue.md are made
//! from, so the two cannot drift.
//!
//! A row names a field by its path (a list element written `[]`), the
//! kinds and API versions it belongs to, and optionally one value of it
//! ([`When`]): the same field may map for one value and not for another
//! (`flavorFungibility.whenCanPreempt: TryNextFlavor` is what Sluice does,
//! `MayStopSearch` is not). A row covers only its own path, except a row
//! whose [`Row::subtree`] is set (a map of user keys such as
//! `metadata.labels`, or a field reported as a whole): it covers everything
//! below it too. A more specific row below it still wins.

/// What becomes of a Kueue field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Copied to the Sluice field named (or what Sluice always does), same
    /// meaning.
    Mapped,
    /// Copied or honoured, with a difference the note states; reported.
    Difference,
    /// Not copied: Sluice has no such thing. Reported with its path; an
    /// error under `strict`.
    Unsupported,
    /// Not configuration (written by the API server or a controller): not
    /// copied, not reported.
    Ignored,
}

impl Status {
    /// How the docs and notes write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Mapped => "mapped",
            Status::Difference => "mapped, with a difference",
            Status::Unsupported => "not supported",
            Status::Ignored => "not configuration",
        }
    }
}

/// Which values of the field a row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Whatever the value.
    Any,
    /// This value (a string, or `true`/`false`, as written in YAML).
    Is(&'static str),
    /// The field is not set: Kueue's default applies. Raised by the
    /// importer when it matters.
    Unset,
}

/// One field (or one value of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The kinds it belongs to (`Configuration` is Kueue's
    /// `config.kueue.x-k8s.io` Configuration); `*`: every queue kind.
    pub kinds: &'static [&'static str],
    /// The API versions that have it (empty: every version of the kind).
    pub versions: &'static [&'static str],
    /// Its path in the Kueue object; list elements as `[]`; empty: the
    /// whole object.
    pub kueue: &'static str,
    /// The values the row is about.
    pub when: When,
    /// The Sluice field, flag or setting it becomes (empty when nothing is
    /// written; for a [`Status::Mapped`] row, what Sluice always does).
    pub sluice: &'static str,
    /// What becomes of it.
    pub status: Status,
    /// The difference, what Sluice does instead, or a remark; the
    /// importer's note for this row is this text.
    pub note: &'static str,
    /// Whether the row also covers everything below its path.
    pub subtree: bool,
}

impl Row {
    const fn new(kinds: &'static [&'static str], kueue: &'static str, sluice: &'static str, status: Status) -> Row {
        Row {
            kinds,
            versions: &[],
            kueue,
            when: When::Any,
            sluice,
            status,
            note: "",
            subtree: matches!(status, Status::Unsupported | Status::Ignored),
        }
    }

    const fn note(self, note: &'static str) -> Row {
        Row { note, ..self }
    }

    const fn when(self, when: When) -> Row {
        Row { when, ..self }
    }

    const fn versions(self, versions: &'static [&'static str]) -> Row {
        Row { versions, ..self }
    }

    /// A map of user keys (labels, annotations, node labels): every key
    /// below it is copied.
    const fn map(self) -> Row {
        Row { subtree: true, ..self }
    }

    /// A group of settings judged as one: the row covers every key below.
    const fn whole(self) -> Row {
        Row { subtree: true, ..self }
    }

    /// Whether the row applies to `kind` at `version`.
    pub fn applies_to(&self, kind: &str, version: &str) -> bool {
        let kind_ok = self
            .kinds
            .iter()
            .any(|k| *k == kind || (*k == "*" && QUEUE_KINDS.contains(&kind)));
        kind_ok && (self.versions.is_empty() || self.versions.contains(&version))
    }

    /// Whether the row is about the field at `path` (abstract: lists as
    /// `[]`), either exactly or, for a subtree row, below it.
    pub fn covers(&self, path: &str) -> bool {
        path == self.kueue
            || (self.subtree
                && (self.kueue.is_empty()
                    || path
                        .strip_prefix(self.kueue)
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))))
    }
}

/// The queue kinds the importer translates into Sluice objects.
pub const QUEUE_KINDS: [&str; 5] = [
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "WorkloadPriorityClass",
];

use Status::*;
use When::*;

const ALL: &[&str] = &["*"];
const CQ: &[&str] = &["ClusterQueue"];
const QUOTA: &[&str] = &["ClusterQueue", "Cohort"];
const COHORT: &[&str] = &["Cohort"];
const RF: &[&str] = &["ResourceFlavor"];
const LQ: &[&str] = &["LocalQueue"];
const WPC: &[&str] = &["WorkloadPriorityClass"];
const CONFIG: &[&str] = &["Configuration"];
const V1ALPHA1: &[&str] = &["v1alpha1"];
const V1BETA1: &[&str] = &["v1beta1"];
const V1BETA2: &[&str] = &["v1beta2"];
const BETA: &[&str] = &["v1beta1", "v1beta2"];

/// The table.
pub fn mapping() -> &'static [Row] {
    ROWS
}

/// The row for `kind`'s field at `path` (abstract) with `when`: the one the
/// importer raises a note from when Kueue's default applies. Panics when
/// there is none: the importer asks only for rows the table has (a test
/// goes through them all).
pub fn row(kind: &str, version: &str, path: &str, when: When) -> &'static Row {
    ROWS.iter()
        .find(|r| r.applies_to(kind, version) && r.kueue == path && r.when == when)
        .unwrap_or_else(|| panic!("no mapping row for {kind} {version} {path} {when:?}"))
}

/// The row that decides a leaf of `kind` (at `version`) at `path`
/// (abstract) holding `value` (as YAML writes a scalar; `None` for an
/// empty object or list): the longest path that covers it; for that path,
/// a row about this very value before a row about any value. `None`: the
/// field is unknown.
pub fn decide(kind: &str, version: &str, path: &str, value: Option<&str>) -> Option<&'static Row> {
    let candidates = ROWS
        .iter()
        .filter(|r| r.applies_to(kind, version) && r.when != Unset && r.covers(path));
    let longest = candidates.clone().map(|r| r.kueue.len()).max()?;
    let at: Vec<&Row> = candidates.filter(|r| r.kueue.len() == longest).collect();
    let this_value = value.and_then(|v| at.iter().find(|r| r.kueue == path && matches!(r.when, Is(w) if w == v)));
    this_value.or_else(|| at.iter().find(|r| r.when == Any)).copied()
}

/// Whether some row lies at or below `path` for `kind`: an empty object
/// or list there is a known place that holds nothing.
pub fn known_container(kind: &str, version: &str, path: &str) -> bool {
    ROWS.iter().filter(|r| r.applies_to(kind, version)).any(|r| {
        r.kueue == path
            || r.kueue
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

static ROWS: &[Row] = &[
    // Every queue kind.
    Row::new(ALL, "apiVersion", "`apiVersion: sluice.dev/v1alpha1`", Mapped)
        .note("kueue.x-k8s.io/v1alpha1 (Cohort), v1beta1 or v1beta2"),
    Row::new(ALL, "kind", "kind", Mapped),
    Row::new(ALL, "metadata.name", "metadata.name", Mapped),
    Row::new(ALL, "metadata.namespace", "metadata.namespace", Mapped).note("LocalQueues"),
    Row::new(ALL, "metadata.labels", "metadata.labels", Mapped).map(),
    Row::new(ALL, "metadata.annotations", "metadata.annotations", Mapped).map(),
    Row::new(
        ALL,
        "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
        "",
        Ignored,
    )
    .note("kubectl's copy of the Kueue object as last applied"),
    Row::new(ALL, "metadata", "", Ignored).note(
        "uid, resourceVersion, generation, timestamps, managedFields, finalizers, ownerReferences: written by the API server and Kueue",
    ),
    Row::new(ALL, "status", "", Ignored).note("written by Kueue's controller"),
    // ClusterQueue and Cohort quota.
    Row::new(
        QUOTA,
        "spec.resourceGroups[].coveredResources",
        "spec.resourceGroups[].coveredResources",
        Mapped,
    )
    .note("at most 16 resources per group (Kueue: 64)"),
    Row::new(
        QUOTA,
        "spec.resourceGroups[].flavors[].name",
        "spec.resourceGroups[].flavors[].name",
        Mapped,
    ),
    Row::new(
        QUOTA,
        "spec.resourceGroups[].flavors[].resources[].name",
        "spec.resourceGroups[].flavors[].resources[].name",
        Mapped,
    ),
    Row::new(
        QUOTA,
        "spec.resourceGroups[].flavors[].resources[].nominalQuota",
        "spec.resourceGroups[].flavors[].resources[].nominalQuota",
        Mapped,
    ),
    Row::new(
        QUOTA,
        "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        Mapped,
    ),
    Row::new(
        QUOTA,
        "spec.resourceGroups[].flavors[].resources[].lendingLimit",
        "spec.resourceGroups[].flavors[].resources[].lendingLimit",
        Mapped,
    )
    .note("at most nominalQuota, in a Cohort too (Kueue lets a Cohort lend more than its own quota)"),
    Row::new(QUOTA, "spec.fairSharing.weight", "spec.fairSharing.weight", Mapped),
    // ClusterQueue.
    Row::new(CQ, "spec.cohort", "spec.cohort", Mapped).versions(V1BETA1),
    Row::new(CQ, "spec.cohortName", "spec.cohort", Mapped).versions(V1BETA2),
    Row::new(CQ, "spec.queueingStrategy", "spec.queueingStrategy", Mapped).note("StrictFIFO, BestEffortFIFO"),
    Row::new(CQ, "spec.namespaceSelector", "spec.namespaceSelector", Mapped).note("`{}` selects every namespace"),
    Row::new(CQ, "spec.namespaceSelector", "spec.namespaceSelector", Mapped)
        .when(Unset)
        .note("unset: the queue serves no namespace, in Kueue as in Sluice; `namespaceSelector: {}` serves every namespace"),
    Row::new(
        CQ,
        "spec.namespaceSelector.matchLabels",
        "spec.namespaceSelector.matchLabels",
        Mapped,
    )
    .map(),
    Row::new(
        CQ,
        "spec.namespaceSelector.matchExpressions[].key",
        "spec.namespaceSelector.matchExpressions[].key",
        Mapped,
    ),
    Row::new(
        CQ,
        "spec.namespaceSelector.matchExpressions[].operator",
        "spec.namespaceSelector.matchExpressions[].operator",
        Mapped,
    ),
    Row::new(
        CQ,
        "spec.namespaceSelector.matchExpressions[].values",
        "spec.namespaceSelector.matchExpressions[].values",
        Mapped,
    ),
    Row::new(
        CQ,
        "spec.preemption.withinClusterQueue",
        "spec.preemption.withinClusterQueue",
        Mapped,
    ),
    Row::new(
        CQ,
        "spec.preemption.reclaimWithinCohort",
        "spec.preemption.reclaimWithinCohort",
        Mapped,
    ),
    Row::new(
        CQ,
        "spec.preemption.borrowWithinCohort.policy",
        "spec.preemption.borrowWithinCohort.policy",
        Mapped,
    )
    .when(Is("Never")),
    Row::new(
        CQ,
        "spec.preemption.borrowWithinCohort.policy",
        "spec.preemption.borrowWithinCohort.policy",
        Difference,
    )
    .when(Is("LowerPriority"))
    .note("Kueue ignores it under fair sharing; Sluice, whose fair sharing is on by default, takes it as one more permission there, the fair-sharing strategies deciding"),
    Row::new(
        CQ,
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        Mapped,
    ),
    Row::new(CQ, "spec.stopPolicy", "spec.stopPolicy", Mapped).note("None, Hold, HoldAndDrain"),
    Row::new(
        CQ,
        "spec.flavorFungibility.whenCanBorrow",
        "what Sluice always does",
        Mapped,
    )
    .when(Is("TryNextFlavor"))
    .note("a later flavor that fits without borrowing is taken before borrowing in an earlier one"),
    Row::new(CQ, "spec.flavorFungibility.whenCanBorrow", "", Difference)
        .when(Is("MayStopSearch"))
        .note("Sluice tries the next flavors before borrowing (TryNextFlavor): a later flavor that fits without borrowing is taken first"),
    Row::new(CQ, "spec.flavorFungibility.whenCanBorrow", "", Difference)
        .versions(V1BETA1)
        .when(Is("Borrow"))
        .note("Borrow is the old name of MayStopSearch; Sluice tries the next flavors before borrowing (TryNextFlavor)"),
    Row::new(CQ, "spec.flavorFungibility.whenCanBorrow", "", Difference)
        .when(Unset)
        .note("Kueue's default MayStopSearch borrows in the first flavor that fits by borrowing; Sluice first tries the next flavors without borrowing (TryNextFlavor)"),
    Row::new(
        CQ,
        "spec.flavorFungibility.whenCanPreempt",
        "what Sluice always does",
        Mapped,
    )
    .when(Is("TryNextFlavor"))
    .note("preemption only when no flavor fits, even by borrowing"),
    Row::new(CQ, "spec.flavorFungibility.whenCanPreempt", "", Unsupported)
        .when(Is("MayStopSearch"))
        .note("Sluice preempts only when no flavor fits, even by borrowing (TryNextFlavor)"),
    Row::new(CQ, "spec.flavorFungibility.whenCanPreempt", "", Unsupported)
        .versions(V1BETA1)
        .when(Is("Preempt"))
        .note("Preempt is the old name of MayStopSearch; Sluice preempts only when no flavor fits, even by borrowing (TryNextFlavor)"),
    Row::new(CQ, "spec.flavorFungibility.preference", "", Difference)
        .when(Is("BorrowingOverPreemption"))
        .note("Sluice borrows before it preempts, in the first flavor (in the queue's order) that fits by borrowing; it does not compare borrowing distances in the cohort tree"),
    Row::new(CQ, "spec.flavorFungibility.preference", "", Unsupported)
        .when(Is("PreemptionOverBorrowing"))
        .note("Sluice always borrows before it preempts"),
    Row::new(CQ, "spec.admissionChecks", "", Unsupported)
        .versions(V1BETA1)
        .note("admission checks (ProvisioningRequest, MultiKueue) are not implemented"),
    Row::new(CQ, "spec.admissionChecksStrategy", "", Unsupported)
        .note("admission checks (ProvisioningRequest, MultiKueue) are not implemented"),
    Row::new(CQ, "spec.admissionScope", "", Unsupported)
        .note("no admission fair sharing between the LocalQueues of a ClusterQueue"),
    Row::new(CQ, "spec.concurrentAdmissionPolicy", "", Unsupported)
        .versions(V1BETA2)
        .note("a workload is admitted on one flavor and does not migrate"),
    // Cohort.
    Row::new(COHORT, "spec.parent", "spec.parent", Mapped).versions(V1ALPHA1),
    Row::new(COHORT, "spec.parentName", "spec.parent", Mapped).versions(BETA),
    // ResourceFlavor.
    Row::new(RF, "spec.nodeLabels", "spec.nodeLabels", Mapped).map(),
    Row::new(RF, "spec.nodeTaints[].key", "spec.nodeTaints[].key", Mapped),
    Row::new(RF, "spec.nodeTaints[].value", "spec.nodeTaints[].value", Mapped),
    Row::new(RF, "spec.nodeTaints[].effect", "spec.nodeTaints[].effect", Mapped),
    Row::new(RF, "spec.nodeTaints[].timeAdded", "spec.nodeTaints[].timeAdded", Mapped),
    Row::new(RF, "spec.tolerations[].key", "spec.tolerations[].key", Mapped),
    Row::new(RF, "spec.tolerations[].operator", "spec.tolerations[].operator", Mapped),
    Row::new(RF, "spec.tolerations[].value", "spec.tolerations[].value", Mapped),
    Row::new(RF, "spec.tolerations[].effect", "spec.tolerations[].effect", Mapped),
    Row::new(
        RF,
        "spec.tolerations[].tolerationSeconds",
        "spec.tolerations[].tolerationSeconds",
        Mapped,
    ),
    Row::new(RF, "spec.topologyName", "", Unsupported).note(
        "Sluice has no Topology objects and places a gang within one level only: set spec.topologyKey to the node label of that level",
    ),
    // LocalQueue.
    Row::new(LQ, "spec.clusterQueue", "spec.clusterQueue", Mapped),
    Row::new(LQ, "spec.stopPolicy", "spec.stopPolicy", Mapped).note("None, Hold, HoldAndDrain"),
    Row::new(LQ, "spec.fairSharing", "", Unsupported)
        .note("no admission fair sharing between the LocalQueues of a ClusterQueue"),
    // WorkloadPriorityClass.
    Row::new(WPC, "value", "value", Mapped).note("from -1000000000 to 1000000000"),
    Row::new(WPC, "description", "description", Mapped),
    // Kueue kinds Sluice has no counterpart for, as a whole.
    Row::new(&["AdmissionCheck"], "", "", Unsupported)
        .note("admission checks (ProvisioningRequest, MultiKueue) are not implemented"),
    Row::new(&["ProvisioningRequestConfig"], "", "", Unsupported).note("no ProvisioningRequest admission check"),
    Row::new(&["MultiKueueConfig", "MultiKueueCluster"], "", "", Unsupported)
        .note("no MultiKueue: Sluice admits into the cluster it runs in"),
    Row::new(&["Topology"], "", "", Unsupported)
        .note("no Topology objects: a ResourceFlavor's spec.topologyKey names the one node label a gang must fit within"),
    Row::new(&["Workload"], "", "", Ignored)
        .note("Kueue's admitted Workloads are counted by the controller during a switch-over (--kueue-usage), not imported"),
    // Kueue's Configuration (config.kueue.x-k8s.io).
    Row::new(CONFIG, "apiVersion", "", Ignored).note("config.kueue.x-k8s.io/v1beta1 or v1beta2"),
    Row::new(CONFIG, "kind", "", Ignored),
    Row::new(CONFIG, "namespace", "the chart's namespace (`helm install -n`)", Difference)
        .note("Sluice runs in the namespace its chart is installed in"),
    Row::new(CONFIG, "manageJobsWithoutQueueName", "what Sluice always does", Mapped)
        .when(Is("false"))
        .note("only Jobs that name a queue are queued"),
    Row::new(
        CONFIG,
        "manageJobsWithoutQueueName",
        "namespace label `sluice.dev/default-queue: enabled`",
        Difference,
    )
    .when(Is("true"))
    .note("per namespace, not for the whole cluster: label each namespace sluice.dev/default-queue: enabled and give it a LocalQueue named default"),
    Row::new(CONFIG, "managedJobsNamespaceSelector", "", Unsupported)
        .note("Sluice's webhook always leaves kube-system and its own namespace alone; other namespaces opt in with the sluice.dev/default-queue label"),
    Row::new(CONFIG, "fairSharing", "--fair-sharing, controller.fairSharing.enabled", Difference)
        .when(Unset)
        .note("Kueue's fair sharing is off unless configured, Sluice's on: --fair-sharing=off keeps Kueue's behaviour"),
    Row::new(CONFIG, "fairSharing.enable", "--fair-sharing, controller.fairSharing.enabled", Mapped)
        .versions(V1BETA1),
    Row::new(
        CONFIG,
        "fairSharing.preemptionStrategies",
        "--fair-sharing-strategies, controller.fairSharing.strategies",
        Mapped,
    ),
    Row::new(CONFIG, "fairSharing", "--fair-sharing, controller.fairSharing.enabled", Mapped)
        .versions(V1BETA2)
        .note("present: on"),
    Row::new(CONFIG, "waitForPodsReady", "--pods-ready-timeout, controller.podsReadyTimeout", Difference)
        .when(Unset)
        .note("Kueue's default (v1beta1: off; v1beta2: on, 30m) is given as --pods-ready-timeout, Sluice's own default being 10m"),
    Row::new(CONFIG, "waitForPodsReady", "--pods-ready-timeout, controller.podsReadyTimeout", Mapped)
        .versions(V1BETA2)
        .note("present: on"),
    Row::new(
        CONFIG,
        "waitForPodsReady.enable",
        "--pods-ready-timeout, controller.podsReadyTimeout",
        Mapped,
    )
    .versions(V1BETA1)
    .note("false: --pods-ready-timeout=0"),
    Row::new(
        CONFIG,
        "waitForPodsReady.timeout",
        "--pods-ready-timeout, controller.podsReadyTimeout",
        Mapped,
    )
    .note("Kueue's default: 5m (v1beta1), 30m (v1beta2)"),
    Row::new(CONFIG, "waitForPodsReady.blockAdmission", "what Sluice always does", Mapped).when(Is("false")),
    Row::new(CONFIG, "waitForPodsReady.blockAdmission", "", Unsupported)
        .when(Is("true"))
        .note("Sluice never holds admissions while admitted pods start"),
    Row::new(CONFIG, "waitForPodsReady.blockAdmission", "", Difference)
        .versions(V1BETA1)
        .when(Unset)
        .note("with enable: true, Kueue's default blocks every admission until admitted pods are ready; Sluice never does"),
    Row::new(CONFIG, "waitForPodsReady.recoveryTimeout", "what Sluice always does", Mapped)
        .when(Is("0s"))
        .note("no check once the pods were ready"),
    Row::new(CONFIG, "waitForPodsReady.recoveryTimeout", "", Unsupported)
        .note("Sluice checks readiness only until the pods are first ready: a workload whose pods later fail is not evicted for it"),
    Row::new(CONFIG, "waitForPodsReady.recoveryTimeout", "", Difference)
        .when(Unset)
        .note("Kueue's default (the timeout) also evicts a workload whose pods stay unready that long after they were ready; Sluice checks only until they are first ready"),
    Row::new(
        CONFIG,
        "waitForPodsReady.requeuingStrategy.timestamp",
        "what Sluice always does",
        Mapped,
    )
    .when(Is("Eviction"))
    .note("an evicted workload waits behind those already waiting"),
    Row::new(CONFIG, "waitForPodsReady.requeuingStrategy.timestamp", "", Unsupported)
        .when(Is("Creation"))
        .note("Sluice requeues an evicted workload behind those already waiting (Eviction)"),
    Row::new(
        CONFIG,
        "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        "--requeue-limit, controller.extraArgs",
        Difference,
    )
    .note("Sluice counts idle-GPU evictions towards the same limit"),
    Row::new(
        CONFIG,
        "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
        "--requeue-backoff-base, controller.requeueBackoffBase",
        Mapped,
    ),
    Row::new(
        CONFIG,
        "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
        "--requeue-backoff-max, controller.requeueBackoffMax",
        Mapped,
    ),
    Row::new(CONFIG, "integrations.frameworks", "--integrations, controller.extraArgs", Mapped)
        .note("Sluice queues batch/job, jobset.x-k8s.io/jobset, kubeflow.org/pytorchjob, kubeflow.org/mpijob, ray.io/rayjob, kubeflow.org/tfjob, kubeflow.org/xgboostjob, kubeflow.org/paddlejob, kubeflow.org/jaxjob, ray.io/raycluster, trainer.kubeflow.org/trainjob, deployment, statefulset, leaderworkerset.x-k8s.io/leaderworkerset; serving objects are held at zero replicas until admitted, where Kueue gates their pods one by one; pod needs no flag (see integrations.podOptions); each other framework is reported; batch/v1 Jobs are queued even when not listed"),
    Row::new(CONFIG, "integrations.frameworks", "--integrations, controller.extraArgs", Difference)
        .when(Unset)
        .note("Kueue's default queues batch/job alone; Sluice's (auto) every kind it knows that the cluster serves: --integrations=batch/job keeps Kueue's"),
    Row::new(CONFIG, "integrations.externalFrameworks", "", Unsupported).note("no external job frameworks"),
    Row::new(CONFIG, "integrations.podOptions", "", Unsupported)
    .note("no such setting: Sluice queues a plain Pod with the queue label, and every GPU Pod of a namespace labelled sluice.dev/default-queue: enabled (label the namespaces its namespaceSelector selects); gated until admitted on servers with pod scheduling gates (1.27+), refused at create on older ones; groups by sluice.dev/pod-group and sluice.dev/pod-group-total-count (Kueue's kueue.x-k8s.io/pod-group-name and pod-group-total-count)"),
    Row::new(CONFIG, "integrations.labelKeysToCopy", "", Unsupported)
        .note("no labels are copied from Jobs to Workloads"),
    Row::new(CONFIG, "clientConnection.qps", "--kube-qps, controller.kubeQps", Difference)
        .note("Sluice's limit counts writes only; reads are not limited"),
    Row::new(CONFIG, "clientConnection.burst", "--kube-burst, controller.kubeBurst", Difference)
        .note("Sluice's limit counts writes only; reads are not limited"),
    Row::new(CONFIG, "leaderElection.leaderElect", "--leader-elect, controller.leaderElect", Mapped),
    Row::new(
        CONFIG,
        "leaderElection.leaseDuration",
        "--lease-duration-seconds, controller.leaseDurationSeconds",
        Mapped,
    )
    .note("whole seconds"),
    Row::new(CONFIG, "leaderElection.resourceName", "--lease-name", Difference)
        .note("the chart names the Lease after its release"),
    Row::new(CONFIG, "leaderElection.resourceNamespace", "--lease-namespace", Difference)
        .note("the chart keeps the Lease in its namespace"),
    Row::new(CONFIG, "leaderElection", "", Unsupported)
        .note("Sluice's Lease timings other than its duration are fixed"),
    Row::new(CONFIG, "metrics.bindAddress", "--metrics-addr, controller.metricsPort", Difference)
        .note("Sluice serves /metrics over HTTP, with /healthz and /readyz, on one address"),
    Row::new(CONFIG, "metrics.enableClusterQueueResources", "what Sluice always does", Mapped)
        .note("quota and usage per ClusterQueue are always exported (sluice_cluster_queue_*)"),
    Row::new(CONFIG, "metrics", "", Unsupported).note(
        "no custom metric labels; of LocalQueue metrics only sluice_local_queue_usage_resource_hours (no pending or admitted counts per LocalQueue)",
    ),
    Row::new(CONFIG, "health", "--metrics-addr, controller.metricsPort", Difference)
        .note("Sluice serves /healthz and /readyz beside /metrics")
        .whole(),
    Row::new(CONFIG, "webhook", "the chart's webhook values", Difference)
        .note("Sluice's webhook is its own Deployment (webhook.port, certificates from the chart)")
        .whole(),
    Row::new(CONFIG, "internalCertManagement", "the chart's certificates values", Difference)
        .note("the chart makes the webhook's certificate itself, or has cert-manager make it (certificates.mode: certManager)")
        .whole(),
    Row::new(CONFIG, "controller", "", Difference)
        .note("Kueue's reconcile concurrency and cache timeout; Sluice has one event loop and nothing to tune")
        .whole(),
    Row::new(CONFIG, "pprofBindAddress", "", Unsupported).note("no pprof endpoint"),
    Row::new(CONFIG, "tls", "", Unsupported).note("Sluice's TLS settings are fixed (rustls defaults)"),
    Row::new(CONFIG, "queueVisibility", "", Unsupported)
        .versions(V1BETA1)
        .note("Sluice publishes queue positions in LocalQueue and Workload status instead (--positions-interval)"),
    Row::new(CONFIG, "visibilityServer", "", Unsupported)
        .versions(V1BETA2)
        .note("no visibility API server: positions are in LocalQueue and Workload status (--positions-interval)"),
    Row::new(CONFIG, "multiKueue", "", Unsupported).note("no MultiKueue"),
    Row::new(CONFIG, "admissionFairSharing", "", Unsupported)
        .note("no admission fair sharing between the LocalQueues of a ClusterQueue"),
    Row::new(
        CONFIG,
        "resources.transformations",
        "--resource-transformations, controller.resourceTransformations",
        Mapped,
    )
    .note("the same input, strategy (Retain by default) and outputs per unit of input; Sluice also takes fractions (1/7) and counts sluice.dev/gpu-equivalent exactly")
    .whole(),
    Row::new(CONFIG, "resources.excludeResourcePrefixes", "", Unsupported)
        .note("Sluice counts every resource pods request; a transformation with strategy Replace and no outputs drops one"),
    Row::new(CONFIG, "resources.deviceClassMappings", "", Unsupported).note("no DRA device classes"),
    Row::new(CONFIG, "objectRetentionPolicies", "", Unsupported)
        .note("Sluice's Workloads go with their Jobs"),
    Row::new(
        CONFIG,
        "featureGates.DisableWaitForPodsReady",
        "--pods-ready-timeout, controller.podsReadyTimeout",
        Mapped,
    )
    .note("true: --pods-ready-timeout=0"),
    Row::new(CONFIG, "featureGates", "", Unsupported).note("Kueue's feature gates have no Sluice counterpart"),
];

/// The table as Markdown, for docs/migrating-from-kueue.md.
pub fn markdown_table() -> String {
    let mut out = String::from("| kind | Kueue field | Sluice | status | note |\n|---|---|---|---|---|\n");
    for r in mapping() {
        let sluice = if r.sluice.is_empty() {
            "—".to_string()
        } else {
            // Fields and flags in code font; prose (with a space) as written.
            r.sluice
                .split(", ")
                .map(|s| {
                    if s.contains([' ', '`']) {
                        s.to_string()
                    } else {
                        format!("`{s}`")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.kinds.join(", "),
            field_cell(r),
            sluice,
            r.status.as_str(),
            r.note.replace('|', "\\|"),
        ));
    }
    out
}

/// `spec.cohortName` (v1beta2), `whenCanBorrow: MayStopSearch`, unset.
fn field_cell(r: &Row) -> String {
    let path = if r.kueue.is_empty() {
        "(the whole object)".to_string()
    } else {
        match r.when {
            Any => format!("`{}`", r.kueue),
            Is(v) => format!("`{}: {v}`", r.kueue),
            Unset => format!("`{}` unset", r.kueue),
        }
    };
    if r.versions.is_empty() {
        path
    } else {
        format!("{path} ({})", r.versions.join(", "))
    }
}

#[cfg(test)]
mod tests;
