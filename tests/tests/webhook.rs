//! End-to-end tests of `sluice webhook` against a real API server.
//!
//! ```text
//! SLUICE_E2E_KUBECONFIG=~/.kube/config cargo test -p sluice-e2e --test webhook -- --ignored --test-threads=1
//! # or, with a control plane of its own (see sluice_e2e::envtest):
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test webhook -- --ignored --test-threads=1
//! ```
//!
//! The harness builds nothing itself: it runs the `sluice` binary next to the
//! test executable (`cargo build -p sluice-cli` first, or set `SLUICE_BIN`)
//! as `sluice webhook` on this machine with a freshly generated certificate,
//! and registers Mutating/ValidatingWebhookConfigurations that call it by
//! `clientConfig.url` with that CA as `caBundle`. The API server must reach
//! the webhook: by default at `127.0.0.1` (an API server on this host); set
//! `SLUICE_E2E_WEBHOOK_HOST` to an address of this machine that the API
//! server can reach otherwise (e.g. the docker bridge IP for kind).
//!
//! Each test uses a fresh namespace labelled with a per-run label; the
//! Job/Pod webhooks only select namespaces carrying that label and the
//! Sluice-kind webhooks only objects carrying it (the tests label theirs), so
//! nothing else in the cluster is affected, even by a dead test webhook. The
//! configurations are registered only after the webhook's `/readyz` answers
//! 200 over TLS. The RuntimeClass `nvidia` (which the webhook sets on GPU
//! pods) is created when missing. Everything created is deleted at the end,
//! also when a test fails or panics (`Drop`).
//! The Sluice CRDs are applied (server-side) when missing, so the validation
//! test can create a ClusterQueue.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use sluice_e2e::cluster::{client, kubeconfig_path, sluice_bin};
use sluice_webhook::certs::generate;
use sluice_webhook::manifests::{ManifestOptions, Target, mutating_configuration, validating_configuration};

const RUN_LABEL: &str = "sluice.dev/e2e-webhook";
/// The RuntimeClass the webhook sets on GPU pods by default.
const RUNTIME_CLASS: &str = "nvidia";

fn suffix() -> String {
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}", n & 0xff_ffff_ffff)
}

/// What a harness created in the cluster, so teardown deletes exactly that.
#[derive(Clone, Debug, Default)]
struct Created {
    namespace: Option<String>,
    configuration: Option<String>,
    runtime_class: bool,
}

/// A running `sluice webhook`, its registration and a test namespace.
///
/// Built right after the child process is spawned, so every later failure
/// of [`Harness::start`] drops it: the process is killed and whatever was
/// registered or created is deleted (on a helper thread with its own
/// runtime and client, since `Drop` cannot await).
struct Harness {
    client: Client,
    child: Option<Child>,
    run_id: String,
    namespace: String,
    configuration: String,
    dir: PathBuf,
    created: Created,
    cleaned: bool,
}

impl Harness {
    async fn start(default_queue_namespace: bool) -> Result<Self> {
        Self::start_with(default_queue_namespace, None).await
    }

