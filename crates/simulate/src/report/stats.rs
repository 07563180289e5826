//! Mean and nearest-rank percentiles of the report's figures (also used
//! by `sluice bench`).

use serde::Serialize;

use crate::units::Millis;

/// Time to admission over the admitted workloads, ms.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitStats {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: Millis,
    pub p95_ms: Millis,
    pub max_ms: Millis,
}

/// Mean and percentiles of a ratio.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatioStats {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

/// Mean, p50, p95 and max of ratios (slowdowns).
pub fn ratio_stats(mut values: Vec<f64>) -> RatioStats {
    if values.is_empty() {
        return RatioStats::default();
    }
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len();
    let rank = |p: f64| nearest_rank(&values, p).unwrap_or_default();
    RatioStats {
        count: n as u64,
        mean: values.iter().sum::<f64>() / n as f64,
        p50: rank(0.50),
        p95: rank(0.95),
        max: values[n - 1],
    }
}

/// Nearest-rank percentile of sorted values: the value at rank ⌈p·n⌉.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

/// Mean, p50, p95 and max of waits.
pub fn wait_stats(mut waits: Vec<Millis>) -> WaitStats {
    if waits.is_empty() {
        return WaitStats::default();
    }
    waits.sort_unstable();
    let n = waits.len();
    let rank = |p: f64| nearest_rank(&waits, p).unwrap_or_default();
    WaitStats {
        count: n as u64,
        mean_ms: waits.iter().map(|&w| w as f64).sum::<f64>() / n as f64,
        p50_ms: rank(0.50),
        p95_ms: rank(0.95),
        max_ms: waits[n - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        // n = 10 sorted values 1..=10: p50 at rank ⌈5⌉ = 5 → 5;
        // p95 at rank ⌈9.5⌉ = 10 → 10; p0 clamps to rank 1.
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(nearest_rank(&v, 0.50), Some(5));
        assert_eq!(nearest_rank(&v, 0.95), Some(10));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        // n = 3: p50 at ⌈1.5⌉ = 2, p95 at ⌈2.85⌉ = 3.
        assert_eq!(nearest_rank(&[10, 20, 30], 0.50), Some(20));
        assert_eq!(nearest_rank(&[10, 20, 30], 0.95), Some(30));
        assert_eq!(nearest_rank::<i64>(&[], 0.5), None);
        // wait_stats (class figures, here and in sluice bench): the same rule.
        let s = wait_stats(vec![30, 10, 20]);
        assert_eq!((s.p50_ms, s.p95_ms, s.max_ms, s.mean_ms), (20, 30, 30, 20.0));
    }
}
