//! Harness for end-to-end tests of `sluice controller` against a real API
//! server: `SLUICE_E2E_KUBECONFIG`, or one started from `KUBEBUILDER_ASSETS`
//! ([`crate::envtest`]).
//!
//! - [`Cluster::start`] installs the CRDs (server-side apply of
//!   `sluice_api::crd::all()`, the same as `crds/`), creates a fresh
//!   namespace, and gives every cluster-scoped object of the test a unique
//!   suffix; [`Cluster::cleanup`] (also run on drop, best effort) deletes
//!   them and stops the controllers it started.
//! - [`Cluster::start_controller`] runs the `sluice` binary next to the
//!   test executable (or `SLUICE_BIN`) as `sluice controller` with that
//!   kubeconfig, its own metrics port, and a Lease in the test namespace,
//!   and waits for `/readyz`.
//! - A bare API server may have no kubelet: [`Cluster::mark_pods`] writes pod
//!   statuses the way a kubelet does (strategic-merge PATCH of
//!   `pods/NAME/status`, as recorded in `tests/fixtures/`), and
//!   [`Cluster::reap_terminating_pods`] force-deletes pods stuck
//!   Terminating after a Job is suspended. The job controller
//!   (kube-controller-manager) must run: it creates the pods and sets the
//!   Job's status.
//! - Test bodies return errors ([`anyhow::ensure!`], [`ensure_eq!`])
//!   rather than panic; if one panics anyway, dropping the [`Cluster`]
//!   deletes what it created (a blocking cleanup on its own runtime).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};

use crate::controller::http_get;
pub use crate::controller::{Controller, metric_value};

/// `assert_eq!` that returns an error instead of panicking, so that the
/// test's cleanup runs.
#[macro_export]
macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {{
        let (l, r) = (&$left, &$right);
        anyhow::ensure!(*l == *r, "{} == {}: {:?} != {:?}", stringify!($left), stringify!($right), l, r);
    }};
    ($left:expr, $right:expr, $($msg:tt)+) => {{
        let (l, r) = (&$left, &$right);
        anyhow::ensure!(*l == *r, "{:?} != {:?}: {}", l, r, format!($($msg)+));
    }};
}

/// GPU resource name used by the tests.
pub const GPU: &str = "nvidia.com/gpu";

/// The environment variable naming the kubeconfig of a given cluster.
pub const KUBECONFIG_ENV: &str = "SLUICE_E2E_KUBECONFIG";

/// The cluster's kubeconfig: `SLUICE_E2E_KUBECONFIG`, else that of a
/// control plane this process starts from `KUBEBUILDER_ASSETS`
/// ([`crate::envtest`]).
pub fn kubeconfig_path() -> PathBuf {
    if let Some(path) = std::env::var_os(KUBECONFIG_ENV) {
        return PathBuf::from(path);
    }
    match crate::envtest::shared() {
        Some(Ok(plane)) => plane.kubeconfig.clone(),
        Some(Err(e)) => panic!("{e:#}"),
        None => panic!(
            "the end-to-end tests need a cluster: set SLUICE_E2E_KUBECONFIG to a kubeconfig, or KUBEBUILDER_ASSETS to a folder with etcd and kube-apiserver (and kube-controller-manager)"
        ),
    }
}

pub async fn client() -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig_path())?;
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// The `sluice` binary: `SLUICE_BIN`, else `target/<profile>/sluice`.
pub fn sluice_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("sluice"))
        .expect("target directory")
}

fn suffix() -> String {
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}", n & 0xff_ffff_ffff)
}

/// Polls `f` every 250 ms until it returns `Some`, or fails after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_err = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if Instant::now() > deadline {
            bail!(
                "timed out after {}s waiting for {what}{}",
                timeout.as_secs(),
                last_err.map(|e| format!(" (last error: {e:#})")).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How a test starts `sluice controller` ([`Cluster::spawn_controller`]).
pub struct Replica<'a> {
    /// Flags after the harness's own.
    pub extra: &'a [&'a str],
    /// The Lease, in the test namespace.
    pub lease_name: &'a str,
    pub lease_duration_seconds: u64,
    /// Its name (Lease holder); default `e2e-<suffix>-<n>`.
    pub identity: Option<String>,
    /// A JSON log into this file, instead of plain text to the test's stderr.
    pub log: Option<PathBuf>,
}

