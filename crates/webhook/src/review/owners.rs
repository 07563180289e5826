//! Exemptions that an object's ownerReferences claim, and what makes one
//! count. An ownerReference is written by whoever creates the object, so
//! it proves nothing by itself:
//!
//! | claim | exempts | counts only when |
//! |-------|---------|------------------|
//! | a pod's controller is a DaemonSet | the pod from the GPU rules (node agents see every GPU) | the namespace is trusted (labelled [`ALLOW_GPU_FIXES_SKIP`]`=true` by the cluster admin), and a DaemonSet with that name and uid exists there (`apps/v1`, `controller: true`) |
//! | an object's controller is of a queued kind that makes objects of its kind ([`JobKind::made_by`]: a Job's JobSet, MPIJob or RayJob; a RayCluster's RayJob) | the object from being queued on its own (its owner is) | an object of that kind with that name and uid exists in the object's namespace |
//!
//! Existence is read from the cache ([`ClusterView::owner_exists`]); an
//! owner the cache cannot confirm (not listed yet, not found, another
//! uid) exempts nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::ObjectMeta;
use sluice_api::labels::ALLOW_GPU_FIXES_SKIP;

use crate::cache::{ClusterView, OwnerKind};
use crate::config::WebhookConfig;
use sluice_kinds::JobKind;

/// What the cache says about an owner an object names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verified {
    /// It exists, with that uid, in the object's namespace.
    Yes,
    /// The cache has listed the kind and has no such object (or one with
    /// another uid).
    NotFound,
    /// The kind has not been listed (yet): nothing is known.
    Unknown,
}

/// Looks `owner` up as an object of `kind` in `namespace`.
pub fn verify(view: &dyn ClusterView, kind: OwnerKind, namespace: &str, owner: &OwnerReference) -> Verified {
    match view.owner_exists(kind, namespace, &owner.name, &owner.uid) {
        Some(true) => Verified::Yes,
        Some(false) => Verified::NotFound,
        None => Verified::Unknown,
    }
}

/// Whether the cluster admin marked `namespace` as one for GPU system
/// pods (`sluice.dev/allow-gpu-fixes-skip: "true"`). Namespace labels are
/// cluster-scoped writes a namespace's own users cannot make; a namespace
/// the cache does not know is not trusted.
pub fn namespace_trusted(view: &dyn ClusterView, namespace: &str) -> bool {
    view.namespace_labels(namespace)
        .and_then(|l| l.get(ALLOW_GPU_FIXES_SKIP).cloned())
        .is_some_and(|v| v == "true")
}

/// Whether a pod is exempt from the GPU rules as a DaemonSet's pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonSetPod {
    /// It names no DaemonSet owner.
    NotClaimed,
    /// A verified DaemonSet pod in a trusted namespace.
    Exempt,
    /// It claims a DaemonSet owner, but the claim does not count: why, and
    /// what would make it count (appended to a denial).
    NotExempt(String),
}

/// Decides the DaemonSet exemption of a pod in `namespace`.
pub fn daemon_set_pod(view: &dyn ClusterView, namespace: &str, meta: &ObjectMeta) -> DaemonSetPod {
    let Some((i, owner)) = meta
        .owner_references
        .iter()
        .flatten()
        .enumerate()
        .find(|(_, o)| o.kind == "DaemonSet" && o.api_version.starts_with("apps/"))
    else {
        return DaemonSetPod::NotClaimed;
    };
    let at = format!("metadata.ownerReferences[{i}]");
    let name = &owner.name;
    if !namespace_trusted(view, namespace) {
        return DaemonSetPod::NotExempt(format!(
            "{at}: a DaemonSet's pod is exempt only in a namespace the cluster admin trusts, and namespace {namespace:?} is not one; if these are trusted node agents, a cluster admin can label namespace {namespace:?} {ALLOW_GPU_FIXES_SKIP}=true"
        ));
    }
    if owner.api_version != "apps/v1" || owner.controller != Some(true) {
        return DaemonSetPod::NotExempt(format!(
            "{at}: DaemonSet {name:?} is not the pod's controller (apiVersion apps/v1, controller: true); only the DaemonSet that controls a pod exempts it"
        ));
    }
    match verify(view, OwnerKind::DaemonSet, namespace, owner) {
        Verified::Yes => DaemonSetPod::Exempt,
        Verified::NotFound => DaemonSetPod::NotExempt(format!(
            "{at}: there is no DaemonSet {name:?} with uid {:?} in namespace {namespace:?}; a pod is exempt only as the pod of a DaemonSet that exists (one created moments ago may not be in the webhook's cache yet: the DaemonSet controller retries)",
            owner.uid
        )),
        Verified::Unknown => DaemonSetPod::NotExempt(format!(
            "{at}: DaemonSet {name:?} cannot be verified: the webhook has not listed DaemonSets yet (the DaemonSet controller retries)"
        )),
    }
}

/// The controller reference of `meta`, an object of `kind`, to an object
/// of a kind that makes and holds such objects ([`JobKind::made_by`]: a
/// JobSet's child Job, an MPIJob's launcher, a RayJob's submitter or
/// RayCluster): its index, the reference and the owner's kind. Any
/// version of the owner kind's group counts; the uid identifies the
/// object.
pub fn queued_controller(kind: JobKind, meta: &ObjectMeta) -> Option<(usize, &OwnerReference, JobKind)> {
    kind.queued_controller(meta)
}

/// Whether an object of `kind` that `user` creates or changes is left to
/// a verified object of a queued kind that makes it: `Ok(true)` when it
/// is, `Ok(false)` when it claims none, and `Err` with the field path and
/// why when it claims one the cache cannot confirm, or `user` is not a job
/// operator (`cfg.operators`) nor an admission writer: an owner exists for
/// whoever made it, so only its operator's making counts.
pub fn made_by_queued_kind(
    view: &dyn ClusterView,
    cfg: &WebhookConfig,
    user: &str,
    kind: JobKind,
    namespace: &str,
    meta: &ObjectMeta,
) -> Result<bool, String> {
    let Some((i, owner, owner_kind)) = queued_controller(kind, meta) else {
        return Ok(false);
    };
    let noun = owner_kind.kind();
    let what = kind.kind();
    let name = &owner.name;
    match verify(view, OwnerKind::Queued(owner_kind), namespace, owner) {
        Verified::Yes if cfg.acts_for_owners(user) => Ok(true),
        Verified::Yes => Err(format!(
            "metadata.ownerReferences[{i}]: {noun} {name:?} controls this {what}, but {user:?} is not one of the job operators the cluster admin named (webhook.config.operators: {}); a {what} is left to its {noun} only when the {noun}'s operator makes it. If {user:?} is that operator, a cluster admin adds it to webhook.config.operators; otherwise drop the ownerReference and let the {what} be queued",
            show_users(&cfg.operators)
        )),
        Verified::NotFound => Err(format!(
            "metadata.ownerReferences[{i}]: there is no {noun} {name:?} with uid {:?} in namespace {namespace:?}; a {what} is left to the {noun} that controls it only when that {noun} exists (one created moments ago may not be in the webhook's cache yet: its operator retries)",
            owner.uid
        )),
        Verified::Unknown => Err(format!(
            "metadata.ownerReferences[{i}]: {noun} {name:?} cannot be verified: the webhook has not listed {noun}s (its CRD missing, the webhook's RBAC lacking list/watch on them, or not listed yet)"
        )),
    }
}

fn show_users(users: &[String]) -> String {
    if users.is_empty() {
        "none".to_owned()
    } else {
        users.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", ")
    }
}
