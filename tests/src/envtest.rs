//! A control plane of its own for the end-to-end tests, started from the
//! binaries in `KUBEBUILDER_ASSETS`, as controller-runtime's envtest does.
//!
//! The folder must hold `etcd` and `kube-apiserver`; `kube-controller-manager`
//! and `kube-scheduler` are started when present (the Job tests need the
//! job controller, and the placement tests a scheduler). Everything listens
//! on 127.0.0.1 only, on free ports, with its data and certificates in a
//! temporary folder:
//!
//! - a CA made here signs the API server's serving certificate (for
//!   `127.0.0.1` and `localhost`) and an admin client certificate
//!   (`O=system:masters`); the kubeconfig written beside them uses both;
//! - a service-account signing key is made here too;
//! - servers before 1.29 (where Job `status.ready` is not GA) get
//!   `--feature-gates=JobReadyPods=true` on the API server and the
//!   controller-manager, so the controller sees ready pods; later servers
//!   have it on (and from 1.31 refuse the gate's name), so it is not set.
//!
//! The control plane is started once per test process, on first use, and
//! torn down when the process exits: a watchdog shell (`sh`) started with
//! it stops the servers and deletes the folder once the test process is
//! gone, however it ends.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// The environment variable naming the folder of control-plane binaries.
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// A control plane started by this process.
#[derive(Debug)]
pub struct ControlPlane {
    /// Admin kubeconfig for the API server.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The API server's minor version (24 for v1.24.x).
    pub minor: u32,
    /// Which optional components run.
    pub controller_manager: bool,
    pub scheduler: bool,
    /// Where logs, data and certificates are (deleted at exit).
    pub dir: PathBuf,
    /// The API server's address: `127.0.0.1`, or the e2e node's bridge
    /// address ([`crate::node::NODE_IP`]) when started by
    /// [`shared_on_bridge`] (then pods reach it too).
    pub address: String,
    /// etcd and the API server, which a test may kill and start again
    /// ([`ControlPlane::kill`]).
    pub(crate) servers: Mutex<Vec<Server>>,
    /// Every process started, for the watchdog.
    pub(crate) pids: Mutex<Vec<u32>>,
}

/// A server of the control plane a test may stop and start again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Etcd,
    ApiServer,
}

/// How a server was started, to start it again the same way (etcd on
/// the same data).
#[derive(Debug)]
pub(crate) struct Server {
    component: Component,
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    /// `HOST:PORT` it serves on.
    addr: String,
    pid: u32,
}

static PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The control plane of this test process for a node suite: when not
/// started yet, started with the API server on the e2e node's bridge
/// address (which must exist), reachable from pods through the
/// `kubernetes` Service, with service-account tokens for pods (the
/// `ServiceAccount` admission plugin) and webhooks called at their
/// endpoints' addresses (`--enable-aggregator-routing`). When this
/// process already started it on loopback, that one (check
/// [`ControlPlane::address`]).
pub fn shared_on_bridge() -> Option<Result<&'static ControlPlane>> {
    let assets = std::env::var_os(ASSETS_ENV)?;
    let started = PLANE.get_or_init(|| {
        let assets = PathBuf::from(assets);
        std::thread::spawn(move || ControlPlane::start_at(&assets, crate::node::NODE_IP).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("starting the control plane panicked".to_string()))
    });
    Some(started.as_ref().map_err(|e| anyhow::anyhow!("{ASSETS_ENV}: {e}")))
}

/// The control plane of this test process, started on first call from
/// `KUBEBUILDER_ASSETS` (`None` when the variable is not set).
pub fn shared() -> Option<Result<&'static ControlPlane>> {
    let assets = std::env::var_os(ASSETS_ENV)?;
    let started = PLANE.get_or_init(|| {
        let assets = PathBuf::from(assets);
        // Started from its own thread: the caller may be inside a runtime.
        std::thread::spawn(move || ControlPlane::start(&assets).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("starting the control plane panicked".to_string()))
    });
    Some(started.as_ref().map_err(|e| anyhow::anyhow!("{ASSETS_ENV}: {e}")))
}

