//! Every exemption the webhook grants, each decided by something only the
//! cluster admin (or the API server) controls: one table per kind of
//! exemption.

use super::*;
use crate::cache::OwnerKind;

const DS_UID: &str = "0b6c9b5e-5a37-4c8e-9e55-3f1d2b9a7c10";
const TENANT_DS_UID: &str = "5f0e2d1c-3b4a-4c8e-9e55-000000000001";
const FORGED_UID: &str = "deadbeef-0000-4000-8000-000000000000";
const TRUSTED: &str = "gpu-infra";
const TENANT: &str = "team-a";

/// A cluster with a namespace the admin trusts for GPU system pods
/// (`gpu-infra`, with DaemonSet `nvidia-device-plugin`), and a tenant's
/// namespace (`team-a`) with a DaemonSet of the same name the tenant made.
fn cluster() -> Arc<MemoryView> {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.upsert_namespace(
        TRUSTED,
        BTreeMap::from([("sluice.dev/allow-gpu-fixes-skip".to_owned(), "true".to_owned())]),
    );
    view.upsert_namespace(TENANT, BTreeMap::new());
    view.replace_owners(
        OwnerKind::DaemonSet,
        BTreeMap::from([
            (
                (TRUSTED.to_owned(), "nvidia-device-plugin".to_owned()),
                DS_UID.to_owned(),
            ),
            (
                (TENANT.to_owned(), "nvidia-device-plugin".to_owned()),
                TENANT_DS_UID.to_owned(),
            ),
        ]),
    );
    view
}

/// An ownerReference as the DaemonSet controller writes it.
fn ds_owner(uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-device-plugin",
           "uid": uid, "controller": true, "blockOwnerDeletion": true})
}

/// A DCGM-exporter-like pod in `namespace` (NVIDIA_VISIBLE_DEVICES=all,
/// no GPU request) with these labels and ownerReferences.
fn pod(namespace: &str, labels: Value, owners: Value) -> Value {
    let mut review = system_pod_review(namespace, labels, None);
    if !owners.is_null() {
        review["request"]["object"]["metadata"]["ownerReferences"] = owners;
    }
    review
}

/// (case, namespace, labels, ownerReferences, allowed, what the denial says)
type PodCase = (&'static str, &'static str, Value, Value, bool, &'static [&'static str]);

