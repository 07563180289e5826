//! The controller's pacing in virtual time, by the controller's own rules
//! ([`sluice_scheduler::pace`]): when a cycle runs, how many decisions it
//! may make, and when each state change is written.
//!
//! - [`StateLane`]: admissions and evictions are written one after the
//!   other, in the order decided, each once the token bucket gives a token
//!   and the write before it is done (plus `--api-latency` per write).
//! - [`Pacer`]: events are gathered for `COALESCE_MS` into one cycle; a due
//!   cycle is put off `DEFER_MS` at a time while more than the backlog
//!   ([`cycle_backlog`]) of state changes waits; a cycle makes at most
//!   [`cycle_budget`] decisions; after a cycle the next one is the
//!   engine's next wake-up.
//!
//! The lazy lanes (explanations, bookkeeping) write from their own share
//! or from tokens the full bucket would lose, never from the state lane's:
//! they do not change when anything is admitted, and are not modelled.

use std::collections::VecDeque;
use std::time::Duration;

use sluice_scheduler::pace::{Bucket, DEFER_MS, cycle_backlog, cycle_budget};

use crate::units::Millis;

/// The state lane: the writes queued and when each is made.
#[derive(Debug, Clone)]
pub struct StateLane {
    /// `None`: no client-side limit.
    bucket: Option<Bucket>,
    /// Time one write takes once it has its token.
    latency: Millis,
    /// When the writes not yet done at the last look are done, in order.
    queued: VecDeque<Millis>,
    /// When the last write queued is done.
    last_done: Duration,
    pub writes: u64,
    /// Sum over writes of (done − requested), ms.
    pub delay_total: i64,
    pub delay_max: i64,
}

impl StateLane {
    /// `qps` 0 or `None`: no limit; `burst` at least 1.
    pub fn new(qps: Option<f64>, burst: u32, latency: Millis) -> Self {
        Self {
            bucket: Bucket::new(qps.unwrap_or(0.0), burst, Duration::ZERO),
            latency: latency.max(0),
            queued: VecDeque::new(),
            last_done: Duration::ZERO,
            writes: 0,
            delay_total: 0,
            delay_max: 0,
        }
    }

    /// Queues a write decided at `t`; returns when it is done (the
    /// change is in the API).
    pub fn write(&mut self, t: Millis) -> Millis {
        // Kept exact (not rounded to the millisecond) so that tokens are
        // neither lost nor gained between writes.
        let mut start = at(t).max(self.last_done);
        if let Some(b) = self.bucket.as_mut() {
            // The writer sleeps until the token is there, then takes it.
            while let Some(wait) = b.take(start) {
                start += wait.max(Duration::from_nanos(1));
            }
        }
        self.last_done = start + at(self.latency);
        let done = ceil_ms(self.last_done).max(t);
        self.queued.push_back(done);
        self.writes += 1;
        self.delay_total += done - t;
        self.delay_max = self.delay_max.max(done - t);
        done
    }

    /// State changes not yet written at `t` (the writer's backlog).
    pub fn queued_at(&mut self, t: Millis) -> usize {
        while self.queued.front().is_some_and(|&d| d <= t) {
            self.queued.pop_front();
        }
        self.queued.len()
    }

    /// When at most `n` writes are still queued (`t` if that is now).
    fn drained_to(&mut self, t: Millis, n: usize) -> Millis {
        let len = self.queued_at(t);
        if len <= n { t } else { self.queued[len - n - 1] }
    }
}

/// Bucket time for virtual milliseconds (never negative).
fn at(t: Millis) -> Duration {
    Duration::from_millis(t.max(0) as u64)
}

/// A time in whole milliseconds, rounded up (a write never happens before
/// its token).
fn ceil_ms(d: Duration) -> Millis {
    let ns = d.as_nanos();
    // Rounding guard: 1000/3 ms per token accumulates float error; never
    // turn 5.000001 ms into 6.
    ns.saturating_sub(1_000).div_ceil(1_000_000) as Millis
}

/// When the next cycle runs, and with how many decisions.
#[derive(Debug, Clone)]
pub struct Pacer {
    backlog: usize,
    coalesce: Millis,
    cycle_at: Option<Millis>,
    /// The instant of the last cycle that asked for another at once.
    again_at: Option<Millis>,
}

