//! Preemption: finding a minimal set of victims that lets a workload fit,
//! over the flavor choices it could take. [`policy`] says who may be a
//! victim, [`order`] in which order victims are taken.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::decision::PreemptionReason;
use crate::ledger::FrKey;
use crate::model::{
    Amount, BorrowWithinCohort, FairShareStrategies, FairSharing, Millis, ReclaimWithinCohort, VictimOrderPolicy,
    WithinClusterQueue,
};

use super::flavor::{Attempt, FlavorOption};
use super::overlay::Overlay;
use super::placement::Placement;
use super::state::{State, Wl};
use super::{CqId, Engine, WlId};

mod fair;
mod order;
mod placement;
pub(super) mod policy;

use order::{VictimCost, VictimOrder, VictimRule};
use policy::Rank;

pub(super) struct Candidate<'a> {
    pub(super) id: WlId,
    pub(super) cq: CqId,
    pub(super) priority: i32,
    pub(super) admitted_at: Millis,
    pub(super) uid: &'a str,
    pub(super) in_borrowing_queue: bool,
    pub(super) reclaim_ok: bool,
    pub(super) borrow_ok: bool,
    /// What it holds, per (flavor, resource).
    pub(super) held: &'a [(FrKey, Amount)],
    /// When this engine last preempted it.
    pub(super) last_preempted: Option<Millis>,
    /// Its place between priority and admission time in the victim order
    /// (set by [`Engine::price_candidates`]).
    pub(super) cost: VictimCost,
}

pub(super) enum PreemptOutcome {
    Victims(Vec<(WlId, PreemptionReason)>, Attempt, Placement),
    WaitForEvictions,
    /// `protected` candidates were skipped for their minimum runtime; the
    /// first protection ends at `until`.
    Impossible {
        protected: usize,
        until: Option<Millis>,
    },
}

/// The candidates a victim search may take, and how many their queue's
/// minimum runtime protects (the first protection ends at `until`).
pub(super) struct Pool<'a> {
    pub(super) candidates: Vec<Candidate<'a>>,
    pub(super) protected: usize,
    pub(super) until: Option<Millis>,
}

/// Result of a victim search for one flavor choice.
pub(super) struct VictimSearch {
    pub(super) victims: Option<Vec<(WlId, PreemptionReason)>>,
    pub(super) protected: usize,
    pub(super) until: Option<Millis>,
}

