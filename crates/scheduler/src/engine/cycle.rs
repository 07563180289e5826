//! The admission cycle: timers fire, preemptors whose victims are gone are
//! admitted, then every dirty cohort domain is scheduled once. Within a
//! domain each candidate, in the order of [`super::order`], is admitted
//! ([`super::flavor`]), held ([`super::stop`]), blocked
//! ([`super::fifo`]), given victims ([`super::preemption`]) or told why
//! it waits ([`super::explain`]).

use std::collections::BTreeSet;
use std::ops::Bound;

use crate::decision::Cycle;
use crate::model::{Amount, Millis, QueueingStrategy};

use super::fifo::Blocked;
use super::order::{HeadMerge, Merge, Order};
use super::overlay::Overlay;
use super::placement::ClaimPlacement;
use super::state::{OrderKey, State, Timer};
use super::tournament::Tournament;
use super::{CqId, Engine};

/// One cohort domain's pass in a cycle: its candidate lists, their order,
/// the StrictFIFO queues blocked, and the (queue, shape)s that failed:
/// availability only shrinks within a cycle, and later workloads of a
/// failed shape have no more preemption candidates, so they fail the same
/// way (the rest of its parked list is skipped without a look).
pub(super) struct Pass {
    pub(super) lists: Vec<(CqId, Source)>,
    pub(super) merge: Merge,
    pub(super) blocked: Blocked,
    pub(super) failed: BTreeSet<(CqId, u32)>,
}

/// Where a cycle's candidate list comes from.
pub(super) enum Source {
    /// A queue's fresh workloads, taken out for this cycle.
    Owned(BTreeSet<OrderKey>),
    /// A woken queue's workloads with their own explanation.
    Loose,
    /// A woken queue's workloads parked under one shape.
    Shape(u32),
}

impl Engine {
    /// Runs one admission cycle at time `now`: admits as many workloads as fit,
    /// in order, chooses victims for those that need preemption, and explains
    /// why the rest wait. Only queues touched since the last cycle are visited.
    pub fn schedule(&mut self, now: Millis) -> Cycle {
        self.schedule_within(now, usize::MAX)
    }

    /// [`Engine::schedule`], stopping once the cycle has made
    /// `max_decisions` decisions that a controller must write (admissions,
    /// preemptions, evictions; at least one is always allowed). What the
    /// cycle did not get to stays queued for the next one, in the same
    /// order; the next cycle starts with the cohort domains after the one
    /// this cycle stopped in, so each gets its turn. A controller whose
    /// writes are rate-limited passes about what it can write in the next
    /// second or two: decisions then stay close to what the API server
    /// has seen, and do not pile up in memory unwritten.
    pub fn schedule_within(&mut self, now: Millis, max_decisions: usize) -> Cycle {
        let mut out = Cycle::default();
        self.turn.budget = max_decisions.max(1);
        self.fire_timers(now);
        self.settle_reservations();
        self.wake_freed_flavors();
        self.complete_claims(now, &mut out);
        self.review_reservations(now, &mut out);
        let dirty = std::mem::take(&mut self.turn.dirty);
        let order: Vec<CqId> = match self.turn.resume_after.take() {
            Some(after) => dirty.range(after + 1..).chain(dirty.range(..=after)).copied().collect(),
            None => dirty.into_iter().collect(),
        };
        let mut done: BTreeSet<CqId> = BTreeSet::new();
        let mut last: Option<CqId> = None;
        for (n, &cq) in order.iter().enumerate() {
            if done.contains(&cq) {
                continue;
            }
            if self.spent(&out) {
                // Out of budget: the rest waits, still dirty.
                self.turn.dirty.extend(order[n..].iter().filter(|q| !done.contains(q)));
                self.turn.resume_after = last;
                break;
            }
            let members: Vec<CqId> = self.domain(cq).collect();
            done.extend(members.iter().copied());
            last = members.iter().copied().max();
            if self.schedule_domain(&members, now, &mut out) {
                self.turn.resume_after = last;
            }
        }
        self.turn.budget = usize::MAX;
        // Evictions decided outside a cycle (drains), unless the workload
        // finished, was removed or completed its eviction meanwhile.
        for ev in std::mem::take(&mut self.turn.buffered_evictions) {
            let still = self
                .workloads
                .by_uid
                .get(&ev.uid)
                .is_some_and(|&id| matches!(self.wl(id).state, State::Evicting(_)));
            if still {
                out.evicted.push(ev);
            }
        }
        for id in std::mem::take(&mut self.turn.buffered_notes) {
            if let Some(Some(wl)) = self.workloads.wls.get(id)
                && let Some(e) = &wl.explanation
            {
                out.pending_changed.push((wl.uid.clone(), e.clone()));
            }
        }
        out.next_wakeup = if self.turn.dirty.is_empty() {
            self.claims.timers.first().map(|(t, _)| *t)
        } else {
            // Work arrived during the cycle (a withdrawn admission requeued,
            // a claim dropped): cycle again right away.
            Some(now)
        };
        if !self.turn.admitted_now.is_empty() {
            for q in &mut self.queues.cqs {
                q.admitted_now = 0;
            }
        }
        self.turn.admitted_now.clear();
        if !self.turn.withdrawn.is_empty() {
            self.turn.withdrawn.sort_unstable();
            let mut next = 0;
            let mut index = 0;
            out.admitted.retain(|_| {
                let keep = self.turn.withdrawn.get(next) != Some(&index);
                if !keep {
                    next += 1;
                }
                index += 1;
                keep
            });
            self.turn.withdrawn.clear();
        }
        out
    }

