//! When a reservation's head starts: the first instant at which it fits
//! its queue's domain (and, with node placement, its pods fit on the
//! nodes), once what ends by then has released.
//!
//! ```text
//!   an evicting workload                       now
//!   one the head may preempt (its queue's      max(now, admitted + minimum runtime),
//!     withinClusterQueue)                        or its declared end if sooner
//!   an admitted one with a declared run time   max(now, admitted + run time)
//!   an admitted one without                    AfterUndeclared
//!   an earlier reservation of its queue        taken now; released at its start + its
//!     (with a depth above 1)                     declared run time (never without one)
//!   a newcomer admitted now                    as an admitted one, admitted now
//!                                              (never released without either)
//! ```
//!
//! An earlier reservation counts as running from now, not only from its
//! own start: a later head that could run before it would fit now, and
//! be admitted, rather than reserve.

use std::collections::{BTreeMap, BTreeSet};

use crate::decision::{ReservedNodes, ReservedStart, TopologyDomain};
use crate::model::{Amount, Millis};

use super::super::flavor::Choice;
use super::super::overlay::Overlay;
use super::super::placement::{NodeDelta, NodeId, Placement};
use super::super::preemption::policy::{Rank, within_cluster_queue};
use super::super::state::{Holding, State, Wl};
use super::super::{CqId, Engine, WlId};
use super::{Newcomer, Reservation};

/// A head as its start is computed: its queue, what it needs, with node
/// placement its flavors, and the reservations of its queue ahead of it.
#[derive(Clone, Copy)]
pub(super) struct Head<'a> {
    pub(super) cq: CqId,
    pub(super) id: WlId,
    pub(super) usage: &'a [(usize, Amount)],
    pub(super) choice: Option<&'a Choice>,
    pub(super) before: &'a [Earlier],
}

/// A reservation ahead of a head in its queue, as that head's start
/// counts it: taken now, released at `until` (never when `None`).
pub(super) struct Earlier {
    id: WlId,
    cq: CqId,
    usage: Vec<(usize, Amount)>,
    placement: Option<Placement>,
    until: Option<Millis>,
}

/// What a head could use as releases are counted: quota, and with node
/// placement room on nodes (from what leaves).
pub(super) struct Room {
    pub(super) quota: Overlay,
    pub(super) nodes: Option<NodeDelta>,
}

/// Quota released at a time: an admitted workload's, a reservation's
/// ahead of the head (by index), or the newcomer's.
#[derive(Clone, Copy)]
enum Release {
    Holding(WlId),
    Reserved(usize),
    Newcomer,
}

impl Engine {
    /// Reservation `r` of `cq` as its start is computed, behind `before`.
    pub(super) fn head<'a>(&self, cq: CqId, r: &'a Reservation, before: &'a [Earlier]) -> Head<'a> {
        Head {
            cq,
            id: r.head.id,
            usage: &r.usage,
            choice: r.choice.as_ref(),
            before,
        }
    }

    /// The start of each of `cq`'s reservations `list` (in queue order),
    /// each behind those before it, and all of them as a head behind them
    /// counts them.
    pub(super) fn starts(
        &self,
        cq: CqId,
        list: &[&Reservation],
        now: Millis,
    ) -> (Vec<Option<ReservedStart>>, Vec<Earlier>) {
        let mut before: Vec<Earlier> = Vec::with_capacity(list.len());
        let mut starts = Vec::with_capacity(list.len());
        for r in list {
            let planned = self.plan(self.head(cq, r, &before), None, now);
            starts.push(planned.as_ref().map(|(s, _)| *s));
            before.push(self.as_earlier(cq, r, planned));
        }
        (starts, before)
    }

    /// Reservation `r` of `cq`, planned as `planned`, as a head behind it
    /// counts it.
    pub(super) fn as_earlier(
        &self,
        cq: CqId,
        r: &Reservation,
        planned: Option<(ReservedStart, Option<Placement>)>,
    ) -> Earlier {
        let runtime = self.wl(r.head.id).expected_runtime;
        let (until, placement) = match planned {
            Some((ReservedStart::At(t), p)) => (runtime.map(|d| t.saturating_add(d.max(0))), p),
            Some((ReservedStart::AfterUndeclared, p)) => (None, p),
            None => (None, None),
        };
        Earlier {
            id: r.head.id,
            cq,
            usage: r.usage.clone(),
            placement,
            until,
        }
    }

