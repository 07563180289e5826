//! How fast decisions become API writes: the controller's pacing rules,
//! pure, so that the controller (in real time) and `sluice simulate` (in
//! virtual time) follow the same ones.
//!
//! - Writes go through a token bucket ([`Bucket`], `--kube-qps`,
//!   `--kube-burst`): `burst` tokens to start with, refilled at `qps` per
//!   second up to `burst`, one token per write.
//! - State changes (admissions, evictions, requeues) are written first and
//!   in order; the lazy lanes (explanations, bookkeeping) write from tokens
//!   the state lane would lose ([`Bucket::take_spare`]) or from their own
//!   small share ([`explain_qps`]).
//! - Events are gathered for [`COALESCE_MS`] into one cycle; a cycle does
//!   not run while more than [`cycle_backlog`] state changes wait for the
//!   writer (it is put off [`DEFER_MS`] at a time), and decides at most
//!   [`cycle_budget`] of them.

use std::time::Duration;

/// `sluice controller --kube-qps` default.
pub const DEFAULT_KUBE_QPS: f64 = 50.0;
/// `sluice controller --kube-burst` default.
pub const DEFAULT_KUBE_BURST: u32 = 100;
/// `sluice controller --explain-qps` default.
pub const DEFAULT_EXPLAIN_QPS: f64 = 5.0;

/// Events that arrive within this many milliseconds of the first one are
/// decided in one cycle.
pub const COALESCE_MS: u64 = 50;
/// A due cycle waiting for the writer's backlog to shrink looks again
/// after this many milliseconds.
pub const DEFER_MS: u64 = 20;

/// The lazy lanes' own share (explanations and bookkeeping, on top of the
/// budget the state lane leaves unused) from `--explain-qps` and
/// `--kube-qps`: never more than a tenth of `kube_qps` (0 or less asks for
/// exactly that tenth). Without a client-side limit (`kube_qps` 0) the
/// lazy lanes write whenever no state change waits: 0, no share needed.
pub fn explain_qps(explain_qps: f64, kube_qps: f64) -> f64 {
    let explain = if explain_qps.is_nan() {
        0.0
    } else {
        explain_qps.max(0.0)
    };
    if kube_qps.is_nan() || kube_qps <= 0.0 {
        return 0.0;
    }
    let tenth = kube_qps / 10.0;
    if explain == 0.0 { tenth } else { explain.min(tenth) }
}

/// State changes queued ahead of the writer before the loop runs another
/// cycle: what the limit lets out in about a second (`kube_qps`, or the
/// burst if larger; 500 without a limit). Admissions are assumed in the
/// engine until written, so a deeper backlog means deciding further ahead
/// of the API: a higher-priority workload arriving meanwhile would preempt
/// admissions nobody has seen yet, two more writes each. The writer never
/// runs dry at this depth, so the write rate is not lowered.
pub fn cycle_backlog(kube_qps: f64, kube_burst: u32) -> usize {
    if kube_qps.is_nan() || kube_qps <= 0.0 {
        return 500;
    }
    (kube_qps.ceil() as usize).max(kube_burst as usize).max(1)
}

/// Decisions (admissions, preemptions, evictions) one cycle may make with
/// `queued` state changes already waiting for the writer: enough to keep
/// the writer busy until the next cycle (twice [`cycle_backlog`], less what
/// is queued), never so many that thousands of admissions wait unwritten,
/// each holding its status in memory, decided long before the API server
/// sees them.
pub fn cycle_budget(backlog: usize, queued: usize) -> usize {
    backlog.saturating_mul(2).saturating_sub(queued).max(1)
}

