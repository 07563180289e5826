//! The client-side write limit (`--kube-qps`, `--kube-burst`): a token
//! bucket, `burst` tokens to start with, refilled at `qps` per second up to
//! `burst`, one token per write; no limit when `qps` is 0 or less. Reads
//! and watches are not limited. The writer uses it, and `sluice bench floor`
//! uses the same limiter so that it measures under the controller's limit.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `sluice controller --kube-qps` default.
pub const DEFAULT_KUBE_QPS: f64 = 50.0;
/// `sluice controller --kube-burst` default.
pub const DEFAULT_KUBE_BURST: u32 = 100;

/// A token bucket: `qps` writes per second sustained, `burst` at once.
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket, or `None` (no limit) when `qps` is not positive.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Option<Self> {
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
    pub fn take(&mut self, now: Instant) -> Option<Duration> {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            // At most an hour (a tiny qps must not overflow a Duration).
            Some(Duration::from_secs_f64(((1.0 - self.tokens) / self.qps).min(3600.0)))
        }
    }
}

/// A bucket shared by concurrent writers.
#[derive(Debug)]
pub struct Limiter(Option<Mutex<Bucket>>);

impl Limiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        Self(Bucket::new(qps, burst, Instant::now()).map(Mutex::new))
    }

    /// Waits for a token (at once without a limit).
    pub async fn acquire(&self) {
        let Some(bucket) = &self.0 else { return };
        loop {
            let wait = bucket.lock().unwrap_or_else(|e| e.into_inner()).take(Instant::now());
            match wait {
                None => return,
                Some(d) => tokio::time::sleep(d).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_when_qps_is_not_positive() {
        let now = Instant::now();
        assert!(Bucket::new(0.0, 100, now).is_none());
        assert!(Bucket::new(-1.0, 100, now).is_none());
        assert!(Bucket::new(f64::NAN, 100, now).is_none());
    }

    #[test]
    fn starts_full_then_refills_at_qps() {
        // qps 50, burst 100: 100 writes at once, the 101st waits
        // (1 − 0) / 50 = 20 ms; 20 ms later exactly one token is back.
        let t0 = Instant::now();
        let mut b = Bucket::new(50.0, 100, t0).expect("limited");
        for i in 0..100 {
            assert_eq!(b.take(t0), None, "write {i} is within the burst");
        }
        assert_eq!(b.take(t0), Some(Duration::from_millis(20)));
        let t1 = t0 + Duration::from_millis(20);
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
    fn a_zero_burst_still_allows_one_write() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10.0, 0, t0).expect("limited");
        assert_eq!(b.take(t0), None);
        // 1 token every 100 ms.
        assert_eq!(b.take(t0), Some(Duration::from_millis(100)));
    }

    #[tokio::test]
    async fn acquire_paces_writes_at_qps_after_the_burst() {
        // qps 100, burst 2: writes at 0, 0, then every 10 ms: the 5th at 30 ms.
        let l = Limiter::new(100.0, 2);
        let start = Instant::now();
        for _ in 0..5 {
            l.acquire().await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(29), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        // No limit: no waiting.
        let free = Limiter::new(0.0, 0);
        let start = Instant::now();
        for _ in 0..1000 {
            free.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_millis(500));
    }
}