#[test]
fn a_daemon_sets_pod_is_exempt_only_when_verified_in_a_namespace_the_admin_trusts() {
    let skip = || json!({"sluice.dev/gpu-fixes": "skip"});
    let none = || json!({});
    let table: Vec<PodCase> = vec![
        (
            "a tenant's own DaemonSet in an ordinary namespace",
            TENANT,
            none(),
            json!([ds_owner(TENANT_DS_UID)]),
            false,
            &[
                "namespace \"team-a\" is not one",
                "if these are trusted node agents, a cluster admin can label namespace \"team-a\" sluice.dev/allow-gpu-fixes-skip=true",
            ],
        ),
        (
            "a forged DaemonSet owner in an ordinary namespace",
            TENANT,
            none(),
            json!([ds_owner(FORGED_UID)]),
            false,
            &["label namespace \"team-a\" sluice.dev/allow-gpu-fixes-skip=true"],
        ),
        (
            "no owner in an ordinary namespace",
            TENANT,
            none(),
            Value::Null,
            false,
            &["run it from a DaemonSet"],
        ),
        (
            "the admin's DaemonSet in a trusted namespace",
            TRUSTED,
            none(),
            json!([ds_owner(DS_UID)]),
            true,
            &[],
        ),
        (
            "a forged uid in a trusted namespace",
            TRUSTED,
            none(),
            json!([ds_owner(FORGED_UID)]),
            false,
            &["metadata.ownerReferences[0]: there is no DaemonSet \"nvidia-device-plugin\" with uid \"deadbeef"],
        ),
        (
            "another namespace's DaemonSet uid in a trusted namespace",
            TRUSTED,
            none(),
            json!([ds_owner(TENANT_DS_UID)]),
            false,
            &["there is no DaemonSet"],
        ),
        (
            "a DaemonSet reference that is not the controller",
            TRUSTED,
            none(),
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-device-plugin", "uid": DS_UID}]),
            false,
            &["is not the pod's controller"],
        ),
        (
            "a DaemonSet reference of another apps version",
            TRUSTED,
            none(),
            json!([{"apiVersion": "apps/v1beta2", "kind": "DaemonSet", "name": "nvidia-device-plugin",
                    "uid": DS_UID, "controller": true}]),
            false,
            &["is not the pod's controller"],
        ),
        (
            "the DaemonSet found at the second ownerReference",
            TRUSTED,
            none(),
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "x"}, ds_owner(FORGED_UID)]),
            false,
            &["metadata.ownerReferences[1]"],
        ),
        (
            "another owner kind in a trusted namespace",
            TRUSTED,
            none(),
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "nvidia-device-plugin",
                    "uid": DS_UID, "controller": true}]),
            false,
            &["run it from a DaemonSet"],
        ),
        (
            "no owner in a trusted namespace",
            TRUSTED,
            none(),
            Value::Null,
            false,
            &[],
        ),
        (
            "the skip label in a trusted namespace",
            TRUSTED,
            skip(),
            Value::Null,
            true,
            &[],
        ),
        (
            "the skip label in an ordinary namespace",
            TENANT,
            skip(),
            Value::Null,
            false,
            &[],
        ),
        (
            "the skip label in a namespace the cache does not know",
            "new-ns",
            skip(),
            Value::Null,
            false,
            &[],
        ),
        (
            "a forged owner in an excluded namespace (never reviewed)",
            "gpu-operator",
            none(),
            json!([ds_owner(FORGED_UID)]),
            true,
            &[],
        ),
    ];
    let r = reviewer_with(cluster());
    for (case, namespace, labels, owners, allowed, says) in table {
        let reply = r
            .handle(Endpoint::MutatePods, &body(&pod(namespace, labels, owners)))
            .unwrap();
        let msg = &reply.response.result.message;
        if allowed {
            assert_eq!(reply.verdict, Verdict::Allowed, "{case}: {msg}");
            assert!(reply.fixes.is_empty(), "{case}: left alone");
            continue;
        }
        assert_eq!(reply.verdict, Verdict::Denied, "{case}");
        assert!(
            msg.starts_with("spec.containers[0] (\"dcgm-exporter\").env[NVIDIA_VISIBLE_DEVICES]"),
            "{case}: {msg}"
        );
        for s in says {
            assert!(msg.contains(s), "{case}: {s:?} missing from {msg}");
        }
    }
}

#[test]
fn before_daemon_sets_are_listed_no_daemon_set_pod_is_exempt() {
    let view = cluster();
    view.replace_owners(OwnerKind::DaemonSet, BTreeMap::new());
    let r = reviewer_with(view.clone());
    let review = pod(TRUSTED, json!({}), json!([ds_owner(DS_UID)]));
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "not found");
    // Not listed at all: unknown, which is no exemption either.
    let unlisted = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    unlisted.upsert_namespace(
        TRUSTED,
        BTreeMap::from([("sluice.dev/allow-gpu-fixes-skip".to_owned(), "true".to_owned())]),
    );
    let reply = reviewer_with(unlisted)
        .handle(Endpoint::MutatePods, &body(&review))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied);
    let msg = &reply.response.result.message;
    assert!(msg.contains("has not listed DaemonSets yet"), "{msg}");
    // Once the DaemonSet is seen, the retried pod is admitted.
    view.upsert_owner(OwnerKind::DaemonSet, TRUSTED, "nvidia-device-plugin", DS_UID);
    let reply = r.handle(Endpoint::MutatePods, &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed);
}