impl Default for Replica<'_> {
    fn default() -> Self {
        Self {
            extra: &[],
            lease_name: "sluice-controller",
            lease_duration_seconds: 6,
            identity: None,
            log: None,
        }
    }
}

/// One test's namespace, cluster-scoped objects and controllers.
pub struct Cluster {
    pub client: Client,
    pub namespace: String,
    /// Appended to the names of cluster-scoped objects.
    pub suffix: String,
    pub controllers: Vec<Controller>,
    pub(crate) cluster_objects: Vec<(&'static str, String)>,
    cleaned: bool,
}

impl Cluster {
    pub async fn start() -> Result<Self> {
        let client = client().await?;
        install_crds(&client).await?;
        let suffix = suffix();
        let namespace = format!("sluice-e2e-ctl-{suffix}");
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        Ok(Self {
            client,
            namespace,
            suffix,
            controllers: Vec::new(),
            cluster_objects: Vec::new(),
            cleaned: false,
        })
    }

    /// A cluster-scoped name unique to this test.
    pub fn name(&self, base: &str) -> String {
        format!("{base}-{}", self.suffix)
    }

    /// A cluster-scoped Sluice object (by plural: `clusterqueues`,
    /// `cohorts`, `resourceflavors`) the test made itself: deleted at
    /// cleanup.
    pub fn track(&mut self, plural: &str, name: String) {
        let plural: &'static str = match plural {
            "clusterqueues" => "clusterqueues",
            "cohorts" => "cohorts",
            "resourceflavors" => "resourceflavors",
            "workloadpriorityclasses" => "workloadpriorityclasses",
            _ => return,
        };
        self.cluster_objects.push((plural, name));
    }

    /// Starts `sluice controller` with leader election on a Lease in the
    /// test namespace; waits until `/readyz` answers 200 (only when
    /// `wait_ready`, since a follower is ready too). Without a
    /// `--placement` in `extra` it runs with `--placement=quota-only`: the
    /// test control plane has no kubelets, so no Nodes unless a test
    /// makes them.
    pub async fn start_controller(&mut self, extra: &[&str]) -> Result<usize> {
        let i = self.spawn_controller(Replica {
            extra,
            ..Replica::default()
        })?;
        self.wait_ready(i).await?;
        Ok(i)
    }

    /// Starts `sluice controller` as `r` says, without waiting for it.
    pub fn spawn_controller(&mut self, r: Replica<'_>) -> Result<usize> {
        let bin = sluice_bin();
        if !bin.exists() {
            bail!(
                "{} not found: run `cargo build -p sluice-cli` or set SLUICE_BIN",
                bin.display()
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let identity = r
            .identity
            .unwrap_or_else(|| format!("e2e-{}-{}", self.suffix, self.controllers.len()));
        let (format, stderr) = match &r.log {
            Some(path) => {
                let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
                ("json", Stdio::from(file))
            }
            None => ("plain", Stdio::inherit()),
        };
        let child = Command::new(&bin)
            .arg("controller")
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(["--lease-namespace", &self.namespace])
            .args(["--lease-name", r.lease_name])
            .args(["--lease-duration-seconds", &r.lease_duration_seconds.to_string()])
            .args(["--identity", &identity])
            .args(["--log-format", format])
            .args((!r.extra.iter().any(|a| a.starts_with("--placement"))).then_some("--placement=quota-only"))
            .args(r.extra)
            .env("KUBECONFIG", kubeconfig_path())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        self.controllers.push(Controller {
            child,
            identity,
            metrics_port: port,
            log: r.log,
        });
        Ok(self.controllers.len() - 1)
    }

    /// Waits until controller `i` answers `/readyz` with 200.
    pub async fn wait_ready(&self, i: usize) -> Result<()> {
        let port = self.controllers[i].metrics_port;
        wait_for("controller /readyz", Duration::from_secs(60), || {
            let r = http_get(port, "/readyz");
            async move { Ok(r.ok().filter(|(c, _)| *c == 200).map(|_| ())) }
        })
        .await
    }

    /// The identity holding the controller Lease, if any.
    pub async fn lease_holder(&self) -> Result<Option<String>> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        Ok(leases
            .get_opt("sluice-controller")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity))
    }

    // ----- objects ---------------------------------------------------------------

