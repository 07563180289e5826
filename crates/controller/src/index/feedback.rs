//! What the writer reports back about a plan: status writes acknowledged
//! (so older watch events cannot undo them), pods-gone answers, and
//! failures: an admission rolled back, a write forgotten so that it is
//! tried again, a Workload read back when its status write has no answer.

use sluice_scheduler::WorkloadState;

use super::errors::engine_ok;
use super::{Index, key_of};
use crate::plan::{Plan, Purpose, Step};
use crate::writer::{Feedback, PlanError};

impl Index {
    /// The writer is done with a plan ([`crate::writer::drain`]): its
    /// status writes are acknowledged and a pods-gone check answered, or
    /// its failure is handled (see [`Index::plan_stopped`]). The one way
    /// feedback comes into the index.
    pub fn feedback(&mut self, plan: &Plan, result: &Feedback, now_ms: i64) {
        if matches!(plan.purpose, Purpose::Pending { .. }) {
            self.outbox.explain_out = self.outbox.explain_out.saturating_sub(1);
        }
        match result {
            Ok(acks) => {
                self.state_written(plan);
                self.acknowledge(plan, acks);
                if let Purpose::ConfirmPodsGone { uid } = &plan.purpose {
                    self.pods_gone(uid, now_ms);
                }
            }
            Err(error) => self.plan_stopped(plan, error, now_ms),
        }
    }

    /// A plan failed: what it wrote before it stopped is acknowledged; a
    /// failed admission status write rolls the admission back; other
    /// failures are forgotten so that the next event retries them.
    pub fn plan_stopped(&mut self, plan: &Plan, error: &PlanError, now_ms: i64) {
        // What the plan did write before it stopped.
        self.acknowledge(plan, &error.acks);
        match &plan.purpose {
            Purpose::Admit { uid } if error.step == 0 => self.admission_failed(uid, now_ms),
            Purpose::ConfirmPodsGone { uid } => self.pods_remain(uid, now_ms),
            _ => {}
        }
        self.plan_failed(plan, error.step, now_ms);
    }

    /// The status write of an admission failed: undo the admission in the
    /// engine (it waits again), and forget the optimistic status.
    pub fn admission_failed(&mut self, uid: &str, now_ms: i64) {
        let Some(wk) = self.table.by_uid.get(uid).cloned() else {
            return;
        };
        if self.engine.workload_state(uid) == Some(WorkloadState::Admitted) {
            engine_ok("evict", uid, self.engine.evict(uid));
            engine_ok("eviction_complete", uid, self.engine.eviction_complete(uid, now_ms));
        }
        for jk in self.member_keys(&wk) {
            self.inflight.starting.remove(&jk);
        }
        let e = self.table.workloads.get_mut(&wk).expect("indexed");
        e.run.admitted_at = None;
        if let Some(prior) = self.table.prior.remove(uid) {
            e.written.status = prior;
        }
        self.outbox.retry_soon = true;
    }

    /// The writer is done with a plan: for each of its status writes, the
    /// resourceVersion it produced (`acks`: step index and resourceVersion;
    /// none when the plan failed). Watch events older than the latest
    /// acknowledged write are ignored from then on.
    pub fn acknowledge(&mut self, plan: &Plan, acks: &[(usize, String)]) {
        for (i, step) in plan.steps.iter().enumerate() {
            let Step::ApplyWorkloadStatus { key, seq, .. } = step else {
                continue;
            };
            let Some(e) = self.table.workloads.get_mut(key) else {
                continue;
            };
            if let Some(rv) = acks
                .iter()
                .find(|(k, _)| *k == i)
                .and_then(|(_, rv)| rv.parse::<u64>().ok())
            {
                e.written.written_rv = Some(e.written.written_rv.map_or(rv, |w| w.max(rv)));
            }
            if *seq == e.written.seq {
                e.written.awaiting = false;
            }
        }
    }