/// Why a test of the harness's own control plane does not run, given
/// `SLUICE_E2E_KUBECONFIG` (`given`): when it names a cluster the suite
/// runs against that one, and the harness starts no control plane to test
/// (the tests' client would not even talk to it). `None`: the test runs
/// (and needs `KUBEBUILDER_ASSETS`).
pub fn own_plane_skipped(given: Option<&std::ffi::OsStr>) -> Option<String> {
    let path = given?;
    Some(format!(
        "skipped: {} is set ({}): the suite runs against that cluster, not a control plane the harness starts from {ASSETS_ENV}",
        crate::cluster::KUBECONFIG_ENV,
        Path::new(path).display()
    ))
}

/// [`own_plane_skipped`] for this process's environment.
pub fn own_plane_skipped_here() -> Option<String> {
    own_plane_skipped(std::env::var_os(crate::cluster::KUBECONFIG_ENV).as_deref())
}

/// The e2e node of this test process ([`crate::node::shared`]): `None`
/// when `KUBEBUILDER_ASSETS` has no `kubelet`. Suites that do not call it
/// do not start it.
pub fn node() -> Option<Result<&'static crate::node::Node>> {
    crate::node::shared()
}

/// Flags every component shares: feature gates for the server's version.
pub fn feature_gates(minor: u32) -> Option<&'static str> {
    (minor < 29).then_some("--feature-gates=JobReadyPods=true")
}

/// The minor version from `kube-apiserver --version` ("Kubernetes v1.24.17").
pub fn parse_minor(version: &str) -> Option<u32> {
    let v = version.split_whitespace().find_map(|w| w.strip_prefix('v'))?;
    let mut parts = v.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    if major != "1" {
        return None;
    }
    let digits = minor.find(|c: char| !c.is_ascii_digit()).unwrap_or(minor.len());
    minor[..digits].parse().ok()
}

/// The API server's arguments (serving on loopback).
pub fn apiserver_args(minor: u32, dir: &Path, etcd_url: &str, port: u16) -> Vec<String> {
    apiserver_args_at(minor, dir, etcd_url, "127.0.0.1", port)
}

/// The API server's arguments, serving on `address` only: loopback, or
/// the e2e node's bridge address (then pods get service-account tokens,
/// and webhooks are called at their endpoints' addresses, on the bridge).
pub fn apiserver_args_at(minor: u32, dir: &Path, etcd_url: &str, address: &str, port: u16) -> Vec<String> {
    let p = |name: &str| dir.join(name).display().to_string();
    let on_bridge = address != "127.0.0.1";
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--bind-address={address}"),
        format!("--advertise-address={address}"),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", p("apiserver-certs")),
        format!("--tls-cert-file={}", p("serving.crt")),
        format!("--tls-private-key-file={}", p("serving.key")),
        format!("--client-ca-file={}", p("ca.crt")),
        // How it authenticates to a kubelet (logs, exec) of the e2e node.
        format!("--kubelet-client-certificate={}", p("admin.crt")),
        format!("--kubelet-client-key={}", p("admin.key")),
        // The node's address on its bridge, never a name to look up.
        "--kubelet-preferred-address-types=InternalIP".to_string(),
        format!("--service-account-key-file={}", p("sa.pub")),
        format!("--service-account-signing-key-file={}", p("sa.key")),
        "--service-account-issuer=https://127.0.0.1".to_string(),
        "--service-cluster-ip-range=10.0.0.0/24".to_string(),
        "--authorization-mode=RBAC".to_string(),
        "--allow-privileged=true".to_string(),
        // The scale benchmarks write fast; envtest raises these as well.
        "--max-requests-inflight=1000".to_string(),
        "--max-mutating-requests-inflight=1000".to_string(),
    ];
    if on_bridge {
        // Pods of the node (the chart's) use tokens; the webhook's Service
        // IP is not routed from the host, its endpoints on the bridge are.
        args.push("--enable-aggregator-routing=true".to_string());
    } else {
        // No kubelet and no token controller to wait for: pods need no
        // service-account token here (envtest does the same).
        args.push("--disable-admission-plugins=ServiceAccount".to_string());
    }
    args.extend(feature_gates(minor).map(str::to_string));
    args
}

