use serde_json::{Value, json};

use super::*;

fn docs(yaml: &str) -> Vec<Value> {
    yaml.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

fn find<'a>(out: &'a Import, kind: &str, name: &str) -> &'a Value {
    out.objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:#?}", out.objects))
}

/// Kueue's own single-ClusterQueue sample (site/…/cluster_queue.md),
/// v1beta1, with its flavor and a LocalQueue.
const SINGLE: &str = r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, pods]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 36Gi}
      - {name: pods, nominalQuota: 5}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue, stopPolicy: None}"#;

#[test]
fn a_single_cluster_queue_is_the_same_queue_in_sluice() {
    let out = import(&docs(SINGLE), true).unwrap();
    assert_eq!(
        out.objects,
        [
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor",
                   "metadata": {"name": "default-flavor"}, "spec": {}}),
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
                   "metadata": {"name": "cluster-queue"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", "pods"],
                       "flavors": [{"name": "default-flavor", "resources": [
                           {"name": "cpu", "nominalQuota": 9}, {"name": "memory", "nominalQuota": "36Gi"},
                           {"name": "pods", "nominalQuota": 5}]}]}]}}),
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
                   "metadata": {"name": "user-queue", "namespace": "default"},
                   "spec": {"clusterQueue": "cluster-queue", "stopPolicy": "None"}}),
        ]
    );
    let cq = find(&out, "ClusterQueue", "cluster-queue");
    assert_eq!(cq["apiVersion"], "sluice.dev/v1alpha1");
    assert_eq!(cq["spec"]["namespaceSelector"], json!({}));
    assert_eq!(
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1],
        json!({"name": "memory", "nominalQuota": "36Gi"})
    );
    assert_eq!(
        find(&out, "LocalQueue", "user-queue")["spec"]["clusterQueue"],
        "cluster-queue"
    );
    assert!(out.notes.is_empty(), "{:#?}", out.notes);
}

/// Two teams in a cohort: borrowing and lending limits, two flavors,
/// preemption policies, a stop policy, priority classes (v1beta1).
const COHORT: &str = r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a, labels: {team: a}}
spec:
  cohort: research
  queueingStrategy: StrictFIFO
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 16, borrowingLimit: 8, lendingLimit: 4}
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
status:
  pendingWorkloads: 3
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: training}
value: 1000
description: training runs"#;

#[test]
fn cohorts_limits_flavors_and_preemption_are_copied_and_status_is_not() {
    let out = import(&docs(COHORT), true).unwrap();
    let cq = find(&out, "ClusterQueue", "team-a");
    assert_eq!(cq["metadata"], json!({"name": "team-a", "labels": {"team": "a"}}));
    assert_eq!(cq["spec"]["cohort"], "research");
    assert_eq!(cq["spec"]["queueingStrategy"], "StrictFIFO");
    assert_eq!(cq["spec"]["stopPolicy"], "Hold");
    assert_eq!(
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0],
        json!({"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 8, "lendingLimit": 4})
    );
    assert_eq!(cq["spec"]["resourceGroups"][0]["flavors"][1]["name"], "a100");
    assert_eq!(
        cq["spec"]["preemption"],
        json!({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
               "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}})
    );
    assert!(cq.get("status").is_none());
    let wpc = find(&out, "WorkloadPriorityClass", "training");
    assert_eq!(
        (wpc["value"].clone(), wpc["description"].clone()),
        (json!(1000), json!("training runs"))
    );
    // Unset namespaceSelector: Kueue's "every namespace", said.
    assert_eq!(cq["spec"]["namespaceSelector"], json!({}));
    assert_eq!(out.notes.len(), 1, "{:#?}", out.notes);
    assert_eq!(out.notes[0].place, "ClusterQueue team-a: spec.namespaceSelector");
    assert_eq!(out.notes[0].status, Status::Difference);
}

/// v1beta2: hierarchical cohorts with fair-sharing weights, a tainted
/// flavor with a topology, and what Sluice does not have.
const HIERARCHY: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: root}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: research}
spec: {parentName: root, fairSharing: {weight: "2"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100}
  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {matchLabels: {team: b}}
  fairSharing: {weight: "1"}
  flavorFungibility: {whenCanBorrow: MayStopSearch}
  admissionChecksStrategy:
    admissionChecks: [{name: prov}]
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-c}
spec:
  cohort: research
  namespaceSelector: {}
  admissionChecks: [prov]
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  concurrentAdmissionPolicy: {migration: {mode: Never}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 0}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team-b, name: gpu}
spec: {clusterQueue: team-b, fairSharing: {weight: "1"}}
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: true
fairSharing:
  enable: true
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
waitForPodsReady:
  enable: true
  timeout: 10m
  blockAdmission: true
  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 5, backoffBaseSeconds: 60, backoffMaxSeconds: 3600}
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset, kubeflow.org/tfjob]"#;

