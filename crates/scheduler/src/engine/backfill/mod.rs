//! Backfill ([`Backfill::Reserve`]): the first workload of a queue that
//! does not fit reserves the quota it needs from the time it is expected to
//! fit, and a later workload is admitted only if that time would not move
//! (EASY backfill).
//!
//! ```text
//!   start(head, with):  the first instant at which the head's usage fits
//!                       the domain's ledger once what ends by then released:
//!     an evicting workload                       now
//!     one the head may preempt (its queue's      max(now, admitted + minimum runtime),
//!       withinClusterQueue)                        or its declared end if sooner
//!     an admitted one with a declared run time   max(now, admitted + run time)
//!     an admitted one without                    AfterUndeclared
//!     `with`, a candidate admitted now           as an admitted one, admitted now
//!                                                (never released without either)
//!
//!   a candidate behind the reservation is admitted iff start(head, with) <= start(head)
//! ```
//!
//! - Behind a reservation: a later workload (in queue order) of the same
//!   queue; a later one of another queue of the cohort only when it would
//!   borrow (within its own nominal quota it takes nothing the head may
//!   count on).
//! - When the start is `AfterUndeclared`, nobody knows when that is: a
//!   candidate must fit beside the reservation, whatever it declares.
//! - A workload behind its own queue's reservation neither preempts nor is
//!   admitted with fewer pods, unless its declared run time ends before the
//!   start: both would take room the reservation holds.
//! - With `depth` N above 1, the queue's first N workloads that do not fit
//!   each reserve; each later one's start counts the earlier ones as
//!   running from now until their start plus their declared run time
//!   ([`start`]), and a newcomer may delay none of those it is behind.
//! - The head reserves, among its flavors, the one that frees first, one
//!   its nominal quota can hold before one where it must borrow (the most
//!   preferred among equals).
//! - The start is computed afresh at every check (re-planned when work
//!   ends early or late); a reservation ends when its head leaves the
//!   queue or is admitted, a workload ahead of it that does not fit takes
//!   it over, and its head gives it up when it can no longer start (told
//!   why it waits). Between judgements of its head it is re-planned
//!   ([`review`]): a start that moved later is told to its head and
//!   reported (`Cycle::moved`). A reservation never preempts anything by
//!   itself.
//! - A workload that went ahead because its declared run time ends before
//!   the start, and runs past that run time, is evicted once the head is
//!   looked at (woken at that time) and would fit without it: a run time
//!   declared too short cannot hold a reservation off.
//! - With node placement, the head's pods must also fit on the nodes at the
//!   start: releases give back their room, a newcomer's pods take room
//!   where they would go, and a head whose quota fits but no node reserves
//!   too.
//! - A workload that went ahead by its run time is recorded in its
//!   admission; after a restart [`Engine::restore_backfill`] holds it to
//!   it again.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::decision::{
    Backfilled, Cycle, Eviction, EvictionReason, Explanation, FlavorVerdict, PendingReason, ReservedNodes,
    ReservedStart,
};
use crate::model::{Amount, Backfill, Millis};

use super::flavor::Choice;
use super::placement::Placement;
use super::state::{OrderKey, State, Timer};
use super::{CqId, Engine, EngineError, WlId};

mod review;
mod start;

use start::{Earlier, Head};

/// The reservations of queues with backfill on, and the workloads that
/// went ahead of one by ending before it: this rule's state.
#[derive(Clone, Default)]
pub(super) struct Reservations {
    /// Per queue, in queue order, at most its `backfill_depth`.
    by_cq: BTreeMap<CqId, Vec<Reservation>>,
    ahead: BTreeMap<WlId, Ahead>,
    /// Reservations given up this cycle for a workload ahead of their
    /// head: a head that reserves again within the cycle goes on from
    /// what it was told (the one write it gets shows only the new start).
    given_up: Vec<Reservation>,
}

/// A workload admitted ahead of `cq`'s reservation, held by `head`
/// (`namespace/name`), because its declared run time ends by `due`.
#[derive(Clone)]
struct Ahead {
    uid: Arc<str>,
    cq: CqId,
    head: Arc<str>,
    due: Millis,
}