    /// With `config`, the webhook reads that YAML as its `--config`; the
    /// harness then waits for the toleration fix rather than the
    /// RuntimeClass one.
    async fn start_with(default_queue_namespace: bool, config: Option<String>) -> Result<Self> {
        let client = client().await?;
        ensure_crds(&client).await?;
        let run_id = suffix();
        let host = std::env::var("SLUICE_E2E_WEBHOOK_HOST").unwrap_or_else(|_| "127.0.0.1".into());
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let listen = if host == "127.0.0.1" {
            format!("127.0.0.1:{port}")
        } else {
            format!("0.0.0.0:{port}")
        };
        let certs = generate(&[host.clone(), "127.0.0.1".to_owned()], SystemTime::now(), 2)?;
        let dir = std::env::temp_dir().join(format!("sluice-e2e-webhook-{run_id}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("tls.crt"), &certs.cert_pem)?;
        std::fs::write(dir.join("tls.key"), &certs.key_pem)?;
        let custom_config = config.is_some();
        std::fs::write(dir.join("config.yaml"), config.unwrap_or_default())?;

        let bin = sluice_bin();
        if !bin.exists() {
            let _ = std::fs::remove_dir_all(&dir);
            bail!(
                "{} not found: run `cargo build -p sluice-cli` or set SLUICE_BIN",
                bin.display()
            );
        }
        let child = Command::new(&bin)
            .args(["webhook", "--listen", &listen, "--namespace", "sluice-e2e-system"])
            .args(["--log-format", "plain"])
            .arg("--tls-cert")
            .arg(dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.join("tls.key"))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .env("KUBECONFIG", kubeconfig_path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()));
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        // From here on, an early return drops `h`: the child is killed and
        // everything in `h.created` is deleted.
        let mut h = Self {
            client,
            child: Some(child),
            namespace: format!("sluice-e2e-wh-{run_id}"),
            configuration: format!("sluice-e2e-{run_id}"),
            run_id,
            dir,
            created: Created::default(),
            cleaned: false,
        };

        h.ensure_runtime_class().await?;

        let mut labels = BTreeMap::from([(RUN_LABEL.to_owned(), h.run_id.clone())]);
        if default_queue_namespace {
            labels.insert("sluice.dev/default-queue".to_owned(), "enabled".to_owned());
        }
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": h.namespace, "labels": labels}
        }))?;
        Api::<Namespace>::all(h.client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        h.created.namespace = Some(h.namespace.clone());

        // Register only once the webhook answers: a registered but dead
        // webhook with failurePolicy Fail blocks what it matches.
        wait_ready(port, &certs.ca_pem, Duration::from_secs(60)).await?;

        let opts = ManifestOptions {
            name: h.configuration.clone(),
            target: Target::Url(format!("https://{host}:{port}")),
            ca_bundle: Some(certs.ca_pem.into_bytes()),
            excluded_namespaces: vec!["kube-system".to_owned()],
            ..ManifestOptions::default()
        };
        let (m, v) = scoped_configurations(&opts, &h.run_id);
        h.created.configuration = Some(h.configuration.clone());
        Api::<MutatingWebhookConfiguration>::all(h.client.clone())
            .create(&PostParams::default(), &m)
            .await?;
        Api::<ValidatingWebhookConfiguration>::all(h.client.clone())
            .create(&PostParams::default(), &v)
            .await?;
        h.wait_until_mutating(!custom_config, default_queue_namespace).await?;
        Ok(h)
    }

    /// The RuntimeClass admission plugin rejects pods that name a missing
    /// RuntimeClass, and the webhook sets `runtimeClassName: nvidia`.
    async fn ensure_runtime_class(&mut self) -> Result<()> {
        let api: Api<RuntimeClass> = Api::all(self.client.clone());
        if api.get_opt(RUNTIME_CLASS).await?.is_some() {
            return Ok(());
        }
        let rc: RuntimeClass = serde_json::from_value(json!({
            "metadata": {"name": RUNTIME_CLASS, "labels": {RUN_LABEL: self.run_id}},
            "handler": RUNTIME_CLASS
        }))?;
        match api.create(&PostParams::default(), &rc).await {
            Ok(_) => {
                self.created.runtime_class = true;
                Ok(())
            }
            // Created meanwhile by someone else: theirs to delete.
            Err(e) if api_error(&e).is_some_and(|(code, _)| code == 409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Polls a dry-run GPU Pod create until it comes back mutated: the
    /// webhook is ready already; this waits for the API server to use the
    /// new configuration (and, with `runtime_class`, for the webhook's
    /// RuntimeClass watch to have seen `nvidia`). Dry-run: nothing is stored.
    /// In a namespace that queues every GPU a bare GPU pod is refused, so
    /// the probe there is a GPU Job, whose pod template is fixed the same way.
    async fn wait_until_mutating(&self, runtime_class: bool, queued_namespace: bool) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), &self.namespace);
        let gpu = json!({"limits": {"nvidia.com/gpu": "1"}});
        let pod_probe = gpu_pod("probe", gpu.clone(), None);
        let job_probe = job("probe", json!({}), gpu);
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spec = if queued_namespace {
                jobs.create(&pp, &job_probe)
                    .await
                    .ok()
                    .and_then(|j| j.spec?.template.spec)
            } else {
                pods.create(&pp, &pod_probe).await.ok().and_then(|p| p.spec)
            };
            if let Some(spec) = spec {
                let mutated = if runtime_class {
                    spec.runtime_class_name.as_deref() == Some(RUNTIME_CLASS)
                } else {
                    spec.tolerations
                        .unwrap_or_default()
                        .iter()
                        .any(|t| t.key.as_deref() == Some("nvidia.com/gpu"))
                };
                if mutated {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("the API server never called the registered webhook for a dry-run GPU pod within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn stop_webhook(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    async fn cleanup(mut self) -> Result<()> {
        self.stop_webhook();
        let created = std::mem::take(&mut self.created);
        self.cleaned = true;
        let res = delete_created(&self.client, &created).await;
        let _ = std::fs::remove_dir_all(&self.dir);
        res
    }

    /// Labels that put an object in this run's webhook scope.
    fn run_labels(&self) -> Value {
        json!({RUN_LABEL: self.run_id})
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// LocalQueue `default` in the test namespace (its ClusterQueue need
    /// not exist: the webhook only checks that the LocalQueue does).
    async fn default_local_queue(&self) -> Result<()> {
        let gvk = GroupVersionKind::gvk("sluice.dev", "v1alpha1", "LocalQueue");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "localqueues");
        let lqs: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.namespace, &ar);
        let lq: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": "default", "labels": self.run_labels()}, "spec": {"clusterQueue": "gpus"}
        }))?;
        lqs.create(&PostParams::default(), &lq).await?;
        Ok(())
    }

    /// The JobSet CRD installed, and JobSets of the test namespace.
    async fn jobsets(&self) -> Result<Api<DynamicObject>> {
        sluice_e2e::cluster::install_crd_file(
            &self.client,
            "jobset.x-k8s.io_jobsets.yaml",
            "jobset.x-k8s.io/v1alpha2",
            "jobsets",
        )
        .await?;
        Ok(Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &jobset_resource(),
        ))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Never leave the webhook process or its registration behind, even
        // when a test panics or `start` fails half-way.
        self.stop_webhook();
        if self.cleaned {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let created = std::mem::take(&mut self.created);
        // The test's runtime is not polled while Drop runs, and the client
        // belongs to it: use a fresh runtime and client on another thread.
        let done = std::thread::spawn(move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let client = client().await?;
                tokio::time::timeout(Duration::from_secs(30), delete_created(&client, &created))
                    .await
                    .context("timed out deleting")?
            })
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!(
                "webhook e2e run {}: cleanup failed; namespace {} and configurations {} may need deleting",
                self.run_id, self.namespace, self.configuration
            );
        }
    }
}

/// Deletes the webhook configurations first (so nothing waits on a dead
/// webhook), then the namespace and a RuntimeClass the run created.
async fn delete_created(client: &Client, created: &Created) -> Result<()> {
    let dp = DeleteParams::default();
    let mut failed = Vec::new();
    let mut note = |what: &str, r: Result<(), kube::Error>| match r {
        Err(e) if api_error(&e).is_none_or(|(code, _)| code != 404) => failed.push(format!("{what}: {e}")),
        _ => {}
    };
    if let Some(name) = &created.configuration {
        let r = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(name, &dp)
            .await
            .map(drop);
        note("MutatingWebhookConfiguration", r);
        let r = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(name, &dp)
            .await
            .map(drop);
        note("ValidatingWebhookConfiguration", r);
    }
    if let Some(ns) = &created.namespace {
        let r = Api::<Namespace>::all(client.clone()).delete(ns, &dp).await.map(drop);
        note("Namespace", r);
    }
    if created.runtime_class {
        let r = Api::<RuntimeClass>::all(client.clone())
            .delete(RUNTIME_CLASS, &dp)
            .await
            .map(drop);
        note("RuntimeClass", r);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{}", failed.join("; "))
    }
}

