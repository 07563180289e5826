//! End-to-end, as a tenant who pushes: every GPU in a namespace that
//! queues every object is admitted or refused. The chart is installed on
//! the e2e node (a real kubelet, kube-scheduler binding pods); the tenant
//! is a ServiceAccount bound to the built-in `edit` role (with the chart's
//! aggregated roles), using a TokenRequest token. Its namespace is
//! labelled `sluice.dev/default-queue: enabled`, its LocalQueue `default`
//! on a ClusterQueue of 4 GPUs. All along, a sampler lists the
//! namespace's pods every 0.3 s and records the most GPUs bound at once.
//!
//! 1. With the queue full: a bare GPU Pod, a labelled one and a GPU
//!    ReplicaSet are refused; a Deployment, a StatefulSet and a
//!    LeaderWorkerSet are held at zero replicas; the owner's unsuspend of
//!    a waiting Job is refused. No GPU pod of theirs is bound.
//! 2. Quota frees: the Deployment, StatefulSet and LeaderWorkerSet are
//!    admitted in priority order, their pods bound with the flavor's
//!    node selector (the LeaderWorkerSet has no operator here: its
//!    replicas are given back).
//! 3. A higher-priority Job preempts a running Deployment: its pods are
//!    gone before the Job's pod is made.
//! 4. Scale past the admission: refused by the webhook. Then without the
//!    webhook (its configurations deleted, its pod stopped): the owner's
//!    unsuspend of a waiting Job and a `kubectl scale` of the admitted
//!    Deployment go through, and the API server's ResourceQuota (the GPU
//!    quota backstop) refuses their pods; the controller holds both again.
//!
//! ```text
//! cargo build -p sluice-cli
//! sudo KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test tenant_gpus -- --ignored --test-threads=1
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node as KubeNode, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Error as KubeError};
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};
use sluice_e2e::chart_install::{self, NAMESPACE};
use sluice_e2e::cluster::{install_crd_file, wait_for};
use sluice_e2e::node::{BUSYBOX_IMAGE, NODE_NAME};

const T: Duration = Duration::from_secs(120);
const GPU: &str = "nvidia.com/gpu";
/// The tenant's namespace.
const NS: &str = "sluice-e2e-tenant-gpus";
const QUOTA: i64 = 4;

