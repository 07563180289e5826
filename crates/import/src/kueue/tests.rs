//! The importer's rules, one at a time. Whole samples, with their Sluice
//! output and notes, are the golden tests (`tests/golden.rs`); every row of
//! the table is exercised by `tests/fields.rs`.

use serde_json::{Value, json};

use super::*;

fn docs(yaml: &str) -> Vec<Value> {
    yaml.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

fn places(out: &Import) -> Vec<(&str, Status)> {
    out.notes.iter().map(|n| (n.place.as_str(), n.status)).collect()
}

fn cluster_queue(version: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("kueue.x-k8s.io/{version}"), "kind": "ClusterQueue",
           "metadata": {"name": "team-a"}, "spec": spec})
}

fn gpu_groups(flavors: &[&str]) -> Value {
    let flavors: Vec<Value> = flavors
        .iter()
        .map(|f| json!({"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}))
        .collect();
    json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}])
}

/// Kueue's documented single ClusterQueue (site/static/examples/admin/
/// single-clusterqueue-setup.yaml), v1beta2: the same queue in Sluice,
/// written as Sluice's types write it, nothing to say.
#[test]
fn kueues_single_cluster_queue_is_the_same_queue_in_sluice() {
    let out = import(
        &docs(
            r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 36Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}"#,
        ),
        true,
    )
    .unwrap();
    assert_eq!(out.notes, []);
    assert_eq!(
        (out.flags.len(), &out.chart_values, &out.fair_sharing),
        (0, &Value::Null, &None)
    );
    assert_eq!(out.origins, [0, 1, 2]);
    assert_eq!(
        out.objects,
        [
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "default-flavor"}, "spec": {}}),
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "cluster-queue"},
                   "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"],
                       "flavors": [{"name": "default-flavor", "resources": [
                           {"name": "cpu", "nominalQuota": "9"}, {"name": "memory", "nominalQuota": "36Gi"}]}]}],
                     "queueingStrategy": "BestEffortFIFO", "namespaceSelector": {},
                     "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                                    "borrowWithinCohort": {"policy": "Never"}},
                     "stopPolicy": "None"}}),
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "user-queue", "namespace": "default"},
                   "spec": {"clusterQueue": "cluster-queue", "stopPolicy": "None"}}),
        ]
    );
}

/// In Kueue an unset namespaceSelector selects no namespace (a nil
/// LabelSelector is labels.Nothing()), as in Sluice: it stays unset, and
/// the admin is told what it means.
#[test]
fn an_unset_namespace_selector_stays_unset_and_is_explained() {
    let groups = gpu_groups(&["a100"]);
    let out = import(&[cluster_queue("v1beta2", json!({"resourceGroups": groups}))], true).unwrap();
    assert!(out.objects[0]["spec"].get("namespaceSelector").is_none());
    assert_eq!(
        places(&out),
        [("ClusterQueue team-a: spec.namespaceSelector", Status::Mapped)]
    );
    assert!(
        out.notes[0]
            .message
            .starts_with("unset: the queue serves no namespace, in Kueue as in Sluice")
    );
    let selector = json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]});
    let out = import(
        &[cluster_queue(
            "v1beta2",
            json!({"resourceGroups": groups, "namespaceSelector": selector}),
        )],
        true,
    )
    .unwrap();
    assert_eq!(out.objects[0]["spec"]["namespaceSelector"], selector);
    assert_eq!(out.notes, []);
}

/// v1beta1's `cohort` and v1beta2's `cohortName` are Sluice's `cohort`;
/// a Cohort's `parent` (v1alpha1) and `parentName` are its `parent`; each
/// version's name is unknown in the other.
#[test]
fn each_versions_name_for_cohort_and_parent_becomes_sluices() {
    let groups = gpu_groups(&["a100"]);
    let spec = |key: &str| json!({"namespaceSelector": {}, "resourceGroups": groups, key: "research"});
    for (version, key) in [("v1beta1", "cohort"), ("v1beta2", "cohortName")] {
        let out = import(&[cluster_queue(version, spec(key))], true).unwrap();
        assert_eq!(out.objects[0]["spec"]["cohort"], "research", "{version}");
        assert!(out.objects[0]["spec"].get("cohortName").is_none());
    }
    let out = import(&[cluster_queue("v1beta1", spec("cohortName"))], false).unwrap();
    assert_eq!(
        places(&out),
        [("ClusterQueue team-a: spec.cohortName", Status::Unsupported)]
    );
    assert!(out.objects[0]["spec"].get("cohort").is_none());
    for (version, key) in [
        ("v1alpha1", "parent"),
        ("v1beta1", "parentName"),
        ("v1beta2", "parentName"),
    ] {
        let cohort = json!({"apiVersion": format!("kueue.x-k8s.io/{version}"), "kind": "Cohort",
                            "metadata": {"name": "research"}, "spec": {key: "company", "fairSharing": {"weight": "0.75"}}});
        let out = import(&[cohort], true).unwrap();
        assert_eq!(
            out.objects[0]["spec"],
            json!({"parent": "company", "fairSharing": {"weight": "0.75"}}),
            "{version}"
        );
    }
}

