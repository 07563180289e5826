//! The election's task: runs the [`protocol`](super::protocol) against
//! the API server, tells the writer whether this replica leads, and logs
//! each change of state once (not each failed call).

use std::time::Duration;

use tokio::sync::{oneshot, watch};

use super::api::{Failure, LeaseApi};
use super::protocol::{Candidate, Lost, Millis, Next, Read, Written};
use crate::run::now_ms;

/// Runs until `stop` fires (or its sender is dropped), then gives the
/// Lease up if this replica holds it.
pub(super) async fn campaign(
    mut api: LeaseApi,
    mut c: Candidate,
    leading: watch::Sender<bool>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut log = Log::default();
    let mut at = now_ms();
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            () = sleep_until(at) => {}
        }
        // The lead may have run out while waiting.
        publish(&leading, &c, &mut log);
        at = turn(&mut api, &mut c, &mut log).await;
        publish(&leading, &c, &mut log);
    }
    release(&mut api, &c).await;
}

/// One read, and the write it calls for; when to read next.
async fn turn(api: &mut LeaseApi, c: &mut Candidate, log: &mut Log) -> Millis {
    let read = match api.read().await {
        Ok(read) => {
            log.reached();
            read
        }
        Err(f) => {
            log.failed(&f);
            Read::Failed
        }
    };
    let (next, lost) = c.after_read(read, now_ms());
    if let Some(lost) = lost {
        log.lost = Some(lost);
    }
    log.holder(c);
    let write = match next {
        Next::ReadAt(at) => return at,
        Next::Write(w) => w,
    };
    let written = match api.write(&write).await {
        Ok(w) => {
            log.reached();
            w
        }
        Err(f) => {
            log.failed(&f);
            Written::Failed
        }
    };
    if written == Written::Conflict {
        tracing::info!("another replica wrote the Lease first");
    }
    let at = c.after_write(&write, written, now_ms());
    log.holder(c);
    at
}

/// Tells the writer whether this replica leads now (only a change wakes it).
fn publish(leading: &watch::Sender<bool>, c: &Candidate, log: &mut Log) {
    let now = c.leads(now_ms());
    leading.send_if_modified(|was| {
        if *was == now {
            return false;
        }
        *was = now;
        log.leading(now, c);
        true
    });
}

/// Gives the Lease up (if held): another replica takes it at its next read
/// instead of waiting for it to run out.
async fn release(api: &mut LeaseApi, c: &Candidate) {
    let Some(write) = c.release(now_ms()) else { return };
    match api.write(&write).await {
        Ok(Written::Stored(_)) => tracing::info!("Lease released"),
        Ok(_) => tracing::info!("Lease not released: another replica wrote it first"),
        Err(f) => tracing::warn!(error = %f.message, "could not release the Lease; it runs out instead"),
    }
}

async fn sleep_until(at: Millis) {
    let wait = u64::try_from(at.saturating_sub(now_ms())).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// What was last logged, so that each change is logged once.
#[derive(Default)]
struct Log {
    /// The holder last logged.
    holder: Option<String>,
    /// The last failure logged that was not an outage (logged again only
    /// when it changes).
    failure: Option<String>,
    /// Why the lead was lost, if an answer said so.
    lost: Option<Lost>,
}

impl Log {
    /// A call failed: an outage is the outage log's; anything else (a
    /// 403, say) is logged when it first appears.
    fn failed(&mut self, f: &Failure) {
        if f.unavailable {
            crate::outage::failed("Lease", &f.message);
        } else if self.failure.as_ref() != Some(&f.message) {
            tracing::warn!(error = %f.message, "cannot read or write the Lease; retrying");
            self.failure = Some(f.message.clone());
        }
    }

    /// A call was answered.
    fn reached(&mut self) {
        crate::outage::succeeded();
        self.failure = None;
    }

    /// Logs the holder when it changed.
    fn holder(&mut self, c: &Candidate) {
        let now = c.seen().and_then(|s| s.record.holder()).map(str::to_string);
        if now != self.holder {
            match &now {
                Some(h) => tracing::info!(holder = %h, "the Lease is held"),
                None => tracing::info!("the Lease is free"),
            }
            self.holder = now;
        }
    }

    fn leading(&mut self, now: bool, c: &Candidate) {
        let transitions = c.seen().map_or(0, |s| s.record.transitions);
        match (now, self.lost.take()) {
            (true, _) => tracing::info!(transitions, "leading: this replica holds the Lease"),
            (false, Some(Lost::To(h))) => {
                tracing::warn!(holder = %h, "no longer leading: another replica holds the Lease")
            }
            (false, Some(Lost::Deleted)) => tracing::warn!("no longer leading: the Lease was deleted"),
            (false, None) => tracing::warn!("no longer leading: the Lease could not be renewed before it ran out"),
        }
    }
}