fn node() -> Result<Option<&'static sluice_e2e::node::Node>> {
    match sluice_e2e::envtest::node() {
        Some(node) => Ok(Some(node?)),
        None => {
            eprintln!("skipped: KUBEBUILDER_ASSETS is not set or has no kubelet, so there is no e2e node");
            Ok(None)
        }
    }
}

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins, root, and helm (HELM, PATH or npm)"]
async fn every_gpu_in_a_queued_namespace_is_admitted_or_refused() -> Result<()> {
    let Some(node) = node()? else { return Ok(()) };
    let plane = sluice_e2e::envtest::shared().context("no control plane")??;
    let admin = chart_install::client(&plane.kubeconfig).await?;
    install_crd_file(
        &admin,
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        "leaderworkerset.x-k8s.io/v1",
        "leaderworkersets",
    )
    .await?;
    let chart = chart_install::install(node, &plane.kubeconfig, &[])?;
    let flavor = setup_queue(&admin).await?;
    let tenant = tenant_client(&admin, &plane.kubeconfig).await?;
    let sampler = Sampler::start(admin.clone());
    let result = async {
        full_queue_refuses_or_holds(&admin, &tenant).await?;
        admitted_in_priority_order(&admin, &tenant, &flavor).await?;
        preemption_stops_the_deployment_first(&admin, &tenant).await?;
        without_the_webhook(&admin, &tenant).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let most = sampler.stop();
    eprintln!("most GPUs bound at once in {NS}, sampled every 0.3 s: {most} (quota {QUOTA})");
    if result.is_err() {
        let _ = dump(&admin).await;
    }
    let _ = chart.uninstall();
    result?;
    ensure!(most <= QUOTA, "{most} GPUs were bound at once on a {QUOTA}-GPU queue");
    Ok(())
}

/// The node labelled as a GPU node of flavor `e2e-gpu`; the flavor, the
/// priority classes, the 4-GPU ClusterQueue, the namespace that queues
/// every object and its LocalQueue `default`. The flavor's name.
async fn setup_queue(admin: &Client) -> Result<String> {
    let flavor = "e2e-gpu".to_string();
    Api::<KubeNode>::all(admin.clone())
        .patch(
            NODE_NAME,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"nvidia.com/gpu.present": "true", "sluice.dev/e2e-gpu": flavor}}}),
            ),
        )
        .await?;
    let pp = PostParams::default();
    let rf: ResourceFlavor = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": flavor},
        "spec": {"nodeLabels": {"sluice.dev/e2e-gpu": flavor}}
    }))?;
    Api::<ResourceFlavor>::all(admin.clone()).create(&pp, &rf).await?;
    for (name, value) in [
        ("top", 1000),
        ("urgent", 500),
        ("high", 300),
        ("mid", 200),
        ("low", 100),
    ] {
        let pc: WorkloadPriorityClass = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value
        }))?;
        Api::<WorkloadPriorityClass>::all(admin.clone())
            .create(&pp, &pc)
            .await?;
    }
    let cq: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "tenant-gpus"},
        "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                {"name": flavor, "resources": [{"name": GPU, "nominalQuota": QUOTA.to_string()}]}]}]}
    }))?;
    Api::<ClusterQueue>::all(admin.clone()).create(&pp, &cq).await?;
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": NS, "labels": {"sluice.dev/default-queue": "enabled"}}
    }))?;
    Api::<Namespace>::all(admin.clone()).create(&pp, &ns).await?;
    let lq: LocalQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": NS}, "spec": {"clusterQueue": "tenant-gpus"}
    }))?;
    Api::<LocalQueue>::namespaced(admin.clone(), NS)
        .create(&pp, &lq)
        .await?;
    // The backstop is in place before any tenant object.
    wait_for("the GPU quota backstop", T, || async {
        let q = Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(admin.clone(), NS)
            .get_opt("sluice-admitted-gpus")
            .await?;
        Ok(q.and_then(|q| q.status?.hard).map(|_| ()))
    })
    .await?;
    Ok(flavor)
}

/// A client for ServiceAccount `tenant` of the namespace, bound to the
/// built-in `edit` role, with a TokenRequest token.
async fn tenant_client(admin: &Client, kubeconfig: &std::path::Path) -> Result<Client> {
    let pp = PostParams::default();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    sas.create(&pp, &serde_json::from_value(json!({"metadata": {"name": "tenant"}}))?)
        .await?;
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "tenant-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": NS}]
    }))?;
    Api::<RoleBinding>::namespaced(admin.clone(), NS)
        .create(&pp, &rb)
        .await?;
    let token: Value = sas
        .create_subresource(
            "token",
            "tenant",
            &pp,
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}),
        )
        .await?;
    let token = token["status"]["token"].as_str().context("no token")?.to_string();
    // What an operator's install gives editors of its kind (LeaderWorkerSet
    // has no operator here).
    let lws_editor: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "sluice-e2e-lws-editor", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets", "leaderworkersets/scale"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    }))?;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    if roles.get_opt("sluice-e2e-lws-editor").await?.is_none() {
        roles.create(&pp, &lws_editor).await?;
    }
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    cfg.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    cfg.default_namespace = NS.to_string();
    Ok(Client::try_from(cfg)?)
}

/// Lists the namespace's pods every 0.3 s and keeps the most GPUs bound
/// at once (pods on a node that have not finished, terminating ones
/// included: their GPUs are held until they are gone).
struct Sampler {
    most: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
}