    /// A GPU flavor (`gpu: <name>` node label, tolerating the GPU taint).
    pub async fn flavor(&mut self, base: &str) -> Result<String> {
        let name = self.name(base);
        let rf: ResourceFlavor = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"sluice.dev/e2e-gpu": name},
                     "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]}
        }))?;
        Api::<ResourceFlavor>::all(self.client.clone())
            .create(&PostParams::default(), &rf)
            .await?;
        self.cluster_objects.push(("resourceflavors", name.clone()));
        Ok(name)
    }

    /// A ClusterQueue from a JSON spec (its name gets the suffix). It
    /// serves every namespace (`namespaceSelector: {}`) unless the spec
    /// has a `namespaceSelector`; `null` leaves it unset (no namespace).
    pub async fn cluster_queue(&mut self, base: &str, mut spec: Value) -> Result<String> {
        let name = self.name(base);
        if let Some(s) = spec.as_object_mut() {
            s.entry("namespaceSelector").or_insert_with(|| json!({}));
        }
        let cq: ClusterQueue = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec
        }))?;
        Api::<ClusterQueue>::all(self.client.clone())
            .create(&PostParams::default(), &cq)
            .await?;
        self.cluster_objects.push(("clusterqueues", name.clone()));
        Ok(name)
    }

    /// A Cohort from a JSON spec (its name gets the suffix; a
    /// `spec.parent` is written as given).
    pub async fn cohort(&mut self, base: &str, spec: Value) -> Result<String> {
        let name = self.name(base);
        let c: Cohort = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": name}, "spec": spec
        }))?;
        Api::<Cohort>::all(self.client.clone())
            .create(&PostParams::default(), &c)
            .await?;
        self.cluster_objects.push(("cohorts", name.clone()));
        Ok(name)
    }

    /// A ClusterQueue with `gpus` of one flavor, optional cohort and borrowing limit.
    pub async fn gpu_queue(
        &mut self,
        base: &str,
        flavor: &str,
        gpus: u32,
        cohort: Option<&str>,
        preemption: Value,
    ) -> Result<String> {
        let mut spec = json!({
            "preemption": preemption,
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                {"name": flavor, "resources": [{"name": GPU, "nominalQuota": gpus.to_string()}]}]}]
        });
        if let Some(c) = cohort {
            spec["cohort"] = json!(self.name(c));
        }
        self.cluster_queue(base, spec).await
    }

    pub async fn local_queue(&self, name: &str, cluster_queue: &str) -> Result<()> {
        let lq: LocalQueue = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": self.namespace}, "spec": {"clusterQueue": cluster_queue}
        }))?;
        Api::<LocalQueue>::namespaced(self.client.clone(), &self.namespace)
            .create(&PostParams::default(), &lq)
            .await?;
        Ok(())
    }

    pub async fn priority_class(&mut self, base: &str, value: i32) -> Result<String> {
        let name = self.name(base);
        let wpc: WorkloadPriorityClass = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value
        }))?;
        Api::<WorkloadPriorityClass>::all(self.client.clone())
            .create(&PostParams::default(), &wpc)
            .await?;
        self.cluster_objects.push(("workloadpriorityclasses", name.clone()));
        Ok(name)
    }

    /// A Job of `pods` pods with `gpus` GPUs each (limits), queued in
    /// `queue`, created suspended (what the webhook would do) unless
    /// `suspended` is false.
    /// A WorkloadPriorityClass `urgent` (value 1000) and a suspended Job
    /// named `urgent` in LocalQueue `team` at that priority: what the
    /// preemption tests send to take the GPUs of what runs.
    pub async fn urgent_job(&mut self, pods: i32, gpus: u32) -> Result<Job> {
        let urgent = self.priority_class("urgent", 1000).await?;
        self.job(
            "urgent",
            "team",
            pods,
            gpus,
            &[(sluice_api::labels::PRIORITY_CLASS, &urgent)],
            true,
        )
        .await
    }

    pub async fn job(
        &self,
        name: &str,
        queue: &str,
        pods: i32,
        gpus: u32,
        labels: &[(&str, &str)],
        suspended: bool,
    ) -> Result<Job> {
        let mut l: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        l.insert(sluice_api::labels::QUEUE.into(), queue.into());
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": l},
            "spec": {"parallelism": pods, "completions": pods, "suspend": suspended, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"limits": {GPU: gpus.to_string()}}}]}}}
        }))?;
        Ok(self.jobs().create(&PostParams::default(), &job).await?)
    }

    pub fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn workloads(&self) -> Api<Workload> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Workload of Job `job`, once it exists.
    pub async fn workload_of(&self, job: &str) -> Result<Workload> {
        let api = self.workloads();
        let name = format!("job-{job}");
        wait_for(&format!("Workload {name}"), Duration::from_secs(30), || {
            let api = api.clone();
            let name = name.clone();
            async move { Ok(api.get_opt(&name).await?) }
        })
        .await
    }

    /// Waits until Workload `job-<job>` has condition `type_` with `status`.
    pub async fn wait_condition(&self, job: &str, type_: &str, status: &str, timeout: Duration) -> Result<Workload> {
        self.wait_workload_condition(&format!("job-{job}"), type_, status, timeout)
            .await
    }

    /// Waits until Workload `name` has condition `type_` with `status`.
    pub async fn wait_workload_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        timeout: Duration,
    ) -> Result<Workload> {
        let api = self.workloads();
        let name = name.to_string();
        wait_for(&format!("{name} {type_}={status}"), timeout, || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let wl = api.get_opt(&name).await?;
                Ok(wl.filter(|w| {
                    w.status
                        .as_ref()
                        .and_then(|s| s.condition(type_))
                        .is_some_and(|c| c.status == status)
                }))
            }
        })
        .await
    }

    /// Waits until Workload `name` has condition `type_` True; its reason.
    pub async fn wait_reason(&self, name: &str, type_: &str, timeout: Duration) -> Result<String> {
        let wl = self.wait_workload_condition(name, type_, "True", timeout).await?;
        wl.status
            .as_ref()
            .and_then(|s| s.condition(type_))
            .map(|c| c.reason.clone())
            .with_context(|| format!("{name}: no {type_} condition"))
    }

    /// Whether Workload `job-<job>` holds `type_=True` now.
    pub async fn has_condition(&self, job: &str, type_: &str) -> Result<bool> {
        let wl = self.workloads().get(&format!("job-{job}")).await?;
        Ok(wl
            .status
            .as_ref()
            .and_then(|s| s.condition(type_))
            .is_some_and(|c| c.status == "True"))
    }

    /// How many events.k8s.io Events with `reason` regard the object
    /// `kind`/`name` of the test namespace.
    pub async fn events_about(&self, kind: &str, name: &str, reason: &str) -> Result<usize> {
        self.events_about_in(&self.namespace, kind, name, reason).await
    }

    /// [`Cluster::events_about`] in namespace `ns` (Events about
    /// cluster-scoped objects go to `default`).
    pub async fn events_about_in(&self, ns: &str, kind: &str, name: &str, reason: &str) -> Result<usize> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let list = api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding
                        .as_ref()
                        .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
            })
            .count())
    }

    pub async fn job_suspended(&self, job: &str) -> Result<bool> {
        let j = self.jobs().get(job).await?;
        Ok(j.spec.and_then(|s| s.suspend).unwrap_or(false))
    }

    /// Waits for the Job to be (un)suspended.
    pub async fn wait_suspended(&self, job: &str, suspended: bool, timeout: Duration) -> Result<Job> {
        let api = self.jobs();
        wait_for(&format!("Job {job} suspend={suspended}"), timeout, || {
            let api = api.clone();
            async move {
                let j = api.get(job).await?;
                Ok((j.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false) == suspended).then_some(j))
            }
        })
        .await
    }

    /// Pods of a Job (label `job-name`), not being deleted.
    pub async fn job_pods(&self, job: &str) -> Result<Vec<Pod>> {
        let list = self
            .pods()
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// Acts as the kubelet for the Job's pods: waits until `count` pods
    /// exist, then sets them Running and Ready (`phase` "Running") or
    /// Succeeded (`phase` "Succeeded").
    pub async fn mark_pods(&self, job: &str, count: usize, phase: &str) -> Result<()> {
        let pods = wait_for(&format!("{count} pods of {job}"), Duration::from_secs(60), || async {
            let p = self.job_pods(job).await?;
            Ok((p.len() >= count).then_some(p))
        })
        .await?;
        let now = jiff_now();
        for p in pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            self.pods()
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Strategic(kubelet_status(phase, &now)),
                )
                .await
                .with_context(|| format!("marking pod {name} {phase}"))?;
        }
        Ok(())
    }

    /// Force-deletes the Job's pods that are Terminating (no kubelet
    /// finishes them on a bare API server).
    pub async fn reap_terminating_pods(&self, job: &str) -> Result<()> {
        let list = self
            .pods()
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await?;
        for p in list.items {
            if p.metadata.deletion_timestamp.is_some()
                && let Some(name) = p.metadata.name
            {
                // Finalizers (job tracking) are removed by the job controller;
                // grace 0 removes the pod once they are gone.
                let _ = self
                    .pods()
                    .delete(&name, &DeleteParams::default().grace_period(0))
                    .await;
            }
        }
        Ok(())
    }

    /// Deletes everything this test created; stops its controllers.
    pub async fn cleanup(&mut self) -> Result<()> {
        self.cleaned = true;
        for c in &mut self.controllers {
            c.kill();
        }
        delete_all(&self.client, &self.namespace, std::mem::take(&mut self.cluster_objects)).await;
        Ok(())
    }
}

