//! StrictFIFO: a queue with this strategy admits in order or not at all.
//! Within a cycle it is blocked from the moment its first candidate does
//! not get in: that candidate does not fit (or is parked under a shape
//! that failed), starts preempting, or sits behind a preemptor of the
//! queue that is ahead in order and still waits for its victims. Every
//! later candidate of a blocked queue is told `BlockedByHead`. A newcomer
//! ahead of the waiting preemptor (higher priority) is still tried.
//! (BestEffortFIFO queues are never blocked: smaller work passes a head
//! that does not fit.)

use std::collections::BTreeSet;

use super::state::{OrderKey, State};
use super::{CqId, Engine};

/// The StrictFIFO queues blocked in the cycle under way.
#[derive(Default)]
pub(super) struct Blocked(BTreeSet<CqId>);

impl Blocked {
    #[inline]
    pub(super) fn contains(&self, cq: CqId) -> bool {
        self.0.contains(&cq)
    }

    #[inline]
    pub(super) fn block(&mut self, cq: CqId) {
        self.0.insert(cq);
    }

    /// Blocks `cq` if it is a StrictFIFO queue (its candidate did not get in).
    #[inline]
    pub(super) fn block_if_strict(&mut self, strict: bool, cq: CqId) {
        if strict {
            self.0.insert(cq);
        }
    }
}

impl Engine {
    /// Whether a preemptor of `cq` waiting for its victims is ahead of `key`.
    pub(super) fn preemptor_ahead(&self, cq: CqId, key: &OrderKey) -> bool {
        self.claims
            .preempting
            .range(..key)
            .any(|k| matches!(&self.wl(k.id).state, State::Preempting(h) if h.cq == cq))
    }
}
