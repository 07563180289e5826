//! The order in which preemption candidates become victims: workloads of
//! queues that borrow go first, then lower priority; within such a tier
//! the preemptor's queue's `victim_order` decides:
//!
//! ```text
//! Newest (default, Kueue's):  most recently admitted first, then UID
//! LeastWorkLost:              least work lost first, then most recently
//!                             admitted, then UID
//! work lost = max over the contested (flavor, resource) pairs of
//!             held / asked          (in millionths, rounded down)
//!           × time since its latest admission (ms)
//! ```
//!
//! The contested pairs are those the preemptor is short of (all it asks
//! for when node room decides), `asked` what the preemptor asks of each,
//! `held` what the candidate holds of it: when only GPUs are short, as
//! usual, the work lost is its GPUs over the preemptor's times how long
//! it has run. Checkpoints are not known to the engine, so a run loses
//! everything since its admission. With a `recently_preempted_grace`, a
//! candidate this engine preempted less than that long ago goes after
//! every other candidate of its tier, whatever the order.
//!
//! The index makes the order total and deterministic. The search removes
//! candidates in this order until the preemptor fits, then gives back
//! every one it did not need.

use std::cmp::Reverse;

use crate::ledger::FrKey;
use crate::model::{Amount, Millis, VictimOrderPolicy};

/// What a preemptor's queue's policy puts between a candidate's priority
/// and its admission time in the order. Both zero under `Newest` without
/// a grace, which leaves Kueue's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct VictimCost {
    /// Preempted within the grace: after the others of its tier.
    pub(crate) recently_preempted: bool,
    /// Millionths of the contested resources × milliseconds since
    /// admission (0 under `Newest`).
    pub(crate) work_lost: u128,
}

/// How the preemptor's queue orders the victims of one search.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VictimRule<'c> {
    pub(crate) order: VictimOrderPolicy,
    pub(crate) grace: Option<Millis>,
    pub(crate) now: Millis,
    /// The contested (flavor, resource) pairs and what the preemptor asks
    /// of each.
    pub(crate) asked: &'c [(FrKey, Amount)],
}

impl VictimRule<'_> {
    /// The cost of a candidate admitted (latest) at `admitted_at`, last
    /// preempted by this engine at `last_preempted`, holding `held`.
    pub(crate) fn cost(
        &self,
        admitted_at: Millis,
        last_preempted: Option<Millis>,
        held: &[(FrKey, Amount)],
    ) -> VictimCost {
        VictimCost {
            recently_preempted: recently_preempted(self.grace, last_preempted, self.now),
            work_lost: match self.order {
                VictimOrderPolicy::Newest => 0,
                VictimOrderPolicy::LeastWorkLost => work_lost(self.asked, held, admitted_at, self.now),
            },
        }
    }
}

/// Whether a workload preempted at `last_preempted` is still within the
/// grace at `now` (less than `grace` ago).
pub(crate) fn recently_preempted(grace: Option<Millis>, last_preempted: Option<Millis>, now: Millis) -> bool {
    match (grace, last_preempted) {
        (Some(g), Some(at)) => g > 0 && now.saturating_sub(at) < g,
        _ => false,
    }
}

/// The work a candidate loses if evicted at `now`: its dominant share of
/// the contested pairs (held over asked, in millionths) times the
/// milliseconds since `admitted_at` (none before it).
pub(crate) fn work_lost(asked: &[(FrKey, Amount)], held: &[(FrKey, Amount)], admitted_at: Millis, now: Millis) -> u128 {
    let share = asked
        .iter()
        .filter(|&&(_, a)| a > 0)
        .map(|&(fr, a)| {
            let h = held
                .iter()
                .filter(|(k, _)| *k == fr)
                .map(|&(_, v)| v.max(0))
                .sum::<Amount>();
            h as u128 * 1_000_000 / a as u128
        })
        .max()
        .unwrap_or(0);
    share * now.saturating_sub(admitted_at).max(0) as u128
}

