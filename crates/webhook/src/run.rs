//! `sluice webhook`: wiring of configuration, certificates, the informer
//! cache and the server. The CLI parses flags into [`ServeOptions`] and
//! calls [`run`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::Error;
use crate::cache::ClusterView;
use crate::config::WebhookConfig;
use crate::metrics::Metrics;
use crate::review::Reviewer;
use crate::selfsigned::{self, SelfSignedOptions};
use crate::tls::{CertFiles, SwappableCert, certified_key_from_pem};

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// PEM files, reloaded when they change.
    Files(CertFiles),
    /// Generated, kept in a Secret, CA patched into the configurations.
    SelfSigned(SelfSignedOptions),
}

/// Everything `sluice webhook` needs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub config: Option<PathBuf>,
    /// The namespace Sluice runs in (excluded from mutation).
    pub namespace: String,
    pub certs: CertSource,
    /// How often certificate files are checked for changes.
    pub reload_every: Duration,
    /// Watch Namespaces and LocalQueues (default-queue opt-in, queue
    /// existence warnings). Without it those features are off.
    pub watch_cluster: bool,
    /// Honour Kueue's queue label (ORed with the config file's `kueueCompat`).
    pub kueue_compat: bool,
    /// The controller's service account name (overrides the config file's
    /// `controllerServiceAccount`); it may write Workload admissions.
    pub controller_service_account: Option<String>,
    /// After the shutdown signal: how long to keep serving with `/readyz`
    /// failing before the listener closes and connections drain.
    pub shutdown_grace: Duration,
}

/// Whether the API server has pod scheduling gates on by default
/// (Kubernetes 1.27+), from its version; `false` when it cannot be read.
pub async fn server_has_scheduling_gates(client: &kube::Client) -> bool {
    match client.apiserver_version().await {
        Ok(v) => sluice_kinds::pod::has_scheduling_gates(&v.major, &v.minor),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the API server's version: pods are held as on a server without scheduling gates");
            false
        }
    }
}

/// Serves until `shutdown` completes.
pub async fn run(opts: ServeOptions, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let ServeOptions {
        listen,
        config,
        namespace,
        certs,
        reload_every,
        watch_cluster,
        kueue_compat,
        controller_service_account,
        shutdown_grace,
    } = opts;
    let mut cfg = match &config {
        Some(path) => WebhookConfig::from_file(path)?,
        None => WebhookConfig::default(),
    };
    if let Some(sa) = controller_service_account {
        cfg.controller_service_account = sa;
    }
    let mut cfg = cfg.with_own_namespace(&namespace);
    cfg.kueue_compat |= kueue_compat;

    let needs_client = watch_cluster || matches!(certs, CertSource::SelfSigned(_));
    let client = if needs_client {
        Some(kube::Client::try_default().await.map_err(|source| Error::Kube {
            action: "connecting to the API server".to_owned(),
            source,
        })?)
    } else {
        None
    };

    let (view, ready_view): (Arc<dyn ClusterView>, Option<Arc<dyn ClusterView>>) = match (&client, watch_cluster) {
        (Some(c), true) => {
            let v = crate::kube_view::spawn(c.clone());
            (v.clone(), Some(v))
        }
        // Never synced: no "queue does not exist" warnings, no default queueing.
        _ => (Arc::new(crate::cache::MemoryView::default()), None),
    };

    let cert = Arc::new(SwappableCert::default());
    let metrics = Arc::new(Metrics::new());
    let mut background = Vec::new();
    match certs {
        CertSource::Files(files) => {
            cert.set(files.load()?);
            background.push(tokio::spawn(files.watch(cert.clone(), reload_every)));
        }
        CertSource::SelfSigned(ss) => {
            let client = client
                .clone()
                .ok_or_else(|| Error::Other("self-signed mode needs an API server connection".to_owned()))?;
            let g = selfsigned::ensure_secret(&client, &ss).await?;
            cert.set(certified_key_from_pem(
                g.cert_pem.as_bytes(),
                g.key_pem.as_bytes(),
                &ss.secret_name,
            )?);
            background.push(tokio::spawn(selfsigned::keep_ca_bundles(
                client,
                ss,
                cert.clone(),
                g,
                Duration::from_secs(60),
            )));
        }
    }

    let server_gates = match &client {
        Some(c) => server_has_scheduling_gates(c).await,
        None => false,
    };
    let reviewer = Reviewer::new(cfg, view).with_server_gates(server_gates);
    tracing::info!(
        pods = if reviewer.gates_pods() {
            "gated (spec.schedulingGates) until admitted"
        } else {
            "refused at create (no pod scheduling gates on this server, or pods: refuse)"
        },
        "how a queued bare GPU Pod is held"
    );
    let running = crate::server::spawn(listen, reviewer, cert, ready_view, metrics).await?;
    tracing::info!(addr = %running.addr, "webhook serving");
    shutdown.await;
    tracing::info!("shutting down");
    running.shutdown(shutdown_grace).await;
    for task in background {
        task.abort();
    }
    Ok(())
}
