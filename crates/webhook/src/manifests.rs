//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that
//! register this webhook (`sluice webhook manifests`; the Helm chart is
//! checked against them).
//!
//! | webhook | matches | failurePolicy |
//! |---------|---------|---------------|
//! | `pods.mutate.sluice.dev` | Pod CREATE, `pods/ephemeralcontainers` UPDATE | Ignore (an outage never blocks pods) |
//! | `queued-<plural>.mutate.sluice.dev` (every queued kind of `sluice-kinds`: `jobs`, `jobsets`, …, `deployments`, `statefulsets`, `leaderworkersets`) | CREATE with the queue label (and a serving kind's UPDATE); a rule for a resource the server does not serve matches nothing | Fail |
//! | `default-queue-<plural>.mutate.sluice.dev` (`/mutate/<plural>/default-queue`) | the same without the label in namespaces labelled `sluice.dev/default-queue: enabled` | Fail |
//! | `kueue-<plural>.{mutate,validate}.sluice.dev` | only with `kueue_compat`: objects labelled `kueue.x-k8s.io/queue-name` (and not the queue label, for mutation) | Fail |
//! | `<plural>.validate.sluice.dev` | a queued kind's UPDATE with the queue label (old or new) | Fail |
//! | `default-queue-<plural>.validate.sluice.dev` | its UPDATE without the label in namespaces that queue every object | Fail |
//! | `<plural>-scale.validate.sluice.dev` (`deployments`, `statefulsets`, `leaderworkersets`) | their `scale` subresource UPDATE (a Scale has no labels: every one, read against the cache) | Ignore (an outage never stops autoscaling) |
//! | `pods.validate.sluice.dev` | UPDATE of a pod labelled `sluice.dev/managed=true` (one the webhook gated): its gate and label stay until admitted | Fail |
//! | `replicasets.validate.sluice.dev` | ReplicaSet CREATE/UPDATE in namespaces that queue every object | Ignore |
//! | `<plural>.validate.sluice.dev` | Sluice kinds CREATE/UPDATE (Workload status too) | Fail |
//!
//! Every entry: excluded namespaces by `kubernetes.io/metadata.name NotIn`
//! (all but Sluice's kinds), `timeoutSeconds: 5`, `sideEffects: None`,
//! `admissionReviewVersions: [v1]`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};

use crate::review::Endpoint;
use crate::validate::{GROUP, SluiceKind, VERSION};
use sluice_kinds::JobKind;

/// How the API server reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An in-cluster Service.
    Service { namespace: String, name: String, port: i32 },
    /// A base URL such as `https://127.0.0.1:9443` (endpoint paths appended).
    Url(String),
}

/// What the configurations are built from.
#[derive(Clone, Debug)]
pub struct ManifestOptions {
    /// Name of both configuration objects.
    pub name: String,
    pub target: Target,
    /// PEM of the CA that signed the serving certificate (omitted when
    /// cert-manager's CA injector fills it in).
    pub ca_bundle: Option<Vec<u8>>,
    pub excluded_namespaces: Vec<String>,
    pub queue_label: String,
    /// Also send Jobs labelled `kueue.x-k8s.io/queue-name` (the webhook's
    /// `kueueCompat`).
    pub kueue_compat: bool,
    pub timeout_seconds: i32,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        Self {
            name: "sluice".to_owned(),
            target: Target::Service {
                namespace: "sluice-system".to_owned(),
                name: "sluice-webhook".to_owned(),
                port: 443,
            },
            ca_bundle: None,
            excluded_namespaces: crate::config::DEFAULT_EXCLUDED_NAMESPACES
                .iter()
                .chain(&["sluice-system"])
                .map(|n| (*n).to_owned())
                .collect(),
            queue_label: sluice_api::labels::QUEUE.to_owned(),
            kueue_compat: false,
            timeout_seconds: 5,
        }
    }
}

