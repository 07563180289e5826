//! Which namespaces a ClusterQueue serves (unset: none, `{}`: all), what a
//! workload held out is told, and admitted work that stays.

use super::*;

fn with_selector(name: &str, selector: Option<Value>) -> ClusterQueue {
    let mut q = cq(name, 8);
    q.spec.namespace_selector = selector.map(|s| serde_json::from_value(s).unwrap());
    q
}

/// An index with ClusterQueue cluster-gpu (selector as given), LocalQueue
/// team-a in namespace `research` labelled `team=ml`, everything listed.
fn index_with(selector: Option<Value>) -> Index {
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(with_selector("cluster-gpu", selector));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    ix.apply_namespace(NS, BTreeMap::from([("team".to_string(), "ml".to_string())]), T0);
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix
}

fn events(plan: &Plan) -> Vec<(&str, &str, &str)> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) => Some((
                e.regarding.kind.as_deref().unwrap_or(""),
                e.reason.as_str(),
                e.note.as_str(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cluster_queue_serves_the_namespaces_its_selector_selects_and_none_without_one() {
    let no_selector = "namespace research is not selected by ClusterQueue cluster-gpu: it has no namespaceSelector, \
                       which selects no namespace (set namespaceSelector: {} to serve every namespace)";
    let other_team = "namespace research is not selected by ClusterQueue cluster-gpu: its namespaceSelector \
                      {matchLabels: team=web} does not match the namespace's labels";
    // (selector, why it waits; None: admitted)
    let cases = [
        (None, Some(no_selector)),
        (Some(json!({})), None),
        (Some(json!({"matchLabels": {"team": "ml"}})), None),
        (Some(json!({"matchLabels": {"team": "web"}})), Some(other_team)),
    ];
    for (selector, held) in cases {
        let mut ix = index_with(selector.clone());
        let j = mk_job("train", "team-a", 1, 1);
        ix.apply_job(j.clone(), T0);
        ix.take_plans();
        ix.apply_workload(stored_workload(&j, 0, 0), T0);
        let plans = ix.take_plans();
        match held {
            Some(why) => {
                assert_eq!(purposes(&plans), ["pending"], "{selector:?}");
                let s = status_step(&plans[0]);
                assert_eq!(
                    condition(s, cond::QUOTA_RESERVED),
                    ("False", "NamespaceNotSelected", why),
                    "{selector:?}"
                );
                assert_eq!(s.pending.as_ref().unwrap().message, why);
                // Told on the Workload and on its Job.
                assert_eq!(
                    events(&plans[0]),
                    [
                        ("Workload", "NamespaceNotSelected", why),
                        ("Job", "NamespaceNotSelected", why)
                    ]
                );
                assert_eq!(ix.engine().workload_state("wl-uid-train"), None);
                assert!(ix.cycle(T0 + 1).0.is_empty(), "{selector:?}");
                // The LocalQueue is inactive, for the same reason.
                assert_eq!(
                    ix.local_queue_problem(&ObjKey::new(NS, "team-a")),
                    Some(("NamespaceNotSelected", why.to_string()))
                );
            }
            None => {
                assert!(plans.is_empty(), "{selector:?}: {plans:?}");
                assert_eq!(purposes(&ix.cycle(T0 + 1).0), ["admit"], "{selector:?}");
                assert_eq!(ix.local_queue_problem(&ObjKey::new(NS, "team-a")), None);
            }
        }
    }
}

#[test]
fn a_cluster_queue_without_selector_holds_work_even_before_namespaces_are_listed() {
    let mut ix = Index::new(IndexConfig::default());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(with_selector("cluster-gpu", None));
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    // Namespaces not listed yet: a selector needing labels waits for them,
    // but no selector at all needs none.
    assert!(ix.unselected_by(NS, "team-a").is_some());
    ix.apply_cluster_queue(with_selector(
        "cluster-gpu",
        Some(json!({"matchLabels": {"team": "ml"}})),
    ));
    assert_eq!(ix.unselected_by(NS, "team-a"), None);
}

#[test]
fn a_namespace_not_selected_waits_until_it_is_relabelled_or_the_selector_changes() {
    let mut ix = index_with(Some(
        json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["web"]}]}),
    ));
    let j = mk_job("outsider", "team-a", 1, 1);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    assert_eq!(purposes(&ix.take_plans()), ["pending"]);
    assert!(ix.cycle(T0 + 1).0.is_empty());
    // Relabelled: queued and admitted.
    ix.apply_namespace(NS, BTreeMap::from([("team".to_string(), "web".to_string())]), T0 + 2);
    assert_eq!(purposes(&ix.cycle(T0 + 3).0), ["admit"]);

    // Another one, held by a ClusterQueue without selector, goes once the
    // selector is `{}`.
    let mut ix = index_with(None);
    ix.apply_job(j.clone(), T0);
    ix.take_plans();
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    assert_eq!(purposes(&ix.take_plans()), ["pending"]);
    ix.apply_cluster_queue(with_selector("cluster-gpu", Some(json!({}))));
    assert_eq!(purposes(&ix.cycle(T0 + 3).0), ["admit"]);
}