/// A key the table does not know is reported where it starts (not once
/// per key below it) and never copied; the rest of its object is.
#[test]
fn an_unknown_field_is_reported_where_it_starts_and_never_copied() {
    let mut cq = cluster_queue(
        "v1beta2",
        json!({"namespaceSelector": {}, "resourceGroups": gpu_groups(&["a100"])}),
    );
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["surprise"] = json!({"a": 1, "b": [2]});
    cq["spec"]["preemption"] = json!({"withinClusterQueue": "LowerPriority", "futurePolicy": "Always"});
    let out = import(&[cq], false).unwrap();
    assert_eq!(
        places(&out),
        [
            ("ClusterQueue team-a: spec.preemption.futurePolicy", Status::Unsupported),
            (
                "ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].surprise",
                Status::Unsupported
            ),
        ]
    );
    assert_eq!(out.notes[0].message, "unknown field: not copied");
    let spec = &out.objects[0]["spec"];
    assert_eq!(
        spec["resourceGroups"][0]["flavors"][0]["resources"][0],
        json!({"name": "nvidia.com/gpu", "nominalQuota": "8"})
    );
    assert_eq!(spec["preemption"]["withinClusterQueue"], "LowerPriority");
    assert!(import(&out_docs(&out), true).is_ok());
}

/// The objects of an import, as Kueue documents again (for a second pass).
fn out_docs(out: &Import) -> Vec<Value> {
    out.objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
            o
        })
        .collect()
}

/// Metadata the API server or kubectl wrote is dropped without a word;
/// the admin's labels and annotations are kept.
#[test]
fn server_metadata_and_kubectls_copy_are_dropped_labels_and_annotations_kept() {
    let flavor = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
        "metadata": {"name": "a100", "uid": "1234", "resourceVersion": "42", "generation": 3,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["kueue.x-k8s.io/resource-in-use"],
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                     "labels": {"gpu": "a100"},
                     "annotations": {"owner": "platform", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "A100"}},
        "status": {"anything": true}});
    let out = import(&[flavor], true).unwrap();
    assert_eq!(out.notes, []);
    assert_eq!(
        out.objects[0]["metadata"],
        json!({"name": "a100", "labels": {"gpu": "a100"}, "annotations": {"owner": "platform"}})
    );
    assert!(out.objects[0].get("status").is_none());
}

