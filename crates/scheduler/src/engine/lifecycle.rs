//! Workload lifecycle: adding (also already admitted, or backing off, when
//! a controller rebuilds its ledger), finishing, evicting, completing an
//! eviction with an optional requeue backoff, and removing. Inputs are
//! checked before any state changes, so an error leaves the engine as it
//! was.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::decision::{Explanation, PendingReason, PodSetAssignment};
use crate::ledger::{FrKey, ResId};
use crate::model::{Amount, Millis, PodSetSpec, RequeueOrder, WorkloadSpec};

use super::parts::{Catalog, Workloads};
use super::placement::Placement;
use super::state::{GpuAsk, Holding, PodSet, State, Timer, Wl};
use super::{Engine, EngineError, WlId};

impl Engine {
    /// Adds a pending workload.
    pub fn add_workload(&mut self, spec: WorkloadSpec) -> Result<(), EngineError> {
        let id = self.insert_workload(spec)?;
        self.enqueue(id);
        Ok(())
    }

    /// Adds a pending workload whose requeue backoff runs until `not_before`
    /// (a controller rebuilding its ledger after a restart finds it in the
    /// Workload's status): it joins its queue when the backoff ends, as if
    /// [`Engine::eviction_complete_with_backoff`] had put it there.
    pub fn add_workload_backing_off(&mut self, spec: WorkloadSpec, not_before: Millis) -> Result<(), EngineError> {
        let id = self.insert_workload(spec)?;
        let wl = self.wl_mut(id);
        wl.state = State::Backoff(not_before);
        wl.explanation = None;
        self.claims.timers.insert((not_before, Timer::Backoff(id)));
        self.note(id, Explanation::new(PendingReason::Backoff { until: not_before }));
        Ok(())
    }

    /// Records a workload that is already admitted (a controller rebuilding its
    /// ledger after a restart). Its usage is accounted as it is, even above
    /// quota: reality wins, and nothing new is admitted until it fits again.
    pub fn restore_admitted(
        &mut self,
        spec: WorkloadSpec,
        cluster_queue: &str,
        pod_sets: &[PodSetAssignment],
        admitted_at: Millis,
    ) -> Result<(), EngineError> {
        self.restore(spec, cluster_queue, pod_sets, admitted_at, true).map(drop)
    }

    /// [`Engine::restore_admitted`]; `place`: whether its pods get a
    /// placement (a foreign admission's pods are bound pods like any other).
    pub(super) fn restore(
        &mut self,
        spec: WorkloadSpec,
        cluster_queue: &str,
        pod_sets: &[PodSetAssignment],
        admitted_at: Millis,
        place: bool,
    ) -> Result<WlId, EngineError> {
        let Some(&cq) = self.queues.cq_by_name.get(cluster_queue) else {
            return Err(EngineError::UnknownClusterQueue(cluster_queue.to_string()));
        };
        // Validate the assignment before touching any state.
        let usage = self.catalog.restored_usage(&spec, pod_sets)?;
        let id = self.insert_workload(spec)?;
        // Admitted with fewer pods (partial admission): it holds that many.
        let counts = admitted_counts(self.wl(id), pod_sets);
        self.set_counts(id, &counts);
        for &(fr, amount) in &usage {
            let slot = self.slot_for(cq, fr);
            self.add_usage(cq, slot, amount, 0);
            self.meter(id, cq, fr, amount, Some(admitted_at));
        }
        let borrowing = self.is_borrowing(cq, &usage);
        let placement = if place {
            self.restored_placement(cq, id, pod_sets)
        } else {
            Placement::default()
        };
        let holding = Holding {
            cq,
            usage,
            assignment: pod_sets.into(),
            borrowing,
            admitted_at,
            victims: Vec::new(),
            placement,
        };
        self.queues.cqs[cq].admitted.insert(id);
        self.wl_mut(id).state = State::Admitted(Box::new(holding));
        self.update_reservation(id);
        Ok(id)
    }

