//! Is an admitted workload's GPU idle? The window rule, on utilisation
//! samples per pod, shared by the controller (samples from Prometheus) and
//! the simulator (samples from a trace's profile).
//!
//! A workload is **idle** when, for the window `[end − window, end]`:
//! - the window starts no earlier than `not_before` (admission + grace
//!   period: warm-up is never idle);
//! - it has at least one GPU pod, and **every** GPU pod has samples that
//!   cover the whole window: a sample stands for half a step either side of
//!   it, so the first must be within half a step of the window's start, the
//!   last within half a step of its end, and no two consecutive ones more
//!   than one and a half steps apart (one missing step is a gap);
//! - every sample in the window is a number below the threshold.
//!
//! Anything else is not idle. Missing data (a pod absent, a gap, a value
//! that is not a number) is *unknown*, never idle: an outage of the metrics
//! pipeline must not look like idle GPUs.

use crate::model::Millis;

/// One utilisation sample: time (ms) and percent.
pub type Sample = (Millis, f64);

/// The rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleWindow {
    /// Idle below this utilisation, in percent.
    pub below_percent: f64,
    /// Length of the window, ms.
    pub window_ms: Millis,
    /// Spacing of the samples (a range query's step), ms; at least 1.
    pub step_ms: Millis,
}

/// One GPU pod of the workload and its samples (`None`: the metrics have
/// no series for it). Samples are in time order.
#[derive(Clone, Copy, Debug)]
pub struct PodSamples<'a> {
    pub pod: &'a str,
    pub samples: Option<&'a [Sample]>,
}

/// The verdict for one workload.
#[derive(Clone, Debug, PartialEq)]
pub enum Idleness {
    /// Every GPU pod stayed below the threshold for the whole window.
    Idle {
        /// Mean utilisation over all samples in the window, percent.
        mean_percent: f64,
        /// Highest sample in the window, percent.
        max_percent: f64,
        pods: usize,
    },
    /// Some pod used its GPU: at or above the threshold at `at`.
    Busy { pod: String, percent: f64, at: Millis },
    /// Not enough to tell: never idle.
    Unknown(Unknown),
}

/// Why the rule cannot tell.
#[derive(Clone, Debug, PartialEq)]
pub enum Unknown {
    /// The window would start before admission + grace period.
    WarmingUp { judged_from: Millis },
    /// No GPU pod to measure.
    NoPods,
    /// The metrics have no series for this pod.
    PodMissing { pod: String },
    /// The pod's samples leave `from..to` uncovered.
    Gap { pod: String, from: Millis, to: Millis },
    /// A sample is not a number (NaN or infinite).
    NotANumber { pod: String, at: Millis },
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unknown::WarmingUp { judged_from } => {
                write!(f, "in its grace period (judged from {judged_from} ms)")
            }
            Unknown::NoPods => write!(f, "no running GPU pod to measure"),
            Unknown::PodMissing { pod } => write!(f, "no utilisation series for pod {pod}"),
            Unknown::Gap { pod, from, to } => {
                write!(f, "pod {pod} has no samples for {} s of the window", (to - from) / 1000)
            }
            Unknown::NotANumber { pod, at } => write!(f, "pod {pod} reported a value that is not a number at {at} ms"),
        }
    }
}

