//! TLS: rustls with the ring provider, TLS 1.2 and 1.3, and a certificate
//! that can be swapped while the server runs (cert-manager rotation, or a
//! self-signed certificate loaded from a Secret).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Certificates that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: no PEM {kind} found")]
    NoPem { what: String, kind: &'static str },
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

/// The ring provider this crate uses everywhere.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds a certified key from PEM text (certificate chain and private key).
pub fn certified_key_from_pem(cert_pem: &[u8], key_pem: &[u8], what: &str) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid {
            what: what.to_owned(),
            message: format!("certificate PEM: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoPem {
            what: what.to_owned(),
            kind: "CERTIFICATE",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoPem {
            what: what.to_owned(),
            kind: "PRIVATE KEY",
        },
        e => TlsError::Invalid {
            what: what.to_owned(),
            message: format!("private key PEM: {e}"),
        },
    })?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Invalid {
            what: what.to_owned(),
            message: format!("private key: {e}"),
        })?;
    let ck = CertifiedKey::new(certs, signing);
    ck.keys_match().map_err(|e| TlsError::Invalid {
        what: what.to_owned(),
        message: format!("certificate and key do not match: {e}"),
    })?;
    Ok(ck)
}

/// Serves whatever certificate was stored last.
#[derive(Debug, Default)]
pub struct SwappableCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl SwappableCert {
    pub fn set(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(key));
    }

    pub fn is_loaded(&self) -> bool {
        self.current.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    pub fn get(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.get()
    }
}

/// rustls server configuration: TLS 1.2+, HTTP/1.1, certificate from `cert`.
pub fn server_config(cert: Arc<SwappableCert>) -> Result<rustls::ServerConfig, TlsError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Invalid {
            what: "TLS configuration".to_owned(),
            message: e.to_string(),
        })?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// A certificate and key on disk, reloaded when either file changes.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl CertFiles {
    /// Reads both files and builds the certified key.
    pub fn load(&self) -> Result<CertifiedKey, TlsError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| TlsError::Read {
                path: p.display().to_string(),
                source,
            })
        };
        let cert = read(&self.cert)?;
        let key = read(&self.key)?;
        certified_key_from_pem(&cert, &key, &self.cert.display().to_string())
    }

    fn stamps(&self) -> (Stamp, Stamp) {
        (stamp(&self.cert), stamp(&self.key))
    }

    /// Polls the files every `every` and swaps the certificate in when they
    /// changed and load cleanly; a bad pair is logged and the old one kept.
    /// Runs until the task is dropped.
    ///
    /// It starts by taking the files' stamps and then loading them into
    /// `target`, in that order: a rotation that lands between a caller's
    /// own initial load and the start of this watch (or during this load)
    /// shows up as a stamp change instead of being missed until the next
    /// rotation.
    pub async fn watch(self, target: Arc<SwappableCert>, every: Duration) {
        let mut last = self.stamps();
        match self.load() {
            Ok(key) => target.set(key),
            Err(e) => {
                tracing::warn!(error = %e, "certificate files do not load yet; retrying");
                // Retry on the next tick even if the stamps stay put.
                last = (None, None);
            }
        }
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = self.stamps();
            if now == last {
                continue;
            }
            match self.load() {
                Ok(key) => {
                    target.set(key);
                    last = now;
                    tracing::info!(cert = %self.cert.display(), "reloaded serving certificate");
                }
                Err(e) => {
                    // Keep serving the old certificate; retry next tick (the
                    // files may be mid-rotation).
                    tracing::warn!(error = %e, "certificate files changed but do not load; keeping the previous certificate");
                }
            }
        }
    }
}
