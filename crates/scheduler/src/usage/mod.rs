//! # Usage accounting over time
//!
//! The engine says when held quota changes ([`crate::UsageChange`]); the
//! [`UsageBook`] turns those changes into usage over time: per account (a
//! ClusterQueue, and the LocalQueue beneath it) and (flavor, resource),
//! the amount held × time, since accounting began and per hour or day
//! ([`Buckets`]), and, with a half-life, a decayed average of what was
//! held (what fair sharing over time weighs). Pure: the driver stamps each
//! change with its time.
//!
//! A meter is charged from the moment a workload holds quota (admission,
//! or a claim turning into one) to the moment it gives it back (finish,
//! eviction complete, removal), partial admission and shrinking included.
//!
//! ## Restarts
//! A record ([`AccountRecord`]) is what a meter had accrued up to its
//! `flushed_at`. Restored, a meter counts nothing before that instant: a
//! workload restored as admitted is charged from its admission or from the
//! flush, whichever is later. A record is never added twice (restoring an
//! account replaces it), so nothing is counted twice; what ended between
//! the last flush and the restart is lost, at most one flush interval.

mod buckets;
mod budget;
mod govern;
mod period;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use buckets::{Buckets, DAY, HOUR};
pub use budget::{Budget, Spending, spending};
pub use govern::{Accounting, BudgetChange};
pub use period::{Period, Span, Window};

use crate::engine::UsageChange;
use crate::model::{Amount, Millis};

/// Who usage is charged to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Account {
    ClusterQueue(Arc<str>),
    /// `namespace/name`.
    LocalQueue(Arc<str>),
}

/// One account's (flavor, resource).
pub type MeterKey = (Account, Arc<str>, Arc<str>);

/// One (account, flavor, resource): what is held now and what was held.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meter {
    /// Milli-units held now.
    pub rate: Amount,
    /// Accrued up to here.
    pub at: Millis,
    /// Milli-units × ms since accounting began (restored records included).
    pub total: i128,
    pub buckets: Buckets,
    /// Exponentially decayed average of what was held, milli-units (with a
    /// half-life).
    pub decayed: f64,
    /// Usage before this is in `total` (a restored record's flush).
    pub watermark: Millis,
}

/// A meter as it is kept across restarts.
#[derive(Clone, Debug, PartialEq)]
pub struct MeterRecord {
    pub flavor: Arc<str>,
    pub resource: Arc<str>,
    pub total: i128,
    pub buckets: Buckets,
    pub decayed: f64,
}

/// Every meter of one account, accrued up to `flushed_at`.
#[derive(Clone, Debug, PartialEq)]
pub struct AccountRecord {
    pub flushed_at: Millis,
    pub meters: Vec<MeterRecord>,
}

impl AccountRecord {
    /// Whether `other` holds the same usage (totals, buckets and decayed
    /// averages), whenever each was taken: nothing accrued in between.
    pub fn same_usage(&self, other: &AccountRecord) -> bool {
        self.meters.len() == other.meters.len()
            && self.meters.iter().zip(&other.meters).all(|(a, b)| {
                (&a.flavor, &a.resource, a.total, a.decayed) == (&b.flavor, &b.resource, b.total, b.decayed)
                    && a.buckets.hourly().eq(b.buckets.hourly())
                    && a.buckets.daily().eq(b.buckets.daily())
            })
    }
}

/// Meters per account and (flavor, resource). See the module docs.
#[derive(Clone, Debug, Default)]
pub struct UsageBook {
    meters: BTreeMap<MeterKey, Meter>,
    /// Half-life of the decayed average; `None`: not kept.
    half_life: Option<Millis>,
}

impl UsageBook {
    pub fn new(half_life: Option<Millis>) -> Self {
        Self {
            meters: BTreeMap::new(),
            half_life: half_life.filter(|&h| h > 0),
        }
    }

    pub fn half_life(&self) -> Option<Millis> {
        self.half_life
    }

    /// Charges changes the engine made at `now` to the workload's
    /// ClusterQueue and LocalQueue.
    pub fn apply(&mut self, now: Millis, changes: &[UsageChange]) {
        for c in changes {
            for account in [
                Account::ClusterQueue(c.cluster_queue.clone()),
                Account::LocalQueue(c.local_queue.clone()),
            ] {
                let key = (account, c.flavor.clone(), c.resource.clone());
                self.charge(key, now, c.delta, c.since);
            }
        }
    }

    fn charge(&mut self, key: MeterKey, now: Millis, delta: Amount, since: Option<Millis>) {
        let half_life = self.half_life;
        let m = self.meters.entry(key).or_insert_with(|| Meter {
            at: now,
            ..Meter::default()
        });
        m.advance(now, half_life);
        if let Some(since) = since {
            // Held since `since`, but not before what a record covers.
            let from = since.max(m.watermark).min(now);
            let d = i128::from(delta);
            m.total += d * i128::from(now - from);
            m.buckets.accrue(d, from, now);
            if let Some(h) = half_life {
                m.decayed += delta as f64 * (1.0 - decay(now - from, h));
            }
        }
        m.rate += delta;
    }

