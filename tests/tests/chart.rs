//! The Helm chart (`charts/sluice`) as rendered by `.ci/helm.sh`: every
//! document parses into its k8s-openapi type without unknown fields, and the
//! manifests keep the chart's promises (hardened pods, probes, least-privilege
//! RBAC, webhook configurations identical to `sluice webhook manifests`).
//!
//! Reads `$SLUICE_RENDERED_CHART_DIR/*.yaml` (`.ci/run` sets it). Without it,
//! renders the chart with `helm` from PATH, and is skipped (with a printed
//! reason) when there is none. Not ignored: it runs in `cargo test --workspace`.
//!
//! ```text
//! .ci/helm.sh /tmp/rendered && SLUICE_RENDERED_CHART_DIR=/tmp/rendered cargo test -p sluice-e2e --test chart
//! ```

use sluice_kinds::JobKind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_webhook::manifests::{ManifestOptions, Target, mutating_configuration, validating_configuration};

/// Release and namespace `.ci/helm.sh` renders with.
const RELEASE_NAMESPACE: &str = "sluice-system";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The value sets `.ci/helm.sh` renders (`ci/<set>-values.yaml`, or
/// `values-ha.yaml` for `ha`).
const SETS: [&str; 6] = [
    "default",
    "ha",
    "cert-manager",
    "cert-manager-no-watch",
    "kueue-compat",
    "colliding-labels",
];

/// What `.ci/helm.sh` wrote: per value set, the manifests (`SET.yaml`) and
/// the rendered NOTES.txt (`SET.notes.txt`).
#[derive(Clone)]
struct Rendered {
    manifests: BTreeMap<String, String>,
    notes: BTreeMap<String, String>,
}

/// The rendered value sets, or None when nothing can render them. Rendered
/// once for all tests (they run in parallel and would otherwise write the
/// same files while others read them).
fn rendered_all() -> Result<Option<Rendered>> {
    static RENDERED: std::sync::OnceLock<Result<Option<Rendered>, String>> = std::sync::OnceLock::new();
    RENDERED
        .get_or_init(|| render().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow::anyhow!(e))
}

/// The rendered manifests of every value set (set → text).
fn rendered() -> Result<Option<BTreeMap<String, String>>> {
    Ok(rendered_all()?.map(|r| r.manifests))
}

fn render() -> Result<Option<Rendered>> {
    let dir = match std::env::var_os("SLUICE_RENDERED_CHART_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let Some(helm) = find_on_path("helm") else {
                println!(
                    "SKIPPED: SLUICE_RENDERED_CHART_DIR is not set and there is no helm on PATH \
                     (.ci/run sets it; or run .ci/helm.sh DIR and set SLUICE_RENDERED_CHART_DIR=DIR)"
                );
                return Ok(None);
            };
            let dir = std::env::temp_dir().join(format!("sluice-chart-{}", std::process::id()));
            let status = std::process::Command::new("bash")
                .arg(repo_root().join(".ci/helm.sh"))
                .arg(&dir)
                .env("HELM", helm)
                .status()
                .context("running .ci/helm.sh")?;
            ensure!(status.success(), ".ci/helm.sh failed: {status}");
            dir
        }
    };
    let (mut manifests, mut notes) = (BTreeMap::new(), BTreeMap::new());
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(set) = file.strip_suffix(".notes.txt") {
            notes.insert(set.to_owned(), std::fs::read_to_string(&path)?);
        } else if let Some(set) = file.strip_suffix(".yaml") {
            manifests.insert(set.to_owned(), std::fs::read_to_string(&path)?);
        }
    }
    for expected in SETS {
        ensure!(
            manifests.contains_key(expected),
            "{} has no {expected}.yaml",
            dir.display()
        );
        ensure!(
            notes.contains_key(expected),
            "{} has no {expected}.notes.txt",
            dir.display()
        );
    }
    Ok(Some(Rendered { manifests, notes }))
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// One rendered object, kept as JSON and parsed into its type on demand.
#[derive(Clone, Debug)]
struct Doc {
    source: String,
    kind: String,
    name: String,
    value: Value,
}

fn split(text: &str, set: &str) -> Result<Vec<Doc>> {
    let mut docs = Vec::new();
    for (i, chunk) in text.split("\n---").enumerate() {
        let chunk = chunk.trim_start_matches("---");
        let source = chunk
            .lines()
            .find_map(|l| l.strip_prefix("# Source: "))
            .unwrap_or("?")
            .to_owned();
        let meaningful = chunk
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if !meaningful {
            continue;
        }
        let value: Value =
            serde_saphyr::from_str(chunk).with_context(|| format!("{set}: document {i} ({source}) is not YAML"))?;
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        ensure!(
            !kind.is_empty() && !name.is_empty(),
            "{set}: {source}: no kind or metadata.name"
        );
        docs.push(Doc {
            source: format!("{set}: {kind} {name} ({source})"),
            kind,
            name,
            value,
        });
    }
    Ok(docs)
}

/// Parses into `T` (naming the path of a mistyped field) and requires the
/// round trip to keep every field: k8s-openapi ignores unknown fields, so a
/// misspelt or misplaced key shows up as a field the round trip lost.
fn typed<T: DeserializeOwned + Serialize>(doc: &Doc) -> Result<T> {
    let parsed: T = serde_path_to_error::deserialize(&doc.value)
        .map_err(|e| anyhow::anyhow!("{}: field {}: {}", doc.source, e.path(), e.inner()))?;
    let back = serde_json::to_value(&parsed)?;
    let mut lost = Vec::new();
    diff(&doc.value, &back, String::new(), &mut lost);
    ensure!(
        lost.is_empty(),
        "{}: unknown or mistyped fields: {}",
        doc.source,
        lost.join(", ")
    );
    Ok(parsed)
}

fn diff(original: &Value, back: &Value, path: String, out: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => diff(v, w, format!("{path}.{k}"), out),
                    // A null or empty value may be dropped on the way back.
                    None if v.is_null() || v == &Value::Object(Default::default()) && k != "selfSigned" => {}
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                diff(v, w, format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path} ({a} became {b})")),
    }
}

/// Every object of one value set, parsed.
#[derive(Default)]
struct Objects {
    deployments: Vec<(Doc, Deployment)>,
    services: Vec<Service>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<(Doc, ClusterRole)>,
    roles: Vec<(Doc, Role)>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    role_bindings: Vec<RoleBinding>,
    config_maps: Vec<ConfigMap>,
    pdbs: Vec<PodDisruptionBudget>,
    mutating: Vec<(Doc, MutatingWebhookConfiguration)>,
    validating: Vec<(Doc, ValidatingWebhookConfiguration)>,
    crds: Vec<(Doc, CustomResourceDefinition)>,
    /// cert-manager and Prometheus-operator kinds, checked as raw JSON.
    raw: Vec<Doc>,
}

