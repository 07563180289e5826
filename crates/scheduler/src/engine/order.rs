//! The order of a cycle: every candidate list of a cohort domain merged
//! into one global queue order (priority, then queue-order time, then arrival),
//! in two passes as in Kueue. In the first pass, a candidate that could be
//! admitted only by borrowing waits, and the rest of its queue with it (a
//! queue's own order is never inverted), while a peer of the cohort leaves
//! nominal quota unused on a resource it would borrow: borrowed quota is
//! what a peer may reclaim, and handing it out before every peer had its
//! guaranteed share would be undone within the same cycle. The second pass
//! resumes the deferred lists where they stopped.
//!
//! With fair sharing, borrowers are served lowest weighted share first, then
//! in queue order; a queue's own order is never inverted, and every
//! borrower waits for the second pass. In a flat cohort this merge keys
//! candidates by their queue's share; in a deeper tree it is a
//! [`Tournament`], level by level from the root.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ledger;
use crate::model::FairSharing;

use super::fast_map::FastMap;
use super::flavor::Attempt;
use super::share::ShareView;
use super::state::OrderKey;
use super::tournament::Tournament;
use super::{CqId, Engine};

/// A k-way merge of candidate lists (indexed by the caller) with the
/// nominal-before-borrowing deferral. For a flat cohort under fair sharing
/// (`shares` set) candidates are keyed first by their queue's weighted
/// share: an admission changes only its own queue's share there, so a
/// popped candidate whose key is stale simply goes back in.
pub(super) struct HeadMerge {
    heap: BinaryHeap<Reverse<(i64, OrderKey, usize)>>,
    /// Still in the first pass.
    deferring: bool,
    /// Queues whose lists wait for the second pass.
    paused: Vec<CqId>,
    deferred: Vec<Reverse<(i64, OrderKey, usize)>>,
    /// Fair sharing in a flat cohort: each queue's share, until it admits.
    shares: Option<FastMap<CqId, i64>>,
}

impl HeadMerge {
    /// `two_passes`: whether deferring can help at all (more than one queue
    /// has candidates); `fair`: keyed by shares (a flat cohort).
    #[inline]
    pub(super) fn new(lists: usize, two_passes: bool, fair: bool) -> Self {
        Self {
            heap: BinaryHeap::with_capacity(lists),
            deferring: two_passes,
            paused: Vec::new(),
            deferred: Vec::new(),
            shares: fair.then(FastMap::default),
        }
    }

    #[inline(always)]
    fn share(&mut self, e: &Engine, cq: CqId) -> i64 {
        match &mut self.shares {
            None => 0,
            Some(shares) => *shares
                .entry(cq)
                .or_insert_with(|| e.queue_share_in(cq, &ShareView::NOW).0),
        }
    }

    /// Adds the next candidate of list `list` (of queue `cq`).
    #[inline(always)]
    pub(super) fn push(&mut self, e: &Engine, cq: CqId, key: OrderKey, list: usize) {
        let share = self.share(e, cq);
        self.heap.push(Reverse((share, key, list)));
    }

    /// The next candidate in order and its list; a candidate of a paused
    /// queue is put aside for the second pass. `None` once both passes are
    /// done.
    #[inline(always)]
    pub(super) fn pop(&mut self, e: &Engine, queue_of: impl Fn(usize) -> CqId) -> Option<(OrderKey, usize)> {
        loop {
            let Some(Reverse((share, key, list))) = self.heap.pop() else {
                if self.deferred.is_empty() {
                    return None;
                }
                self.deferring = false;
                self.heap.extend(self.deferred.drain(..));
                continue;
            };
            let cq = queue_of(list);
            if self.deferring && self.paused.contains(&cq) {
                // The list resumes from here in the second pass.
                self.deferred.push(Reverse((share, key, list)));
                continue;
            }
            if self.shares.is_some() {
                let now = self.share(e, cq);
                if now != share {
                    self.heap.push(Reverse((now, key, list)));
                    continue;
                }
            }
            return Some((key, list));
        }
    }