#[test]
fn kubectl_debug_on_a_daemon_sets_pod_follows_the_same_exemption() {
    let r = reviewer_with(cluster());
    let debug = |namespace: &str, uid: &str| {
        let mut review = pod(namespace, json!({}), json!([ds_owner(uid)]));
        let req = &mut review["request"];
        req["operation"] = json!("UPDATE");
        req["subResource"] = json!("ephemeralcontainers");
        req["object"]["spec"]["containers"] = json!([{"name": "agent", "image": "busybox"}]);
        req["oldObject"] = req["object"].clone();
        req["object"]["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "busybox",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]);
        review
    };
    for (namespace, uid, verdict) in [
        (TRUSTED, DS_UID, Verdict::Allowed),
        (TRUSTED, FORGED_UID, Verdict::Denied),
        (TENANT, TENANT_DS_UID, Verdict::Denied),
    ] {
        let reply = r.handle(Endpoint::MutatePods, &body(&debug(namespace, uid))).unwrap();
        assert_eq!(reply.verdict, verdict, "{namespace} {uid}: {:?}", reply.response);
    }
}

const JOBSET_UID: &str = "js-uid-1";

/// A cluster where JobSet `pretrain` exists in `team-b` (the recorded
/// Job's namespace) and `other` in `team-c`.
fn cluster_with_jobsets() -> Arc<MemoryView> {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    view.replace_owners(
        OwnerKind::Queued(JobKind::JobSet),
        BTreeMap::from([
            (("team-b".to_owned(), "pretrain".to_owned()), JOBSET_UID.to_owned()),
            (("team-c".to_owned(), "other".to_owned()), "js-uid-2".to_owned()),
        ]),
    );
    view
}

fn jobset_owner(name: &str, uid: &str, controller: bool) -> Value {
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name, "uid": uid,
           "controller": controller, "blockOwnerDeletion": true})
}

/// The JobSet operator's service account (one of the default operators).
const JOBSET_OPERATOR: &str = "system:serviceaccount:jobset-system:jobset-controller-manager";

/// The recorded queued Job (namespace team-b), created running by the
/// JobSet operator, with these ownerReferences.
fn job_create(owners: Value) -> Value {
    let mut review = fixture("admissionreview-request-job-create-before-jsonpatch.json");
    review["request"]["object"]["spec"]["suspend"] = json!(false);
    review["request"]["object"]["metadata"]["ownerReferences"] = owners;
    review["request"]["userInfo"]["username"] = json!(JOBSET_OPERATOR);
    review
}

#[test]
fn a_job_a_tenant_makes_for_a_jobset_of_their_own_is_not_left_to_it() {
    // The JobSet exists (the tenant made it, perhaps small and admitted):
    // only its operator's Jobs are left to it.
    let r = reviewer_with(cluster_with_jobsets());
    let mut review = job_create(json!([jobset_owner("pretrain", JOBSET_UID, true)]));
    review["request"]["userInfo"]["username"] = json!("alice@example.com");
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    let msg = &reply.response.result.message;
    assert!(
        msg.starts_with("metadata.ownerReferences[0]: JobSet \"pretrain\" controls this Job, but \"alice@example.com\" is not one of the job operators the cluster admin named (webhook.config.operators: \"system:serviceaccount:jobset-system:jobset-controller-manager\""),
        "{msg}"
    );
    // The admin names the operators: with none, no Job is left to its owner.
    let cfg = WebhookConfig {
        operators: Vec::new(),
        ..WebhookConfig::default()
    };
    let r = Reviewer::new(cfg, cluster_with_jobsets());
    let reply = r
        .handle(
            Endpoint::MutateQueued(JobKind::Job),
            &body(&job_create(json!([jobset_owner("pretrain", JOBSET_UID, true)]))),
        )
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    assert!(
        reply
            .response
            .result
            .message
            .contains("(webhook.config.operators: none)")
    );
    // Not queued either way (no label, no default queue): nothing to refuse.
    let mut unlabelled = job_create(json!([jobset_owner("pretrain", JOBSET_UID, true)]));
    unlabelled["request"]["userInfo"]["username"] = json!("alice@example.com");
    unlabelled["request"]["object"]["metadata"]["labels"] = json!({});
    let reply = r
        .handle(Endpoint::MutateQueued(JobKind::Job), &body(&unlabelled))
        .unwrap();
    assert_ne!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
}