fn parse_set(set: &str, text: &str) -> Result<Objects> {
    let mut o = Objects::default();
    for doc in split(text, set)? {
        let api = doc.value["apiVersion"].as_str().unwrap_or_default().to_owned();
        match (api.as_str(), doc.kind.as_str()) {
            ("apps/v1", "Deployment") => o.deployments.push((doc.clone(), typed(&doc)?)),
            ("v1", "Service") => o.services.push(typed(&doc)?),
            ("v1", "ServiceAccount") => o.service_accounts.push(typed(&doc)?),
            ("v1", "ConfigMap") => o.config_maps.push(typed(&doc)?),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => o.cluster_roles.push((doc.clone(), typed(&doc)?)),
            ("rbac.authorization.k8s.io/v1", "Role") => o.roles.push((doc.clone(), typed(&doc)?)),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => o.cluster_role_bindings.push(typed(&doc)?),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => o.role_bindings.push(typed(&doc)?),
            ("policy/v1", "PodDisruptionBudget") => o.pdbs.push(typed(&doc)?),
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                o.mutating.push((doc.clone(), typed(&doc)?))
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                o.validating.push((doc.clone(), typed(&doc)?))
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => o.crds.push((doc.clone(), typed(&doc)?)),
            ("cert-manager.io/v1", "Certificate" | "Issuer") | ("monitoring.coreos.com/v1", "ServiceMonitor") => {
                ensure!(doc.value["spec"].is_object(), "{}: no spec", doc.source);
                o.raw.push(doc)
            }
            _ => bail!("{}: unexpected apiVersion/kind {api}/{}", doc.source, doc.kind),
        }
    }
    Ok(o)
}

fn all_sets() -> Result<Option<BTreeMap<String, Objects>>> {
    let Some(texts) = rendered()? else { return Ok(None) };
    texts
        .iter()
        .map(|(set, text)| Ok((set.clone(), parse_set(set, text)?)))
        .collect::<Result<_>>()
        .map(Some)
}

fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers.iter().chain(spec.init_containers.iter().flatten())
}

fn args(c: &Container) -> Vec<String> {
    c.args.clone().unwrap_or_default()
}

fn deployment<'a>(o: &'a Objects, component: &str) -> Result<&'a Deployment> {
    o.deployments
        .iter()
        .map(|(_, d)| d)
        .find(|d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
                .and_then(|l| l.get("app.kubernetes.io/component"))
                .map(String::as_str)
                == Some(component)
        })
        .with_context(|| format!("no {component} Deployment"))
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

#[test]
fn chart_crd_copies_equal_crds_byte_for_byte() -> Result<()> {
    let root = repo_root();
    let list = |dir: &Path| -> Result<BTreeSet<String>> {
        Ok(std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<_>>()?)
    };
    let (crds, copies) = (root.join("crds"), root.join("charts/sluice/files/crds"));
    ensure!(
        list(&crds)? == list(&copies)?,
        "charts/sluice/files/crds has other files than crds/: run 'cp crds/*.yaml charts/sluice/files/crds/'"
    );
    for name in list(&crds)? {
        ensure!(
            std::fs::read(crds.join(&name))? == std::fs::read(copies.join(&name))?,
            "charts/sluice/files/crds/{name} differs from crds/{name}: run 'cp crds/*.yaml charts/sluice/files/crds/'"
        );
    }
    Ok(())
}

#[test]
fn every_rendered_document_parses_into_its_type() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        ensure!(o.deployments.len() == 2, "{set}: {} Deployments", o.deployments.len());
        ensure!(
            o.mutating.len() == 1 && o.validating.len() == 1,
            "{set}: one of each webhook configuration"
        );
        // The CRDs are the committed ones plus the chart's labels and keep policy.
        ensure!(o.crds.len() == 6, "{set}: {} CRDs", o.crds.len());
        for (doc, _) in &o.crds {
            let file = repo_root().join("crds").join(format!("{}.yaml", doc.name));
            let mut committed: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file)?)?;
            let mut ours = doc.value.clone();
            ensure!(
                ours["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep",
                "{}: no helm.sh/resource-policy: keep",
                doc.source
            );
            for v in [&mut committed, &mut ours] {
                let meta = v["metadata"].as_object_mut().unwrap();
                meta.remove("annotations");
                meta.remove("labels");
            }
            ensure!(committed == ours, "{}: differs from {}", doc.source, file.display());
        }
    }
    Ok(())
}

/// Every flag the chart passes is one the `sluice` subcommand declares (a clap
/// field of that name in crates/cli/src/<subcommand>.rs or the logging.rs it
/// flattens in), so a renamed or
/// misspelt flag fails here rather than in a crash-looping pod.
#[test]
fn rendered_flags_exist_in_the_cli() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        for (doc, d) in &o.deployments {
            for c in &pod_spec(d).containers {
                let a = args(c);
                let sub = a.first().with_context(|| format!("{}: no subcommand", doc.source))?;
                ensure!(
                    sub == "controller" || sub == "webhook",
                    "{set}: unknown subcommand {sub}"
                );
                // The subcommand's own flags, and the logging flags it flattens in.
                let mut source = std::fs::read_to_string(repo_root().join(format!("crates/cli/src/{sub}.rs")))?;
                source += &std::fs::read_to_string(repo_root().join("crates/cli/src/logging.rs"))?;
                for arg in &a[1..] {
                    let flag = arg
                        .strip_prefix("--")
                        .with_context(|| format!("{}: argument {arg} is not a flag", doc.source))?;
                    let name = flag.split('=').next().unwrap_or_default().replace('-', "_");
                    ensure!(
                        source.contains(&format!("    {name}: ")),
                        "{}: `sluice {sub}` has no flag --{}",
                        doc.source,
                        name.replace('_', "-")
                    );
                }
            }
        }
    }
    Ok(())
}

#[test]
fn idle_checks_are_flagged_only_with_a_prometheus_url() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        let a = args(&pod_spec(deployment(o, "controller")?).containers[0]);
        let idle: Vec<&String> = a
            .iter()
            .filter(|x| x.starts_with("--prometheus-url=") || x.starts_with("--idle-interval="))
            .collect();
        if set == "kueue-compat" {
            same_flags(
                &idle,
                &[
                    "--prometheus-url=http://prometheus.monitoring:9090",
                    "--idle-interval=30s",
                ],
                set,
            )?;
        } else {
            ensure!(
                idle.is_empty(),
                "{set}: idle flags without controller.prometheusUrl: {idle:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn fair_sharing_flags_follow_the_values() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        let a = args(&pod_spec(deployment(o, "controller")?).containers[0]);
        let fair: Vec<&String> = a.iter().filter(|x| x.starts_with("--fair-sharing")).collect();
        let want: &[&str] = match set.as_str() {
            "kueue-compat" => &["--fair-sharing=off"],
            "cert-manager" => &["--fair-sharing=on", "--fair-sharing-strategies=LessThanInitialShare"],
            _ => &[
                "--fair-sharing=on",
                "--fair-sharing-strategies=LessThanOrEqualToFinalShare,LessThanInitialShare",
            ],
        };
        same_flags(&fair, want, set)?;
    }
    Ok(())
}

fn same_flags(got: &[&String], want: &[&str], set: &str) -> Result<()> {
    let got: Vec<&str> = got.iter().map(|s| s.as_str()).collect();
    ensure!(got == want, "{set}: {got:?} != {want:?}");
    Ok(())
}

