//! The run times workloads declare to the engine, which backfill trusts
//! ([`sluice_scheduler::WorkloadSpec::expected_runtime`]). Users guess
//! badly, so a run can replace the trace's `expectedRuntime` with the true
//! run time, or the true run time off by a random error.

use super::super::trace::TraceWorkload;
use crate::units::Millis;

/// Which run time each workload declares.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum DeclaredRuntimes {
    /// The trace's `expectedRuntime`; none where it has none.
    #[default]
    Trace,
    /// Every workload declares its true run time.
    Exact,
    /// Every workload declares its true run time × (1 + e), `e` drawn
    /// uniformly from [-`fraction`, `fraction`] per workload (the same
    /// draw for the same workload in every run).
    Off { fraction: f64 },
}

impl DeclaredRuntimes {
    /// What workload `i` of the trace declares.
    pub fn of(self, i: usize, w: &TraceWorkload) -> Option<Millis> {
        match self {
            DeclaredRuntimes::Trace => w.expected_runtime,
            DeclaredRuntimes::Exact => Some(w.duration),
            DeclaredRuntimes::Off { fraction } => {
                let e = (2.0 * unit(i as u64) - 1.0) * fraction;
                Some(((w.duration as f64) * (1.0 + e)).round().max(0.0) as Millis)
            }
        }
    }

    /// `trace`, `exact`, or `±F%` / `F%` (the true run time off by up to
    /// F per cent either way).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "trace" => Ok(DeclaredRuntimes::Trace),
            "exact" => Ok(DeclaredRuntimes::Exact),
            _ => {
                let pct = text
                    .trim_start_matches('±')
                    .strip_suffix('%')
                    .and_then(|p| p.parse::<f64>().ok());
                match pct {
                    Some(p) if (0.0..=100.0).contains(&p) => Ok(DeclaredRuntimes::Off { fraction: p / 100.0 }),
                    _ => Err(format!(
                        "expected trace, exact or an error such as ±50% (0 to 100 %), got {text:?}"
                    )),
                }
            }
        }
    }
}

/// A number in [0, 1) from `i` (splitmix64): the same for the same `i`.
fn unit(i: u64) -> f64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(duration: Millis, expected: Option<Millis>) -> TraceWorkload {
        TraceWorkload {
            duration,
            expected_runtime: expected,
            ..Default::default()
        }
    }

    #[test]
    fn the_trace_exact_and_an_error_within_its_bounds() {
        let w = job(1_000_000, Some(3_600_000));
        assert_eq!(DeclaredRuntimes::Trace.of(0, &w), Some(3_600_000));
        assert_eq!(DeclaredRuntimes::Trace.of(0, &job(5, None)), None);
        assert_eq!(DeclaredRuntimes::Exact.of(0, &w), Some(1_000_000));
        let off = DeclaredRuntimes::Off { fraction: 0.5 };
        let declared: Vec<Millis> = (0..1000).map(|i| off.of(i, &w).unwrap()).collect();
        assert!(declared.iter().all(|d| (500_000..=1_500_000).contains(d)));
        // Spread over the whole range, and the same draw each time.
        assert!(declared.iter().any(|&d| d < 600_000) && declared.iter().any(|&d| d > 1_400_000));
        assert_eq!(off.of(7, &w), off.of(7, &w));
    }

    #[test]
    fn parsed_from_the_command_line() {
        assert_eq!(DeclaredRuntimes::parse("exact"), Ok(DeclaredRuntimes::Exact));
        assert_eq!(DeclaredRuntimes::parse("trace"), Ok(DeclaredRuntimes::Trace));
        assert_eq!(
            DeclaredRuntimes::parse("±50%"),
            Ok(DeclaredRuntimes::Off { fraction: 0.5 })
        );
        assert_eq!(
            DeclaredRuntimes::parse("25%"),
            Ok(DeclaredRuntimes::Off { fraction: 0.25 })
        );
        assert!(DeclaredRuntimes::parse("150%").unwrap_err().contains("±50%"));
        assert!(DeclaredRuntimes::parse("soon").is_err());
    }
}
