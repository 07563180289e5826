//! One case per row of the mapping table: a small Kueue object that sets
//! (or, for an "unset" row, leaves out) that field, and what must come of
//! it: the Sluice field with its value, the controller flag, and the note
//! (the row's own text) exactly when the row's status says one is due. A
//! row without a case fails `every_row_has_a_case`.

use serde_json::{Value, json};
use sluice_import::mapping::{self, Row, When};
use sluice_import::{Import, Status, import};

/// One row's case.
struct Case {
    kind: &'static str,
    version: &'static str,
    /// The row: its Kueue path and value.
    kueue: &'static str,
    when: When,
    /// Merged into the base object of the kind (null removes a key).
    patch: Value,
    /// JSON pointers into the Sluice object and the values they must hold.
    fields: Vec<(&'static str, Value)>,
    /// Flags the import must give.
    flags: Vec<&'static str>,
    /// Where the note goes, when not at the row's own path.
    at: Option<&'static str>,
}

fn case(kind: &'static str, version: &'static str, kueue: &'static str, when: When, patch: Value) -> Case {
    Case {
        kind,
        version,
        kueue,
        when,
        patch,
        fields: Vec::new(),
        flags: Vec::new(),
        at: None,
    }
}

impl Case {
    fn field(mut self, pointer: &'static str, value: Value) -> Case {
        self.fields.push((pointer, value));
        self
    }

    fn flag(mut self, flag: &'static str) -> Case {
        self.flags.push(flag);
        self
    }

    fn at(mut self, path: &'static str) -> Case {
        self.at = Some(path);
        self
    }
}

use When::{Any, Is, Unset};

/// An object of `kind` that imports without a note.
fn base(kind: &str, version: &str) -> Value {
    let api = format!("kueue.x-k8s.io/{version}");
    let group = json!([{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]);
    match kind {
        "ResourceFlavor" => json!({"apiVersion": api, "kind": kind, "metadata": {"name": "f"}, "spec": {}}),
        "ClusterQueue" => json!({"apiVersion": api, "kind": kind, "metadata": {"name": "q"},
                                  "spec": {"namespaceSelector": {}, "resourceGroups": group}}),
        "Cohort" => json!({"apiVersion": api, "kind": kind, "metadata": {"name": "c"}, "spec": {}}),
        "LocalQueue" => json!({"apiVersion": api, "kind": kind, "metadata": {"name": "lq", "namespace": "ns"},
                                "spec": {"clusterQueue": "q"}}),
        "WorkloadPriorityClass" => json!({"apiVersion": api, "kind": kind, "metadata": {"name": "p"}, "value": 1}),
        "Configuration" if version == "v1beta1" => json!({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": kind,
            "fairSharing": {"enable": false}, "waitForPodsReady": {"enable": false},
            "integrations": {"frameworks": ["batch/job"]}}),
        "Configuration" => json!({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": kind,
            "fairSharing": {}, "waitForPodsReady": {"recoveryTimeout": "0s"},
            "integrations": {"frameworks": ["batch/job"]}}),
        other => json!({"apiVersion": api, "kind": other, "metadata": {"name": "x"}, "spec": {}}),
    }
}

/// RFC 7386 merge patch.
fn merge(target: &mut Value, patch: &Value) {
    let (Value::Object(t), Value::Object(p)) = (&mut *target, patch) else {
        *target = patch.clone();
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn cases() -> Vec<Case> {
    let groups = [
        metadata_cases(),
        quota_cases(),
        cluster_queue_cases(),
        cohort_and_flavor_cases(),
        other_kind_cases(),
        configuration_cases(),
        process_configuration_cases(),
    ];
    groups.into_iter().flatten().collect()
}

fn gpu(flavors: &[&str], extra: Value) -> Value {
    let flavors: Vec<Value> = flavors
        .iter()
        .map(|f| {
            let mut q = json!({"name": "nvidia.com/gpu", "nominalQuota": 8});
            merge(&mut q, &extra);
            json!({"name": f, "resources": [q]})
        })
        .collect();
    json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}])
}

fn fungible(f: Value) -> Value {
    json!({"spec": {"flavorFungibility": f}})
}

fn ready(r: Value) -> Value {
    json!({"waitForPodsReady": r})
}

/// v1beta1's pods-ready check on, with nothing else to say.
fn on1(mut r: Value) -> Value {
    merge(
        &mut r,
        &json!({"enable": true, "blockAdmission": false, "recoveryTimeout": "0s"}),
    );
    json!({"waitForPodsReady": r})
}

/// Every kind: apiVersion, kind, metadata, status.
fn metadata_cases() -> Vec<Case> {
    vec![
        case("ResourceFlavor", "v1beta2", "apiVersion", Any, json!({}))
            .field("/apiVersion", json!("sluice.dev/v1alpha1")),
        case("ResourceFlavor", "v1beta2", "kind", Any, json!({})).field("/kind", json!("ResourceFlavor")),
        case("ResourceFlavor", "v1beta2", "metadata.name", Any, json!({})).field("/metadata/name", json!("f")),
        case("LocalQueue", "v1beta2", "metadata.namespace", Any, json!({})).field("/metadata/namespace", json!("ns")),
        case(
            "Cohort",
            "v1beta1",
            "metadata.labels",
            Any,
            json!({"metadata": {"labels": {"org": "ml"}}}),
        )
        .field("/metadata/labels", json!({"org": "ml"})),
        case(
            "ClusterQueue",
            "v1beta1",
            "metadata.annotations",
            Any,
            json!({"metadata": {"annotations": {"owner": "me"}}}),
        )
        .field("/metadata/annotations", json!({"owner": "me"})),
        case(
            "ClusterQueue",
            "v1beta2",
            "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
            Any,
            json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}),
        )
        .field("/metadata", json!({"name": "q"})),
        case(
            "ResourceFlavor",
            "v1beta1",
            "metadata",
            Any,
            json!({"metadata": {"uid": "u", "resourceVersion": "7"}}),
        )
        .field("/metadata", json!({"name": "f"})),
        case(
            "LocalQueue",
            "v1beta2",
            "status",
            Any,
            json!({"status": {"pendingWorkloads": 3}}),
        ),
    ]
}

