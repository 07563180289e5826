//! Cohorts: `validate()` plus the parent chain, checked against the
//! Cohorts the cache has listed.

use super::sluice_kinds::review_of;
use super::*;

fn cohort(name: &str, parent: Option<&str>) -> Value {
    let mut c = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": name}, "spec": {}});
    if let Some(p) = parent {
        c["spec"]["parent"] = json!(p);
    }
    c
}

/// A synced cache that has listed these Cohorts (name, parent).
fn listing(cohorts: &[(&str, Option<&str>)]) -> Reviewer {
    let view = MemoryView::synced_empty();
    view.replace_cohorts(
        cohorts
            .iter()
            .map(|(n, p)| ((*n).to_owned(), p.map(str::to_owned)))
            .collect(),
    );
    reviewer_with(Arc::new(view))
}

fn create(object: Value) -> Value {
    review_of("Cohort", "cohorts", "CREATE", object, Value::Null, "admin")
}

fn update(object: Value, old: Value) -> Value {
    review_of("Cohort", "cohorts", "UPDATE", object, old, "admin")
}

const EP: Endpoint = Endpoint::Validate(SluiceKind::Cohort);

#[test]
fn a_parent_chain_back_to_the_cohort_is_denied_with_its_path() {
    let r = listing(&[("b", Some("c")), ("c", Some("a")), ("a", None)]);
    let reply = r.handle(EP, &body(&create(cohort("a", Some("b"))))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert_eq!(
        response_of(&reply)["status"]["message"],
        "spec.parent: cohort a -> b -> c -> a forms a cycle; a parent chain must end at a cohort without a parent"
    );
    // The same on an UPDATE that sets the parent.
    let reply = r
        .handle(EP, &body(&update(cohort("a", Some("b")), cohort("a", None))))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    // A chain that ends at a root, or at a cohort no object describes, is fine.
    for parent in ["c", "elsewhere"] {
        let reply = r.handle(EP, &body(&create(cohort("d", Some(parent))))).unwrap();
        assert_eq!(reply.verdict, Verdict::Allowed, "{parent}: {:?}", reply.response);
        assert!(reply.response.warnings.is_none());
    }
}

#[test]
fn an_unchanged_spec_is_not_checked_again() {
    // Stored while the cache was not listed: a -> b -> a. Labels and
    // finalizers can still change.
    let r = listing(&[("b", Some("a")), ("a", Some("b"))]);
    let mut relabelled = cohort("a", Some("b"));
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    let reply = r
        .handle(EP, &body(&update(relabelled, cohort("a", Some("b")))))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // Breaking the cycle is allowed; keeping it while changing the spec is not.
    let reply = r
        .handle(EP, &body(&update(cohort("a", None), cohort("a", Some("b")))))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
    let mut weighted = cohort("a", Some("b"));
    weighted["spec"]["fairSharing"] = json!({"weight": "2"});
    let reply = r.handle(EP, &body(&update(weighted, cohort("a", Some("b"))))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
}

#[test]
fn before_cohorts_are_listed_the_chain_is_allowed_with_a_warning() {
    let r = reviewer();
    let reply = r.handle(EP, &body(&create(cohort("a", Some("b"))))).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
    assert_eq!(
        reply.response.warnings.unwrap(),
        [
            "sluice: the webhook has not yet listed Cohorts, so it could not check that the parent chain of cohort \"a\" (spec.parent \"b\") does not lead back to it; the scheduler refuses a cohort whose parent chain forms a cycle"
        ]
    );
    // Without a parent there is no chain to check.
    let reply = r.handle(EP, &body(&create(cohort("a", None)))).unwrap();
    assert_eq!((reply.verdict, reply.response.warnings), (Verdict::Allowed, None));
}

#[test]
fn the_rules_of_validate_apply() {
    let r = listing(&[]);
    // Its own parent: validate()'s one message, not a second one for the cycle.
    let reply = r.handle(EP, &body(&create(cohort("a", Some("a"))))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    assert_eq!(
        response_of(&reply)["status"]["message"],
        "spec.parent: \"a\" is this cohort itself; a cohort cannot be its own parent"
    );
    let mut root = cohort("company", None);
    root["spec"]["resourceGroups"] = json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "2"}]}]}]);
    root["spec"]["fairSharing"] = json!({"weight": "-1"});
    let reply = r.handle(EP, &body(&create(root))).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = response_of(&reply)["status"]["message"].as_str().unwrap().to_owned();
    assert_eq!(
        msg,
        "spec.fairSharing.weight: quantity \"-1\" must not be negative; spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: requires spec.parent: without a parent there is nothing to borrow"
    );
}