    pub(super) fn fire_timers(&mut self, now: Millis) {
        while let Some(&(t, timer)) = self.claims.timers.first() {
            if t > now {
                break;
            }
            self.claims.timers.pop_first();
            match timer {
                Timer::WakeCq(cq) => self.wake_queue(cq),
                Timer::Backoff(id) => {
                    if matches!(self.wl(id).state, State::Backoff(_)) {
                        self.wl_mut(id).state = State::Pending;
                        self.enqueue(id);
                    }
                }
            }
        }
    }

    /// Admits preemptors whose victims are gone.
    pub(super) fn complete_claims(&mut self, now: Millis, out: &mut Cycle) {
        let keys: Vec<OrderKey> = self.claims.preempting.iter().cloned().collect();
        for key in keys {
            self.try_complete_claim(key, now, out);
        }
    }

    pub(super) fn try_complete_claim(&mut self, key: OrderKey, now: Millis, out: &mut Cycle) {
        let id = key.id;
        let State::Preempting(h) = &self.wl(id).state else {
            return;
        };
        let waiting = h
            .victims
            .iter()
            .any(|(v, uid)| matches!(self.workloads.wls.get(*v), Some(Some(w)) if w.uid == *uid && matches!(w.state, State::Evicting(_))));
        if waiting {
            return;
        }
        let cq = h.cq;
        if let Some(held) = self.held(cq, id) {
            // Hold admits nothing new, preemptors included.
            self.drop_claim(id);
            self.explain(id, held, out);
            return;
        }
        let usage: Vec<(usize, Amount)> = h
            .usage
            .iter()
            .map(|&(fr, a)| (self.queues.cqs[cq].quota.slot_of[&fr], a))
            .collect();
        // Check against what is really held now (evictions under way still
        // count), without the preemptor's own claim. Another preemptor's
        // claim may delay this one until its victims are gone too.
        let mut ov = Overlay::default();
        for &(slot, amount) in &usage {
            self.overlay_add(&mut ov, cq, slot, -amount);
        }
        if self.fits_overlay(&ov, cq, &usage, false) {
            let placement = match self.claim_placement(cq, id) {
                ClaimPlacement::Placed(p) => p,
                ClaimPlacement::Wait => return,
                ClaimPlacement::Lost => {
                    // Someone else took the room meanwhile: from scratch.
                    self.drop_claim(id);
                    self.turn.dirty.insert(cq);
                    return;
                }
            };
            let State::Preempting(mut h) = std::mem::replace(&mut self.wl_mut(id).state, State::Pending) else {
                unreachable!("checked above")
            };
            h.assignment = self.with_domains(h.assignment.clone(), &placement);
            h.placement = placement;
            self.claims.preempting.remove(&key);
            self.queues.cqs[cq].waiting.preempting -= 1;
            for &(slot, amount) in &usage {
                self.add_usage(cq, slot, amount, -amount);
                let fr = self.queues.cqs[cq].quota.slots[slot].fr;
                self.meter(id, cq, fr, amount, None);
            }
            let shape = self.wl(id).shape;
            self.queues.cqs[cq].waiting.remove_pending(&key, shape);
            self.admit_holding(id, *h, now, out);
            // StrictFIFO queues were blocked behind it.
            self.wake_queue(cq);
        } else {
            // Quota shrank meanwhile: try again from scratch.
            self.drop_claim(id);
            self.turn.dirty.insert(cq);
        }
    }

