//! A `sluice controller` process started by a test, and what a test reads
//! from its HTTP port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A running `sluice controller`.
pub struct Controller {
    pub child: Child,
    pub identity: String,
    pub metrics_port: u16,
    /// Where its log (JSON lines) goes, when not to the test's stderr.
    pub log: Option<PathBuf>,
}

impl Controller {
    /// `GET path` on the metrics port: (status code, body).
    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        http_get(self.metrics_port, path)
    }

    /// The value of an unlabelled sample of `/metrics` (e.g.
    /// `sluice_admitted_workloads_total`), if present.
    pub fn metric(&self, sample: &str) -> Result<Option<f64>> {
        let (code, body) = self.get("/metrics")?;
        if code != 200 {
            bail!("/metrics answered {code}");
        }
        Ok(metric_value(&body, sample))
    }

    /// Kills the process at once (SIGKILL: no graceful shutdown). A
    /// frozen one is killed too.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Freezes the process (SIGSTOP): it runs no code until [`Controller::thaw`].
    pub fn freeze(&self) -> Result<()> {
        signal(self.child.id(), "STOP")
    }

    /// Lets a frozen process run again (SIGCONT).
    pub fn thaw(&self) -> Result<()> {
        signal(self.child.id(), "CONT")
    }

    /// Asks the process to stop (SIGTERM: a graceful shutdown) and waits.
    pub fn terminate(&mut self) -> Result<()> {
        signal(self.child.id(), "TERM")?;
        self.child.wait()?;
        Ok(())
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its log so far, one JSON object a line (see [`Controller::log`]);
    /// lines that are not JSON are kept as strings.
    pub fn log_lines(&self) -> Result<Vec<serde_json::Value>> {
        let path = self.log.as_ref().context("this controller logs to the test's stderr")?;
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| serde_json::Value::String(l.to_string())))
            .collect())
    }
}

/// The message of a JSON log line.
pub fn log_message(line: &serde_json::Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or_default()
}

/// The time of a JSON log line.
pub fn log_time(line: &serde_json::Value) -> Option<k8s_openapi::jiff::Timestamp> {
    line["timestamp"].as_str()?.parse().ok()
}

/// `kill -SIG pid`.
pub fn signal(pid: u32, sig: &str) -> Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -{sig} {pid}: {status}");
    }
    Ok(())
}

/// The value of sample `name` (no labels) in a Prometheus text exposition.
pub fn metric_value(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `GET path` on 127.0.0.1:`port`, one request per connection: (status, body).
pub(crate) fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status line")?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}