/// flavorFungibility: the values that are what Sluice does are taken
/// silently; MayStopSearch for borrowing is a difference; for preemption
/// and PreemptionOverBorrowing, not supported; a value nobody knows is
/// reported as such. Unset, Kueue's default is a difference only where it
/// matters: a queue that borrows and has a choice of flavors.
#[test]
fn flavor_fungibility_is_judged_value_by_value() {
    let judge = |version: &str, fungibility: Value| {
        let spec = json!({"namespaceSelector": {}, "cohortName": "c", "cohort": "c",
                          "resourceGroups": gpu_groups(&["h100", "a100"]), "flavorFungibility": fungibility});
        let mut cq = cluster_queue(version, spec);
        let other = if version == "v1beta1" { "cohortName" } else { "cohort" };
        cq["spec"].as_object_mut().unwrap().remove(other);
        let out = import(&[cq], false).unwrap();
        assert!(out.objects[0]["spec"].get("flavorFungibility").is_none());
        out.notes
            .iter()
            .map(|n| {
                (
                    n.place
                        .trim_start_matches("ClusterQueue team-a: spec.flavorFungibility")
                        .to_string(),
                    n.status,
                )
            })
            .collect::<Vec<_>>()
    };
    let both_next = json!({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"});
    assert_eq!(judge("v1beta2", both_next), []);
    assert_eq!(
        judge(
            "v1beta2",
            json!({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"})
        ),
        [
            (".whenCanBorrow".into(), Status::Difference),
            (".whenCanPreempt".into(), Status::Unsupported)
        ]
    );
    assert_eq!(
        judge(
            "v1beta1",
            json!({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})
        ),
        [
            (".whenCanBorrow".into(), Status::Difference),
            (".whenCanPreempt".into(), Status::Unsupported)
        ]
    );
    assert_eq!(
        judge(
            "v1beta2",
            json!({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"})
        ),
        [(".preference".into(), Status::Unsupported)]
    );
    assert_eq!(
        judge("v1beta2", json!({"whenCanPreempt": "Sometimes"})),
        [
            (".whenCanPreempt".into(), Status::Unsupported),
            (".whenCanBorrow".into(), Status::Difference),
        ]
    );
    // No choice of flavors, or no cohort: Kueue's default changes nothing.
    let one_flavor = cluster_queue(
        "v1beta2",
        json!({"namespaceSelector": {}, "cohortName": "c", "resourceGroups": gpu_groups(&["a100"])}),
    );
    let no_cohort = cluster_queue(
        "v1beta2",
        json!({"namespaceSelector": {}, "resourceGroups": gpu_groups(&["h100", "a100"])}),
    );
    assert_eq!(import(&[one_flavor, no_cohort], true).unwrap().notes, []);
}

/// What Sluice's validation refuses is an error naming the object and
/// every violation's field; a field of the wrong type names its path.
#[test]
fn a_translation_sluice_would_refuse_is_an_error_naming_object_and_field() {
    let mut cq = cluster_queue(
        "v1beta2",
        json!({"namespaceSelector": {}, "resourceGroups": gpu_groups(&["a100"])}),
    );
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = json!(2);
    let err = import(&[cq.clone()], false).unwrap_err().to_string();
    assert_eq!(
        err,
        "ClusterQueue team-a: Sluice would refuse the translation: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: requires spec.cohort: without a cohort there is nothing to borrow"
    );
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = json!([8]);
    let err = import(&[cq], false).unwrap_err().to_string();
    assert!(
        err.starts_with("ClusterQueue team-a: Sluice would refuse the translation: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "),
        "{err}"
    );
}

/// `strict`: every unsupported field, all listed, is the error.
#[test]
fn strict_lists_every_unsupported_field() {
    let spec = json!({"namespaceSelector": {}, "resourceGroups": gpu_groups(&["a100"]),
                      "admissionChecks": ["prov", "mk"], "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}});
    let docs = [cluster_queue("v1beta1", spec)];
    assert_eq!(import(&docs, false).unwrap().notes.len(), 2);
    let err = import(&docs, true).unwrap_err().to_string();
    assert_eq!(
        err,
        "strict import: 2 field(s) Sluice does not support:\n  \
         ClusterQueue team-a: spec.admissionChecks: not copied: admission checks (ProvisioningRequest, MultiKueue) are not implemented\n  \
         ClusterQueue team-a: spec.admissionScope: not copied: no admission fair sharing between the LocalQueues of a ClusterQueue"
    );
}

/// Kueue's other kinds and other documents are reported, a Workload is
/// not (it is the switch-over's); a ResourceFlavor's topologyName note
/// lists its Topology's levels.
#[test]
fn other_kinds_are_reported_and_a_topologys_levels_named() {
    let out = import(
        &docs(
            r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec:
  levels: [{nodeLabel: cloud.provider.com/topology-block}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tas-flavor}
spec: {topologyName: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: prov}
spec: {controllerName: kueue.x-k8s.io/provisioning-request}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: job-a, namespace: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Gizmo
metadata: {name: g}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}"#,
        ),
        false,
    )
    .unwrap();
    assert_eq!(
        places(&out),
        [
            ("Topology default", Status::Unsupported),
            ("ResourceFlavor tas-flavor: spec.topologyName", Status::Unsupported),
            ("AdmissionCheck prov", Status::Unsupported),
            ("Gizmo g", Status::Unsupported),
            ("document 6 (batch/v1 Job)", Status::Unsupported),
        ]
    );
    assert!(
        out.notes[1]
            .message
            .ends_with("(Topology default has the levels cloud.provider.com/topology-block, kubernetes.io/hostname)"),
        "{}",
        out.notes[1].message
    );
    assert_eq!((out.objects.len(), out.origins.as_slice()), (1, &[1][..]));
}

#[test]
fn kueue_documents_are_told_from_others() {
    for (yes, doc) in [
        (
            true,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue"}),
        ),
        (
            true,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload"}),
        ),
        (
            true,
            json!({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}),
        ),
        (
            true,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"c.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"}}),
        ),
        (
            false,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"c.yaml": "a: b"}}),
        ),
        (
            false,
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue"}),
        ),
        (false, json!({"apiVersion": "batch/v1", "kind": "Job"})),
    ] {
        assert_eq!(is_kueue(&doc), yes, "{doc}");
    }
}

#[test]
fn unreadable_documents_are_errors_with_their_number() {
    let nameless = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "spec": {}});
    assert_eq!(
        import(&[nameless], false).unwrap_err().to_string(),
        "document 1: LocalQueue without metadata.name"
    );
    let v2 = json!({"apiVersion": "kueue.x-k8s.io/v2", "kind": "ClusterQueue", "metadata": {"name": "a"}});
    assert_eq!(
        import(&[v2], false).unwrap_err().to_string(),
        "document 1: ClusterQueue of version \"v2\": the importer reads v1alpha1, v1beta1, v1beta2"
    );
    let config = json!({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"});
    assert_eq!(
        import(&[config.clone(), config], false).unwrap_err().to_string(),
        "document 2: a second Kueue Configuration: give one"
    );
}

fn configure(yaml: &str) -> Import {
    import(&docs(yaml), false).unwrap()
}

/// A v1beta1 Configuration with nothing set: Kueue's defaults (fair
/// sharing off, no pods-ready check, batch/job alone), each said.
#[test]
fn an_empty_v1beta1_configuration_gives_kueues_defaults() {
    let out = configure("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n");
    assert_eq!(
        out.flags,
        [
            "--fair-sharing=off",
            "--pods-ready-timeout=0",
            "--integrations=batch/job"
        ]
    );
    assert_eq!(
        out.chart_values,
        json!({"controller": {"fairSharing": {"enabled": false}, "podsReadyTimeout": "0",
                              "extraArgs": ["--integrations=batch/job"]}})
    );
    assert_eq!(
        places(&out),
        [
            ("Configuration: fairSharing", Status::Difference),
            ("Configuration: waitForPodsReady", Status::Difference),
            ("Configuration: integrations.frameworks", Status::Difference),
        ]
    );
    assert_eq!(out.fair_sharing, Some(FairSharing::default()));
}

/// v1beta2 turns features on by presence, and checks pods by default
/// (30m) unless the DisableWaitForPodsReady gate says otherwise.
#[test]
fn v1beta2_turns_fair_sharing_on_by_presence_and_checks_pods_by_default() {
    let out = configure(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\nintegrations: {frameworks: [batch/job]}\n",
    );
    assert_eq!(
        out.flags,
        [
            "--fair-sharing=on",
            "--pods-ready-timeout=30m",
            "--integrations=batch/job"
        ]
    );
    assert_eq!(
        places(&out),
        [
            ("Configuration: waitForPodsReady", Status::Difference),
            ("Configuration: waitForPodsReady.recoveryTimeout", Status::Difference),
        ]
    );
    let gated = configure(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates: {DisableWaitForPodsReady: true, TopologyAwareScheduling: true}\nintegrations: {frameworks: [batch/job]}\n",
    );
    assert!(
        gated.flags.contains(&"--pods-ready-timeout=0".to_string()),
        "{:?}",
        gated.flags
    );
    assert_eq!(
        places(&gated),
        [
            ("Configuration: featureGates", Status::Unsupported),
            ("Configuration: fairSharing", Status::Difference),
            ("Configuration: waitForPodsReady", Status::Difference),
        ]
    );
}

/// Everything Kueue lets a Configuration say about admission, set: each
/// setting is the flag and chart value Sluice has for it.
#[test]
fn a_full_v1beta1_configuration_becomes_flags_and_chart_values() {
    let out = configure(
        r#"apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: false
fairSharing: {enable: true, preemptionStrategies: [LessThanInitialShare]}
waitForPodsReady:
  enable: true
  timeout: 10m0s
  blockAdmission: false
  recoveryTimeout: 0s
  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: 5, backoffBaseSeconds: 30, backoffMaxSeconds: 1800}
clientConnection: {qps: 50.5, burst: 100}
leaderElection: {leaderElect: true, leaseDuration: 15s, resourceName: c1f6bfd2.kueue.x-k8s.io}
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset, workload.codeflare.dev/appwrapper, ray.io/rayjob]"#,
    );
    assert_eq!(
        out.flags,
        [
            "--fair-sharing=on",
            "--fair-sharing-strategies=LessThanInitialShare",
            "--pods-ready-timeout=10m",
            "--requeue-limit=5",
            "--requeue-backoff-base=30s",
            "--requeue-backoff-max=30m",
            "--kube-qps=50.5",
            "--kube-burst=100",
            "--leader-elect=true",
            "--lease-duration-seconds=15",
            "--integrations=batch/job,jobset.x-k8s.io/jobset,ray.io/rayjob",
        ]
    );
    assert_eq!(
        out.chart_values,
        json!({"controller": {
            "fairSharing": {"enabled": true, "strategies": ["LessThanInitialShare"]},
            "podsReadyTimeout": "10m", "requeueBackoffBase": "30s", "requeueBackoffMax": "30m",
            "kubeQps": 50.5, "kubeBurst": 100, "leaderElect": true, "leaseDurationSeconds": 15,
            "extraArgs": ["--requeue-limit=5", "--integrations=batch/job,jobset.x-k8s.io/jobset,ray.io/rayjob"]}})
    );
    let fair = FairSharing {
        enabled: true,
        strategies: vec!["LessThanInitialShare".into()],
    };
    assert_eq!(out.fair_sharing, Some(fair));
    assert_eq!(
        places(&out),
        [
            ("Configuration: clientConnection.burst", Status::Difference),
            ("Configuration: clientConnection.qps", Status::Difference),
            ("Configuration: leaderElection.resourceName", Status::Difference),
            ("Configuration: namespace", Status::Difference),
            (
                "Configuration: waitForPodsReady.requeuingStrategy.backoffLimitCount",
                Status::Difference
            ),
            ("Configuration: integrations.frameworks[2]", Status::Unsupported),
        ]
    );
    assert_eq!(
        out.notes[5].message,
        "workload.codeflare.dev/appwrapper: Sluice does not queue it (it queues batch/job, jobset.x-k8s.io/jobset, kubeflow.org/pytorchjob, kubeflow.org/mpijob, ray.io/rayjob, kubeflow.org/tfjob, kubeflow.org/xgboostjob, kubeflow.org/paddlejob, kubeflow.org/jaxjob, ray.io/raycluster, trainer.kubeflow.org/trainjob, deployment, statefulset, leaderworkerset.x-k8s.io/leaderworkerset)"
    );
}