    /// The cycle in progress has made as many decisions as it may.
    fn spent(&self, out: &Cycle) -> bool {
        out.admitted.len() + out.preempted.len() + out.evicted.len() >= self.turn.budget
    }

    /// One cohort domain's turn in a cycle (Kueue's `schedule()` is the
    /// model): its candidates in one order, each admitted, given victims,
    /// reduced, or parked with why it waits. `true` when the cycle's
    /// budget stopped it before the end.
    pub(super) fn schedule_domain(&mut self, members: &[CqId], now: Millis, out: &mut Cycle) -> bool {
        // 1. The candidates: each queue's lists, in queue order.
        let lists = self.candidate_lists(members);
        if lists.is_empty() {
            return false;
        }
        // 2. One order over them: priority, then time; nominal quota before
        //    borrowing; with fair sharing, the share tournament.
        let mut pass = self.start_pass(lists);
        let admitted_before = out.admitted.len();
        loop {
            // 3. Within the cycle's budget, or the rest waits for the next.
            if self.spent(out) {
                self.cut_short(pass.lists);
                self.review_domain(members, now, out);
                return true;
            }
            // 4. The next candidate (its list's next one queued behind it).
            let Some((key, list)) = pass.merge.pop(self, |i| pass.lists[i].0) else {
                break;
            };
            // 5. Not tried when it left, its queue is blocked or held, or
            //    its shape already failed this cycle.
            if !self.screen(&mut pass, &key, list, out) {
                continue;
            }
            // 6. Admitted whole, by preemption or reduced; else parked with
            //    why (`candidate.rs`).
            self.try_candidate(&mut pass, key, list, now, out);
        }
        // 7. Reservations that what it admitted moved are told.
        if out.admitted.len() > admitted_before {
            self.review_domain(members, now, out);
        }
        false
    }

    /// Each member's candidate lists, in queue order: for a woken queue,
    /// its loose workloads and one list per parked shape; for the others,
    /// only the fresh ones. A woken queue's lists are read lazily from its
    /// live sets (a skipped shape costs one look, not one per member); a
    /// non-woken queue's fresh set is moved out, so workloads requeued
    /// during this cycle stay fresh for the next.
    fn candidate_lists(&mut self, members: &[CqId]) -> Vec<(CqId, Source)> {
        let mut lists: Vec<(CqId, Source)> = Vec::new();
        for &m in members {
            let cq = &mut self.queues.cqs[m];
            if cq.waiting.woken {
                cq.waiting.fresh.clear();
                if !cq.waiting.loose.is_empty() {
                    lists.push((m, Source::Loose));
                }
                lists.extend(cq.waiting.shaped.keys().map(|&shape| (m, Source::Shape(shape))));
            } else if !cq.waiting.fresh.is_empty() {
                lists.push((m, Source::Owned(std::mem::take(&mut cq.waiting.fresh))));
            }
            cq.waiting.woken = false;
        }
        lists
    }

