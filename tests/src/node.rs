//! A real node for the end-to-end tests: a kubelet with Debian's containerd
//! and runc, CNI's bridge and host-local plugins, and (when present)
//! kube-proxy in iptables mode, joined to the control plane of
//! [`crate::envtest`]. Started once per test process, on first call of
//! [`shared`], when `KUBEBUILDER_ASSETS` holds a `kubelet`; torn down when
//! the process exits.
//!
//! What it needs (checked before anything starts, all missing ones named):
//! root; `kubelet` (and optionally `kube-proxy`) in `KUBEBUILDER_ASSETS`,
//! from the same Kubernetes as the control plane; `containerd`, `ctr` and
//! `runc` on `PATH`; the CNI plugins `bridge`, `host-local` and `loopback`
//! in `/usr/lib/cni` (or `SLUICE_E2E_CNI_BIN`); `/bin/busybox` (Debian's
//! `busybox-static`); `gcc` with a static libc; `ip`, `tar`, `sha256sum`.
//!
//! What it makes, all on this machine:
//!
//! - a Linux bridge `sluice0` with `10.244.0.1/24`, the node's address
//!   (`--node-ip`; the kubelet serves there, so `kubectl logs` works); the
//!   CNI bridge plugin puts each pod on it with an address from
//!   `10.244.0.0/24` (no masquerading, no route out);
//! - containerd with its own config, root, state, socket and runc root in
//!   `$TMPDIR/sluice-node-<pid>`, the CRI plugin with `disable_apparmor` and
//!   `restrict_oom_score_adj` (without them runc fails to create sandboxes
//!   on these machines) and network namespaces under its state folder;
//! - three images imported with `ctr images import` (nothing is pulled;
//!   pods use `imagePullPolicy: Never`): [`PAUSE_IMAGE`], built here from
//!   `tests/pause/pause.c` with `gcc -static`, and [`BUSYBOX_IMAGE`], the
//!   static `/bin/busybox` and its applet links;
//! - the kubelet (`cgroupfs`, no QoS cgroups, no eviction thresholds, no
//!   image garbage collection, no iptables chains of its own), registering
//!   Node [`NODE_NAME`] with the admin kubeconfig; once it is Ready the
//!   harness adds the extended resources [`GPUS`] `nvidia.com/gpu` and
//!   [`MIGS`] [`MIG`] through `nodes/status`, as a device plugin would;
//! - kube-proxy, if present, in iptables mode for `10.0.0.0/24`, serving
//!   NodePorts only on the bridge's network.
//!
//! Teardown is `teardown.sh` in the node's folder, run by a watchdog shell
//! once the test process is gone (or by hand): it stops the kubelet and
//! kube-proxy, deletes every container in the node's runc root (`runc
//! delete -f`), stops containerd and its shims, unmounts what is mounted
//! under the folder (container root filesystems, network namespaces,
//! volumes), deletes the bridge, runs `kube-proxy --cleanup` (its iptables
//! rules; then, if there was no `KUBE-` chain before the node started,
//! the chains left, such as its canaries), puts back the kernel settings
//! the kubelet, kube-proxy and the bridge plugin change ([`SYSCTLS`], as
//! they were before the node started), removes the pods' logs and
//! CNI results (the kubelet and libcni keep them under `/var/log/pods`,
//! `/var/log/containers` and `/var/lib/cni` whatever the folders given;
//! only the test namespaces' `sluice-e2e-*`, the chart's `sluice-system`
//! and the network's) and the folder. The teardown's output is left in `<folder>.teardown.log`.
//!
//! The bridge is made before the control plane when [`shared`] starts
//! both: the API server then serves on [`NODE_IP`] (pods reach it through
//! the `kubernetes` Service, which kube-proxy translates on the node; the
//! CNI configuration routes [`SERVICE_CIDR`] through the node), pods get
//! service-account tokens, and webhooks are called at their endpoints on
//! the bridge ([`crate::envtest::shared_on_bridge`]), so the chart's
//! pods run as in a cluster (`tests/tests/install.rs`).
//!
//! Only one node harness can run on a machine at a time (the bridge's name
//! and network are fixed): a second one fails on the existing bridge.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use crate::envtest::{ASSETS_ENV, ControlPlane};