    /// An admitted workload completed: its quota is released.
    pub fn finish(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        match self.wl(id).state {
            State::Admitted(_) | State::Evicting(_) => {
                self.release(id);
                // Finished is final: keep who it was, not what it asked for
                // (a cluster keeps finished Workloads around by the
                // thousand, and every forecast copies the engine).
                let wl = self.wl_mut(id);
                wl.state = State::Finished;
                wl.pod_sets = Vec::new();
                wl.explanation = None;
                wl.nodes = None;
                wl.full = None;
                Ok(())
            }
            ref s => Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: s.name(),
                expected: "admitted",
            }),
        }
    }

    /// The caller evicts an admitted workload (pods-ready timeout,
    /// deactivation). It keeps its quota until [`Engine::eviction_complete`].
    pub fn evict(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        self.start_eviction(id).map_err(|s| EngineError::WrongState {
            uid: uid.to_string(),
            state: s,
            expected: "admitted",
        })
    }

    /// A preempted or evicted workload's pods are gone: its quota is released
    /// and it waits in its queue again.
    pub fn eviction_complete(&mut self, uid: &str, now: Millis) -> Result<(), EngineError> {
        self.eviction_complete_with_backoff(uid, now, None)
    }

    /// Like [`Engine::eviction_complete`], but the workload is not considered
    /// before `not_before` (requeue backoff).
    pub fn eviction_complete_with_backoff(
        &mut self,
        uid: &str,
        now: Millis,
        not_before: Option<Millis>,
    ) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        if !matches!(self.wl(id).state, State::Evicting(_)) {
            return Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: self.wl(id).state.name(),
                expected: "being evicted",
            });
        }
        self.release(id);
        if self.catalog.config.requeue_order == RequeueOrder::EvictionTime {
            self.wl_mut(id).ts = now;
        }
        match not_before {
            Some(t) if t > now => {
                let wl = self.wl_mut(id);
                wl.state = State::Backoff(t);
                wl.explanation = None;
                self.claims.timers.insert((t, Timer::Backoff(id)));
                self.note(id, Explanation::new(PendingReason::Backoff { until: t }));
            }
            _ => {
                self.wl_mut(id).state = State::Pending;
                self.enqueue(id);
            }
        }
        Ok(())
    }

    /// Forgets a workload (deleted). Quota it held or claimed is released.
    pub fn remove_workload(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        match self.wl(id).state {
            State::Admitted(_) | State::Evicting(_) => self.release(id),
            State::Preempting(_) => {
                self.drop_claim(id);
                self.unqueue(id);
            }
            State::Pending => self.unqueue(id),
            State::Backoff(t) => {
                self.claims.timers.remove(&(t, Timer::Backoff(id)));
            }
            State::Finished => {}
        }
        self.workloads.unresolved.remove(&id);
        self.turn.buffered_notes.remove(&id);
        self.workloads.foreign.remove(&id);
        let wl = self.workloads.wls[id].take().expect("live workload");
        self.workloads.by_uid.remove(&wl.uid);
        self.workloads.free_ids.push(id);
        Ok(())
    }

    pub(super) fn insert_workload(&mut self, spec: WorkloadSpec) -> Result<WlId, EngineError> {
        if self.workloads.by_uid.contains_key(spec.uid.as_str()) {
            return Err(EngineError::DuplicateWorkload(spec.uid));
        }
        let pod_sets = self.catalog.pod_sets_of(&spec)?;
        let shape = self.shape_of(&pod_sets);
        let wl = Wl {
            uid: Arc::from(spec.uid.as_str()),
            name: Arc::from(spec.name.as_str()),
            lq: Arc::from(spec.local_queue.as_str()),
            priority: spec.priority,
            ts: spec.queue_order_time,
            arrival: self.workloads.next_arrival,
            pod_sets,
            shape,
            state: State::Pending,
            cq: None,
            explanation: None,
            shaped: false,
            nodes: None,
            full: None,
            last_preempted: None,
            expected_runtime: spec.expected_runtime,
        };
        self.workloads.next_arrival += 1;
        Ok(self.workloads.insert(wl))
    }
}

impl Workloads {
    /// Adds `wl` to the table (in a free row if there is one).
    fn insert(&mut self, wl: Wl) -> WlId {
        let uid = wl.uid.clone();
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.wls[id] = Some(wl);
                id
            }
            None => {
                self.wls.push(Some(wl));
                self.wls.len() - 1
            }
        };
        self.by_uid.insert(uid, id);
        id
    }
}

impl Catalog {
    /// A workload's pod sets with their totals per resource (names
    /// interned). Errors with an empty pod set, a negative request, or a
    /// total that overflows, per pod set or summed over pod sets (they add
    /// up on a flavor).
    fn pod_sets_of(&mut self, spec: &WorkloadSpec) -> Result<Vec<PodSet>, EngineError> {
        let pod_sets = spec
            .pod_sets
            .iter()
            .map(|ps| self.pod_set_of(&spec.uid, ps))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sums: BTreeMap<ResId, Amount> = BTreeMap::new();
        for ps in &pod_sets {
            for &(res, amount) in &ps.total {
                let sum = sums.entry(res).or_default();
                *sum = sum.checked_add(amount).ok_or_else(|| EngineError::Overflow {
                    uid: spec.uid.clone(),
                    pod_set: ps.name.to_string(),
                    resource: self.resources.name(res).to_string(),
                })?;
            }
        }
        Ok(pod_sets)
    }