/// The quota (and with node placement the room) one of a queue's first
/// workloads that do not fit holds from its start.
#[derive(Clone)]
struct Reservation {
    head: OrderKey,
    name: Arc<str>,
    /// What it needs, per slot of its queue (on the flavors that free
    /// first).
    usage: Vec<(usize, Amount)>,
    /// Those flavors, with node placement (its pods must also fit on
    /// their nodes at the start).
    choice: Option<Choice>,
    /// What each flavor lacked when it reserved (its explanation's detail).
    flavors: Vec<FlavorVerdict>,
    /// The nodes its pods go on at the start, as it was told.
    on: Vec<ReservedNodes>,
    /// Workloads admitted behind it since it reserved.
    backfilled: u32,
    /// The start it was first told: with its queue's
    /// `backfill_max_delay`, how late workloads admitted ahead of it may
    /// make it.
    promised: ReservedStart,
    /// The start it was last told it moved to (at first, `promised`):
    /// what a later start is measured against ([`review`]).
    announced: ReservedStart,
    /// Workloads (`namespace/name`) that went ahead of it since it was
    /// last told it moved: what it is told moved it.
    went_ahead: Vec<Arc<str>>,
}

/// A workload that would be admitted now: where, with what, until when.
#[derive(Clone, Copy)]
pub(super) struct Newcomer<'a> {
    pub(super) cq: CqId,
    pub(super) key: &'a OrderKey,
    pub(super) usage: &'a [(usize, Amount)],
    pub(super) borrowing: bool,
    /// Where its pods go, with node placement.
    pub(super) placement: Option<&'a Placement>,
}

/// A reservation a newcomer admitted now is behind, and what admitting it
/// means for that reservation.
pub(super) struct Behind {
    cq: CqId,
    head: Arc<str>,
    pub(super) note: Backfilled,
}

impl Engine {
    /// Whether `cq`'s first workload that does not fit reserves quota.
    pub(super) fn reserves(&self, cq: CqId) -> bool {
        self.queues.cqs[cq].spec.backfill == Backfill::Reserve
    }

    /// How many of `cq`'s first workloads that do not fit reserve.
    fn depth(&self, cq: CqId) -> usize {
        self.queues.cqs[cq].spec.backfill_depth.max(1) as usize
    }

    /// Candidate `key`, which no flavor of `cq` fits, reserves the usage
    /// of the flavor among `usages` (one per flavor, in preference order,
    /// with its flavors) that it fits first once admitted work ends (with
    /// node placement, on the nodes too), when its queue reserves and
    /// fewer than its depth of the queue's reservations are ahead of it.
    /// A reservation it pushes beyond the depth is given up, and so is
    /// its own when it can no longer start (never fits as things stand, or
    /// not even once all admitted work ends): `why` tells it so. Returns
    /// its explanation (`Reserved`), or `None` when it holds no
    /// reservation.
    pub(super) fn reserve(
        &mut self,
        cq: CqId,
        key: &OrderKey,
        usages: Vec<(Vec<(usize, Amount)>, Choice)>,
        why: &Explanation,
        now: Millis,
        out: &mut Cycle,
    ) -> Option<Explanation> {
        if matches!(
            why.reason,
            PendingReason::NeverFits | PendingReason::NeverPlaceable | PendingReason::ResourceNotCovered { .. }
        ) {
            self.give_up_reservation(cq, key);
            return None;
        }
        if usages.is_empty()
            || !matches!(
                why.reason,
                PendingReason::NoFit | PendingReason::WaitingForEvictions | PendingReason::NoPlacement
            )
        {
            return None;
        }
        let mut list = self.live_reservations(cq);
        let pos = list.partition_point(|r| r.head < *key);
        let kept = list.get(pos).filter(|r| r.head == *key).cloned();
        let resumed = (self.reservations.given_up.iter().position(|r| r.head == *key))
            .filter(|_| kept.is_none())
            .map(|i| self.reservations.given_up.swap_remove(i));
        if kept.is_none() && (pos >= self.depth(cq) || (pos > 0 && self.jumps_pending(cq, &list[pos - 1].head, key))) {
            return None;
        }
        let held = kept.is_some();
        let (_, before) = self.starts(cq, &list[..pos].iter().collect::<Vec<_>>(), now);
        let Some((start, mut r)) = self.plan_reservation(cq, key, usages, &before, why, kept.or(resumed), now) else {
            self.give_up_reservation(cq, key);
            return None;
        };
        self.evict_overruns(cq, &r, &before, now);
        self.tell_if_moved(cq, &mut r, start, now, out);
        let told = reserved_explanation(&r, start);
        if held {
            list[pos] = r;
            self.reservations.by_cq.insert(cq, list);
        } else {
            self.insert_reservation(cq, list, pos, r, now, out);
        }
        Some(told)
    }