#[test]
fn pods_are_hardened_and_probed() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        for (doc, d) in &o.deployments {
            let spec = pod_spec(d);
            let psc = spec
                .security_context
                .as_ref()
                .with_context(|| format!("{}: no pod securityContext", doc.source))?;
            ensure!(psc.run_as_non_root == Some(true), "{}: pod runAsNonRoot", doc.source);
            ensure!(
                psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()) == Some("RuntimeDefault"),
                "{}: pod seccompProfile RuntimeDefault",
                doc.source
            );
            ensure!(
                spec.host_network != Some(true) && spec.host_pid != Some(true),
                "{}: host namespaces",
                doc.source
            );
            for c in containers(spec) {
                let at = format!("{set}: {} container {}", doc.name, c.name);
                let sc = c
                    .security_context
                    .as_ref()
                    .with_context(|| format!("{at}: no securityContext"))?;
                ensure!(sc.run_as_non_root == Some(true), "{at}: runAsNonRoot");
                ensure!(
                    sc.read_only_root_filesystem == Some(true),
                    "{at}: readOnlyRootFilesystem"
                );
                ensure!(
                    sc.allow_privilege_escalation == Some(false),
                    "{at}: allowPrivilegeEscalation"
                );
                ensure!(sc.privileged != Some(true), "{at}: privileged");
                ensure!(
                    sc.capabilities
                        .as_ref()
                        .and_then(|c| c.drop.as_ref())
                        .is_some_and(|d| d.iter().any(|x| x == "ALL")),
                    "{at}: capabilities.drop ALL"
                );
                ensure!(
                    sc.capabilities
                        .as_ref()
                        .and_then(|c| c.add.as_ref())
                        .is_none_or(|a| a.is_empty()),
                    "{at}: capabilities.add"
                );
                let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
                    p.as_ref()
                        .and_then(|p| p.http_get.as_ref())
                        .and_then(|h| h.path.clone())
                };
                ensure!(
                    path(&c.liveness_probe).as_deref() == Some("/healthz"),
                    "{at}: liveness probe on /healthz"
                );
                ensure!(
                    path(&c.readiness_probe).as_deref() == Some("/readyz"),
                    "{at}: readiness probe on /readyz"
                );
                let res = c.resources.as_ref().with_context(|| format!("{at}: no resources"))?;
                ensure!(
                    res.requests
                        .as_ref()
                        .is_some_and(|r| r.contains_key("cpu") && r.contains_key("memory")),
                    "{at}: cpu and memory requests"
                );
                ensure!(
                    res.limits.as_ref().is_some_and(|l| l.contains_key("memory")),
                    "{at}: memory limit"
                );
                ensure!(c.image.as_deref().is_some_and(|i| !i.is_empty()), "{at}: image");
            }
        }
        // The webhook: 2+ replicas, spread, a disruption budget, config checksum.
        let webhook = deployment(o, "webhook")?;
        ensure!(
            webhook.spec.as_ref().unwrap().replicas.unwrap_or(1) >= 2,
            "{set}: webhook replicas"
        );
        ensure!(
            pod_spec(webhook)
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .is_some(),
            "{set}: webhook pod anti-affinity"
        );
        let wlabels = webhook
            .spec
            .as_ref()
            .unwrap()
            .selector
            .match_labels
            .clone()
            .unwrap_or_default();
        ensure!(
            o.pdbs.iter().any(|p| {
                let s = p.spec.as_ref().unwrap();
                s.selector
                    .as_ref()
                    .and_then(|s| s.match_labels.clone())
                    .unwrap_or_default()
                    == wlabels
                    && s.min_available == Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
            }),
            "{set}: webhook PodDisruptionBudget minAvailable 1"
        );
        let checksum = webhook
            .spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get("checksum/config"))
            .cloned()
            .unwrap_or_default();
        ensure!(checksum.len() == 64, "{set}: webhook pods carry checksum/config");
        // The configuration file is one the webhook accepts.
        let config = o
            .config_maps
            .iter()
            .find_map(|c| c.data.as_ref().and_then(|d| d.get("config.yaml")))
            .with_context(|| format!("{set}: no webhook ConfigMap"))?;
        let config = sluice_webhook::config::WebhookConfig::from_yaml(config, "chart ConfigMap")
            .map_err(|e| anyhow::anyhow!("{set}: the webhook refuses the chart's config.yaml: {e}"))?;
        ensure!(
            config.controller_service_account == "sluice-controller",
            "{set}: controllerServiceAccount"
        );
        ensure!(
            config.kueue_compat == (set == "kueue-compat"),
            "{set}: kueueCompat in config.yaml"
        );
        // kueue-compat.yaml also turns GPU fixes off through values (null survives Helm).
        let defaults = set != "kueue-compat";
        ensure!(
            config.gpu.node_affinity.is_some() == defaults,
            "{set}: gpu.nodeAffinity"
        );
        ensure!(
            (config.gpu.runtime_class_name == sluice_webhook::config::RuntimeClassPolicy::Auto) == defaults,
            "{set}: gpu.runtimeClassName"
        );
        // Every ServiceAccount a pod runs as exists; every Service selects a Deployment's pods.
        let sas: BTreeSet<_> = o
            .service_accounts
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        for (doc, d) in &o.deployments {
            let sa = pod_spec(d).service_account_name.clone().unwrap_or_default();
            ensure!(
                sas.contains(&sa),
                "{}: service account {sa:?} is not rendered",
                doc.source
            );
        }
        for s in &o.services {
            let sel = s.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
            ensure!(
                o.deployments.iter().any(|(_, d)| {
                    let labels = d
                        .spec
                        .as_ref()
                        .unwrap()
                        .template
                        .metadata
                        .as_ref()
                        .unwrap()
                        .labels
                        .clone()
                        .unwrap_or_default();
                    !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
                }),
                "{set}: Service {:?} selects no Deployment's pods",
                s.metadata.name
            );
        }
    }
    let ha = &sets["ha"];
    let controller = deployment(ha, "controller")?;
    ensure!(
        controller.spec.as_ref().unwrap().replicas == Some(2),
        "ha: 2 controller replicas"
    );
    ensure!(
        args(&pod_spec(controller).containers[0]).contains(&"--leader-elect=true".to_owned()),
        "ha: --leader-elect=true"
    );
    ensure!(
        deployment(&sets["default"], "controller")?
            .spec
            .as_ref()
            .unwrap()
            .replicas
            == Some(1),
        "default: 1 controller replica"
    );
    Ok(())
}

fn covers(list: &Option<Vec<String>>, item: &str) -> bool {
    list.as_ref().is_some_and(|l| l.iter().any(|x| x == item || x == "*"))
}

fn check_rules(set: &str, what: &str, rules: &[PolicyRule], namespaced: bool) -> Result<()> {
    for (i, r) in rules.iter().enumerate() {
        let at = format!("{set}: {what} rule {i}");
        ensure!(r.non_resource_urls.is_none(), "{at}: nonResourceURLs");
        ensure!(!r.verbs.iter().any(|v| v == "*"), "{at}: wildcard verb");
        let groups = r.api_groups.clone().unwrap_or_default();
        let resources = r.resources.clone().unwrap_or_default();
        ensure!(!groups.iter().any(|g| g == "*"), "{at}: wildcard apiGroup");
        ensure!(
            !resources.iter().any(|x| x == "*" || x.ends_with("/*")),
            "{at}: wildcard resource"
        );
        for verb in ["escalate", "bind", "impersonate"] {
            ensure!(!r.verbs.iter().any(|v| v == verb), "{at}: {verb}");
        }
        if covers(&r.api_groups, "") && covers(&r.resources, "secrets") {
            ensure!(
                namespaced,
                "{at}: Secret access from a ClusterRole (outside the release namespace)"
            );
            let named = r.resource_names.as_ref().is_some_and(|n| !n.is_empty());
            // create cannot be limited by name (the name is not in the path).
            ensure!(
                named || r.verbs == ["create"],
                "{at}: Secret access without resourceNames ({:?})",
                r.verbs
            );
            ensure!(
                !r.verbs.iter().any(|v| v == "list" || v == "watch"),
                "{at}: list/watch Secrets"
            );
        }
        if covers(&r.api_groups, "admissionregistration.k8s.io") {
            ensure!(
                r.resource_names.as_ref().is_some_and(|n| !n.is_empty()),
                "{at}: webhook configurations without resourceNames"
            );
        }
        if covers(&r.api_groups, "coordination.k8s.io") {
            ensure!(namespaced, "{at}: Leases from a ClusterRole");
        }
    }
    Ok(())
}

