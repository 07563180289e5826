//! The order in which preemption candidates become victims: workloads of
//! queues that borrow go first, then lower priority, then the most recently
//! admitted, then by UID so the order is total and deterministic. The
//! search removes candidates in this order until the preemptor fits, then
//! gives back every one it did not need.

use std::cmp::Reverse;

use crate::model::Millis;

/// One candidate's place in the victim order (smallest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct VictimOrder<'a> {
    /// `false` (in a queue that borrows) sorts first.
    pub(crate) outside_borrowing_queue: bool,
    pub(crate) priority: i32,
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
        admitted_at: Millis,
        uid: &'a str,
        index: usize,
    ) -> Self {
        Self {
            outside_borrowing_queue: !in_borrowing_queue,
            priority,
            admitted_at: Reverse(admitted_at),
            uid,
            index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(mut candidates: Vec<VictimOrder<'_>>) -> Vec<&str> {
        candidates.sort();
        candidates.iter().map(|c| c.uid).collect()
    }

    #[test]
    fn borrowing_queues_give_first_whatever_the_priority() {
        let got = order(vec![
            VictimOrder::new(false, 0, 10, "own-low", 0),
            VictimOrder::new(true, 500, 10, "borrower-high", 1),
        ]);
        assert_eq!(got, ["borrower-high", "own-low"]);
    }

    #[test]
    fn lower_priority_then_newest_admission_then_uid() {
        let got = order(vec![
            VictimOrder::new(false, 10, 100, "b-old", 0),
            VictimOrder::new(false, 10, 200, "c-new", 1),
            VictimOrder::new(false, 5, 50, "z-low", 2),
            VictimOrder::new(false, 10, 100, "a-old", 3),
        ]);
        assert_eq!(got, ["z-low", "c-new", "a-old", "b-old"]);
    }
}