    /// New reservation `r` of `cq` at `pos` of its `list`: one it pushes
    /// beyond the queue's depth is given up, and those behind it, which
    /// start later now, are told so.
    fn insert_reservation(
        &mut self,
        cq: CqId,
        mut list: Vec<Reservation>,
        pos: usize,
        r: Reservation,
        now: Millis,
        out: &mut Cycle,
    ) {
        let name = r.name.clone();
        list.insert(pos, r);
        let dropped = list.split_off(list.len().min(self.depth(cq)));
        let pushed_back = pos + 1 < list.len();
        for r in &mut list[pos + 1..] {
            r.went_ahead.push(name.clone());
        }
        self.reservations.by_cq.insert(cq, list);
        for r in dropped {
            self.tell_no_reservation(cq, r, out);
        }
        if pushed_back {
            self.review_queue(cq, now, out);
        }
    }

    /// `key`'s reservation behind `before`: the earliest start among
    /// `usages`, on a flavor whose nominal quota can hold it if one can
    /// (elsewhere it must borrow, and may be reclaimed), the most
    /// preferred among equals; what it was told and how many went ahead
    /// of it from the reservation it already holds (`kept`).
    #[allow(clippy::too_many_arguments)]
    fn plan_reservation(
        &self,
        cq: CqId,
        key: &OrderKey,
        usages: Vec<(Vec<(usize, Amount)>, Choice)>,
        before: &[Earlier],
        why: &Explanation,
        kept: Option<Reservation>,
        now: Millis,
    ) -> Option<(ReservedStart, Reservation)> {
        let nodes = self.placement_on();
        let ((start, placement), usage, choice) = (usages.into_iter())
            .filter_map(|(usage, choice)| {
                let choice = nodes.then_some(choice);
                let head = Head {
                    cq,
                    id: key.id,
                    usage: &usage,
                    choice: choice.as_ref(),
                    before,
                };
                Some((self.plan(head, None, now)?, usage, choice))
            })
            .min_by_key(|((start, _), usage, _)| (self.beyond_nominal(cq, usage), *start))?;
        let on = match (&placement, &choice) {
            (Some(p), Some(c)) => self.reserved_nodes(c, p),
            _ => Vec::new(),
        };
        let (backfilled, promised, announced, went_ahead) = match kept {
            Some(k) => (k.backfilled, k.promised, k.announced, k.went_ahead),
            None => (0, start, start, Vec::new()),
        };
        let r = Reservation {
            head: key.clone(),
            name: self.wl(key.id).name.clone(),
            usage,
            choice,
            flavors: why.flavors.clone(),
            on,
            backfilled,
            promised,
            announced,
            went_ahead,
        };
        Some((start, r))
    }