/// The controller-manager's arguments (job, garbage-collector and the other
/// default controllers; no serving port, no leader election). Each
/// controller acts as its own service account (`system:serviceaccount:
/// kube-system:job-controller`, …), as kubeadm and managed clusters run
/// them: who makes a pod is what the webhook reads.
pub fn controller_manager_args(minor: u32, dir: &Path) -> Vec<String> {
    let p = |name: &str| dir.join(name).display().to_string();
    let mut args = vec![
        format!("--kubeconfig={}", p("kubeconfig")),
        "--bind-address=127.0.0.1".to_string(),
        "--secure-port=0".to_string(),
        "--leader-elect=false".to_string(),
        "--controllers=*".to_string(),
        "--use-service-account-credentials=true".to_string(),
        format!("--service-account-private-key-file={}", p("sa.key")),
        format!("--root-ca-file={}", p("ca.crt")),
    ];
    args.extend(feature_gates(minor).map(str::to_string));
    args
}

/// The scheduler's arguments.
pub fn scheduler_args(dir: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", dir.join("kubeconfig").display()),
        "--bind-address=127.0.0.1".to_string(),
        "--secure-port=0".to_string(),
        "--leader-elect=false".to_string(),
    ]
}

impl ControlPlane {
    /// Starts etcd and the API server (and the optional components found
    /// in `assets`), and waits until the API server is ready.
    pub fn start(assets: &Path) -> Result<Self> {
        Self::start_at(assets, "127.0.0.1")
    }

    /// [`ControlPlane::start`] with the API server serving on `address`
    /// (loopback, or the e2e node's bridge address, which must exist).
    pub fn start_at(assets: &Path, address: &str) -> Result<Self> {
        let bin = |name: &str| assets.join(name);
        for required in ["etcd", "kube-apiserver"] {
            if !bin(required).is_file() {
                bail!("{} has no {required}", assets.display());
            }
        }
        let version = Command::new(bin("kube-apiserver"))
            .arg("--version")
            .output()
            .context("running kube-apiserver --version")?;
        let version = String::from_utf8_lossy(&version.stdout).to_string();
        let minor = parse_minor(&version).with_context(|| format!("unexpected kube-apiserver version {version:?}"))?;

        let dir = std::env::temp_dir().join(format!("sluice-envtest-{}", std::process::id()));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let [etcd_port, peer_port, api_port] = free_ports::<3>()?;
        let server = format!("https://{address}:{api_port}");
        write_pki(&dir, &server)?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args = vec![
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
        ];
        let etcd_pid = spawn(&bin("etcd"), &etcd_args, &dir.join("etcd.log"))?;
        let mut pids = vec![etcd_pid];
        // The watchdog is up before anything else can be left behind.
        watchdog(&dir, &pids)?;
        let api_args = apiserver_args_at(minor, &dir, &etcd_url, address, api_port);
        let api_pid = spawn(&bin("kube-apiserver"), &api_args, &dir.join("kube-apiserver.log"))?;
        pids.push(api_pid);
        watchdog(&dir, &pids)?;
        let servers = vec![
            Server {
                component: Component::Etcd,
                bin: bin("etcd"),
                args: etcd_args,
                log: dir.join("etcd.log"),
                addr: format!("127.0.0.1:{etcd_port}"),
                pid: etcd_pid,
            },
            Server {
                component: Component::ApiServer,
                bin: bin("kube-apiserver"),
                args: api_args,
                log: dir.join("kube-apiserver.log"),
                addr: format!("{address}:{api_port}"),
                pid: api_pid,
            },
        ];
        wait_ready(&dir, &server).with_context(|| {
            format!(
                "the API server did not get ready; see {}",
                dir.join("kube-apiserver.log").display()
            )
        })?;
        let controller_manager = bin("kube-controller-manager").is_file();
        if controller_manager {
            pids.push(spawn(
                &bin("kube-controller-manager"),
                &controller_manager_args(minor, &dir),
                &dir.join("kube-controller-manager.log"),
            )?);
        }
        let scheduler = bin("kube-scheduler").is_file();
        if scheduler {
            pids.push(spawn(
                &bin("kube-scheduler"),
                &scheduler_args(&dir),
                &dir.join("kube-scheduler.log"),
            )?);
        }
        watchdog(&dir, &pids)?;
        Ok(Self {
            kubeconfig: dir.join("kubeconfig"),
            server,
            minor,
            controller_manager,
            scheduler,
            address: address.to_string(),
            servers: Mutex::new(servers),
            pids: Mutex::new(pids),
            dir,
        })
    }