/// A token bucket: `qps` writes per second sustained, `burst` at once.
/// Time is what the caller counts from its own origin.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl Bucket {
    /// A full bucket at `now`, or `None` (no limit) when `qps` is not
    /// positive.
    pub fn new(qps: f64, burst: u32, now: Duration) -> Option<Self> {
        if qps.is_nan() || qps <= 0.0 {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(Self {
            qps,
            burst,
            tokens: burst,
            last: now,
        })
    }

    /// Takes a token, or says how long to wait for one.
    pub fn take(&mut self, now: Duration) -> Option<Duration> {
        self.take_spare(now, 1, 0)
    }

    /// Takes `n` tokens only if `keep` tokens are left after them (spare
    /// budget: what the writes that come first would not miss), or says
    /// how long until they are there.
    pub fn take_spare(&mut self, now: Duration, n: u32, keep: u32) -> Option<Duration> {
        let wait = self.wait_spare(now, n, keep);
        if wait.is_none() {
            self.tokens -= f64::from(n);
        }
        wait
    }

    /// How long until `n` tokens can be taken with `keep` left (`None`:
    /// now). Takes nothing.
    pub fn wait_spare(&mut self, now: Duration, n: u32, keep: u32) -> Option<Duration> {
        let refill = now.saturating_sub(self.last).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = self.last.max(now);
        // Never more than the bucket holds: a full bucket is always enough.
        let need = (f64::from(n) + f64::from(keep)).min(self.burst.max(f64::from(n)));
        // A token short by float rounding alone is there.
        if self.tokens + 1e-9 >= need {
            None
        } else {
            // At most an hour (a tiny qps must not overflow a Duration).
            Some(Duration::from_secs_f64(((need - self.tokens) / self.qps).min(3600.0)))
        }
    }

    /// Tokens the bucket holds at most.
    pub fn burst(&self) -> u32 {
        self.burst as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(7);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn no_limit_when_qps_is_not_positive() {
        assert!(Bucket::new(0.0, 100, T0).is_none());
        assert!(Bucket::new(-1.0, 100, T0).is_none());
        assert!(Bucket::new(f64::NAN, 100, T0).is_none());
    }

    #[test]
    fn starts_full_then_refills_at_qps() {
        // qps 50, burst 100: 100 writes at once, the 101st waits
        // (1 − 0) / 50 = 20 ms; 20 ms later exactly one token is back.
        let mut b = Bucket::new(50.0, 100, T0).expect("limited");
        for i in 0..100 {
            assert_eq!(b.take(T0), None, "write {i} is within the burst");
        }
        assert_eq!(b.take(T0), Some(ms(20)));
        let t1 = T0 + ms(20);
        assert_eq!(b.take(t1), None);
        assert!(b.take(t1).is_some());
        // Idle for an hour: never more than `burst` tokens.
        let t2 = t1 + Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(b.take(t2), None);
        }
        assert!(b.take(t2).is_some());
    }

    #[test]
    fn a_clock_that_goes_back_neither_refills_nor_panics() {
        let mut b = Bucket::new(10.0, 1, T0).expect("limited");
        assert_eq!(b.take(T0), None);
        assert_eq!(b.take(T0 - ms(500)), Some(ms(100)));
        assert_eq!(b.take(T0 + ms(100)), None);
    }

    #[test]
    fn the_lazy_share_is_a_tenth_of_the_write_limit_at_most() {
        assert_eq!(explain_qps(5.0, 50.0), 5.0);
        assert_eq!(explain_qps(5.0, 20.0), 2.0);
        assert_eq!(explain_qps(0.0, 50.0), 5.0);
        assert_eq!(explain_qps(1.0, 50.0), 1.0);
        // No client-side limit: no share needed (nothing is held back).
        assert_eq!(explain_qps(5.0, 0.0), 0.0);
        assert_eq!(explain_qps(0.0, 0.0), 0.0);
        assert_eq!(explain_qps(-3.0, 0.0), 0.0);
    }

    #[test]
    fn cycles_wait_while_more_than_a_second_of_writes_is_queued() {
        assert_eq!(cycle_backlog(50.0, 100), 100, "the burst goes out at once");
        assert_eq!(cycle_backlog(200.0, 100), 200);
        assert_eq!(cycle_backlog(0.5, 0), 1);
        assert_eq!(cycle_backlog(0.0, 100), 500, "no limit");
        assert_eq!(cycle_backlog(f64::NAN, 100), 500);
    }

    #[test]
    fn a_cycle_decides_about_two_backlogs_less_what_is_queued() {
        assert_eq!(cycle_budget(100, 0), 200, "an idle writer: two seconds of writes");
        assert_eq!(cycle_budget(100, 60), 140);
        assert_eq!(cycle_budget(100, 100), 100, "at the backlog the loop still cycles");
        assert_eq!(cycle_budget(100, 500), 1, "never nothing");
        assert_eq!(cycle_budget(usize::MAX, 0), usize::MAX);
    }

    #[test]
    fn spare_tokens_are_taken_only_above_the_reserve() {
        // qps 10, burst 20, keep 5: 15 spare tokens at once, then one more
        // every 100 ms; the reserve itself is never touched.
        let mut b = Bucket::new(10.0, 20, T0).expect("limited");
        for i in 0..15 {
            assert_eq!(b.take_spare(T0, 1, 5), None, "spare token {i}");
        }
        assert_eq!(b.take_spare(T0, 1, 5), Some(ms(100)));
        // Looking does not take.
        assert_eq!(b.wait_spare(T0, 1, 5), Some(ms(100)));
        // The reserve is still there for ordinary takes.
        for i in 0..5 {
            assert_eq!(b.take(T0), None, "reserved token {i}");
        }
        assert_eq!(b.take(T0), Some(ms(100)));
        // A reserve larger than the bucket asks for a full bucket, not more.
        let mut small = Bucket::new(10.0, 2, T0).expect("limited");
        assert_eq!(small.take_spare(T0, 1, 10), None);
        assert_eq!(small.take_spare(T0, 1, 10), Some(ms(100)));
    }

    #[test]
    fn a_zero_burst_still_allows_one_write() {
        let mut b = Bucket::new(10.0, 0, T0).expect("limited");
        assert_eq!(b.take(T0), None);
        // 1 token every 100 ms.
        assert_eq!(b.take(T0), Some(ms(100)));
    }
}
