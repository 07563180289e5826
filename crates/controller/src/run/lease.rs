//! Leader election (a coordination.k8s.io Lease, through
//! `kube-lease-manager`) and the fence that keeps a replica from writing
//! once the Lease as the API server shows it is no longer its own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::RunError;
use crate::writer::FIELD_MANAGER;

/// The lease manager's task: it hands the manager back when it stops.
pub(super) type LeaseTask = tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub duration_seconds: u64,
    pub grace_seconds: u64,
}

/// Keeps the writer's [`LeaseFence`] up to date with the Lease as
/// the API server shows it. While this watch is down the fence runs out and
/// writes stop (fail closed) until it is back.
pub(super) async fn watch_lease(client: Client, l: LeaseConfig, fence: Arc<LeaseFence>) {
    let api: Api<Lease> = Api::namespaced(client, &l.namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", l.name));
    let mut stream = std::pin::pin!(watcher(api, cfg).default_backoff());
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => fence.observe(Some(&lease)),
            Ok(watcher::Event::Delete(_)) => fence.observe(None),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "watching the Lease"),
        }
    }
}

/// Fencing by the Lease as the API server last showed it: writes are
/// allowed only while it names this replica and its last renewal has not
/// run out (less a safety margin). This holds even when the lease manager
/// cannot renew (API unreachable) and so never reports the loss: its
/// receiver would still say "leader" after another replica took over.
#[derive(Debug)]
pub struct LeaseFence {
    identity: String,
    margin_ms: i64,
    /// (holder, renewTime + leaseDurationSeconds in epoch ms)
    seen: Mutex<Option<(String, i64)>>,
}

impl LeaseFence {
    pub fn new(identity: impl Into<String>, margin: Duration) -> Self {
        Self {
            identity: identity.into(),
            margin_ms: i64::try_from(margin.as_millis()).unwrap_or(i64::MAX),
            seen: Mutex::new(None),
        }
    }

    /// Records the Lease as observed (`None`: deleted).
    pub fn observe(&self, lease: Option<&Lease>) {
        let seen = lease.and_then(|l| l.spec.as_ref()).and_then(|s| {
            let holder = s.holder_identity.clone()?;
            let renewed = s.renew_time.as_ref()?.0.as_millisecond();
            let duration = i64::from(s.lease_duration_seconds?);
            Some((holder, renewed.saturating_add(duration.saturating_mul(1000))))
        });
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = seen;
    }

    /// Whether this replica may write at `now_ms`.
    pub fn allows(&self, now_ms: i64) -> bool {
        self.remaining(now_ms).is_some()
    }

    /// How long a call starting at `now_ms` may take and still end inside
    /// the fence; `None` when no call may start.
    pub fn remaining(&self, now_ms: i64) -> Option<Duration> {
        match &*self.seen.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((holder, expiry)) if *holder == self.identity => {
                let left = expiry.saturating_sub(self.margin_ms).saturating_sub(now_ms);
                (left > 0).then(|| Duration::from_millis(u64::try_from(left).unwrap_or(0)))
            }
            _ => None,
        }
    }
}

/// Starts leader election: a receiver that says whether this replica
/// leads, and the lease manager's task.
pub(super) async fn elect(
    client: &Client,
    l: &LeaseConfig,
    identity: &str,
) -> Result<(watch::Receiver<bool>, LeaseTask), RunError> {
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &l.name)
        .with_namespace(&l.namespace)
        .with_identity(identity)
        .with_duration(l.duration_seconds)
        .with_grace(l.grace_seconds)
        .with_field_manager(format!("{FIELD_MANAGER}-lease"))
        .build()
        .await
        .map_err(|e| RunError::Lease(e.to_string()))?;
    Ok(manager.watch().await)
}

/// The fence of a replica named `identity`.
pub(super) fn fence(l: &LeaseConfig, identity: &str) -> Arc<LeaseFence> {
    // Renewals come every (duration - grace) seconds; a write is refused
    // from `margin` before the last renewal seen runs out: 1 s, or half the
    // grace when that is shorter, so that a renewal lands before the fence
    // closes.
    let margin = Duration::from_millis((l.grace_seconds.saturating_mul(1000) / 2).clamp(1, 1000));
    Arc::new(LeaseFence::new(identity.to_string(), margin))
}

/// Every receiver is gone with the loop: the lease task stops and hands
/// the manager back, and the Lease is released so that another replica
/// takes over now rather than when it expires.
pub(super) async fn release(task: LeaseTask) {
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Ok(manager))) => {
            if let Err(e) = manager.release().await {
                tracing::warn!(error = %e, "could not release the Lease");
            } else {
                tracing::info!("Lease released");
            }
        }
        _ => tracing::warn!("the lease task did not stop; the Lease will expire"),
    }
}