impl Pacer {
    /// `coalesce`: the controller's `COALESCE_MS`, or 0 to decide at each
    /// event's own instant.
    pub fn new(qps: Option<f64>, burst: u32, coalesce: Millis) -> Self {
        Self {
            backlog: cycle_backlog(qps.unwrap_or(0.0), burst),
            coalesce: coalesce.max(0),
            cycle_at: None,
            again_at: None,
        }
    }

    /// When a cycle is due, if one is.
    pub fn cycle_at(&self) -> Option<Millis> {
        self.cycle_at
    }

    /// Something changed at `t`: a cycle within the coalescing window.
    pub fn changed(&mut self, t: Millis) {
        self.cycle_within(t + self.coalesce);
    }

    /// A cycle at `t` at the latest (e.g. now, after idle reclaim).
    pub fn cycle_within(&mut self, t: Millis) {
        self.cycle_at = Some(self.cycle_at.map_or(t, |c| c.min(t)));
    }

    /// At `t`: the decisions a cycle may make now, or `None` when no cycle
    /// runs now (none is due, or it is put off until the backlog is short
    /// enough: to the first `DEFER_MS` step at which it is).
    pub fn due(&mut self, t: Millis, lane: &mut StateLane) -> Option<usize> {
        if self.cycle_at.is_none_or(|c| c > t) {
            return None;
        }
        let queued = lane.queued_at(t);
        if queued > self.backlog {
            let short = lane.drained_to(t, self.backlog);
            let step = DEFER_MS as Millis;
            let steps = ((short - t) + step - 1) / step;
            self.cycle_at = Some(t + steps.max(1) * step);
            return None;
        }
        self.cycle_at = None;
        Some(cycle_budget(self.backlog, queued))
    }

