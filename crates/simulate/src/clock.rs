//! Virtual time: a deterministic event queue.

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
}
