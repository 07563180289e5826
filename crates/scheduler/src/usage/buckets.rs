//! Usage over time in buckets: an hour each for the last two days, a UTC
//! day each before that, for [`KEPT_DAYS`] days. A window's usage counts a
//! bucket it covers in part by the part covered (usage within a bucket is
//! taken as even over the part of it already accrued): exact for windows
//! that start on an hour within the last two days, or on a UTC day before.

use std::collections::BTreeMap;

use crate::model::Millis;

pub const HOUR: Millis = 3_600_000;
pub const DAY: Millis = 24 * HOUR;
/// Hours younger than this stay hourly.
pub const HOURLY_FOR: Millis = 2 * DAY;
/// Days kept (a calendar month and a rolling 30 days with room to spare).
pub const KEPT_DAYS: i64 = 62;

/// Amount × milliseconds per bucket start (milliseconds since the epoch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    pub(super) hourly: BTreeMap<Millis, i128>,
    pub(super) daily: BTreeMap<Millis, i128>,
    /// Accrued up to here: the last bucket holds usage before it only.
    pub(super) upto: Millis,
}

impl Buckets {
    /// Adds `rate` (milli-units) held over `[from, to)`, split at hours.
    pub fn accrue(&mut self, rate: i128, from: Millis, to: Millis) {
        self.upto = self.upto.max(to);
        if rate == 0 || to <= from {
            return;
        }
        let mut t = from;
        while t < to {
            let hour = t.div_euclid(HOUR) * HOUR;
            let end = (hour + HOUR).min(to);
            *self.hourly.entry(hour).or_default() += rate * i128::from(end - t);
            t = end;
        }
    }

    /// Folds whole days older than two days into daily buckets and drops
    /// days older than [`KEPT_DAYS`].
    pub fn fold(&mut self, now: Millis) {
        let cut = (now - HOURLY_FOR).div_euclid(DAY) * DAY;
        let old: Vec<Millis> = self.hourly.range(..cut).map(|(&h, _)| h).collect();
        for h in old {
            let v = self.hourly.remove(&h).unwrap_or(0);
            *self.daily.entry(h.div_euclid(DAY) * DAY).or_default() += v;
        }
        let keep_from = cut - KEPT_DAYS * DAY;
        self.daily = self.daily.split_off(&keep_from);
    }

    /// Usage (amount × ms) within `[from, to)`.
    pub fn within(&self, from: Millis, to: Millis) -> i128 {
        let part = |start: Millis, len: Millis, v: i128| {
            let end = (start + len).min(self.upto.max(start + 1));
            let overlap = end.min(to) - start.max(from);
            if overlap <= 0 {
                0
            } else if overlap >= end - start {
                v
            } else {
                v * i128::from(overlap) / i128::from(end - start)
            }
        };
        let hourly: i128 = self
            .hourly
            .range(from.div_euclid(HOUR) * HOUR..to)
            .map(|(&s, &v)| part(s, HOUR, v))
            .sum();
        let daily: i128 = self
            .daily
            .range(from.div_euclid(DAY) * DAY..to)
            .map(|(&s, &v)| part(s, DAY, v))
            .sum();
        hourly + daily
    }

    pub fn hourly(&self) -> impl Iterator<Item = (Millis, i128)> + '_ {
        self.hourly.iter().map(|(&s, &v)| (s, v))
    }

    pub fn daily(&self) -> impl Iterator<Item = (Millis, i128)> + '_ {
        self.daily.iter().map(|(&s, &v)| (s, v))
    }

    /// Buckets from their parts, as [`Buckets::hourly`] and
    /// [`Buckets::daily`] give them, holding usage up to `upto` (a
    /// record's flush: the hour in progress then holds usage before it
    /// only).
    pub fn from_parts(
        hourly: impl IntoIterator<Item = (Millis, i128)>,
        daily: impl IntoIterator<Item = (Millis, i128)>,
        upto: Millis,
    ) -> Self {
        let mut b = Buckets::default();
        for (s, v) in hourly {
            *b.hourly.entry(s.div_euclid(HOUR) * HOUR).or_default() += v;
        }
        for (s, v) in daily {
            *b.daily.entry(s.div_euclid(DAY) * DAY).or_default() += v;
        }
        b.upto = upto;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accrual_splits_at_hours_and_windows_count_parts() {
        let mut b = Buckets::default();
        // 2 units from 00:30 to 02:00.
        b.accrue(2, HOUR / 2, 2 * HOUR);
        assert_eq!(b.hourly.get(&0), Some(&(2 * i128::from(HOUR / 2))));
        assert_eq!(b.hourly.get(&HOUR), Some(&(2 * i128::from(HOUR))));
        assert_eq!(b.within(0, 2 * HOUR), 3 * i128::from(HOUR));
        // Half of the second hour.
        assert_eq!(b.within(HOUR, HOUR + HOUR / 2), i128::from(HOUR));
        // The hour in progress holds usage up to now only: a window to now
        // counts all of it.
        b.accrue(4, 2 * HOUR, 2 * HOUR + 10);
        assert_eq!(b.within(2 * HOUR, 2 * HOUR + 10), 40);
        assert_eq!(b.within(2 * HOUR + 5, 2 * HOUR + 10), 20);
    }

    #[test]
    fn old_hours_fold_into_days_and_old_days_go() {
        let mut b = Buckets::default();
        b.accrue(1, 0, DAY);
        b.fold(3 * DAY + HOUR);
        assert!(b.hourly.is_empty());
        assert_eq!(b.daily.get(&0), Some(&i128::from(DAY)));
        assert_eq!(b.within(0, DAY), i128::from(DAY));
        b.fold((KEPT_DAYS + 4) * DAY);
        assert!(b.daily.is_empty());
    }
}