/// The Node's name.
pub const NODE_NAME: &str = "sluice-e2e-node";
/// The bridge the pods are on.
pub const BRIDGE: &str = "sluice0";
/// The node's address, on the bridge.
pub const NODE_IP: &str = "10.244.0.1";
/// The pods' network.
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The Services' network (the API server's `--service-cluster-ip-range`).
pub const SERVICE_CIDR: &str = "10.0.0.0/24";
/// The workload image: static busybox (`sh`, `sleep`, `true`, ...).
pub const BUSYBOX_IMAGE: &str = "sluice.test/busybox:e2e";
/// The sandbox image.
pub const PAUSE_IMAGE: &str = "sluice.test/pause:e2e";
/// `nvidia.com/gpu` the node advertises.
pub const GPUS: u32 = 8;
/// A MIG resource the node advertises too.
pub const MIG: &str = "nvidia.com/mig-1g.10gb";
/// How many of [`MIG`].
pub const MIGS: u32 = 7;

/// The folder of CNI plugins (Debian's `containernetworking-plugins`).
pub const CNI_BIN_ENV: &str = "SLUICE_E2E_CNI_BIN";
const CNI_BIN_DEFAULT: &str = "/usr/lib/cni";

const PAUSE_C: &str = include_str!("../pause/pause.c");

/// The applets linked in the busybox image.
const APPLETS: &[&str] = &[
    "sh", "ash", "sleep", "true", "false", "echo", "cat", "ls", "env", "date", "hostname", "wget", "nc", "kill", "ps",
    "id", "test", "[", "printf", "trap",
];

/// A node started by this process.
#[derive(Debug)]
pub struct Node {
    /// The Node's name ([`NODE_NAME`]).
    pub name: String,
    /// Its address on the bridge ([`NODE_IP`]).
    pub ip: String,
    /// Where containerd, the kubelet and the logs keep their data.
    pub dir: PathBuf,
    /// containerd's socket.
    pub containerd_socket: PathBuf,
    /// Whether kube-proxy runs.
    pub kube_proxy: bool,
}

static NODE: OnceLock<Result<Node, String>> = OnceLock::new();

/// The node of this test process, started on first call (after the
/// control plane, [`crate::envtest::shared`]). `None` when
/// `KUBEBUILDER_ASSETS` is not set or holds no `kubelet`: tests that need
/// the node skip then.
pub fn shared() -> Option<Result<&'static Node>> {
    let assets = PathBuf::from(std::env::var_os(ASSETS_ENV)?);
    if !assets.join("kubelet").is_file() {
        return None;
    }
    let started = NODE.get_or_init(|| {
        // Started from its own thread: the caller may be inside a runtime.
        // The bridge first, so that a control plane started now serves on
        // it (`envtest::shared_on_bridge`), reachable from pods.
        std::thread::spawn(move || {
            let dir = Node::prepare(&assets)?;
            let plane = crate::envtest::shared_on_bridge().context("KUBEBUILDER_ASSETS is not set")??;
            Node::start_prepared(plane, &assets, dir)
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("starting the node panicked")))
        .map_err(|e| format!("{e:#}"))
    });
    Some(started.as_ref().map_err(|e| anyhow::anyhow!("the e2e node: {e}")))
}

/// What the node needs that this machine lacks (empty when nothing).
pub fn missing(assets: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    if !assets.join("kubelet").is_file() {
        missing.push(format!("kubelet in {}", assets.display()));
    }
    for tool in ["containerd", "ctr", "runc", "ip", "gcc", "tar", "sha256sum"] {
        if which(tool).is_none() {
            missing.push(format!("{tool} on PATH"));
        }
    }
    let cni = cni_bin();
    for plugin in ["bridge", "host-local", "loopback"] {
        if !cni.join(plugin).is_file() {
            missing.push(format!("the CNI plugin {plugin} in {}", cni.display()));
        }
    }
    if !Path::new("/bin/busybox").is_file() {
        missing.push("/bin/busybox (Debian's busybox-static)".to_string());
    }
    match run("id", &["-u"]) {
        Ok(uid) if uid.trim() == "0" => {}
        _ => missing.push("root (the kubelet, containerd and the bridge need it)".to_string()),
    }
    missing
}