#[test]
fn rbac_is_least_privilege() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        for (doc, r) in &o.cluster_roles {
            check_rules(set, &doc.source, r.rules.as_deref().unwrap_or_default(), false)?;
        }
        for (doc, r) in &o.roles {
            ensure!(
                r.metadata.namespace.as_deref() == Some(RELEASE_NAMESPACE),
                "{}: outside the release namespace",
                doc.source
            );
            check_rules(set, &doc.source, r.rules.as_deref().unwrap_or_default(), true)?;
        }
        let sas: BTreeSet<_> = o
            .service_accounts
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        let check_subjects = |subjects: &Option<Vec<Subject>>| -> Result<()> {
            for s in subjects.iter().flatten() {
                ensure!(
                    s.kind == "ServiceAccount" && sas.contains(&s.name),
                    "{set}: binding subject {s:?} is not one of ours"
                );
                ensure!(
                    s.namespace.as_deref() == Some(RELEASE_NAMESPACE),
                    "{set}: subject {s:?} namespace"
                );
            }
            Ok(())
        };
        for b in &o.cluster_role_bindings {
            check_subjects(&b.subjects)?;
            ensure!(
                o.cluster_roles.iter().any(|(d, _)| d.name == b.role_ref.name),
                "{set}: {} binds a role not rendered",
                b.role_ref.name
            );
        }
        for b in &o.role_bindings {
            check_subjects(&b.subjects)?;
            ensure!(
                o.roles.iter().any(|(d, _)| d.name == b.role_ref.name),
                "{set}: {} binds a role not rendered",
                b.role_ref.name
            );
        }
        // Aggregated user roles.
        if let Some((_, editor)) = o.cluster_roles.iter().find(|(d, _)| d.name == "sluice-editor") {
            ensure!(
                editor
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("rbac.authorization.k8s.io/aggregate-to-edit"))
                    .is_none(),
                "{set}: sluice-editor must not be aggregated into edit (every namespace editor could route Jobs onto any ClusterQueue)"
            );
        }
        for (name, label) in [
            ("sluice-viewer", "aggregate-to-view"),
            // LocalQueues route a namespace's Jobs onto a ClusterQueue: a
            // namespace admin's decision, not every editor's.
            ("sluice-editor", "aggregate-to-admin"),
        ] {
            let (_, role) = o
                .cluster_roles
                .iter()
                .find(|(d, _)| d.name == name)
                .with_context(|| format!("{set}: no {name}"))?;
            ensure!(
                role.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(&format!("rbac.authorization.k8s.io/{label}")))
                    .map(String::as_str)
                    == Some("true"),
                "{set}: {name} lacks the {label} label"
            );
        }
        // Self-signed mode: the Secret the webhook is told to use is the one it may touch.
        let webhook = deployment(o, "webhook")?;
        let wargs = args(&pod_spec(webhook).containers[0]);
        if wargs.iter().any(|a| a == "--self-signed") {
            let secret = wargs
                .iter()
                .find_map(|a| a.strip_prefix("--secret-name="))
                .context("--secret-name")?;
            ensure!(
                o.roles.iter().any(
                    |(_, r)| r.rules.iter().flatten().any(|r| covers(&r.resources, "secrets")
                        && r.resource_names.as_ref().is_some_and(|n| n.iter().any(|n| n == secret)))
                ),
                "{set}: no Role grants the webhook its Secret {secret}"
            );
        } else {
            ensure!(
                !o.roles
                    .iter()
                    .any(|(_, r)| r.rules.iter().flatten().any(|r| covers(&r.resources, "secrets"))),
                "{set}: Secret rights without --self-signed"
            );
        }
    }
    Ok(())
}

fn without_ca_bundle<T: Serialize>(webhooks: &T) -> Result<Value> {
    let mut v = serde_json::to_value(webhooks)?;
    for w in v.as_array_mut().into_iter().flatten() {
        if let Some(cc) = w.get_mut("clientConfig").and_then(Value::as_object_mut) {
            cc.remove("caBundle");
        }
    }
    Ok(v)
}

#[test]
fn webhook_configurations_match_sluice_webhook_manifests() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    // What `sluice webhook manifests --namespace sluice-system` prints.
    let opts = ManifestOptions {
        name: "sluice".to_owned(),
        target: Target::Service {
            namespace: RELEASE_NAMESPACE.to_owned(),
            name: "sluice-webhook".to_owned(),
            port: 443,
        },
        excluded_namespaces: ["kube-system", "gpu-operator", "nvidia-gpu-operator", RELEASE_NAMESPACE]
            .map(str::to_owned)
            .to_vec(),
        ..ManifestOptions::default()
    };
    for (set, o) in &sets {
        // `--kueue-compat` for the value set that turns it on.
        let opts = ManifestOptions {
            kueue_compat: set == "kueue-compat",
            ..opts.clone()
        };
        let want_m = mutating_configuration(&opts);
        let want_v = validating_configuration(&opts);
        let (mdoc, m) = &o.mutating[0];
        let (vdoc, v) = &o.validating[0];
        ensure!(m.metadata.name == want_m.metadata.name, "{}: name", mdoc.source);
        ensure!(v.metadata.name == want_v.metadata.name, "{}: name", vdoc.source);
        let (got, want) = (without_ca_bundle(&m.webhooks)?, without_ca_bundle(&want_m.webhooks)?);
        ensure!(
            got == want,
            "{}: differs from `sluice webhook manifests`:\nchart: {got:#}\nsluice: {want:#}",
            mdoc.source
        );
        let (got, want) = (without_ca_bundle(&v.webhooks)?, without_ca_bundle(&want_v.webhooks)?);
        ensure!(
            got == want,
            "{}: differs from `sluice webhook manifests`:\nchart: {got:#}\nsluice: {want:#}",
            vdoc.source
        );
        // failurePolicy: an outage never blocks Pods; everything else fails closed.
        for w in m.webhooks.iter().flatten() {
            let want = if w.name.starts_with("pods.") { "Ignore" } else { "Fail" };
            ensure!(
                w.failure_policy.as_deref() == Some(want),
                "{set}: {} failurePolicy",
                w.name
            );
        }
        // Except a serving kind's scale and ReplicaSets: an outage never
        // stops autoscaling or rollouts (the controller holds what grew).
        for w in v.webhooks.iter().flatten() {
            let ignore = w.name.ends_with("-scale.validate.sluice.dev") || w.name.starts_with("replicasets.");
            let want = if ignore { "Ignore" } else { "Fail" };
            ensure!(
                w.failure_policy.as_deref() == Some(want),
                "{set}: {} failurePolicy",
                w.name
            );
        }
        // The Service the configurations call exists and fronts the webhook port.
        ensure!(
            o.services
                .iter()
                .any(|s| s.metadata.name.as_deref() == Some("sluice-webhook")
                    && s.spec
                        .as_ref()
                        .and_then(|s| s.ports.as_ref())
                        .is_some_and(|p| p.iter().any(|p| p.port == 443))),
            "{set}: Service sluice-webhook:443"
        );
        // Certificates: cert-manager injects the CA, or the webhook patches it itself.
        let wargs = args(&pod_spec(deployment(o, "webhook")?).containers[0]);
        for (doc, d) in &o.deployments {
            let flag = args(&pod_spec(d).containers[0]).iter().any(|a| a == "--kueue-compat");
            ensure!(
                flag == opts.kueue_compat,
                "{}: --kueue-compat is {flag}, the webhook entries say {}",
                doc.source,
                opts.kueue_compat
            );
        }
        let inject = m
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
            .cloned();
        ensure!(
            inject
                == v.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
                    .cloned(),
            "{set}: both configurations inject the same CA"
        );
        if set.starts_with("cert-manager") {
            // The serving certificate (not the chart's CA, which has isCA).
            let cert = o
                .raw
                .iter()
                .find(|d| d.kind == "Certificate" && d.value["spec"]["isCA"].as_bool() != Some(true))
                .context("cert-manager: no serving Certificate")?;
            // Its issuer is a CA Issuer, so renewals keep the injected CA.
            let issuer = cert.value["spec"]["issuerRef"]["name"].as_str().unwrap_or_default();
            let ca_issuer = o
                .raw
                .iter()
                .find(|d| d.kind == "Issuer" && d.name == issuer)
                .with_context(|| format!("cert-manager: no Issuer {issuer}"))?;
            ensure!(
                ca_issuer.value["spec"]["ca"]["secretName"].is_string(),
                "cert-manager: the serving certificate's Issuer {issuer} is not a CA Issuer (a self-signed leaf changes the CA at every renewal)"
            );
            ensure!(
                inject.as_deref() == Some(&format!("{RELEASE_NAMESPACE}/{}", cert.name)),
                "cert-manager: inject-ca-from {inject:?} does not name the Certificate {}",
                cert.name
            );
            ensure!(o.raw.iter().any(|d| d.kind == "Issuer"), "cert-manager: no Issuer");
            ensure!(
                !wargs.iter().any(|a| a == "--self-signed"),
                "cert-manager: --self-signed"
            );
            let secret = cert.value["spec"]["secretName"].as_str().unwrap_or_default();
            let mounted = pod_spec(deployment(o, "webhook")?)
                .volumes
                .iter()
                .flatten()
                .any(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret));
            ensure!(mounted, "cert-manager: the webhook does not mount Secret {secret}");
        } else {
            ensure!(inject.is_none(), "{set}: inject-ca-from without cert-manager");
            ensure!(wargs.iter().any(|a| a == "--self-signed"), "{set}: --self-signed");
            ensure!(
                wargs.iter().any(|a| a == "--configuration-name=sluice"),
                "{set}: --configuration-name"
            );
        }
    }
    Ok(())
}

