//! A `sluice controller` process started by a test, and what a test reads
//! from its HTTP port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// A running `sluice controller`.
pub struct Controller {
    pub child: Child,
    pub identity: String,
    pub metrics_port: u16,
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

    /// Kills the process at once (SIGKILL: no graceful shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
