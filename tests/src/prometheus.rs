//! A real Prometheus for the idle-GPU tests, scraping a small exporter the
//! test serves in dcgm-exporter's exposition format.
//!
//! - [`GpuExporter`] answers `GET /metrics` on loopback with one
//!   `DCGM_FI_DEV_GPU_UTIL{gpu,namespace,pod}` sample per pod the test set
//!   ([`GpuExporter::set`]), as dcgm-exporter does when it maps GPUs to
//!   pods;
//! - [`PrometheusServer::start`] runs the `prometheus` binary
//!   (`PROMETHEUS_BIN`, else `prometheus` on `PATH`; Debian's package is
//!   enough) on loopback with a 1 s scrape of that exporter and its own
//!   storage directory, and waits until it is ready; dropping it stops it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cluster::wait_for;
use crate::controller::http_get;

/// A dcgm-exporter stand-in *for the metrics source only*: Prometheus
/// itself is real.
pub struct GpuExporter {
    pub port: u16,
    values: Arc<Mutex<BTreeMap<(String, String), f64>>>,
}

impl GpuExporter {
    /// Starts serving on 127.0.0.1 (a thread, for the life of the test).
    pub fn start() -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let values: Arc<Mutex<BTreeMap<(String, String), f64>>> = Arc::default();
        let shared = values.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let mut body = String::from(
                    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
                );
                for ((ns, pod), v) in shared.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    body.push_str(&format!(
                        "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-e2e\",modelName=\"NVIDIA A100\",namespace=\"{ns}\",pod=\"{pod}\",container=\"main\"}} {v}\n"
                    ));
                }
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Ok(Self { port, values })
    }

    /// Sets the utilisation (percent) the exporter reports for a pod.
    pub fn set(&self, namespace: &str, pod: &str, percent: f64) {
        self.values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((namespace.to_string(), pod.to_string()), percent);
    }
}

/// A `prometheus` process on loopback.
pub struct PrometheusServer {
    pub url: String,
    child: Option<Child>,
    dir: PathBuf,
}

fn prometheus_bin() -> PathBuf {
    std::env::var_os("PROMETHEUS_BIN").map_or_else(|| PathBuf::from("prometheus"), PathBuf::from)
}

impl PrometheusServer {
    /// Starts Prometheus scraping `127.0.0.1:exporter_port` every second.
    pub async fn start(exporter_port: u16) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("sluice-e2e-prometheus-{port}"));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n"
            ),
        )?;
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "starting {} (install Debian's prometheus package or set PROMETHEUS_BIN)",
                    prometheus_bin().display()
                )
            })?;
        let server = Self {
            url: format!("http://127.0.0.1:{port}"),
            child: Some(child),
            dir,
        };
        wait_for("prometheus /-/ready", Duration::from_secs(60), || {
            let r = http_get(port, "/-/ready");
            async move { Ok(r.ok().filter(|(c, _)| *c == 200).map(|_| ())) }
        })
        .await?;
        Ok(server)
    }

    /// Stops it (SIGKILL) and removes its storage.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Whether the server has scraped a sample for the pod.
    pub fn has_series(&self, namespace: &str, pod: &str) -> Result<bool> {
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .context("port")?;
        let q = format!("DCGM_FI_DEV_GPU_UTIL%7Bnamespace%3D%22{namespace}%22%2Cpod%3D%22{pod}%22%7D");
        let (code, body) = http_get(port, &format!("/api/v1/query?query={q}"))?;
        if code != 200 {
            bail!("query answered {code}: {body}");
        }
        Ok(body.contains(&format!("\"pod\":\"{pod}\"")))
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        self.stop();
    }
}
