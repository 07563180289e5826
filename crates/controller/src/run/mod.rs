//! The run loop of `sluice controller`.
//!
//! ```text
//!  watchers (kube-runtime; bookmarks and 410 relists handled there)
//!     │ Msg
//!     ▼
//!  cache (every object, every replica: warm followers)
//!     │  leader only
//!     ▼
//!  Index ──cycle (coalesced events, next_wakeup)──► plans ──► write queue ──► Writer ──► API server
//!     ▲                                                                                │
//!     └──── acks (resourceVersions), failures, pods-gone answers, read-backs ◄────────┘
//! ```
//!
//! Leadership (`--leader-elect`, a coordination.k8s.io Lease): every replica
//! watches and caches; the holder builds an [`Index`] from the cache (which
//! restores the ledger from Workload statuses before the first cycle) and
//! writes. Losing the lease drops the index and stops writes at once (the
//! writer checks the lease before every call, and is fenced by the Lease as
//! the API server shows it). If the lease task dies, the loop ends with an
//! error.
//!
//! ## Where each part lives
//! - `watches`: the watch streams, decoded into [`Msg`]s;
//! - `cache`: every object seen, and the index a new leader builds from it;
//! - `event_loop`: events, cycles, the write queue and its feedback;
//! - `lease`: leader election and the Lease fence;
//! - `queue_status`: ClusterQueue, LocalQueue and Cohort status;
//! - `http`: `/metrics`, `/healthz`, `/readyz`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;

use crate::index::IndexConfig;
use crate::metrics::Metrics;
use crate::writer::{self, Writer};

mod cache;
mod discovery;
mod event_loop;
mod http;
pub(crate) mod lease;
mod queue_status;
mod watches;

pub use discovery::{integrations, kueue_workloads, pod_gates};
pub use lease::LeaseConfig;

use event_loop::{LoopIo, event_loop};

/// Settings of the run loop (one field per command-line flag).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Sustained API writes per second.
    pub kube_qps: f64,
    /// Burst of API writes above `kube_qps`.
    pub kube_burst: u32,
    pub index: IndexConfig,
    /// `None`: this replica always writes (no leader election).
    pub lease: Option<LeaseConfig>,
    /// Name of this replica (Event `reportingInstance`, Lease holder).
    pub identity: String,
    pub metrics_addr: SocketAddr,
    /// Minimum time between two status writes of one ClusterQueue, LocalQueue or Cohort.
    pub queue_status_interval: Duration,
    /// The lazy lanes' own share of writes per second, beyond the budget
    /// the state lane leaves unused (0 or less: none); see
    /// [`crate::limit::explain_qps`].
    pub explain_qps: f64,
    /// Idle-GPU checks (`--prometheus-url`, `--idle-query`, `--idle-interval`).
    pub idle: crate::idle::IdleSettings,
    /// How often positions and estimated starts are recomputed and
    /// published (`--positions-interval`).
    pub positions_interval: Duration,
    /// Kueue's Workloads, when the quota they hold is counted
    /// ([`IndexConfig::kueue_workloads`] has its API version).
    pub kueue_workloads: Option<kube::api::ApiResource>,
}

/// Why the loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
    #[error("idle-GPU checks: {0}")]
    Idle(#[from] crate::idle::PromError),
    #[error("cannot discover {api_version}: {message}")]
    Discovery { api_version: String, message: String },
    #[error(
        "--integrations lists {kind}, but the API server does not serve {resource} (install its CRD, or leave it out)"
    )]
    NotServed { kind: &'static str, resource: String },
}

/// Readiness and metrics, shared with the HTTP server.
pub struct Shared {
    pub metrics: Metrics,
    /// Every watch listed once.
    pub synced: AtomicBool,
    /// Ready to work: synced, and (as leader) the ledger rebuilt.
    pub ready: AtomicBool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs the controller until `shutdown` completes.
pub async fn run(client: Client, cfg: RunConfig, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let shared = Arc::new(Shared {
        metrics: Metrics::new(),
        synced: AtomicBool::new(false),
        ready: AtomicBool::new(false),
    });
    let listener = tokio::net::TcpListener::bind(cfg.metrics_addr)
        .await
        .map_err(|source| RunError::Metrics {
            addr: cfg.metrics_addr,
            source,
        })?;
    let server = tokio::spawn(http::serve_http(listener, shared.clone()));

    // Without leader election this replica always leads; the sender lives
    // as long as the loop, so the receiver never reports a closed channel.
    let (_always_leader, always) = watch::channel(true);
    let (leader_rx, mut election) = match &cfg.lease {
        None => (always, None),
        Some(l) => {
            let (rx, election) = lease::elect(&client, l, &cfg.identity);
            (rx, Some(election))
        }
    };
    let mut writer = Writer::new(client.clone(), cfg.identity.clone())
        .with_rate_limit(cfg.kube_qps, cfg.kube_burst)
        .with_explain_rate(cfg.explain_qps)
        .with_leader(leader_rx.clone());
    let fence = cfg.lease.as_ref().map(|l| lease::fence(l, &cfg.identity));
    let fence_task = cfg.lease.as_ref().zip(fence.clone()).map(|(l, f)| {
        writer = writer.clone().with_fence(f.clone());
        tokio::spawn(lease::watch_lease(client.clone(), l.clone(), f))
    });
    let queue = Arc::new(writer::WriteQueue::default());
    let (failed_tx, failed_rx) = tokio::sync::mpsc::unbounded_channel();
    // Events: a lane of their own (own rate limit, bounded, never waited on).
    let (events_tx, events_rx) = tokio::sync::mpsc::channel(writer::EVENT_LANE_CAPACITY);
    let event_writer = writer.clone().with_rate_limit(cfg.kube_qps, cfg.kube_burst);
    let mut events = tokio::spawn(writer::event_lane(event_writer, events_rx, shared.clone()));
    let writer = writer.with_event_lane(events_tx);
    let drainer = tokio::spawn(writer::drain(writer, queue.clone(), failed_tx, shared.clone()));
    let checker = Arc::new(crate::idle::Checker::new(client.clone(), &cfg.idle)?);
    let io = LoopIo {
        queue,
        fence,
        failed: failed_rx,
        checker,
    };
    let result = event_loop(client, &cfg, io, leader_rx, &mut election, &shared, shutdown).await;
    if let Some(t) = fence_task {
        t.abort();
    }
    // The writer holds a lease receiver too.
    drainer.abort();
    let _ = drainer.await;
    // The drainer held the lane's sender: the lane writes what it holds,
    // for a few seconds at most (a lost Event is only an Event).
    if tokio::time::timeout(Duration::from_secs(3), &mut events).await.is_err() {
        tracing::warn!("events still queued at shutdown were dropped");
        events.abort();
    }
    // Writes are over: the Lease is given up after a clean stop.
    if let Some(election) = election {
        election.stop(result.is_ok()).await;
    }
    server.abort();
    result
}

#[cfg(test)]
mod tests;
