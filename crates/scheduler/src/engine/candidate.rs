//! What becomes of one candidate of a domain's pass
//! ([`Engine::schedule_domain`]), in this order: flavors that fit
//! ([`super::flavor`]) and nodes that hold it ([`super::placement`]) admit
//! it whole, unless it borrows while a peer leaves nominal quota idle (it
//! waits for the pass's second round); failing that, victims
//! ([`super::preemption`]) give it a claim; failing that, fewer pods
//! ([`super::partial`]) if it may run reduced; failing that, it is parked
//! with the explanation of why it waits ([`super::explain`]), and its shape
//! is not tried again this cycle.

use super::cycle::Pass;
use std::sync::Arc;

use crate::decision::{Cycle, Explanation, FlavorVerdict, PendingReason, PreemptionReason, Verdict};
use crate::model::{Amount, Millis};

use super::backfill::Newcomer;
use super::flavor::{AssignError, Attempt, Choice, FlavorOption};
use super::placement::Placement;
use super::placement::Unplaced;
use super::preemption::PreemptOutcome;
use super::state::{OrderKey, State, Timer};
use super::{CqId, Engine, WlId};

impl Engine {
    /// Tries candidate `key` of list `list` of `pass`.
    pub(super) fn try_candidate(&mut self, pass: &mut Pass, key: OrderKey, list: usize, now: Millis, out: &mut Cycle) {
        let (cq, id) = (pass.lists[list].0, key.id);
        let behind = self.behind_own_reservation(cq, &key, now);
        let mut reserve = Vec::new();
        let why = match self.assign(cq, id) {
            // Borrowing waits for the second pass while a peer has idle
            // nominal quota; with fair sharing always, so that borrowers
            // are served in share order, not by who came first.
            Ok(attempt)
                if pass.merge.first_pass()
                    && attempt.borrowing
                    && (pass.merge.fair() || self.peers_have_idle_quota(cq, &attempt)) =>
            {
                pass.merge.defer(cq, key, list);
                return;
            }
            Ok(attempt) => {
                // Its quota fits; it may still reserve the nodes it lacks.
                let fits = self
                    .reserves(cq)
                    .then(|| (attempt.usage.clone(), attempt.choice.clone()));
                match self.admit_fitting(pass, cq, &key, attempt, behind, now, out) {
                    Some(why) => {
                        reserve.extend(fits.filter(|_| why.reason == PendingReason::NoPlacement));
                        why
                    }
                    None => return,
                }
            }
            Err(AssignError::NotCovered { pod_set, resource }) => Explanation::new(PendingReason::ResourceNotCovered {
                pod_set: pod_set.to_string(),
                resource: self.catalog.resources.name(resource).to_string(),
            }),
            Err(AssignError::NoFit {
                options,
                verdicts,
                never,
            }) => {
                if !never && self.reserves(cq) {
                    reserve = self.choices_per_flavor(cq, id, &options).collect();
                }
                match self.preempt_for(pass, cq, id, &options, verdicts, never, !behind, now, out) {
                    Some(why) => why,
                    None => return,
                }
            }
        };
        let parking = Parking { behind, reserve };
        self.reduce_or_park(pass, cq, &key, why, parking, now, out);
    }

    /// A candidate that fits its quota, unless it would delay a
    /// reservation (then told so, and `None`): admitted on nodes
    /// ([`Engine::admit_on_nodes`]); `None` once decided, else why it waits.
    #[allow(clippy::too_many_arguments)]
    fn admit_fitting(
        &mut self,
        pass: &mut Pass,
        cq: CqId,
        key: &OrderKey,
        attempt: Attempt,
        behind: bool,
        now: Millis,
        out: &mut Cycle,
    ) -> Option<Explanation> {
        if let Some(why) = self.overruns_budget(cq, key.id, &attempt.usage) {
            self.explain(key.id, Arc::new(why), out);
            return None;
        }
        let mut newcomer = Newcomer {
            cq,
            key,
            usage: &attempt.usage,
            borrowing: attempt.borrowing,
            placement: None,
        };
        // With node placement, where it would go counts against the nodes
        // a reservation needs.
        let placement = (self.placement_on() && self.behind_any_reservation(newcomer))
            .then(|| self.try_place(cq, key.id, &attempt.choice).ok())
            .flatten();
        newcomer.placement = placement.as_ref();
        let ahead_of = match self.backfill_verdict(newcomer, now) {
            Ok(ahead_of) => ahead_of,
            Err(why) => {
                self.explain(key.id, Arc::new(why), out);
                return None;
            }
        };
        let held_back = behind || !ahead_of.is_empty();
        let why = self.admit_on_nodes(pass, cq, key.id, attempt, held_back, now, out);
        if why.is_none() && !ahead_of.is_empty() {
            self.note_backfill(key.id, ahead_of, now, out);
        }
        why
    }

