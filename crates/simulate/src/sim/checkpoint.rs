//! What a preempted run keeps: the simulator's model of checkpoints and of
//! a preemption notice (its ClusterQueue's `preemption.noticeSeconds`).
//!
//! ```text
//!   chosen as a victim at t, its run started at s with `saved` work already kept:
//!   no notice                     runs on 0;      keeps the last periodic checkpoint before t
//!   notice N, checkpointOnNotice  runs on C ≤ N;  keeps everything done by t (then acknowledges)
//!     C ≤ N
//!   notice N, otherwise           runs on N;      keeps the last periodic checkpoint before t + N
//!   a run that would end while it runs on ends then instead, and keeps all of it.
//! ```
//!
//! Periodic checkpoints (`checkpointInterval` I) fall every I of run time
//! from the run's start; without one, a preempted run keeps nothing of its
//! own. The work a run keeps is not done again: the next run is that much
//! shorter. The report counts as lost what a cut run did, through the time
//! it ran on, less what it kept: saving on a notice costs its saving time.

use crate::units::Millis;

/// How a workload saves its state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Saving {
    /// `checkpointInterval`.
    pub interval: Option<Millis>,
    /// `checkpointOnNotice`.
    pub on_notice: Option<Millis>,
}

/// What becomes of a run chosen as a victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    /// How long it runs on after being chosen (its notice, or less).
    pub runs_on: Millis,
    /// Work of this run that is kept.
    pub kept: Millis,
}

/// The run that started at `started` with `left` of its work to do, chosen
/// as a victim at `t`, given `notice` (0: none).
pub fn preempted(saving: Saving, notice: Millis, started: Millis, left: Millis, t: Millis) -> Victim {
    let done = (t - started).clamp(0, left);
    let runs_on = match saving.on_notice {
        Some(c) if notice > 0 && c <= notice => c,
        _ => notice,
    };
    if done + runs_on >= left {
        // It ends while it runs on: all of it is kept.
        return Victim {
            runs_on: left - done,
            kept: left,
        };
    }
    let kept = match saving.on_notice {
        Some(c) if notice > 0 && c <= notice => done,
        _ => periodic(saving.interval, done + runs_on),
    };
    Victim { runs_on, kept }
}

/// The work kept by periodic checkpoints after `done` of run time.
fn periodic(interval: Option<Millis>, done: Millis) -> Millis {
    match interval {
        Some(i) if i > 0 => done / i * i,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Millis = 60_000;

    #[test]
    fn the_table() {
        let periodic = Saving {
            interval: Some(30 * M),
            on_notice: None,
        };
        let on_notice = Saving {
            interval: None,
            on_notice: Some(2 * M),
        };
        let neither = Saving::default();
        // (saving, notice, chosen after, left) → (runs on, kept)
        let cases = [
            (neither, 0, 50 * M, 100 * M, (0, 0)),
            (periodic, 0, 50 * M, 100 * M, (0, 30 * M)),
            (periodic, 15 * M, 50 * M, 100 * M, (15 * M, 60 * M)),
            (on_notice, 5 * M, 50 * M, 100 * M, (2 * M, 50 * M)),
            // Its checkpoint takes longer than the notice: as without one.
            (on_notice, M, 50 * M, 100 * M, (M, 0)),
            // No notice: checkpointOnNotice never comes into play.
            (on_notice, 0, 50 * M, 100 * M, (0, 0)),
            // It ends within its notice: kept whole.
            (neither, 10 * M, 95 * M, 100 * M, (5 * M, 100 * M)),
        ];
        for (saving, notice, after, left, (runs_on, kept)) in cases {
            assert_eq!(
                preempted(saving, notice, 1_000, left, 1_000 + after),
                Victim { runs_on, kept },
                "{saving:?} notice {notice} after {after}"
            );
        }
    }
}