/// Quota, as ClusterQueues and Cohorts write it.
fn quota_cases() -> Vec<Case> {
    vec![
        case(
            "ClusterQueue",
            "v1beta2",
            "spec.resourceGroups[].coveredResources",
            Any,
            json!({}),
        )
        .field("/spec/resourceGroups/0/coveredResources", json!(["cpu"])),
        case(
            "Cohort",
            "v1beta2",
            "spec.resourceGroups[].flavors[].name",
            Any,
            json!({"spec": {"resourceGroups": gpu(&["h100"], json!({}))}}),
        )
        .field("/spec/resourceGroups/0/flavors/0/name", json!("h100")),
        case(
            "ClusterQueue",
            "v1beta2",
            "spec.resourceGroups[].flavors[].resources[].name",
            Any,
            json!({}),
        )
        .field("/spec/resourceGroups/0/flavors/0/resources/0/name", json!("cpu")),
        case(
            "Cohort",
            "v1beta1",
            "spec.resourceGroups[].flavors[].resources[].nominalQuota",
            Any,
            json!({"spec": {"resourceGroups": gpu(&["h100"], json!({"nominalQuota": "1.5k"}))}}),
        )
        .field(
            "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota",
            json!("1.5k"),
        ),
        case(
            "ClusterQueue",
            "v1beta2",
            "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
            Any,
            json!({"spec": {"cohortName": "c", "resourceGroups": gpu(&["h100"], json!({"borrowingLimit": 4}))}}),
        )
        .field(
            "/spec/resourceGroups/0/flavors/0/resources/0/borrowingLimit",
            json!("4"),
        ),
        case(
            "Cohort",
            "v1beta2",
            "spec.resourceGroups[].flavors[].resources[].lendingLimit",
            Any,
            json!({"spec": {"parentName": "root", "resourceGroups": gpu(&["h100"], json!({"lendingLimit": 2}))}}),
        )
        .field("/spec/resourceGroups/0/flavors/0/resources/0/lendingLimit", json!("2")),
        case(
            "ClusterQueue",
            "v1beta1",
            "spec.fairSharing.weight",
            Any,
            json!({"spec": {"fairSharing": {"weight": "250m"}}}),
        )
        .field("/spec/fairSharing/weight", json!("250m")),
    ]
}

