//! The client-side write limit (`--kube-qps`, `--kube-burst`): a token
//! bucket, `burst` tokens to start with, refilled at `qps` per second up to
//! `burst`, one token per write; no limit when `qps` is 0 or less. Reads
//! and watches are not limited. The writer uses it, and `sluice bench floor`
//! uses the same limiter so that it measures under the controller's limit.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use sluice_scheduler::pace::{
    Bucket, DEFAULT_EXPLAIN_QPS, DEFAULT_KUBE_BURST, DEFAULT_KUBE_QPS, cycle_backlog, cycle_budget, explain_qps,
};

/// A bucket shared by concurrent writers.
#[derive(Debug)]
pub struct Limiter {
    /// `None`: no limit.
    bucket: Option<Mutex<Bucket>>,
    /// The bucket's time counts from here.
    origin: Instant,
}

impl Limiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            bucket: Bucket::new(qps, burst, Duration::ZERO).map(Mutex::new),
            origin: Instant::now(),
        }
    }

    /// The bucket's time: since this limiter was made.
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Waits for a token (at once without a limit).
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire(1, 0) {
                None => return,
                Some(d) => tokio::time::sleep(d).await,
            }
        }
    }

    /// Takes `n` tokens if `keep` stay in the bucket after them, else says
    /// how long to wait ([`Bucket::take_spare`]); `None` without a limit.
    pub fn try_acquire(&self, n: u32, keep: u32) -> Option<Duration> {
        let bucket = self.bucket.as_ref()?;
        bucket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_spare(self.now(), n, keep)
    }

    /// How long until [`Limiter::try_acquire`] would succeed; takes nothing.
    pub fn wait_time(&self, n: u32, keep: u32) -> Option<Duration> {
        let bucket = self.bucket.as_ref()?;
        bucket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wait_spare(self.now(), n, keep)
    }

    /// Tokens the bucket holds at most; `None` without a limit.
    pub fn burst(&self) -> Option<u32> {
        self.bucket
            .as_ref()
            .map(|b| b.lock().unwrap_or_else(|e| e.into_inner()).burst())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The bucket's own rules are tested in `sluice_scheduler::pace`.

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
