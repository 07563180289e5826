//! Asking Prometheus: a range query over its HTTP API
//! (`/api/v1/query_range`), with a timeout, bounded retries and a cap on
//! the answer's size, and the parser of its JSON answer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sluice_scheduler::idle::Sample;

/// Largest answer read (bytes); a larger one is an error, not a partial read.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Samples per `(namespace, pod)`, in time order (ms, value).
pub type Matrix = HashMap<(String, String), Vec<Sample>>;

/// Why a query gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("cannot reach Prometheus at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Prometheus did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Prometheus answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("Prometheus's answer is over {0} bytes; narrow --idle-query")]
    TooLarge(usize),
    #[error("Prometheus's answer is not a query result: {0}")]
    Malformed(String),
    #[error("Prometheus refused the query ({error_type}): {error}")]
    Refused { error_type: String, error: String },
    #[error("cannot read {path}: {reason}")]
    File { path: String, reason: String },
    #[error("invalid --prometheus-url {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
}

impl PromError {
    /// Worth asking again soon (the server or the network), or not (the
    /// query or the setup is wrong).
    fn transient(&self) -> bool {
        match self {
            PromError::Unreachable { .. } | PromError::Timeout(_) => true,
            PromError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// Short label for `sluice_idle_check_failures_total{reason}`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PromError::Unreachable { .. } => "unreachable",
            PromError::Timeout(_) => "timeout",
            PromError::Status { .. } => "http_status",
            PromError::TooLarge(_) => "too_large",
            PromError::Malformed(_) => "malformed",
            PromError::Refused { .. } => "refused",
            PromError::File { .. } | PromError::BadUrl { .. } => "setup",
        }
    }
}

/// How to reach Prometheus.
#[derive(Clone, Debug)]
pub struct PromSettings {
    /// Base URL, `http://…` or `https://…`, e.g. `http://prometheus.monitoring:9090`.
    pub url: String,
    /// PEM file of the CA that signed Prometheus's certificate (HTTPS).
    /// `None`: the cluster's CA (the service account's `ca.crt`), if present.
    pub ca_file: Option<PathBuf>,
    /// File holding a bearer token, read before every query (tokens rotate).
    pub token_file: Option<PathBuf>,
    /// Time limit of one attempt.
    pub timeout: Duration,
    /// Attempts per query (at least 1), with 1 s, 2 s, … between them.
    pub attempts: u32,
    /// Largest answer read, bytes ([`MAX_ANSWER_BYTES`] unless a test says).
    pub max_answer_bytes: usize,
}

impl PromSettings {
    /// Settings for `url` with the defaults: 10 s per attempt, 3 attempts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ca_file: None,
            token_file: None,
            timeout: Duration::from_secs(10),
            attempts: 3,
            max_answer_bytes: MAX_ANSWER_BYTES,
        }
    }
}

/// The in-cluster service account's CA bundle.
const CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A Prometheus HTTP API client.
pub struct Prometheus {
    settings: PromSettings,
    base: String,
    client: HttpsClient,
}

impl Prometheus {
    /// A client for `settings.url`; reads the CA file now (a bad one is an
    /// error at start, not at the first check).
    pub fn new(settings: PromSettings) -> Result<Self, PromError> {
        let base = settings.url.trim_end_matches('/').to_string();
        let https = base.starts_with("https://");
        if !https && !base.starts_with("http://") {
            return Err(PromError::BadUrl {
                url: settings.url.clone(),
                reason: "expected http:// or https://".into(),
            });
        }
        base.parse::<hyper::Uri>().map_err(|e| PromError::BadUrl {
            url: settings.url.clone(),
            reason: e.to_string(),
        })?;
        let mut roots = rustls::RootCertStore::empty();
        let ca = settings
            .ca_file
            .clone()
            .or_else(|| (https && std::path::Path::new(CLUSTER_CA).exists()).then(|| PathBuf::from(CLUSTER_CA)));
        if let Some(path) = &ca {
            let file_err = |reason: String| PromError::File {
                path: path.display().to_string(),
                reason,
            };
            let pem = std::fs::read(path).map_err(|e| file_err(e.to_string()))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| file_err(format!("not a PEM certificate: {e}")))?;
                roots.add(cert).map_err(|e| file_err(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(file_err("holds no PEM certificate".into()));
            }
        } else if https {
            return Err(PromError::BadUrl {
                url: settings.url.clone(),
                reason: "HTTPS needs --prometheus-ca-file (no in-cluster CA found)".into(),
            });
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| PromError::BadUrl {
                url: settings.url.clone(),
                reason: e.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { settings, base, client })
    }

    /// Runs `query` over `[start, end]` (ms) every `step` (ms), with retries.
    pub async fn query_range(&self, query: &str, start: i64, end: i64, step: i64) -> Result<Matrix, PromError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.query_once(query, start, end, step).await {
                Err(e) if e.transient() && attempt < self.settings.attempts.max(1) => {
                    tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                }
                other => return other,
            }
        }
    }

    async fn query_once(&self, query: &str, start: i64, end: i64, step: i64) -> Result<Matrix, PromError> {
        let form = format!(
            "query={}&start={}&end={}&step={}",
            encode(query),
            seconds(start),
            seconds(end),
            seconds(step.max(1000)),
        );
        let mut req = hyper::Request::post(format!("{}/api/v1/query_range", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        if let Some(path) = &self.settings.token_file {
            let token = std::fs::read_to_string(path).map_err(|e| PromError::File {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            req = req.header("authorization", format!("Bearer {}", token.trim()));
        }
        let req = req.body(Full::new(Bytes::from(form))).map_err(|e| PromError::BadUrl {
            url: self.base.clone(),
            reason: e.to_string(),
        })?;
        let timeout = self.settings.timeout;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| PromError::Unreachable {
                url: self.base.clone(),
                reason: error_chain(&e),
            })?;
            let status = resp.status().as_u16();
            let limit = self.settings.max_answer_bytes;
            let body = Limited::new(resp.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                        PromError::TooLarge(limit)
                    } else {
                        PromError::Unreachable {
                            url: self.base.clone(),
                            reason: e.to_string(),
                        }
                    }
                })?
                .to_bytes();
            Ok::<_, PromError>((status, body))
        };
        let (status, body) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| PromError::Timeout(timeout))??;
        // Prometheus answers 400/422 with a JSON error naming the problem.
        if !(200..300).contains(&status) && !matches!(status, 400 | 422) {
            return Err(PromError::Status {
                status,
                body: snippet(&body),
            });
        }
        parse_matrix(&body)
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// `application/x-www-form-urlencoded` value encoding.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        s.push('…');
    }
    s
}