/// The configurations of `opts`, scoped to this run: Job and Pod entries to
/// namespaces with the run label, Sluice-kind entries to objects with it
/// (so a dead test webhook never blocks anyone else's Sluice objects).
fn scoped_configurations(
    opts: &ManifestOptions,
    run_id: &str,
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let scope = |sel: &mut Option<LabelSelector>| {
        let s = sel.get_or_insert_with(LabelSelector::default);
        s.match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(RUN_LABEL.to_owned(), run_id.to_owned());
    };
    let mut m = mutating_configuration(opts);
    for w in m.webhooks.iter_mut().flatten() {
        scope(&mut w.namespace_selector);
    }
    let mut v = validating_configuration(opts);
    for w in v.webhooks.iter_mut().flatten() {
        if covers_a_queued_kind(w) {
            scope(&mut w.namespace_selector);
        } else {
            scope(&mut w.object_selector);
        }
    }
    (m, v)
}

/// Whether `w` reviews objects that live in tenants' namespaces (the
/// queued kinds and what they make: pods, ReplicaSets, scales), as opposed
/// to Sluice's own kinds (group `sluice.dev`), some of them cluster-scoped.
fn covers_a_queued_kind(w: &ValidatingWebhook) -> bool {
    !w.rules
        .iter()
        .flatten()
        .any(|r| r.api_groups.iter().flatten().any(|g| g == "sluice.dev"))
}

/// Waits until `GET https://127.0.0.1:<port>/readyz`, verified against
/// `ca_pem`, answers 200.
async fn wait_ready(port: u16, ca_pem: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let ca = ca_pem.to_owned();
        let last = match tokio::task::spawn_blocking(move || https_get(port, &ca, "/readyz")).await? {
            Ok(200) => return Ok(()),
            Ok(code) => format!("HTTP {code}"),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            bail!(
                "the webhook's /readyz did not answer 200 within {} s (last: {last})",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One blocking HTTPS GET on 127.0.0.1 (certificate checked for the name
/// 127.0.0.1 against `ca_pem`); the status code.
fn https_get(port: u16, ca_pem: &str, path: &str) -> Result<u16> {
    use std::io::{Read, Write};
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes())?)?;
    let cfg = rustls::ClientConfig::builder_with_provider(sluice_webhook::tls::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1")?;
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name)?;
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") {
        let n = tls.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no HTTP status line in {line:?}"))
}

async fn ensure_crds(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("sluice-e2e").force();
    for crd in sluice_api::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &pp, &Patch::Apply(&crd)).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let c = api.get(&name).await?;
            let established = c
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not Established after 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

fn jobset_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        "jobsets",
    )
}

fn container(resources: Value, env: Option<Value>) -> Value {
    let mut c = json!({"name": "cuda", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "command": ["nvidia-smi"], "resources": resources});
    if let Some(e) = env {
        c["env"] = e;
    }
    c
}

fn gpu_pod(name: &str, resources: Value, env: Option<Value>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [container(resources, env)]}
    }))
    .unwrap()
}

fn job(name: &str, labels: Value, resources: Value) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container(resources, None)]}}}
    }))
    .unwrap()
}

fn api_error(e: &kube::Error) -> Option<(u16, String)> {
    match e {
        kube::Error::Api(s) => Some((s.code, s.message.clone())),
        _ => None,
    }
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn gpu_job_comes_back_mutated_and_suspended() -> Result<()> {
    let h = Harness::start(false).await?;
    let j = job(
        "train",
        json!({"sluice.dev/queue": "team-a"}),
        json!({"limits": {"nvidia.com/gpu": "2"}}),
    );
    let created = h.jobs().create(&PostParams::default(), &j).await?;
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.suspend, Some(true));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.runtime_class_name.as_deref(), Some("nvidia"));
    let tols = pod.tolerations.clone().unwrap_or_default();
    assert!(tols.iter().any(|t| t.key.as_deref() == Some("nvidia.com/gpu")
        && t.operator.as_deref() == Some("Exists")
        && t.effect.as_deref() == Some("NoSchedule")));
    let terms = &pod
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert!(terms.iter().all(|t| {
        t.match_expressions
            .iter()
            .flatten()
            .any(|e| e.key == "nvidia.com/gpu.present")
    }));
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn unlabelled_non_gpu_job_is_untouched() -> Result<()> {
    let h = Harness::start(false).await?;
    let j = job("plain", json!({"app": "etl"}), json!({"limits": {"cpu": "100m"}}));
    let created = h.jobs().create(&PostParams::default(), &j).await?;
    let spec = created.spec.as_ref().unwrap();
    assert_ne!(spec.suspend, Some(true));
    let pod = spec.template.spec.as_ref().unwrap();
    assert!(pod.runtime_class_name.is_none());
    assert!(pod.affinity.is_none());
    assert_eq!(created.metadata.labels.as_ref().unwrap().get("sluice.dev/queue"), None);
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn pod_with_requests_only_gpu_gets_limits() -> Result<()> {
    let h = Harness::start(false).await?;
    let p = gpu_pod("requests-only", json!({"requests": {"nvidia.com/gpu": "1"}}), None);
    // Without the webhook the API server rejects this with 422.
    let created = h.pods().create(&PostParams::default(), &p).await?;
    let res = created.spec.as_ref().unwrap().containers[0].resources.clone().unwrap();
    assert_eq!(
        res.limits.unwrap().get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some("1")
    );
    assert_eq!(
        res.requests.unwrap().get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some("1")
    );
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn nvidia_visible_devices_escape_is_denied() -> Result<()> {
    let h = Harness::start(false).await?;
    let p = gpu_pod(
        "escape",
        json!({"limits": {"cpu": "100m"}}),
        Some(json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
    );
    let err = h.pods().create(&PostParams::default(), &p).await.unwrap_err();
    let (code, msg) = api_error(&err).expect("an API error");
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("denied the request"), "{msg}");
    assert!(
        msg.contains("spec.containers[0] (\"cuda\").env[NVIDIA_VISIBLE_DEVICES]"),
        "{msg}"
    );
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn invalid_cluster_queue_is_denied_with_the_field_path() -> Result<()> {
    let h = Harness::start(false).await?;
    let gvk = GroupVersionKind::gvk("sluice.dev", "v1alpha1", "ClusterQueue");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterqueues");
    let api: Api<DynamicObject> = Api::all_with(h.client.clone(), &ar);
    // The same resource in two groups: a rule only validate() checks (no CEL).
    let name = format!("e2e-invalid-{}", h.run_id);
    let cq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": h.run_labels()},
        "spec": {"resourceGroups": [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]},
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}
        ]}
    }))?;
    let err = api.create(&PostParams::default(), &cq).await;
    if err.is_ok() {
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    let (code, msg) = api_error(&err.unwrap_err()).expect("an API error");
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("spec.resourceGroups[1].coveredResources[0]"), "{msg}");
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn with_the_webhook_stopped_unlabelled_jobs_and_pods_are_still_created() -> Result<()> {
    let mut h = Harness::start(false).await?;
    h.stop_webhook();
    // Give the API server a moment to see connections refused.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let j = job("no-queue", json!({"app": "etl"}), json!({"limits": {"cpu": "100m"}}));
    h.jobs().create(&PostParams::default(), &j).await?;
    // Pods: failurePolicy Ignore.
    let p = gpu_pod("gpu-outage", json!({"limits": {"nvidia.com/gpu": "1"}}), None);
    let created = h.pods().create(&PostParams::default(), &p).await?;
    assert!(
        created.spec.as_ref().unwrap().runtime_class_name.is_none(),
        "not mutated while down"
    );
    // Queued Jobs do wait on Sluice (failurePolicy Fail).
    let queued = job(
        "queued",
        json!({"sluice.dev/queue": "team-a"}),
        json!({"limits": {"cpu": "100m"}}),
    );
    let err = h.jobs().create(&PostParams::default(), &queued).await.unwrap_err();
    let (code, msg) = api_error(&err).expect("an API error");
    assert_eq!(code, 500, "{msg}");
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn default_queue_namespace_labels_and_suspends_unlabelled_jobs() -> Result<()> {
    let h = Harness::start(true).await?;
    h.default_local_queue().await?;
    // The webhook's informer sees the LocalQueue shortly after: probe with
    // dry-run creates (nothing stored), then create the Job for real.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let j = job("auto", json!({"app": "etl"}), json!({"limits": {"cpu": "100m"}}));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let probe = h.jobs().create(&dry, &j).await?;
        let labelled = probe
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("sluice.dev/queue"))
            .is_some();
        if labelled || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let created = h.jobs().create(&PostParams::default(), &j).await?;
    assert_eq!(
        created
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("sluice.dev/queue")
            .map(String::as_str),
        Some("default")
    );
    assert_eq!(created.spec.as_ref().unwrap().suspend, Some(true));
    h.cleanup().await
}

