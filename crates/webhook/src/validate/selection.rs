//! Warnings (never denials) about ClusterQueues that do not serve the
//! namespaces of the LocalQueues pointing at them, by the one rule of
//! [`sluice_api::selector`]: unset selects no namespace, `{}` all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sluice_api::selector;

use crate::cache::ClusterView;

/// What to tell whoever creates or updates LocalQueue `namespace/name`
/// pointing at `cluster_queue`: that no such ClusterQueue exists (once they
/// are listed), or that it does not select the namespace. Nothing when the
/// ClusterQueues (or, for a selector that needs them, the namespace's
/// labels) are not known.
pub fn local_queue_warning(namespace: &str, name: &str, cluster_queue: &str, view: &dyn ClusterView) -> Option<String> {
    if view.cluster_queue_exists(cluster_queue) == Some(false) {
        return Some(format!(
            "sluice: LocalQueue {namespace}/{name} points at ClusterQueue {cluster_queue}, which does not exist (a typo?); \
             its workloads wait with reason ClusterQueueMissing until it is created"
        ));
    }
    let sel = view.cluster_queue_selector(cluster_queue)?;
    let labels = match (view.namespace_labels(namespace), &sel) {
        (Some(l), _) => l,
        (None, None) => Default::default(),
        (None, Some(_)) => return None,
    };
    let why = selector::not_selected(cluster_queue, namespace, sel.as_ref(), &labels)?;
    Some(format!(
        "sluice: LocalQueue {namespace}/{name} cannot admit workloads: {why}; its workloads wait with reason NamespaceNotSelected"
    ))
}

