//! What users see without cluster-scoped rights: a LocalQueue's status
//! carries its ClusterQueue's quota and usage, and its first pending
//! workloads with positions and estimated start. Positions and estimates
//! are recomputed at most once a minute ([`Index::refresh_positions`]);
//! a pending workload's own status gets them through the explanation lane,
//! only when they changed (the estimate by at least 10 %) and no state
//! change waits to be written, so the write budget stays with admissions.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::quantity::{non_negative_milli, to_quantity};
use sluice_api::resources::{is_gpu, is_mig};
use sluice_api::v1alpha1::visibility::MAX_LISTED_PENDING;
use sluice_api::v1alpha1::{ClusterQueueSummary, FlavorQuota, PendingWorkload, ResourceQuotaUsage};
use sluice_scheduler::WorkloadState;

use super::{Index, time_of};
use crate::plan::ObjKey;

/// A LocalQueue's pending workloads as of one refresh.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PendingSnapshot {
    pub workloads: Vec<PendingWorkload>,
    pub as_of: Option<Time>,
}

/// Position and estimate as last handed to a workload's status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Published {
    pub(super) in_cluster_queue: i32,
    pub(super) in_local_queue: i32,
    pub(super) estimate_ms: Option<i64>,
}

impl Index {
    /// The ClusterQueue a LocalQueue points at.
    pub fn local_queue_target(&self, key: &ObjKey) -> Option<&str> {
        self.defs.local_queues.get(key).map(|lq| lq.spec.cluster_queue.as_str())
    }

    /// A ClusterQueue as its LocalQueues' users see it: quota from its
    /// spec, usage and counts from the engine.
    pub fn cluster_queue_summary(&self, name: &str) -> Option<ClusterQueueSummary> {
        let cq = self.defs.cluster_queues.get(name)?;
        let usage = self.engine.cluster_queue_usage(name);
        let mut flavors: Vec<FlavorQuota> = Vec::new();
        for (_, f) in cq.spec.flavors() {
            let resources = f
                .resources
                .iter()
                .map(|r| {
                    let u = usage
                        .as_ref()
                        .and_then(|u| u.resources.iter().find(|x| x.flavor == f.name && x.resource == r.name));
                    let used = u.map_or(0, |u| u.used);
                    let borrowed = u.map_or(0, |u| u.borrowed);
                    ResourceQuotaUsage {
                        name: r.name.clone(),
                        nominal: r.nominal_quota.clone(),
                        borrowing_limit: r.borrowing_limit.clone(),
                        used: to_quantity(&r.name, i128::from(used)),
                        borrowed: (borrowed > 0).then(|| to_quantity(&r.name, i128::from(borrowed))),
                    }
                })
                .collect();
            flavors.push(FlavorQuota {
                name: f.name.clone(),
                resources,
            });
        }
        Some(ClusterQueueSummary {
            name: name.to_string(),
            cohort: cq.spec.cohort.clone(),
            stop_policy: cq.spec.stop_policy,
            pending_workloads: usage.as_ref().map_or(0, |u| count(u.pending)),
            admitted_workloads: usage.as_ref().map_or(0, |u| count(u.admitted)),
            flavors,
            budget: self.budget_status(name).map(Box::new),
        })
    }

    /// GPUs in use / nominal over a ClusterQueue's flavors (`12/32`), for
    /// its printer column, with MIG slices apart (`12/32, MIG 3/28`: a
    /// slice is not a GPU); `None` without GPU quota.
    pub fn cluster_queue_gpus(&self, name: &str) -> Option<String> {
        let cq = self.defs.cluster_queues.get(name)?;
        // Whole GPUs and MIG slices are counted apart: a slice is not a GPU.
        let (mut nominal, mut mig_nominal) = (None::<i128>, None::<i128>);
        for (_, f) in cq.spec.flavors() {
            for r in f.resources.iter().filter(|r| is_gpu(&r.name)) {
                let n = non_negative_milli("nominalQuota", &r.nominal_quota).unwrap_or(0);
                let sum = if is_mig(&r.name) {
                    &mut mig_nominal
                } else {
                    &mut nominal
                };
                *sum = Some(sum.unwrap_or(0) + n);
            }
        }
        let (mut used, mut mig_used) = (0i128, 0i128);
        if let Some(u) = self.engine.cluster_queue_usage(name) {
            for r in u.resources.iter().filter(|r| is_gpu(&r.resource)) {
                *if is_mig(&r.resource) { &mut mig_used } else { &mut used } += i128::from(r.used);
            }
        }
        let gpus = nominal.map(|n| format!("{}/{}", whole(used), whole(n)));
        let migs = mig_nominal.map(|n| format!("MIG {}/{}", whole(mig_used), whole(n)));
        match (gpus, migs) {
            (Some(g), Some(m)) => Some(format!("{g}, {m}")),
            (g, m) => g.or(m),
        }
    }

    /// A LocalQueue's pending workloads as of the last refresh.
    pub fn pending_snapshot(&self, key: &ObjKey) -> Option<&PendingSnapshot> {
        self.table.pending_snapshots.get(key)
    }

