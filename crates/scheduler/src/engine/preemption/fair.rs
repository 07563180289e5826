//! Fair-share preemption (with [`FairSharing::On`]): a queue may take back
//! from another queue of its cohort tree only while that queue stays at
//! least as far above its fair share as the preemptor's queue will be.
//! Shares are compared between the two children of the queues' lowest
//! common cohort that lead to them (the queues themselves when they are
//! siblings), as Kueue does.
//!
//! Victims are taken one at a time from the queue with the highest share
//! (its candidates lowest priority first, then newest), checked by the
//! strategy; a queue whose next candidate fails the strategy is passed
//! over. The preemptor's own queue gives what `withinClusterQueue` allows
//! only after no other queue can. The search stops once the preemptor
//! fits, then gives back every victim it did not need. The strategies
//! are tried in order, each from scratch:
//!
//! ```text
//! LessThanOrEqualToFinalShare: share(preemptor side, with it) <= share(victim side, without the victim)
//! LessThanInitialShare:        share(preemptor side, with it) <  share(victim side, now)
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::engine::overlay::Overlay;
use crate::engine::share::ShareView;
use crate::engine::{CohortId, CqId, Engine, WlId};
use crate::ledger::FrKey;
use crate::model::{Amount, FairShareStrategies};

use super::Candidate;
use super::order::VictimOrder;

/// One of the fair-share strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    LessThanOrEqualToFinalShare,
    LessThanInitialShare,
}

impl Strategy {
    pub(crate) fn list(s: FairShareStrategies) -> &'static [Strategy] {
        match s {
            FairShareStrategies::Both => &[Strategy::LessThanOrEqualToFinalShare, Strategy::LessThanInitialShare],
            FairShareStrategies::LessThanOrEqualToFinalShare => &[Strategy::LessThanOrEqualToFinalShare],
            FairShareStrategies::LessThanInitialShare => &[Strategy::LessThanInitialShare],
        }
    }

    /// Whether the strategy lets the preemptor's side (share `mine` with
    /// the preemptor) take from a side with share `before` now and `after`
    /// without the victim.
    pub(crate) fn allows(self, mine: i64, before: i64, after: i64) -> bool {
        match self {
            Strategy::LessThanOrEqualToFinalShare => mine <= after,
            Strategy::LessThanInitialShare => mine < before,
        }
    }
}

/// A node of a cohort tree whose share is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Queue(CqId),
    Cohort(CohortId),
}

impl Engine {
    /// The sides compared when `cq`'s workload takes from queue `other`:
    /// the children of their lowest common cohort on each one's path.
    fn sides(&self, cq: CqId, other: CqId) -> (Side, Side) {
        let up = |q: CqId| -> Vec<Side> {
            let mut path = vec![Side::Queue(q)];
            let mut at = self.queues.cqs[q].cohort;
            while let Some(c) = at {
                path.push(Side::Cohort(c));
                at = self.queues.cohorts[c].parent;
            }
            path
        };
        let (mine, theirs) = (up(cq), up(other));
        // Walk down from the root while the paths agree; the two queues
        // differ, so they part at the latest at the queues themselves.
        let (mut i, mut j) = (mine.len(), theirs.len());
        while i > 1 && j > 1 && mine[i - 1] == theirs[j - 1] {
            i -= 1;
            j -= 1;
        }
        (mine[i - 1], theirs[j - 1])
    }

    fn side_share(&self, side: Side, view: &ShareView) -> i64 {
        match side {
            Side::Queue(q) => self.queue_share_in(q, view).0,
            Side::Cohort(c) => self.cohort_share_in(c, view).0,
        }
    }

    /// The queues a fair-share preemption could take from: those below a
    /// sibling of a node on the preemptor's path whose share is at least
    /// that node's share with the preemptor. Both strategies need it (the
    /// victim side's share without the victim is at most its share now),
    /// and it costs one share per sibling along the path rather than one
    /// per queue of the tree.
    pub(super) fn fair_sources(&self, cq: CqId, usage: &[(usize, Amount)], base: &Overlay) -> Vec<CqId> {
        let now = ShareView {
            ov: Some(base),
            extra: None,
        };
        let with_me = ShareView {
            ov: Some(base),
            extra: Some((cq, usage)),
        };
        let mut out = Vec::new();
        let mut side = Side::Queue(cq);
        let mut parent = self.queues.cqs[cq].cohort;
        while let Some(p) = parent {
            let mine = self.side_share(side, &with_me);
            let cohort = &self.queues.cohorts[p];
            for &m in &cohort.members {
                if Side::Queue(m) != side && self.side_share(Side::Queue(m), &now) >= mine {
                    out.push(m);
                }
            }
            for &k in &cohort.children {
                if Side::Cohort(k) != side && self.side_share(Side::Cohort(k), &now) >= mine {
                    self.queues_below(k, &mut out);
                }
            }
            side = Side::Cohort(p);
            parent = cohort.parent;
        }
        out
    }

    fn queues_below(&self, c: CohortId, out: &mut Vec<CqId>) {
        out.extend(self.queues.cohorts[c].members.iter().copied());
        for &k in &self.queues.cohorts[c].children {
            self.queues_below(k, out);
        }
    }