/// The rules of one role as "verb group/resource[names]" lines (group "core"
/// for ""), so expectations read like the RBAC table in docs/install.md.
fn grants(rules: &[PolicyRule]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in rules {
        let names = r
            .resource_names
            .as_ref()
            .filter(|n| !n.is_empty())
            .map(|n| format!(" {}", n.join(",")))
            .unwrap_or_default();
        for g in r.api_groups.iter().flatten() {
            let g = if g.is_empty() { "core" } else { g };
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    out.insert(format!("{v} {g}/{res}{names}"));
                }
            }
        }
    }
    out
}

/// `charts/sluice/files/kinds.yaml` is what the registry of kinds says
/// (the chart's RBAC rules and webhook entries for the kinds Sluice queues
/// come from it); `SLUICE_BLESS=1` writes it. No helm needed.
#[test]
fn the_charts_kinds_file_is_generated_from_the_registry() -> Result<()> {
    let path = repo_root().join("charts/sluice/files/kinds.yaml");
    let want = sluice_kinds::chart::chart_file();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::write(&path, &want)?;
    }
    let got = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    ensure!(
        got == want,
        "{} differs from the registry of kinds (crates/kinds): run SLUICE_BLESS=1 cargo test -p sluice-e2e --test chart",
        path.display()
    );
    Ok(())
}

/// install.md's walkthrough reads the example Job it applies, and says its
/// `spec.suspend` is `false` once admitted (it once expected `true` right
/// after an admission that had already happened). No helm needed.
#[test]
fn install_md_checks_the_admitted_example_job_as_unsuspended() -> Result<()> {
    let doc = std::fs::read_to_string(repo_root().join("docs/install.md"))?;
    let example = std::fs::read_to_string(repo_root().join("examples/jobs/single-gpu.yaml"))?;
    let job: Value = serde_saphyr::from_str(&example)?;
    let (name, ns) = (
        job["metadata"]["name"].as_str().context("single-gpu.yaml: no name")?,
        job["metadata"]["namespace"]
            .as_str()
            .context("single-gpu.yaml: no namespace")?,
    );
    let lines: Vec<&str> = doc.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(&format!("-n {ns} get job {name} ")) && l.contains("{.spec.suspend}"))
        .with_context(|| format!("install.md: no 'kubectl -n {ns} get job {name} … {{.spec.suspend}}' line"))?;
    let comment: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .take_while(|l| l.starts_with('#'))
        .copied()
        .collect();
    let first = comment
        .last()
        .context("install.md: no comment above the suspend check")?;
    ensure!(
        first.starts_with("# false"),
        "install.md: the comment above the suspend check must say false once admitted: {first:?}"
    );
    ensure!(
        doc.contains(&format!("job-{name} in {ns}")),
        "install.md: the Workload of {ns}/{name} is job-{name}"
    );
    Ok(())
}

/// A kind's access, as `grants` spells it.
fn access(a: sluice_kinds::Access) -> Vec<String> {
    expect(a.verbs, a.group, &[a.resource.as_str()], "")
}

/// `verbs` × `resources` of one group, as `grants` spells them.
fn expect(verbs: &[&str], group: &str, resources: &[&str], names: &str) -> Vec<String> {
    let names = if names.is_empty() {
        String::new()
    } else {
        format!(" {names}")
    };
    let mut out = Vec::new();
    for v in verbs {
        for r in resources {
            out.push(format!("{v} {group}/{r}{names}"));
        }
    }
    out
}

fn role_grants<'a>(
    roles: impl IntoIterator<Item = (&'a Doc, &'a Option<Vec<PolicyRule>>)>,
    name: &str,
) -> Option<BTreeSet<String>> {
    roles
        .into_iter()
        .find(|(d, _)| d.name == name)
        .map(|(_, rules)| grants(rules.as_deref().unwrap_or_default()))
}

fn check_grants(set: &str, what: &str, got: Option<BTreeSet<String>>, want: Option<Vec<Vec<String>>>) -> Result<()> {
    let want: Option<BTreeSet<String>> = want.map(|w| w.into_iter().flatten().collect());
    match (got, want) {
        (None, None) => Ok(()),
        (Some(_), None) => bail!("{set}: {what} is rendered but should not be (it would grant nothing the code uses)"),
        (None, Some(_)) => bail!("{set}: no {what}"),
        (Some(got), Some(want)) => {
            let extra: Vec<_> = got.difference(&want).collect();
            let missing: Vec<_> = want.difference(&got).collect();
            ensure!(
                extra.is_empty() && missing.is_empty(),
                "{set}: {what}: grants the code does not use: {extra:?}; calls the code makes that are not granted: {missing:?}"
            );
            Ok(())
        }
    }
}

/// The rows of the `resource | verbs | why` table in `doc` after `heading`
/// (up to the next heading), each as the grants it names and its `why`.
fn rbac_table(doc: &str, heading: &str) -> Result<Vec<(Vec<String>, String)>> {
    let text = std::fs::read_to_string(repo_root().join("docs").join(doc))?;
    let table = text
        .split(heading)
        .nth(1)
        .and_then(|t| t.split("\n#").next())
        .with_context(|| format!("docs/{doc} has no {heading:?}"))?;
    let rows: Vec<(Vec<String>, String)> = table
        .lines()
        .filter(|l| l.starts_with("| `") || l.starts_with("| core "))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let ticked: Vec<&str> = cells[0].split('`').skip(1).step_by(2).collect();
            let (group, resources) = match cells[0].strip_prefix("core ") {
                Some(_) => ("core", ticked.clone()),
                None => (ticked[0], ticked[1..].to_vec()),
            };
            let verbs: Vec<&str> = cells[1].split(',').map(str::trim).collect();
            (expect(&verbs, group, &resources, ""), cells[2].to_owned())
        })
        .collect();
    ensure!(rows.len() > 5, "docs/{doc}: the RBAC table was not read: {rows:?}");
    Ok(rows)
}