const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn client_config(o: &ManifestOptions, ep: Endpoint) -> WebhookClientConfig {
    let ca_bundle = o.ca_bundle.clone().map(ByteString);
    match &o.target {
        Target::Service { namespace, name, port } => WebhookClientConfig {
            ca_bundle,
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(ep.path().to_owned()),
                port: Some(*port),
            }),
            url: None,
        },
        Target::Url(base) => WebhookClientConfig {
            ca_bundle,
            service: None,
            url: Some(format!("{}{}", base.trim_end_matches('/'), ep.path())),
        },
    }
}

fn req(key: &str, operator: &str, values: Option<Vec<String>>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values,
    }
}

fn not_excluded(o: &ManifestOptions) -> Vec<LabelSelectorRequirement> {
    if o.excluded_namespaces.is_empty() {
        return Vec::new();
    }
    vec![req(NAMESPACE_NAME_LABEL, "NotIn", Some(o.excluded_namespaces.clone()))]
}

fn selector(
    match_labels: Option<BTreeMap<String, String>>,
    exprs: Vec<LabelSelectorRequirement>,
) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels,
        match_expressions: (!exprs.is_empty()).then_some(exprs),
    })
}

fn rule(group: &str, version: &str, resources: &[&str], operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![group.to_owned()]),
        api_versions: Some(vec![version.to_owned()]),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        operations: Some(operations.iter().map(|s| (*s).to_owned()).collect()),
        scope: None,
    }
}