impl Engine {
    /// Finds a minimal set of victims that lets the workload fit, trying the
    /// flavor combinations in preference order (at most 16).
    pub(super) fn preempt(&self, cq: CqId, id: WlId, options: &[FlavorOption], now: Millis) -> PreemptOutcome {
        if options.iter().any(|o| o.flavors.is_empty()) {
            return PreemptOutcome::Impossible {
                protected: 0,
                until: None,
            };
        }
        let base = self.evictions_overlay(cq);
        let mut pick = vec![0usize; options.len()];
        let mut protected_total = 0;
        let mut until: Option<Millis> = None;
        for _ in 0..16 {
            let usage = self.option_usage(cq, id, options, &pick);
            if self.fits_overlay(&base, cq, &usage, false) {
                return PreemptOutcome::WaitForEvictions;
            }
            let search = self.find_victims(cq, id, &usage, &base, now);
            protected_total = protected_total.max(search.protected);
            until = match (until, search.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(victims) = search.victims {
                let choice = self.choice_from_pick(self.wl(id).pod_sets.len(), options, &pick);
                // With placement, the victims must also make it placeable
                // (more are chosen if need be); else the next combination.
                let placed = if self.placement_on() {
                    self.placement_victims(cq, id, &choice, &usage, false, victims, now)
                } else {
                    Some((victims, Placement::default()))
                };
                if let Some((victims, placement)) = placed {
                    return PreemptOutcome::Victims(
                        victims,
                        Attempt {
                            usage,
                            choice,
                            borrowing: false,
                        },
                        placement,
                    );
                }
            }
            // Next combination, last option fastest.
            let mut k = options.len();
            loop {
                if k == 0 {
                    return PreemptOutcome::Impossible {
                        protected: protected_total,
                        until,
                    };
                }
                k -= 1;
                pick[k] += 1;
                if pick[k] < options[k].flavors.len() {
                    break;
                }
                pick[k] = 0;
            }
        }
        PreemptOutcome::Impossible {
            protected: protected_total,
            until,
        }
    }

    /// Adds the admitted workloads of queue `m` that the preemptor's policy
    /// allows as victims and that use any of `frs`. Those protected by their
    /// queue's minimum runtime are counted, with the first expiry.
    pub(super) fn collect_candidates<'a>(
        &'a self,
        m: CqId,
        cq: CqId,
        me: &Wl,
        frs: &[FrKey],
        now: Millis,
        pool: &mut Pool<'a>,
    ) {
        let rules = self.queues.cqs[cq].spec.preemption;
        let same = m == cq;
        let queue_borrowing = self.queue_borrows_any(m, frs, None);
        let min_runtime = self.queues.cqs[m].spec.min_runtime;
        // Under fair sharing, what this cycle admitted in fair order in
        // other queues is not taken back in the same cycle (as in Kueue,
        // whose victims come from the cycle's starting snapshot).
        let settled = !same && matches!(self.catalog.config.fair_sharing, FairSharing::On { .. });
        for &v in &self.queues.cqs[m].admitted {
            if settled && self.turn.admitted_now.contains_key(&v) {
                continue;
            }
            let w = self.wl(v);
            let State::Admitted(h) = &w.state else { continue };
            if self.foreign_id(v) || !h.usage.iter().any(|(fr, _)| frs.contains(fr)) {
                continue;
            }
            let (reclaim_ok, borrow_ok, within_ok) = if same {
                let me_rank = Rank {
                    priority: me.priority,
                    queued_at: me.ts,
                };
                let rank = Rank {
                    priority: w.priority,
                    queued_at: w.ts,
                };
                (
                    false,
                    false,
                    policy::within_cluster_queue(rules.within_cluster_queue, me_rank, rank),
                )
            } else {
                let reclaim = policy::reclaim_within_cohort(rules.reclaim_within_cohort, me.priority, w.priority);
                let borrow = policy::borrow_within_cohort(rules.borrow_within_cohort, me.priority, w.priority);
                (reclaim, borrow, false)
            };
            if !(within_ok || reclaim_ok || borrow_ok) {
                continue;
            }
            if min_runtime > 0 && h.admitted_at + min_runtime > now {
                pool.protected += 1;
                let t = h.admitted_at + min_runtime;
                pool.until = Some(pool.until.map_or(t, |u| u.min(t)));
                continue;
            }
            pool.candidates.push(Candidate {
                id: v,
                cq: m,
                priority: w.priority,
                admitted_at: h.admitted_at,
                uid: &w.uid,
                in_borrowing_queue: queue_borrowing,
                reclaim_ok,
                borrow_ok,
                held: &h.usage,
                last_preempted: w.last_preempted,
                cost: VictimCost::default(),
            });
        }
    }

    /// Returns victims (or none) and how many candidates were protected by
    /// their queue's minimum runtime.
    pub(super) fn find_victims(
        &self,
        cq: CqId,
        id: WlId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        now: Millis,
    ) -> VictimSearch {
        let fair = self.fair_strategies(cq);
        let mut pool = self.candidate_pool(cq, id, usage, base, fair.is_some(), now);
        if self.prices_victims(cq) {
            let contested = self.contested(cq, usage, |s| !self.fits_overlay(base, cq, &[s], false));
            self.price_candidates(cq, &contested, now, &mut pool.candidates);
        }
        let victims = match fair {
            Some(strategies) => self.fair_victim_set(cq, usage, base, &pool.candidates, strategies),
            None => self.priority_victim_set(cq, usage, base, &pool.candidates),
        };
        VictimSearch {
            victims,
            protected: pool.protected,
            until: pool.until,
        }
    }

    /// The (flavor, resource) pairs of `usage` that `short` says are
    /// contested, with what the preemptor asks of each.
    pub(super) fn contested(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        short: impl Fn((usize, Amount)) -> bool,
    ) -> Vec<(FrKey, Amount)> {
        usage
            .iter()
            .filter(|&&u| short(u))
            .map(|&(s, amount)| (self.queues.cqs[cq].quota.slots[s].fr, amount))
            .collect()
    }

    /// Whether the policy of the preemptor's queue `cq` gives victims a
    /// cost: not under `Newest` without a grace (Kueue's order, where every
    /// cost is zero and nothing needs computing).
    pub(super) fn prices_victims(&self, cq: CqId) -> bool {
        let policy = self.queues.cqs[cq].spec.preemption;
        policy.victim_order != VictimOrderPolicy::Newest || policy.recently_preempted_grace.is_some()
    }

