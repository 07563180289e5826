//! Each ClusterQueue's side of a run: the quota its admitted workloads
//! use per flavor and resource, its pending and admitted counts, and the
//! samples of them the report draws ([`QueueSeries`]).

use std::collections::{BTreeSet, HashMap};

use anyhow::{Context, Result};
use sluice_scheduler::{Admission, ClusterQueueSpec, Engine};

use super::{QueueSeries, Sample, Slot};
use crate::fairness::FairnessOutcome;
use crate::units::Millis;

/// What one admitted workload holds: (queue, slot, amount).
pub(super) type Held = (usize, usize, i64);

struct QueueState {
    series: QueueSeries,
    slot_index: HashMap<(String, String), usize>,
    used: Vec<i64>,
    pending: u32,
    admitted: u32,
}

impl QueueState {
    /// A queue with a slot per flavor and resource of its quota, nothing
    /// used yet.
    fn new(cq: &ClusterQueueSpec) -> Self {
        let mut slots = Vec::new();
        let mut slot_index = HashMap::new();
        for rg in &cq.resource_groups {
            for fq in &rg.flavors {
                for rq in &fq.resources {
                    slot_index.insert((fq.flavor.clone(), rq.resource.clone()), slots.len());
                    slots.push(Slot {
                        flavor: fq.flavor.clone(),
                        resource: rq.resource.clone(),
                        nominal: rq.nominal,
                    });
                }
            }
        }
        QueueState {
            used: vec![0; slots.len()],
            series: QueueSeries {
                name: cq.name.clone(),
                cohort: cq.cohort.clone(),
                slots,
                samples: Vec::new(),
            },
            slot_index,
            pending: 0,
            admitted: 0,
        }
    }

    fn record(&mut self, at: Millis) {
        let sample = Sample {
            at,
            used: self.used.clone().into_boxed_slice(),
            pending: self.pending,
            admitted: self.admitted,
        };
        match self.series.samples.last_mut() {
            Some(last) if last.at == at => *last = sample,
            Some(last)
                if last.used == sample.used && last.pending == sample.pending && last.admitted == sample.admitted => {}
            _ => self.series.samples.push(sample),
        }
    }
}

/// Every ClusterQueue of the scenario, and which of them changed since
/// their last sample.
pub(super) struct Queues {
    states: Vec<QueueState>,
    index: HashMap<String, usize>,
    touched: BTreeSet<usize>,
}

impl Queues {
    /// The scenario's queues, each sampled empty at 0.
    pub(super) fn new(cluster_queues: &[ClusterQueueSpec]) -> Self {
        let mut states: Vec<QueueState> = cluster_queues.iter().map(QueueState::new).collect();
        let index = (cluster_queues.iter().enumerate())
            .map(|(q, cq)| (cq.name.clone(), q))
            .collect();
        for q in &mut states {
            q.record(0);
        }
        Queues {
            states,
            index,
            touched: BTreeSet::new(),
        }
    }

    /// One more workload pending in `cluster_queue` (if it is one).
    pub(super) fn pending_added(&mut self, cluster_queue: &str) {
        if let Some(&q) = self.index.get(cluster_queue) {
            self.states[q].pending += 1;
            self.touched.insert(q);
        }
    }

    /// One workload less pending in `cluster_queue` (a serving object
    /// removed while it waited).
    pub(super) fn pending_removed(&mut self, cluster_queue: &str) {
        if let Some(&q) = self.index.get(cluster_queue) {
            self.states[q].pending = self.states[q].pending.saturating_sub(1);
            self.touched.insert(q);
        }
    }

    /// One workload less admitted in `cluster_queue` (if it is one).
    pub(super) fn admitted_removed(&mut self, cluster_queue: &str) {
        if let Some(&q) = self.index.get(cluster_queue) {
            self.states[q].admitted = self.states[q].admitted.saturating_sub(1);
            self.touched.insert(q);
        }
    }

    /// Moves an admitted workload from pending to admitted in its queue and
    /// counts its usage there; returns what it now holds and the flavors it
    /// got, in the order its pod sets first use them.
    pub(super) fn admit(&mut self, a: &Admission) -> Result<(Vec<Held>, Vec<String>)> {
        let q = *(self.index.get(&*a.cluster_queue))
            .with_context(|| format!("admitted into unknown queue {}", a.cluster_queue))?;
        let qs = &mut self.states[q];
        qs.pending = qs.pending.saturating_sub(1);
        qs.admitted += 1;
        let mut held = Vec::new();
        let mut flavors: Vec<String> = Vec::new();
        for ps in a.pod_sets.iter() {
            for (resource, amount) in &ps.usage {
                let Some(flavor) = ps.flavors.get(resource) else {
                    continue;
                };
                if !flavors.contains(flavor) {
                    flavors.push(flavor.clone());
                }
                if let Some(&slot) = qs.slot_index.get(&(flavor.clone(), resource.clone())) {
                    qs.used[slot] += amount;
                    held.push((q, slot, *amount));
                }
            }
        }
        self.touched.insert(q);
        Ok((held, flavors))
    }

    /// Gives back what a workload held.
    pub(super) fn release(&mut self, held: &mut Vec<Held>) {
        for (q, slot, amount) in held.drain(..) {
            self.states[q].used[slot] -= amount;
            self.touched.insert(q);
        }
    }

    /// Samples every queue that changed, at `t`, with its fair share when
    /// the run follows fairness.
    pub(super) fn record_touched(&mut self, t: Millis, mut fairness: Option<&mut FairnessOutcome>, engine: &Engine) {
        for q in std::mem::take(&mut self.touched) {
            self.states[q].record(t);
            if let Some(f) = fairness.as_mut() {
                f.record(q, &self.states[q].series.name, t, engine);
            }
        }
    }

    /// The instant of the latest sample of any queue.
    pub(super) fn last_sample(&self) -> Option<Millis> {
        (self.states.iter())
            .filter_map(|q| q.series.samples.last().map(|s| s.at))
            .max()
    }

    pub(super) fn into_series(self) -> Vec<QueueSeries> {
        self.states.into_iter().map(|q| q.series).collect()
    }
}