// Harness checks that need no cluster (not ignored).

#[test]
fn scoped_configurations_keep_a_test_webhook_to_its_own_run() {
    let (m, v) = scoped_configurations(&ManifestOptions::default(), "run1");
    let has_run = |sel: &Option<LabelSelector>| {
        sel.as_ref()
            .and_then(|s| s.match_labels.as_ref())
            .and_then(|l| l.get(RUN_LABEL))
            .map(String::as_str)
            == Some("run1")
    };
    for w in m.webhooks.iter().flatten() {
        assert!(has_run(&w.namespace_selector), "{}", w.name);
    }
    let mut sluice_kinds = 0;
    for w in v.webhooks.iter().flatten() {
        if covers_a_queued_kind(w) {
            assert!(has_run(&w.namespace_selector), "{}", w.name);
        } else {
            // Cluster-scoped kinds ignore namespaceSelector: only an
            // objectSelector keeps a dead test webhook out of the way.
            assert!(has_run(&w.object_selector), "{}", w.name);
            sluice_kinds += 1;
        }
    }
    assert_eq!(
        sluice_kinds, 6,
        "ClusterQueue, LocalQueue, ResourceFlavor, WorkloadPriorityClass, Workload, Cohort"
    );
}

#[tokio::test]
async fn wait_ready_checks_readyz_over_tls() -> Result<()> {
    use std::sync::Arc;

    use sluice_webhook::cache::MemoryView;
    use sluice_webhook::config::WebhookConfig;
    use sluice_webhook::metrics::Metrics;
    use sluice_webhook::review::Reviewer;
    use sluice_webhook::tls::{SwappableCert, certified_key_from_pem};

    let certs = generate(&["127.0.0.1".to_owned()], SystemTime::now(), 2)?;
    let view = Arc::new(MemoryView::default());
    let cert = Arc::new(SwappableCert::default());
    cert.set(certified_key_from_pem(
        certs.cert_pem.as_bytes(),
        certs.key_pem.as_bytes(),
        "t",
    )?);
    let running = sluice_webhook::server::spawn(
        "127.0.0.1:0".parse()?,
        Reviewer::new(WebhookConfig::default(), view.clone()),
        cert,
        Some(view.clone()),
        Arc::new(Metrics::new()),
    )
    .await?;
    let port = running.addr.port();
    // Cache not synced: not ready, and wait_ready says so.
    let err = wait_ready(port, &certs.ca_pem, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 503"), "{err:#}");
    // A different CA is refused.
    let other = generate(&["127.0.0.1".to_owned()], SystemTime::now(), 2)?;
    assert!(https_get(port, &other.ca_pem, "/readyz").is_err());
    view.set_synced(true);
    wait_ready(port, &certs.ca_pem, Duration::from_secs(5)).await?;
    running.stop().await;
    Ok(())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_runtime_class_the_cluster_lacks_is_never_written() -> Result<()> {
    // Configured by name, absent from the cluster: the pod is created (the
    // API server's RuntimeClass admission would refuse it if the webhook
    // had written the name), with the other fixes and a warning.
    let absent = format!("sluice-e2e-absent-{}", suffix());
    let h = Harness::start_with(false, Some(format!("gpu:\n  runtimeClassName: {absent}\n"))).await?;
    let p = gpu_pod("no-runtime-class", json!({"limits": {"nvidia.com/gpu": "1"}}), None);
    let created = h.pods().create(&PostParams::default(), &p).await?;
    let spec = created.spec.as_ref().unwrap();
    assert!(spec.runtime_class_name.is_none(), "{:?}", spec.runtime_class_name);
    assert!(
        spec.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu")),
        "the other fixes still apply"
    );
    h.cleanup().await
}

/// A DCGM-exporter-like pod: NVIDIA_VISIBLE_DEVICES=all, no GPU request.
/// With `owner`, a controller reference to an object of that kind named
/// `dcgm-exporter` with a uid that belongs to nothing (forged).
fn system_pod(name: &str, owner: Option<&str>, labels: Value) -> Pod {
    let pod = system_pod_owned_by(name, None, labels);
    match owner {
        Some(kind) => with_owner(pod, kind, "dcgm-exporter", "7d2e4c1a-0b9f-4e55-8a6d-2f1c3b4a5e60"),
        None => pod,
    }
}

/// A DCGM-exporter-like pod controlled by `daemon_set` (its real name and
/// uid), as the DaemonSet controller would create it.
fn system_pod_owned_by(name: &str, daemon_set: Option<&DaemonSet>, labels: Value) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"restartPolicy": "Always", "containers": [container(
            json!({"limits": {"cpu": "100m"}}),
            Some(json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))
        )]}
    }))
    .unwrap();
    match daemon_set {
        Some(ds) => with_owner(
            pod,
            "DaemonSet",
            ds.metadata.name.as_deref().unwrap_or_default(),
            ds.metadata.uid.as_deref().unwrap_or_default(),
        ),
        None => pod,
    }
}