#[test]
fn a_job_is_left_to_a_queued_owner_only_when_that_owner_exists() {
    enum Want {
        /// Left to its owner: not suspended.
        LeftToOwner,
        /// Queued like any Job: suspended.
        Queued,
        /// Refused, saying this.
        Denied(&'static str),
    }
    let table = [
        (
            "its JobSet exists with that uid",
            json!([jobset_owner("pretrain", JOBSET_UID, true)]),
            Want::LeftToOwner,
        ),
        (
            "a forged uid",
            json!([jobset_owner("pretrain", "forged", true)]),
            Want::Denied(
                "metadata.ownerReferences[0]: there is no JobSet \"pretrain\" with uid \"forged\" in namespace \"team-b\"",
            ),
        ),
        (
            "a JobSet of another namespace",
            json!([jobset_owner("other", "js-uid-2", true)]),
            Want::Denied("there is no JobSet \"other\""),
        ),
        (
            "a kind the webhook has not listed",
            json!([{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "hvd", "uid": "u", "controller": true}]),
            Want::Denied("MPIJob \"hvd\" cannot be verified"),
        ),
        (
            "a JobSet that is not the controller",
            json!([jobset_owner("pretrain", JOBSET_UID, false)]),
            Want::Queued,
        ),
        (
            // The training operator makes pods, never Jobs: a Job naming a
            // PyTorchJob as its controller is queued like any other.
            "a PyTorchJob, a kind that makes no Jobs",
            json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert", "uid": "u", "controller": true}]),
            Want::Queued,
        ),
        ("no owner", json!([]), Want::Queued),
    ];
    let r = reviewer_with(cluster_with_jobsets());
    for (case, owners, want) in table {
        let reply = r
            .handle(Endpoint::MutateQueued(JobKind::Job), &body(&job_create(owners)))
            .unwrap();
        match want {
            Want::LeftToOwner => {
                assert_ne!(reply.verdict, Verdict::Denied, "{case}: {:?}", reply.response);
                assert!(!reply.fixes.contains(&FixKind::Suspend), "{case}: {:?}", reply.fixes);
            }
            Want::Queued => assert!(reply.fixes.contains(&FixKind::Suspend), "{case}: {:?}", reply.fixes),
            Want::Denied(says) => {
                assert_eq!(reply.verdict, Verdict::Denied, "{case}");
                let msg = &reply.response.result.message;
                assert!(msg.contains(says), "{case}: {says:?} missing from {msg}");
            }
        }
    }
}

#[test]
fn an_unverifiable_owner_of_a_job_that_would_not_be_queued_is_no_reason_to_refuse_it() {
    let r = reviewer_with(cluster_with_jobsets());
    let mut review = job_create(json!([jobset_owner("pretrain", "forged", true)]));
    review["request"]["object"]["metadata"]["labels"] = json!({});
    let reply = r.handle(Endpoint::MutateQueued(JobKind::Job), &body(&review)).unwrap();
    assert_ne!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    assert!(!reply.fixes.contains(&FixKind::Suspend));
}

/// The recorded unsuspend (namespace team-a, by alice) of a queued Job
/// with these ownerReferences before and after.
fn job_unsuspend(before: Value, after: Value) -> Value {
    let mut update = fixture("admissionreview-request-job-update-unsuspend.json");
    update["request"]["oldObject"]["metadata"]["ownerReferences"] = before;
    update["request"]["object"]["metadata"]["ownerReferences"] = after;
    update
}

#[test]
fn only_a_verified_queued_owner_may_resume_its_job_and_none_can_be_adopted_later() {
    let view = Arc::new(MemoryView::synced_empty());
    view.replace_owners(
        OwnerKind::Queued(JobKind::JobSet),
        BTreeMap::from([(("team-a".to_owned(), "pretrain".to_owned()), JOBSET_UID.to_owned())]),
    );
    let r = reviewer_with(view);
    let real = || json!([jobset_owner("pretrain", JOBSET_UID, true)]);
    let forged = || json!([jobset_owner("pretrain", "forged", true)]);
    let table = [
        (
            "its JobSet exists, but alice resumes it",
            real(),
            real(),
            Verdict::Denied,
            "spec.suspend: cannot be changed from true to false by \"alice@example.com\"",
        ),
        (
            "a forged owner",
            forged(),
            forged(),
            Verdict::Denied,
            "spec.suspend: cannot be changed from true to false by \"alice@example.com\"",
        ),
        (
            "an owner added as it is resumed",
            json!([]),
            real(),
            Verdict::Denied,
            "metadata.ownerReferences[0]: cannot be changed by \"alice@example.com\" to name JobSet \"pretrain\"",
        ),
        (
            "its owner swapped for another",
            forged(),
            real(),
            Verdict::Denied,
            "metadata.ownerReferences[0]: cannot be changed",
        ),
        (
            "no owner",
            json!([]),
            json!([]),
            Verdict::Denied,
            "spec.suspend: cannot be changed",
        ),
    ];
    for (case, before, after, verdict, says) in table {
        let reply = r
            .handle(
                Endpoint::ValidateQueued(JobKind::Job),
                &body(&job_unsuspend(before, after)),
            )
            .unwrap();
        assert_eq!(reply.verdict, verdict, "{case}: {:?}", reply.response);
        let msg = &reply.response.result.message;
        assert!(msg.contains(says), "{case}: {says:?} missing from {msg}");
    }
    // Its JobSet's operator resumes it: allowed.
    let mut by_operator = job_unsuspend(real(), real());
    by_operator["request"]["userInfo"]["username"] = json!(JOBSET_OPERATOR);
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&by_operator))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
    // Adopting a suspended queued Job without resuming it is refused too:
    // the resume would follow in a second step.
    let mut adopt = job_unsuspend(json!([]), real());
    adopt["request"]["object"]["spec"]["suspend"] = json!(true);
    let reply = r.handle(Endpoint::ValidateQueued(JobKind::Job), &body(&adopt)).unwrap();
    assert_eq!(reply.verdict, Verdict::Denied, "{:?}", reply.response);
    // The Sluice controller (an admission writer) is not refused.
    let cfg = WebhookConfig {
        admission_writers: vec!["system:serviceaccount:sluice-system:sluice-controller".to_owned()],
        ..WebhookConfig::default()
    };
    let view = Arc::new(MemoryView::synced_empty());
    let r = Reviewer::new(cfg, view);
    let mut by_controller = job_unsuspend(json!([]), real());
    by_controller["request"]["userInfo"]["username"] = json!("system:serviceaccount:sluice-system:sluice-controller");
    let reply = r
        .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&by_controller))
        .unwrap();
    assert_eq!(reply.verdict, Verdict::Allowed, "{:?}", reply.response);
}

#[test]
fn only_admission_writers_named_by_the_api_server_may_resume_a_queued_job() {
    let cfg = WebhookConfig {
        admission_writers: vec!["system:serviceaccount:sluice-system:sluice-controller".to_owned()],
        ..WebhookConfig::default()
    };
    let r = Reviewer::new(cfg, Arc::new(MemoryView::synced_empty()));
    // userInfo.username is set by the API server from the request's
    // credentials; a client cannot choose it.
    for (user, verdict) in [
        (
            "system:serviceaccount:sluice-system:sluice-controller",
            Verdict::Allowed,
        ),
        ("system:serviceaccount:team-a:sluice-controller", Verdict::Denied),
        ("sluice-controller", Verdict::Denied),
        ("", Verdict::Denied),
    ] {
        let mut update = fixture("admissionreview-request-job-update-unsuspend.json");
        update["request"]["userInfo"]["username"] = json!(user);
        let reply = r
            .handle(Endpoint::ValidateQueued(JobKind::Job), &body(&update))
            .unwrap();
        assert_eq!(reply.verdict, verdict, "{user:?}");
    }
}