    /// Sets each candidate's cost in the victim order under the policy of
    /// the preemptor's queue `cq`.
    pub(super) fn price_candidates(
        &self,
        cq: CqId,
        contested: &[(FrKey, Amount)],
        now: Millis,
        candidates: &mut [Candidate<'_>],
    ) {
        let policy = self.queues.cqs[cq].spec.preemption;
        let rule = VictimRule {
            order: policy.victim_order,
            grace: policy.recently_preempted_grace,
            now,
            asked: contested,
        };
        for c in candidates {
            c.cost = rule.cost(c.admitted_at, c.last_preempted, c.held);
        }
    }

    /// The fair-sharing strategies that decide `cq`'s preemptions: fair
    /// sharing is on and the queue is in a cohort.
    fn fair_strategies(&self, cq: CqId) -> Option<FairShareStrategies> {
        match self.catalog.config.fair_sharing {
            FairSharing::On { strategies } if self.queues.cqs[cq].cohort.is_some() => Some(strategies),
            _ => None,
        }
    }

    /// Every admitted workload the preemptor's policies let it take: its
    /// own queue's first (few, and they decide whether looking at the rest
    /// of the cohort can help at all), then those of the cohort's queues
    /// that borrow what is short.
    fn candidate_pool(
        &self,
        cq: CqId,
        id: WlId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        fair: bool,
        now: Millis,
    ) -> Pool<'_> {
        // Only the (flavor, resource) pairs that are short decide who can be
        // a victim and whose queue counts as borrowing (as in Kueue): a queue
        // borrowing cpu is no victim for a shortage of GPUs.
        let frs = &self.short_of(cq, usage, base);
        let me = self.wl(id);
        let domain_admitted: usize = self.domain(cq).map(|m| self.queues.cqs[m].admitted.len()).sum();
        let mut pool = Pool {
            candidates: Vec::with_capacity(domain_admitted),
            protected: 0,
            until: None,
        };
        if self.queues.cqs[cq].spec.preemption.within_cluster_queue != WithinClusterQueue::Never {
            self.collect_candidates(cq, cq, me, frs, now, &mut pool);
        }
        if !self.cohort_can_give(cq, usage, base, &pool.candidates, fair) {
            return pool;
        }
        // Under fair sharing only queues whose side of the tree has at
        // least the preemptor's share can give anything.
        let sources: Vec<CqId> = if fair {
            self.fair_sources(cq, usage, base)
        } else {
            self.domain(cq).collect()
        };
        for m in sources {
            // Under fair sharing, a queue with nothing admitted before
            // this cycle gives nothing (see collect_candidates).
            if fair && self.queues.cqs[m].admitted.len() == self.queues.cqs[m].admitted_now {
                continue;
            }
            // Only queues that borrow these resources give anything back.
            if m != cq && self.queue_borrows_any(m, frs, Some(base)) {
                self.collect_candidates(m, cq, me, frs, now, &mut pool);
            }
        }
        pool
    }

    /// Whether the cohort's other queues can give the preemptor anything.
    /// Reclaiming needs it to end within its nominal quota even after
    /// every own-queue candidate (`own`) is gone, unless fair sharing's
    /// strategies decide; otherwise only borrowWithinCohort can take from
    /// other queues.
    fn cohort_can_give(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        own: &[Candidate<'_>],
        fair: bool,
    ) -> bool {
        let q = &self.queues.cqs[cq];
        let policy = q.spec.preemption;
        if q.cohort.is_none() {
            return false;
        }
        let reclaim = policy.reclaim_within_cohort != ReclaimWithinCohort::Never;
        let reclaim_feasible = reclaim
            && usage.iter().all(|&(s, amount)| {
                let slot = &q.quota.slots[s];
                let removable: Amount = own
                    .iter()
                    .filter_map(|c| match &self.wl(c.id).state {
                        State::Admitted(h) => h.usage.iter().find(|(fr, _)| *fr == slot.fr).map(|(_, a)| *a),
                        _ => None,
                    })
                    .sum();
                let delta = base.slot.get(&(cq, s)).copied().unwrap_or(0);
                slot.effective() + delta - removable + amount <= slot.nominal
            });
        // Under fair sharing a borrowing preemptor may reclaim too: the
        // share strategies decide.
        reclaim_feasible || (reclaim && fair) || policy.borrow_within_cohort != BorrowWithinCohort::Never
    }

    /// Under fair sharing: the victims the share strategies allow, each
    /// with why it was taken.
    fn fair_victim_set(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
        strategies: FairShareStrategies,
    ) -> Option<Vec<(WlId, PreemptionReason)>> {
        let victims = self.fair_victims(cq, usage, base, candidates, strategies)?;
        let reason = |c: &Candidate<'_>| {
            if c.cq == cq {
                PreemptionReason::InClusterQueue
            } else {
                PreemptionReason::InCohortFairSharing
            }
        };
        Some(
            victims
                .into_iter()
                .map(|i| (candidates[i].id, reason(&candidates[i])))
                .collect(),
        )
    }

