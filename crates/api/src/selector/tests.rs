use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn spec(selector: Option<Value>) -> ClusterQueueSpec {
    ClusterQueueSpec {
        namespace_selector: selector.map(|s| serde_json::from_value(s).unwrap()),
        ..Default::default()
    }
}

#[test]
fn a_cluster_queue_selects_namespaces_as_kueue_does() {
    let team_a = labels(&[("kubernetes.io/metadata.name", "team-a"), ("team", "a")]);
    let bare = labels(&[]);
    // (selector, namespace labels, selected)
    let cases = [
        // Unset: no namespace, not even one without labels.
        (None, &team_a, false),
        (None, &bare, false),
        // {}: every namespace.
        (Some(json!({})), &team_a, true),
        (Some(json!({})), &bare, true),
        (Some(json!({"matchLabels": {}, "matchExpressions": []})), &bare, true),
        // A selector: the namespaces it matches.
        (Some(json!({"matchLabels": {"team": "a"}})), &team_a, true),
        (Some(json!({"matchLabels": {"team": "a"}})), &bare, false),
        (Some(json!({"matchLabels": {"team": "b"}})), &team_a, false),
        (
            Some(json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]})),
            &bare,
            true,
        ),
    ];
    for (selector, ns, want) in cases {
        let s = spec(selector.clone());
        assert_eq!(s.selects_namespace(ns), want, "{selector:?} on {ns:?}");
        assert_eq!(
            s.namespace_not_selected("team-a", "team-b", ns).is_none(),
            want,
            "{selector:?} on {ns:?}"
        );
    }
}

#[test]
fn the_reason_names_the_namespace_the_cluster_queue_and_the_selector() {
    let ns = labels(&[("team", "b")]);
    assert_eq!(
        spec(None).namespace_not_selected("team-a", "team-b", &ns).unwrap(),
        "namespace team-b is not selected by ClusterQueue team-a: it has no namespaceSelector, \
         which selects no namespace (set namespaceSelector: {} to serve every namespace)"
    );
    let picky = spec(Some(json!({
        "matchLabels": {"team": "a"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
            {"key": "gpu", "operator": "Exists"},
        ],
    })));
    assert_eq!(
        picky.namespace_not_selected("team-a", "team-b", &ns).unwrap(),
        "namespace team-b is not selected by ClusterQueue team-a: its namespaceSelector \
         {matchLabels: team=a, matchExpressions: [tier In (gold, silver), gpu Exists]} \
         does not match the namespace's labels"
    );
    assert_eq!(display(&serde_json::from_value(json!({})).unwrap()), "{}");
}

#[test]
fn label_selectors_follow_kubernetes_semantics() {
    let have = labels(&[("team", "ml"), ("tier", "gold")]);
    let cases = [
        (json!({}), true),
        (json!({"matchLabels": {"team": "ml"}}), true),
        (json!({"matchLabels": {"team": "web"}}), false),
        (
            json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "web"]}]}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["ml"]}]}),
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
            true,
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            false,
        ),
        (
            json!({"matchLabels": {"team": "ml"}, "matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
            false,
        ),
        (
            json!({"matchExpressions": [{"key": "team", "operator": "Near"}]}),
            false,
        ),
    ];
    for (s, want) in cases {
        assert_eq!(matches(&serde_json::from_value(s.clone()).unwrap(), &have), want, "{s}");
    }
}
