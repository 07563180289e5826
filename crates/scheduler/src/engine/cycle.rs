//! The admission cycle: timers fire, preemptors whose victims are gone are
//! admitted, then every dirty cohort domain is scheduled once. Within a
//! domain each candidate, in the order of [`super::order`], is admitted
//! ([`super::flavor`]), held ([`super::stop`]), blocked
//! ([`super::fifo`]), given victims ([`super::preemption`]) or told why
//! it waits ([`super::explain`]).

use super::*;

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
        self.budget = max_decisions.max(1);
        self.fire_timers(now);
        self.wake_freed_flavors();
        self.complete_claims(now, &mut out);
        let dirty = std::mem::take(&mut self.dirty);
        let order: Vec<CqId> = match self.resume_after.take() {
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
                self.dirty.extend(order[n..].iter().filter(|q| !done.contains(q)));
                self.resume_after = last;
                break;
            }
            let members: Vec<CqId> = self.domain(cq).collect();
            done.extend(members.iter().copied());
            last = members.iter().copied().max();
            if self.schedule_domain(&members, now, &mut out) {
                self.resume_after = last;
            }
        }
        self.budget = usize::MAX;
        // Evictions decided outside a cycle (drains), unless the workload
        // finished, was removed or completed its eviction meanwhile.
        for ev in std::mem::take(&mut self.buffered_evictions) {
            let still = self
                .by_uid
                .get(&ev.uid)
                .is_some_and(|&id| matches!(self.wl(id).state, State::Evicting(_)));
            if still {
                out.evicted.push(ev);
            }
        }
        for id in std::mem::take(&mut self.buffered_notes) {
            if let Some(Some(wl)) = self.wls.get(id)
                && let Some(e) = &wl.explanation
            {
                out.pending_changed.push((wl.uid.clone(), e.clone()));
            }
        }
        out.next_wakeup = if self.dirty.is_empty() {
            self.timers.first().map(|(t, _)| *t)
        } else {
            // Work arrived during the cycle (a withdrawn admission requeued,
            // a claim dropped): cycle again right away.
            Some(now)
        };
        if !self.admitted_now.is_empty() {
            for q in &mut self.cqs {
                q.admitted_now = 0;
            }
        }
        self.admitted_now.clear();
        if !self.withdrawn.is_empty() {
            self.withdrawn.sort_unstable();
            let mut next = 0;
            let mut index = 0;
            out.admitted.retain(|_| {
                let keep = self.withdrawn.get(next) != Some(&index);
                if !keep {
                    next += 1;
                }
                index += 1;
                keep
            });
            self.withdrawn.clear();
        }
        out
    }

    pub(super) fn fire_timers(&mut self, now: Millis) {
        while let Some(&(t, timer)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
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
        let keys: Vec<OrderKey> = self.preempting.iter().cloned().collect();
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
            .any(|(v, uid)| matches!(self.wls.get(*v), Some(Some(w)) if w.uid == *uid && matches!(w.state, State::Evicting(_))));
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
        let usage: Vec<(usize, Amount)> = h.usage.iter().map(|&(fr, a)| (self.cqs[cq].slot_of[&fr], a)).collect();
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
                    self.dirty.insert(cq);
                    return;
                }
            };
            let State::Preempting(mut h) = std::mem::replace(&mut self.wl_mut(id).state, State::Pending) else {
                unreachable!("checked above")
            };
            h.assignment = self.with_domains(h.assignment.clone(), &placement);
            h.placement = placement;
            self.preempting.remove(&key);
            self.cqs[cq].preempting -= 1;
            for &(slot, amount) in &usage {
                self.add_usage(cq, slot, amount, -amount);
            }
            let shape = self.wl(id).shape;
            self.cqs[cq].remove_pending(&key, shape);
            self.admit_holding(id, *h, now, out);
            // StrictFIFO queues were blocked behind it.
            self.wake_queue(cq);
        } else {
            // Quota shrank meanwhile: try again from scratch.
            self.drop_claim(id);
            self.dirty.insert(cq);
        }
    }

    /// The cycle in progress has made as many decisions as it may.
    fn spent(&self, out: &Cycle) -> bool {
        out.admitted.len() + out.preempted.len() + out.evicted.len() >= self.budget
    }

    /// Schedules one cohort domain; `true` when the budget ran out before
    /// every candidate was looked at.
    pub(super) fn schedule_domain(&mut self, members: &[CqId], now: Millis, out: &mut Cycle) -> bool {
        // Candidate lists, each in queue order: for a woken queue, its loose
        // workloads and one list per parked shape; for the others, only the
        // fresh ones.
        // A woken queue's lists are read lazily from its live sets (a
        // skipped shape costs one look, not one per member); a non-woken
        // queue's fresh set is moved out, so workloads requeued during this
        // cycle stay fresh for the next.
        let mut lists: Vec<(CqId, Source)> = Vec::new();
        for &m in members {
            let cq = &mut self.cqs[m];
            if cq.woken {
                cq.fresh.clear();
                if !cq.loose.is_empty() {
                    lists.push((m, Source::Loose));
                }
                lists.extend(cq.shaped.keys().map(|&shape| (m, Source::Shape(shape))));
            } else if !cq.fresh.is_empty() {
                lists.push((m, Source::Owned(std::mem::take(&mut cq.fresh))));
            }
            cq.woken = false;
        }
        if lists.is_empty() {
            return false;
        }
        let mut blocked = Blocked::default();
        // Per queue, shapes that failed this cycle: availability only shrinks
        // within a cycle, and later workloads of the same shape have no more
        // preemption candidates, so they fail the same way. The rest of a
        // failed shape's parked list is skipped without a look.
        let mut failed: BTreeSet<(CqId, u32)> = BTreeSet::new();
        // Global order over the lists, nominal quota before borrowing.
        let many = lists.iter().any(|(c, _)| *c != lists[0].0);
        let mut merge = match self.cqs[lists[0].0].cohort {
            Some(c) if many && self.fair_sharing_on() => {
                let root = self.root_of(c);
                if self.cohorts[root].children.is_empty() {
                    Merge::Flat(HeadMerge::new(lists.len(), many, true))
                } else {
                    Merge::Fair(Tournament::new(self, root, many))
                }
            }
            _ => Merge::Flat(HeadMerge::new(lists.len(), many, false)),
        };
        for (i, (cq, source)) in lists.iter().enumerate() {
            if let Some(first) = self.list_next(*cq, source, None) {
                merge.push(self, *cq, first, i);
            }
        }
        loop {
            if self.spent(out) {
                self.cut_short(lists);
                return true;
            }
            let Some((key, i)) = merge.pop(self, |i| lists[i].0) else {
                break;
            };
            let cq = lists[i].0;
            let list_shape = match lists[i].1 {
                Source::Shape(shape) => Some(shape),
                _ => None,
            };
            let id = key.id;
            let strict = self.cqs[cq].spec.strategy == QueueingStrategy::StrictFifo;
            if let Some(shape) = list_shape
                && failed.contains(&(cq, shape))
                && !blocked.contains(cq)
            {
                // Parked under this shape, which failed again: nothing to do
                // for the rest of the list either.
                continue;
            }
            if let Some(next) = self.list_next(cq, &lists[i].1, Some(&key)) {
                merge.push(self, cq, next, i);
            }
            // The workload may have left the queue during this cycle.
            if !matches!(self.wl(id).state, State::Pending) || self.wl(id).cq != Some(cq) {
                continue;
            }
            if blocked.contains(cq) {
                let e = self.blocked_expl.clone();
                self.explain(id, e, out);
                continue;
            }
            if let Some(held) = self.held(cq, id) {
                self.explain(id, held, out);
                continue;
            }
            // A StrictFIFO queue waits behind a preemptor that is ahead in
            // order; a newcomer ahead of it (higher priority) is tried.
            if strict && self.cqs[cq].preempting > 0 && self.preemptor_ahead(cq, &key) {
                blocked.block(cq);
                let e = self.blocked_expl.clone();
                self.explain(id, e, out);
                continue;
            }
            let shape = self.wl(id).shape;
            if failed.contains(&(cq, shape)) {
                self.park_shaped(cq, id, out);
                blocked.block_if_strict(strict, cq);
                continue;
            }
            let e = match self.assign(cq, id) {
                // Borrowing waits for the second pass while a peer has idle
                // nominal quota; with fair sharing always, so that borrowers
                // are served in share order, not by who came first.
                Ok(attempt)
                    if merge.first_pass()
                        && attempt.borrowing
                        && (merge.fair() || self.peers_have_idle_quota(cq, &attempt)) =>
                {
                    merge.defer(cq, key, i);
                    continue;
                }
                Ok(attempt) => match self.try_place(cq, id, &attempt.choice) {
                    Ok(placement) => {
                        self.admit(cq, id, attempt, placement, now, out);
                        merge.touched(self, cq);
                        continue;
                    }
                    Err(Unplaced { room, after_evictions }) => {
                        // Another flavor whose nodes have room, before
                        // waiting or preempting for this one.
                        if let Some((other, placement)) = self.placed_alternative(cq, id, &attempt) {
                            self.admit(cq, id, other, placement, now, out);
                            merge.touched(self, cq);
                            continue;
                        }
                        if after_evictions {
                            let mut e = self.no_room_explanation(cq, id, &room);
                            e.reason = PendingReason::WaitingForEvictions;
                            e
                        } else {
                            if self.cqs[cq].spec.preemption.can_preempt()
                                && let Some((victims, placement)) = self.placement_victims(
                                    cq,
                                    id,
                                    &attempt.choice,
                                    &attempt.usage,
                                    attempt.borrowing,
                                    Vec::new(),
                                    now,
                                )
                            {
                                let touched = self.claim_queues(cq, &victims);
                                self.start_claim(cq, id, victims, attempt, placement, now, out);
                                for q in touched {
                                    merge.touched(self, q);
                                }
                                blocked.block_if_strict(strict, cq);
                                continue;
                            }
                            self.no_room_explanation(cq, id, &room)
                        }
                    }
                },
                Err(AssignError::NotCovered { pod_set, resource }) => {
                    Explanation::new(PendingReason::ResourceNotCovered {
                        pod_set: pod_set.to_string(),
                        resource: self.resources.name(resource).to_string(),
                    })
                }
                Err(AssignError::NoFit {
                    options,
                    mut verdicts,
                    never,
                }) => {
                    let mut reason = if never {
                        PendingReason::NeverFits
                    } else {
                        PendingReason::NoFit
                    };
                    if !never && self.cqs[cq].spec.preemption.can_preempt() {
                        match self.preempt(cq, id, &options, now) {
                            PreemptOutcome::Victims(victims, attempt, placement) => {
                                let touched = self.claim_queues(cq, &victims);
                                self.start_claim(cq, id, victims, attempt, placement, now, out);
                                for q in touched {
                                    merge.touched(self, q);
                                }
                                blocked.block_if_strict(strict, cq);
                                continue;
                            }
                            PreemptOutcome::WaitForEvictions => {
                                reason = PendingReason::WaitingForEvictions;
                            }
                            PreemptOutcome::Impossible { protected, until } => {
                                if let Some(t) = until {
                                    self.timers.insert((t, Timer::WakeCq(cq)));
                                }
                                verdicts.push(FlavorVerdict {
                                    pod_set: String::new(),
                                    flavor: "preemption".to_string(),
                                    verdict: Verdict::PreemptionNotPossible { protected },
                                });
                            }
                        }
                    } else if !never && self.evicting_in_domain(cq) {
                        // Evictions under way may free enough.
                        let ov = self.evictions_overlay(cq);
                        if let Some(usage) = self.first_option_usage(cq, id, &options)
                            && self.fits_overlay(&ov, cq, &usage, false)
                        {
                            reason = PendingReason::WaitingForEvictions;
                        }
                    }
                    Explanation {
                        reason,
                        flavors: verdicts,
                    }
                }
            };
            // Neither whole nor by preemption: with fewer pods, if it may.
            if e.reason != PendingReason::WaitingForEvictions
                && self.reducible(id)
                && let Some((attempt, placement)) = self.try_partial(cq, id)
            {
                // Off its lists under the shape it was queued with.
                self.cqs[cq].remove_pending(&key, shape);
                self.admit(cq, id, attempt, placement, now, out);
                merge.touched(self, cq);
                continue;
            }
            let e = self.unadmitted_explanation(cq, id, e);
            failed.insert((cq, shape));
            self.set_shape_explanation(cq, shape, Arc::new(e), out);
            self.park_shaped(cq, id, out);
            blocked.block_if_strict(strict, cq);
        }
        false
    }

    /// A domain's cycle stopped by the budget: its queues stay dirty, a
    /// fresh list's workloads that were not admitted or parked stay fresh,
    /// and a woken queue stays woken, so the next cycle looks at everything
    /// this one did not decide.
    fn cut_short(&mut self, lists: Vec<(CqId, Source)>) {
        for (cq, source) in lists {
            let q = &mut self.cqs[cq];
            match source {
                Source::Owned(set) => {
                    let left: Vec<OrderKey> = set.into_iter().filter(|k| q.loose.contains(k)).collect();
                    q.fresh.extend(left);
                }
                Source::Loose | Source::Shape(_) => q.woken = true,
            }
            self.dirty.insert(cq);
        }
    }

    /// The next candidate of a list after `after` (the first if `None`).
    pub(super) fn list_next(&self, cq: CqId, source: &Source, after: Option<&OrderKey>) -> Option<OrderKey> {
        let q = &self.cqs[cq];
        let set = match source {
            Source::Owned(set) => set,
            Source::Loose => &q.loose,
            Source::Shape(shape) => q.shaped.get(shape)?,
        };
        match after {
            None => set.first().cloned(),
            Some(k) => set.range((Bound::Excluded(k), Bound::Unbounded)).next().cloned(),
        }
    }

    /// The queues whose usage a claim changes: the preemptor's, and its
    /// victims' (an admission of this cycle is withdrawn at once).
    fn claim_queues(&self, cq: CqId, victims: &[(WlId, PreemptionReason)]) -> Vec<CqId> {
        let mut queues = vec![cq];
        for (v, _) in victims {
            if let State::Admitted(h) | State::Evicting(h) = &self.wl(*v).state
                && !queues.contains(&h.cq)
            {
                queues.push(h.cq);
            }
        }
        queues
    }
}