    /// Recomputes positions (and takes `estimates`, uid → estimated
    /// admission time, ms): the LocalQueues' pending lists, and, when
    /// `publish` (the caller passes whether no state change waits to be
    /// written: positions never take budget from admissions), the
    /// workloads whose position or estimate changed since it was last
    /// published get a new explanation write (the estimate only when it
    /// moved by at least 10 % of the wait it announces). Cost: O(pending).
    pub fn refresh_positions(&mut self, estimates: HashMap<String, i64>, now_ms: i64, publish: bool) {
        let mut snapshots: BTreeMap<ObjKey, PendingSnapshot> = BTreeMap::new();
        let as_of = Some(time_of(now_ms));
        for cq in self.engine.cluster_queue_names() {
            let mut in_lq: HashMap<ObjKey, i32> = HashMap::new();
            for (i, uid) in self.engine.pending_in_order(&cq).iter().enumerate() {
                let Some(wk) = self.table.by_uid.get(&**uid).cloned() else {
                    continue;
                };
                let Some(e) = self.table.workloads.get(&wk) else {
                    continue;
                };
                let lq = ObjKey::new(wk.namespace.clone(), e.observed.queue_name.clone());
                let n = in_lq.entry(lq.clone()).or_default();
                // 1-based, as every position users read (1: next).
                let pos = Published {
                    in_cluster_queue: count(i) + 1,
                    in_local_queue: *n + 1,
                    estimate_ms: estimates.get(&**uid).copied(),
                };
                *n += 1;
                let reason = self
                    .engine
                    .explanation(uid)
                    .map(|x| x.reason_code().to_string())
                    .unwrap_or_default();
                let snap = snapshots.entry(lq).or_insert_with(|| PendingSnapshot {
                    workloads: Vec::new(),
                    as_of: as_of.clone(),
                });
                if snap.workloads.len() < MAX_LISTED_PENDING {
                    snap.workloads.push(PendingWorkload {
                        name: wk.name.clone(),
                        priority: e.observed.priority.unwrap_or(0),
                        position_in_cluster_queue: pos.in_cluster_queue,
                        position_in_local_queue: pos.in_local_queue,
                        reason,
                        estimated_start: pos.estimate_ms.map(time_of),
                    });
                }
                // Only workloads whose explanation was written carry a
                // position in their status: refresh those.
                let e = self.table.workloads.get_mut(&wk).expect("present");
                if publish && e.written.pending_fp.is_some() && worth_publishing(e.written.published, pos, now_ms) {
                    e.written.published = Some(pos);
                    self.outbox.explain.insert(uid.to_string());
                }
            }
        }
        // LocalQueues with nothing pending show an empty list as of now.
        for key in self.defs.local_queues.keys() {
            snapshots.entry(key.clone()).or_insert_with(|| PendingSnapshot {
                workloads: Vec::new(),
                as_of: as_of.clone(),
            });
        }
        self.table.estimates = estimates;
        self.table.pending_snapshots = snapshots;
    }

    /// The estimate published for a pending workload, if any.
    pub(super) fn estimate_of(&self, uid: &str) -> Option<i64> {
        match self.engine.workload_state(uid) {
            Some(WorkloadState::Pending | WorkloadState::Preempting) => self.table.estimates.get(uid).copied(),
            _ => None,
        }
    }
}

/// Whether a new position or estimate is worth a status write: the
/// position moved, or the estimate appeared, vanished or moved by at least
/// 10 % of the wait it announced.
fn worth_publishing(old: Option<Published>, new: Published, now_ms: i64) -> bool {
    let Some(old) = old else { return true };
    if (old.in_cluster_queue, old.in_local_queue) != (new.in_cluster_queue, new.in_local_queue) {
        return true;
    }
    match (old.estimate_ms, new.estimate_ms) {
        (None, None) => false,
        (Some(a), Some(b)) => {
            let wait = (a - now_ms).max(60_000);
            (a - b).abs() * 10 >= wait
        }
        _ => true,
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Milli-units as whole units (rounded down), for `12/32`.
fn whole(milli: i128) -> i128 {
    milli.div_euclid(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: i32, l: i32, e: Option<i64>) -> Published {
        Published {
            in_cluster_queue: c,
            in_local_queue: l,
            estimate_ms: e,
        }
    }

    #[test]
    fn only_changes_that_matter_are_published() {
        let now = 1_000_000;
        assert!(worth_publishing(None, p(0, 0, None), now), "first time");
        assert!(!worth_publishing(Some(p(3, 1, None)), p(3, 1, None), now));
        assert!(worth_publishing(Some(p(3, 1, None)), p(2, 1, None), now), "moved up");
        // Announced in 100 min: 9 min of drift is not worth a write, 10 is.
        let at = now + 100 * 60_000;
        assert!(!worth_publishing(
            Some(p(3, 1, Some(at))),
            p(3, 1, Some(at + 9 * 60_000)),
            now
        ));
        assert!(worth_publishing(
            Some(p(3, 1, Some(at))),
            p(3, 1, Some(at + 10 * 60_000)),
            now
        ));
        assert!(
            worth_publishing(Some(p(3, 1, Some(at))), p(3, 1, None), now),
            "no longer within the horizon"
        );
        // A wait announced as nearly over: a minute of drift counts.
        assert!(worth_publishing(
            Some(p(0, 0, Some(now))),
            p(0, 0, Some(now + 6_000)),
            now
        ));
        assert!(!worth_publishing(
            Some(p(0, 0, Some(now))),
            p(0, 0, Some(now + 5_000)),
            now
        ));
    }
}