    /// The domain's pass over `lists`: the global order (nominal quota
    /// before borrowing; the fair-sharing tournament when the domain is a
    /// cohort tree with fair sharing on), seeded with each list's first.
    fn start_pass(&self, lists: Vec<(CqId, Source)>) -> Pass {
        let many = lists.iter().any(|(c, _)| *c != lists[0].0);
        let mut merge = match self.queues.cqs[lists[0].0].cohort {
            Some(c) if many && self.fair_sharing_on() => {
                let root = self.root_of(c);
                if self.queues.cohorts[root].children.is_empty() {
                    Merge::new(Order::Flat(HeadMerge::new(lists.len(), many, true)))
                } else {
                    Merge::new(Order::Fair(Tournament::new(self, root, many)))
                }
            }
            _ => Merge::new(Order::Flat(HeadMerge::new(lists.len(), many, false))),
        };
        for (i, (cq, source)) in lists.iter().enumerate() {
            if let Some(first) = self.list_next(*cq, source, None) {
                merge.push(self, *cq, first, i);
            }
        }
        Pass {
            lists,
            merge,
            blocked: Blocked::default(),
            failed: BTreeSet::new(),
        }
    }

    /// Whether the candidate `key` popped from list `list` is tried now;
    /// queues its list's next first. Not tried: the rest of a list parked
    /// under a shape that failed again (dropped without a look), one that
    /// left the queue during the cycle, one behind a blocked StrictFIFO
    /// head or in a held queue (explained), one of a shape that failed
    /// this cycle (parked under it).
    #[inline]
    fn screen(&mut self, pass: &mut Pass, key: &OrderKey, list: usize, out: &mut Cycle) -> bool {
        let cq = pass.lists[list].0;
        if let Source::Shape(shape) = pass.lists[list].1
            && pass.failed.contains(&(cq, shape))
            && !pass.blocked.contains(cq)
        {
            return false;
        }
        if let Some(next) = self.list_next(cq, &pass.lists[list].1, Some(key)) {
            pass.merge.push(self, cq, next, list);
        }
        let id = key.id;
        // The workload may have left the queue during this cycle.
        if !matches!(self.wl(id).state, State::Pending) || self.wl(id).cq != Some(cq) {
            return false;
        }
        if pass.blocked.contains(cq) {
            let e = self.memo.blocked_expl.clone();
            self.explain(id, e, out);
            return false;
        }
        if let Some(held) = self.held(cq, id) {
            self.explain(id, held, out);
            return false;
        }
        // A StrictFIFO queue waits behind a preemptor that is ahead in
        // order; a newcomer ahead of it (higher priority) is tried.
        let strict = self.is_strict(cq);
        if strict && self.queues.cqs[cq].waiting.preempting > 0 && self.preemptor_ahead(cq, key) {
            pass.blocked.block(cq);
            let e = self.memo.blocked_expl.clone();
            self.explain(id, e, out);
            return false;
        }
        if pass.failed.contains(&(cq, self.wl(id).shape)) {
            self.park_shaped(cq, id, out);
            pass.blocked.block_if_strict(strict, cq);
            return false;
        }
        true
    }

    /// Whether `cq` is a StrictFIFO queue.
    #[inline]
    pub(super) fn is_strict(&self, cq: CqId) -> bool {
        self.queues.cqs[cq].spec.strategy == QueueingStrategy::StrictFifo
    }

    /// A domain's cycle stopped by the budget: its queues stay dirty, a
    /// fresh list's workloads that were not admitted or parked stay fresh,
    /// and a woken queue stays woken, so the next cycle looks at everything
    /// this one did not decide.
    fn cut_short(&mut self, lists: Vec<(CqId, Source)>) {
        for (cq, source) in lists {
            let q = &mut self.queues.cqs[cq];
            match source {
                Source::Owned(set) => {
                    let left: Vec<OrderKey> = set.into_iter().filter(|k| q.waiting.loose.contains(k)).collect();
                    q.waiting.fresh.extend(left);
                }
                Source::Loose | Source::Shape(_) => q.waiting.woken = true,
            }
            self.turn.dirty.insert(cq);
        }
    }

    /// The next candidate of a list after `after` (the first if `None`).
    pub(super) fn list_next(&self, cq: CqId, source: &Source, after: Option<&OrderKey>) -> Option<OrderKey> {
        let q = &self.queues.cqs[cq];
        let set = match source {
            Source::Owned(set) => set,
            Source::Loose => &q.waiting.loose,
            Source::Shape(shape) => q.waiting.shaped.get(shape)?,
        };
        match after {
            None => set.first().cloned(),
            Some(k) => set.range((Bound::Excluded(k), Bound::Unbounded)).next().cloned(),
        }
    }
}