    /// Victims (candidate indices) under the fair-share strategies, or
    /// `None` if no strategy finds enough.
    pub(super) fn fair_victims(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
        strategies: FairShareStrategies,
    ) -> Option<Vec<usize>> {
        let frs = self.short_of(cq, usage, base);
        // Per queue, its candidates in victim order, first to go last.
        let mut queues: BTreeMap<CqId, Vec<usize>> = BTreeMap::new();
        for (i, c) in candidates.iter().enumerate() {
            if c.cq == cq || c.reclaim_ok || c.borrow_ok {
                queues.entry(c.cq).or_default().push(i);
            }
        }
        for list in queues.values_mut() {
            list.sort_by_key(|&i| {
                let c = &candidates[i];
                Reverse(VictimOrder::new(false, c.priority, c.cost, c.admitted_at, c.uid, i))
            });
        }
        Strategy::list(strategies)
            .iter()
            .find_map(|&s| self.fair_victims_with(cq, usage, base, candidates, queues.clone(), &frs, s))
    }

    #[allow(clippy::too_many_arguments)]
    fn fair_victims_with(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
        mut queues: BTreeMap<CqId, Vec<usize>>,
        frs: &[FrKey],
        strategy: Strategy,
    ) -> Option<Vec<usize>> {
        let mut ov = base.clone();
        let mut removed: Vec<usize> = Vec::new();
        // Other queues by share, highest first; a queue's entry is
        // refreshed when it gives a victim (only its share changed).
        let mut order: BinaryHeap<(i64, Reverse<CqId>)> = queues
            .keys()
            .filter(|&&q| q != cq)
            .map(|&q| (self.share_with(q, &ov), Reverse(q)))
            .collect();
        while !self.fits_overlay(&ov, cq, usage, false) {
            let target = self.next_target(cq, &mut order, &queues, frs, &ov)?;
            let i = queues.get_mut(&target).and_then(|l| l.pop()).expect("non-empty list");
            if target == cq {
                self.overlay_holding(&mut ov, candidates[i].id, -1);
            } else if let Some(without) = self.fair_to_take(cq, usage, target, candidates[i].id, &ov, strategy) {
                ov = without;
            } else {
                // Its later candidates would not pass either.
                queues.remove(&target);
                continue;
            }
            removed.push(i);
        }
        Some(self.minimal_victims(cq, usage, false, candidates, &removed, &mut ov))
    }

    /// The queue the next victim comes from: the other queue with the
    /// highest share that still has candidates and borrows what is short;
    /// the own queue only when none is left.
    fn next_target(
        &self,
        cq: CqId,
        order: &mut BinaryHeap<(i64, Reverse<CqId>)>,
        queues: &BTreeMap<CqId, Vec<usize>>,
        frs: &[FrKey],
        ov: &Overlay,
    ) -> Option<CqId> {
        while let Some((s, Reverse(q))) = order.pop() {
            let live = queues.get(&q).is_some_and(|l| !l.is_empty());
            if !live || !self.queue_borrows_any(q, frs, Some(ov)) {
                continue;
            }
            let now = self.share_with(q, ov);
            if s != now {
                order.push((now, Reverse(q)));
                continue;
            }
            order.push((s, Reverse(q)));
            return Some(q);
        }
        queues.get(&cq).filter(|l| !l.is_empty()).map(|_| cq)
    }

    /// Whether `strategy` lets the preemptor (queue `cq`, asking `usage`)
    /// take `victim` from queue `target`: the usage without the victim
    /// when it does.
    fn fair_to_take(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        target: CqId,
        victim: WlId,
        ov: &Overlay,
        strategy: Strategy,
    ) -> Option<Overlay> {
        let (mine, theirs) = self.sides(cq, target);
        let with_me = self.side_share(
            mine,
            &ShareView {
                ov: Some(ov),
                extra: Some((cq, usage)),
            },
        );
        let before = self.side_share(
            theirs,
            &ShareView {
                ov: Some(ov),
                extra: None,
            },
        );
        let mut without = ov.clone();
        self.overlay_holding(&mut without, victim, -1);
        let after = self.side_share(
            theirs,
            &ShareView {
                ov: Some(&without),
                extra: None,
            },
        );
        strategy.allows(with_me, before, after).then_some(without)
    }

    /// Queue `q`'s share with the usage `ov` says.
    fn share_with(&self, q: CqId, ov: &Overlay) -> i64 {
        self.queue_share_in(
            q,
            &ShareView {
                ov: Some(ov),
                extra: None,
            },
        )
        .0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_compare_the_preemptors_share_with_the_victims() {
        use Strategy::*;
        // (strategy, mine with the preemptor, theirs now, theirs without the victim, allowed)
        let table = [
            (LessThanOrEqualToFinalShare, 300, 600, 300, true),
            (LessThanOrEqualToFinalShare, 300, 600, 299, false),
            (LessThanOrEqualToFinalShare, 0, 100, 0, true),
            (LessThanInitialShare, 300, 301, 0, true),
            (LessThanInitialShare, 300, 300, 0, false),
            (LessThanInitialShare, 500, 400, 100, false),
        ];
        for (s, mine, before, after, allowed) in table {
            assert_eq!(
                s.allows(mine, before, after),
                allowed,
                "{s:?}: {mine} vs {before}/{after}"
            );
        }
    }

    #[test]
    fn strategies_are_tried_in_the_configured_order() {
        use Strategy::*;
        assert_eq!(
            Strategy::list(FairShareStrategies::Both),
            [LessThanOrEqualToFinalShare, LessThanInitialShare]
        );
        assert_eq!(
            Strategy::list(FairShareStrategies::LessThanInitialShare),
            [LessThanInitialShare]
        );
    }
}