/// What to tell whoever creates ClusterQueue `name` or changes its
/// namespaceSelector to `sel`: without a selector, that it serves no
/// namespace; and the LocalQueues pointing at it (when known) whose
/// namespace it does not select.
pub fn cluster_queue_warning(name: &str, sel: Option<&LabelSelector>, view: &dyn ClusterView) -> Option<String> {
    let stranded: Vec<String> = view
        .local_queues_of(name)
        .unwrap_or_default()
        .into_iter()
        .filter(|(ns, _)| match view.namespace_labels(ns) {
            Some(labels) => !selector::selects_namespace(sel, &labels),
            None => sel.is_none(),
        })
        .map(|(ns, lq)| format!("{ns}/{lq}"))
        .collect();
    let kept = "workloads already admitted keep running";
    match sel {
        None if stranded.is_empty() => Some(format!(
            "sluice: ClusterQueue {name} has no namespaceSelector, which selects no namespace (as in Kueue): no LocalQueue can use it; set namespaceSelector: {{}} to serve every namespace, or a selector for the namespaces it serves"
        )),
        None => Some(format!(
            "sluice: ClusterQueue {name} has no namespaceSelector, which selects no namespace (as in Kueue), so the {} LocalQueue(s) pointing at it cannot admit new workloads: {}; set namespaceSelector: {{}} to serve every namespace, or a selector for the namespaces it serves ({kept})",
            stranded.len(),
            stranded.join(", ")
        )),
        Some(_) if stranded.is_empty() => None,
        Some(s) => Some(format!(
            "sluice: the namespaceSelector {} of ClusterQueue {name} does not select the namespace of {} LocalQueue(s) pointing at it, which cannot admit new workloads: {} ({kept})",
            selector::display(s),
            stranded.len(),
            stranded.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::cache::MemoryView;

    fn sel(v: Value) -> Option<LabelSelector> {
        (!v.is_null()).then(|| serde_json::from_value(v).unwrap())
    }

    /// Namespaces `team-a` (team=a) and `team-b` (team=b); ClusterQueues
    /// listed with the selectors given; LocalQueues `team-a/gpu` and
    /// `team-b/gpu` pointing at `team-a`.
    fn view(queues: &[(&str, Value)]) -> MemoryView {
        let v = MemoryView::synced_empty();
        for t in ["a", "b"] {
            v.upsert_namespace(&format!("team-{t}"), BTreeMap::from([("team".into(), t.into())]));
        }
        v.replace_cluster_queues(queues.iter().map(|(n, s)| (n.to_string(), sel(s.clone()))).collect());
        v.replace_local_queue_targets(BTreeMap::from([
            (("team-a".into(), "gpu".into()), "team-a".into()),
            (("team-b".into(), "gpu".into()), "team-a".into()),
        ]));
        v
    }

    #[test]
    fn a_local_queue_is_warned_when_its_cluster_queue_does_not_select_its_namespace() {
        let team_a = json!({"matchLabels": {"team": "a"}});
        // (ClusterQueue's selector, LocalQueue's namespace, warned with)
        let cases = [
            (
                Value::Null,
                "team-b",
                Some("it has no namespaceSelector, which selects no namespace"),
            ),
            (Value::Null, "unknown", Some("it has no namespaceSelector")),
            (json!({}), "team-b", None),
            (team_a.clone(), "team-a", None),
            (
                team_a.clone(),
                "team-b",
                Some("its namespaceSelector {matchLabels: team=a} does not match"),
            ),
            // Labels not known: a selector cannot be judged.
            (team_a, "unknown", None),
        ];
        for (selector, ns, want) in cases {
            let v = view(&[("team-a", selector.clone())]);
            let got = local_queue_warning(ns, "gpu", "team-a", &v);
            match want {
                None => assert_eq!(got, None, "{selector} {ns}"),
                Some(part) => {
                    let got = got.unwrap_or_else(|| panic!("{selector} {ns}: no warning"));
                    assert!(
                        got.starts_with(&format!(
                            "sluice: LocalQueue {ns}/gpu cannot admit workloads: namespace {ns} is not selected by ClusterQueue team-a"
                        )),
                        "{got}"
                    );
                    assert!(got.contains(part), "{got}");
                }
            }
        }
        // ClusterQueues not listed yet: nothing to say.
        let v = MemoryView::synced_empty();
        assert_eq!(local_queue_warning("team-b", "gpu", "team-a", &v), None);
    }

    #[test]
    fn a_local_queue_pointing_at_a_cluster_queue_that_does_not_exist_is_warned() {
        let v = view(&[("team-a", json!({}))]);
        assert_eq!(
            local_queue_warning("team-a", "gpu", "taem-a", &v).as_deref(),
            Some(
                "sluice: LocalQueue team-a/gpu points at ClusterQueue taem-a, which does not exist (a typo?); \
                 its workloads wait with reason ClusterQueueMissing until it is created"
            )
        );
        assert_eq!(local_queue_warning("team-a", "gpu", "team-a", &v), None);
    }

    #[test]
    fn a_cluster_queue_selector_that_strands_local_queues_is_warned() {
        let v = view(&[]);
        let warn = |s: Value| cluster_queue_warning("team-a", sel(s).as_ref(), &v);
        assert_eq!(
            warn(Value::Null).unwrap(),
            "sluice: ClusterQueue team-a has no namespaceSelector, which selects no namespace (as in Kueue), so the 2 \
             LocalQueue(s) pointing at it cannot admit new workloads: team-a/gpu, team-b/gpu; set namespaceSelector: {} \
             to serve every namespace, or a selector for the namespaces it serves (workloads already admitted keep running)"
        );
        assert_eq!(
            warn(json!({"matchLabels": {"team": "a"}})).unwrap(),
            "sluice: the namespaceSelector {matchLabels: team=a} of ClusterQueue team-a does not select the namespace of \
             1 LocalQueue(s) pointing at it, which cannot admit new workloads: team-b/gpu (workloads already admitted \
             keep running)"
        );
        assert_eq!(warn(json!({})), None);
        assert_eq!(
            warn(json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]})),
            None
        );
        // No LocalQueue yet (or not listed): without a selector it still
        // serves nothing, and says so.
        let empty = MemoryView::synced_empty();
        let w = cluster_queue_warning("fresh", None, &empty).unwrap();
        assert!(w.contains("no LocalQueue can use it"), "{w}");
        assert_eq!(
            cluster_queue_warning("fresh", sel(json!({"matchLabels": {"team": "a"}})).as_ref(), &empty),
            None
        );
    }
}
