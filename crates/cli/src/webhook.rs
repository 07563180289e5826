//! `sluice webhook`: serve the admission webhook, or print its
//! configurations (`sluice webhook manifests`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use sluice_webhook::certs::service_dns_names;
use sluice_webhook::manifests::{ManifestOptions, Target};
use sluice_webhook::run::{CertSource, ServeOptions};
use sluice_webhook::selfsigned::SelfSignedOptions;
use sluice_webhook::tls::CertFiles;

use crate::logging::LogArgs;

/// Serve the admission webhook (HTTPS), or print its configurations.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WebhookArgs {
    #[command(subcommand)]
    command: Option<WebhookCommand>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum WebhookCommand {
    /// Print the MutatingWebhookConfiguration and ValidatingWebhookConfiguration.
    Manifests(ManifestArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "SLUICE_WEBHOOK_LISTEN", default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// YAML configuration file (GPU fixes, excluded namespaces).
    #[arg(long, env = "SLUICE_WEBHOOK_CONFIG")]
    config: Option<PathBuf>,
    /// Namespace Sluice runs in (never mutated; holds the self-signed Secret).
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    namespace: String,
    /// Serving certificate (PEM), reloaded when it changes.
    #[arg(long, env = "SLUICE_WEBHOOK_TLS_CERT", required_unless_present = "self_signed")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of the serving certificate.
    #[arg(long, env = "SLUICE_WEBHOOK_TLS_KEY", required_unless_present = "self_signed")]
    tls_key: Option<PathBuf>,
    /// Generate a CA and certificate, keep them in a Secret, patch caBundle.
    #[arg(long, env = "SLUICE_WEBHOOK_SELF_SIGNED", conflicts_with_all = ["tls_cert", "tls_key"])]
    self_signed: bool,
    /// Service that fronts the webhook (names in the self-signed certificate).
    #[arg(long, env = "SLUICE_WEBHOOK_SERVICE", default_value = "sluice-webhook")]
    service_name: String,
    /// Secret for the self-signed certificate.
    #[arg(long, env = "SLUICE_WEBHOOK_SECRET", default_value = "sluice-webhook-tls")]
    secret_name: String,
    /// Name of the webhook configurations whose caBundle is patched.
    #[arg(long, env = "SLUICE_WEBHOOK_CONFIGURATION", default_value = "sluice")]
    configuration_name: String,
    /// Seconds between checks of the certificate files.
    #[arg(long, env = "SLUICE_WEBHOOK_CERT_RELOAD_SECONDS", default_value_t = 5)]
    cert_reload_seconds: u64,
    /// Do not watch Namespaces and LocalQueues (turns off default-queue opt-in).
    #[arg(long, env = "SLUICE_WEBHOOK_NO_WATCH")]
    no_watch: bool,
    /// Also queue Jobs labelled kueue.x-k8s.io/queue-name (as the controller's flag).
    #[arg(long, env = "SLUICE_KUEUE_COMPAT")]
    kueue_compat: bool,
    /// The controller's service account in --namespace; only it (and the
    /// config file's admissionWriters) may set a Workload's status.admission.
    /// Default: the config file's controllerServiceAccount (sluice-controller).
    #[arg(long, env = "SLUICE_CONTROLLER_SERVICE_ACCOUNT")]
    controller_service_account: Option<String>,
    /// On SIGTERM, keep serving this long with /readyz failing (so the
    /// endpoints drop this pod first), then drain open connections.
    #[arg(long, env = "SLUICE_WEBHOOK_SHUTDOWN_GRACE_SECONDS", default_value_t = 5)]
    shutdown_grace_seconds: u64,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Debug, Args)]
struct ManifestArgs {
    /// Name of both configuration objects.
    #[arg(long, default_value = "sluice")]
    name: String,
    /// Base URL of the webhook instead of a Service (e.g. https://127.0.0.1:9443).
    #[arg(long, conflicts_with_all = ["service_name", "service_port"])]
    url: Option<String>,
    /// Namespace of the Service (and excluded from mutation).
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    namespace: String,
    #[arg(long, default_value = "sluice-webhook")]
    service_name: Option<String>,
    #[arg(long, default_value_t = 443)]
    service_port: i32,
    /// PEM file of the CA that signed the serving certificate (caBundle).
    #[arg(long)]
    ca_bundle_file: Option<PathBuf>,
    /// Namespaces never sent to the webhook (besides --namespace); by
    /// default the system's and the GPU operator's.
    #[arg(long = "exclude-namespace", default_values = sluice_webhook::config::DEFAULT_EXCLUDED_NAMESPACES)]
    exclude_namespaces: Vec<String>,
    /// Add entries for Jobs labelled kueue.x-k8s.io/queue-name.
    #[arg(long)]
    kueue_compat: bool,
}

pub fn run(args: WebhookArgs) -> anyhow::Result<ExitCode> {
    let WebhookArgs { command, serve } = args;
    match command {
        Some(WebhookCommand::Manifests(m)) => manifests(m),
        None => serve_webhook(serve),
    }
}

fn manifests(args: ManifestArgs) -> anyhow::Result<ExitCode> {
    let ManifestArgs {
        name,
        url,
        namespace,
        service_name,
        service_port,
        ca_bundle_file,
        exclude_namespaces,
        kueue_compat,
    } = args;
    let target = match url {
        Some(u) => Target::Url(u),
        None => Target::Service {
            namespace: namespace.clone(),
            name: service_name.unwrap_or_else(|| "sluice-webhook".to_owned()),
            port: service_port,
        },
    };
    let ca_bundle = ca_bundle_file
        .map(|p| std::fs::read(&p).with_context(|| format!("reading {}", p.display())))
        .transpose()?;
    let mut excluded = exclude_namespaces;
    if !excluded.contains(&namespace) {
        excluded.push(namespace);
    }
    let opts = ManifestOptions {
        name,
        target,
        ca_bundle,
        excluded_namespaces: excluded,
        kueue_compat,
        ..ManifestOptions::default()
    };
    print!("{}", sluice_webhook::manifests::render_yaml(&opts)?);
    Ok(ExitCode::SUCCESS)
}

fn serve_webhook(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ServeArgs {
        listen,
        config,
        namespace,
        tls_cert,
        tls_key,
        self_signed,
        service_name,
        secret_name,
        configuration_name,
        cert_reload_seconds,
        no_watch,
        kueue_compat,
        controller_service_account,
        shutdown_grace_seconds,
        log,
    } = args;
    log.init();
    let certs = if self_signed {
        CertSource::SelfSigned(SelfSignedOptions {
            names: service_dns_names(&service_name, &namespace),
            namespace: namespace.clone(),
            secret_name,
            configuration_name,
            validity_days: 3650,
            renew_before_days: 30,
        })
    } else {
        // clap guarantees both are present without --self-signed.
        let (Some(cert), Some(key)) = (tls_cert, tls_key) else {
            anyhow::bail!("--tls-cert and --tls-key are required without --self-signed");
        };
        CertSource::Files(CertFiles { cert, key })
    };
    let opts = ServeOptions {
        listen,
        config,
        namespace,
        certs,
        reload_every: Duration::from_secs(cert_reload_seconds.max(1)),
        watch_cluster: !no_watch,
        kueue_compat,
        controller_service_account,
        shutdown_grace: Duration::from_secs(shutdown_grace_seconds),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(sluice_webhook::run::run(opts, shutdown_signal()))?;
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