#[test]
fn hierarchical_cohorts_and_v1beta2_names_are_sluices_and_what_sluice_lacks_is_listed_by_path() {
    let out = import(&docs(HIERARCHY), false).unwrap();
    assert_eq!(
        find(&out, "Cohort", "research")["spec"],
        json!({"parent": "root", "fairSharing": {"weight": "2"}})
    );
    assert_eq!(
        find(&out, "Cohort", "root")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"],
        8
    );
    let cq = find(&out, "ClusterQueue", "team-b");
    assert_eq!(cq["spec"]["cohort"], "research");
    assert_eq!(cq["spec"]["namespaceSelector"], json!({"matchLabels": {"team": "b"}}));
    assert_eq!(cq["spec"]["fairSharing"], json!({"weight": "1"}));
    assert!(cq["spec"].get("flavorFungibility").is_none() && cq["spec"].get("admissionChecksStrategy").is_none());
    let rf = find(&out, "ResourceFlavor", "h100");
    assert_eq!(rf["spec"]["nodeTaints"][0]["effect"], "NoSchedule");
    assert!(rf["spec"].get("topologyName").is_none());
    assert!(find(&out, "LocalQueue", "gpu")["spec"].get("fairSharing").is_none());
    let unsupported: Vec<&str> = out
        .notes
        .iter()
        .filter(|n| n.status == Status::Unsupported)
        .map(|n| n.place.as_str())
        .collect();
    assert_eq!(
        unsupported,
        [
            "ResourceFlavor h100: spec.topologyName",
            "ClusterQueue team-b: spec.admissionChecksStrategy",
            "ClusterQueue team-b: spec.flavorFungibility",
            "ClusterQueue team-c: spec.admissionChecks",
            "ClusterQueue team-c: spec.admissionScope",
            "ClusterQueue team-c: spec.concurrentAdmissionPolicy",
            "LocalQueue gpu: spec.fairSharing",
            "Configuration: namespace",
            "Configuration: waitForPodsReady.blockAdmission",
            "Configuration: integrations.frameworks (kubeflow.org/tfjob)",
        ]
    );
    assert_eq!(
        out.flags,
        [
            "--fair-sharing=on",
            "--fair-sharing-strategies=LessThanOrEqualToFinalShare,LessThanInitialShare",
            "--pods-ready-timeout=10m",
            "--requeue-limit=5",
            "--requeue-backoff-base=60s",
            "--requeue-backoff-max=3600s",
            "--integrations=jobset.x-k8s.io/jobset",
        ]
    );
    let strict = import(&docs(HIERARCHY), true).unwrap_err().to_string();
    assert!(strict.starts_with("--strict: 10 field(s) not supported:"), "{strict}");
    assert!(
        strict.contains("ClusterQueue team-b: spec.flavorFungibility: not copied: not configurable"),
        "{strict}"
    );
}

#[test]
fn an_unknown_field_is_reported_with_its_path_and_never_copied() {
    let mut d = docs(SINGLE);
    d[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["surprise"] = json!(1);
    let out = import(&d, false).unwrap();
    assert_eq!(out.notes.len(), 1);
    assert_eq!(
        out.notes[0].place,
        "ClusterQueue cluster-queue: spec.resourceGroups[].flavors[].resources[].surprise"
    );
    let cq = find(&out, "ClusterQueue", "cluster-queue");
    assert_eq!(
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0],
        json!({"name": "cpu", "nominalQuota": 9})
    );
}

#[test]
fn a_translation_sluice_would_refuse_is_an_error_naming_the_object() {
    let mut d = docs(SINGLE);
    d[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = json!(2);
    let err = import(&d, false).unwrap_err().to_string();
    assert!(
        err.starts_with("ClusterQueue cluster-queue: Sluice would refuse the translation:"),
        "{err}"
    );
    assert!(err.contains("borrowingLimit"), "{err}");
}

/// Every row of the table that copies a field is exercised by a sample
/// above: a field the importer claims to map is never untested.
#[test]
fn every_mapped_field_is_in_a_sample() {
    let mut paths: Vec<(String, String)> = Vec::new();
    for doc in [SINGLE, COHORT, HIERARCHY].iter().flat_map(|y| docs(y)) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let mut found = Vec::new();
        leaves(&doc, "", "", &mut found);
        paths.extend(found.into_iter().map(|(p, _)| (kind.clone(), p)));
    }
    for r in crate::mapping::mapping() {
        if r.status == Status::Ignored || r.kueue == "spec.parent" || r.kueue == "metadata.annotations" {
            // spec.parent: v1alpha1 only; annotations as labels.
            continue;
        }
        let covered = paths.iter().any(|(k, p)| {
            (r.kind == "*" || *k == r.kind)
                && (p == r.kueue
                    || p.strip_prefix(r.kueue)
                        .is_some_and(|x| x.starts_with('.') || x.starts_with('[')))
        });
        assert!(covered, "{} {} is in no sample", r.kind, r.kueue);
    }
}