/// Best-effort deletion of a test's namespace and cluster-scoped objects.
async fn delete_all(client: &Client, namespace: &str, objects: Vec<(&'static str, String)>) {
    let bg = DeleteParams::background();
    let _ = Api::<Namespace>::all(client.clone()).delete(namespace, &bg).await;
    for (plural, name) in objects {
        let res = match plural {
            "resourceflavors" => Api::<ResourceFlavor>::all(client.clone())
                .delete(&name, &bg)
                .await
                .map(drop),
            "clusterqueues" => Api::<ClusterQueue>::all(client.clone())
                .delete(&name, &bg)
                .await
                .map(drop),
            "cohorts" => Api::<Cohort>::all(client.clone()).delete(&name, &bg).await.map(drop),
            "nodes" => Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
                .delete(&name, &bg)
                .await
                .map(drop),
            _ => Api::<WorkloadPriorityClass>::all(client.clone())
                .delete(&name, &bg)
                .await
                .map(drop),
        };
        let _ = res;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Stop child processes even when a test fails.
        for c in &mut self.controllers {
            c.kill();
        }
        if self.cleaned {
            return;
        }
        // A test that panicked (or returned before `cleanup`): delete its
        // objects anyway, on a runtime of our own (drop cannot await, and
        // the test's runtime may be the one unwinding).
        let namespace = self.namespace.clone();
        let objects = std::mem::take(&mut self.cluster_objects);
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let client = client().await?;
                tokio::time::timeout(Duration::from_secs(30), delete_all(&client, &namespace, objects)).await?;
                anyhow::Ok(())
            })
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!(
                "e2e: namespace {} and objects suffixed -{} may be left behind",
                self.namespace, self.suffix
            );
        }
    }
}

