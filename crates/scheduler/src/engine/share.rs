//! Fair sharing: the weighted dominant share of a queue or cohort, as
//! Kueue defines it. A node's share counts only what it *borrows* (usage
//! above its own subtree quota): per resource, the borrowed amount summed
//! over flavors, divided by what its parent could lend it of that resource
//! (also summed over flavors), in thousandths; the largest ratio over the
//! resources (the dominant one), divided by the node's weight. A node
//! within its quota has share 0; a root cohort has none.
//!
//! ```text
//! share(n) = max_r ( Σ_f max(0, usage(n,f,r) - quota(n,f,r)) × 1000 / lendable(parent,r) ) × 1000 / weight_milli(n)
//! ```
//!
//! A borrowing node of weight 0 has the largest share there is.
//!
//! With a usage history ([`Engine::set_usage_history`]: fair sharing over
//! time), a queue's decayed average usage above its nominal quota is
//! added to what it borrows now.

use std::sync::Arc;

use crate::ledger::ResId;
use crate::model::{Amount, Weight};

use super::fast_map::FastMap;
use super::overlay::Overlay;
use super::{CohortId, CqId, Engine};

/// A weighted share and the resource that dominates it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FairShare {
    /// Thousandths of what the parent can lend, divided by the weight:
    /// Kueue's `weightedShare`. `i64::MAX` for a borrowing node of weight 0.
    pub weighted_share: i64,
    /// The resource whose borrowed fraction is largest (none while the node
    /// borrows nothing).
    pub dominant_resource: Option<String>,
}

/// How many levels of a tree (top first, the queue last) order borrowers;
/// below that, queues of deeper cohorts are ordered by queue order.
pub(super) const SHARE_LEVELS: usize = 4;

/// A candidate's place in fair-sharing order below some cohort: the
/// shares along its path from there down (the queue's last), padded with
/// zeros; lower first.
pub(super) type ShareKey = [i64; SHARE_LEVELS];

/// A what-if change of usage: slot deltas of queues (with the preemptor's
/// own request added) and pool deltas of cohorts.
pub(super) struct ShareView<'a> {
    pub(super) ov: Option<&'a Overlay>,
    /// Extra usage of one queue's slots (a candidate's request).
    pub(super) extra: Option<(CqId, &'a [(usize, Amount)])>,
}

impl ShareView<'_> {
    pub(super) const NOW: ShareView<'static> = ShareView { ov: None, extra: None };
}

/// Borrowed amounts per resource, without allocating for the usual few
/// resources.
#[derive(Default)]
struct Borrowed {
    few: [(ResId, Amount); 8],
    len: usize,
    more: Vec<(ResId, Amount)>,
}

impl Borrowed {
    fn add(&mut self, r: ResId, amount: Amount) {
        if amount <= 0 {
            return;
        }
        if let Some((_, b)) = self.few[..self.len]
            .iter_mut()
            .chain(&mut self.more)
            .find(|(x, _)| *x == r)
        {
            *b += amount;
        } else if self.len < self.few.len() {
            self.few[self.len] = (r, amount);
            self.len += 1;
        } else {
            self.more.push((r, amount));
        }
    }

    fn iter(&self) -> impl Iterator<Item = &(ResId, Amount)> {
        self.few[..self.len].iter().chain(&self.more)
    }
}

/// `a × 1000 / b` without overflow.
fn per_mille(a: Amount, b: Amount) -> i64 {
    match a.checked_mul(1000) {
        Some(x) => x / b,
        None => (a as i128 * 1000 / b as i128).min(i64::MAX as i128) as i64,
    }
}

fn weighted(borrowed: &Borrowed, lendable: &FastMap<ResId, Amount>, weight: Weight) -> (i64, Option<ResId>) {
    let mut best: Option<(i64, ResId)> = None;
    for &(r, b) in borrowed.iter() {
        let Some(&l) = lendable.get(&r).filter(|&&l| l > 0) else {
            continue;
        };
        let ratio = per_mille(b, l);
        if best.is_none_or(|(x, _)| ratio > x) {
            best = Some((ratio, r));
        }
    }
    match best {
        None => (0, None),
        Some((_, r)) if weight.0 <= 0 => (i64::MAX, Some(r)),
        Some((drs, r)) => (per_mille(drs, weight.0), Some(r)),
    }
}