    /// After a cycle at `t` (`decided`: it made a decision): the next is
    /// the engine's wake-up, at once when the budget cut the cycle short
    /// or work was requeued during it. A cycle that decided nothing asks
    /// for another at its own instant only once, so a run always ends.
    pub fn after_cycle(&mut self, wakeup: Option<Millis>, t: Millis, decided: bool) {
        let again = wakeup.is_some_and(|w| w <= t);
        if again && !decided && self.again_at == Some(t) {
            self.cycle_at = None;
            return;
        }
        self.again_at = again.then_some(t);
        self.cycle_at = wakeup.map(|w| w.max(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_scheduler::pace::COALESCE_MS;

    #[test]
    fn unlimited_writes_take_only_their_latency_one_after_the_other() {
        let mut lane = StateLane::new(None, 1, 0);
        for _ in 0..1000 {
            assert_eq!(lane.write(42), 42);
        }
        assert_eq!(lane.delay_total, 0);
        let mut slow = StateLane::new(Some(0.0), 1, 5);
        assert_eq!([slow.write(0), slow.write(0), slow.write(20)], [5, 10, 25]);
        assert_eq!(slow.delay_max, 10);
    }

    #[test]
    fn ten_qps_spaces_writes_by_100ms_after_the_burst() {
        // 10 qps, burst 2: two writes at once, then one per 100 ms.
        let mut lane = StateLane::new(Some(10.0), 2, 0);
        let got: Vec<Millis> = (0..5).map(|_| lane.write(0)).collect();
        assert_eq!(got, vec![0, 0, 100, 200, 300]);
        // Idle for a second: the bucket refills to its burst of 2, no more.
        assert_eq!(lane.write(1_400), 1_400);
        assert_eq!(lane.write(1_400), 1_400);
        assert_eq!(lane.write(1_400), 1_500);
        assert_eq!(lane.delay_max, 300);
        assert_eq!(lane.delay_total, 100 + 200 + 300 + 100);
        assert_eq!(lane.writes, 8);
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        // 3 qps = 333.3 ms per token: the 3rd write after the first lands at
        // 1000 ms, the 300th at 100 s (no accumulated rounding).
        let mut lane = StateLane::new(Some(3.0), 1, 0);
        let times: Vec<Millis> = (0..301).map(|_| lane.write(0)).collect();
        assert_eq!(&times[..4], &[0, 334, 667, 1000]);
        assert_eq!(times[300], 100_000);
    }

    #[test]
    fn the_backlog_is_what_is_not_written_yet() {
        let mut lane = StateLane::new(Some(10.0), 1, 0);
        for _ in 0..4 {
            lane.write(0); // done at 0, 100, 200, 300
        }
        assert_eq!(lane.queued_at(0), 3);
        assert_eq!(lane.queued_at(150), 2);
        assert_eq!(lane.drained_to(150, 1), 200);
        assert_eq!(lane.drained_to(150, 2), 150);
        assert_eq!(lane.queued_at(300), 0);
    }

    #[test]
    fn events_within_the_coalescing_window_make_one_cycle() {
        let mut lane = StateLane::new(Some(50.0), 100, 0);
        let mut p = Pacer::new(Some(50.0), 100, COALESCE_MS as Millis);
        p.changed(1_000);
        p.changed(1_030);
        assert_eq!(p.cycle_at(), Some(1_050));
        assert_eq!(p.due(1_049, &mut lane), None);
        assert_eq!(p.due(1_050, &mut lane), Some(200), "two backlogs of an idle writer");
        assert_eq!(p.due(1_050, &mut lane), None, "one cycle");
    }

    #[test]
    fn a_cycle_waits_in_defer_steps_until_the_backlog_is_short() {
        // qps 50, burst 100 (backlog 100): 300 writes decided at 0 are done
        // at 0 (100 of them), then one every 20 ms until 4 000 ms; at most
        // 100 are left from 2 000 ms on.
        let writes = || {
            let mut lane = StateLane::new(Some(50.0), 100, 0);
            for _ in 0..300 {
                lane.write(0);
            }
            lane
        };
        let mut lane = writes();
        let mut p = Pacer::new(Some(50.0), 100, COALESCE_MS as Millis);
        p.cycle_within(100);
        assert_eq!(p.due(100, &mut lane), None, "195 queued");
        // A straightforward loop looks every 20 ms from 100 ms: the first
        // look with at most 100 queued is at 2 000.
        let mut poll = writes();
        let first = (0..).map(|k| 100 + k * 20).find(|&t| poll.queued_at(t) <= 100);
        assert_eq!(first, Some(2_000));
        assert_eq!(p.cycle_at(), Some(2_000));
        assert_eq!(p.due(2_000, &mut lane), Some(100), "two backlogs less the 100 queued");
    }

    /// The pacer jumps to the first `DEFER_MS` step at which the backlog
    /// is short enough; a straightforward loop looks at every step. Both
    /// find the same instant, over many shapes of backlog (written in
    /// random bursts at random times, a deterministic generator).
    #[test]
    fn jumping_over_deferred_steps_finds_the_instant_polling_finds() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for case in 0..500 {
            let (qps, burst) = ([5.0, 50.0, 200.0][next(3) as usize], [1, 10, 100][next(3) as usize]);
            let mut lane = StateLane::new(Some(qps), burst, next(3) as Millis);
            let mut t = 0;
            for _ in 0..1 + next(8) {
                t += next(3_000) as Millis;
                for _ in 0..next(600) {
                    lane.write(t);
                }
            }
            let mut poll = lane.clone();
            let mut p = Pacer::new(Some(qps), burst, COALESCE_MS as Millis);
            p.cycle_within(t);
            let jumped = match p.due(t, &mut lane) {
                Some(_) => t,
                None => p.cycle_at().expect("deferred"),
            };
            let polled = (0..)
                .map(|k| t + k * DEFER_MS as Millis)
                .find(|&at| poll.queued_at(at) <= cycle_backlog(qps, burst))
                .expect("the backlog drains");
            assert_eq!(jumped, polled, "case {case}");
        }
    }

    #[test]
    fn the_engines_wakeup_replaces_the_due_cycle() {
        let mut p = Pacer::new(None, 1, COALESCE_MS as Millis);
        p.after_cycle(Some(5_000), 1_000, true);
        assert_eq!(p.cycle_at(), Some(5_000));
        p.changed(1_200);
        assert_eq!(p.cycle_at(), Some(1_250));
        p.after_cycle(None, 1_250, true);
        assert_eq!(p.cycle_at(), None);
        p.after_cycle(Some(900), 1_300, true);
        assert_eq!(p.cycle_at(), Some(1_300), "a budget cut short: at once");
        p.after_cycle(Some(1_300), 1_300, true);
        assert_eq!(p.cycle_at(), Some(1_300), "again, while it decides");
        p.after_cycle(Some(1_300), 1_300, false);
        assert_eq!(
            p.cycle_at(),
            None,
            "nothing decided, asked again at the same instant: no more"
        );
        p.after_cycle(Some(2_000), 2_000, false);
        assert_eq!(p.cycle_at(), Some(2_000), "once at a new instant");
        p.after_cycle(Some(2_000), 2_000, false);
        assert_eq!(p.cycle_at(), None);
    }
}