/// A timestamp's values of one pod while parsing: (time, sum, how many).
type Summed = (i64, f64, u32);

/// Parses a `/api/v1/query_range` answer into samples per
/// `(namespace, pod)`. Series without both labels are skipped (they cannot
/// be matched to a pod); two series of one pod (a query that does not
/// aggregate by pod) are averaged per timestamp. Values are strings in
/// Prometheus's API (`"NaN"`, `"+Inf"` included).
pub fn parse_matrix(body: &[u8]) -> Result<Matrix, PromError> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| PromError::Malformed(format!("not JSON ({e}): {}", snippet(body))))?;
    let str_at = |p: &str| v.pointer(p).and_then(|x| x.as_str());
    match str_at("/status") {
        Some("success") => {}
        Some("error") => {
            return Err(PromError::Refused {
                error_type: str_at("/errorType").unwrap_or("unknown").to_string(),
                error: str_at("/error").unwrap_or("").to_string(),
            });
        }
        other => {
            return Err(PromError::Malformed(format!(
                "status is {}, expected \"success\"",
                other.map_or_else(|| "missing".to_string(), |k| format!("{k:?}"))
            )));
        }
    }
    let kind = str_at("/data/resultType");
    if kind != Some("matrix") {
        return Err(PromError::Malformed(format!(
            "data.resultType is {}, expected \"matrix\" (the query must be an instant vector, evaluated over a range)",
            kind.map_or_else(|| "missing".to_string(), |k| format!("{k:?}"))
        )));
    }
    let series = v
        .pointer("/data/result")
        .and_then(|r| r.as_array())
        .ok_or_else(|| PromError::Malformed("data.result is not a list".into()))?;
    let mut sums: HashMap<(String, String), Vec<Summed>> = HashMap::new();
    for (i, s) in series.iter().enumerate() {
        let label = |k: &str| s.pointer(&format!("/metric/{k}")).and_then(|x| x.as_str());
        let (Some(ns), Some(pod)) = (label("namespace"), label("pod")) else {
            continue;
        };
        let values = s
            .get("values")
            .and_then(|x| x.as_array())
            .ok_or_else(|| PromError::Malformed(format!("data.result[{i}].values is not a list")))?;
        let acc = sums.entry((ns.to_string(), pod.to_string())).or_default();
        for (j, pair) in values.iter().enumerate() {
            let bad = || PromError::Malformed(format!("data.result[{i}].values[{j}] is not [time, \"value\"]"));
            let t = pair.get(0).and_then(|t| t.as_f64()).ok_or_else(bad)?;
            let text = pair.get(1).and_then(|x| x.as_str()).ok_or_else(bad)?;
            let value = parse_value(text).ok_or_else(bad)?;
            let ms = (t * 1000.0).round() as i64;
            match acc.binary_search_by_key(&ms, |e| e.0) {
                Ok(k) => {
                    acc[k].1 += value;
                    acc[k].2 += 1;
                }
                Err(k) => acc.insert(k, (ms, value, 1)),
            }
        }
    }
    Ok(sums
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().map(|(t, sum, n)| (t, sum / f64::from(n))).collect()))
        .collect())
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests;
