//! Which namespaces a ClusterQueue serves: one rule for the controller, the
//! webhook, `kubectl sluice`, the simulator (and a Kueue importer).
//!
//! | `spec.namespaceSelector` | selects |
//! |--------------------------|---------|
//! | unset | no namespace |
//! | `{}` | every namespace |
//! | `{matchLabels: .., matchExpressions: [..]}` | namespaces whose labels match all of it |
//!
//! This is Kueue's meaning. A ClusterQueue serves only the namespaces its
//! admin chose, so leaving the field out never opens a team's quota to every
//! namespace admin who can create a LocalQueue.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::v1alpha1::ClusterQueueSpec;

impl ClusterQueueSpec {
    /// Whether LocalQueues in a namespace with these labels may use this
    /// ClusterQueue: unset selects none, `{}` selects all (see the module).
    pub fn selects_namespace(&self, labels: &BTreeMap<String, String>) -> bool {
        selects_namespace(self.namespace_selector.as_ref(), labels)
    }

    /// Why a namespace with these labels is not served, or `None` when it
    /// is: the sentence users read in statuses, events, warnings and
    /// `kubectl sluice`. Names the namespace, the ClusterQueue and its
    /// selector.
    pub fn namespace_not_selected(
        &self,
        cluster_queue: &str,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        not_selected(cluster_queue, namespace, self.namespace_selector.as_ref(), labels)
    }
}

/// [`ClusterQueueSpec::selects_namespace`] for callers that hold only the
/// selector (`None`: unset, which selects no namespace).
pub fn selects_namespace(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    selector.is_some_and(|s| matches(s, labels))
}

/// [`ClusterQueueSpec::namespace_not_selected`] for callers that hold only
/// the selector.
pub fn not_selected(
    cluster_queue: &str,
    namespace: &str,
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    (!selects_namespace(selector, labels)).then(|| not_selected_message(cluster_queue, namespace, selector))
}

/// The sentence for a namespace that `selector` (a ClusterQueue's
/// namespaceSelector, `None` when unset) does not select.
pub fn not_selected_message(cluster_queue: &str, namespace: &str, selector: Option<&LabelSelector>) -> String {
    let head = format!("namespace {namespace} is not selected by ClusterQueue {cluster_queue}");
    match selector {
        None => format!(
            "{head}: it has no namespaceSelector, which selects no namespace (set namespaceSelector: {{}} to serve every namespace)"
        ),
        Some(s) => format!(
            "{head}: its namespaceSelector {} does not match the namespace's labels",
            display(s)
        ),
    }
}

/// Whether a label selector selects these labels. `{}` selects everything;
/// an unknown operator selects nothing (validation refuses it anyway).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let have = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// A selector as one line of YAML-like text:
/// `{matchLabels: team=a, matchExpressions: [tier In (gold, silver)]}`, `{}`.
pub fn display(selector: &LabelSelector) -> String {
    let mut parts = Vec::new();
    if let Some(l) = selector.match_labels.as_ref().filter(|l| !l.is_empty()) {
        let pairs: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!("matchLabels: {}", pairs.join(", ")));
    }
    if let Some(e) = selector.match_expressions.as_ref().filter(|e| !e.is_empty()) {
        let exprs: Vec<String> = e
            .iter()
            .map(|e| {
                let mut s = format!("{} {}", e.key, e.operator);
                if let Some(v) = e.values.as_ref().filter(|v| !v.is_empty()) {
                    let _ = write!(s, " ({})", v.join(", "));
                }
                s
            })
            .collect();
        parts.push(format!("matchExpressions: [{}]", exprs.join(", ")));
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests;
