//! The order of a cycle: every candidate list of a cohort domain merged
//! into one global queue order (priority, then queue-order time, then UID),
//! in two passes as in Kueue. In the first pass, a candidate that could be
//! admitted only by borrowing waits, and the rest of its queue with it (a
//! queue's own order is never inverted), while a peer of the cohort leaves
//! nominal quota unused on a resource it would borrow: borrowed quota is
//! what a peer may reclaim, and handing it out before every peer had its
//! guaranteed share would be undone within the same cycle. The second pass
//! resumes the deferred lists where they stopped.
//!
//! With fair sharing, the queues of a cohort tree are served lowest share
//! first: the candidates are ordered by the weighted shares along their
//! queue's path (the root's child first, the queue last), then by queue
//! order. A queue's own order is never inverted.

use super::*;

/// A k-way merge of candidate lists (indexed by the caller) with the
/// nominal-before-borrowing deferral. With fair sharing, each candidate is
/// keyed first by the shares along its queue's path in the cohort tree
/// ([`ShareKey`]), lowest first; shares change as the cycle admits, so a
/// popped candidate whose key is no longer current goes back in with the
/// current one (keys only grow within a cycle, so the order holds).
pub(super) struct HeadMerge {
    heap: BinaryHeap<Reverse<(ShareKey, OrderKey, usize)>>,
    /// Still in the first pass.
    deferring: bool,
    /// Queues whose lists wait for the second pass.
    paused: Vec<CqId>,
    deferred: Vec<Reverse<(ShareKey, OrderKey, usize)>>,
    fair: bool,
}

impl HeadMerge {
    /// `two_passes`: whether deferring can help at all (more than one queue
    /// has candidates); `fair`: whether candidates are keyed by shares.
    #[inline]
    pub(super) fn new(lists: usize, two_passes: bool, fair: bool) -> Self {
        Self {
            heap: BinaryHeap::with_capacity(lists),
            deferring: two_passes,
            paused: Vec::new(),
            deferred: Vec::new(),
            fair,
        }
    }

    /// Adds the next candidate of list `list`, whose queue's share key is
    /// `share` (ignored without fair sharing).
    #[inline(always)]
    pub(super) fn push(&mut self, share: ShareKey, key: OrderKey, list: usize) {
        self.heap.push(Reverse((share, key, list)));
    }

    /// The next candidate in order and its list; a candidate of a paused
    /// queue is put aside for the second pass. `None` once both passes are
    /// done. `share_of` gives a list's current share key.
    #[inline(always)]
    pub(super) fn pop(
        &mut self,
        queue_of: impl Fn(usize) -> CqId,
        share_of: impl Fn(usize) -> ShareKey,
    ) -> Option<(OrderKey, usize)> {
        loop {
            let Some(Reverse((share, key, list))) = self.heap.pop() else {
                if self.deferred.is_empty() {
                    return None;
                }
                self.deferring = false;
                self.heap.extend(self.deferred.drain(..));
                continue;
            };
            if self.deferring && self.paused.contains(&queue_of(list)) {
                // The list resumes from here in the second pass.
                self.deferred.push(Reverse((share, key, list)));
                continue;
            }
            if self.fair {
                let now = share_of(list);
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
        self.deferred.push(Reverse(([0; share::SHARE_LEVELS], key, list)));
    }
}

impl Engine {
    /// Whether, on a resource this attempt borrows, another queue of the
    /// cohort has nominal quota it does not use: only then could deferring
    /// the borrower let someone admit within nominal quota.
    pub(super) fn peers_have_idle_quota(&self, cq: CqId, attempt: &Attempt) -> bool {
        let q = &self.cqs[cq];
        if q.cohort.is_none() {
            return false;
        }
        attempt.usage.iter().any(|&(slot, amount)| {
            let s = &q.slots[slot];
            s.effective() + amount > s.nominal && self.root_pool(cq, slot).is_some_and(|p| p.idle > ledger::idle(s))
        })
    }

    pub(super) fn fair_sharing_on(&self) -> bool {
        matches!(self.config.fair_sharing, FairSharing::On { .. })
    }

    /// A queue's key in the merge: its path's shares with fair sharing, else
    /// nothing.
    #[inline]
    pub(super) fn merge_share(&self, fair: bool, cq: CqId) -> ShareKey {
        if fair {
            self.share_key(cq, &ShareView::NOW)
        } else {
            [0; share::SHARE_LEVELS]
        }
    }
}
