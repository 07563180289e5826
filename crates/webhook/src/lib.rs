//! Sluice's admission webhook.
//!
//! ```text
//!  kube-apiserver ──HTTPS──▶ server (axum + rustls, cert reload, metrics)
//!                               │ body bytes
//!                               ▼
//!                            review: decode AdmissionReview, dispatch by path
//!                               │                    │
//!                 mutate: jobs / pods          validate: Sluice kinds, jobs
//!                               │                    │
//!                    gpu (pure rules → JSON patch)   sluice_api::validate()
//!                               │
//!                       cache (informer-style lookups, no API calls)
//! ```
#![forbid(unsafe_code)]

pub mod cache;
pub mod certs;
pub mod config;
pub mod gpu;
pub mod kube_view;
pub mod manifests;
pub mod metrics;
pub mod patch;
pub mod review;
pub mod run;
pub mod selfsigned;
pub mod server;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod validate;

/// The controller's service account, in the namespace Sluice runs in.
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "sluice-controller";

/// Errors of the webhook's I/O paths.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Certs(#[from] certs::CertError),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Tls(_) => "tls",
            Self::Certs(_) => "certs",
            Self::Bind { .. } => "bind",
            Self::Kube { .. } => "kube",
            Self::Other(_) => "other",
        }
    }
}