/// Kueue ships its Configuration in a ConfigMap; a duration Sluice cannot
/// read is reported and Kueue's default used.
#[test]
fn a_configuration_inside_a_config_map_is_read_and_a_bad_duration_reported() {
    let out = configure(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-manager-config, namespace: kueue-system}
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta1
    kind: Configuration
    waitForPodsReady: {enable: true, timeout: 5 minutes, blockAdmission: true}
    integrations: {frameworks: [batch/job]}"#,
    );
    assert!(
        out.flags.contains(&"--pods-ready-timeout=5m".to_string()),
        "{:?}",
        out.flags
    );
    let place = "Configuration (ConfigMap kueue-system/kueue-manager-config, controller_manager_config.yaml)";
    let said: Vec<String> = out.notes.iter().map(|n| n.to_string()).collect();
    assert_eq!(
        said,
        [
            format!(
                "{place}: waitForPodsReady.blockAdmission (not supported): not copied: Sluice never holds admissions while admitted pods start"
            ),
            format!(
                "{place}: fairSharing (mapped, with a difference): Kueue's fair sharing is off unless configured, Sluice's on: --fair-sharing=off keeps Kueue's behaviour"
            ),
            format!(
                "{place}: waitForPodsReady.timeout (not supported): \"5 minutes\" is not a duration Sluice reads (write it without spaces, with units ms, s, m, h (e.g. 90s, 2h30m)): not copied"
            ),
            format!(
                "{place}: waitForPodsReady.recoveryTimeout (mapped, with a difference): Kueue's default (the timeout) also evicts a workload whose pods stay unready that long after they were ready; Sluice checks only until they are first ready"
            ),
        ]
    );
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}});
    assert_eq!(
        places(&import(&[other], false).unwrap()),
        [("document 1 (v1 ConfigMap)", Status::Unsupported)]
    );
}