/// One candidate's place in the victim order (smallest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct VictimOrder<'a> {
    /// `false` (in a queue that borrows) sorts first.
    pub(crate) outside_borrowing_queue: bool,
    pub(crate) priority: i32,
    pub(crate) cost: VictimCost,
    /// Newest admission first.
    pub(crate) admitted_at: Reverse<Millis>,
    pub(crate) uid: &'a str,
    /// The candidate's index in the search's list.
    pub(crate) index: usize,
}

impl<'a> VictimOrder<'a> {
    pub(crate) fn new(
        in_borrowing_queue: bool,
        priority: i32,
        cost: VictimCost,
        admitted_at: Millis,
        uid: &'a str,
        index: usize,
    ) -> Self {
        Self {
            outside_borrowing_queue: !in_borrowing_queue,
            priority,
            cost,
            admitted_at: Reverse(admitted_at),
            uid,
            index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Millis = 60_000;
    const H: Millis = 60 * MIN;
    /// (flavor, resource) pairs: h100 GPUs, a100 GPUs, cpu.
    const H100: FrKey = (0, 0);
    const A100: FrKey = (1, 0);
    const CPU: FrKey = (2, 1);

    fn order(mut candidates: Vec<VictimOrder<'_>>) -> Vec<&str> {
        candidates.sort();
        candidates.iter().map(|c| c.uid).collect()
    }

    fn plain(in_borrowing_queue: bool, priority: i32, admitted_at: Millis, uid: &str, index: usize) -> VictimOrder<'_> {
        VictimOrder::new(
            in_borrowing_queue,
            priority,
            VictimCost::default(),
            admitted_at,
            uid,
            index,
        )
    }

    #[test]
    fn borrowing_queues_give_first_whatever_the_priority() {
        let got = order(vec![
            plain(false, 0, 10, "own-low", 0),
            plain(true, 500, 10, "borrower-high", 1),
        ]);
        assert_eq!(got, ["borrower-high", "own-low"]);
    }

    #[test]
    fn lower_priority_then_newest_admission_then_uid() {
        let got = order(vec![
            plain(false, 10, 100, "b-old", 0),
            plain(false, 10, 200, "c-new", 1),
            plain(false, 5, 50, "z-low", 2),
            plain(false, 10, 100, "a-old", 3),
        ]);
        assert_eq!(got, ["z-low", "c-new", "a-old", "b-old"]);
    }

    #[test]
    fn work_lost_is_the_dominant_contested_share_times_the_run_time() {
        // The preemptor lacks 8 h100 GPUs and 64 cpus (64 000 milli-cpus).
        let asked = [(H100, 8_000), (CPU, 64_000)];
        // (held, admitted at, now, expected)
        type Held = &'static [(FrKey, Amount)];
        let table: [(Held, Millis, Millis, u128); 7] = [
            // 2 of 8 GPUs (250 000 millionths) for 1 h (3 600 000 ms).
            (&[(H100, 2_000)], 0, H, 250_000 * 3_600_000),
            // 32 GPUs are 4 times what is asked: 4 000 000 for 15 min.
            (&[(H100, 32_000)], 2 * H, 2 * H + 15 * MIN, 4_000_000 * 900_000),
            // cpu dominates: 48 of 64 cpus (750 000) over 1 of 8 GPUs.
            (&[(H100, 1_000), (CPU, 48_000)], 0, 2 * H, 750_000 * 7_200_000),
            // A100 GPUs are not contested: only its 8 cpus count.
            (&[(A100, 8_000), (CPU, 8_000)], 0, H, 125_000 * 3_600_000),
            // Admitted just now: nothing lost.
            (&[(H100, 8_000)], H, H, 0),
            // An admission time after `now` (a clock skew) loses nothing.
            (&[(H100, 8_000)], 2 * H, H, 0),
            // 1 of 3 milli-units rounds down to 333 333 millionths.
            (&[(H100, 1)], 0, 10, 3_333_330),
        ];
        for (i, (held, admitted_at, now, want)) in table.into_iter().enumerate() {
            let asked: &[(FrKey, Amount)] = if i == 6 { &[(H100, 3)] } else { &asked };
            assert_eq!(work_lost(asked, held, admitted_at, now), want, "case {i}: {held:?}");
        }
    }

    #[test]
    fn recently_preempted_is_strictly_within_the_grace() {
        let table = [
            (None, Some(0), 5 * MIN, false),
            (Some(10 * MIN), None, 5 * MIN, false),
            (Some(10 * MIN), Some(0), 5 * MIN, true),
            (Some(10 * MIN), Some(0), 10 * MIN - 1, true),
            (Some(10 * MIN), Some(0), 10 * MIN, false),
            (Some(0), Some(0), 0, false),
        ];
        for (grace, last, now, want) in table {
            assert_eq!(recently_preempted(grace, last, now), want, "{grace:?} {last:?} {now}");
        }
    }

    /// Two 8-GPU training runs and a 2-GPU one, all priority 100, and a
    /// 1-GPU experiment of priority 10; the preemptor lacks 8 GPUs at 10 h.
    fn costs(rule: &VictimRule<'_>) -> Vec<VictimOrder<'static>> {
        // (uid, priority, admitted at, last preempted, GPUs held)
        let table: [(&'static str, i32, Millis, Option<Millis>, Amount); 5] = [
            ("exp", 10, 2 * H, None, 1_000),
            ("old-8", 100, 4 * H, None, 8_000),                     // 6 h × 1.0 = 6
            ("new-8", 100, 8 * H, None, 8_000),                     // 2 h × 1.0 = 2
            ("small-2", 100, 2 * H, None, 2_000),                   // 8 h × 0.25 = 2
            ("again-8", 100, 9 * H, Some(9 * H - 20 * MIN), 8_000), // 1 h, preempted 80 min ago
        ];
        table
            .into_iter()
            .enumerate()
            .map(|(i, (uid, prio, at, last, gpus))| {
                VictimOrder::new(false, prio, rule.cost(at, last, &[(H100, gpus)]), at, uid, i)
            })
            .collect()
    }

    #[test]
    fn newest_keeps_kueues_order() {
        let asked = [(H100, 8_000)];
        let rule = VictimRule {
            order: VictimOrderPolicy::Newest,
            grace: None,
            now: 10 * H,
            asked: &asked,
        };
        assert_eq!(order(costs(&rule)), ["exp", "again-8", "new-8", "old-8", "small-2"]);
    }

    #[test]
    fn least_work_lost_within_a_priority_tier_then_newest() {
        let asked = [(H100, 8_000)];
        let rule = VictimRule {
            order: VictimOrderPolicy::LeastWorkLost,
            grace: None,
            now: 10 * H,
            asked: &asked,
        };
        // Lower priority still first. Among priority 100: again-8 (1 h ×
        // 1.0), then new-8 and small-2 tie at 2 GPU-hours-per-8 and the
        // newer admission (new-8, 8 h) goes first, then old-8 (6).
        assert_eq!(order(costs(&rule)), ["exp", "again-8", "new-8", "small-2", "old-8"]);
    }

    #[test]
    fn a_grace_puts_the_recently_preempted_last_in_their_tier() {
        let asked = [(H100, 8_000)];
        for (grace, want) in [
            // Preempted 80 min before 10 h: within a 90-minute grace.
            (90 * MIN, ["exp", "new-8", "small-2", "old-8", "again-8"]),
            // Not within 80 minutes.
            (80 * MIN, ["exp", "again-8", "new-8", "small-2", "old-8"]),
        ] {
            let rule = VictimRule {
                order: VictimOrderPolicy::LeastWorkLost,
                grace: Some(grace),
                now: 10 * H,
                asked: &asked,
            };
            assert_eq!(order(costs(&rule)), want, "grace {grace}");
        }
        // The grace works with Kueue's order too, and never above a tier.
        let rule = VictimRule {
            order: VictimOrderPolicy::Newest,
            grace: Some(90 * MIN),
            now: 10 * H,
            asked: &asked,
        };
        assert_eq!(order(costs(&rule)), ["exp", "new-8", "old-8", "small-2", "again-8"]);
    }
}