    /// By priority: first without borrowing (reclaiming what the cohort
    /// borrowed), then borrowing (preempting lower-priority work elsewhere
    /// to borrow). Reclaiming (ending within nominal) is tried first only
    /// when there is someone to reclaim from; with own-queue candidates
    /// alone, requiring the preemptor to end within nominal would evict
    /// more than needed.
    fn priority_victim_set(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
    ) -> Option<Vec<(WlId, PreemptionReason)>> {
        let within_nominal_possible = usage
            .iter()
            .all(|&(s, a)| a <= self.queues.cqs[cq].quota.slots[s].nominal)
            && candidates.iter().any(|c| c.cq != cq && c.reclaim_ok);
        for within_nominal in [true, false] {
            if within_nominal && !within_nominal_possible {
                continue;
            }
            let allowed = |c: &Candidate| c.cq == cq || if within_nominal { c.reclaim_ok } else { c.borrow_ok };
            if let Some(victims) = self.greedy_victims(cq, usage, base, candidates, &allowed, within_nominal) {
                let reason = |c: &Candidate<'_>| {
                    if c.cq == cq {
                        PreemptionReason::InClusterQueue
                    } else if within_nominal {
                        PreemptionReason::InCohortReclamation
                    } else {
                        PreemptionReason::InCohortReclaimWhileBorrowing
                    }
                };
                return Some(
                    victims
                        .into_iter()
                        .map(|i| (candidates[i].id, reason(&candidates[i])))
                        .collect(),
                );
            }
        }
        None
    }

    /// The (flavor, resource) pairs of `usage` that do not fit in `base`:
    /// only those decide who can be a victim and whose queue counts as
    /// borrowing (as in Kueue).
    pub(super) fn short_of(&self, cq: CqId, usage: &[(usize, Amount)], base: &Overlay) -> Vec<FrKey> {
        usage
            .iter()
            .filter(|&&(s, amount)| !self.fits_overlay(base, cq, &[(s, amount)], false))
            .map(|&(s, _)| self.queues.cqs[cq].quota.slots[s].fr)
            .collect()
    }

    /// Removes candidates in order until the workload fits, then adds back
    /// (latest first) every one it does not need. Returns candidate indices.
    pub(super) fn greedy_victims(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
        allowed: &dyn Fn(&Candidate<'_>) -> bool,
        within_nominal: bool,
    ) -> Option<Vec<usize>> {
        let frs = self.short_of(cq, usage, base);
        let mut ov = base.clone();
        let mut removed: Vec<usize> = Vec::new();
        let mut fits = false;
        // Victim order: borrowing queues first, then lower priority, then the
        // cost (order.rs), then most recently admitted, then UID. The pass
        // usually stops after a few, so the order comes lazily from a heap
        // instead of a full sort.
        let mut keys: Vec<Reverse<VictimOrder<'_>>> = Vec::with_capacity(candidates.len());
        keys.extend(candidates.iter().enumerate().filter(|(_, c)| allowed(c)).map(|(i, c)| {
            Reverse(VictimOrder::new(
                c.in_borrowing_queue,
                c.priority,
                c.cost,
                c.admitted_at,
                c.uid,
                i,
            ))
        }));
        let mut order = BinaryHeap::from(keys);
        while let Some(Reverse(VictimOrder { index: i, .. })) = order.pop() {
            let c = &candidates[i];
            // Take from another queue only while it still borrows.
            if c.cq != cq && !self.queue_borrows_any(c.cq, &frs, Some(&ov)) {
                continue;
            }
            self.overlay_holding(&mut ov, c.id, -1);
            removed.push(i);
            if self.fits_overlay(&ov, cq, usage, within_nominal) {
                fits = true;
                break;
            }
        }
        if !fits {
            return None;
        }
        Some(self.minimal_victims(cq, usage, within_nominal, candidates, &removed, &mut ov))
    }

    /// Makes a victim set (`removed`, indices into `candidates`, gone in
    /// `ov`) minimal: gives back, latest first, every victim the workload
    /// still fits without (the last one taken is needed).
    pub(super) fn minimal_victims(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        within_nominal: bool,
        candidates: &[Candidate<'_>],
        removed: &[usize],
        ov: &mut Overlay,
    ) -> Vec<usize> {
        let mut needed = removed.to_vec();
        for k in (0..removed.len().saturating_sub(1)).rev() {
            let id = candidates[removed[k]].id;
            self.overlay_holding(ov, id, 1);
            if self.fits_overlay(ov, cq, usage, within_nominal) {
                needed.retain(|&x| x != removed[k]);
            } else {
                self.overlay_holding(ov, id, -1);
            }
        }
        needed
    }
}
