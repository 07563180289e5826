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
//! - The head reserves, among its flavors, the one that frees first, one
//!   its nominal quota can hold before one where it must borrow (the most
//!   preferred among equals).
//! - The start is computed afresh at every check (re-planned when work
//!   ends early or late); a reservation ends when its head leaves the
//!   queue or is admitted, and a workload ahead of it that does not fit
//!   takes it over. A reservation never preempts anything by itself.
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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::decision::{
    Backfilled, Cycle, Eviction, EvictionReason, Explanation, FlavorVerdict, PendingReason, ReservedNodes,
    ReservedStart, TopologyDomain,
};
use crate::model::{Amount, Backfill, Millis};

use super::flavor::Choice;
use super::overlay::Overlay;
use super::placement::{NodeDelta, NodeId, Placement};
use super::preemption::policy::{Rank, within_cluster_queue};
use super::state::{Holding, OrderKey, State, Timer, Wl};
use super::{CqId, Engine, EngineError, WlId};

/// The reservations of queues with backfill on, and the workloads that
/// went ahead of one by ending before it: this rule's state.
#[derive(Clone, Default)]
pub(super) struct Reservations {
    by_cq: BTreeMap<CqId, Reservation>,
    ahead: BTreeMap<WlId, Ahead>,
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

/// The quota one queue's head holds from its start.
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

/// A head as its start is computed: its queue, what it needs and, with
/// node placement, its flavors.
#[derive(Clone, Copy)]
struct Head<'a> {
    cq: CqId,
    id: WlId,
    usage: &'a [(usize, Amount)],
    choice: Option<&'a Choice>,
}

/// What a head could use as releases are counted: quota, and with node
/// placement room on nodes (from what leaves).
struct Room {
    quota: Overlay,
    nodes: Option<NodeDelta>,
}

/// Quota released at a time: an admitted workload's, or the newcomer's.
#[derive(Clone, Copy)]
enum Release {
    Holding(WlId),
    Newcomer,
}

impl Engine {
    /// Whether `cq`'s first workload that does not fit reserves quota.
    pub(super) fn reserves(&self, cq: CqId) -> bool {
        self.queues.cqs[cq].spec.backfill == Backfill::Reserve
    }

    /// Candidate `key`, which no flavor of `cq` fits, reserves the usage
    /// of the flavor among `usages` (one per flavor, in preference order,
    /// with its flavors) that it fits first once admitted work ends (with
    /// node placement, on the nodes too), when its queue reserves and no
    /// workload ahead of it holds the queue's reservation.
    /// Returns its explanation as the head (`Reserved`), or `None` when it
    /// holds no reservation.
    pub(super) fn reserve(
        &mut self,
        cq: CqId,
        key: &OrderKey,
        usages: Vec<(Vec<(usize, Amount)>, Choice)>,
        why: &Explanation,
        now: Millis,
        out: &mut Cycle,
    ) -> Option<Explanation> {
        if usages.is_empty()
            || !matches!(
                why.reason,
                PendingReason::NoFit | PendingReason::WaitingForEvictions | PendingReason::NoPlacement
            )
        {
            return None;
        }
        let kept = match self.reservations.by_cq.get(&cq) {
            Some(r) if self.is_head(cq, r) && r.head < *key => return None,
            Some(r) if r.head == *key => Some((r.backfilled, r.promised)),
            Some(_) => {
                self.release_reservation(cq, out);
                None
            }
            None => None,
        };
        // The earliest start, on a flavor whose nominal quota can hold it
        // if one can (elsewhere it must borrow, and may be reclaimed);
        // among equal ones, the most preferred flavor.
        let nodes = self.placement_on();
        let ((start, placement), usage, choice) = (usages.into_iter())
            .filter_map(|(usage, choice)| {
                let choice = nodes.then_some(choice);
                let head = Head {
                    cq,
                    id: key.id,
                    usage: &usage,
                    choice: choice.as_ref(),
                };
                Some((self.plan(head, None, now)?, usage, choice))
            })
            .min_by_key(|((start, _), usage, _)| (self.beyond_nominal(cq, usage), *start))?;
        let on = match (&placement, &choice) {
            (Some(p), Some(c)) => self.reserved_nodes(c, p),
            _ => Vec::new(),
        };
        let (backfilled, promised) = kept.unwrap_or((0, start));
        let r = Reservation {
            head: key.clone(),
            name: self.wl(key.id).name.clone(),
            usage,
            choice,
            flavors: why.flavors.clone(),
            on: on.clone(),
            backfilled,
            promised,
        };
        self.evict_overruns(cq, &r, now);
        self.reservations.by_cq.insert(cq, r);
        Some(Explanation {
            reason: PendingReason::Reserved {
                start,
                backfilled,
                nodes: on,
            },
            flavors: why.flavors.clone(),
        })
    }