/// One mutating entry with the settings every entry shares.
#[allow(clippy::too_many_arguments)]
fn mutating(
    o: &ManifestOptions,
    name: &str,
    ep: Endpoint,
    rules: Vec<RuleWithOperations>,
    failure_policy: &str,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
) -> MutatingWebhook {
    MutatingWebhook {
        name: name.to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        client_config: client_config(o, ep),
        failure_policy: Some(failure_policy.to_owned()),
        match_policy: Some("Equivalent".to_owned()),
        namespace_selector,
        object_selector,
        // The patches are idempotent, so a second pass after other
        // webhooks changed the object is safe and keeps the fixes right.
        reinvocation_policy: Some("IfNeeded".to_owned()),
        rules: Some(rules),
        side_effects: "None".to_owned(),
        timeout_seconds: Some(o.timeout_seconds),
        match_conditions: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn validating(
    o: &ManifestOptions,
    name: &str,
    ep: Endpoint,
    rules: Vec<RuleWithOperations>,
    failure_policy: &str,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        client_config: client_config(o, ep),
        failure_policy: Some(failure_policy.to_owned()),
        match_policy: Some("Equivalent".to_owned()),
        namespace_selector,
        object_selector,
        rules: Some(rules),
        side_effects: "None".to_owned(),
        timeout_seconds: Some(o.timeout_seconds),
        match_conditions: None,
    }
}

fn metadata(o: &ManifestOptions) -> ObjectMeta {
    ObjectMeta {
        name: Some(o.name.clone()),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_owned(),
            "sluice".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Namespaces that queue every object (and are not excluded).
fn default_queue_namespaces(o: &ManifestOptions) -> Option<LabelSelector> {
    selector(
        Some(BTreeMap::from([(
            sluice_api::labels::DEFAULT_QUEUE.to_owned(),
            sluice_api::labels::DEFAULT_QUEUE_ENABLED.to_owned(),
        )])),
        not_excluded(o),
    )
}

/// Objects without a queue label (nor Kueue's, with Kueue compatibility).
fn unlabelled(o: &ManifestOptions) -> Option<LabelSelector> {
    let mut exprs = vec![req(&o.queue_label, "DoesNotExist", None)];
    if o.kueue_compat {
        exprs.push(req(sluice_api::labels::KUEUE_QUEUE_NAME, "DoesNotExist", None));
    }
    selector(None, exprs)
}

/// The MutatingWebhookConfiguration: pods; each queued kind by the queue
/// label and, in namespaces that queue every object, unlabelled; with
/// Kueue compatibility, each kind by Kueue's label alone, after the rest.
pub fn mutating_configuration(o: &ManifestOptions) -> MutatingWebhookConfiguration {
    let mut webhooks = vec![pods(o)];
    webhooks.extend(JobKind::ALL.map(|k| {
        mutating(
            o,
            &format!("queued-{}.mutate.sluice.dev", k.plural()),
            Endpoint::MutateQueued(k),
            vec![kind_rule(k, mutated_operations(k))],
            "Fail",
            selector(None, not_excluded(o)),
            selector(None, vec![req(&o.queue_label, "Exists", None)]),
        )
    }));
    webhooks.extend(JobKind::ALL.map(|k| {
        mutating(
            o,
            &format!("default-queue-{}.mutate.sluice.dev", k.plural()),
            // Its own path: requests on it come only from opted-in namespaces.
            Endpoint::MutateQueuedDefaultQueue(k),
            vec![kind_rule(k, mutated_operations(k))],
            "Fail",
            default_queue_namespaces(o),
            // Labelled objects are the first entry's; never call twice.
            unlabelled(o),
        )
    }));
    if o.kueue_compat {
        webhooks.extend(JobKind::ALL.map(|k| {
            mutating(
                o,
                &format!("kueue-{}.mutate.sluice.dev", k.plural()),
                Endpoint::MutateQueued(k),
                vec![kind_rule(k, mutated_operations(k))],
                "Fail",
                selector(None, not_excluded(o)),
                selector(None, kueue_labelled(o)),
            )
        }));
    }
    MutatingWebhookConfiguration {
        metadata: metadata(o),
        webhooks: Some(webhooks),
    }
}

/// What the mutating entries of `kind` see: CREATE, and the UPDATEs of a
/// serving kind (a held object asked to run stays held, asking for that).
fn mutated_operations(kind: JobKind) -> &'static [&'static str] {
    if serving(kind) {
        &["CREATE", "UPDATE"]
    } else {
        &["CREATE"]
    }
}

/// Whether objects of `kind` are held at zero replicas (they have a
/// `scale` subresource the webhook watches).
fn serving(kind: JobKind) -> bool {
    kind.integration().hold() == sluice_kinds::Hold::Replicas
}

fn kind_rule(kind: JobKind, operations: &[&str]) -> RuleWithOperations {
    let (group, version, _) = kind.gvk();
    rule(group, version, &[kind.plural()], operations)
}

/// Objects with Kueue's queue label and not Sluice's.
fn kueue_labelled(o: &ManifestOptions) -> Vec<LabelSelectorRequirement> {
    vec![
        req(sluice_api::labels::KUEUE_QUEUE_NAME, "Exists", None),
        req(&o.queue_label, "DoesNotExist", None),
    ]
}

/// Pods, and `kubectl debug`: ephemeral containers are checked for the
/// NVIDIA_VISIBLE_DEVICES escape.
fn pods(o: &ManifestOptions) -> MutatingWebhook {
    mutating(
        o,
        "pods.mutate.sluice.dev",
        Endpoint::MutatePods,
        vec![
            rule("", "v1", &["pods"], &["CREATE"]),
            rule("", "v1", &["pods/ephemeralcontainers"], &["UPDATE"]),
        ],
        "Ignore",
        selector(None, not_excluded(o)),
        None,
    )
}

/// The ValidatingWebhookConfiguration: each queued kind's UPDATEs by the
/// queue label and, in namespaces that queue every object, unlabelled;
/// the serving kinds' `scale`; ReplicaSets where every GPU is queued;
/// with Kueue compatibility each kind by Kueue's label; Sluice's kinds.
pub fn validating_configuration(o: &ManifestOptions) -> ValidatingWebhookConfiguration {
    // Matched against the old and the new object: a label added, removed
    // or changed is seen either way.
    let mut hooks: Vec<ValidatingWebhook> = JobKind::ALL
        .map(|k| {
            validating(
                o,
                &format!("{}.validate.sluice.dev", k.plural()),
                Endpoint::ValidateQueued(k),
                vec![kind_rule(k, &["UPDATE"])],
                "Fail",
                selector(None, not_excluded(o)),
                selector(None, vec![req(&o.queue_label, "Exists", None)]),
            )
        })
        .into_iter()
        .collect();
    hooks.extend(JobKind::ALL.map(|k| {
        validating(
            o,
            &format!("default-queue-{}.validate.sluice.dev", k.plural()),
            Endpoint::ValidateQueuedDefaultQueue(k),
            vec![kind_rule(k, &["UPDATE"])],
            "Fail",
            default_queue_namespaces(o),
            unlabelled(o),
        )
    }));
    // A Scale carries no labels: every scale, read against the cache. An
    // outage must not stop autoscaling everywhere: Ignore (the controller
    // holds what grew without admission).
    hooks.extend(JobKind::ALL.into_iter().filter(|k| serving(*k)).map(|k| {
        let (group, version, _) = k.gvk();
        validating(
            o,
            &format!("{}-scale.validate.sluice.dev", k.plural()),
            Endpoint::ValidateScale(k),
            vec![rule(group, version, &[&format!("{}/scale", k.plural())], &["UPDATE"])],
            "Ignore",
            selector(None, not_excluded(o)),
            None,
        )
    }));
    // Pods the webhook gated keep their gate and label until admitted.
    hooks.push(validating(
        o,
        "pods.validate.sluice.dev",
        Endpoint::ValidateGatedPods,
        vec![rule("", "v1", &["pods"], &["UPDATE"])],
        "Fail",
        selector(None, not_excluded(o)),
        selector(
            Some(BTreeMap::from([(
                sluice_api::labels::MANAGED_POD.to_owned(),
                "true".to_owned(),
            )])),
            Vec::new(),
        ),
    ));
    hooks.push(validating(
        o,
        "replicasets.validate.sluice.dev",
        Endpoint::ValidateReplicaSets,
        vec![rule("apps", "v1", &["replicasets"], &["CREATE", "UPDATE"])],
        "Ignore",
        default_queue_namespaces(o),
        None,
    ));
    if o.kueue_compat {
        hooks.extend(JobKind::ALL.map(|k| {
            validating(
                o,
                &format!("kueue-{}.validate.sluice.dev", k.plural()),
                Endpoint::ValidateQueued(k),
                vec![kind_rule(k, &["UPDATE"])],
                "Fail",
                selector(None, not_excluded(o)),
                selector(None, vec![req(sluice_api::labels::KUEUE_QUEUE_NAME, "Exists", None)]),
            )
        }));
    }
    for kind in [
        SluiceKind::ResourceFlavor,
        SluiceKind::ClusterQueue,
        SluiceKind::Cohort,
        SluiceKind::LocalQueue,
        SluiceKind::WorkloadPriorityClass,
        SluiceKind::Workload,
    ] {
        let mut rules = vec![rule(GROUP, VERSION, &[kind.plural()], &["CREATE", "UPDATE"])];
        if kind == SluiceKind::Workload {
            rules.push(rule(GROUP, VERSION, &["workloads/status"], &["UPDATE"]));
        }
        hooks.push(validating(
            o,
            &format!("{}.validate.sluice.dev", kind.plural()),
            Endpoint::Validate(kind),
            rules,
            "Fail",
            None,
            None,
        ));
    }
    ValidatingWebhookConfiguration {
        metadata: metadata(o),
        webhooks: Some(hooks),
    }
}

/// Both configurations as one multi-document YAML stream.
pub fn render_yaml(o: &ManifestOptions) -> Result<String, crate::Error> {
    let m = mutating_configuration(o);
    let v = validating_configuration(o);
    let with_type = |kind: &str, value: serde_json::Value| {
        let mut out = serde_json::Map::new();
        out.insert("apiVersion".to_owned(), "admissionregistration.k8s.io/v1".into());
        out.insert("kind".to_owned(), kind.into());
        if let serde_json::Value::Object(fields) = value {
            out.extend(fields);
        }
        serde_json::Value::Object(out)
    };
    let to_json = |r: Result<serde_json::Value, serde_json::Error>| {
        r.map_err(|e| crate::Error::Other(format!("serialising manifests: {e}")))
    };
    let docs = [
        with_type("MutatingWebhookConfiguration", to_json(serde_json::to_value(&m))?),
        with_type("ValidatingWebhookConfiguration", to_json(serde_json::to_value(&v))?),
    ];
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(
            &serde_saphyr::to_string(&d).map_err(|e| crate::Error::Other(format!("serialising manifests: {e}")))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
