//! Waiting for nodes against waiting for quota, in virtual time.
//!
//! With nodes declared (`spec.nodes`, see [`crate::trace::nodes`]) the
//! engine admits a workload only when its pods fit on the nodes of its
//! flavors; one that fits quota but not the nodes stays pending with the
//! reason `NoPlacement`. Every cycle the engine reports the pending
//! workloads whose reason changed (`Cycle::pending_changed`); [`WaitClock`]
//! follows those reasons and splits each workload's time pending in two:
//!
//! - *for nodes*: its reason was `NoPlacement` (it fits quota but its pods
//!   fit on no set of nodes now: fragmentation, or simply full nodes), or
//!   `WaitingForEvictions` with a `NoNodeFits` verdict (it fits quota, and
//!   evictions under way will free the nodes it needs);
//! - *for quota and the rest*: any other reason — quota (`NoFit`, and
//!   `WaitingForEvictions` for quota), a StrictFIFO head blocking it,
//!   victims being preempted for it (whatever their preemption frees),
//!   a stopped queue.
//!
//! A workload is pending from its arrival, or from the moment its eviction
//! completes and it requeues, until the cycle that admits it; one never
//! admitted until the end of the run. Until the engine first explains it
//! (the cycle at that same instant) the time counts as the rest. The time
//! from an admission to its write and the time spent running before a
//! preemption are not pending: the two parts add up to the report's time
//! to admission when a workload was neither throttled nor preempted.

use std::collections::BTreeMap;

use sluice_scheduler::{Explanation, PendingReason, Verdict};

use crate::trace::ScenarioNode;
use crate::units::Millis;

/// One workload's time pending, split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitSplit {
    /// Pending because its pods fit on no nodes (it fits quota).
    pub nodes_ms: Millis,
    /// Pending for any other reason (quota, mostly).
    pub other_ms: Millis,
}

/// What node-aware placement did in a run, for the report.
#[derive(Debug, Clone)]
pub struct PlacementOutcome {
    /// The scenario's nodes.
    pub nodes: Vec<ScenarioNode>,
    /// Flavor → its `topologyKey`, for the flavors that have one.
    pub topology_keys: BTreeMap<String, String>,
    /// Per workload, in trace order.
    pub waits: Vec<WaitSplit>,
}

/// Whether an explanation says the workload waits for nodes, not quota.
pub fn waits_for_nodes(e: &Explanation) -> bool {
    match e.reason {
        PendingReason::NoPlacement | PendingReason::NeverPlaceable => true,
        PendingReason::WaitingForEvictions => e
            .flavors
            .iter()
            .any(|f| matches!(f.verdict, Verdict::NoNodeFits { .. })),
        _ => false,
    }
}

#[derive(Clone, Copy, Default)]
struct Stretch {
    /// When the current reason began; `None`: not pending.
    since: Option<Millis>,
    for_nodes: bool,
}

/// Follows each workload's pending reason during a run.
pub struct WaitClock {
    open: Vec<Stretch>,
    waits: Vec<WaitSplit>,
}

impl WaitClock {
    pub fn new(workloads: usize) -> Self {
        Self {
            open: vec![Stretch::default(); workloads],
            waits: vec![WaitSplit::default(); workloads],
        }
    }

    /// Closes the current stretch of `i` at `t`.
    fn close(&mut self, i: usize, t: Millis) {
        let s = self.open[i];
        if let Some(since) = s.since {
            let d = (t - since).max(0);
            if s.for_nodes {
                self.waits[i].nodes_ms += d;
            } else {
                self.waits[i].other_ms += d;
            }
        }
    }

    /// `i` arrived, or requeued after an eviction, at `t`.
    pub fn pending(&mut self, i: usize, t: Millis) {
        self.close(i, t);
        self.open[i] = Stretch {
            since: Some(t),
            for_nodes: false,
        };
    }

    /// The engine gave pending `i` a new reason at `t`.
    pub fn explained(&mut self, i: usize, t: Millis, e: &Explanation) {
        if self.open[i].since.is_none() {
            return;
        }
        self.close(i, t);
        self.open[i] = Stretch {
            since: Some(t),
            for_nodes: waits_for_nodes(e),
        };
    }

    /// `i` was admitted at `t`, or left the queue for good.
    pub fn admitted(&mut self, i: usize, t: Millis) {
        self.close(i, t);
        self.open[i] = Stretch::default();
    }

    /// The splits, with workloads still pending counted until `end`.
    pub fn finish(mut self, end: Millis) -> Vec<WaitSplit> {
        for i in 0..self.open.len() {
            self.admitted(i, end);
        }
        self.waits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_scheduler::FlavorVerdict;

    fn explanation(reason: PendingReason, verdict: Option<Verdict>) -> Explanation {
        Explanation {
            reason,
            flavors: verdict
                .map(|verdict| FlavorVerdict {
                    pod_set: "main".into(),
                    flavor: "h100".into(),
                    verdict,
                })
                .into_iter()
                .collect(),
        }
    }

    fn no_node_fits() -> Verdict {
        Verdict::NoNodeFits {
            resource: "nvidia.com/gpu".into(),
            per_pod: 8000,
            pods: 1,
            placeable: 0,
            quota_free: 8000,
            nominal: 16000,
            nodes: 2,
            largest_free: 4000,
            largest_node: Some("h100-0".into()),
            topology: None,
        }
    }

    #[test]
    fn reasons_for_nodes() {
        assert!(waits_for_nodes(&explanation(
            PendingReason::NoPlacement,
            Some(no_node_fits())
        )));
        assert!(waits_for_nodes(&explanation(
            PendingReason::WaitingForEvictions,
            Some(no_node_fits())
        )));
        // Evictions that free quota, and quota itself, are not.
        assert!(!waits_for_nodes(&explanation(PendingReason::WaitingForEvictions, None)));
        let quota = Verdict::InsufficientQuota {
            resource: "nvidia.com/gpu".into(),
            needed: 8000,
            up_to: None,
            free_nominal: 0,
            nominal: 8000,
            borrowable: 0,
        };
        assert!(!waits_for_nodes(&explanation(PendingReason::NoFit, Some(quota))));
        assert!(!waits_for_nodes(&explanation(PendingReason::BlockedByHead, None)));
    }

    #[test]
    fn the_clock_splits_pending_time_by_reason() {
        let nodes = explanation(PendingReason::NoPlacement, Some(no_node_fits()));
        let quota = explanation(PendingReason::NoFit, None);
        let mut c = WaitClock::new(2);
        // 0: quota 10..40, nodes 40..100, admitted; runs; requeued at 200,
        // nodes 200..230, never admitted (end 300: quota 230..300).
        c.pending(0, 10);
        c.explained(0, 10, &quota);
        c.explained(0, 40, &nodes);
        c.admitted(0, 100);
        c.explained(0, 150, &nodes); // not pending: ignored
        c.pending(0, 200);
        c.explained(0, 200, &nodes);
        c.explained(0, 230, &quota);
        // 1: admitted in the cycle at its arrival.
        c.pending(1, 50);
        c.admitted(1, 50);
        let w = c.finish(300);
        assert_eq!(
            w[0],
            WaitSplit {
                nodes_ms: 60 + 30,
                other_ms: 30 + 70
            }
        );
        assert_eq!(w[1], WaitSplit::default());
    }
}