/// A ClusterQueue's own fields.
fn cluster_queue_cases() -> Vec<Case> {
    let selector = json!({"spec": {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}}});
    let expression = json!({"key": "team", "operator": "In", "values": ["a"]});
    vec![
        case("ClusterQueue", "v1beta1", "spec.cohort", Any, json!({"spec": {"cohort": "all"}})).field("/spec/cohort", json!("all")),
        case("ClusterQueue", "v1beta2", "spec.cohortName", Any, json!({"spec": {"cohortName": "all"}}))
            .field("/spec/cohort", json!("all")),
        case("ClusterQueue", "v1beta2", "spec.queueingStrategy", Any, json!({"spec": {"queueingStrategy": "StrictFIFO"}}))
            .field("/spec/queueingStrategy", json!("StrictFIFO")),
        case("ClusterQueue", "v1beta2", "spec.namespaceSelector", Any, json!({})).field("/spec/namespaceSelector", json!({})),
        case("ClusterQueue", "v1beta1", "spec.namespaceSelector", Unset, json!({"spec": {"namespaceSelector": null}})),
        case("ClusterQueue", "v1beta2", "spec.namespaceSelector.matchLabels", Any,
             json!({"spec": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}))
            .field("/spec/namespaceSelector/matchLabels", json!({"team": "a"})),
        case("ClusterQueue", "v1beta2", "spec.namespaceSelector.matchExpressions[].key", Any, selector.clone())
            .field("/spec/namespaceSelector/matchExpressions/0", expression.clone()),
        case("ClusterQueue", "v1beta2", "spec.namespaceSelector.matchExpressions[].operator", Any, selector.clone())
            .field("/spec/namespaceSelector/matchExpressions/0/operator", json!("In")),
        case("ClusterQueue", "v1beta2", "spec.namespaceSelector.matchExpressions[].values", Any, selector)
            .field("/spec/namespaceSelector/matchExpressions/0/values", json!(["a"])),
        case("ClusterQueue", "v1beta2", "spec.preemption.withinClusterQueue", Any,
             json!({"spec": {"preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}}}))
            .field("/spec/preemption/withinClusterQueue", json!("LowerOrNewerEqualPriority")),
        case("ClusterQueue", "v1beta2", "spec.preemption.reclaimWithinCohort", Any,
             json!({"spec": {"preemption": {"reclaimWithinCohort": "LowerPriority"}}}))
            .field("/spec/preemption/reclaimWithinCohort", json!("LowerPriority")),
        case("ClusterQueue", "v1beta2", "spec.preemption.borrowWithinCohort.policy", Is("Never"),
             json!({"spec": {"preemption": {"borrowWithinCohort": {"policy": "Never"}}}}))
            .field("/spec/preemption/borrowWithinCohort/policy", json!("Never")),
        case("ClusterQueue", "v1beta2", "spec.preemption.borrowWithinCohort.policy", Is("LowerPriority"),
             json!({"spec": {"preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}}}))
            .field("/spec/preemption/borrowWithinCohort/policy", json!("LowerPriority")),
        case("ClusterQueue", "v1beta1", "spec.preemption.borrowWithinCohort.maxPriorityThreshold", Any,
             json!({"spec": {"preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}}}))
            .field("/spec/preemption/borrowWithinCohort/maxPriorityThreshold", json!(100)),
        case("ClusterQueue", "v1beta2", "spec.stopPolicy", Any, json!({"spec": {"stopPolicy": "HoldAndDrain"}}))
            .field("/spec/stopPolicy", json!("HoldAndDrain")),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.whenCanBorrow", Is("TryNextFlavor"), fungible(json!({"whenCanBorrow": "TryNextFlavor"}))),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.whenCanBorrow", Is("MayStopSearch"), fungible(json!({"whenCanBorrow": "MayStopSearch"}))),
        case("ClusterQueue", "v1beta1", "spec.flavorFungibility.whenCanBorrow", Is("Borrow"), fungible(json!({"whenCanBorrow": "Borrow"}))),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.whenCanBorrow", Unset,
             json!({"spec": {"cohortName": "c", "resourceGroups": gpu(&["h100", "a100"], json!({}))}})),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.whenCanPreempt", Is("TryNextFlavor"), fungible(json!({"whenCanPreempt": "TryNextFlavor"}))),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.whenCanPreempt", Is("MayStopSearch"), fungible(json!({"whenCanPreempt": "MayStopSearch"}))),
        case("ClusterQueue", "v1beta1", "spec.flavorFungibility.whenCanPreempt", Is("Preempt"), fungible(json!({"whenCanPreempt": "Preempt"}))),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.preference", Is("BorrowingOverPreemption"),
             fungible(json!({"preference": "BorrowingOverPreemption"}))),
        case("ClusterQueue", "v1beta2", "spec.flavorFungibility.preference", Is("PreemptionOverBorrowing"),
             fungible(json!({"preference": "PreemptionOverBorrowing"}))),
        case("ClusterQueue", "v1beta1", "spec.admissionChecks", Any, json!({"spec": {"admissionChecks": ["prov"]}})),
        case("ClusterQueue", "v1beta2", "spec.admissionChecksStrategy", Any,
             json!({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["f"]}]}}})),
        case("ClusterQueue", "v1beta2", "spec.admissionScope", Any,
             json!({"spec": {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}})),
        case("ClusterQueue", "v1beta2", "spec.concurrentAdmissionPolicy", Any,
             json!({"spec": {"concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}}})),
    ]
}

/// Cohort and ResourceFlavor.
fn cohort_and_flavor_cases() -> Vec<Case> {
    let taint = json!({"spec": {"nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]}});
    let toleration = json!({"spec": {"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 60}]}});
    vec![
        case(
            "Cohort",
            "v1alpha1",
            "spec.parent",
            Any,
            json!({"spec": {"parent": "root"}}),
        )
        .field("/spec/parent", json!("root")),
        case(
            "Cohort",
            "v1beta2",
            "spec.parentName",
            Any,
            json!({"spec": {"parentName": "root"}}),
        )
        .field("/spec/parent", json!("root")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.nodeLabels",
            Any,
            json!({"spec": {"nodeLabels": {"gpu": "h100"}}}),
        )
        .field("/spec/nodeLabels", json!({"gpu": "h100"})),
        case("ResourceFlavor", "v1beta2", "spec.nodeTaints[].key", Any, taint.clone())
            .field("/spec/nodeTaints/0/key", json!("k")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.nodeTaints[].value",
            Any,
            taint.clone(),
        )
        .field("/spec/nodeTaints/0/value", json!("v")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.nodeTaints[].effect",
            Any,
            taint.clone(),
        )
        .field("/spec/nodeTaints/0/effect", json!("NoSchedule")),
        case("ResourceFlavor", "v1beta1", "spec.nodeTaints[].timeAdded", Any, taint)
            .field("/spec/nodeTaints/0/timeAdded", json!("2026-01-01T00:00:00Z")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.tolerations[].key",
            Any,
            toleration.clone(),
        )
        .field("/spec/tolerations/0/key", json!("k")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.tolerations[].operator",
            Any,
            toleration.clone(),
        )
        .field("/spec/tolerations/0/operator", json!("Equal")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.tolerations[].value",
            Any,
            toleration.clone(),
        )
        .field("/spec/tolerations/0/value", json!("v")),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.tolerations[].effect",
            Any,
            toleration.clone(),
        )
        .field("/spec/tolerations/0/effect", json!("NoExecute")),
        case(
            "ResourceFlavor",
            "v1beta1",
            "spec.tolerations[].tolerationSeconds",
            Any,
            toleration,
        )
        .field("/spec/tolerations/0/tolerationSeconds", json!(60)),
        case(
            "ResourceFlavor",
            "v1beta2",
            "spec.topologyName",
            Any,
            json!({"spec": {"topologyName": "default"}}),
        ),
    ]
}

/// LocalQueue, WorkloadPriorityClass, and the kinds reported whole.
fn other_kind_cases() -> Vec<Case> {
    vec![
        case("LocalQueue", "v1beta1", "spec.clusterQueue", Any, json!({})).field("/spec/clusterQueue", json!("q")),
        case(
            "LocalQueue",
            "v1beta2",
            "spec.stopPolicy",
            Any,
            json!({"spec": {"stopPolicy": "Hold"}}),
        )
        .field("/spec/stopPolicy", json!("Hold")),
        case(
            "LocalQueue",
            "v1beta2",
            "spec.fairSharing",
            Any,
            json!({"spec": {"fairSharing": {"weight": "2"}}}),
        ),
        case("WorkloadPriorityClass", "v1beta2", "value", Any, json!({"value": -5})).field("/value", json!(-5)),
        case(
            "WorkloadPriorityClass",
            "v1beta1",
            "description",
            Any,
            json!({"description": "batch"}),
        )
        .field("/description", json!("batch")),
        case("AdmissionCheck", "v1beta2", "", Any, json!({})),
        case("ProvisioningRequestConfig", "v1beta2", "", Any, json!({})),
        case("MultiKueueConfig", "v1beta2", "", Any, json!({})),
        case("MultiKueueCluster", "v1beta1", "", Any, json!({})),
        case("Topology", "v1beta1", "", Any, json!({})),
        case("Workload", "v1beta2", "", Any, json!({})),
    ]
}

/// Kueue's Configuration: admission (fair sharing, the pods-ready check).
fn configuration_cases() -> Vec<Case> {
    vec![
        case("Configuration", "v1beta2", "apiVersion", Any, json!({})),
        case("Configuration", "v1beta1", "kind", Any, json!({})),
        case(
            "Configuration",
            "v1beta2",
            "namespace",
            Any,
            json!({"namespace": "kueue-system"}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "manageJobsWithoutQueueName",
            Is("false"),
            json!({"manageJobsWithoutQueueName": false}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "manageJobsWithoutQueueName",
            Is("true"),
            json!({"manageJobsWithoutQueueName": true}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "managedJobsNamespaceSelector",
            Any,
            json!({"managedJobsNamespaceSelector": {"matchLabels": {"a": "b"}}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "fairSharing",
            Unset,
            json!({"fairSharing": null}),
        )
        .flag("--fair-sharing=off"),
        case(
            "Configuration",
            "v1beta1",
            "fairSharing.enable",
            Any,
            json!({"fairSharing": {"enable": true}}),
        )
        .flag("--fair-sharing=on"),
        case(
            "Configuration",
            "v1beta1",
            "fairSharing.preemptionStrategies",
            Any,
            json!({"fairSharing": {"enable": true, "preemptionStrategies": ["LessThanInitialShare"]}}),
        )
        .flag("--fair-sharing-strategies=LessThanInitialShare"),
        case(
            "Configuration",
            "v1beta2",
            "fairSharing",
            Any,
            json!({"fairSharing": {}}),
        )
        .flag("--fair-sharing=on"),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady",
            Unset,
            json!({"waitForPodsReady": null}),
        )
        .flag("--pods-ready-timeout=30m")
        .at("waitForPodsReady"),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady",
            Any,
            ready(json!({"recoveryTimeout": "0s", "blockAdmission": false})),
        )
        .flag("--pods-ready-timeout=30m"),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.enable",
            Any,
            on1(json!({})),
        )
        .flag("--pods-ready-timeout=5m"),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.timeout",
            Any,
            on1(json!({"timeout": "2h30m"})),
        )
        .flag("--pods-ready-timeout=150m"),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.blockAdmission",
            Is("false"),
            on1(json!({})),
        ),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.blockAdmission",
            Is("true"),
            ready(json!({"blockAdmission": true, "recoveryTimeout": "0s"})),
        ),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.blockAdmission",
            Unset,
            ready(json!({"enable": true, "recoveryTimeout": "0s"})),
        ),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.recoveryTimeout",
            Is("0s"),
            ready(json!({"recoveryTimeout": "0s"})),
        ),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.recoveryTimeout",
            Any,
            ready(json!({"recoveryTimeout": "3m"})),
        ),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.recoveryTimeout",
            Unset,
            ready(json!({"recoveryTimeout": null})),
        ),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.requeuingStrategy.timestamp",
            Is("Eviction"),
            on1(json!({"requeuingStrategy": {"timestamp": "Eviction"}})),
        ),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.requeuingStrategy.timestamp",
            Is("Creation"),
            ready(json!({"recoveryTimeout": "0s", "requeuingStrategy": {"timestamp": "Creation"}})),
        ),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            Any,
            on1(json!({"requeuingStrategy": {"backoffLimitCount": 3}})),
        )
        .flag("--requeue-limit=3"),
        case(
            "Configuration",
            "v1beta2",
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            Any,
            ready(json!({"recoveryTimeout": "0s", "requeuingStrategy": {"backoffBaseSeconds": 90}})),
        )
        .flag("--requeue-backoff-base=90s"),
        case(
            "Configuration",
            "v1beta1",
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            Any,
            on1(json!({"requeuingStrategy": {"backoffMaxSeconds": 7200}})),
        )
        .flag("--requeue-backoff-max=2h"),
    ]
}

/// Kueue's Configuration: integrations and the settings of its process.
fn process_configuration_cases() -> Vec<Case> {
    vec![
        case(
            "Configuration",
            "v1beta2",
            "integrations.frameworks",
            Any,
            json!({"integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "kubeflow.org/mpijob"]}}),
        )
        .flag("--integrations=batch/job,ray.io/rayjob,kubeflow.org/mpijob"),
        case(
            "Configuration",
            "v1beta1",
            "integrations.frameworks",
            Unset,
            json!({"integrations": null}),
        )
        .flag("--integrations=batch/job"),
        case(
            "Configuration",
            "v1beta2",
            "integrations.externalFrameworks",
            Any,
            json!({"integrations": {"externalFrameworks": ["Foo.v1.example.com"]}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "integrations.podOptions",
            Any,
            json!({"integrations": {"podOptions": {"namespaceSelector": {}}}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "integrations.labelKeysToCopy",
            Any,
            json!({"integrations": {"labelKeysToCopy": ["team"]}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "clientConnection.qps",
            Any,
            json!({"clientConnection": {"qps": 40}}),
        )
        .flag("--kube-qps=40"),
        case(
            "Configuration",
            "v1beta1",
            "clientConnection.burst",
            Any,
            json!({"clientConnection": {"burst": 80}}),
        )
        .flag("--kube-burst=80"),
        case(
            "Configuration",
            "v1beta2",
            "leaderElection.leaderElect",
            Any,
            json!({"leaderElection": {"leaderElect": false}}),
        )
        .flag("--leader-elect=false"),
        case(
            "Configuration",
            "v1beta2",
            "leaderElection.leaseDuration",
            Any,
            json!({"leaderElection": {"leaseDuration": "20s"}}),
        )
        .flag("--lease-duration-seconds=20"),
        case(
            "Configuration",
            "v1beta2",
            "leaderElection.resourceName",
            Any,
            json!({"leaderElection": {"resourceName": "kueue"}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "leaderElection.resourceNamespace",
            Any,
            json!({"leaderElection": {"resourceNamespace": "kueue-system"}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "leaderElection",
            Any,
            json!({"leaderElection": {"renewDeadline": "10s"}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "metrics.bindAddress",
            Any,
            json!({"metrics": {"bindAddress": ":8443"}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "metrics.enableClusterQueueResources",
            Any,
            json!({"metrics": {"enableClusterQueueResources": true}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "metrics",
            Any,
            json!({"metrics": {"customLabels": [{"name": "team"}]}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "health",
            Any,
            json!({"health": {"healthProbeBindAddress": ":8081"}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "webhook",
            Any,
            json!({"webhook": {"port": 9443}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "internalCertManagement",
            Any,
            json!({"internalCertManagement": {"enable": false}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "controller",
            Any,
            json!({"controller": {"groupKindConcurrency": {"Job.batch": 5}}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "pprofBindAddress",
            Any,
            json!({"pprofBindAddress": ":8083"}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "tls",
            Any,
            json!({"tls": {"minVersion": "VersionTLS13"}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "queueVisibility",
            Any,
            json!({"queueVisibility": {"updateIntervalSeconds": 5}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "visibilityServer",
            Any,
            json!({"visibilityServer": {"bindPort": 8082}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "multiKueue",
            Any,
            json!({"multiKueue": {"gcInterval": "1m"}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "admissionFairSharing",
            Any,
            json!({"admissionFairSharing": {"usageHalfLifeTime": "168h"}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "resources.transformations",
            Any,
            json!({"resources": {"transformations": [
                {"input": "nvidia.com/mig-1g.10gb", "strategy": "Replace", "outputs": {"sluice.dev/gpu-equivalent": "1"}}
            ]}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "resources.excludeResourcePrefixes",
            Any,
            json!({"resources": {"excludeResourcePrefixes": ["example.com/"]}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "resources.deviceClassMappings",
            Any,
            json!({"resources": {"deviceClassMappings": [{"name": "gpu.example.com", "deviceClassNames": ["gpu"]}]}}),
        ),
        case(
            "Configuration",
            "v1beta1",
            "objectRetentionPolicies",
            Any,
            json!({"objectRetentionPolicies": {"workloads": {"afterFinished": "1h"}}}),
        ),
        case(
            "Configuration",
            "v1beta2",
            "featureGates.DisableWaitForPodsReady",
            Any,
            json!({"featureGates": {"DisableWaitForPodsReady": true}}),
        )
        .flag("--pods-ready-timeout=0"),
        case(
            "Configuration",
            "v1beta2",
            "featureGates",
            Any,
            json!({"featureGates": {"TopologyAwareScheduling": true}}),
        ),
    ]
}

/// The row a case is about.
fn row_of(c: &Case) -> &'static Row {
    mapping::mapping()
        .iter()
        .find(|r| r.applies_to(c.kind, c.version) && r.kueue == c.kueue && r.when == c.when)
        .unwrap_or_else(|| panic!("no row for the case {} {} {} {:?}", c.kind, c.version, c.kueue, c.when))
}

fn run(c: &Case) -> Import {
    let mut doc = base(c.kind, c.version);
    merge(&mut doc, &c.patch);
    import(&[doc], false).unwrap_or_else(|e| panic!("{} {}: {e}", c.kind, c.kueue))
}

/// The note a case's row is due, and where.
fn due(c: &Case, row: &Row) -> Option<(String, Status, String)> {
    let name = match c.kind {
        "ResourceFlavor" => "f",
        "ClusterQueue" => "q",
        "Cohort" => "c",
        "LocalQueue" => "lq",
        "WorkloadPriorityClass" => "p",
        _ => "x",
    };
    let path = c.at.unwrap_or(row.kueue);
    let place = match (c.kind, path) {
        ("Configuration", p) => format!("Configuration: {p}"),
        (kind, "") => format!("{kind} {name}"),
        (kind, p) => format!("{kind} {name}: {p}"),
    };
    let message = match row.status {
        Status::Unsupported if row.when != Unset => format!("not copied: {}", row.note),
        _ => row.note.to_string(),
    };
    let due = row.when == Unset || matches!(row.status, Status::Difference | Status::Unsupported);
    due.then_some((place, row.status, message))
}

#[test]
fn each_field_becomes_what_its_row_says() {
    let mut failures = Vec::new();
    for c in cases() {
        let row = row_of(&c);
        let out = run(&c);
        let what = format!("{} {} `{}` {:?}", c.kind, c.version, c.kueue, c.when);
        for (pointer, want) in &c.fields {
            let got = out.objects.first().and_then(|o| o.pointer(pointer));
            if got != Some(want) {
                failures.push(format!("{what}: {pointer} is {got:?}, want {want}"));
            }
        }
        for flag in &c.flags {
            if !out.flags.iter().any(|f| f == flag) {
                failures.push(format!("{what}: no flag {flag} in {:?}", out.flags));
            }
        }
        let notes: Vec<(String, Status, String)> = (out.notes.iter())
            .map(|n| (n.place.clone(), n.status, n.message.clone()))
            .collect();
        match due(&c, row) {
            // The message is the row's note (a detail may follow it).
            Some((place, status, message))
                if !notes
                    .iter()
                    .any(|(p, s, m)| *p == place && *s == status && m.starts_with(&message)) =>
            {
                failures.push(format!("{what}: no note {:?} in {notes:?}", (place, status, message)))
            }
            Some(_) => {}
            None => {
                let place = due(
                    &Case {
                        at: c.at,
                        ..case(c.kind, c.version, c.kueue, Unset, json!({}))
                    },
                    row,
                )
                .map(|(p, ..)| p)
                .unwrap_or_default();
                if let Some(n) = notes.iter().find(|(p, ..)| *p == place) {
                    failures.push(format!("{what}: mapped, yet a note {n:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every row of the table has its case: a field the importer claims to
/// map, or to report, is never untested.
#[test]
fn every_row_has_a_case() {
    let cases = cases();
    let covered: Vec<*const Row> = cases.iter().map(|c| row_of(c) as *const Row).collect();
    let missing: Vec<String> = (mapping::mapping().iter())
        .filter(|r| !covered.contains(&(*r as *const Row)))
        .map(|r| format!("{:?} {:?} {} {:?}", r.kinds, r.versions, r.kueue, r.when))
        .collect();
    assert!(missing.is_empty(), "rows without a case:\n{}", missing.join("\n"));
}
