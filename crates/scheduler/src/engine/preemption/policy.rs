//! Who may preempt whom: a ClusterQueue's preemption policy as pure rules
//! over the preemptor's and the candidate's priority (and, within a queue,
//! arrival). Which workloads are looked at, and whether a queue still
//! borrows, is decided in [`super`]; these functions say only whether the
//! policy allows a candidate.

use crate::model::{BorrowWithinCohort, Millis, ReclaimWithinCohort, WithinClusterQueue};

/// What the policy rules compare: a workload's priority and its
/// queue-order time (earlier is older).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rank {
    pub(crate) priority: i32,
    pub(crate) queued_at: Millis,
}

/// `withinClusterQueue`: may the preemptor evict a workload of its own
/// queue?
pub(crate) fn within_cluster_queue(policy: WithinClusterQueue, preemptor: Rank, victim: Rank) -> bool {
    match policy {
        WithinClusterQueue::Never => false,
        WithinClusterQueue::LowerPriority => victim.priority < preemptor.priority,
        WithinClusterQueue::LowerOrNewerEqualPriority => {
            victim.priority < preemptor.priority
                || (victim.priority == preemptor.priority && victim.queued_at > preemptor.queued_at)
        }
    }
}

/// `reclaimWithinCohort`: may the preemptor take back quota its queue lent,
/// by evicting this workload of a queue that borrows it?
pub(crate) fn reclaim_within_cohort(
    policy: ReclaimWithinCohort,
    preemptor_priority: i32,
    victim_priority: i32,
) -> bool {
    match policy {
        ReclaimWithinCohort::Never => false,
        ReclaimWithinCohort::LowerPriority => victim_priority < preemptor_priority,
        ReclaimWithinCohort::Any => true,
    }
}

/// `borrowWithinCohort`: may the preemptor, itself borrowing, evict this
/// workload of another queue? Only lower priority, and only up to the
/// threshold when one is set.
pub(crate) fn borrow_within_cohort(policy: BorrowWithinCohort, preemptor_priority: i32, victim_priority: i32) -> bool {
    match policy {
        BorrowWithinCohort::Never => false,
        BorrowWithinCohort::LowerPriority { max_priority_threshold } => {
            victim_priority < preemptor_priority && max_priority_threshold.is_none_or(|t| victim_priority <= t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(priority: i32, queued_at: Millis) -> Rank {
        Rank { priority, queued_at }
    }

    #[test]
    fn within_cluster_queue_by_policy() {
        use WithinClusterQueue::*;
        // (policy, preemptor, victim, allowed)
        let table = [
            (Never, rank(100, 5), rank(0, 1), false),
            (LowerPriority, rank(100, 5), rank(99, 1), true),
            (LowerPriority, rank(100, 5), rank(100, 9), false),
            (LowerPriority, rank(100, 5), rank(101, 9), false),
            (LowerOrNewerEqualPriority, rank(100, 5), rank(99, 1), true),
            (LowerOrNewerEqualPriority, rank(100, 5), rank(100, 6), true),
            (LowerOrNewerEqualPriority, rank(100, 5), rank(100, 5), false),
            (LowerOrNewerEqualPriority, rank(100, 5), rank(100, 4), false),
            (LowerOrNewerEqualPriority, rank(100, 5), rank(101, 9), false),
        ];
        for (policy, preemptor, victim, allowed) in table {
            assert_eq!(
                within_cluster_queue(policy, preemptor, victim),
                allowed,
                "{policy:?}: {preemptor:?} over {victim:?}"
            );
        }
    }

    #[test]
    fn reclaim_within_cohort_by_policy() {
        use ReclaimWithinCohort::*;
        let table = [
            (Never, 100, 0, false),
            (LowerPriority, 100, 99, true),
            (LowerPriority, 100, 100, false),
            (Any, 100, 100, true),
            (Any, 0, 1000, true),
        ];
        for (policy, preemptor, victim, allowed) in table {
            assert_eq!(
                reclaim_within_cohort(policy, preemptor, victim),
                allowed,
                "{policy:?}: {preemptor} over {victim}"
            );
        }
    }

    #[test]
    fn borrow_within_cohort_by_policy() {
        use BorrowWithinCohort::*;
        let lower = |t| LowerPriority {
            max_priority_threshold: t,
        };
        let table = [
            (Never, 100, 0, false),
            (lower(None), 100, 99, true),
            (lower(None), 100, 100, false),
            (lower(Some(50)), 100, 50, true),
            (lower(Some(50)), 100, 51, false),
            (lower(Some(200)), 100, 150, false),
        ];
        for (policy, preemptor, victim, allowed) in table {
            assert_eq!(
                borrow_within_cohort(policy, preemptor, victim),
                allowed,
                "{policy:?}: {preemptor} over {victim}"
            );
        }
    }
}