/// The rows of a table that apply to the controller as `o` runs it: a row
/// whose `why` says "only with `placement: nodes`" or "only with
/// `kueueUsage: count`" counts only where the controller runs so.
fn rows_for(rows: &[(Vec<String>, String)], o: &Objects) -> Result<Vec<Vec<String>>> {
    let controller_args = args(&pod_spec(deployment(o, "controller")?).containers[0]);
    let nodes = controller_args.iter().any(|a| a == "--placement=nodes");
    let kueue = controller_args.iter().any(|a| a == "--kueue-usage=count")
        && !controller_args.iter().any(|a| a == "--kueue-compat");
    Ok(rows_when(rows, nodes, kueue))
}

/// The rows of a table that apply with `--placement=nodes` (`nodes`) and
/// with Kueue's Workloads counted (`kueue`).
fn rows_when(rows: &[(Vec<String>, String)], nodes: bool, kueue: bool) -> Vec<Vec<String>> {
    rows.iter()
        .filter(|(_, why)| nodes || !why.contains("placement: nodes"))
        .filter(|(_, why)| kueue || !why.contains("kueueUsage: count"))
        .map(|(g, _)| g.clone())
        .collect()
}

/// Without helm too: docs/install.md's table of the controller's
/// ClusterRole is exactly what the controller's code calls, in both
/// placement modes, with and without Kueue's Workloads counted.
#[test]
fn the_rbac_docs_are_what_the_code_calls() -> Result<()> {
    let rows = rbac_table("install.md", "### The controller's ClusterRole")?;
    for nodes in [true, false] {
        for kueue in [true, false] {
            let documented: BTreeSet<String> = rows_when(&rows, nodes, kueue).into_iter().flatten().collect();
            check_grants(
                &format!(
                    "placement {}, Kueue Workloads {}",
                    if nodes { "nodes" } else { "quota-only" },
                    if kueue { "counted" } else { "not counted" }
                ),
                "docs/install.md's table of the controller's ClusterRole (as if granted) against the code's calls",
                Some(documented),
                Some(controller_calls(nodes, kueue)),
            )?;
        }
    }
    Ok(())
}

/// docs/install.md's table of the controller's ClusterRole is exactly the
/// role the chart renders, for every CI value set (both placement modes,
/// Kueue compatibility on and off). Needs the rendered chart (helm).
#[test]
fn the_rbac_docs_are_the_rendered_controller_role() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    let rows = rbac_table("install.md", "### The controller's ClusterRole")?;
    let mut modes = BTreeSet::new();
    for (set, o) in &sets {
        let controller_args = args(&pod_spec(deployment(o, "controller")?).containers[0]);
        modes.extend(
            controller_args
                .iter()
                .filter(|a| a.starts_with("--placement="))
                .cloned(),
        );
        let cluster_roles = o.cluster_roles.iter().map(|(d, r)| (d, &r.rules));
        check_grants(
            set,
            "docs/install.md's table of the controller's ClusterRole against ClusterRole sluice-controller",
            role_grants(cluster_roles, "sluice-controller"),
            Some(rows_for(&rows, o)?),
        )?;
    }
    ensure!(
        modes.len() == 2,
        "the CI value sets should run the controller in both placement modes, not only {modes:?}"
    );
    Ok(())
}

/// docs/integrations.md's RBAC rows (the controller's rights on the kinds
/// it queues) are all granted by the rendered ClusterRole.
#[test]
fn the_integrations_rbac_rows_are_granted() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    let rows = rbac_table("integrations.md", "## RBAC")?;
    for (set, o) in &sets {
        let cluster_roles = o.cluster_roles.iter().map(|(d, r)| (d, &r.rules));
        let granted = role_grants(cluster_roles, "sluice-controller").context("no ClusterRole sluice-controller")?;
        let missing: Vec<String> = rows_for(&rows, o)?
            .into_iter()
            .flatten()
            .filter(|g| !granted.contains(g))
            .collect();
        ensure!(
            missing.is_empty(),
            "{set}: docs/integrations.md's RBAC table says the controller may {missing:?}, which the chart does not grant"
        );
    }
    Ok(())
}

/// docs/install.md names the chart's objects as the chart does: every
/// `<fullname>…` name it gives is rendered (release `sluice`, so
/// `<fullname>` is `sluice`), and its count of CRDs is the chart's.
#[test]
fn install_md_names_the_rendered_objects() -> Result<()> {
    let Some(sets) = rendered()? else { return Ok(()) };
    let text = std::fs::read_to_string(repo_root().join("docs/install.md"))?;
    let default = &sets["default"];
    let docs = split(default, "default")?;
    let mut names: BTreeSet<String> = docs.iter().map(|d| d.name.clone()).collect();
    // Names only given inside rules (the Lease, the webhook's TLS Secret).
    for d in &docs {
        for rule in d.value["rules"].as_array().into_iter().flatten() {
            for n in rule["resourceNames"].as_array().into_iter().flatten() {
                names.extend(n.as_str().map(str::to_owned));
            }
        }
    }
    let mut unknown = Vec::new();
    let mut checked = 0;
    for quoted in text.split('`').skip(1).step_by(2) {
        let Some(rest) = quoted.strip_prefix("<fullname>") else {
            continue;
        };
        let name = format!("sluice{}", rest.split([':', '.']).next().unwrap_or_default());
        checked += 1;
        if !names.contains(&name) {
            unknown.push(quoted.to_owned());
        }
    }
    ensure!(
        checked >= 8,
        "docs/install.md: only {checked} `<fullname>…` names found"
    );
    ensure!(
        unknown.is_empty(),
        "docs/install.md names objects the chart does not render (release sluice): {unknown:?}"
    );
    let crds = docs.iter().filter(|d| d.kind == "CustomResourceDefinition").count();
    ensure!(
        text.contains(&format!("| {crds} CRDs (")),
        "docs/install.md should say the chart installs {crds} CRDs"
    );
    Ok(())
}

