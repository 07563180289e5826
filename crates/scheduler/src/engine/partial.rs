//! Partial admission: a workload whose pod sets carry a `min_count` and
//! that fits neither as a whole nor by preemption may be admitted with
//! fewer pods, the most that fit now. Every reducible pod set shrinks
//! together: at step `k` of `K = max(count - min_count)`, a pod set runs
//! `count - floor((count - min_count) × k / K)` pods; admission is monotone
//! in `k`, so a binary search finds the smallest step that fits (quota,
//! and nodes with placement). The reduced workload is a workload of its
//! own shape while it holds quota; back in its queue (evicted, requeued)
//! it asks for all its pods again.

use crate::ledger::ResId;
use crate::model::Amount;

use super::flavor::Attempt;
use super::placement::Placement;
use super::state::{PodSet, PodSetShape, ShapeKey};
use super::{CqId, Engine, WlId};

impl Engine {
    pub(super) fn shape_of(&mut self, pod_sets: &[PodSet]) -> u32 {
        let key: ShapeKey = pod_sets
            .iter()
            .map(|p| PodSetShape {
                name: p.name.clone(),
                count: p.count,
                total: p.total.clone(),
                raw: p.raw.clone(),
                gpu_ask: p.gpu_ask,
                node_selector: p.node_selector.clone(),
                tolerations: p.tolerations.clone(),
                require_single_domain: p.require_single_domain,
                min_count: p.min_count,
            })
            .collect();
        let next = self.workloads.shapes.len() as u32;
        *self.workloads.shapes.entry(key).or_insert(next)
    }

    /// Whether any pod set of the workload may run with fewer pods.
    pub(super) fn reducible(&self, id: WlId) -> bool {
        self.wl(id).pod_sets.iter().any(|p| p.min_count.is_some())
    }

    /// The pod counts of the workload's minimum, when some pod set may run
    /// with fewer pods than it asks for.
    pub(super) fn minimum_counts(&self, id: WlId) -> Option<Vec<u32>> {
        let pod_sets = &self.wl(id).pod_sets;
        pod_sets
            .iter()
            .any(|p| p.min_count.is_some_and(|m| m < p.count))
            .then(|| {
                pod_sets
                    .iter()
                    .map(|p| p.min_count.map_or(p.count, |m| m.min(p.count)))
                    .collect()
            })
    }

    /// Pod counts at reduction step `k` of `steps`.
    fn counts_at(pod_sets: &[PodSet], k: u32, steps: u32) -> Vec<u32> {
        pod_sets
            .iter()
            .map(|p| match p.min_count {
                Some(min) => p.count - ((p.count - min) as u64 * k as u64 / steps as u64) as u32,
                None => p.count,
            })
            .collect()
    }

    /// Gives the workload these pod counts (its full pod sets are kept).
    pub(super) fn set_counts(&mut self, id: WlId, counts: &[u32]) {
        self.restore_full(id);
        let full = self.wl(id).pod_sets.clone();
        if full.iter().zip(counts).all(|(p, &c)| p.count == c) {
            return;
        }
        let reduced: Vec<PodSet> = full
            .iter()
            .zip(counts)
            .map(|(p, &c)| PodSet {
                count: c,
                // Totals are count × per pod, so the division is exact.
                total: times(&p.total, p.count, c),
                raw: p.raw.as_deref().map(|raw| times(raw, p.count, c)),
                min_count: None,
                ..p.clone()
            })
            .collect();
        let shape = self.shape_of(&reduced);
        let wl = self.wl_mut(id);
        let full_shape = std::mem::replace(&mut wl.shape, shape);
        wl.full = Some(Box::new((std::mem::replace(&mut wl.pod_sets, reduced), full_shape)));
    }

    /// Gives a reduced workload its full pod sets back.
    pub(super) fn restore_full(&mut self, id: WlId) {
        let wl = self.wl_mut(id);
        if let Some(full) = wl.full.take() {
            let (pod_sets, shape) = *full;
            wl.pod_sets = pod_sets;
            wl.shape = shape;
        }
    }

    /// The largest reduction of a pending workload that fits now, with its
    /// flavors and placement; the workload is left reduced to it. `None`
    /// (and the workload whole) if even the smallest does not fit.
    pub(super) fn try_partial(&mut self, cq: CqId, id: WlId) -> Option<(Attempt, Placement)> {
        let full = self.wl(id).pod_sets.clone();
        let steps = full
            .iter()
            .filter_map(|p| p.min_count.map(|m| p.count - m))
            .max()
            .filter(|&s| s > 0)?;
        let fits = |e: &mut Engine, k: u32| -> Option<(Attempt, Placement)> {
            e.set_counts(id, &Self::counts_at(&full, k, steps));
            let attempt = e.assign(cq, id).ok()?;
            let placement = e.try_place(cq, id, &attempt.choice).ok()?;
            Some((attempt, placement))
        };
        let mut best = fits(self, steps);
        if best.is_none() {
            self.restore_full(id);
            return None;
        }
        // Smallest step that fits in (lo, hi]; step 0 (whole) did not.
        let (mut lo, mut hi) = (0, steps);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match fits(self, mid) {
                Some(found) => {
                    best = Some(found);
                    hi = mid;
                }
                None => lo = mid,
            }
        }
        self.set_counts(id, &Self::counts_at(&full, hi, steps));
        best
    }
}

/// Totals of `count` pods as totals of `c` of them.
fn times(total: &[(ResId, Amount)], count: u32, c: u32) -> Vec<(ResId, Amount)> {
    total
        .iter()
        .map(|&(r, t)| (r, t / count as Amount * c as Amount))
        .collect()
}
