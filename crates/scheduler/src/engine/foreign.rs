//! Foreign admissions: quota held by workloads another admission
//! controller admitted (Kueue's, while a cluster switches over to Sluice).
//! Counted in the ledger like any admission, so the GPUs they hold are
//! never given out twice; never a victim of preemption, never evicted by a
//! stop policy or by the caller (Sluice cannot stop them); released when
//! their owner lets go ([`Engine::release_foreign`]). Their pods, bound to
//! nodes, count there as any pod Sluice did not admit: no reservation.

use crate::decision::PodSetAssignment;
use crate::model::{Millis, WorkloadSpec};

use super::{Engine, EngineError, WlId};

impl Engine {
    /// Counts an admission Sluice did not make into `cluster_queue` with
    /// these assignments, as [`Engine::restore_admitted`] does (even above
    /// quota: reality wins, and nothing new is admitted until it fits).
    pub fn hold_foreign(
        &mut self,
        spec: WorkloadSpec,
        cluster_queue: &str,
        pod_sets: &[PodSetAssignment],
        admitted_at: Millis,
    ) -> Result<(), EngineError> {
        let id = self.restore(spec, cluster_queue, pod_sets, admitted_at, false)?;
        self.workloads.foreign.insert(id);
        Ok(())
    }

    /// A foreign admission ended (its owner finished it, took it back, or
    /// it was deleted): its quota is released and it is forgotten.
    pub fn release_foreign(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        if !self.workloads.foreign.contains(&id) {
            return Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: self.wl(id).state.name(),
                expected: "a foreign admission",
            });
        }
        self.remove_workload(uid)
    }

    /// Whether the workload with this uid is a foreign admission.
    pub fn is_foreign(&self, uid: &str) -> bool {
        self.workloads
            .by_uid
            .get(uid)
            .is_some_and(|id| self.workloads.foreign.contains(id))
    }

    /// Whether workload `id` is a foreign admission (Sluice may not evict it).
    pub(super) fn foreign_id(&self, id: WlId) -> bool {
        !self.workloads.foreign.is_empty() && self.workloads.foreign.contains(&id)
    }
}
