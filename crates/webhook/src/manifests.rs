//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that
//! register this webhook (`sluice webhook manifests`; the Helm chart is
//! checked against them).
//!
//! | webhook | matches | failurePolicy |
//! |---------|---------|---------------|
//! | `queued-jobs.mutate.sluice.dev` | Job CREATE with the queue label (objectSelector) | Fail |
//! | `default-queue-{jobs,<plural of each other queued kind>}.mutate.sluice.dev` (`/mutate/<plural>/default-queue`) | CREATE without the label in namespaces labelled `sluice.dev/default-queue: enabled` | Fail |
//! | `pods.mutate.sluice.dev` | Pod CREATE, `pods/ephemeralcontainers` UPDATE | Ignore (an outage never blocks pods) |
//! | `kueue-{jobs,<plural of each other queued kind>}.{mutate,validate}.sluice.dev` | only with `kueue_compat`: objects labelled `kueue.x-k8s.io/queue-name` (and not the queue label, for mutation) | Fail |
//! | `jobs.validate.sluice.dev` | Job UPDATE with the queue label (old or new) | Fail |
//! | `queued-<plural>.mutate.sluice.dev` (each other queued kind: JobSet, the Kubeflow jobs, RayJob, RayCluster) | CREATE with the queue label (a rule for a resource the server does not serve matches nothing) | Fail |
//! | `<plural>.validate.sluice.dev` (each other queued kind) | their UPDATE with the queue label (old or new) | Fail |
//! | `<plural>.validate.sluice.dev` | Sluice kinds CREATE/UPDATE (Workload status too) | Fail |
//!
//! Every entry: excluded namespaces by `kubernetes.io/metadata.name NotIn`
//! (Job and Pod entries), `timeoutSeconds: 5`, `sideEffects: None`,
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

fn validating(
    o: &ManifestOptions,
    name: &str,
    ep: Endpoint,
    rules: Vec<RuleWithOperations>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        client_config: client_config(o, ep),
        failure_policy: Some("Fail".to_owned()),
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

/// The MutatingWebhookConfiguration: Jobs by the queue label and, in
/// namespaces that queue every object, unlabelled; pods; the other queued
/// kinds alike; with Kueue compatibility, Jobs and the other kinds by
/// Kueue's label alone, after the rest.
pub fn mutating_configuration(o: &ManifestOptions) -> MutatingWebhookConfiguration {
    let mut webhooks = vec![queued_jobs(o), default_queue_jobs(o), pods(o)];
    webhooks.extend(other_kinds(o, "queued", vec![req(&o.queue_label, "Exists", None)]));
    webhooks.extend(default_queue_other_kinds(o));
    if o.kueue_compat {
        webhooks.push(mutating(
            o,
            "kueue-jobs.mutate.sluice.dev",
            Endpoint::MutateJobs,
            jobs_create(),
            "Fail",
            selector(None, not_excluded(o)),
            selector(None, kueue_labelled(o)),
        ));
        webhooks.extend(other_kinds(o, "kueue", kueue_labelled(o)));
    }
    MutatingWebhookConfiguration {
        metadata: metadata(o),
        webhooks: Some(webhooks),
    }
}

fn jobs_create() -> Vec<RuleWithOperations> {
    vec![rule("batch", "v1", &["jobs"], &["CREATE"])]
}

/// Objects with Kueue's queue label and not Sluice's.
fn kueue_labelled(o: &ManifestOptions) -> Vec<LabelSelectorRequirement> {
    vec![
        req(sluice_api::labels::KUEUE_QUEUE_NAME, "Exists", None),
        req(&o.queue_label, "DoesNotExist", None),
    ]
}

/// Jobs with the queue label.
fn queued_jobs(o: &ManifestOptions) -> MutatingWebhook {
    mutating(
        o,
        "queued-jobs.mutate.sluice.dev",
        Endpoint::MutateJobs,
        jobs_create(),
        "Fail",
        selector(None, not_excluded(o)),
        selector(None, vec![req(&o.queue_label, "Exists", None)]),
    )
}

/// Unlabelled Jobs in namespaces that queue every object.
fn default_queue_jobs(o: &ManifestOptions) -> MutatingWebhook {
    mutating(
        o,
        "default-queue-jobs.mutate.sluice.dev",
        // Its own path: requests on it come only from opted-in namespaces.
        Endpoint::MutateJobsDefaultQueue,
        jobs_create(),
        "Fail",
        default_queue_namespaces(o),
        // Labelled Jobs are the first entry's; never call twice.
        unlabelled(o),
    )
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

/// The other queued kinds' objects that `object` selects, one entry each.
fn other_kinds(o: &ManifestOptions, prefix: &str, object: Vec<LabelSelectorRequirement>) -> Vec<MutatingWebhook> {
    JobKind::others()
        .map(|k| {
            let (group, version, _) = k.gvk();
            mutating(
                o,
                &format!("{prefix}-{}.mutate.sluice.dev", k.plural()),
                Endpoint::MutateQueued(k),
                vec![rule(group, version, &[k.plural()], &["CREATE"])],
                "Fail",
                selector(None, not_excluded(o)),
                selector(None, object.clone()),
            )
        })
        .collect()
}

/// The other queued kinds' unlabelled objects in namespaces that queue
/// every object.
fn default_queue_other_kinds(o: &ManifestOptions) -> Vec<MutatingWebhook> {
    JobKind::others()
        .map(|k| {
            let (group, version, _) = k.gvk();
            mutating(
                o,
                &format!("default-queue-{}.mutate.sluice.dev", k.plural()),
                Endpoint::MutateQueuedDefaultQueue(k),
                vec![rule(group, version, &[k.plural()], &["CREATE"])],
                "Fail",
                default_queue_namespaces(o),
                unlabelled(o),
            )
        })
        .collect()
}

/// The ValidatingWebhookConfiguration.
pub fn validating_configuration(o: &ManifestOptions) -> ValidatingWebhookConfiguration {
    let mut hooks = vec![validating(
        o,
        "jobs.validate.sluice.dev",
        Endpoint::ValidateJobs,
        vec![rule("batch", "v1", &["jobs"], &["UPDATE"])],
        selector(None, not_excluded(o)),
        // Matched against the old and the new object: a label added,
        // removed or changed is seen either way.
        selector(None, vec![req(&o.queue_label, "Exists", None)]),
    )];
    // The other queued kinds: by the queue label, and (with Kueue
    // compatibility) by Kueue's label.
    let others = |prefix: &str, label: &str| {
        JobKind::others()
            .map(|k| {
                let (group, version, _) = k.gvk();
                validating(
                    o,
                    &format!("{prefix}{}.validate.sluice.dev", k.plural()),
                    Endpoint::ValidateQueued(k),
                    vec![rule(group, version, &[k.plural()], &["UPDATE"])],
                    selector(None, not_excluded(o)),
                    selector(None, vec![req(label, "Exists", None)]),
                )
            })
            .collect::<Vec<_>>()
    };
    hooks.extend(others("", &o.queue_label));
    if o.kueue_compat {
        hooks.push(validating(
            o,
            "kueue-jobs.validate.sluice.dev",
            Endpoint::ValidateJobs,
            vec![rule("batch", "v1", &["jobs"], &["UPDATE"])],
            selector(None, not_excluded(o)),
            selector(None, vec![req(sluice_api::labels::KUEUE_QUEUE_NAME, "Exists", None)]),
        ));
        hooks.extend(others("kueue-", sluice_api::labels::KUEUE_QUEUE_NAME));
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
