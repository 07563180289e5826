//! End-to-end tests of `sluice webhook` against a real API server.
//!
//! ```text
//! SLUICE_E2E_KUBECONFIG=~/.kube/config cargo test -p sluice-e2e --test webhook -- --ignored --test-threads=1
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
//! Each test uses a fresh namespace labelled with a per-run label, and the
//! Job/Pod webhooks only select namespaces carrying that label, so nothing
//! else in the cluster is affected. Everything created is deleted at the end.
//! The Sluice CRDs are applied (server-side) when missing, so the validation
//! test can create a ClusterQueue.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
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

fn suffix() -> String {
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}", n & 0xff_ffff_ffff)
}

/// A running `sluice webhook`, its registration and a test namespace.
struct Harness {
    client: Client,
    child: Option<Child>,
    run_id: String,
    namespace: String,
    configuration: String,
    dir: PathBuf,
}

impl Harness {
    async fn start(default_queue_namespace: bool) -> Result<Self> {
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

        let bin = sluice_bin();
        if !bin.exists() {
            bail!(
                "{} not found: run `cargo build -p sluice-cli` or set SLUICE_BIN",
                bin.display()
            );
        }
        let child = Command::new(&bin)
            .args(["webhook", "--listen", &listen, "--namespace", "sluice-e2e-system"])
            .arg("--tls-cert")
            .arg(dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.join("tls.key"))
            .env("KUBECONFIG", kubeconfig_path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;

        let namespace = format!("sluice-e2e-wh-{run_id}");
        let mut labels = BTreeMap::from([(RUN_LABEL.to_owned(), run_id.clone())]);
        if default_queue_namespace {
            labels.insert("sluice.dev/default-queue".to_owned(), "enabled".to_owned());
        }
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": namespace, "labels": labels}
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;

        let configuration = format!("sluice-e2e-{run_id}");
        let opts = ManifestOptions {
            name: configuration.clone(),
            target: Target::Url(format!("https://{host}:{port}")),
            ca_bundle: Some(certs.ca_pem.into_bytes()),
            excluded_namespaces: vec!["kube-system".to_owned()],
            ..ManifestOptions::default()
        };
        // Scope the Job and Pod webhooks to this run's namespaces.
        let scope = |sel: &mut Option<LabelSelector>| {
            let s = sel.get_or_insert_with(LabelSelector::default);
            s.match_labels
                .get_or_insert_with(BTreeMap::new)
                .insert(RUN_LABEL.to_owned(), run_id.clone());
        };
        let mut m = mutating_configuration(&opts);
        for w in m.webhooks.iter_mut().flatten() {
            scope(&mut w.namespace_selector);
        }
        let mut v = validating_configuration(&opts);
        for w in v.webhooks.iter_mut().flatten() {
            if w.name.starts_with("jobs.") {
                scope(&mut w.namespace_selector);
            }
        }
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &m)
            .await?;
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &v)
            .await?;

        let h = Self {
            client,
            child: Some(child),
            run_id,
            namespace,
            configuration,
            dir,
        };
        h.wait_until_mutating().await?;
        Ok(h)
    }

    /// Polls a dry-run GPU Pod create until it comes back mutated (the
    /// webhook is up and the API server uses the new configuration).
    async fn wait_until_mutating(&self) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let probe = gpu_pod("probe", json!({"limits": {"nvidia.com/gpu": "1"}}), None);
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(p) = pods.create(&pp, &probe).await
                && p.spec.as_ref().and_then(|s| s.runtime_class_name.as_deref()) == Some("nvidia")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the webhook never mutated a dry-run GPU pod within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
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
        let dp = DeleteParams::default();
        let _ = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.configuration, &dp)
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.configuration, &dp)
            .await;
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &dp)
            .await;
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // Never leave the webhook process behind, even when a test panics.
        self.stop_webhook();
        if std::thread::panicking() {
            eprintln!(
                "webhook e2e run {} failed; namespace {} and configurations {} may need deleting",
                self.run_id, self.namespace, self.configuration
            );
        }
    }
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
async fn invalid_cluster_queue_is_denied_with_the_field_path() -> Result<()> {
    let h = Harness::start(false).await?;
    let gvk = GroupVersionKind::gvk("sluice.dev", "v1alpha1", "ClusterQueue");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterqueues");
    let api: Api<DynamicObject> = Api::all_with(h.client.clone(), &ar);
    // The same resource in two groups: a rule only validate() checks (no CEL).
    let name = format!("e2e-invalid-{}", h.run_id);
    let cq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
        "metadata": {"name": name},
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
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
#[ignore = "needs SLUICE_E2E_KUBECONFIG (a real API server)"]
async fn default_queue_namespace_labels_and_suspends_unlabelled_jobs() -> Result<()> {
    let h = Harness::start(true).await?;
    let gvk = GroupVersionKind::gvk("sluice.dev", "v1alpha1", "LocalQueue");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "localqueues");
    let lqs: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), &h.namespace, &ar);
    let lq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "default"}, "spec": {"clusterQueue": "gpus"}
    }))?;
    lqs.create(&PostParams::default(), &lq).await?;
    // The webhook's informer sees the LocalQueue shortly after.
    let deadline = Instant::now() + Duration::from_secs(30);
    let created = loop {
        let name = format!("auto-{}", suffix());
        let j = job(&name, json!({"app": "etl"}), json!({"limits": {"cpu": "100m"}}));
        let created = h.jobs().create(&PostParams::default(), &j).await?;
        if created
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("sluice.dev/queue"))
            .is_some()
            || Instant::now() > deadline
        {
            break created;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
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