    /// In the first pass, where a borrower waits for the second.
    #[inline]
    pub(super) fn first_pass(&self) -> bool {
        self.deferring
    }

    /// Defers a candidate that would borrow, and its queue with it, to the
    /// second pass.
    #[inline]
    pub(super) fn defer(&mut self, cq: CqId, key: OrderKey, list: usize) {
        self.paused.push(cq);
        self.deferred.push(Reverse((0, key, list)));
    }

    /// A queue's usage changed: its share is to be computed again.
    #[inline]
    pub(super) fn touched(&mut self, cq: CqId) {
        if let Some(shares) = &mut self.shares {
            shares.remove(&cq);
        }
    }

    pub(super) fn fair(&self) -> bool {
        self.shares.is_some()
    }
}

/// The order of one cycle: the global merge, or the fair-sharing
/// tournament; candidates of queues a budget deprioritizes come after
/// both, in queue order.
pub(super) struct Merge {
    order: Order,
    last: BinaryHeap<Reverse<(OrderKey, usize)>>,
}

pub(super) enum Order {
    Flat(HeadMerge),
    Fair(Tournament),
}

impl Merge {
    pub(super) fn new(order: Order) -> Self {
        Self {
            order,
            last: BinaryHeap::new(),
        }
    }

    #[inline(always)]
    pub(super) fn push(&mut self, e: &Engine, cq: CqId, key: OrderKey, list: usize) {
        if e.deprioritized(cq) {
            self.last.push(Reverse((key, list)));
            return;
        }
        match &mut self.order {
            Order::Flat(m) => m.push(e, cq, key, list),
            Order::Fair(t) => t.push(cq, key, list),
        }
    }

    #[inline(always)]
    pub(super) fn pop(&mut self, e: &Engine, queue_of: impl Fn(usize) -> CqId) -> Option<(OrderKey, usize)> {
        let next = match &mut self.order {
            Order::Flat(m) => m.pop(e, queue_of),
            Order::Fair(t) => t.pop(e, queue_of),
        };
        next.or_else(|| self.last.pop().map(|Reverse(x)| x))
    }

    #[inline]
    pub(super) fn first_pass(&self) -> bool {
        match &self.order {
            Order::Flat(m) => m.first_pass(),
            Order::Fair(t) => t.first_pass(),
        }
    }

    #[inline]
    pub(super) fn defer(&mut self, cq: CqId, key: OrderKey, list: usize) {
        match &mut self.order {
            Order::Flat(m) => m.defer(cq, key, list),
            Order::Fair(t) => t.defer(cq, key, list),
        }
    }

    /// A queue's usage changed (it admitted or claimed, or a victim of it
    /// was withdrawn): with fair sharing, its path's shares are stale.
    #[inline]
    pub(super) fn touched(&mut self, e: &Engine, cq: CqId) {
        match &mut self.order {
            Order::Flat(m) => m.touched(cq),
            Order::Fair(t) => t.touched(e, cq),
        }
    }

    /// Whether borrowers always wait for the second pass (fair sharing).
    #[inline]
    pub(super) fn fair(&self) -> bool {
        match &self.order {
            Order::Flat(m) => m.fair(),
            Order::Fair(_) => true,
        }
    }
}

impl Engine {
    /// Whether, on a resource this attempt borrows, another queue of the
    /// cohort has nominal quota it does not use: only then could deferring
    /// the borrower let someone admit within nominal quota.
    pub(super) fn peers_have_idle_quota(&self, cq: CqId, attempt: &Attempt) -> bool {
        let q = &self.queues.cqs[cq];
        if q.cohort.is_none() {
            return false;
        }
        attempt.usage.iter().any(|&(slot, amount)| {
            let s = &q.quota.slots[slot];
            s.effective() + amount > s.nominal && self.root_pool(cq, slot).is_some_and(|p| p.idle > ledger::idle(s))
        })
    }

    pub(super) fn fair_sharing_on(&self) -> bool {
        matches!(self.catalog.config.fair_sharing, FairSharing::On { .. })
    }
}
