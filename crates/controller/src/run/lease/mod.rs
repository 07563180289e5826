//! Leader election on a coordination.k8s.io Lease, and the fence that
//! keeps a replica from writing once the Lease as the API server shows it
//! is no longer its own.
//!
//! | file | what |
//! |------|------|
//! | `protocol` | the claim/renew protocol, pure: what to do after each answer, whether this replica leads |
//! | `api` | the Lease through the API server: get, create, replace at a `resourceVersion` |
//! | `campaign` | the task that runs the protocol, tells the writer, logs changes |
//! | `fence` | the writer's fence, fed by a watch of the Lease |
//!
//! Why a protocol of our own rather than `kube-lease-manager`: that crate
//! claims a free Lease with a server-side apply and renews with a plain
//! patch of `renewTime`. Apply conflicts only between *different* field
//! managers, so two replicas claiming the same free Lease with the same
//! manager both succeed (both believed they led), and a renewal patches
//! the Lease whoever holds it (a replica extended another's dead Lease).
//! Here every write is a create or a replace at the `resourceVersion` read
//! (client-go's `leaderelection` does the same), which the API server
//! refuses with 409 when anyone wrote in between, whatever the field
//! manager; each replica also writes under a field manager of its own.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{oneshot, watch};

mod api;
mod campaign;
mod fence;
mod protocol;

pub use fence::LeaseFence;
pub(super) use fence::watch_lease;
use protocol::{Candidate, Timing};

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// How long the Lease holds without renewal (`leaseDurationSeconds`);
    /// the holder renews every fifth of it.
    pub duration_seconds: u64,
}

impl LeaseConfig {
    fn timing(&self) -> Timing {
        Timing::new(Duration::from_secs(self.duration_seconds))
    }
}

/// A running election: the task, and how to stop it.
pub(super) struct Election {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts leader election for the replica `identity`: a receiver that
/// says whether it leads, and the election.
pub(super) fn elect(client: &Client, l: &LeaseConfig, identity: &str) -> (watch::Receiver<bool>, Election) {
    let timing = l.timing();
    // A call may take up to a renewal period (2 s at least) before it is
    // given up and retried.
    let timeout = Duration::from_millis(u64::try_from(timing.retry).unwrap_or(0)).max(Duration::from_secs(2));
    let lease = api::LeaseApi::new(client.clone(), &l.namespace, &l.name, identity, timeout);
    let (tx, rx) = watch::channel(false);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(campaign::campaign(lease, Candidate::new(identity, timing), tx, stopped));
    (rx, Election { stop: Some(stop), task })
}

impl Election {
    /// Resolves only if the election's task ends on its own (it never
    /// does unless it panics): why.
    pub(super) async fn ended(&mut self) -> String {
        match (&mut self.task).await {
            Ok(()) => "the election task ended".to_string(),
            Err(e) => format!("the election task failed: {e}"),
        }
    }

    /// Stops the election once this replica's writes are over; with
    /// `release`, the Lease is given up (if held) so that another replica
    /// takes over now rather than when it runs out.
    pub(super) async fn stop(mut self, release: bool) {
        if !release {
            self.task.abort();
            return;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(5), &mut self.task)
            .await
            .is_err()
        {
            tracing::warn!("the election did not stop; the Lease will run out");
            self.task.abort();
        }
    }
}

/// The fence of a replica named `identity`.
pub(super) fn fence(l: &LeaseConfig, identity: &str) -> Arc<LeaseFence> {
    // The holder renews every R and leads until M before its last renewal
    // runs out (protocol::Timing); the fence closes at the same moment,
    // by the Lease as the API server shows it.
    let margin = Duration::from_millis(u64::try_from(l.timing().margin).unwrap_or(1000));
    Arc::new(LeaseFence::new(identity.to_string(), margin))
}