fn cni_bin() -> PathBuf {
    std::env::var_os(CNI_BIN_ENV).map_or_else(|| PathBuf::from(CNI_BIN_DEFAULT), PathBuf::from)
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// Runs `cmd args`; its stdout, or an error with its stderr.
fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd}"))?;
    ensure!(
        out.status.success(),
        "{cmd} {}: {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

impl Node {
    /// Starts containerd, the kubelet and kube-proxy for `plane`, imports
    /// the images, waits for the Node to be Ready and advertises the GPUs.
    pub fn start(plane: &ControlPlane, assets: &Path) -> Result<Self> {
        let dir = Self::prepare(assets)?;
        Self::start_prepared(plane, assets, dir)
    }

    /// The first half of [`Node::start`], before any control plane: checks
    /// the machine, makes the node's folder, its teardown and watchdog, the
    /// bridge [`BRIDGE`] with [`NODE_IP`] and the CNI configuration.
    /// Returns the folder.
    pub fn prepare(assets: &Path) -> Result<PathBuf> {
        let missing = missing(assets);
        if !missing.is_empty() {
            bail!("this machine lacks: {}", missing.join("; "));
        }
        let dir = std::env::temp_dir().join(format!("sluice-node-{}", std::process::id()));
        for sub in [
            "containerd/root",
            "containerd/state",
            "containerd/opt",
            "runc",
            "cni/conf",
            "cni/ipam",
            "kubelet",
            "images",
        ] {
            fs::create_dir_all(dir.join(sub)).with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        let kube_proxy_bin = assets.join("kube-proxy");
        let kube_proxy = kube_proxy_bin.is_file();
        fs::write(dir.join("pids"), "")?;
        fs::write(dir.join("sysctls"), saved_sysctls())?;
        fs::write(
            dir.join("teardown.sh"),
            teardown_script(&dir, kube_proxy.then_some(kube_proxy_bin.as_path())),
        )?;
        // The watchdog is up before anything can be left behind.
        watchdog(&dir)?;

        // A node of a test process that just ended (the next test binary
        // of the same `cargo test`) is still being torn down by its
        // watchdog: wait for that, a minute at most.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while run("ip", &["link", "show", BRIDGE]).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        if run("ip", &["link", "show", BRIDGE]).is_ok() {
            bail!(
                "the bridge {BRIDGE} still exists after a minute: another e2e node runs on this machine, or one was left behind (`ip link del {BRIDGE}`)"
            );
        }
        if !iptables_has_kube_chains() {
            fs::write(dir.join("iptables-clean"), "")?;
        }
        fs::write(dir.join("bridge"), BRIDGE)?;
        run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
        run("ip", &["addr", "add", &format!("{NODE_IP}/24"), "dev", BRIDGE])?;
        run("ip", &["link", "set", BRIDGE, "up"])?;
        fs::write(
            dir.join("cni/conf/10-sluice-e2e.conflist"),
            cni_config(&dir).to_string(),
        )?;
        Ok(dir)
    }

    /// The second half of [`Node::start`], after [`Node::prepare`].
    pub fn start_prepared(plane: &ControlPlane, assets: &Path, dir: PathBuf) -> Result<Self> {
        let kube_proxy_bin = assets.join("kube-proxy");
        let kube_proxy = kube_proxy_bin.is_file();
        let socket = dir.join("containerd.sock");
        fs::write(dir.join("containerd.toml"), containerd_config(&dir))?;
        let containerd = spawn(
            Path::new("containerd"),
            &[format!("--config={}", dir.join("containerd.toml").display())],
            &dir.join("containerd.log"),
        )?;
        record_pid(&dir, "containerd", containerd)?;
        let ctr = |args: &[&str]| {
            let mut all = vec![
                "--address",
                socket.to_str().unwrap_or_default(),
                "--namespace",
                "k8s.io",
            ];
            all.extend_from_slice(args);
            run("ctr", &all)
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = ctr(&["version"]) {
            if Instant::now() > deadline {
                return Err(e).context(format!(
                    "containerd did not start; see {}",
                    dir.join("containerd.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }

        for (name, archive) in [(PAUSE_IMAGE, pause_image(&dir)?), (BUSYBOX_IMAGE, busybox_image(&dir)?)] {
            ctr(&["images", "import", archive.to_str().unwrap_or_default()])
                .with_context(|| format!("importing {name}"))?;
        }

        let [kubelet_port, healthz_port, proxy_healthz, proxy_metrics] = free_ports::<4>()?;
        fs::write(
            dir.join("kubelet.yaml"),
            kubelet_config(plane, kubelet_port, healthz_port),
        )?;
        let kubelet = spawn(
            &assets.join("kubelet"),
            &kubelet_args(plane, &dir, &socket),
            &dir.join("kubelet.log"),
        )?;
        record_pid(&dir, "kubelet", kubelet)?;
        if kube_proxy {
            let pid = spawn(
                &kube_proxy_bin,
                &kube_proxy_args(plane, proxy_healthz, proxy_metrics),
                &dir.join("kube-proxy.log"),
            )?;
            record_pid(&dir, "kube-proxy", pid)?;
        }
        ready_with_gpus(plane).with_context(|| {
            format!(
                "Node {NODE_NAME} did not get Ready; see {}",
                dir.join("kubelet.log").display()
            )
        })?;
        Ok(Self {
            name: NODE_NAME.to_string(),
            ip: NODE_IP.to_string(),
            dir,
            containerd_socket: socket,
            kube_proxy,
        })
    }
}

/// Appends `pid` (of `what`) to the folder's `pids`, which the teardown reads.
fn record_pid(dir: &Path, what: &str, pid: u32) -> Result<()> {
    use std::io::Write as _;
    let mut f = fs::OpenOptions::new().append(true).open(dir.join("pids"))?;
    writeln!(f, "{pid} {what}")?;
    Ok(())
}

fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<u32> {
    let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    Ok(child.id())
}

/// `N` distinct free loopback ports.
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding a free port")?;
    let mut ports = [0; N];
    for (p, l) in ports.iter_mut().zip(&listeners) {
        *p = l.local_addr()?.port();
    }
    Ok(ports)
}

/// A shell that waits for this process to end, then runs `teardown.sh`.
fn watchdog(dir: &Path) -> Result<()> {
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 1; done; sh '{dir}/teardown.sh' > '{dir}.teardown.log' 2>&1",
        me = std::process::id(),
        dir = dir.display(),
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the node's watchdog (sh)")?;
    Ok(())
}

/// The teardown of the node in `dir` (see the module's documentation).
pub fn teardown_script(dir: &Path, kube_proxy: Option<&Path>) -> String {
    let dir = dir.display();
    let cleanup = kube_proxy
        .map(|bin| format!("'{}' --cleanup --proxy-mode=iptables\n", bin.display()))
        .unwrap_or_default();
    format!(
        r#"# Tears down the e2e node in {dir} (written by tests/src/node.rs).
D='{dir}'
pid_of() {{ awk -v w="$1" '$2 == w {{ print $1 }}' "$D/pids"; }}
for p in $(pid_of kubelet) $(pid_of kube-proxy); do kill "$p" 2>/dev/null; done
sleep 2
for p in $(pid_of kubelet) $(pid_of kube-proxy); do kill -9 "$p" 2>/dev/null; done
R="$D/runc/k8s.io"
if [ -d "$R" ]; then
  for id in $(runc --root "$R" list -q 2>/dev/null); do runc --root "$R" delete -f "$id"; done
fi
for p in $(pid_of containerd); do kill "$p" 2>/dev/null; done
sleep 2
for p in $(pid_of containerd); do kill -9 "$p" 2>/dev/null; done
for p in $(ps -eo pid=,args= | awk -v s="$D/containerd.sock" 'index($0, s) && /containerd-shim/ {{ print $1 }}'); do kill -9 "$p"; done
awk -v d="$D/" 'index($2, d) == 1 {{ print $2 }}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
if [ -f "$D/bridge" ]; then ip link del "$(cat "$D/bridge")" 2>/dev/null; fi
{cleanup}if [ -f "$D/iptables-clean" ]; then
  # No KUBE- chains before the node started: remove those left (canaries,
  # KUBE-MARK-*), after kube-proxy --cleanup removed the rules using them.
  for ipt in iptables ip6tables; do
    for t in mangle nat filter; do
      chains=$($ipt-save -t $t 2>/dev/null | awk '/^:KUBE-/ {{ print substr($1, 2) }}')
      for c in $chains; do $ipt -t $t -F "$c"; done
      for c in $chains; do $ipt -t $t -X "$c"; done
    done
  done
fi
if [ -f "$D/sysctls" ]; then
  while read -r kv; do sysctl -q -w "$kv"; done < "$D/sysctls"
fi
rm -rf /var/log/pods/sluice-e2e-* /var/log/containers/*_sluice-e2e-*_*.log /var/lib/cni/results/sluice-e2e-*
rm -rf /var/log/pods/sluice-system_* /var/log/containers/*_sluice-system_*.log
rmdir /var/log/pods /var/log/containers /var/lib/cni/results /var/lib/cni 2>/dev/null
rm -rf "$D"
"#
    )
}

/// The kernel settings the kubelet (its kernel tunables), kube-proxy and
/// the bridge plugin change; the teardown puts them back.
pub const SYSCTLS: &[&str] = &[
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
];

/// `key=value` lines of the [`SYSCTLS`] this machine has, as they are now.
fn saved_sysctls() -> String {
    SYSCTLS
        .iter()
        .filter_map(|key| {
            let file = Path::new("/proc/sys").join(key.replace('.', "/"));
            let value = fs::read_to_string(file).ok()?;
            Some(format!("{key}={}\n", value.trim()))
        })
        .collect()
}

/// Whether iptables or ip6tables has a `KUBE-` chain (of another
/// Kubernetes, or left behind): then the teardown leaves them alone.
fn iptables_has_kube_chains() -> bool {
    ["iptables-save", "ip6tables-save"]
        .iter()
        .any(|save| run(save, &[]).map_or(true, |rules| rules.lines().any(|l| l.starts_with(":KUBE-"))))
}

/// The CNI network: the bridge, host-local addresses of [`POD_CIDR`].
pub fn cni_config(dir: &Path) -> serde_json::Value {
    json!({
        "cniVersion": "0.4.0",
        "name": "sluice-e2e",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                // Services (the `kubernetes` one, for the chart's pods)
                // through the node, where kube-proxy translates them.
                "routes": [{"dst": POD_CIDR}, {"dst": SERVICE_CIDR}],
                "dataDir": dir.join("cni/ipam").display().to_string(),
            }
        }]
    })
}

/// containerd 1.6's config: everything of its own under `dir`.
pub fn containerd_config(dir: &Path) -> String {
    let p = |s: &str| dir.join(s).display().to_string();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{ttrpc}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_apparmor = true
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{runc}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"#,
        root = p("containerd/root"),
        state = p("containerd/state"),
        socket = p("containerd.sock"),
        ttrpc = p("containerd-ttrpc.sock"),
        opt = p("containerd/opt"),
        runc = p("runc"),
        cni_bin = cni_bin().display(),
        cni_conf = p("cni/conf"),
    )
}

/// The kubelet's configuration file.
pub fn kubelet_config(plane: &ControlPlane, port: u16, healthz_port: u16) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {ca}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
podCIDR: {POD_CIDR}
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusReportFrequency: 10s
"#,
        ca = plane.dir.join("ca.crt").display(),
    )
}

/// The kubelet's flags (v1.24: the runtime is given on the command line).
pub fn kubelet_args(plane: &ControlPlane, dir: &Path, socket: &Path) -> Vec<String> {
    let p = |s: &str| dir.join(s).display().to_string();
    vec![
        format!("--config={}", p("kubelet.yaml")),
        format!("--kubeconfig={}", plane.kubeconfig.display()),
        "--container-runtime=remote".to_string(),
        format!("--container-runtime-endpoint=unix://{}", socket.display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-ip={NODE_IP}"),
        format!("--root-dir={}", p("kubelet")),
        format!("--cert-dir={}", p("kubelet/pki")),
        format!("--pod-infra-container-image={PAUSE_IMAGE}"),
        "--v=2".to_string(),
    ]
}

/// kube-proxy's flags: iptables mode, servers on loopback, NodePorts on
/// the bridge's network only, conntrack left as it is.
pub fn kube_proxy_args(plane: &ControlPlane, healthz_port: u16, metrics_port: u16) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", plane.kubeconfig.display()),
        format!("--hostname-override={NODE_NAME}"),
        "--proxy-mode=iptables".to_string(),
        format!("--bind-address={NODE_IP}"),
        format!("--cluster-cidr={POD_CIDR}"),
        format!("--nodeport-addresses={POD_CIDR}"),
        format!("--healthz-bind-address=127.0.0.1:{healthz_port}"),
        format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
        "--conntrack-max-per-core=0".to_string(),
        "--conntrack-tcp-timeout-established=0".to_string(),
        "--conntrack-tcp-timeout-close-wait=0".to_string(),
    ]
}

/// The pause image: `tests/pause/pause.c`, built static.
fn pause_image(dir: &Path) -> Result<PathBuf> {
    let src = dir.join("images/pause.c");
    let root = dir.join("images/pause-root");
    fs::create_dir_all(&root)?;
    fs::write(&src, PAUSE_C)?;
    let bin = root.join("pause");
    run(
        "gcc",
        &[
            "-static",
            "-O2",
            "-o",
            bin.to_str().context("path")?,
            src.to_str().context("path")?,
        ],
    )
    .context("building the pause binary (gcc -static needs libc6-dev)")?;
    let out = dir.join("images/pause.tar");
    let mut image = sluice_image::Image::default();
    image.layer.host_file("/pause", &bin)?;
    image.config.entrypoint = vec!["/pause".into()];
    image.write_docker_archive_file(&out, &[PAUSE_IMAGE.into()])?;
    Ok(out)
}

/// The busybox image: `/bin/busybox` and links for [`APPLETS`].
fn busybox_image(dir: &Path) -> Result<PathBuf> {
    let mut image = sluice_image::Image::default();
    image
        .layer
        .host_file("/bin/busybox", Path::new("/bin/busybox"))
        .context("adding /bin/busybox")?;
    image.layer.dir("/tmp", 0o1777, 0, 0)?;
    for applet in APPLETS {
        image.layer.symlink(&format!("/bin/{applet}"), "busybox")?;
    }
    image.config.entrypoint = vec!["/bin/sh".into()];
    image.config.env = vec!["PATH=/bin".into()];
    let out = dir.join("images/busybox.tar");
    image.write_docker_archive_file(&out, &[BUSYBOX_IMAGE.into()])?;
    Ok(out)
}

/// Waits up to 120 s for Node [`NODE_NAME`] to be Ready, then adds the
/// GPUs to its capacity and allocatable (`nodes/status`).
fn ready_with_gpus(plane: &ControlPlane) -> Result<()> {
    use k8s_openapi::api::core::v1::Node as KubeNode;
    use kube::api::{Api, Patch, PatchParams};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&plane.kubeconfig)?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        let nodes = Api::<KubeNode>::all(kube::Client::try_from(cfg)?);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = nodes.get_opt(NODE_NAME).await?.is_some_and(|n| {
                n.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if ready {
                break;
            }
            if Instant::now() > deadline {
                bail!("not Ready after 120 s");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let extended = json!({"nvidia.com/gpu": GPUS.to_string(), MIG: MIGS.to_string()});
        let status = json!({"status": {"capacity": extended, "allocatable": extended}});
        nodes
            .patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .context("advertising the GPUs")?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_teardown_stops_everything_under_the_node_folder_only() {
        let script = teardown_script(Path::new("/tmp/sluice-node-1"), Some(Path::new("/k8s/kube-proxy")));
        assert!(script.contains("D='/tmp/sluice-node-1'"));
        assert!(script.contains(r#"runc --root "$R" delete -f"#));
        assert!(script.contains("'/k8s/kube-proxy' --cleanup"));
        assert!(script.contains(r#"rm -rf "$D""#));
        assert!(script.contains(r#"sysctl -q -w "$kv""#));
        assert!(!teardown_script(Path::new("/tmp/x"), None).contains("--cleanup --proxy-mode"));
    }

    #[test]
    fn servers_listen_on_loopback_or_the_bridge() {
        let plane = ControlPlane {
            kubeconfig: PathBuf::from("/tmp/p/kubeconfig"),
            server: "https://127.0.0.1:1".to_string(),
            minor: 24,
            controller_manager: true,
            scheduler: true,
            dir: PathBuf::from("/tmp/p"),
            address: NODE_IP.to_string(),
            servers: Default::default(),
            pids: Default::default(),
        };
        let kubelet = kubelet_config(&plane, 1, 2);
        assert!(kubelet.contains(&format!("address: {NODE_IP}\n")));
        assert!(kubelet.contains("healthzBindAddress: 127.0.0.1\n"));
        assert!(kubelet.contains("readOnlyPort: 0\n"));
        let proxy = kube_proxy_args(&plane, 1, 2);
        assert!(proxy.contains(&"--healthz-bind-address=127.0.0.1:1".to_string()));
        assert!(proxy.contains(&"--metrics-bind-address=127.0.0.1:2".to_string()));
        assert!(proxy.contains(&format!("--nodeport-addresses={POD_CIDR}")));
        let containerd = containerd_config(Path::new("/tmp/n"));
        assert!(containerd.contains("stream_server_address = \"127.0.0.1\""));
        assert!(containerd.contains("address = \"/tmp/n/containerd.sock\""));
    }

    #[test]
    fn pods_get_addresses_of_the_pod_network_without_masquerading() {
        let c = cni_config(Path::new("/tmp/n"));
        let bridge = &c["plugins"][0];
        assert_eq!(bridge["bridge"], BRIDGE);
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], POD_CIDR);
        assert_eq!(bridge["ipam"]["dataDir"], "/tmp/n/cni/ipam");
    }
}