    /// Kills `which` (SIGKILL; etcd's data stays on disk) and waits until
    /// it no longer serves.
    pub fn kill(&self, which: Component) -> Result<()> {
        let servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        let s = servers
            .iter()
            .find(|s| s.component == which)
            .with_context(|| format!("no {which:?} started here"))?;
        crate::controller::signal(s.pid, "KILL")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&s.addr).is_ok() {
            if Instant::now() > deadline {
                bail!("{which:?} (pid {}) still serves 10 s after SIGKILL", s.pid);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Starts `which` again with the same flags, ports and data (after
    /// [`ControlPlane::kill`]), and waits until it accepts connections.
    pub fn restart(&self, which: Component) -> Result<()> {
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        let s = servers
            .iter_mut()
            .find(|s| s.component == which)
            .with_context(|| format!("no {which:?} started here"))?;
        let old = s.pid;
        s.pid = spawn(&s.bin, &s.args, &s.log)?;
        let mut pids = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        pids.retain(|p| *p != old);
        pids.push(s.pid);
        watchdog(&self.dir, &pids)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(&s.addr).is_err() {
            if Instant::now() > deadline {
                bail!("{which:?} did not serve again within 60 s; see {}", s.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// `N` distinct free loopback ports (held open together while chosen).
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding a free port")?;
    let mut ports = [0; N];
    for (p, l) in ports.iter_mut().zip(&listeners) {
        *p = l.local_addr()?.port();
    }
    Ok(ports)
}

/// Starts `bin`, its output appended to `log`.
fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<u32> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    Ok(child.id())
}

/// (Re)writes the watchdog: a shell that waits for this process to end,
/// then stops `pids` (TERM, KILL after 5 s) and deletes `dir`. A newer
/// watchdog replaces the older one (it knows more pids).
fn watchdog(dir: &Path, pids: &[u32]) -> Result<()> {
    let list = pids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
    let pidfile = dir.join("watchdog.pid");
    if let Ok(old) = fs::read_to_string(&pidfile) {
        let _ = Command::new("kill").arg(old.trim()).status();
    }
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill {list} 2>/dev/null; sleep 5; kill -9 {list} 2>/dev/null; rm -rf '{dir}'",
        me = std::process::id(),
        dir = dir.display(),
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the watchdog (sh)")?;
    fs::write(&pidfile, child.id().to_string())?;
    Ok(())
}

/// Writes `ca.crt`, `serving.{crt,key}`, `admin.{crt,key}`, `sa.{key,pub}` and
/// the admin `kubeconfig` into `dir`.
fn write_pki(dir: &Path, server: &str) -> Result<()> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "sluice-envtest-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes".to_string(),
        // The bridge address of a node suite's API server, and the
        // `kubernetes` Service's IP (the first of 10.0.0.0/24), for pods.
        crate::node::NODE_IP.to_string(),
        "10.0.0.1".to_string(),
    ])?;
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "sluice-e2e-admin");
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    let files = [
        ("ca.crt", ca_cert.pem()),
        ("serving.crt", serving_cert.pem()),
        ("serving.key", serving_key.serialize_pem()),
        ("admin.crt", admin_cert.pem()),
        ("admin.key", admin_key.serialize_pem()),
        ("sa.key", sa_key.serialize_pem()),
        ("sa.pub", sa_key.public_key_pem()),
        (
            "kubeconfig",
            kubeconfig(server, &ca_cert.pem(), &admin_cert.pem(), &admin_key.serialize_pem()),
        ),
    ];
    for (name, content) in files {
        fs::write(dir.join(name), content).with_context(|| format!("writing {name}"))?;
    }
    Ok(())
}

/// An admin kubeconfig with the certificates inline.
pub fn kubeconfig(server: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: admin\n    namespace: default\ncurrent-context: envtest\n",
        b64(ca_pem),
        b64(cert_pem),
        b64(key_pem),
    )
}

/// Waits up to 60 s for `/readyz` to answer `ok` with the admin identity.
fn wait_ready(dir: &Path, server: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig"))?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        let client = kube::Client::try_from(cfg)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let req = http::Request::get("/readyz").body(Vec::new())?;
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                result => {
                    if Instant::now() > deadline {
                        bail!("{server}/readyz: {result:?}");
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minor_version_comes_from_the_version_line() {
        assert_eq!(parse_minor("Kubernetes v1.24.17\n"), Some(24));
        assert_eq!(parse_minor("Kubernetes v1.31.0-alpha.1"), Some(31));
        assert_eq!(parse_minor("Kubernetes v1.30+k3s1"), Some(30));
        assert_eq!(parse_minor("etcd Version: 3.4.30"), None);
        assert_eq!(parse_minor("Kubernetes v2.0.0"), None);
    }

    #[test]
    fn job_ready_pods_is_gated_only_before_1_29() {
        let dir = Path::new("/tmp/x");
        let gate = "--feature-gates=JobReadyPods=true".to_string();
        assert!(apiserver_args(24, dir, "http://127.0.0.1:1", 6443).contains(&gate));
        assert!(controller_manager_args(28, dir).contains(&gate));
        assert!(!apiserver_args(29, dir, "http://127.0.0.1:1", 6443).contains(&gate));
        assert!(!controller_manager_args(33, dir).contains(&gate));
    }

    #[test]
    fn every_server_listens_on_loopback_only() {
        let dir = Path::new("/tmp/x");
        let api = apiserver_args(24, dir, "http://127.0.0.1:1", 6443);
        assert!(api.contains(&"--bind-address=127.0.0.1".to_string()));
        assert!(api.contains(&"--advertise-address=127.0.0.1".to_string()));
        assert!(controller_manager_args(24, dir).contains(&"--bind-address=127.0.0.1".to_string()));
        assert!(scheduler_args(dir).contains(&"--bind-address=127.0.0.1".to_string()));
    }

    #[test]
    fn a_node_suites_api_server_serves_on_the_bridge_with_tokens_and_endpoint_routing() {
        let dir = Path::new("/tmp/x");
        let api = apiserver_args_at(24, dir, "http://127.0.0.1:1", crate::node::NODE_IP, 6443);
        assert!(api.contains(&format!("--bind-address={}", crate::node::NODE_IP)));
        assert!(api.contains(&format!("--advertise-address={}", crate::node::NODE_IP)));
        assert!(api.contains(&"--enable-aggregator-routing=true".to_string()));
        assert!(!api.iter().any(|a| a.starts_with("--disable-admission-plugins")));
        let loopback = apiserver_args(24, dir, "http://127.0.0.1:1", 6443);
        assert!(loopback.contains(&"--disable-admission-plugins=ServiceAccount".to_string()));
        assert!(!loopback.contains(&"--enable-aggregator-routing=true".to_string()));
    }

    #[test]
    fn the_harness_test_skips_when_a_cluster_is_given() {
        let why = own_plane_skipped(Some(std::ffi::OsStr::new("/home/me/.kube/config"))).expect("skipped");
        assert_eq!(
            why,
            "skipped: SLUICE_E2E_KUBECONFIG is set (/home/me/.kube/config): the suite runs against that cluster, not a control plane the harness starts from KUBEBUILDER_ASSETS"
        );
        assert_eq!(own_plane_skipped(None), None, "no cluster given: the test runs");
    }

    #[test]
    fn the_kubeconfig_parses_and_points_at_the_server() {
        let text = kubeconfig("https://127.0.0.1:1234", "ca", "cert", "key");
        let kc = kube::config::Kubeconfig::from_yaml(&text).expect("valid kubeconfig");
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:1234"));
        assert_eq!(kc.current_context.as_deref(), Some("envtest"));
    }
}