#[test]
fn admitted_workloads_keep_running_when_their_namespace_is_no_longer_selected() {
    // Admitted while the ClusterQueue served every namespace.
    let mut ix = index_with(Some(json!({})));
    let j = mk_job("running", "team-a", 2, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    assert_eq!(purposes(&ix.cycle(T0).0), ["admit"]);
    observe_status(&mut ix, &j, 0, 0, T0 + 1);
    // The selector goes (an upgrade that dropped `{}`), then the namespace
    // is relabelled: nothing is evicted, the quota stays held.
    ix.apply_cluster_queue(with_selector("cluster-gpu", None));
    ix.apply_namespace(NS, BTreeMap::new(), T0 + 2);
    let (plans, _) = ix.cycle(T0 + 3);
    assert!(plans.is_empty(), "{plans:?}");
    assert!(ix.take_plans().is_empty());
    assert_eq!(
        ix.engine().workload_state("wl-uid-running"),
        Some(WorkloadState::Admitted)
    );

    // After a restart (the upgrade itself): restored as admitted, not held.
    let mut wl = stored_workload(&j, 0, 0);
    wl.status = Some(admitted_status(2, 2));
    let mut fresh = index_with(None);
    fresh.apply_job(j.clone(), T0 + 4);
    fresh.apply_workload(wl, T0 + 4);
    fresh.take_plans();
    assert_eq!(
        fresh.engine().workload_state("wl-uid-running"),
        Some(WorkloadState::Admitted)
    );
    assert!(fresh.cycle(T0 + 5).0.is_empty());
    // A new one waits meanwhile.
    let k = mk_job("new", "team-a", 1, 1);
    fresh.apply_job(k.clone(), T0 + 6);
    fresh.take_plans();
    fresh.apply_workload(stored_workload(&k, 0, 6), T0 + 6);
    assert_eq!(purposes(&fresh.take_plans()), ["pending"]);
}

#[test]
fn a_cluster_queue_says_which_local_queues_it_leaves_out() {
    let mut ix = index_with(None);
    ix.apply_local_queue(crate::testing::lq("web", "gpu", "cluster-gpu"));
    ix.apply_namespace("web", BTreeMap::from([("team".to_string(), "web".to_string())]), T0);
    ix.apply_cluster_queue(with_selector("idle", None));
    let (holds, reason, message) = ix.namespace_selection("cluster-gpu").unwrap();
    assert!(!holds);
    assert_eq!(reason, "NoNamespaceSelector");
    assert_eq!(
        message,
        "It has no namespaceSelector, which selects no namespace, so the 2 LocalQueue(s) pointing at it cannot \
         admit new workloads: research/team-a, web/gpu. Set namespaceSelector: {} to serve every namespace, or a \
         selector for the namespaces it serves (workloads already admitted keep running)"
    );
    // No LocalQueue: still says it serves nothing.
    let (holds, reason, _) = ix.namespace_selection("idle").unwrap();
    assert_eq!((holds, reason), (false, "NoNamespaceSelector"));

    ix.apply_cluster_queue(with_selector(
        "cluster-gpu",
        Some(json!({"matchLabels": {"team": "ml"}})),
    ));
    assert_eq!(
        ix.namespace_selection("cluster-gpu").unwrap(),
        (
            false,
            "LocalQueuesNotSelected",
            "Its namespaceSelector {matchLabels: team=ml} does not select the namespace of 1 of the 2 \
             LocalQueue(s) pointing at it, which cannot admit new workloads: web/gpu (workloads already \
             admitted keep running)"
                .to_string()
        )
    );
    ix.apply_cluster_queue(with_selector("cluster-gpu", Some(json!({}))));
    assert_eq!(
        ix.namespace_selection("cluster-gpu").unwrap(),
        (
            true,
            "NamespacesSelected",
            "Its namespaceSelector {} selects the namespaces of all 2 LocalQueue(s) pointing at it".to_string()
        )
    );
    assert_eq!(ix.namespace_selection("missing"), None);
}

#[test]
fn a_pending_workload_leaves_its_queue_when_its_namespace_is_no_longer_selected() {
    let mut ix = index_with(Some(json!({"matchLabels": {"team": "ml"}})));
    // 9 GPUs on 8: it waits in the queue.
    let j = mk_job("waiting", "team-a", 9, 1);
    ix.apply_job(j.clone(), T0);
    ix.apply_workload(stored_workload(&j, 0, 0), T0);
    ix.take_plans();
    ix.cycle(T0 + 1);
    assert_eq!(
        ix.engine().workload_state("wl-uid-waiting"),
        Some(WorkloadState::Pending)
    );
    // The namespace is relabelled: out of the queue, held with the reason.
    ix.apply_namespace(NS, BTreeMap::from([("team".to_string(), "web".to_string())]), T0 + 2);
    assert_eq!(ix.engine().workload_state("wl-uid-waiting"), None);
    let plans = ix.take_plans();
    assert_eq!(purposes(&plans), ["pending"]);
    let (_, reason, message) = condition(status_step(&plans[0]), cond::QUOTA_RESERVED);
    assert_eq!(reason, "NamespaceNotSelected");
    assert!(message.contains("{matchLabels: team=ml} does not match"), "{message}");
    // Relabelled back: in its queue again.
    ix.apply_namespace(NS, BTreeMap::from([("team".to_string(), "ml".to_string())]), T0 + 3);
    assert_eq!(
        ix.engine().workload_state("wl-uid-waiting"),
        Some(WorkloadState::Pending)
    );
    // The same when the ClusterQueue's selector goes away.
    ix.apply_cluster_queue(with_selector("cluster-gpu", None));
    assert_eq!(ix.engine().workload_state("wl-uid-waiting"), None);
}
