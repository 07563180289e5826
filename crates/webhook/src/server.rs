//! The HTTPS server: axum routes on hyper HTTP/1.1 over rustls.
//!
//! - `POST /mutate/*`, `/validate/*`: reviews (bodies over 3 MiB → 413,
//!   not an AdmissionReview → 400, unknown path → 404).
//! - `GET /healthz`: the process serves. `GET /readyz`: a certificate is
//!   loaded and the listener is up (and the informer caches synced, when
//!   there are caches). `GET /metrics`: Prometheus text.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cache::ClusterView;
use crate::metrics::Metrics;
use crate::review::{Endpoint, ReviewError, Reviewer};
use crate::tls::SwappableCert;

/// Largest request body accepted (the API server's own limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/readyz` looks at.
pub struct Readiness {
    pub cert: Arc<SwappableCert>,
    pub listening: AtomicBool,
    pub view: Option<Arc<dyn ClusterView>>,
    /// Set when shutdown starts: not ready, so endpoints drop this pod
    /// while it still serves.
    pub draining: AtomicBool,
}

impl Readiness {
    pub fn new(cert: Arc<SwappableCert>, view: Option<Arc<dyn ClusterView>>) -> Self {
        Self {
            cert,
            listening: AtomicBool::new(false),
            view,
            draining: AtomicBool::new(false),
        }
    }

    /// `Ok` when ready, else what is missing.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.draining.load(Ordering::Acquire) {
            return Err("shutting down");
        }
        if !self.cert.is_loaded() {
            return Err("no serving certificate loaded");
        }
        if !self.listening.load(Ordering::Acquire) {
            return Err("listener not up");
        }
        if self.view.as_ref().is_some_and(|v| !v.synced()) {
            return Err("caches not synced");
        }
        Ok(())
    }
}

/// Shared state of the handlers.
pub struct AppState {
    pub reviewer: Reviewer,
    pub metrics: Arc<Metrics>,
    pub ready: Arc<Readiness>,
}

/// The routes.
pub fn router(state: Arc<AppState>) -> Router {
    let mut r = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics));
    for ep in Endpoint::all() {
        r = r.route(
            &ep.path(),
            post(
                move |State(s): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>| async move {
                    review(&s, ep, body)
                },
            ),
        );
    }
    r.fallback(|State(s): State<Arc<AppState>>| async move {
        // Every unknown path under one label, so scanners cannot grow the
        // metric families.
        s.metrics.request("(unknown)", "not_found", 0.0);
        (StatusCode::NOT_FOUND, "no such endpoint\n")
    })
    .layer(DefaultBodyLimit::max(MAX_BODY))
    .with_state(state)
}

async fn readyz(State(s): State<Arc<AppState>>) -> Response {
    match s.ready.check() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

async fn metrics(State(s): State<Arc<AppState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
        .into_response()
}

fn review(s: &AppState, ep: Endpoint, body: Result<Bytes, BytesRejection>) -> Response {
    let start = Instant::now();
    let path = ep.path();
    let body = match body {
        Ok(b) => b,
        Err(rejection) => {
            let status = rejection.status();
            let result = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "bad_request"
            };
            s.metrics.request(&path, result, start.elapsed().as_secs_f64());
            let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("request body larger than {MAX_BODY} bytes\n")
            } else {
                format!("{}\n", rejection.body_text())
            };
            return (status, msg).into_response();
        }
    };
    match s.reviewer.handle(ep, &body) {
        Ok(reply) => {
            for fix in &reply.fixes {
                s.metrics.patch(fix.as_str());
            }
            s.metrics
                .request(&path, reply.verdict.as_str(), start.elapsed().as_secs_f64());
            ([(header::CONTENT_TYPE, "application/json")], reply.body).into_response()
        }
        Err(e) => {
            let status = match e {
                ReviewError::Encode(_) => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_REQUEST,
            };
            tracing::warn!(endpoint = %path, error = %e, "rejected admission request body");
            s.metrics.request(&path, "bad_request", start.elapsed().as_secs_f64());
            (status, format!("{e}\n")).into_response()
        }
    }
}

/// Binds the listener (the caller reports readiness after this).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then
/// lets open connections finish (up to 10 s).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    ready: Arc<Readiness>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    ready.listening.store(true, Ordering::Release);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = TowerToHyperService::new(app);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .keep_alive(true)
                .serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            tokio::select! {
                res = conn.as_mut() => {
                    if let Err(e) = res {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                }
                () = async { let _ = stop.wait_for(|s| *s).await; } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(stop);
        });
    }
    ready.listening.store(false, Ordering::Release);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, stop_tx.closed()).await;
}

/// A server started in the background.
pub struct Running {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting, lets open connections finish, and waits.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Graceful shutdown for a SIGTERM: `/readyz` turns 503 at once, the
    /// server keeps answering reviews for `grace` (so the API server and
    /// Service endpoints stop sending here before the listener closes),
    /// then stops accepting and drains open connections.
    pub async fn shutdown(self, grace: Duration) {
        self.state.ready.draining.store(true, Ordering::Release);
        if !grace.is_zero() {
            tracing::info!(
                grace_seconds = grace.as_secs_f64(),
                "not ready; serving until the grace period ends"
            );
            tokio::time::sleep(grace).await;
        }
        self.stop().await;
    }

    /// Waits until the server ends (it ends when `stop` is called or the
    /// process is signalled, whichever the caller wires).
    pub async fn wait(mut self) {
        let _ = (&mut self.task).await;
    }
}

/// Binds `addr` and serves in a background task. The certificate in `cert`
/// may be empty at first; `/readyz` says so until one is set.
pub async fn spawn(
    addr: SocketAddr,
    reviewer: Reviewer,
    cert: Arc<SwappableCert>,
    view: Option<Arc<dyn ClusterView>>,
    metrics: Arc<Metrics>,
) -> Result<Running, crate::Error> {
    let tls = Arc::new(crate::tls::server_config(cert.clone())?);
    let listener = bind(addr).await.map_err(|source| crate::Error::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| crate::Error::Bind { addr, source })?;
    let ready = Arc::new(Readiness::new(cert, view));
    let state = Arc::new(AppState {
        reviewer,
        metrics,
        ready: ready.clone(),
    });
    let app = router(state.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, tls, app, ready, async move {
        let _ = rx.await;
    }));
    Ok(Running {
        addr,
        state,
        shutdown: Some(tx),
        task,
    })
}
