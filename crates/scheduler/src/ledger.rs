//! Quota accounting: one [`Slot`] per (ClusterQueue, flavor, resource) and one
//! [`Pool`] per (cohort, flavor, resource).
//!
//! A queue's quota `nominal` splits into a guaranteed part `nominal -
//! lendingLimit` that only it may use and a lendable part that goes into the
//! cohort's pool. A queue's *draw* on the pool is its usage beyond its
//! guaranteed part. The pool tracks the sum of draws, so one update per
//! changed slot keeps every check O(1):
//!
//! ```text
//! usage(q) + request <= nominal(q) + borrowingLimit(q)                (queue bound)
//! Σ draw(q') - draw(q) + draw'(q)  <= Σ lendable(q')                  (cohort bound)
//! draw(q) = max(0, usage(q) - guaranteed(q))
//! ```
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

/// A cohort's shared capacity of one (flavor, resource).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pool {
    pub capacity: Amount,
    /// Σ draw over member slots (effective usage beyond guaranteed).
    pub usage: Amount,
    /// Σ idle over member slots: nominal quota its owners do not use yet.
    pub idle: Amount,
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

/// Checks `extra` more on top of a slot's effective usage minus `exclude`
/// (a preemptor's own claim), given the pool's usage adjusted by
/// `pool_delta` (from a what-if overlay) and the slot's by `slot_delta`.
pub(crate) fn check(slot: &Slot, pool: Option<&Pool>, slot_delta: Amount, pool_delta: Amount, extra: Amount) -> Fit {
    let e = slot.effective() + slot_delta;
    let want = e + extra;
    let ceiling = slot.own_ceiling(pool.is_some());
    match pool {
        None => {
            if want <= slot.nominal {
                Fit::Fits
            } else if extra > slot.nominal {
                Fit::Never { max: slot.nominal }
            } else {
                Fit::NotNow {
                    available: (slot.nominal - e).max(0),
                }
            }
        }
        Some(pool) => {
            let g = slot.guaranteed();
            let pool_usage = pool.usage + pool_delta;
            let pool_after = pool_usage - draw(e, g) + draw(want, g);
            if want <= ceiling && pool_after <= pool.capacity {
                if want <= slot.nominal { Fit::Fits } else { Fit::Borrows }
            } else {
                let max = ceiling.min(g.saturating_add(pool.capacity));
                if extra > max {
                    Fit::Never { max }
                } else {
                    // Largest x with e + x <= ceiling and the pool bound.
                    let by_pool = g + (pool.capacity - pool_usage + draw(e, g)) - e;
                    let available = (ceiling.saturating_sub(e)).min(by_pool).max(0);
                    Fit::NotNow { available }
                }
            }
        }
    }
}