impl Sampler {
    fn start(admin: Client) -> Self {
        let (most, stop) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicBool::new(false)));
        let (m, s) = (most.clone(), stop.clone());
        tokio::spawn(async move {
            let pods: Api<Pod> = Api::namespaced(admin, NS);
            while !s.load(Ordering::Relaxed) {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let bound: i64 = list.items.iter().filter(|p| holds_gpus(p)).map(gpus_of).sum();
                    if bound > m.fetch_max(bound, Ordering::Relaxed) {
                        eprintln!("sampler: {bound} GPUs bound");
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Self { most, stop }
    }

    fn stop(self) -> i64 {
        self.stop.store(true, Ordering::Relaxed);
        self.most.load(Ordering::Relaxed)
    }
}

fn holds_gpus(p: &Pod) -> bool {
    let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    bound && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn gpus_of(p: &Pod) -> i64 {
    p.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.resources.as_ref()?.limits.as_ref()?.get(GPU))
        .filter_map(|q| q.0.parse::<i64>().ok())
        .sum()
}

/// A busybox pod spec of one container asking for `gpus` GPUs.
fn pod_spec(gpus: i64) -> Value {
    json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sleep", "3600"], "resources": {"limits": {GPU: gpus.to_string()}}}]})
}

fn job(name: &str, priority: &str, gpus: i64) -> Result<Job> {
    let mut spec = pod_spec(gpus);
    spec["restartPolicy"] = json!("Never");
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"sluice.dev/priority-class": priority}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": spec}}
    }))?)
}

fn deployment(name: &str, priority: &str, replicas: i64) -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"sluice.dev/priority-class": priority}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(QUOTA)}}
    }))?)
}

/// The status code and message of a refused call.
fn refused(r: std::result::Result<impl std::fmt::Debug, KubeError>) -> Result<(u16, String)> {
    match r {
        Err(KubeError::Api(e)) => Ok((e.code, e.message)),
        other => bail!("expected a refusal, got {other:?}"),
    }
}

fn dynamic(client: &Client, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), NS, &ar)
}

/// A held serving object: zero replicas, its ask kept.
async fn wait_held(api: &Api<DynamicObject>, name: &str, asked: &str) -> Result<()> {
    wait_for(&format!("{name} held at zero replicas"), T, || async {
        let o = api.get(name).await?;
        let held = o.data["spec"]["replicas"] == json!(0)
            && o.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("sluice.dev/held-replicas"))
                .map(String::as_str)
                == Some(asked);
        Ok(held.then_some(()))
    })
    .await
}

/// Waits for Workload `name` to be admitted (`Admitted=True`).
async fn wait_admitted(admin: &Client, name: &str) -> Result<()> {
    let wls: Api<Workload> = Api::namespaced(admin.clone(), NS);
    wait_for(&format!("Workload {name} admitted"), T, || async {
        let w = wls.get_opt(name).await?;
        Ok(w.and_then(|w| {
            w.status?
                .condition("Admitted")
                .filter(|c| c.status == "True")
                .map(|_| ())
        }))
    })
    .await
}

/// The namespace's pods whose name starts with `prefix`.
async fn pods_of(admin: &Client, prefix: &str) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
        .collect())
}

