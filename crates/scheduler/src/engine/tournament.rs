//! The fair-sharing order of a cycle as a tournament over the cohort tree.
//! Every cohort keeps its children's best candidates ordered by the
//! child's weighted share, then by that child's own best (recursively,
//! down to the queue's share and the queue order), so the root's first
//! entry is the next candidate. An admission changes the shares of one
//! path only: the entries along that path are recomputed (O(depth × log
//! children)), and every other entry stays valid because it is kept
//! *relative* to its parent (a sibling's order does not depend on the
//! shares above it).
//!
//! Deferral works as in [`super::order`]: a queue whose candidate would
//! borrow leaves the tournament for the first pass and rejoins it for the
//! second.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::share::{ShareKey, ShareView};
use super::state::OrderKey;
use super::{CohortId, CqId, Engine, share};

/// A node of the tree: a queue or a cohort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node {
    Queue(CqId),
    Cohort(CohortId),
}

/// A subtree's best candidate, relative to the subtree's parent: the
/// shares from the subtree's root down (the queue's last; deeper levels
/// dropped), then queue order.
type Entry = (ShareKey, OrderKey, usize);

/// Per-cycle state is kept in vectors indexed by queue and cohort ids
/// (dense and small), not maps: a refresh touches every level of a path.
pub(super) struct Tournament {
    /// Per queue, the heads of its candidate lists.
    heads: Vec<BinaryHeap<Reverse<(OrderKey, usize)>>>,
    /// Per cohort, its children's entries, lowest first. A replaced entry
    /// is left in place and dropped when it comes to the top (it no longer
    /// equals its node's `entry_of`): a push instead of a remove and an
    /// insert.
    sets: Vec<BinaryHeap<Reverse<(Entry, Node)>>>,
    /// Each node's entry in its parent's set (by [`Tournament::slot`]).
    entry_of: Vec<Option<Entry>>,
    /// Shares, valid until the queue (or a queue below) admits.
    shares: Vec<Option<i64>>,
    queues: usize,
    root: CohortId,
    deferring: bool,
    paused: BTreeSet<CqId>,
    /// Queues whose entries changed since the last pop (and whether their
    /// ancestors' shares did too): brought up to date once, at the next
    /// pop, however many pushes and admissions came in between.
    stale: Vec<(CqId, bool)>,
}

impl Tournament {
    pub(super) fn new(e: &Engine, root: CohortId, two_passes: bool) -> Self {
        let (queues, cohorts) = (e.queues.cqs.len(), e.queues.cohorts.len());
        Self {
            heads: (0..queues).map(|_| BinaryHeap::new()).collect(),
            sets: (0..cohorts).map(|_| BinaryHeap::new()).collect(),
            entry_of: vec![None; queues + cohorts],
            shares: vec![None; queues + cohorts],
            queues,
            root,
            deferring: two_passes,
            paused: BTreeSet::new(),
            stale: Vec::new(),
        }
    }

    fn slot(&self, node: Node) -> usize {
        match node {
            Node::Queue(q) => q,
            Node::Cohort(c) => self.queues + c,
        }
    }

    fn mark(&mut self, cq: CqId, all: bool) {
        match self.stale.iter_mut().find(|(q, _)| *q == cq) {
            Some((_, a)) => *a |= all,
            None => self.stale.push((cq, all)),
        }
    }

    pub(super) fn push(&mut self, cq: CqId, key: OrderKey, list: usize) {
        self.heads[cq].push(Reverse((key, list)));
        self.mark(cq, false);
    }

    /// The next candidate and its list; `None` once both passes are done.
    pub(super) fn pop(&mut self, e: &Engine, queue_of: impl Fn(usize) -> CqId) -> Option<(OrderKey, usize)> {
        for (cq, all) in std::mem::take(&mut self.stale) {
            self.refresh(e, cq, all);
        }
        loop {
            let first = self.best(self.root).map(|(_, k, l)| (k, l));
            let Some((key, list)) = first else {
                if self.paused.is_empty() || !self.deferring {
                    return None;
                }
                self.deferring = false;
                for cq in std::mem::take(&mut self.paused) {
                    self.refresh(e, cq, false);
                }
                continue;
            };
            let cq = queue_of(list);
            let popped = self.heads[cq].pop().map(|Reverse(h)| h);
            debug_assert_eq!(popped.as_ref().map(|(k, _)| k), Some(&key));
            self.mark(cq, false);
            return Some((key, list));
        }
    }

    pub(super) fn first_pass(&self) -> bool {
        self.deferring
    }

    /// Puts a borrowing candidate back and takes its queue out until the
    /// second pass.
    pub(super) fn defer(&mut self, cq: CqId, key: OrderKey, list: usize) {
        self.heads[cq].push(Reverse((key, list)));
        self.paused.insert(cq);
        self.mark(cq, false);
    }

    /// The queue's usage changed: its shares and its ancestors' are stale.
    pub(super) fn touched(&mut self, e: &Engine, cq: CqId) {
        self.shares[cq] = None;
        let mut at = e.queues.cqs[cq].cohort;
        while let Some(c) = at {
            self.shares[self.queues + c] = None;
            at = e.queues.cohorts[c].parent;
        }
        self.mark(cq, true);
    }

    fn share(&mut self, e: &Engine, node: Node) -> i64 {
        let slot = self.slot(node);
        *self.shares[slot].get_or_insert_with(|| match node {
            Node::Queue(q) => e.queue_share_in(q, &ShareView::NOW).0,
            Node::Cohort(c) => e.cohort_share_in(c, &ShareView::NOW).0,
        })
    }

    /// A cohort's best current entry, dropping replaced ones on the way.
    fn best(&mut self, c: CohortId) -> Option<Entry> {
        while let Some(Reverse((en, node))) = self.sets[c].peek() {
            let slot = self.slot(*node);
            if self.entry_of[slot].as_ref() == Some(en) {
                return Some(en.clone());
            }
            self.sets[c].pop();
        }
        None
    }

    /// Recomputes the queue's entry and its ancestors' up to the root,
    /// stopping where an entry does not change unless `all` (shares above
    /// changed).
    fn refresh(&mut self, e: &Engine, cq: CqId, all: bool) {
        let head = if self.deferring && self.paused.contains(&cq) {
            None
        } else {
            self.heads[cq].peek().map(|Reverse((k, l))| (k.clone(), *l))
        };
        let mut entry: Option<Entry> = head.map(|(k, l)| {
            let mut shares = [0; share::SHARE_LEVELS];
            shares[0] = self.share(e, Node::Queue(cq));
            (shares, k, l)
        });
        let mut node = Node::Queue(cq);
        let mut parent = e.queues.cqs[cq].cohort;
        while let Some(p) = parent {
            let slot = self.slot(node);
            let old = std::mem::replace(&mut self.entry_of[slot], entry.clone());
            if old == entry && !all {
                return;
            }
            if let Some(new) = &entry
                && old.as_ref() != Some(new)
            {
                self.sets[p].push(Reverse((new.clone(), node)));
            }
            if p == self.root {
                return;
            }
            // The cohort's own entry: its share, then its best child's.
            let best = self.best(p);
            node = Node::Cohort(p);
            entry = best.map(|(below, k, l)| {
                let mut shares = [0; share::SHARE_LEVELS];
                shares[0] = self.share(e, node);
                shares[1..].copy_from_slice(&below[..share::SHARE_LEVELS - 1]);
                (shares, k, l)
            });
            parent = e.queues.cohorts[p].parent;
        }
    }
}
