//! Virtual time: a deterministic event queue and the API write rate limiter.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::units::Millis;

/// A min-queue of events by `(time, seq)`: events at the same instant come
/// out in the order they were pushed, so a run is deterministic.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
}

struct Entry<E> {
    at: Millis,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, at: Millis, event: E) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Removes the earliest event if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Millis) -> Option<E> {
        if self.peek_time()? <= now {
            self.heap.pop().map(|Reverse(e)| e.event)
        } else {
            None
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A token bucket in virtual time, as the generic cell rate algorithm: one
/// token every `1000 / qps` ms, at most `burst` saved up. Callers take tokens
/// in the order of their requests (a client's rate limiter is FIFO), so a
/// write requested at `t` happens at `acquire(t) >= t`.
#[derive(Debug, Clone)]
pub struct WriteLimiter {
    /// Milliseconds per token; `None` = unlimited.
    interval: Option<f64>,
    /// How far ahead of schedule a write may run (the saved-up burst).
    tolerance: f64,
    /// Theoretical arrival time of the next conforming write.
    tat: f64,
    pub writes: u64,
    /// Sum over writes of (write time − request time), ms.
    pub delay_total: i64,
    pub delay_max: i64,
}

impl WriteLimiter {
    /// `qps = None` or `0` means no limit; `burst` is at least 1.
    pub fn new(qps: Option<f64>, burst: u32) -> Self {
        let interval = qps.filter(|q| *q > 0.0).map(|q| 1000.0 / q);
        let burst = f64::from(burst.max(1));
        Self {
            interval,
            tolerance: interval.map_or(0.0, |i| (burst - 1.0) * i),
            tat: f64::NEG_INFINITY,
            writes: 0,
            delay_total: 0,
            delay_max: 0,
        }
    }

    /// Takes one token for a write requested at `now`; returns when the write
    /// happens (whole milliseconds, rounded up).
    pub fn acquire(&mut self, now: Millis) -> Millis {
        self.writes += 1;
        let Some(interval) = self.interval else {
            return now;
        };
        let t = now as f64;
        let earliest = (self.tat - self.tolerance).max(t);
        self.tat = self.tat.max(earliest) + interval;
        // Rounding guard: 1000/3 accumulates error; never round 5.0000000001 up to 6.
        let at = (earliest - 1e-6).ceil().max(t) as Millis;
        let delay = at - now;
        self.delay_total += delay;
        self.delay_max = self.delay_max.max(delay);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_push_order() {
        let mut q = EventQueue::new();
        q.push(20, "c");
        q.push(10, "a");
        q.push(20, "d");
        q.push(10, "b");
        q.push(5, "first");
        assert_eq!(q.peek_time(), Some(5));
        assert_eq!(q.pop_due(4), None, "nothing is due before 5");
        assert_eq!(q.pop_due(5), Some("first"));
        assert_eq!(q.pop_due(10), Some("a"));
        assert_eq!(q.pop_due(10), Some("b"));
        assert_eq!(q.pop_due(10), None);
        assert_eq!(q.pop_due(20), Some("c"));
        assert_eq!(q.pop_due(20), Some("d"));
        assert!(q.is_empty());
    }

    #[test]
    fn an_event_pushed_for_now_is_processed_in_the_same_instant() {
        let mut q = EventQueue::new();
        q.push(7, 1);
        assert_eq!(q.pop_due(7), Some(1));
        q.push(7, 2); // e.g. an eviction with zero delay
        assert_eq!(q.pop_due(7), Some(2));
    }

    #[test]
    fn unlimited_writes_are_never_delayed() {
        let mut l = WriteLimiter::new(None, 1);
        for _ in 0..1000 {
            assert_eq!(l.acquire(42), 42);
        }
        assert_eq!(l.writes, 1000);
        assert_eq!(l.delay_total, 0);
    }

    #[test]
    fn ten_qps_spaces_writes_by_100ms_after_the_burst() {
        // 10 qps, burst 2: two writes at once, then one per 100 ms.
        let mut l = WriteLimiter::new(Some(10.0), 2);
        let got: Vec<Millis> = (0..5).map(|_| l.acquire(0)).collect();
        assert_eq!(got, vec![0, 0, 100, 200, 300]);
        // Idle for a second: the bucket refills to its burst of 2, no more.
        assert_eq!(l.acquire(1_400), 1_400);
        assert_eq!(l.acquire(1_400), 1_400);
        assert_eq!(l.acquire(1_400), 1_500);
        assert_eq!(l.delay_max, 300);
        assert_eq!(l.delay_total, 100 + 200 + 300 + 100);
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        // 3 qps = 333.3 ms per token: the 3rd write after the first lands at
        // exactly 1000 ms, the 300th at 100 s (no accumulated rounding).
        let mut l = WriteLimiter::new(Some(3.0), 1);
        let times: Vec<Millis> = (0..301).map(|_| l.acquire(0)).collect();
        assert_eq!(&times[..4], &[0, 334, 667, 1000]);
        assert_eq!(times[300], 100_000);
    }
}