impl IdleWindow {
    /// Judges the pods over the window ending at `end`, which may not
    /// start before `not_before`.
    pub fn judge(&self, end: Millis, not_before: Millis, pods: &[PodSamples<'_>]) -> Idleness {
        let start = end.saturating_sub(self.window_ms.max(0));
        if start < not_before {
            return Idleness::Unknown(Unknown::WarmingUp {
                judged_from: not_before.saturating_add(self.window_ms),
            });
        }
        if pods.is_empty() {
            return Idleness::Unknown(Unknown::NoPods);
        }
        let step = self.step_ms.max(1);
        let half = step / 2;
        let max_gap = step.saturating_add(half);
        let (mut sum, mut n, mut max) = (0.0_f64, 0_u64, f64::MIN);
        let mut busy: Option<Idleness> = None;
        for p in pods {
            let Some(samples) = p.samples else {
                return Idleness::Unknown(Unknown::PodMissing { pod: p.pod.to_string() });
            };
            // A sample stands for half a step either side of it.
            let lo = samples.partition_point(|s| s.0 < start - half);
            let hi = samples.partition_point(|s| s.0 <= end + half);
            let inside = &samples[lo..hi];
            let gap = |from: Millis, to: Millis| {
                Idleness::Unknown(Unknown::Gap {
                    pod: p.pod.to_string(),
                    from,
                    to,
                })
            };
            let (Some(first), Some(last)) = (inside.first(), inside.last()) else {
                return gap(start, end);
            };
            if first.0 - start > half {
                return gap(start, first.0);
            }
            if end - last.0 > half {
                return gap(last.0, end);
            }
            for w in inside.windows(2) {
                if w[1].0 - w[0].0 > max_gap {
                    return gap(w[0].0, w[1].0);
                }
            }
            for &(at, v) in inside {
                if !v.is_finite() {
                    return Idleness::Unknown(Unknown::NotANumber {
                        pod: p.pod.to_string(),
                        at,
                    });
                }
                if v >= self.below_percent && busy.is_none() {
                    busy = Some(Idleness::Busy {
                        pod: p.pod.to_string(),
                        percent: v,
                        at,
                    });
                }
                sum += v;
                n += 1;
                max = max.max(v);
            }
        }
        // Unknown for any pod wins over busy: checked over all pods first.
        if let Some(b) = busy {
            return b;
        }
        Idleness::Idle {
            mean_percent: sum / n as f64,
            max_percent: max,
            pods: pods.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Millis = 60_000;

    fn rule() -> IdleWindow {
        IdleWindow {
            below_percent: 10.0,
            window_ms: 30 * MIN,
            step_ms: MIN,
        }
    }

    /// One sample a minute from `from` to `to` (inclusive), all `v`.
    fn flat(from: Millis, to: Millis, v: f64) -> Vec<Sample> {
        (from / MIN..=to / MIN).map(|m| (m * MIN, v)).collect()
    }

    fn pods<'a>(series: &'a [(&'a str, Option<Vec<Sample>>)]) -> Vec<PodSamples<'a>> {
        series
            .iter()
            .map(|(pod, s)| PodSamples {
                pod,
                samples: s.as_deref(),
            })
            .collect()
    }

    #[test]
    fn all_pods_idle_for_the_whole_window_is_idle() {
        let s = [("a", Some(flat(0, 60 * MIN, 2.0))), ("b", Some(flat(0, 60 * MIN, 4.0)))];
        let v = rule().judge(60 * MIN, 0, &pods(&s));
        let Idleness::Idle {
            mean_percent,
            max_percent,
            pods,
        } = v
        else {
            panic!("{v:?}")
        };
        assert_eq!((mean_percent, max_percent, pods), (3.0, 4.0, 2));
    }

    #[test]
    fn one_busy_pod_is_not_idle() {
        let mut busy = flat(0, 60 * MIN, 2.0);
        busy[45].1 = 80.0;
        let s = [("a", Some(flat(0, 60 * MIN, 2.0))), ("b", Some(busy))];
        assert_eq!(
            rule().judge(60 * MIN, 0, &pods(&s)),
            Idleness::Busy {
                pod: "b".into(),
                percent: 80.0,
                at: 45 * MIN
            }
        );
    }

    #[test]
    fn the_threshold_itself_is_busy() {
        let s = [("a", Some(flat(0, 30 * MIN, 10.0)))];
        assert!(matches!(rule().judge(30 * MIN, 0, &pods(&s)), Idleness::Busy { .. }));
    }

    #[test]
    fn busy_before_the_window_does_not_count() {
        let mut v = flat(0, 60 * MIN, 1.0);
        v[10].1 = 99.0; // at 10 min; the window is 30..60
        let s = [("a", Some(v))];
        assert!(matches!(rule().judge(60 * MIN, 0, &pods(&s)), Idleness::Idle { .. }));
    }

    #[test]
    fn a_gap_in_the_data_is_not_idle() {
        let mut v = flat(0, 60 * MIN, 1.0);
        v.retain(|s| s.0 != 40 * MIN && s.0 != 41 * MIN);
        let s = [("a", Some(v))];
        assert_eq!(
            rule().judge(60 * MIN, 0, &pods(&s)),
            Idleness::Unknown(Unknown::Gap {
                pod: "a".into(),
                from: 39 * MIN,
                to: 42 * MIN
            })
        );
    }

    #[test]
    fn one_missing_sample_is_a_gap_too() {
        let mut v = flat(0, 60 * MIN, 1.0);
        v.retain(|s| s.0 != 50 * MIN);
        assert!(matches!(
            rule().judge(60 * MIN, 0, &pods(&[("a", Some(v))])),
            Idleness::Unknown(Unknown::Gap { .. })
        ));
    }

    #[test]
    fn data_that_starts_late_or_stops_early_is_not_idle() {
        let late = [("a", Some(flat(35 * MIN, 60 * MIN, 1.0)))];
        assert_eq!(
            rule().judge(60 * MIN, 0, &pods(&late)),
            Idleness::Unknown(Unknown::Gap {
                pod: "a".into(),
                from: 30 * MIN,
                to: 35 * MIN
            })
        );
        let early = [("a", Some(flat(0, 55 * MIN, 1.0)))];
        assert!(matches!(
            rule().judge(60 * MIN, 0, &pods(&early)),
            Idleness::Unknown(Unknown::Gap { .. })
        ));
        let none = [("a", Some(flat(0, 10 * MIN, 1.0)))];
        assert!(matches!(
            rule().judge(60 * MIN, 0, &pods(&none)),
            Idleness::Unknown(Unknown::Gap { .. })
        ));
    }

    #[test]
    fn a_pod_without_a_series_is_unknown_even_if_another_is_busy() {
        let s = [("a", Some(flat(0, 60 * MIN, 90.0))), ("b", None)];
        assert_eq!(
            rule().judge(60 * MIN, 0, &pods(&s)),
            Idleness::Unknown(Unknown::PodMissing { pod: "b".into() })
        );
    }

    #[test]
    fn no_pods_is_unknown() {
        assert_eq!(rule().judge(60 * MIN, 0, &[]), Idleness::Unknown(Unknown::NoPods));
    }

    #[test]
    fn nothing_is_judged_in_the_grace_period() {
        let s = [("a", Some(flat(0, 60 * MIN, 0.0)))];
        // Admitted at 10 min with 15 min grace: judged from 25 + 30 = 55 min.
        assert_eq!(
            rule().judge(50 * MIN, 25 * MIN, &pods(&s)),
            Idleness::Unknown(Unknown::WarmingUp { judged_from: 55 * MIN })
        );
        assert!(matches!(
            rule().judge(55 * MIN, 25 * MIN, &pods(&s)),
            Idleness::Idle { .. }
        ));
    }

    #[test]
    fn not_a_number_is_unknown() {
        let mut v = flat(0, 60 * MIN, 1.0);
        v[50].1 = f64::NAN;
        assert_eq!(
            rule().judge(60 * MIN, 0, &pods(&[("a", Some(v))])),
            Idleness::Unknown(Unknown::NotANumber {
                pod: "a".into(),
                at: 50 * MIN
            })
        );
    }

    #[test]
    fn samples_off_the_step_grid_within_half_a_step_still_cover() {
        // Scraped every 60 s but 20 s off the window's grid.
        let v: Vec<Sample> = (0..=60).map(|m| (m * MIN + 20_000, 1.0)).collect();
        assert!(matches!(
            rule().judge(60 * MIN + 40_000, 0, &pods(&[("a", Some(v))])),
            Idleness::Idle { .. }
        ));
    }
}
