//! Metering: every change of the quota a workload holds (admitted, given
//! back, shrunk, restored after a restart), recorded with the workload's
//! queues so that the driver can accrue usage over time
//! ([`crate::usage::UsageBook`]). The engine has no clock between cycles:
//! the driver takes the changes after each call that may make them and
//! stamps them with the time of that call. Off unless
//! [`crate::EngineConfig::metering`]: then nothing is recorded.

use std::sync::Arc;

use crate::ledger::FrKey;
use crate::model::{Amount, Millis};

use super::{CqId, Engine, WlId};

/// A change of one workload's held quota of one (flavor, resource).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageChange {
    pub uid: Arc<str>,
    pub cluster_queue: Arc<str>,
    /// `namespace/name` of its LocalQueue.
    pub local_queue: Arc<str>,
    pub flavor: Arc<str>,
    pub resource: Arc<str>,
    /// Milli-units; negative when quota is given back.
    pub delta: Amount,
    /// For a workload restored as admitted: when it was admitted (its
    /// usage runs since then, not since the change was taken).
    pub since: Option<Millis>,
}

/// The changes not yet taken by the driver.
#[derive(Clone, Default)]
pub(super) struct Journal {
    pub(super) changes: Vec<UsageChange>,
}

impl Engine {
    /// Records that workload `id` of queue `cq` holds `delta` more of the
    /// (flavor, resource) `fr`.
    #[inline]
    pub(super) fn meter(&mut self, id: WlId, cq: CqId, fr: FrKey, delta: Amount, since: Option<Millis>) {
        if !self.catalog.config.metering || delta == 0 {
            return;
        }
        let wl = self.wl(id);
        let change = UsageChange {
            uid: wl.uid.clone(),
            cluster_queue: self.queues.cqs[cq].name.clone(),
            local_queue: wl.lq.clone(),
            flavor: self.catalog.flavor_names.name(fr.0).clone(),
            resource: self.catalog.resources.name(fr.1).clone(),
            delta,
            since,
        };
        self.journal.changes.push(change);
    }

    /// The usage changes since the last call, oldest first: to be
    /// stamped with the time of the call that made them. Empty unless
    /// metering is on.
    pub fn take_usage_changes(&mut self) -> Vec<UsageChange> {
        std::mem::take(&mut self.journal.changes)
    }
}