fn with_owner(mut pod: Pod, kind: &str, name: &str, uid: &str) -> Pod {
    pod.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true
        }))
        .unwrap(),
    ]);
    pod
}

/// Creates a DaemonSet `name` in `namespace` (its pods would run the
/// DCGM-exporter-like container) and returns it as stored (with its uid).
async fn create_daemon_set(client: &Client, namespace: &str, name: &str) -> Result<DaemonSet> {
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "dcgm-exporter"}},
            "template": {
                "metadata": {"labels": {"app": "dcgm-exporter"}},
                "spec": {"containers": [container(
                    json!({"limits": {"cpu": "100m"}}),
                    Some(json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))
                )]}
            }
        }
    }))?;
    Ok(Api::<DaemonSet>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &ds)
        .await?)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn gpu_system_pods_are_exempt_and_every_denial_says_how() -> Result<()> {
    let h = Harness::start(false).await?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    // A plain pod is denied, and told the three ways out.
    let err = h
        .pods()
        .create(&dry, &system_pod("plain", None, json!({})))
        .await
        .unwrap_err();
    let (code, msg) = api_error(&err).expect("an API error");
    assert_eq!(code, 403, "{msg}");
    for hint in [
        "excluded namespace",
        "from a DaemonSet",
        "sluice.dev/gpu-fixes=skip",
        "sluice.dev/allow-gpu-fixes-skip=true",
    ] {
        assert!(msg.contains(hint), "{hint:?} missing from {msg}");
    }
    // A DaemonSet's pod in an ordinary namespace gets the same guard
    // (a_tenants_daemon_set_pod_... covers the rest).
    let err = h
        .pods()
        .create(&dry, &system_pod("from-daemonset", Some("DaemonSet"), json!({})))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).map(|e| e.0), Some(403));
    // The opt-out label counts only once the namespace allows it.
    let skip = json!({"sluice.dev/gpu-fixes": "skip"});
    let err = h
        .pods()
        .create(&dry, &system_pod("skip-early", None, skip.clone()))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).map(|e| e.0), Some(403));
    Api::<Namespace>::all(h.client.clone())
        .patch(
            &h.namespace,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"sluice.dev/allow-gpu-fixes-skip": "true"}}})),
        )
        .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The webhook's namespace watch brings the label.
        match h.pods().create(&dry, &system_pod("skip", None, skip.clone())).await {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => return Err(e).context("the skip label never counted"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn pods_in_the_gpu_operator_namespace_are_left_alone() -> Result<()> {
    let h = Harness::start(false).await?;
    // The run's configuration only sends labelled namespaces: label a
    // gpu-operator namespace for this run, so the webhook itself decides.
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    let created = match namespaces.get_opt("gpu-operator").await? {
        Some(_) => false,
        None => {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "gpu-operator"}}))?;
            namespaces.create(&PostParams::default(), &ns).await?;
            true
        }
    };
    namespaces
        .patch(
            "gpu-operator",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": h.run_labels()}})),
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "gpu-operator");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let result = pods.create(&dry, &system_pod("validator", None, json!({}))).await;
    // The GPU operator's own DaemonSet, and a pod it would create.
    let ds_name = format!("dcgm-exporter-{}", h.run_id);
    let daemon_set = create_daemon_set(&h.client, "gpu-operator", &ds_name).await;
    let from_daemon_set = match &daemon_set {
        Ok(ds) => Some(
            pods.create(&dry, &system_pod_owned_by("dcgm-exporter-x7k2p", Some(ds), json!({})))
                .await,
        ),
        Err(_) => None,
    };
    // Delete it, and unlabel (or delete) the namespace, before asserting,
    // so a failure leaves nothing behind.
    if daemon_set.is_ok() {
        Api::<DaemonSet>::namespaced(h.client.clone(), "gpu-operator")
            .delete(&ds_name, &DeleteParams::default())
            .await?;
    }
    if created {
        namespaces.delete("gpu-operator", &DeleteParams::default()).await?;
    } else {
        namespaces
            .patch(
                "gpu-operator",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {RUN_LABEL: null}}})),
            )
            .await?;
    }
    let pod = result.context("a GPU operator pod was refused")?;
    assert!(pod.spec.unwrap().runtime_class_name.is_none(), "left alone");
    daemon_set.context("creating the DaemonSet in gpu-operator")?;
    from_daemon_set
        .context("no DaemonSet")?
        .context("the GPU operator DaemonSet's pod was refused")?;
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_tenants_daemon_set_pod_is_denied_and_so_is_a_forged_owner_unless_the_admin_trusts_the_namespace()
-> Result<()> {
    let h = Harness::start(false).await?;
    let ns = h.namespace.clone();
    // A tenant with edit rights creates a DaemonSet in their namespace; its
    // pod (created here with the DaemonSet's real name and uid, as the
    // DaemonSet controller would on every GPU node) is refused.
    let ds = create_daemon_set(&h.client, &ns, "dcgm-exporter").await?;
    let err = h
        .pods()
        .create(
            &PostParams::default(),
            &system_pod_owned_by("dcgm-exporter-abcde", Some(&ds), json!({})),
        )
        .await
        .expect_err("a tenant's DaemonSet pod must be denied");
    let (code, msg) = api_error(&err).expect("an API error");
    assert_eq!(code, 403, "{msg}");
    let way_out = format!(
        "if these are trusted node agents, a cluster admin can label namespace {ns:?} sluice.dev/allow-gpu-fixes-skip=true"
    );
    assert!(msg.contains(&way_out), "{way_out:?} missing from {msg}");
    // A bare pod with a forged DaemonSet owner: refused.
    let err = h
        .pods()
        .create(
            &PostParams::default(),
            &system_pod("forged-owner", Some("DaemonSet"), json!({})),
        )
        .await
        .expect_err("a forged DaemonSet owner must be denied");
    assert_eq!(api_error(&err).map(|e| e.0), Some(403));

    // The admin marks the namespace as one for trusted node agents.
    Api::<Namespace>::all(h.client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"sluice.dev/allow-gpu-fixes-skip": "true"}}})),
        )
        .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let pod = system_pod_owned_by("dcgm-exporter-fghij", Some(&ds), json!({}));
    loop {
        // The webhook's namespace watch brings the label.
        match h.pods().create(&PostParams::default(), &pod).await {
            Ok(created) => {
                assert!(
                    created.spec.unwrap_or_default().runtime_class_name.is_none(),
                    "left alone"
                );
                break;
            }
            Err(e) if Instant::now() > deadline => {
                return Err(e).context("the DaemonSet's pod was never created in the trusted namespace");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    // Even there, an owner that does not exist exempts nothing.
    let err = h
        .pods()
        .create(
            &PostParams::default(),
            &system_pod("forged-owner", Some("DaemonSet"), json!({})),
        )
        .await
        .expect_err("a forged DaemonSet owner must be denied in a trusted namespace too");
    let (code, msg) = api_error(&err).expect("an API error");
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("there is no DaemonSet \"dcgm-exporter\""), "{msg}");
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_queued_gpu_jobset_comes_back_suspended_with_every_template_fixed_and_only_the_controller_resumes_it()
-> Result<()> {
    let h = Harness::start(false).await?;
    let api = h.jobsets().await?;
    let template = json!({"spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never",
        "containers": [container(json!({"limits": {"nvidia.com/gpu": "1"}}), None)]}}}});
    let js: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "pretrain", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": template.clone()},
            {"name": "workers", "replicas": 2, "template": template}
        ]}
    }))?;
    let created = api.create(&PostParams::default(), &js).await?;
    anyhow::ensure!(
        created.data["spec"]["suspend"] == json!(true),
        "{:?}",
        created.data["spec"]
    );
    for i in 0..2 {
        let pod = &created.data["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"];
        anyhow::ensure!(pod["runtimeClassName"] == json!(RUNTIME_CLASS), "template {i}: {pod}");
        anyhow::ensure!(
            pod["tolerations"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == json!("nvidia.com/gpu"))),
            "template {i}: {pod}"
        );
    }
    // A user cannot start it: only the controller unsuspends it.
    let err = api
        .patch(
            "pretrain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect_err("a user unsuspended a queued JobSet");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("spec.suspend: cannot be changed"),
        "{code} {message}"
    );
    // Started by the controller (impersonated), it cannot grow: more
    // workers is refused, fewer is allowed.
    let controller: Api<DynamicObject> = Api::namespaced_with(as_controller().await?, &h.namespace, &jobset_resource());
    controller
        .patch(
            "pretrain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await?;
    let replicas = |n: i64| {
        let mut js = created.data["spec"]["replicatedJobs"].clone();
        js[1]["replicas"] = json!(n);
        Patch::Merge(json!({"spec": {"replicatedJobs": js}}))
    };
    let err = api
        .patch("pretrain", &PatchParams::default(), &replicas(5))
        .await
        .expect_err("a running JobSet grew");
    let (code, message) = api_error(&err).context("not an API error")?;
    eprintln!("JobSet scale-up refused: {code} {message}");
    anyhow::ensure!(
        code == 403
            && message.contains("spec.replicatedJobs[1] (workers).replicas × parallelism: 5 pods at once, was 2"),
        "{code} {message}"
    );
    api.patch("pretrain", &PatchParams::default(), &replicas(1)).await?;
    h.cleanup().await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn queued_kubeflow_and_ray_jobs_come_back_suspended_with_every_template_fixed() -> Result<()> {
    let h = Harness::start(false).await?;
    use sluice_e2e::cluster::install_crd_file;
    install_crd_file(
        &h.client,
        "kubeflow.org_pytorchjobs.yaml",
        "kubeflow.org/v1",
        "pytorchjobs",
    )
    .await?;
    install_crd_file(
        &h.client,
        "kubeflow.org_mpijobs.yaml",
        "kubeflow.org/v2beta1",
        "mpijobs",
    )
    .await?;
    install_crd_file(&h.client, "ray.io_rayjobs.yaml", "ray.io/v1", "rayjobs").await?;
    let template = json!({"spec": {"restartPolicy": "Never",
        "containers": [container(json!({"limits": {"nvidia.com/gpu": "1"}}), None)]}});
    let labels = json!({"sluice.dev/queue": "team-a"});
    let cases = [
        (
            ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
            json!({"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                           "Worker": {"replicas": 2, "template": template}}}),
            "/spec/runPolicy/suspend",
            vec![
                "/spec/pytorchReplicaSpecs/Master/template/spec",
                "/spec/pytorchReplicaSpecs/Worker/template/spec",
            ],
        ),
        (
            ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
            json!({"runPolicy": {"cleanPodPolicy": "Running"},
                   "mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": template}}}),
            "/spec/runPolicy/suspend",
            vec!["/spec/mpiReplicaSpecs/Worker/template/spec"],
        ),
        (
            ("ray.io", "v1", "RayJob", "rayjobs"),
            json!({"entrypoint": "python x.py", "shutdownAfterJobFinishes": true, "rayClusterSpec": {
                "headGroupSpec": {"template": template},
                "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": template}]}}),
            "/spec/suspend",
            vec![
                "/spec/rayClusterSpec/headGroupSpec/template/spec",
                "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec",
            ],
        ),
    ];
    for ((group, version, kind, plural), spec, suspend_at, templates) in cases {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), &h.namespace, &ar);
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/{version}"), "kind": kind,
            "metadata": {"name": "train", "labels": labels}, "spec": spec
        }))?;
        let created = serde_json::to_value(api.create(&PostParams::default(), &obj).await?)?;
        anyhow::ensure!(
            created.pointer(suspend_at) == Some(&json!(true)),
            "{kind}: {}",
            created["spec"]
        );
        for at in templates {
            let pod = created.pointer(at).with_context(|| format!("{kind}: no {at}"))?;
            anyhow::ensure!(pod["runtimeClassName"] == json!(RUNTIME_CLASS), "{kind} {at}: {pod}");
        }
        if kind == "MPIJob" {
            // The rest of runPolicy is kept.
            anyhow::ensure!(created["spec"]["runPolicy"]["cleanPodPolicy"] == json!("Running"));
        }
    }
    h.cleanup().await
}