/// Waits until a pod of `prefix` is bound and running; it.
async fn wait_running(admin: &Client, prefix: &str) -> Result<Pod> {
    wait_for(&format!("a running pod of {prefix}"), T, || async {
        Ok(pods_of(admin, prefix)
            .await?
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")))
    })
    .await
}

async fn full_queue_refuses_or_holds(admin: &Client, tenant: &Client) -> Result<()> {
    let pp = PostParams::default();
    // The admin's top-priority Job fills the 4 GPUs.
    Api::<Job>::namespaced(admin.clone(), NS)
        .create(&pp, &job("filler", "top", QUOTA)?)
        .await?;
    wait_admitted(admin, "job-filler").await?;
    wait_running(admin, "filler").await?;

    let pods: Api<Pod> = Api::namespaced(tenant.clone(), NS);
    let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "bare"}, "spec": pod_spec(QUOTA)}))?;
    let (code, msg) = refused(pods.create(&pp, &bare).await)?;
    eprintln!("bare GPU Pod: {code} {msg}");
    ensure!(code == 403 && msg.contains("run it as a Job"), "{code} {msg}");
    let labelled: Pod = serde_json::from_value(json!({
        "metadata": {"name": "labelled", "labels": {"sluice.dev/queue": "default"}}, "spec": pod_spec(QUOTA)}))?;
    let (code, msg) = refused(pods.create(&pp, &labelled).await)?;
    eprintln!("labelled GPU Pod: {code} {msg}");
    ensure!(
        code == 403 && msg.contains("it is labelled sluice.dev/queue=\"default\""),
        "{msg}"
    );
    let rs = dynamic(tenant, "apps/v1", "ReplicaSet", "replicasets");
    let rs_obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "bare-rs"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "bare-rs"}},
            "template": {"metadata": {"labels": {"app": "bare-rs"}}, "spec": pod_spec(QUOTA)}}}))?;
    let (code, msg) = refused(rs.create(&pp, &rs_obj).await)?;
    eprintln!("GPU ReplicaSet: {code} {msg}");
    ensure!(code == 403 && msg.contains("create a Deployment instead"), "{msg}");

    // Serving objects: accepted, held at zero replicas.
    Api::<Deployment>::namespaced(tenant.clone(), NS)
        .create(&pp, &deployment("llm", "high", 1)?)
        .await?;
    let sts = dynamic(tenant, "apps/v1", "StatefulSet", "statefulsets");
    sts.create(&pp, &serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "labels": {"sluice.dev/priority-class": "mid"}},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": pod_spec(QUOTA)}}}))?)
    .await?;
    let lws = dynamic(
        tenant,
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    lws.create(
        &pp,
        &serde_json::from_value(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "grp", "labels": {"sluice.dev/priority-class": "low"}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": pod_spec(QUOTA)}}}}))?,
    )
    .await?;
    wait_held(&dynamic(admin, "apps/v1", "Deployment", "deployments"), "llm", "1").await?;
    wait_held(&dynamic(admin, "apps/v1", "StatefulSet", "statefulsets"), "db", "1").await?;
    wait_held(
        &dynamic(
            admin,
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "leaderworkersets",
        ),
        "grp",
        "1",
    )
    .await?;

    // A waiting Job: its owner's unsuspend is refused.
    let jobs: Api<Job> = Api::namespaced(tenant.clone(), NS);
    jobs.create(&pp, &job("waiter", "low", QUOTA)?).await?;
    wait_for("waiter queued", T, || async {
        Ok((jobs.get("waiter").await?.spec.and_then(|s| s.suspend) == Some(true)).then_some(()))
    })
    .await?;
    let unsuspend = Patch::Merge(json!({"spec": {"suspend": false}}));
    let (code, msg) = refused(jobs.patch("waiter", &PatchParams::default(), &unsuspend).await)?;
    eprintln!("owner's unsuspend of a waiting Job: {code} {msg}");
    ensure!(
        code == 403 && msg.contains("only the Sluice controller unsuspends it"),
        "{msg}"
    );

    tokio::time::sleep(Duration::from_secs(5)).await;
    for prefix in ["llm", "db", "grp", "waiter", "bare", "labelled"] {
        let made = pods_of(admin, prefix).await?;
        ensure!(
            made.is_empty(),
            "pods of {prefix} exist while the queue is full: {:?}",
            made.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
        );
    }
    jobs.delete("waiter", &DeleteParams::background()).await?;
    Ok(())
}

async fn admitted_in_priority_order(admin: &Client, tenant: &Client, flavor: &str) -> Result<()> {
    Api::<Job>::namespaced(admin.clone(), NS)
        .delete("filler", &DeleteParams::background())
        .await?;
    // The Deployment (high) first, on the flavor's nodes.
    wait_admitted(admin, "deployment-llm").await?;
    let pod = wait_running(admin, "llm").await?;
    let selector = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    ensure!(
        selector.get("sluice.dev/e2e-gpu").map(String::as_str) == Some(flavor),
        "{selector:?}"
    );
    let wls: Api<Workload> = Api::namespaced(admin.clone(), NS);
    for waiting in ["statefulset-db", "leaderworkerset-grp"] {
        let w = wls.get(waiting).await?;
        ensure!(
            !w.status
                .and_then(|s| s.condition("Admitted").map(|c| c.status == "True"))
                .unwrap_or(false),
            "{waiting} admitted beside llm"
        );
    }
    Api::<Deployment>::namespaced(tenant.clone(), NS)
        .delete("llm", &DeleteParams::background())
        .await?;
    // Then the StatefulSet (mid).
    wait_admitted(admin, "statefulset-db").await?;
    wait_running(admin, "db").await?;
    dynamic(tenant, "apps/v1", "StatefulSet", "statefulsets")
        .delete("db", &DeleteParams::background())
        .await?;
    // Then the LeaderWorkerSet (low): its replicas given back.
    wait_admitted(admin, "leaderworkerset-grp").await?;
    let lws = dynamic(
        admin,
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    );
    wait_for("grp started", T, || async {
        let o = lws.get("grp").await?;
        Ok((o.data["spec"]["replicas"] == json!(1)).then_some(()))
    })
    .await?;
    lws.delete("grp", &DeleteParams::background()).await?;
    wait_for("the queue empty", T, || async {
        Ok(pods_of(admin, "").await?.iter().all(|p| !holds_gpus(p)).then_some(()))
    })
    .await
}

async fn preemption_stops_the_deployment_first(admin: &Client, tenant: &Client) -> Result<()> {
    let pp = PostParams::default();
    Api::<Deployment>::namespaced(tenant.clone(), NS)
        .create(&pp, &deployment("svc", "high", 1)?)
        .await?;
    wait_admitted(admin, "deployment-svc").await?;
    wait_running(admin, "svc").await?;
    Api::<Job>::namespaced(tenant.clone(), NS)
        .create(&pp, &job("urgent", "urgent", QUOTA)?)
        .await?;
    // When the Job's pod first exists, no pod of the Deployment is left.
    let started = Instant::now();
    let first = wait_for("the urgent Job's pod", T, || async {
        let urgent = pods_of(admin, "urgent").await?;
        if urgent.is_empty() {
            return Ok(None);
        }
        Ok(Some(pods_of(admin, "svc").await?.len()))
    })
    .await?;
    eprintln!(
        "urgent Job's pod made {:?} after it was created; svc pods left then: {first}",
        started.elapsed()
    );
    ensure!(
        first == 0,
        "the Job's pod was made while {first} pod(s) of the preempted Deployment remained"
    );
    let svc = dynamic(admin, "apps/v1", "Deployment", "deployments");
    wait_held(&svc, "svc", "1").await?;
    wait_running(admin, "urgent").await?;
    Api::<Job>::namespaced(tenant.clone(), NS)
        .delete("urgent", &DeleteParams::background())
        .await?;
    // svc comes back once the Job is gone.
    wait_running(admin, "svc").await.map(|_| ())
}

async fn without_the_webhook(admin: &Client, tenant: &Client) -> Result<()> {
    let pp = PostParams::default();
    let deployments: Api<Deployment> = Api::namespaced(tenant.clone(), NS);
    // svc runs (4 GPUs): the queue is full. A Job waits.
    let jobs: Api<Job> = Api::namespaced(tenant.clone(), NS);
    jobs.create(&pp, &job("later", "low", QUOTA)?).await?;
    wait_for("later queued", T, || async {
        Ok((jobs.get("later").await?.spec.and_then(|s| s.suspend) == Some(true)).then_some(()))
    })
    .await?;
    // With the webhook: scale past the admission is refused.
    let scale = Patch::Merge(json!({"spec": {"replicas": 2}}));
    let (code, msg) = refused(deployments.patch_scale("svc", &PatchParams::default(), &scale).await)?;
    eprintln!("kubectl scale svc --replicas=2: {code} {msg}");
    ensure!(code == 403 && msg.contains("cannot grow from 1 to 2"), "{msg}");

    // Without it: configurations deleted, its pods stopped.
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    Api::<Deployment>::namespaced(admin.clone(), NAMESPACE)
        .patch_scale("sluice-webhook", &PatchParams::default(), &scale_to(0))
        .await?;
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .delete("sluice", &DeleteParams::default())
        .await?;
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .delete("sluice", &DeleteParams::default())
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The owner unsuspends the waiting Job: the API server's quota refuses
    // its pods while svc holds the 4 GPUs, and the controller suspends it
    // again.
    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .context("the owner's unsuspend without the webhook")?;
    wait_for("later suspended again", T, || async {
        Ok((jobs.get("later").await?.spec.and_then(|s| s.suspend) == Some(true)).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let later = pods_of(admin, "later").await?;
    ensure!(
        later.iter().all(|p| !holds_gpus(p)),
        "a pod of the unadmitted Job was bound"
    );
    let wls: Api<Workload> = Api::namespaced(admin.clone(), NS);
    let admitted = |w: Workload| {
        w.status
            .and_then(|s| s.condition("Admitted").map(|c| c.status == "True"))
            == Some(true)
    };
    ensure!(
        !admitted(wls.get("job-later").await?),
        "later admitted while svc holds the quota"
    );
    // kubectl scale of the admitted Deployment: its second pod is refused
    // by the quota; the controller holds it again, asking for 2 (which
    // never fit the 4 GPUs), and the waiting Job gets the GPUs.
    deployments
        .patch_scale("svc", &PatchParams::default(), &scale)
        .await
        .context("kubectl scale without the webhook")?;
    wait_held(&dynamic(admin, "apps/v1", "Deployment", "deployments"), "svc", "2").await?;
    wait_admitted(admin, "job-later").await?;
    let refusals = quota_refusals(admin).await?;
    eprintln!("pods the API server's quota refused (FailedCreate events): {refusals}");
    ensure!(refusals > 0, "no pod was refused by the quota");
    Ok(())
}

/// What a failure needs to be understood: the namespace's Events, pods,
/// Workloads and quota, and the logs of the chart's pods.
async fn dump(admin: &Client) -> Result<()> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), NS);
    for e in events.list(&ListParams::default()).await?.items {
        eprintln!(
            "event {} {}: {} {}",
            e.involved_object.kind.unwrap_or_default(),
            e.involved_object.name.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.message.unwrap_or_default()
        );
    }
    let sluice_events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), NS);
    for e in sluice_events.list(&ListParams::default()).await?.items {
        let regarding = e.regarding.unwrap_or_default();
        eprintln!(
            "event {} {}: {} {}",
            regarding.kind.unwrap_or_default(),
            regarding.name.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
    }
    for p in Api::<Pod>::namespaced(admin.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items
    {
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        eprintln!(
            "pod {:?}: {phase:?} node {:?}",
            p.metadata.name,
            p.spec.and_then(|s| s.node_name)
        );
    }
    for w in Api::<Workload>::namespaced(admin.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items
    {
        let conds: Vec<String> = w
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .map(|c| format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message))
            .collect();
        eprintln!("workload {:?}: {conds:?}", w.metadata.name);
    }
    let quota = Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(admin.clone(), NS)
        .get_opt("sluice-admitted-gpus")
        .await?;
    eprintln!("quota: {:?}", quota.map(|q| (q.spec, q.status)));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    for p in pods.list(&ListParams::default()).await?.items {
        let name = p.metadata.name.unwrap_or_default();
        if let Ok(log) = pods.logs(&name, &Default::default()).await {
            eprintln!("--- log of {name} (last lines, newest first)");
            for l in log.lines().rev().take(60) {
                eprintln!("{l}");
            }
        }
    }
    Ok(())
}

fn scale_to(n: i64) -> Patch<Value> {
    Patch::Merge(json!({"spec": {"replicas": n}}))
}

/// Events in the namespace saying a pod was refused by a quota.
async fn quota_refusals(admin: &Client) -> Result<usize> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), NS);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|e| e.message.as_deref().is_some_and(|m| m.contains("exceeded quota")))
        .inspect(|e| {
            eprintln!(
                "  {}: {}",
                e.involved_object.name.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .count())
}