    /// When `head` fits, and where its pods go then (with node
    /// placement): the first release after which it does, with `with` (a
    /// newcomer and its declared end) admitted now; `None` when it does
    /// not fit even once everything admitted has ended.
    pub(super) fn plan(
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
        for a in head.before {
            self.take_earlier(&mut room, a, 1);
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
                    (Release::Reserved(k), _) => self.take_earlier(&mut room, &head.before[k], -1),
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
    pub(super) fn fits_head(&self, head: Head<'_>, room: &Room) -> Option<Option<Placement>> {
        if !self.fits_overlay(&room.quota, head.cq, head.usage, false) {
            return None;
        }
        match (head.choice, &room.nodes) {
            (Some(choice), Some(delta)) => self.place(head.cq, head.id, choice, delta).ok().map(Some),
            _ => Some(None),
        }
    }

    /// `head`'s room now: with the evictions under way gone and the
    /// reservations ahead of it taken.
    pub(super) fn room_now(&self, head: Head<'_>) -> Room {
        let mut room = Room {
            quota: self.evictions_overlay(head.cq),
            nodes: head.choice.map(|_| self.leaving_delta().clone()),
        };
        for a in head.before {
            self.take_earlier(&mut room, a, 1);
        }
        room
    }

    /// An admitted workload's quota and room given back (an evicting
    /// one's room is counted as leaving already).
    pub(super) fn release_holding(&self, room: &mut Room, v: WlId) {
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
        self.take_pods(room, n.key.id, n.placement, sign);
    }

    /// An earlier reservation's quota and room taken (1) or given back (-1).
    fn take_earlier(&self, room: &mut Room, a: &Earlier, sign: Amount) {
        self.overlay_usage(&mut room.quota, a.cq, &a.usage, sign);
        self.take_pods(room, a.id, a.placement.as_ref(), sign);
    }

    fn take_pods(&self, room: &mut Room, id: WlId, placement: Option<&Placement>, sign: Amount) {
        if let (Some(delta), Some(p)) = (&mut room.nodes, placement) {
            for &(node, ps, pods) in &p.pods {
                for (r, a) in self.per_pod(id, ps) {
                    delta.add(node, r, -sign * a * Amount::from(pods));
                }
            }
        }
    }

    /// The nodes of placement `p` by the flavor of each pod set's nodes
    /// in `choice` (one with node labels, else its first) and domain.
    pub(super) fn reserved_nodes(&self, choice: &Choice, p: &Placement) -> Vec<ReservedNodes> {
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

    /// The domain's admitted workloads and the reservations ahead of
    /// `head` with a known release (the newcomer's, `with_end`, among
    /// them), in time order, and the admitted ones without one. A
    /// workload releases its quota for `head`:
    /// - evicting: now;
    /// - one `head` may preempt by its queue's `withinClusterQueue`: once
    ///   its minimum runtime is over, or at its declared end if sooner;
    /// - else at its declared end (admitted + run time), or never known.
    fn releases(&self, head: Head<'_>, with_end: Option<Millis>, now: Millis) -> (Vec<(Millis, Release)>, Vec<WlId>) {
        let cq = head.cq;
        let mut timed: Vec<(Millis, Release)> = with_end.map(|e| (e, Release::Newcomer)).into_iter().collect();
        for (k, a) in head.before.iter().enumerate() {
            if let Some(t) = a.until {
                timed.push((t.max(now), Release::Reserved(k)));
            }
        }
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
        timed.sort_by_key(|&(t, r)| (t, release_order(r)));
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

    /// Whether `usage` exceeds `cq`'s nominal quota on some slot: there it
    /// can only ever borrow.
    pub(super) fn beyond_nominal(&self, cq: CqId, usage: &[(usize, Amount)]) -> bool {
        let slots = &self.queues.cqs[cq].quota.slots;
        usage.iter().any(|&(slot, amount)| amount > slots[slot].nominal)
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

/// Among releases at one instant: admitted workloads by id, then
/// reservations, then the newcomer (all are applied before the head is
/// tried, so the order only keeps runs reproducible).
fn release_order(r: Release) -> (u8, usize) {
    match r {
        Release::Holding(v) => (0, v),
        Release::Reserved(k) => (1, k),
        Release::Newcomer => (2, 0),
    }
}