/// A client acting as the Sluice controller the harness's webhook trusts
/// (`--namespace sluice-e2e-system`): the test client (an admin)
/// impersonates its service account, in the admins' group.
async fn as_controller() -> Result<Client> {
    as_user("system:serviceaccount:sluice-e2e-system:sluice-controller").await
}

/// A client acting as `user`: the test client (an admin) impersonates it,
/// in the admins' group (its rights for the test: the webhook decides by
/// the user name alone).
async fn as_user(user: &str) -> Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig_path())?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = Some(vec!["system:masters".into()]);
    Ok(Client::try_from(config)?)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_running_queued_job_cannot_grow_nor_leave_a_default_queue_namespace() -> Result<()> {
    let h = Harness::start(true).await?;
    let result = async {
        h.default_local_queue().await?;
        // A labelled GPU Job: suspended by the webhook; the controller
        // (impersonated) starts it as an admission would.
        let mut j = job(
            "greedy",
            json!({"sluice.dev/queue": "default"}),
            json!({"limits": {"nvidia.com/gpu": "1"}}),
        );
        let spec = j.spec.as_mut().context("spec")?;
        spec.parallelism = Some(2);
        spec.completions = Some(16);
        h.jobs().create(&PostParams::default(), &j).await?;
        let controller: Api<Job> = Api::namespaced(as_controller().await?, &h.namespace);
        controller
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": false}})),
            )
            .await?;
        // The tenant scales it up: refused, with the field and the way out.
        let err = h
            .jobs()
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"parallelism": 8}})),
            )
            .await
            .expect_err("scaling a running queued Job up is refused");
        let (code, msg) = api_error(&err).context("an API error")?;
        eprintln!("scale-up refused: {code} {msg}");
        assert_eq!(code, 403);
        assert!(
            msg.contains("spec.parallelism: 8 pods at once, was 2: cannot grow while the Job runs"),
            "{msg}"
        );
        // Sampled every 0.3 s for 30 s: never more than the 2 pods it was
        // started with (the job controller makes them).
        let (mut most, start) = (0usize, Instant::now());
        while start.elapsed() < Duration::from_secs(30) {
            let pods = h
                .pods()
                .list(&kube::api::ListParams::default().labels("job-name=greedy"))
                .await?;
            let live = pods
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count();
            most = most.max(live);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        eprintln!("after the refused scale-up: at most {most} pods of greedy in 30 s");
        assert!(most <= 2, "{most} pods");
        // Scaling down is allowed.
        h.jobs()
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"parallelism": 1}})),
            )
            .await?;
        // The two-step escape: suspend (as the tenant may), then take the
        // label off: refused in a namespace that queues every Job.
        h.jobs()
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": true}})),
            )
            .await?;
        let err = h
            .jobs()
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"sluice.dev/queue": null}}})),
            )
            .await
            .expect_err("taking the label off is refused");
        let (code, msg) = api_error(&err).context("an API error")?;
        eprintln!("label removal refused: {code} {msg}");
        assert_eq!(code, 403);
        assert!(msg.contains("cannot be removed: namespace"), "{msg}");
        // One step (label off and unsuspend together) stays refused.
        let err = h
            .jobs()
            .patch(
                "greedy",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"sluice.dev/queue": null}}, "spec": {"suspend": false}})),
            )
            .await
            .expect_err("label off and unsuspend together is refused");
        assert_eq!(api_error(&err).map(|e| e.0), Some(403));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    h.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn an_unlabelled_jobset_in_a_default_queue_namespace_comes_back_queued_and_suspended() -> Result<()> {
    let h = Harness::start(true).await?;
    let result = async {
        let api = h.jobsets().await?;
        let template = json!({"spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never",
            "containers": [container(json!({"limits": {"nvidia.com/gpu": "1"}}), None)]}}}});
        let js: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "unlabelled"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": template}]}
        }))?;
        h.default_local_queue().await?;
        // The webhook's informer sees the LocalQueue shortly after: probe
        // with dry-run creates, then create it for real.
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let queue_of = |o: &DynamicObject| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("sluice.dev/queue"))
                .cloned()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while queue_of(&api.create(&dry, &js).await?).is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let created = api.create(&PostParams::default(), &js).await?;
        anyhow::ensure!(
            queue_of(&created).as_deref() == Some("default") && created.data["spec"]["suspend"] == json!(true),
            "{:?} {:?}",
            created.metadata.labels,
            created.data["spec"]
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    h.cleanup().await?;
    result
}