/// The status a kubelet writes for a pod of one container `main` that is
/// Running and Ready (`phase` "Running") or finished (`phase` "Succeeded"),
/// as of `now` (RFC 3339).
pub fn kubelet_status(phase: &str, now: &str) -> Value {
    match phase {
        "Succeeded" => json!({"status": {"phase": "Succeeded",
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}],
            "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}]}}),
        _ => json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": now}}}]}}),
    }
}

/// Now, to the second, as the API server writes times (RFC 3339).
pub fn jiff_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Applies the Sluice CRDs (server-side) and waits until they are Established.
pub async fn install_crds(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in sluice_api::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::apply("sluice-e2e").force(), &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
        wait_for(&format!("CRD {name} Established"), Duration::from_secs(30), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await?;
                let ok = c
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                Ok(ok.then_some(()))
            }
        })
        .await?;
    }
    Ok(())
}

/// Applies (server-side) the CRD in `tests/crds/<file>` — a stand-in for
/// another project's kind — and waits until the API server serves
/// `plural` in `api_version`.
pub async fn install_crd_file(client: &Client, file: &str, api_version: &str, plural: &str) -> Result<()> {
    let path = format!("{}/crds/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).with_context(|| format!("parsing {path}"))?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(&name, &PatchParams::apply("sluice-e2e").force(), &Patch::Apply(&crd))
        .await
        .with_context(|| format!("applying CRD {name}"))?;
    wait_for(
        &format!("{api_version} {plural} served"),
        Duration::from_secs(30),
        || async {
            let served = client
                .list_api_group_resources(api_version)
                .await
                .is_ok_and(|l| l.resources.iter().any(|r| r.name == plural));
            Ok(served.then_some(()))
        },
    )
    .await
}