    /// Whether `n` may be admitted now: `Ok(None)` when it is behind no
    /// reservation, `Ok(Some((queue, note)))` when it is behind `queue`'s
    /// but delays none beyond what that queue allows, `Err(why)` when it
    /// would.
    pub(super) fn backfill_verdict(
        &self,
        n: Newcomer<'_>,
        now: Millis,
    ) -> Result<Option<(CqId, Backfilled)>, Explanation> {
        let mut note = None;
        for (&rcq, r) in self.reservations_over(n) {
            let head = self.head(rcq, r);
            let Some(base) = self.start_of(head, None, now) else {
                continue;
            };
            let declared = self.wl(n.key.id).expected_runtime;
            let ends = match base {
                ReservedStart::At(_) => declared.map(|d| now.saturating_add(d.max(0))),
                ReservedStart::AfterUndeclared => None,
            };
            let with = self.start_of(head, Some((n, ends)), now);
            let delay = match (with, base) {
                (Some(w), _) if w <= base => Some(0),
                (Some(ReservedStart::At(w)), ReservedStart::At(b)) if w <= self.latest_start(rcq, r) => Some(w - b),
                _ => None,
            };
            let Some(delay) = delay else {
                return Err(Explanation::new(PendingReason::WouldDelayReservation {
                    reserved_for: r.name.to_string(),
                    start: base,
                    declared,
                }));
            };
            let ends_before = matches!((base, ends), (ReservedStart::At(t), Some(e)) if e <= t);
            note.get_or_insert((
                rcq,
                Backfilled {
                    reserved_for: r.name.clone(),
                    start: base,
                    ends_before,
                    delay,
                    queue: self.queues.cqs[rcq].name.clone(),
                    due: ends.filter(|_| ends_before),
                },
            ));
        }
        Ok(note)
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

    /// Whether candidate `key` is held back by its own queue's reservation:
    /// behind it, and not declaring a run time that ends before it starts.
    /// Held back, it may neither preempt nor run reduced; one that ends
    /// before the start may, as its room is free again by then.
    pub(super) fn behind_own_reservation(&self, cq: CqId, key: &OrderKey, now: Millis) -> bool {
        let Some(r) = self.reservations.by_cq.get(&cq) else {
            return false;
        };
        if !(r.head < *key && self.is_head(cq, r)) {
            return false;
        }
        let ends = self.wl(key.id).expected_runtime.map(|d| now.saturating_add(d.max(0)));
        !matches!((self.start_of(self.head(cq, r), None, now), ends), (Some(ReservedStart::At(t)), Some(e)) if e <= t)
    }

    /// A workload admitted behind `rcq`'s reservation: counted on it, and
    /// its head told how many went ahead meanwhile.
    pub(super) fn note_backfill(&mut self, id: WlId, rcq: CqId, note: Backfilled, out: &mut Cycle) {
        if let Some(&i) = self.turn.admitted_now.get(&id) {
            out.admitted[i].backfill = Some(note.clone());
        }
        if let Some(due) = note.due {
            self.hold_to_due(id, rcq, note.reserved_for.clone(), due);
        }
        let Some(r) = self.reservations.by_cq.get_mut(&rcq) else {
            return;
        };
        r.backfilled += 1;
        let (head, backfilled, flavors, nodes) = (r.head.id, r.backfilled, r.flavors.clone(), r.on.clone());
        let e = Explanation {
            reason: PendingReason::Reserved {
                start: note.start,
                backfilled,
                nodes,
            },
            flavors,
        };
        self.explain(head, Arc::new(e), out);
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
        let gone: Vec<CqId> = (self.reservations.by_cq.iter())
            .filter(|(cq, r)| !self.is_head(**cq, r))
            .map(|(cq, _)| *cq)
            .collect();
        for cq in gone {
            self.reservations.by_cq.remove(&cq);
            self.wake_domain(cq);
        }
        // Kept while running, unless its queue now reserves for another
        // head (after a restart, before the reservation is made again).
        let by_cq = &self.reservations.by_cq;
        let wls = &self.workloads.wls;
        self.reservations.ahead.retain(|&v, a| {
            by_cq.get(&a.cq).is_none_or(|r| r.name == a.head)
                && matches!(wls.get(v), Some(Some(w)) if w.uid == a.uid && matches!(w.state, State::Admitted(_)))
        });
    }

    /// Workloads that went ahead of `cq`'s reservation `r` by their
    /// declared run time, are past it and keep its head from fitting now:
    /// evicted (reported by the next cycle), so that a run time declared
    /// too short cannot hold a reservation off. Nothing when the head would
    /// not fit without them either.
    fn evict_overruns(&mut self, cq: CqId, r: &Reservation, now: Millis) {
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
        let mut room = Room {
            quota: self.evictions_overlay(cq),
            nodes: r.choice.as_ref().map(|_| self.leaving_delta().clone()),
        };
        for &v in &overdue {
            self.release_holding(&mut room, v);
        }
        if self.fits_head(self.head(cq, r), &room).is_none() {
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

    /// The reservation of `cq` given up for a workload ahead of its head:
    /// the old head is told plainly why it waits.
    fn release_reservation(&mut self, cq: CqId, out: &mut Cycle) {
        let Some(r) = self.reservations.by_cq.remove(&cq) else {
            return;
        };
        if self.is_head(cq, &r) {
            let e = Explanation {
                reason: PendingReason::NoFit,
                flavors: r.flavors,
            };
            self.explain(r.head.id, Arc::new(e), out);
        }
    }

    /// Whether the reservation's head still waits in `cq`.
    fn is_head(&self, cq: CqId, r: &Reservation) -> bool {
        matches!(self.workloads.wls.get(r.head.id), Some(Some(w))
            if w.uid == r.head.uid && matches!(w.state, State::Pending) && w.cq == Some(cq))
    }

    /// Whether `usage` exceeds `cq`'s nominal quota on some slot: there it
    /// can only ever borrow.
    fn beyond_nominal(&self, cq: CqId, usage: &[(usize, Amount)]) -> bool {
        let slots = &self.queues.cqs[cq].quota.slots;
        usage.iter().any(|&(slot, amount)| amount > slots[slot].nominal)
    }

    /// Whether `n` is behind a live reservation of its domain.
    pub(super) fn behind_any_reservation(&self, n: Newcomer<'_>) -> bool {
        self.reservations_over(n).next().is_some()
    }

    /// The live reservations of `n`'s domain that `n` is behind.
    fn reservations_over<'a>(&'a self, n: Newcomer<'a>) -> impl Iterator<Item = (&'a CqId, &'a Reservation)> + 'a {
        let domain: Vec<CqId> = if self.reservations.by_cq.is_empty() {
            Vec::new()
        } else {
            self.domain(n.cq).collect()
        };
        self.reservations.by_cq.iter().filter(move |(rcq, r)| {
            domain.contains(rcq) && r.head < *n.key && (**rcq == n.cq || n.borrowing) && self.is_head(**rcq, r)
        })
    }

    /// `cq`'s reservation `r` as its start is computed.
    fn head<'a>(&self, cq: CqId, r: &'a Reservation) -> Head<'a> {
        Head {
            cq,
            id: r.head.id,
            usage: &r.usage,
            choice: r.choice.as_ref(),
        }
    }

    /// When `head` fits: the first release after which it does, with
    /// `with` (a newcomer and its declared end) admitted now; `None` when
    /// it does not fit even once everything admitted has ended.
    fn start_of(
        &self,
        head: Head<'_>,
        with: Option<(Newcomer<'_>, Option<Millis>)>,
        now: Millis,
    ) -> Option<ReservedStart> {
        self.plan(head, with, now).map(|(start, _)| start)
    }

    /// [`Engine::start_of`], with where the head's pods go then (with node
    /// placement).
    fn plan(
        &self,
        head: Head<'_>,
        with: Option<(Newcomer<'_>, Option<Millis>)>,
        now: Millis,
    ) -> Option<(ReservedStart, Option<Placement>)> {
        let mut room = Room {
            quota: Overlay::default(),
            nodes: head.choice.map(|_| self.leaving_delta().clone()),
        };
        if let Some((n, _)) = with {
            self.take_newcomer(&mut room, n, 1);
        }
        if let Some(p) = self.fits_head(head, &room) {
            return Some((ReservedStart::At(now), p));
        }
        let newcomer = with.map(|(n, ends)| (n, self.newcomer_release(head, n, ends, now)));
        let (timed, undeclared) = self.releases(head, newcomer.and_then(|(_, end)| end), now);
        let mut i = 0;
        while i < timed.len() {
            let t = timed[i].0;
            while i < timed.len() && timed[i].0 == t {
                match (timed[i].1, newcomer) {
                    (Release::Holding(v), _) => self.release_holding(&mut room, v),
                    (Release::Newcomer, Some((n, _))) => self.take_newcomer(&mut room, n, -1),
                    (Release::Newcomer, None) => {}
                }
                i += 1;
            }
            if let Some(p) = self.fits_head(head, &room) {
                return Some((ReservedStart::At(t), p));
            }
        }
        for v in undeclared {
            self.release_holding(&mut room, v);
        }
        self.fits_head(head, &room).map(|p| (ReservedStart::AfterUndeclared, p))
    }

    /// Whether `head` fits `room`: `Some` with where its pods go (`None`
    /// without node placement), or `None`.
    fn fits_head(&self, head: Head<'_>, room: &Room) -> Option<Option<Placement>> {
        if !self.fits_overlay(&room.quota, head.cq, head.usage, false) {
            return None;
        }
        match (head.choice, &room.nodes) {
            (Some(choice), Some(delta)) => self.place(head.cq, head.id, choice, delta).ok().map(Some),
            _ => Some(None),
        }
    }

    /// An admitted workload's quota and room given back (an evicting
    /// one's room is counted as leaving already).
    fn release_holding(&self, room: &mut Room, v: WlId) {
        self.overlay_holding(&mut room.quota, v, -1);
        if let Some(delta) = &mut room.nodes
            && !matches!(self.wl(v).state, State::Evicting(_))
        {
            self.footprint(v, 1, delta);
        }
    }

    /// The newcomer's quota and room taken (`sign` 1) or given back (-1).
    fn take_newcomer(&self, room: &mut Room, n: Newcomer<'_>, sign: Amount) {
        self.overlay_usage(&mut room.quota, n.cq, n.usage, sign);
        if let (Some(delta), Some(p)) = (&mut room.nodes, n.placement) {
            for &(node, ps, pods) in &p.pods {
                for (r, a) in self.per_pod(n.key.id, ps) {
                    delta.add(node, r, -sign * a * Amount::from(pods));
                }
            }
        }
    }

    /// The nodes of placement `p` by the flavor of each pod set's nodes
    /// in `choice` (one with node labels, else its first) and domain.
    fn reserved_nodes(&self, choice: &Choice, p: &Placement) -> Vec<ReservedNodes> {
        let mut by: BTreeMap<(String, Option<(String, String)>), NodeSet> = BTreeMap::new();
        for &(node, ps, _) in &p.pods {
            let groups = choice.0.get(ps).map(Vec::as_slice).unwrap_or(&[]);
            let spec = |f| self.catalog.flavors.get(&f);
            let flavor = (groups.iter())
                .find(|g| spec(g.flavor).is_some_and(|s| !s.node_labels.is_empty()))
                .or(groups.first())
                .and_then(|g| spec(g.flavor))
                .map_or_else(String::new, |s| s.name.clone());
            let domain = (p.domains.iter())
                .find(|(i, _)| *i == ps)
                .map(|(_, d)| (d.key.clone(), d.value.clone()));
            by.entry((flavor, domain)).or_default().insert(node);
        }
        by.into_iter()
            .map(|((flavor, domain), nodes)| ReservedNodes {
                flavor,
                nodes: nodes.len() as u32,
                domain: domain.map(|(key, value)| TopologyDomain { key, value }),
            })
            .collect()
    }

    /// The domain's admitted workloads with a known release (the
    /// newcomer's, `with_end`, among them), in time order, and those
    /// without one. A workload releases its quota for `head`:
    /// - evicting: now;
    /// - one `head` may preempt by its queue's `withinClusterQueue`: once
    ///   its minimum runtime is over, or at its declared end if sooner;
    /// - else at its declared end (admitted + run time), or never known.
    fn releases(&self, head: Head<'_>, with_end: Option<Millis>, now: Millis) -> (Vec<(Millis, Release)>, Vec<WlId>) {
        let cq = head.cq;
        let mut timed: Vec<(Millis, Release)> = with_end.map(|e| (e, Release::Newcomer)).into_iter().collect();
        let mut undeclared = Vec::new();
        for m in self.domain(cq) {
            for &v in &self.queues.cqs[m].admitted {
                let wl = self.wl(v);
                let declared_end = |h: &Holding| wl.expected_runtime.map(|rt| h.admitted_at.saturating_add(rt.max(0)));
                let end = match &wl.state {
                    State::Evicting(_) => Some(now),
                    State::Admitted(h) => {
                        earliest(declared_end(h), self.preemptible_at(cq, head.id, m, v, h.admitted_at))
                    }
                    _ => None,
                };
                match end {
                    Some(t) => timed.push((t.max(now), Release::Holding(v))),
                    None => undeclared.push(v),
                }
            }
        }
        timed.sort_by_key(|&(t, r)| (t, release_id(r)));
        (timed, undeclared)
    }

    /// When newcomer `n`, admitted now, releases its quota for `cq`'s
    /// `head`: at its declared end `ends`, or once `head` may preempt it if
    /// sooner.
    fn newcomer_release(&self, head: Head<'_>, n: Newcomer<'_>, ends: Option<Millis>, now: Millis) -> Option<Millis> {
        earliest(ends, self.preemptible_at(head.cq, head.id, n.cq, n.key.id, now))
    }

    /// When `head`, waiting in `cq`, may preempt workload `v` of queue `m`
    /// admitted at `admitted_at`: once `m`'s minimum runtime is over, when
    /// both are in `cq` and its `withinClusterQueue` allows it; `None`
    /// otherwise (preemption across queues depends on who borrows then,
    /// which a start cannot count on).
    fn preemptible_at(&self, cq: CqId, head: WlId, m: CqId, v: WlId, admitted_at: Millis) -> Option<Millis> {
        let policy = self.queues.cqs[cq].spec.preemption.within_cluster_queue;
        let (h, w) = (self.wl(head), self.wl(v));
        let rank = |w: &Wl| Rank {
            priority: w.priority,
            queued_at: w.ts,
        };
        (m == cq && !self.foreign_id(v) && within_cluster_queue(policy, rank(h), rank(w)))
            .then(|| admitted_at.saturating_add(self.queues.cqs[m].spec.min_runtime.max(0)))
    }

    fn overlay_usage(&self, ov: &mut Overlay, cq: CqId, usage: &[(usize, Amount)], sign: Amount) {
        for &(slot, amount) in usage {
            self.overlay_add(ov, cq, slot, sign * amount);
        }
    }
}

type NodeSet = BTreeSet<NodeId>;

fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn release_id(r: Release) -> WlId {
    match r {
        Release::Holding(v) => v,
        Release::Newcomer => WlId::MAX,
    }
}
