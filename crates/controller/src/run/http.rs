//! The HTTP endpoints: `/metrics`, `/healthz` and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Shared;
use crate::metrics::Metrics;

pub(super) async fn serve_http(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    use axum::http::StatusCode;
    use axum::routing::get;
    let m = shared.clone();
    let r = shared.clone();
    let app = axum::Router::new()
        .route("/metrics", get(move || async move { m.metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if r.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ready")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "caches not synced or ledger not rebuilt",
                    )
                }
            }),
        );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics server stopped");
    }
}

impl AsRef<Metrics> for Shared {
    fn as_ref(&self) -> &Metrics {
        &self.metrics
    }
}