    /// Whether `n` may be admitted now: `Ok` with the reservations it is
    /// behind (none, or each one it delays by no more than its queue
    /// allows; the first is the note it is admitted with), `Err(why)`
    /// when it would delay one.
    pub(super) fn backfill_verdict(&self, n: Newcomer<'_>, now: Millis) -> Result<Vec<Behind>, Explanation> {
        let mut behind = Vec::new();
        let declared = self.wl(n.key.id).expected_runtime;
        for (rcq, list) in self.reservations_over(n) {
            let (base, _) = self.starts(rcq, &list, now);
            let mut before: Vec<Earlier> = Vec::with_capacity(list.len());
            for (r, base) in list.iter().zip(base) {
                // Before an unknown start nothing counts as ending.
                let ends = match base {
                    Some(ReservedStart::At(_)) => declared.map(|d| now.saturating_add(d.max(0))),
                    _ => None,
                };
                let planned = self.plan(self.head(rcq, r, &before), Some((n, ends)), now);
                let with = planned.as_ref().map(|(s, _)| *s);
                before.push(self.as_earlier(rcq, r, planned));
                let Some(base) = base else { continue };
                let delay = match (with, base) {
                    (Some(w), _) if w <= base => 0,
                    (Some(ReservedStart::At(w)), ReservedStart::At(b)) if w <= self.latest_start(rcq, r) => w - b,
                    _ => {
                        return Err(Explanation::new(PendingReason::WouldDelayReservation {
                            reserved_for: r.name.to_string(),
                            start: base,
                            declared,
                        }));
                    }
                };
                let ends_before = matches!((base, ends), (ReservedStart::At(t), Some(e)) if e <= t);
                let note = Backfilled {
                    reserved_for: r.name.clone(),
                    start: base,
                    ends_before,
                    delay,
                    queue: self.queues.cqs[rcq].name.clone(),
                    due: ends.filter(|_| ends_before),
                };
                behind.push(Behind {
                    cq: rcq,
                    head: r.name.clone(),
                    note,
                });
            }
        }
        Ok(behind)
    }

    /// The latest `cq`'s reservation `r` may start because of workloads
    /// admitted ahead of it: the start it was first told plus the queue's
    /// `backfill_max_delay`; none past an unknown start.
    fn latest_start(&self, cq: CqId, r: &Reservation) -> Millis {
        match (r.promised, self.queues.cqs[cq].spec.backfill_max_delay) {
            (ReservedStart::At(p), d) if d > 0 => p.saturating_add(d),
            _ => Millis::MIN,
        }
    }

    /// Whether candidate `key` is held back by its own queue's
    /// reservations: behind one, and not declaring a run time that ends
    /// before it starts. Held back, it may neither preempt nor run
    /// reduced; one that ends before every start it is behind may, as its
    /// room is free again by then.
    pub(super) fn behind_own_reservation(&self, cq: CqId, key: &OrderKey, now: Millis) -> bool {
        let Some(list) = self.reservations.by_cq.get(&cq) else {
            return false;
        };
        let ahead: Vec<&Reservation> = (list.iter()).filter(|r| r.head < *key && self.is_head(cq, r)).collect();
        if ahead.is_empty() {
            return false;
        }
        let ends = self.wl(key.id).expected_runtime.map(|d| now.saturating_add(d.max(0)));
        let (starts, _) = self.starts(cq, &ahead, now);
        !(starts.iter()).all(|s| matches!((s, ends), (Some(ReservedStart::At(t)), Some(e)) if e <= *t))
    }

    /// A workload admitted behind reservations: its admission carries the
    /// first one's note; each counts it, and its head is told how many
    /// went ahead meanwhile, and its start if the workload delays it
    /// (within its queue's max delay).
    pub(super) fn note_backfill(&mut self, id: WlId, behind: Vec<Behind>, now: Millis, out: &mut Cycle) {
        if let (Some(&i), Some(first)) = (self.turn.admitted_now.get(&id), behind.first()) {
            out.admitted[i].backfill = Some(first.note.clone());
        }
        if let Some(b) = behind.iter().find(|b| b.note.due.is_some()) {
            self.hold_to_due(id, b.cq, b.head.clone(), b.note.due.unwrap_or_default());
        }
        let name = self.wl(id).name.clone();
        for b in behind {
            let Some(i) =
                (self.reservations.by_cq.get(&b.cq)).and_then(|list| list.iter().position(|r| r.name == b.head))
            else {
                continue;
            };
            let mut r = self.reservations.by_cq.get_mut(&b.cq).expect("found")[i].clone();
            r.backfilled += 1;
            // Let ahead within the queue's max delay: it starts that much later.
            let start = match b.note.start {
                ReservedStart::At(t) => ReservedStart::At(t.saturating_add(b.note.delay)),
                s => s,
            };
            if b.note.delay > 0 && !r.went_ahead.contains(&name) {
                r.went_ahead.push(name.clone());
            }
            self.explain(r.head.id, Arc::new(reserved_explanation(&r, start)), out);
            self.tell_if_moved(b.cq, &mut r, start, now, out);
            self.reservations.by_cq.get_mut(&b.cq).expect("found")[i] = r;
        }
    }