    /// A candidate whose flavors fit its quota: admitted on them where its
    /// pods fit on nodes, else on another flavor whose nodes have room,
    /// else given victims on nodes; `None` once decided, else why it waits.
    /// One `held_back` by a reservation takes only what was checked
    /// against it: no other flavor, no victims.
    #[allow(clippy::too_many_arguments)]
    fn admit_on_nodes(
        &mut self,
        pass: &mut Pass,
        cq: CqId,
        id: WlId,
        attempt: Attempt,
        held_back: bool,
        now: Millis,
        out: &mut Cycle,
    ) -> Option<Explanation> {
        let Unplaced { room, after_evictions } = match self.try_place(cq, id, &attempt.choice) {
            Ok(placement) => {
                self.admit(cq, id, attempt, placement, now, out);
                pass.merge.touched(self, cq);
                return None;
            }
            Err(unplaced) => unplaced,
        };
        // Another flavor whose nodes have room, before waiting or
        // preempting for this one.
        if !held_back && let Some((other, placement)) = self.placed_alternative(cq, id, &attempt) {
            self.admit(cq, id, other, placement, now, out);
            pass.merge.touched(self, cq);
            return None;
        }
        if after_evictions {
            let mut why = self.no_room_explanation(cq, id, &room);
            why.reason = PendingReason::WaitingForEvictions;
            return Some(why);
        }
        if !held_back
            && self.queues.cqs[cq].spec.preemption.can_preempt()
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
            self.claim(pass, cq, id, victims, attempt, placement, now, out);
            return None;
        }
        Some(self.no_room_explanation(cq, id, &room))
    }

    /// A candidate no flavor fits: victims, when its queue may preempt and
    /// some make room; `None` once it has them, else why it waits (what
    /// each flavor lacks, and whether evictions under way may free enough).
    #[allow(clippy::too_many_arguments)]
    fn preempt_for(
        &mut self,
        pass: &mut Pass,
        cq: CqId,
        id: WlId,
        options: &[FlavorOption],
        mut verdicts: Vec<FlavorVerdict>,
        never: bool,
        may_preempt: bool,
        now: Millis,
        out: &mut Cycle,
    ) -> Option<Explanation> {
        let mut reason = if never {
            PendingReason::NeverFits
        } else {
            PendingReason::NoFit
        };
        if !never && may_preempt && self.queues.cqs[cq].spec.preemption.can_preempt() {
            match self.preempt(cq, id, options, now) {
                PreemptOutcome::Victims(victims, attempt, placement) => {
                    self.claim(pass, cq, id, victims, attempt, placement, now, out);
                    return None;
                }
                PreemptOutcome::WaitForEvictions => reason = PendingReason::WaitingForEvictions,
                PreemptOutcome::Impossible { protected, until } => {
                    if let Some(t) = until {
                        self.claims.timers.insert((t, Timer::WakeCq(cq)));
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
            if let Some(usage) = self.first_option_usage(cq, id, options)
                && self.fits_overlay(&ov, cq, &usage, false)
            {
                reason = PendingReason::WaitingForEvictions;
            }
        }
        Some(Explanation {
            reason,
            flavors: verdicts,
        })
    }

    /// The candidate claims the capacity its victims hold; the queues whose
    /// usage that changes are re-ranked, and a StrictFIFO queue waits
    /// behind its preemptor.
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &mut self,
        pass: &mut Pass,
        cq: CqId,
        id: WlId,
        victims: Vec<(WlId, PreemptionReason)>,
        attempt: Attempt,
        placement: Placement,
        now: Millis,
        out: &mut Cycle,
    ) {
        let touched = self.claim_queues(cq, &victims);
        self.start_claim(cq, id, victims, attempt, placement, now, out);
        for q in touched {
            pass.merge.touched(self, q);
        }
        pass.blocked.block_if_strict(self.is_strict(cq), cq);
    }

    /// Neither whole nor by preemption: admitted with fewer pods if it may
    /// run reduced and is behind no reservation of its queue; else parked
    /// under its shape with why it waits, and the shape marked failed for
    /// the rest of the pass; the queue's head may then reserve
    /// ([`Engine::reserve`]).
    #[allow(clippy::too_many_arguments)]
    fn reduce_or_park(
        &mut self,
        pass: &mut Pass,
        cq: CqId,
        key: &OrderKey,
        why: Explanation,
        parking: Parking,
        now: Millis,
        out: &mut Cycle,
    ) {
        let id = key.id;
        let shape = self.wl(id).shape;
        if why.reason != PendingReason::WaitingForEvictions
            && !parking.behind
            && self.reducible(id)
            && let Some((attempt, placement)) = self.try_partial(cq, id)
        {
            // Off its lists under the shape it was queued with.
            self.queues.cqs[cq].waiting.remove_pending(key, shape);
            self.admit(cq, id, attempt, placement, now, out);
            pass.merge.touched(self, cq);
            return;
        }
        let why = self.unadmitted_explanation(cq, id, why);
        let reserved = self.reserve(cq, key, parking.reserve, &why, now, out);
        pass.failed.insert((cq, shape));
        self.set_shape_explanation(cq, shape, Arc::new(why), out);
        self.park_shaped(cq, id, out);
        if let Some(head) = reserved {
            self.explain(id, Arc::new(head), out);
        }
        pass.blocked.block_if_strict(self.is_strict(cq), cq);
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

/// How a candidate that was not admitted whole is parked: whether it is
/// behind its queue's reservation, and the usages it may reserve as the
/// queue's head (one per flavor, in preference order), when its queue
/// reserves.
struct Parking {
    behind: bool,
    reserve: Vec<(Vec<(usize, Amount)>, Choice)>,
}
