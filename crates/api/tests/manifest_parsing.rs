//! Multi-document YAML parsing: dispatch, other documents, error locations.

use sluice_api::manifest::{DocumentContent, SluiceObject, parse_manifests, partition};
use sluice_api::v1alpha1::{QueueingStrategy, StopPolicy, WithinClusterQueue};

const STREAM: &str = r#"# leading comment
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata:
  name: cq
spec:
  resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
        - name: h100
          resources:
            - name: nvidia.com/gpu
              nominalQuota: 8
---
# an empty document (comments only) is skipped
---
apiVersion: batch/v1
kind: Job
metadata:
  name: j
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
workloads: []
--- # marker with a comment
apiVersion: sluice.dev/v1alpha1
kind: WorkloadPriorityClass
metadata:
  name: training
value: 100
...
"#;

#[test]
fn dispatches_on_api_version_and_kind() {
    let docs = parse_manifests(STREAM).unwrap();
    assert_eq!(docs.len(), 4);
    assert_eq!(docs.iter().map(|d| d.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(docs.iter().map(|d| d.line).collect::<Vec<_>>(), [2, 17, 22, 26]);

    let Some(SluiceObject::ClusterQueue(cq)) = docs[0].as_sluice() else {
        panic!("expected a ClusterQueue, got {:?}", docs[0]);
    };
    // Defaults apply when fields are absent.
    assert_eq!(cq.spec.queueing_strategy, QueueingStrategy::BestEffortFifo);
    assert_eq!(cq.spec.stop_policy, StopPolicy::None);
    assert_eq!(cq.spec.preemption.within_cluster_queue, WithinClusterQueue::Never);
    // A YAML integer is a valid quantity.
    assert_eq!(cq.spec.resource_groups[0].flavors[0].resources[0].nominal_quota.0, "8");

    let job = docs[1].as_other().unwrap();
    assert_eq!(job.api_version.as_deref(), Some("batch/v1"));
    assert_eq!(job.kind.as_deref(), Some("Job"));
    // Unknown kinds, even in the sluice.dev group, are left to the caller.
    let trace = docs[2].as_other().unwrap();
    assert_eq!(trace.kind.as_deref(), Some("Trace"));
    assert_eq!(trace.value["workloads"], serde_json::json!([]));

    let Some(SluiceObject::WorkloadPriorityClass(pc)) = docs[3].as_sluice() else {
        panic!("expected a WorkloadPriorityClass");
    };
    assert_eq!(pc.spec.value, 100);

    let (sluice, other) = partition(docs);
    assert_eq!(sluice.len(), 2);
    assert_eq!(other.len(), 2);
}

#[test]
fn decode_error_has_document_location_and_path() {
    let text = "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: sluice.dev/v1alpha1\nkind: Workload\nmetadata:\n  name: w\nspec:\n  queueName: q\n  podSets:\n    - name: main\n      count: many\n      template: {}\n";
    let err = parse_manifests(text).unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(err.document_line, 3);
    assert_eq!(err.kind.as_deref(), Some("Workload"));
    assert_eq!(err.path.as_deref(), Some("spec.podSets[0].count"));
    let (line, column) = err.location.expect("location");
    assert_eq!(line, 12, "{err}");
    assert!(column >= 7, "{err}");
    let shown = err.to_string();
    assert!(shown.starts_with("document 2 (Workload), line 12, column"), "{shown}");
    assert!(shown.contains("spec.podSets[0].count: "), "{shown}");
}

#[test]
fn missing_required_field_names_the_kind() {
    let text = "apiVersion: sluice.dev/v1alpha1\nkind: LocalQueue\nmetadata:\n  name: lq\nspec: {}\n";
    let err = parse_manifests(text).unwrap_err();
    assert_eq!(err.kind.as_deref(), Some("LocalQueue"));
    assert!(err.message.contains("clusterQueue"), "{err}");
}

#[test]
fn yaml_syntax_error_has_absolute_line() {
    let text = "a: 1\n---\nb: [1, 2\nc: 3\n";
    let err = parse_manifests(text).unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(err.kind, None);
    assert!(err.message.starts_with("invalid YAML"), "{err}");
    let (line, _) = err.location.expect("location");
    assert!((3..=5).contains(&line), "{err}");
}

#[test]
fn non_mapping_documents_are_other() {
    let docs = parse_manifests("- 1\n- 2\n---\nhello\n").unwrap();
    assert_eq!(docs.len(), 2);
    assert!(matches!(&docs[0].content, DocumentContent::Other(o) if o.kind.is_none()));
}

#[test]
fn empty_input_has_no_documents() {
    assert!(parse_manifests("").unwrap().is_empty());
    assert!(parse_manifests("---\n# nothing\n---\n").unwrap().is_empty());
}