impl Engine {
    /// A queue's weighted share and dominant resource in `view`.
    pub(super) fn queue_share_in(&self, cq: CqId, view: &ShareView) -> (i64, Option<ResId>) {
        let q = &self.queues.cqs[cq];
        let Some(c) = q.cohort else { return (0, None) };
        let mut borrowed = Borrowed::default();
        for (i, s) in q.quota.slots.iter().enumerate() {
            let mut e = s.effective();
            if let Some(ov) = view.ov {
                e += ov.slot.get(&(cq, i)).copied().unwrap_or(0);
            }
            if let Some((xq, extra)) = view.extra
                && xq == cq
            {
                e += extra.iter().filter(|(x, _)| *x == i).map(|(_, a)| a).sum::<Amount>();
            }
            borrowed.add(s.fr.1, e - s.nominal);
        }
        // Fair sharing over time: what it held above nominal quota, on
        // average (decayed), counts as borrowed too.
        if !self.budgets.history.is_empty()
            && let Some(history) = self.budgets.history.get(&cq)
        {
            for &(fr, avg) in history {
                let nominal = q.quota.slot_of.get(&fr).map_or(0, |&i| q.quota.slots[i].nominal);
                borrowed.add(fr.1, avg - nominal);
            }
        }
        weighted(&borrowed, &self.queues.cohorts[c].lendable, q.spec.fair_weight)
    }

    /// A cohort's weighted share in `view` (0 for a root).
    pub(super) fn cohort_share_in(&self, c: CohortId, view: &ShareView) -> (i64, Option<ResId>) {
        let cohort = &self.queues.cohorts[c];
        let Some(parent) = cohort.parent else { return (0, None) };
        let extra = view.extra.map(|(q, ex)| self.extra_draws(q, ex, view.ov));
        let mut borrowed = Borrowed::default();
        for (&fr, &p) in &cohort.pool_of {
            let pool = &cohort.pools[p];
            let mut u = pool.usage;
            if let Some(ov) = view.ov {
                u += ov.pool.get(&(c, p)).copied().unwrap_or(0);
            }
            if let Some(extra) = &extra {
                u += extra.get(&(c, p)).copied().unwrap_or(0);
            }
            borrowed.add(fr.1, u - pool.capacity);
        }
        let weight = cohort.spec.as_ref().map(|s| s.fair_weight).unwrap_or_default();
        weighted(&borrowed, &self.queues.cohorts[parent].lendable, weight)
    }

    /// The change of every pool above `cq` if its slots took `extra` more.
    fn extra_draws(
        &self,
        cq: CqId,
        extra: &[(usize, Amount)],
        ov: Option<&Overlay>,
    ) -> FastMap<(CohortId, usize), Amount> {
        let mut out = ov.cloned().unwrap_or_default();
        for &(slot, amount) in extra {
            self.overlay_add(&mut out, cq, slot, amount);
        }
        // Only the difference the extra makes.
        if let Some(ov) = ov {
            for (k, d) in &ov.pool {
                *out.pool.entry(*k).or_default() -= d;
            }
        }
        out.pool
    }

    /// A ClusterQueue's weighted share now (`None` for an unknown queue).
    pub fn cluster_queue_share(&self, name: &str) -> Option<FairShare> {
        let &cq = self.queues.cq_by_name.get(name)?;
        Some(self.fair_share(self.queue_share_in(cq, &ShareView::NOW)))
    }

    /// A cohort's weighted share now (`None` for an unknown cohort).
    pub fn cohort_share(&self, name: &str) -> Option<FairShare> {
        let &c = self.queues.cohort_by_name.get(name)?;
        Some(self.fair_share(self.cohort_share_in(c, &ShareView::NOW)))
    }

    /// Every cohort the engine knows: named by a queue, a cohort or a
    /// Cohort object.
    pub fn cohort_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<Arc<str>> = self.queues.cohorts.iter().map(|c| c.name.clone()).collect();
        names.sort();
        names
    }

    fn fair_share(&self, (weighted_share, r): (i64, Option<ResId>)) -> FairShare {
        FairShare {
            weighted_share,
            dominant_resource: r.map(|r| self.catalog.resources.name(r).to_string()),
        }
    }
}