/// The controller's ClusterRole as its code needs it: with
/// `--placement=nodes` (`nodes`) and with `--kueue-usage=count` without
/// `--kueue-compat` (`kueue`). The source of truth the chart and the docs
/// are checked against.
fn controller_calls(nodes: bool, kueue: bool) -> Vec<Vec<String>> {
    // crates/controller/src/run.rs (watches, Job read-back), writer.rs
    // (server-side apply, patches, Events, the evicted Job's pods).
    let mut controller = vec![
        // an evicted Job's pods: are they gone? (label and field selectors);
        // a preemption notice's deadline annotated on the running ones
        // gated pods (servers with scheduling gates): watched, started,
        // deleted when evicted; a GPU pod outside the queue deleted after
        // the grace (index/podgroups.rs, index/escaped.rs)
        expect(&["get", "list", "watch", "patch", "delete"], "core", &["pods"], ""),
        expect(&["list", "watch"], "scheduling.k8s.io", &["priorityclasses"], ""),
        expect(&["list", "watch"], "core", &["namespaces"], ""),
        expect(
            &["list", "watch"],
            "sluice.dev",
            &[
                "clusterqueues",
                "cohorts",
                "localqueues",
                "resourceflavors",
                "workloadpriorityclasses",
                "workloads",
            ],
            "",
        ),
        // server-side apply of a Workload (create when it is new); a
        // gang's Workload deleted when one of its Jobs goes
        expect(&["create", "patch", "delete"], "sluice.dev", &["workloads"], ""),
        expect(
            &["patch"],
            "sluice.dev",
            &[
                "workloads/status",
                "clusterqueues/status",
                "cohorts/status",
                "localqueues/status",
            ],
            "",
        ),
        // Events are created, never patched or updated
        expect(&["create"], "events.k8s.io", &["events"], ""),
        // the GPU quota backstop (index/backstop.rs): server-side apply,
        // deleted where a namespace stops queueing every object
        expect(&["create", "patch", "delete"], "core", &["resourcequotas"], ""),
    ];
    // Every kind Sluice queues (sluice_kinds: its file says what it needs):
    // watched, read back, patched (suspend, start, restore);
    // blockOwnerDeletion on its Workloads' owner references.
    controller.extend(
        JobKind::ALL
            .into_iter()
            .flat_map(JobKind::controller_access)
            .map(access),
    );
    // --placement=nodes (the default): bound pods and Nodes are watched
    if nodes {
        controller.push(expect(&["list", "watch"], "core", &["nodes"], ""));
    }
    // --kueue-usage=count without --kueue-compat: Kueue's Workloads
    // are watched (run/discovery.rs kueue_workloads, watches.rs).
    if kueue {
        controller.push(expect(&["list", "watch"], "kueue.x-k8s.io", &["workloads"], ""));
    }
    controller
}

/// The controller's and webhook's rights are exactly the API calls their
/// code makes (crates/controller, crates/webhook):
/// nothing more (least privilege), nothing less (a forbidden call at run time).
#[test]
fn rbac_grants_exactly_what_the_code_calls() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        let cluster_roles = || o.cluster_roles.iter().map(|(d, r)| (d, &r.rules));
        let roles = || o.roles.iter().map(|(d, r)| (d, &r.rules));
        let placement = args(&pod_spec(deployment(o, "controller")?).containers[0])
            .iter()
            .find_map(|a| a.strip_prefix("--placement=").map(str::to_owned))
            .with_context(|| format!("{set}: the controller has no --placement"))?;
        let container_args = args(&pod_spec(deployment(o, "controller")?).containers[0]);
        let counts_kueue = container_args.iter().any(|a| a == "--kueue-usage=count")
            && !container_args.iter().any(|a| a == "--kueue-compat");
        let controller = controller_calls(placement == "nodes", counts_kueue);
        check_grants(
            set,
            "ClusterRole sluice-controller",
            role_grants(cluster_roles(), "sluice-controller"),
            Some(controller),
        )?;
        // run/lease: get, create when missing, update (a replace at the
        // resourceVersion read) to take, renew and release; never patch.
        // run/lease/fence.rs watch_lease: list + watch with fieldSelector
        // metadata.name (so resourceNames applies) to fence writes.
        let lease = vec![
            expect(&["create"], "coordination.k8s.io", &["leases"], ""),
            expect(
                &["get", "list", "watch", "update"],
                "coordination.k8s.io",
                &["leases"],
                "sluice-controller",
            ),
        ];
        check_grants(
            set,
            "Role sluice-controller-leader-election",
            role_grants(roles(), "sluice-controller-leader-election"),
            Some(lease),
        )?;

        // crates/webhook/src/kube_view.rs (metadata watches, Cohorts) and selfsigned.rs.
        let wargs = args(&pod_spec(deployment(o, "webhook")?).containers[0]);
        let self_signed = wargs.iter().any(|a| a == "--self-signed");
        let watches = !wargs.iter().any(|a| a == "--no-watch");
        let mut webhook = Vec::new();
        if watches {
            webhook.push(expect(&["list", "watch"], "core", &["namespaces"], ""));
            webhook.push(expect(&["list", "watch"], "sluice.dev", &["localqueues"], ""));
            webhook.push(expect(&["list", "watch"], "sluice.dev", &["cohorts"], ""));
            webhook.push(expect(&["list", "watch"], "sluice.dev", &["clusterqueues"], ""));
            webhook.push(expect(&["list", "watch"], "node.k8s.io", &["runtimeclasses"], ""));
            // Owner verification: cache::OwnerKind::all().
            webhook.push(expect(&["list", "watch"], "apps", &["daemonsets"], ""));
            webhook.extend(JobKind::ALL.into_iter().flat_map(JobKind::webhook_access).map(access));
        }
        if self_signed {
            webhook.push(expect(
                &["get", "update"],
                "admissionregistration.k8s.io",
                &["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                "sluice",
            ));
        }
        let needs_api = !webhook.is_empty();
        check_grants(
            set,
            "ClusterRole sluice-webhook",
            role_grants(cluster_roles(), "sluice-webhook"),
            needs_api.then_some(webhook),
        )?;
        let tls = self_signed.then(|| {
            vec![
                expect(&["create"], "core", &["secrets"], ""),
                expect(&["get", "update"], "core", &["secrets"], "sluice-webhook-tls"),
            ]
        });
        check_grants(
            set,
            "Role sluice-webhook-tls",
            role_grants(roles(), "sluice-webhook-tls"),
            tls,
        )?;
        // Without API calls the webhook gets no binding and no token.
        ensure!(
            o.cluster_role_bindings
                .iter()
                .any(|b| b.metadata.name.as_deref() == Some("sluice-webhook"))
                == needs_api,
            "{set}: ClusterRoleBinding sluice-webhook exactly when the webhook calls the API"
        );
        let sa = o
            .service_accounts
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some("sluice-webhook"))
            .context("no ServiceAccount sluice-webhook")?;
        ensure!(
            sa.automount_service_account_token == Some(needs_api),
            "{set}: the webhook's token is mounted exactly when it calls the API"
        );
        if set == "cert-manager-no-watch" {
            ensure!(!needs_api, "{set}: the webhook should need no API access");
        }

        // Nodes and Pods: only the controller reads them; it watches Nodes
        // only with --placement=nodes.
        let placement = args(&pod_spec(deployment(o, "controller")?).containers[0])
            .iter()
            .any(|a| a == "--placement=nodes");
        for (doc, rules) in cluster_roles().chain(roles()) {
            for g in grants(rules.as_deref().unwrap_or_default()) {
                if g.contains(" core/nodes") {
                    ensure!(
                        placement
                            && doc.name == "sluice-controller"
                            && (g.starts_with("list ") || g.starts_with("watch ")),
                        "{}: grants {g} (only the controller reads Nodes, with list/watch, and only with --placement=nodes)",
                        doc.source
                    );
                }
                if g.contains(" core/pods") {
                    ensure!(
                        doc.name == "sluice-controller",
                        "{}: grants {g} (only the controller reads, patches and deletes pods)",
                        doc.source
                    );
                }
            }
        }
    }
    Ok(())
}

