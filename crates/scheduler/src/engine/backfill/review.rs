//! Reservations between judgements of their heads: re-planned at the
//! start of every cycle and after every pass of their domain that
//! admitted something, so that none is lost or moved without its head
//! being told.
//!
//! ```text
//!   its head no longer fits even once all   given up: its head is told it waits for
//!     admitted work ends (quota or nodes      quota, and its domain is looked at again
//!     shrank, work ahead of it took room,     (judged again within the cycle, it may
//!     a reservation ahead of it declares      reserve again, going on from the start it
//!     no run time)                            was told)
//!   start later than it was told, by a      its head is told the new start, and the
//!     minute or more, or now unknown          cycle reports it (`Cycle::moved`), with the
//!                                             workloads that went ahead of it since
//! ```
//!
//! A workload admitted behind a reservation does not move it (that is the
//! rule), except within its queue's `backfill.maxDelayMinutes`, which
//! [`Engine::note_backfill`] tells. What can move one: work of higher
//! priority or queued earlier, another queue of the cohort within its
//! nominal quota, admitted work running past its declared run time (its
//! end is counted as now), and quota or nodes that shrink.

use std::sync::Arc;

use crate::decision::{Cycle, PendingReason, ReservationMoved, ReservedStart};
use crate::model::Millis;

use super::super::state::State;
use super::super::{CqId, Engine};
use super::{Reservation, reserved_explanation};

/// How much later than it was told a start must be for its head to be
/// told again: work that runs past its declared run time moves a start a
/// little at every check, and the text says minutes.
const WORTH_TELLING: Millis = 60_000;

impl Engine {
    /// The reservations of the domains this cycle looks at re-planned
    /// before any of their candidates is judged (at the start of a cycle).
    /// Elsewhere no one is judged who could overtake one: each is
    /// re-planned once its domain is looked at.
    pub(in crate::engine) fn review_reservations(&mut self, now: Millis, out: &mut Cycle) {
        let queues: Vec<CqId> = (self.reservations.by_cq.keys().copied())
            .filter(|&cq| self.domain(cq).any(|m| self.turn.dirty.contains(&m)))
            .collect();
        for cq in queues {
            self.review_queue(cq, now, out);
        }
    }

    /// The reservations of `members` (a domain) re-planned after its pass
    /// admitted something: work admitted ahead of them may have moved them.
    pub(in crate::engine) fn review_domain(&mut self, members: &[CqId], now: Millis, out: &mut Cycle) {
        if self.reservations.by_cq.is_empty() {
            return;
        }
        for &cq in members {
            if self.reservations.by_cq.contains_key(&cq) {
                self.review_queue(cq, now, out);
            }
        }
    }

    /// `cq`'s live reservations re-planned in order: one whose head no
    /// longer fits once all admitted work ends (or the reservations ahead
    /// of it, which may never end) is given up, its head told and its
    /// domain looked at again; one that moved later is told.
    pub(super) fn review_queue(&mut self, cq: CqId, now: Millis, out: &mut Cycle) {
        let list = self.live_reservations(cq);
        let mut before = Vec::with_capacity(list.len());
        let mut kept = Vec::with_capacity(list.len());
        let mut given_up = false;
        for mut r in list {
            self.note_went_ahead(cq, &mut r, out);
            let planned = self.plan(self.head(cq, &r, &before), None, now);
            let Some(start) = planned.as_ref().map(|(s, _)| *s) else {
                // Told it waits for quota; judged again (this cycle, when
                // its domain has yet to be looked at), it may reserve
                // again, going on from what it was told.
                self.tell_no_reservation(cq, r, out);
                given_up = true;
                continue;
            };
            // A deeper head that fits now but waits for one ahead of it
            // is told that, not a start: it keeps its place, and the start
            // it is told next is news, not a move.
            let told_reserved = matches!(
                self.current_explanation(r.head.id).map(|e| &e.reason),
                Some(PendingReason::Reserved { .. })
            );
            if !told_reserved {
                r.announced = start;
                r.went_ahead.clear();
            } else if self.moved_later(r.announced, start, now) {
                self.explain(r.head.id, Arc::new(reserved_explanation(&r, start)), out);
                self.tell_if_moved(cq, &mut r, start, now, out);
            } else if start <= r.announced {
                // What went ahead of it did not move it.
                r.went_ahead.clear();
            }
            before.push(self.as_earlier(cq, &r, planned));
            kept.push(r);
        }
        if kept.is_empty() {
            self.reservations.by_cq.remove(&cq);
        } else {
            self.reservations.by_cq.insert(cq, kept);
        }
        if given_up {
            self.wake_domain(cq);
        }
    }

    /// Reservation `r` of `cq`, whose head is told it starts at `start`:
    /// reported moved when that is later than it was told (by enough),
    /// with the workloads that went ahead of it since (admitted this cycle
    /// among them); announced when it is no later.
    pub(super) fn tell_if_moved(
        &mut self,
        cq: CqId,
        r: &mut Reservation,
        start: ReservedStart,
        now: Millis,
        out: &mut Cycle,
    ) {
        if start <= r.announced {
            // No later than it was told: what it is told from now on, and
            // what went ahead of it did not move it.
            r.announced = start;
            r.went_ahead.clear();
            return;
        }
        if !self.moved_later(r.announced, start, now) {
            return;
        }
        self.note_went_ahead(cq, r, out);
        out.moved.push(ReservationMoved {
            uid: r.head.uid.clone(),
            from: r.announced,
            to: start,
            ahead: std::mem::take(&mut r.went_ahead),
        });
        r.announced = start;
    }

    /// Whether `start` is later than `announced` by enough to tell: a
    /// minute past the later of it and `now`, or unknown where it was
    /// known.
    pub(super) fn moved_later(&self, announced: ReservedStart, start: ReservedStart, now: Millis) -> bool {
        match (announced, start) {
            (ReservedStart::At(a), ReservedStart::At(s)) => s >= a.max(now).saturating_add(WORTH_TELLING),
            (ReservedStart::At(_), ReservedStart::AfterUndeclared) => true,
            (ReservedStart::AfterUndeclared, _) => false,
        }
    }

    /// The workloads admitted so far this cycle ahead of `cq`'s
    /// reservation `r` (of its queue and before its head in queue order,
    /// or of another queue of its domain within nominal quota), among
    /// those that went ahead of it.
    fn note_went_ahead(&self, cq: CqId, r: &mut Reservation, out: &Cycle) {
        if out.admitted.is_empty() {
            return;
        }
        let domain: Vec<CqId> = self.domain(cq).collect();
        let admitted = (out.admitted.iter())
            .filter_map(|a| {
                let id = *self.workloads.by_uid.get(&a.uid)?;
                let wl = self.wl(id);
                let State::Admitted(h) = &wl.state else { return None };
                let ahead = if h.cq == cq {
                    wl.key(id) < r.head
                } else {
                    domain.contains(&h.cq) && !a.borrowing
                };
                ahead.then(|| wl.name.clone())
            })
            .collect::<Vec<_>>();
        for name in admitted {
            if !r.went_ahead.contains(&name) {
                r.went_ahead.push(name);
            }
        }
    }
}
