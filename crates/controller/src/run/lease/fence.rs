//! The fence that keeps a replica from writing once the Lease, as the API
//! server shows it, no longer names it or has run out, and the watch that
//! keeps it up to date.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::LeaseConfig;

/// Keeps the writer's [`LeaseFence`] up to date with the Lease as
/// the API server shows it. While this watch is down the fence runs out and
/// writes stop (fail closed) until it is back.
pub(crate) async fn watch_lease(client: Client, l: LeaseConfig, fence: Arc<LeaseFence>) {
    let api: Api<Lease> = Api::namespaced(client, &l.namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", l.name));
    let mut stream = std::pin::pin!(watcher(api, cfg).backoff(crate::run::watches::WatchBackoff::default()));
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => fence.observe(Some(&lease)),
            Ok(watcher::Event::Delete(_)) => fence.observe(None),
            Ok(_) => {}
            Err(e) => crate::run::watches::watch_failed("Lease", &e),
        }
    }
}

/// Fencing by the Lease as the API server last showed it: writes are
/// allowed only while it names this replica and its last renewal has not
/// run out (less a safety margin). A second gate beside the election's own
/// answer, from another source: it holds whatever the election's task
/// believes (a task that is late, a process stopped and resumed), since
/// another replica takes the Lease only after that renewal has run out.
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
