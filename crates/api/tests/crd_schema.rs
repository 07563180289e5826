//! Properties of the generated CRDs that `kubectl explain` users and the
//! API server rely on.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use sluice_api::crd;

fn schema(crd: &CustomResourceDefinition) -> &JSONSchemaProps {
    crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap()
}

/// Calls `f(path, schema)` for every property below `node`.
fn walk(node: &JSONSchemaProps, path: &str, f: &mut dyn FnMut(&str, &JSONSchemaProps)) {
    for (name, prop) in node.properties.iter().flatten() {
        let p = format!("{path}.{name}");
        f(&p, prop);
        walk(prop, &p, f);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &node.items {
        walk(items, &format!("{path}[]"), f);
    }
}

#[test]
fn order_names_and_scope() {
    let crds = crd::all();
    let names: Vec<_> = crds.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    assert_eq!(
        names,
        [
            "resourceflavors.sluice.dev",
            "clusterqueues.sluice.dev",
            "cohorts.sluice.dev",
            "localqueues.sluice.dev",
            "workloadpriorityclasses.sluice.dev",
            "workloads.sluice.dev",
        ]
    );
    let scopes: Vec<_> = crds.iter().map(|c| c.spec.scope.as_str()).collect();
    assert_eq!(
        scopes,
        ["Cluster", "Cluster", "Cluster", "Namespaced", "Cluster", "Namespaced"]
    );
    // Cohort has none, as in Kueue.
    let short: Vec<_> = crds
        .iter()
        .map(|c| c.spec.names.short_names.clone().unwrap_or_default())
        .collect();
    let expected: [&[&str]; 6] = [&["rf"], &["cq"], &[], &["lq"], &["wpc"], &["wl"]];
    assert_eq!(short, expected);
    for c in &crds {
        assert_eq!(c.spec.group, "sluice.dev");
        assert_eq!(c.spec.versions.len(), 1);
        assert_eq!(c.spec.versions[0].name, "v1alpha1");
        assert_eq!(c.spec.names.categories.clone().unwrap(), ["sluice"]);
        // selectableFields needs Kubernetes 1.30; the core path supports 1.24.
        assert!(c.spec.versions[0].selectable_fields.is_none());
    }
}

#[test]
fn every_property_has_a_description() {
    let mut missing = Vec::new();
    for c in crd::all() {
        let kind = c.spec.names.kind.clone();
        let root = schema(&c);
        assert!(root.description.is_some(), "{kind} has no description");
        walk(root, &kind, &mut |path, prop| {
            if prop.description.as_deref().is_none_or(str::is_empty) {
                missing.push(path.to_string());
            }
        });
    }
    assert!(
        missing.is_empty(),
        "properties without description:\n{}",
        missing.join("\n")
    );
}

#[test]
fn list_maps_have_required_keys() {
    for c in crd::all() {
        walk(schema(&c), &c.spec.names.kind, &mut |path, prop| {
            if prop.x_kubernetes_list_type.as_deref() == Some("map") {
                let Some(JSONSchemaPropsOrArray::Schema(items)) = &prop.items else {
                    panic!("{path}: list-map without item schema");
                };
                for key in prop.x_kubernetes_list_map_keys.iter().flatten() {
                    let required = items.required.iter().flatten().any(|r| r == key);
                    let defaulted = items
                        .properties
                        .as_ref()
                        .and_then(|p| p.get(key))
                        .is_some_and(|k| k.default.is_some());
                    assert!(
                        required || defaulted,
                        "{path}: list-map key {key} is neither required nor defaulted"
                    );
                }
            }
        });
    }
}

#[test]
fn status_subresources_and_printer_columns() {
    let columns = |kind: &str| -> Vec<(String, String)> {
        let c = crd::all().into_iter().find(|c| c.spec.names.kind == kind).unwrap();
        c.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|col| (col.name, col.json_path))
            .collect()
    };
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    assert_eq!(
        columns("ClusterQueue"),
        pairs(&[
            ("Cohort", ".spec.cohort"),
            ("Active", ".status.conditions[?(@.type==\"Active\")].status"),
            ("Reason", ".status.conditions[?(@.type==\"Active\")].reason"),
            ("Strategy", ".spec.queueingStrategy"),
            ("Pending", ".status.pendingWorkloads"),
            ("Admitted", ".status.admittedWorkloads"),
            ("GPUs", ".status.gpus"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns("Cohort"),
        pairs(&[
            ("Parent", ".spec.parent"),
            ("Active", ".status.conditions[?(@.type==\"Active\")].status"),
            ("Reason", ".status.conditions[?(@.type==\"Active\")].reason"),
            ("Weight", ".spec.fairSharing.weight"),
            ("Share", ".status.fairSharing.weightedShare"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns("LocalQueue"),
        pairs(&[
            ("ClusterQueue", ".spec.clusterQueue"),
            ("Active", ".status.conditions[?(@.type==\"Active\")].status"),
            ("Reason", ".status.conditions[?(@.type==\"Active\")].reason"),
            ("Pending", ".status.pendingWorkloads"),
            ("Admitted", ".status.admittedWorkloads"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns("Workload"),
        pairs(&[
            ("Queue", ".spec.queueName"),
            ("Admitted by", ".status.admission.clusterQueue"),
            ("State", ".status.state"),
            ("Position", ".status.pending.positionInLocalQueue"),
            ("Reason", ".status.pending.reason"),
            ("Est. start", ".status.pending.estimatedStart"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    for c in crd::all() {
        let has_status = c.spec.versions[0]
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        let expect = matches!(
            c.spec.names.kind.as_str(),
            "ClusterQueue" | "Cohort" | "LocalQueue" | "Workload"
        );
        assert_eq!(has_status, expect, "{}", c.spec.names.kind);
    }
}

#[test]
fn defaults_bounds_and_rules_are_in_the_schema() {
    let yaml = crd::all_to_yaml().unwrap();
    for needle in [
        "default: BestEffortFIFO",
        "default: Never",
        "default: None",
        "default: 1\n",
        "default: true",
        "maxItems: 16",
        "maxItems: 64",
        "rule: self == oldSelf",
        "x-kubernetes-preserve-unknown-fields: true",
        "borrowingLimit and lendingLimit require spec.cohort",
        "borrowingLimit and lendingLimit require spec.parent",
        "minCount must be at most count",
    ] {
        assert!(yaml.contains(needle), "generated CRDs lack {needle:?}");
    }
    // The Quantity type's long description must not leak into the CRDs.
    assert!(!yaml.contains("fixed-point representation"));
}