    /// A plan stopped at step `from` (the steps before it were made):
    /// forget that its effect is expected, so that it is tried again, and
    /// read back any Workload whose status write has no answer.
    pub fn plan_failed(&mut self, plan: &Plan, from: usize, now_ms: i64) {
        if let Purpose::Deactivate { uid } = &plan.purpose
            && self.inflight.deactivating.contains(uid)
        {
            // Not written: kept as deactivating (observed `spec.active:
            // true` is not a reactivation) and tried again next cycle.
            self.inflight.deactivate_retry.insert(uid.clone());
        }
        if let Purpose::PodsReady { uid } = &plan.purpose
            && let Some(wk) = self.table.by_uid.get(uid)
            && let Some(e) = self.table.workloads.get_mut(wk)
        {
            // Still known to be ready here; written again on the next event.
            e.run.pods_ready_unwritten = true;
        }
        if let Purpose::Pending { uid } = &plan.purpose {
            self.explanation_not_written(uid);
        }
        if let Purpose::RetireGang { uid } | Purpose::Reshape { uid } = &plan.purpose {
            self.retire_failed(uid);
        }
        for (i, s) in plan.steps.iter().enumerate() {
            match s {
                Step::ApplyWorkload(wl) => {
                    if let Some(k) = key_of(wl.metadata.namespace.as_deref(), wl.metadata.name.as_deref()) {
                        self.inflight.creating.remove(&k);
                    }
                }
                Step::PatchPod { key, .. } | Step::DeletePod { key } => self.pod_step_failed(key),
                Step::PatchJob { job: key, .. } => {
                    self.inflight.suspending.remove(key);
                    self.inflight.starting.remove(key);
                    // Looked at again next cycle (a Job start left undone
                    // after its admission was written has no event to wait for).
                    self.inflight.retry_jobs.insert(key.clone());
                }
                Step::PatchWorkloadState { key, .. } if i >= from => {
                    self.outbox.states_out = self.outbox.states_out.saturating_sub(1);
                    // Read back: the state is planned again if still wanted.
                    if let Some(e) = self.table.workloads.get_mut(key) {
                        e.written.state_out = false;
                        self.inflight.refetch_workloads.insert(key.clone());
                    }
                }
                Step::ApplyWorkloadStatus { key, seq, .. } if i >= from => {
                    // Not made, or made without an answer (a timeout may
                    // still have landed): the index's status is a guess now.
                    // Read the Workload again and take it as it is.
                    if let Some(e) = self.table.workloads.get_mut(key)
                        && e.written.seq == *seq
                    {
                        e.written.awaiting = false;
                        self.inflight.refetch_workloads.insert(key.clone());
                    }
                }
                _ => {}
            }
        }
        let _ = now_ms;
    }

    /// A queued plan was replaced by a later one and will not be written.
    pub fn superseded(&mut self, plan: &Plan) {
        self.state_written(plan);
        for s in &plan.steps {
            if let Step::ApplyWorkloadStatus { key, seq, .. } = s
                && let Some(e) = self.table.workloads.get_mut(key)
                && e.written.seq == *seq
            {
                e.written.awaiting = false;
            }
        }
        if let Purpose::Pending { uid } = &plan.purpose {
            self.outbox.explain_out = self.outbox.explain_out.saturating_sub(1);
            self.explanation_not_written(uid);
        }
    }

    /// A [`Step::PatchWorkloadState`] is out of the queue (written, or
    /// superseded by a whole-status write): another may be planned.
    fn state_written(&mut self, plan: &Plan) {
        for s in &plan.steps {
            if let Step::PatchWorkloadState { key, .. } = s {
                self.outbox.states_out = self.outbox.states_out.saturating_sub(1);
                if let Some(e) = self.table.workloads.get_mut(key) {
                    e.written.state_out = false;
                }
            }
        }
    }

    /// An explanation that was planned is not written: planned again.
    pub(super) fn explanation_not_written(&mut self, uid: &str) {
        if let Some(wk) = self.table.by_uid.get(uid)
            && let Some(e) = self.table.workloads.get_mut(wk)
        {
            e.written.pending_fp = None;
            if matches!(
                self.engine.workload_state(uid),
                Some(WorkloadState::Pending | WorkloadState::Preempting)
            ) {
                self.outbox.explain.insert(uid.to_string());
            }
        }
    }
}