    fn pod_set_of(&mut self, uid: &str, ps: &PodSetSpec) -> Result<PodSet, EngineError> {
        if ps.count == 0 {
            return Err(EngineError::EmptyPodSet {
                uid: uid.to_string(),
                pod_set: ps.name.clone(),
            });
        }
        let mut per_pod_raw = Vec::with_capacity(ps.requests.len());
        for (res, &per_pod) in &ps.requests {
            if per_pod < 0 {
                return Err(EngineError::NegativeRequest {
                    uid: uid.to_string(),
                    pod_set: ps.name.clone(),
                    resource: res.clone(),
                });
            }
            if per_pod == 0 {
                continue;
            }
            per_pod_raw.push((self.resources.intern(res), per_pod));
        }
        per_pod_raw.sort_unstable();
        let overflow = |res: ResId| EngineError::Overflow {
            uid: uid.to_string(),
            pod_set: ps.name.clone(),
            resource: self.resources.name(res).to_string(),
        };
        let charge = self.charge(&per_pod_raw).map_err(overflow)?;
        let times_count = |v: &[(ResId, Amount)]| -> Result<Vec<(ResId, Amount)>, EngineError> {
            v.iter()
                .map(|&(r, a)| {
                    a.checked_mul(ps.count as i64)
                        .map(|t| (r, t))
                        .ok_or_else(|| overflow(r))
                })
                .collect()
        };
        let total = times_count(&charge.charged)?;
        let raw = (charge.charged != per_pod_raw)
            .then(|| times_count(&per_pod_raw))
            .transpose()?;
        let shareable = per_pod_raw
            .iter()
            .any(|&(r, _)| crate::sharing::is_shared_resource(self.resources.name(r)));
        let gpu_ask = match (shareable, crate::sharing::asks_for_shared_gpu(&ps.node_selector)) {
            (false, _) => GpuAsk::None,
            (true, false) => GpuAsk::Whole,
            (true, true) => GpuAsk::Replica,
        };
        let mut tolerations = ps.tolerations.clone();
        tolerations.sort();
        Ok(PodSet {
            name: Arc::from(ps.name.as_str()),
            count: ps.count,
            total,
            raw,
            shared: charge.shared,
            gpu_ask,
            node_selector: ps.node_selector.clone(),
            tolerations,
            require_single_domain: ps.require_single_domain,
            min_count: ps.min_count.filter(|&m| m < ps.count).map(|m| m.max(1)),
        })
    }

    /// What a restored admission holds per (flavor, resource), its names
    /// interned: the assignment's usage, or what a pod is charged
    /// (`charge.rs`) times its count. Errors with a pod set the workload does not have or a
    /// requested resource the assignment gives no flavor.
    fn restored_usage(
        &mut self,
        spec: &WorkloadSpec,
        pod_sets: &[PodSetAssignment],
    ) -> Result<Vec<(FrKey, Amount)>, EngineError> {
        let uid = &spec.uid;
        let mut usage: Vec<(FrKey, Amount)> = Vec::new();
        for a in pod_sets {
            let Some(ps) = spec.pod_sets.iter().find(|p| p.name == a.name) else {
                return Err(EngineError::UnknownPodSet {
                    uid: uid.clone(),
                    pod_set: a.name.clone(),
                });
            };
            let mut raw: Vec<(ResId, Amount)> = ps
                .requests
                .iter()
                .filter(|(_, a)| **a > 0)
                .map(|(r, a)| (self.resources.intern(r), *a))
                .collect();
            raw.sort_unstable();
            let charged = self.charge(&raw).map_err(|res| EngineError::Overflow {
                uid: uid.clone(),
                pod_set: a.name.clone(),
                resource: self.resources.name(res).to_string(),
            })?;
            for (res_id, per_pod) in charged.charged {
                let res = self.resources.name(res_id).clone();
                let Some(flavor) = a.flavors.get(&*res) else {
                    return Err(EngineError::UnassignedResource {
                        uid: uid.clone(),
                        pod_set: a.name.clone(),
                        resource: res.to_string(),
                    });
                };
                let amount = a
                    .usage
                    .get(&*res)
                    .copied()
                    .unwrap_or(per_pod.saturating_mul(a.count as i64));
                if amount <= 0 {
                    continue;
                }
                let fr = (self.flavor_names.intern(flavor), res_id);
                match usage.iter_mut().find(|(k, _)| *k == fr) {
                    Some((_, v)) => *v += amount,
                    None => usage.push((fr, amount)),
                }
            }
        }
        Ok(usage)
    }
}

/// The pods an admission gives each pod set of `wl`: the assignment's
/// count (at least one, at most the pod set's), or the whole pod set.
fn admitted_counts(wl: &Wl, pod_sets: &[PodSetAssignment]) -> Vec<u32> {
    wl.pod_sets
        .iter()
        .map(|p| {
            pod_sets
                .iter()
                .find(|a| *a.name == *p.name)
                .map_or(p.count, |a| a.count.clamp(1, p.count))
        })
        .collect()
}