    /// Workload `id` went ahead of `rcq`'s reservation, held by `head`,
    /// until `due`: that queue is looked at again then, and the workload
    /// may be evicted if it is still running and holds the head off.
    fn hold_to_due(&mut self, id: WlId, rcq: CqId, head: Arc<str>, due: Millis) {
        let uid = self.wl(id).uid.clone();
        self.reservations.ahead.insert(
            id,
            Ahead {
                uid,
                cq: rcq,
                head,
                due,
            },
        );
        self.claims.timers.insert((due, Timer::WakeCq(rcq)));
    }

    /// After a restart: admitted workload `uid` had gone ahead of the
    /// reservation of `cluster_queue`, held by `reserved_for`, until `due`
    /// (its admission's record); held to it again.
    pub fn restore_backfill(
        &mut self,
        uid: &str,
        cluster_queue: &str,
        reserved_for: &str,
        due: Millis,
    ) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        let Some(&rcq) = self.queues.cq_by_name.get(cluster_queue) else {
            return Err(EngineError::UnknownClusterQueue(cluster_queue.to_string()));
        };
        if matches!(self.wl(id).state, State::Admitted(_)) {
            self.hold_to_due(id, rcq, reserved_for.into(), due);
        }
        Ok(())
    }

    /// Drops reservations whose head left its queue (admitted, removed,
    /// preempting, moved); the workloads their domains held back are
    /// looked at again.
    pub(super) fn settle_reservations(&mut self) {
        self.reservations.given_up.clear();
        let changed: Vec<CqId> = (self.reservations.by_cq.iter())
            .filter(|(cq, list)| list.iter().any(|r| !self.is_head(**cq, r)))
            .map(|(cq, _)| *cq)
            .collect();
        for cq in changed {
            let list = self.live_reservations(cq);
            if list.is_empty() {
                self.reservations.by_cq.remove(&cq);
            } else {
                self.reservations.by_cq.insert(cq, list);
            }
            self.wake_domain(cq);
        }
        // Kept while running, unless its queue now reserves for other
        // heads (after a restart, before the reservations are made again).
        let by_cq = &self.reservations.by_cq;
        let wls = &self.workloads.wls;
        self.reservations.ahead.retain(|&v, a| {
            by_cq
                .get(&a.cq)
                .is_none_or(|list| list.iter().any(|r| r.name == a.head))
                && matches!(wls.get(v), Some(Some(w)) if w.uid == a.uid && matches!(w.state, State::Admitted(_)))
        });
    }

    /// Workloads that went ahead of `cq`'s reservation `r` (behind
    /// `before`) by their declared run time, are past it and keep its head
    /// from fitting now: evicted (reported by the next cycle), so that a
    /// run time declared too short cannot hold a reservation off. Nothing
    /// when the head would not fit without them either.
    fn evict_overruns(&mut self, cq: CqId, r: &Reservation, before: &[Earlier], now: Millis) {
        let overdue: Vec<WlId> = (self.reservations.ahead.iter())
            .filter(|(v, a)| {
                a.cq == cq
                    && a.head == r.name
                    && a.due <= now
                    && matches!(self.workloads.wls.get(**v), Some(Some(w)) if w.uid == a.uid && matches!(w.state, State::Admitted(_)))
            })
            .map(|(v, _)| *v)
            .collect();
        if overdue.is_empty() {
            return;
        }
        let head = self.head(cq, r, before);
        let mut room = self.room_now(head);
        for &v in &overdue {
            self.release_holding(&mut room, v);
        }
        if self.fits_head(head, &room).is_none() {
            return;
        }
        for v in overdue {
            self.reservations.ahead.remove(&v);
            if self.start_eviction(v).is_ok() {
                self.turn.buffered_evictions.push(Eviction {
                    uid: self.wl(v).uid.clone(),
                    reason: EvictionReason::BackfillOverrun,
                    queue: r.name.clone(),
                });
            }
        }
    }

    /// `key`'s reservation of `cq`, if it holds one, given up (its head is
    /// told why it waits by its caller); the workloads it held back are
    /// looked at again.
    fn give_up_reservation(&mut self, cq: CqId, key: &OrderKey) {
        let Some(list) = self.reservations.by_cq.get_mut(&cq) else {
            return;
        };
        let before = list.len();
        list.retain(|r| r.head != *key);
        if list.len() == before {
            return;
        }
        if list.is_empty() {
            self.reservations.by_cq.remove(&cq);
        }
        self.wake_domain(cq);
    }

    /// A reservation of `cq` given up for a workload ahead of its head:
    /// the head, still waiting, is told plainly why it waits.
    fn tell_no_reservation(&mut self, cq: CqId, r: Reservation, out: &mut Cycle) {
        if self.is_head(cq, &r) {
            let e = Explanation {
                reason: PendingReason::NoFit,
                flavors: r.flavors.clone(),
            };
            self.explain(r.head.id, Arc::new(e), out);
            self.reservations.given_up.push(r);
        }
    }

    /// Whether a workload of `cq` waits between `after` and `key` in queue
    /// order, holding no reservation (one that can never be admitted
    /// aside): `key` reserving deeper would jump it.
    fn jumps_pending(&self, cq: CqId, after: &OrderKey, key: &OrderKey) -> bool {
        let between = (Bound::Excluded(after), Bound::Excluded(key));
        (self.queues.cqs[cq].waiting.pending.range::<OrderKey, _>(between)).any(|k| {
            !matches!(
                self.current_explanation(k.id).map(|e| &e.reason),
                Some(
                    PendingReason::NeverFits | PendingReason::NeverPlaceable | PendingReason::ResourceNotCovered { .. }
                )
            )
        })
    }

    /// `cq`'s reservations whose heads still wait in it, in order.
    fn live_reservations(&self, cq: CqId) -> Vec<Reservation> {
        (self.reservations.by_cq.get(&cq).into_iter().flatten())
            .filter(|r| self.is_head(cq, r))
            .cloned()
            .collect()
    }

    /// Whether the reservation's head still waits in `cq`.
    fn is_head(&self, cq: CqId, r: &Reservation) -> bool {
        matches!(self.workloads.wls.get(r.head.id), Some(Some(w))
            if w.uid == r.head.uid && matches!(w.state, State::Pending) && w.cq == Some(cq))
    }

    /// Whether `n` is behind a live reservation of its domain.
    pub(super) fn behind_any_reservation(&self, n: Newcomer<'_>) -> bool {
        self.reservations_over(n).next().is_some()
    }

    /// The queues of `n`'s domain with live reservations `n` is behind
    /// (its own, and others only when it borrows), with those
    /// reservations: all of the queue's up to the last one `n` is behind.
    fn reservations_over<'a>(&'a self, n: Newcomer<'a>) -> impl Iterator<Item = (CqId, Vec<&'a Reservation>)> + 'a {
        let domain: Vec<CqId> = if self.reservations.by_cq.is_empty() {
            Vec::new()
        } else {
            self.domain(n.cq).collect()
        };
        (self.reservations.by_cq.iter())
            .filter(move |(rcq, _)| domain.contains(rcq) && (**rcq == n.cq || n.borrowing))
            .filter_map(move |(&rcq, list)| {
                let live: Vec<&Reservation> = (list.iter())
                    .filter(|r| r.head < *n.key && self.is_head(rcq, r))
                    .collect();
                (!live.is_empty()).then_some((rcq, live))
            })
    }
}

/// What the head of reservation `r` is told, starting at `start`.
fn reserved_explanation(r: &Reservation, start: ReservedStart) -> Explanation {
    Explanation {
        reason: PendingReason::Reserved {
            start,
            backfilled: r.backfilled,
            nodes: r.on.clone(),
        },
        flavors: r.flavors.clone(),
    }
}
