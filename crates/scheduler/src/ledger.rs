//! Quota accounting: one [`Slot`] per (ClusterQueue, flavor, resource) and one
//! [`Pool`] per (cohort, flavor, resource).
//!
//! A queue's quota `nominal` splits into a guaranteed part `nominal -
//! lendingLimit` that only it may use and a lendable part that goes into the
//! cohort's pool. A queue's *draw* on the pool is its usage beyond its
//! guaranteed part. The pool tracks the sum of draws, so one update per
//! changed slot and ancestor keeps every check O(depth):
//!
//! ```text
//! usage(q) + request <= nominal(q) + borrowingLimit(q)                (queue bound)
//! Σ draw(children of c) <= capacity(c) + borrowingLimit(c)            (cohort with a parent)
//! Σ draw(children of root) <= capacity(root)                          (root cohort)
//! draw(x) = max(0, usage(x) - guaranteed(x))
//! capacity(c) = nominal(c) + Σ lendable(children of c)
//! ```
//!
//! A cohort is a child of its parent like a queue: its usage is the sum of
//! its children's draws, its guaranteed part `capacity - lendingLimit`.
//!
//! "Usage" here is the *effective* usage: admitted workloads plus capacity
//! claimed by preemptors waiting for their victims, so nobody else can take
//! what a preemptor freed.

use crate::model::Amount;

pub type ResId = u32;
pub type FlavorId = u32;
pub type FrKey = (FlavorId, ResId);

#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub fr: FrKey,
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
    /// Held by admitted (and still-evicting) workloads.
    pub usage: Amount,
    /// Reserved by preemptors waiting for their victims.
    pub claimed: Amount,
    /// Index of the cohort pool for this (flavor, resource), if in a cohort.
    pub pool: Option<usize>,
}

impl Slot {
    pub fn new(fr: FrKey, nominal: Amount, borrowing_limit: Option<Amount>, lending_limit: Option<Amount>) -> Self {
        Self {
            fr,
            nominal,
            borrowing_limit,
            lending_limit,
            usage: 0,
            claimed: 0,
            pool: None,
        }
    }

    /// The part of nominal quota only this queue may use.
    pub fn guaranteed(&self) -> Amount {
        match self.lending_limit {
            Some(l) => (self.nominal - l).max(0),
            None => 0,
        }
    }

    /// The part of nominal quota this queue puts into its cohort's pool.
    pub fn lendable(&self) -> Amount {
        self.nominal - self.guaranteed()
    }

    pub fn effective(&self) -> Amount {
        self.usage + self.claimed
    }

    /// Upper bound on this queue's usage from its own borrowing limit.
    pub fn own_ceiling(&self, in_cohort: bool) -> Amount {
        if !in_cohort {
            return self.nominal;
        }
        match self.borrowing_limit {
            Some(b) => self.nominal.saturating_add(b),
            None => Amount::MAX,
        }
    }
}

/// A cohort's shared capacity of one (flavor, resource): its own quota plus
/// what its children (queues and cohorts) lend, and their draws on it. A
/// cohort with a parent is itself a child there: its draw on the parent's
/// pool is its usage beyond its guaranteed part, as for a queue.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pool {
    /// Subtree quota: own nominal + Σ lendable of the children.
    pub capacity: Amount,
    /// Σ draw over the children (effective usage beyond guaranteed).
    pub usage: Amount,
    /// Σ idle over every queue below: nominal quota its owners do not use.
    pub idle: Amount,
    /// The cohort's own quota and limits (zero and none without a Cohort
    /// object that gives them).
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
    /// The pool of the same (flavor, resource) in the parent cohort.
    pub parent: Option<usize>,
}

impl Pool {
    /// The part of the subtree quota only this cohort's subtree may use.
    pub fn guaranteed(&self) -> Amount {
        match self.lending_limit {
            Some(l) => (self.capacity - l).max(0),
            None => 0,
        }
    }

    /// What the subtree lends to its parent.
    pub fn lendable(&self) -> Amount {
        self.capacity - self.guaranteed()
    }

    /// Upper bound on the subtree's usage (only below a parent).
    pub fn ceiling(&self) -> Amount {
        match self.borrowing_limit {
            Some(b) => self.capacity.saturating_add(b),
            None => Amount::MAX,
        }
    }
}

/// Nominal quota a slot's queue does not use.
pub(crate) fn idle(slot: &Slot) -> Amount {
    (slot.nominal - slot.effective()).max(0)
}

pub(crate) fn draw(effective: Amount, guaranteed: Amount) -> Amount {
    (effective - guaranteed).max(0)
}

/// How a request fits one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Within nominal quota (and the cohort has not lent it away).
    Fits,
    /// Fits, but above nominal quota: borrowed from the cohort.
    Borrows,
    /// Not now; `available` is the most that would fit now.
    NotNow { available: Amount },
    /// Never, whatever else finishes: `max` is the most this queue can hold.
    Never { max: Amount },
}

/// A bound composed from the slot up: at each level the most that fits is
/// `min(ceiling - usage, max(0, guaranteed - usage) + what the parent
/// grants)`, and at the root `capacity - usage`.
struct Headroom {
    cap: Amount,
    offset: Amount,
}

impl Headroom {
    fn level(&mut self, room: Amount, own: Amount) {
        self.cap = self.cap.min(self.offset.saturating_add(room));
        self.offset = self.offset.saturating_add(own);
    }
}

/// What a slot can take now and at most, given the pools above it (slot's
/// cohort first, root last) with each pool's usage changed by a what-if
/// delta, and the slot's usage by `slot_delta`.
pub(crate) fn headroom<'a>(
    slot: &Slot,
    slot_delta: Amount,
    chain: impl IntoIterator<Item = (&'a Pool, Amount)>,
) -> (Amount, Amount) {
    let e = slot.effective() + slot_delta;
    let mut chain = chain.into_iter().peekable();
    if chain.peek().is_none() {
        return ((slot.nominal - e).max(0), slot.nominal);
    }
    let ceiling = slot.own_ceiling(true);
    let g = slot.guaranteed();
    let mut now = Headroom {
        cap: ceiling.saturating_sub(e),
        offset: (g - e).max(0),
    };
    let mut most = Headroom {
        cap: ceiling,
        offset: g,
    };
    for (pool, delta) in chain {
        let u = pool.usage + delta;
        if pool.parent.is_none() {
            now.level(pool.capacity - u, 0);
            most.level(pool.capacity, 0);
        } else {
            let ceil = pool.ceiling();
            now.level(ceil.saturating_sub(u), (pool.guaranteed() - u).max(0));
            most.level(ceil, pool.guaranteed());
        }
    }
    (now.cap.max(0), most.cap)
}

/// Checks `extra` more on top of a slot's effective usage changed by
/// `slot_delta`, given the pools above it (see [`headroom`]).
pub(crate) fn check<'a>(
    slot: &Slot,
    slot_delta: Amount,
    extra: Amount,
    chain: impl IntoIterator<Item = (&'a Pool, Amount)>,
) -> Fit {
    let (available, max) = headroom(slot, slot_delta, chain);
    if extra <= available {
        if slot.effective() + slot_delta + extra <= slot.nominal {
            Fit::Fits
        } else {
            Fit::Borrows
        }
    } else if extra > max {
        Fit::Never { max }
    } else {
        Fit::NotNow { available }
    }
}

/// How a change of a child's usage from `before` to `after` changes its
/// draw on the parent pool.
pub(crate) fn draw_change(before: Amount, after: Amount, guaranteed: Amount) -> Amount {
    draw(after, guaranteed) - draw(before, guaranteed)
}