    /// Accrues every meter up to `now` (a record, a window or a budget
    /// reads them there).
    pub fn advance(&mut self, now: Millis) {
        for m in self.meters.values_mut() {
            m.advance(now, self.half_life);
        }
    }

    /// The meters of an account (after [`UsageBook::advance`]).
    pub fn meters_of<'a>(
        &'a self,
        account: &'a Account,
    ) -> impl Iterator<Item = (&'a Arc<str>, &'a Arc<str>, &'a Meter)> + 'a {
        self.meters
            .range((account.clone(), Arc::from(""), Arc::from(""))..)
            .take_while(move |((a, _, _), _)| a == account)
            .map(|((_, f, r), m)| (f, r, m))
    }

    /// Every account with a meter.
    pub fn accounts(&self) -> Vec<Account> {
        let mut out: Vec<Account> = self.meters.keys().map(|(a, _, _)| a.clone()).collect();
        out.dedup();
        out
    }

    /// Usage (milli-units × ms) of an account's `resource` (on `flavor`, or
    /// all flavors) within `[from, to)`.
    pub fn used_within(
        &self,
        account: &Account,
        flavor: Option<&str>,
        resource: &str,
        from: Millis,
        to: Millis,
    ) -> i128 {
        self.meters_of(account)
            .filter(|(f, r, _)| &***r == resource && flavor.is_none_or(|x| x == &***f))
            .map(|(_, _, m)| m.buckets.within(from, to))
            .sum()
    }

    /// Milli-units of `resource` (on `flavor`, or all) an account holds now.
    pub fn held(&self, account: &Account, flavor: Option<&str>, resource: &str) -> Amount {
        self.meters_of(account)
            .filter(|(f, r, _)| &***r == resource && flavor.is_none_or(|x| x == &***f))
            .map(|(_, _, m)| m.rate)
            .sum()
    }

    /// An account's meters as of `now`, to be kept across a restart.
    pub fn record(&mut self, account: &Account, now: Millis) -> AccountRecord {
        self.advance(now);
        let meters = self
            .meters_of(account)
            .map(|(f, r, m)| MeterRecord {
                flavor: f.clone(),
                resource: r.clone(),
                total: m.total,
                buckets: m.buckets.clone(),
                decayed: m.decayed,
            })
            .collect();
        AccountRecord {
            flushed_at: now,
            meters,
        }
    }

    /// Restores an account from its record, before any change of the
    /// workloads it charges is applied: what the account had is replaced
    /// (a record is never counted twice), usage before `flushed_at` is the
    /// record's.
    pub fn restore(&mut self, account: &Account, record: &AccountRecord) {
        let mine: Vec<MeterKey> = self
            .meters_of(account)
            .map(|(f, r, _)| (account.clone(), f.clone(), r.clone()))
            .collect();
        for k in mine {
            self.meters.remove(&k);
        }
        for r in &record.meters {
            let key = (account.clone(), r.flavor.clone(), r.resource.clone());
            let mut buckets = r.buckets.clone();
            buckets.upto = record.flushed_at;
            self.meters.insert(
                key,
                Meter {
                    rate: 0,
                    at: record.flushed_at,
                    total: r.total,
                    buckets,
                    decayed: r.decayed,
                    watermark: record.flushed_at,
                },
            );
        }
    }

    /// The decayed average per (flavor, resource) of a ClusterQueue, in
    /// milli-units (empty without a half-life): what fair sharing over time
    /// weighs ([`crate::Engine::set_usage_history`]).
    pub fn decayed_of(&self, cluster_queue: &str) -> Vec<(Arc<str>, Arc<str>, Amount)> {
        if self.half_life.is_none() {
            return Vec::new();
        }
        let account = Account::ClusterQueue(Arc::from(cluster_queue));
        self.meters_of(&account)
            .map(|(f, r, m)| (f.clone(), r.clone(), m.decayed.round() as Amount))
            .filter(|&(_, _, a)| a > 0)
            .collect()
    }

    /// Forgets accounts that hold nothing and whose usage is all older
    /// than the buckets keep (a deleted queue's, long after).
    pub fn prune(&mut self) {
        self.meters
            .retain(|_, m| m.rate != 0 || !m.buckets.hourly.is_empty() || !m.buckets.daily.is_empty());
    }
}

impl Meter {
    fn advance(&mut self, now: Millis, half_life: Option<Millis>) {
        if now <= self.at {
            return;
        }
        let r = i128::from(self.rate);
        self.total += r * i128::from(now - self.at);
        self.buckets.accrue(r, self.at, now);
        if let Some(h) = half_life {
            let k = decay(now - self.at, h);
            self.decayed = self.rate as f64 + (self.decayed - self.rate as f64) * k;
        }
        self.at = now;
        self.buckets.fold(now);
    }
}

/// What is left of a value after `dt` with half-life `h`.
fn decay(dt: Millis, h: Millis) -> f64 {
    (-(dt as f64) / h as f64 * std::f64::consts::LN_2).exp()
}

/// Resource-hours from milli-units × ms.
pub fn hours(amount_ms: i128) -> f64 {
    amount_ms as f64 / 1000.0 / HOUR as f64
}

#[cfg(test)]
mod tests;