fn ray_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ray.io", "v1", kind), plural)
}

/// A RayCluster queued in team-a: a head and a worker group `gpu` of 2
/// one-GPU workers, created running; controlled by RayJob `owner` (name,
/// uid) when given, as KubeRay makes a RayJob's cluster (with the
/// RayJob's labels, its queue label too).
fn ray_cluster(name: &str, owner: Option<(&str, &str)>) -> Result<DynamicObject> {
    let pod = json!({"spec": {"restartPolicy": "Never",
        "containers": [container(json!({"limits": {"nvidia.com/gpu": "1"}}), None)]}});
    let mut rc = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"suspend": false,
            "headGroupSpec": {"rayStartParams": {}, "template": pod.clone()},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "rayStartParams": {}, "template": pod}]}
    });
    if let Some((owner, uid)) = owner {
        rc["metadata"]["ownerReferences"] = json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": owner,
            "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    }
    Ok(serde_json::from_value(rc)?)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_queued_raycluster_is_held_and_one_a_verified_rayjob_made_is_left_to_it_but_a_forged_or_adopted_one_is_refused()
-> Result<()> {
    // The Ray CRDs first: the webhook lists RayJobs to verify owners.
    let admin = client().await?;
    sluice_e2e::cluster::install_crd_file(&admin, "ray.io_rayjobs.yaml", "ray.io/v1", "rayjobs").await?;
    sluice_e2e::cluster::install_crd_file(&admin, "ray.io_rayclusters.yaml", "ray.io/v1", "rayclusters").await?;
    let h = Harness::start(false).await?;
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        &h.namespace,
        &ray_resource("RayCluster", "rayclusters"),
    );
    let rayjobs: Api<DynamicObject> =
        Api::namespaced_with(h.client.clone(), &h.namespace, &ray_resource("RayJob", "rayjobs"));
    // Queued on its own: held, and its head and workers get the GPU fixes.
    let lab = clusters
        .create(&PostParams::default(), &ray_cluster("lab", None)?)
        .await?;
    anyhow::ensure!(lab.data["spec"]["suspend"] == json!(true), "{:?}", lab.data["spec"]);
    for at in [
        "/spec/headGroupSpec/template/spec",
        "/spec/workerGroupSpecs/0/template/spec",
    ] {
        let pod = lab.data.pointer(at).context("template")?;
        anyhow::ensure!(pod["runtimeClassName"] == json!(RUNTIME_CLASS), "{at}: {pod}");
    }
    // The autoscaler would grow it past its admission: refused.
    let mut autoscaled = ray_cluster("autoscaled", None)?;
    autoscaled.data["spec"]["enableInTreeAutoscaling"] = json!(true);
    let err = clusters
        .create(&PostParams::default(), &autoscaled)
        .await
        .expect_err("an autoscaled RayCluster was queued");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("spec.enableInTreeAutoscaling: must not be true for a queued RayCluster"),
        "{code} {message}"
    );
    // A RayJob (queued, held) and the cluster KubeRay makes for it: left to
    // the RayJob, not held, once the webhook's cache has the RayJob.
    let rj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "labels": {"sluice.dev/queue": "team-a"}},
        "spec": {"shutdownAfterJobFinishes": true, "entrypoint": "python tune.py",
                 "rayClusterSpec": lab.data["spec"].clone()}
    }))?;
    let rj = rayjobs.create(&PostParams::default(), &rj).await?;
    anyhow::ensure!(rj.data["spec"]["suspend"] == json!(true), "{:?}", rj.data["spec"]);
    let uid = rj.metadata.uid.clone().context("uid")?;
    // KubeRay makes it, as its service account (a default operator).
    let kuberay: Api<DynamicObject> = Api::namespaced_with(
        as_user("system:serviceaccount:ray-system:kuberay-operator").await?,
        &h.namespace,
        &ray_resource("RayCluster", "rayclusters"),
    );
    let made = sluice_e2e::cluster::wait_for("the RayJob's cluster accepted", Duration::from_secs(30), || async {
        match kuberay
            .create(
                &PostParams::default(),
                &ray_cluster("tune-raycluster-x", Some(("tune", &uid)))?,
            )
            .await
        {
            Ok(rc) => Ok(Some(rc)),
            // Not in the webhook's cache yet: KubeRay retries, so do we.
            Err(e) if api_error(&e).is_some_and(|(code, m)| code == 403 && m.contains("RayJob \"tune\"")) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    anyhow::ensure!(made.data["spec"]["suspend"] == json!(false), "{:?}", made.data["spec"]);
    // The same RayJob named by anyone else (here the test's admin, not a
    // job operator) leaves nothing to it: a RayJob of one's own making,
    // small and admitted, would otherwise let a large cluster run unqueued.
    let err = clusters
        .create(&PostParams::default(), &ray_cluster("mine", Some(("tune", &uid)))?)
        .await
        .expect_err("a RayCluster the admin made was left to the RayJob");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403
            && message.contains(
                "RayJob \"tune\" controls this RayCluster, but \"sluice-e2e-admin\" is not one of the job operators"
            ),
        "{code} {message}"
    );
    // A forged controller reference (another uid) is refused.
    let err = clusters
        .create(
            &PostParams::default(),
            &ray_cluster("forged", Some(("tune", "forged-uid")))?,
        )
        .await
        .expect_err("a forged RayJob owner was believed");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("there is no RayJob \"tune\" with uid \"forged-uid\""),
        "{code} {message}"
    );
    // Nor can a queued RayCluster be given the RayJob as its controller
    // later, to be resumed as the RayJob's.
    let err = clusters
        .patch(
            "lab",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                "name": "tune", "uid": uid, "controller": true}]}}),
            ),
        )
        .await
        .expect_err("a queued RayCluster was adopted");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("to name RayJob \"tune\" as the controller of a queued RayCluster"),
        "{code} {message}"
    );
    // Only the controller resumes it; once running, it cannot grow.
    let err = clusters
        .patch(
            "lab",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect_err("a user resumed a queued RayCluster");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("spec.suspend: cannot be changed"),
        "{code} {message}"
    );
    let controller: Api<DynamicObject> = Api::namespaced_with(
        as_controller().await?,
        &h.namespace,
        &ray_resource("RayCluster", "rayclusters"),
    );
    controller
        .patch(
            "lab",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await?;
    let replicas = |n: i64| {
        let mut groups = lab.data["spec"]["workerGroupSpecs"].clone();
        groups[0]["replicas"] = json!(n);
        Patch::Merge(json!({"spec": {"workerGroupSpecs": groups}}))
    };
    let err = clusters
        .patch("lab", &PatchParams::default(), &replicas(3))
        .await
        .expect_err("a running RayCluster grew");
    let (code, message) = api_error(&err).context("not an API error")?;
    anyhow::ensure!(
        code == 403 && message.contains("spec.workerGroupSpecs[0] (gpu): replicas within [minReplicas, maxReplicas] × numOfHosts: 3 pods at once, was 2"),
        "{code} {message}"
    );
    clusters.patch("lab", &PatchParams::default(), &replicas(1)).await?;
    h.cleanup().await
}
