//! Fair sharing over a run: the weighted share of every ClusterQueue in a
//! cohort, as the engine computes it ([`Engine::cluster_queue_share`]:
//! Kueue's `weightedShare`, what the queue borrows in thousandths of what
//! its parent can lend, ÷ its weight).
//!
//! A share is sampled whenever the queue's quota in use changes, at the
//! points its [`QueueSeries`](crate::sim::QueueSeries) samples are taken
//! (after the events and the cycle of an instant). The cohort tree does
//! not change during a run, so what the parent can lend is fixed and a
//! queue's share moves only with its own usage: these are all the points
//! where it changes. Like the usage series, a sample is kept only when the
//! share differs from the one before, so memory grows with the changes,
//! not with the run's length. The report's figures are in
//! [`crate::report::fairness`].

use std::collections::BTreeMap;

use sluice_scheduler::{Engine, FairSharing, Weight};

use crate::sim::Scenario;
use crate::units::Millis;

/// The shares of a run.
#[derive(Debug, Clone)]
pub struct FairnessOutcome {
    /// Whether the engine ran with fair sharing on.
    pub enabled: bool,
    /// Per ClusterQueue, in the order of `SimResult::queues`; `None` for a
    /// queue in no cohort.
    pub queues: Vec<Option<QueueShares>>,
}

/// One queue's place in its cohort tree and its share over time.
#[derive(Debug, Clone)]
pub struct QueueShares {
    /// The root cohort of its tree (its own cohort when that has no parent).
    pub root: String,
    pub weight: Weight,
    /// In time order; each value holds until the next.
    pub samples: Vec<ShareSample>,
}

/// A queue's weighted share from `at` on (`i64::MAX`: a queue of weight 0
/// that borrows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareSample {
    pub at: Millis,
    pub share: i64,
}

impl FairnessOutcome {
    /// A recorder for `scenario`'s queues, each at share 0 at time 0;
    /// `None` when no ClusterQueue is in a cohort.
    pub(crate) fn new(scenario: &Scenario) -> Option<Self> {
        let parents: BTreeMap<&str, &str> = (scenario.cohorts.iter())
            .filter_map(|c| Some((c.name.as_str(), c.parent.as_deref()?)))
            .collect();
        let root = |cohort: &str| {
            let mut at = cohort;
            // The loader refuses cycles; the bound only guards the loop.
            for _ in 0..=parents.len() {
                match parents.get(at) {
                    Some(p) => at = p,
                    None => break,
                }
            }
            at.to_string()
        };
        let queues: Vec<Option<QueueShares>> = (scenario.cluster_queues.iter())
            .map(|cq| {
                Some(QueueShares {
                    root: root(cq.cohort.as_deref()?),
                    weight: cq.fair_weight,
                    samples: vec![ShareSample { at: 0, share: 0 }],
                })
            })
            .collect();
        queues.iter().any(Option::is_some).then(|| Self {
            enabled: scenario.fair_sharing != FairSharing::Off,
            queues,
        })
    }

    /// Samples queue `q` (named `name`) at `at`, after its usage changed.
    pub(crate) fn record(&mut self, q: usize, name: &str, at: Millis, engine: &Engine) {
        let Some(Some(shares)) = self.queues.get_mut(q) else {
            return;
        };
        let share = engine.cluster_queue_share(name).map_or(0, |s| s.weighted_share);
        let sample = ShareSample { at, share };
        match shares.samples.last_mut() {
            Some(last) if last.at == at => *last = sample,
            Some(last) if last.share == share => {}
            _ => shares.samples.push(sample),
        }
    }
}