/// No role without rules (an empty ClusterRole with its binding is noise at
/// best), and no binding to a role that is not rendered.
#[test]
fn no_role_or_binding_is_empty() -> Result<()> {
    let Some(sets) = all_sets()? else { return Ok(()) };
    for (set, o) in &sets {
        for (doc, rules) in o
            .cluster_roles
            .iter()
            .map(|(d, r)| (d, &r.rules))
            .chain(o.roles.iter().map(|(d, r)| (d, &r.rules)))
        {
            ensure!(
                rules.as_ref().is_some_and(|r| !r.is_empty()),
                "{} has no rules",
                doc.source
            );
        }
        for b in &o.cluster_role_bindings {
            ensure!(
                b.subjects.as_ref().is_some_and(|s| !s.is_empty()),
                "{set}: ClusterRoleBinding {:?} has no subjects",
                b.metadata.name
            );
        }
        for b in &o.role_bindings {
            ensure!(
                b.subjects.as_ref().is_some_and(|s| !s.is_empty()),
                "{set}: RoleBinding {:?} has no subjects",
                b.metadata.name
            );
        }
    }
    Ok(())
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

fn selector(component: &str) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name", "sluice"),
        ("app.kubernetes.io/instance", "sluice"),
        ("app.kubernetes.io/component", component),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// User labels (commonLabels, podLabels, ServiceMonitor and dashboard
/// labels) never override the chart's selector and Helm labels: every
/// selector is exactly the component's selector labels, the pods carry them,
/// and every object keeps the chart's own labels. The colliding-labels value
/// set sets every one of those keys to something else. (A key rendered twice
/// fails earlier: the YAML parser refuses duplicate keys.)
#[test]
fn selector_labels_win_over_user_labels() -> Result<()> {
    let Some(texts) = rendered()? else { return Ok(()) };
    for (set, text) in &texts {
        let colliding = set == "colliding-labels";
        for doc in split(text, set)? {
            let v = &doc.value;
            let labels = labels_of(&v["metadata"]["labels"]);
            for (k, want) in [
                ("app.kubernetes.io/name", "sluice"),
                ("app.kubernetes.io/instance", "sluice"),
                ("app.kubernetes.io/managed-by", "Helm"),
            ] {
                ensure!(
                    labels.get(k).map(String::as_str) == Some(want),
                    "{}: label {k} is {:?}, not {want:?}",
                    doc.source,
                    labels.get(k)
                );
            }
            ensure!(
                labels.get("helm.sh/chart").is_some_and(|c| c.starts_with("sluice-")),
                "{}: label helm.sh/chart",
                doc.source
            );
            if let Some(c) = labels.get("app.kubernetes.io/component") {
                ensure!(
                    c == "controller" || c == "webhook",
                    "{}: label app.kubernetes.io/component is {c:?}",
                    doc.source
                );
            }
            if colliding {
                ensure!(
                    labels.get("team").map(String::as_str) == Some("ml-platform"),
                    "{}: commonLabels team is not rendered",
                    doc.source
                );
            }
            let component = |what: &str| -> Result<String> {
                labels
                    .get("app.kubernetes.io/component")
                    .cloned()
                    .with_context(|| format!("{}: {what} without a component label", doc.source))
            };
            match doc.kind.as_str() {
                "Deployment" => {
                    let c = component("Deployment")?;
                    let spec = &v["spec"];
                    ensure!(
                        labels_of(&spec["selector"]["matchLabels"]) == selector(&c),
                        "{}: selector {} is not the {c} selector labels",
                        doc.source,
                        spec["selector"]
                    );
                    let pod = labels_of(&spec["template"]["metadata"]["labels"]);
                    for (k, want) in selector(&c) {
                        ensure!(
                            pod.get(&k) == Some(&want),
                            "{}: pod label {k} is {:?}, not {want:?}",
                            doc.source,
                            pod.get(&k)
                        );
                    }
                    if colliding {
                        ensure!(
                            pod.get("cost-center").map(String::as_str) == Some("gpu-42"),
                            "{}: podLabels cost-center is not rendered",
                            doc.source
                        );
                    }
                    let anti = &spec["template"]["spec"]["affinity"]["podAntiAffinity"];
                    for term in anti["requiredDuringSchedulingIgnoredDuringExecution"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .chain(
                            anti["preferredDuringSchedulingIgnoredDuringExecution"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|t| &t["podAffinityTerm"]),
                        )
                    {
                        ensure!(
                            labels_of(&term["labelSelector"]["matchLabels"]) == selector(&c),
                            "{}: anti-affinity selector is not the {c} selector labels",
                            doc.source
                        );
                    }
                }
                "Service" => {
                    let c = component("Service")?;
                    ensure!(
                        labels_of(&v["spec"]["selector"]) == selector(&c),
                        "{}: selector is not the {c} selector labels",
                        doc.source
                    );
                }
                "PodDisruptionBudget" => {
                    let c = component("PodDisruptionBudget")?;
                    ensure!(
                        labels_of(&v["spec"]["selector"]["matchLabels"]) == selector(&c),
                        "{}: selector is not the {c} selector labels",
                        doc.source
                    );
                }
                "ServiceMonitor" => {
                    let c = component("ServiceMonitor")?;
                    ensure!(
                        labels_of(&v["spec"]["selector"]["matchLabels"]) == selector(&c),
                        "{}: selector is not the {c} selector labels",
                        doc.source
                    );
                    if colliding {
                        ensure!(
                            labels.get("release").map(String::as_str) == Some("prometheus"),
                            "{}: metrics.serviceMonitor.labels are not rendered",
                            doc.source
                        );
                    }
                }
                "ConfigMap" if colliding && doc.name == "sluice-dashboard" => {
                    ensure!(
                        labels.get("grafana_dashboard").map(String::as_str) == Some("1"),
                        "{}: metrics.grafanaDashboard.labels are not rendered",
                        doc.source
                    );
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The test above relies on the YAML parser refusing a key rendered twice
/// (which is what a user label colliding with a chart label used to render).
#[test]
fn the_yaml_parser_refuses_duplicate_keys() {
    let twice = "metadata:\n  labels:\n    app.kubernetes.io/name: sluice\n    app.kubernetes.io/name: other\n";
    assert!(serde_saphyr::from_str::<Value>(twice).is_err());
}

/// `examples/...` paths in `text`, without trailing punctuation.
fn example_paths(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == '[' || c == ']')
        // Only the repository's examples/, not part of another path.
        .filter(|w| w.starts_with("examples/"))
        .map(|w| w.trim_end_matches([')', ',', '.', ';', ':']).to_owned())
        .collect()
}

/// NOTES.txt walks a new user through a first ResourceFlavor, ClusterQueue
/// and LocalQueue and a labelled Job, from examples/ files that exist, and
/// says how to check them; docs/install.md cites only examples that exist.
#[test]
fn notes_point_at_existing_examples() -> Result<()> {
    let Some(rendered) = rendered_all()? else { return Ok(()) };
    let root = repo_root();
    for (set, notes) in &rendered.notes {
        for needle in [
            "sluice.dev/queue: team-a",
            "kubectl get workloads -A",
            "kubectl get clusterqueues",
            "kubectl apply -f examples/flavors.yaml",
            "kubectl apply -f examples/cluster-queues.yaml",
            "kubectl apply -f examples/local-queues.yaml",
            "kubectl apply -f examples/jobs/single-gpu.yaml",
        ] {
            ensure!(notes.contains(needle), "{set}: NOTES.txt does not say {needle:?}");
        }
        let paths = example_paths(notes);
        let mut kinds = String::new();
        for p in &paths {
            let file = root.join(p);
            ensure!(file.exists(), "{set}: NOTES.txt cites {p}, which does not exist");
            if file.is_file() {
                kinds.push_str(&std::fs::read_to_string(&file)?);
            }
        }
        for kind in [
            "kind: ResourceFlavor",
            "kind: ClusterQueue",
            "kind: LocalQueue",
            "kind: Job",
            "sluice.dev/queue: team-a",
        ] {
            ensure!(
                kinds.contains(kind),
                "{set}: none of the files NOTES.txt cites ({paths:?}) has {kind:?}"
            );
        }
    }
    let install = std::fs::read_to_string(root.join("docs/install.md"))?;
    for p in example_paths(&install) {
        ensure!(
            root.join(&p).exists(),
            "docs/install.md cites {p}, which does not exist"
        );
    }
    Ok(())
}
