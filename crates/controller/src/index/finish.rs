//! What ends a workload: its Jobs finish, or (for a Job's own Workload)
//! the Job is deleted with its Workload orphaned; and the Events said
//! about a workload, on it and on each of its Jobs.

use sluice_api::v1alpha1::conditions as cond;
use sluice_scheduler::WorkloadState;

use super::errors::engine_ok;
use super::status::{self, is_true};
use super::{Index, Kind, WlEntry, reference};
use crate::plan::{EventSpec, JobRef, ObjKey, Plan, Purpose, Step};

impl Index {
    pub(super) fn events(
        &self,
        wk: &ObjKey,
        type_: &'static str,
        reason: &str,
        action: &'static str,
        note: &str,
    ) -> Vec<Step> {
        let mut out = Vec::new();
        if let Some(e) = self.table.workloads.get(wk) {
            out.push(Step::Event(EventSpec {
                regarding: reference("sluice.dev/v1alpha1", "Workload", wk, Some(&e.uid)),
                type_,
                reason: reason.to_string(),
                action,
                note: note.to_string(),
            }));
        }
        for jk in self.member_keys(wk) {
            let Some(j) = self.queued.jobs.get(&jk) else { continue };
            out.push(self.object_event(&jk, &j.uid, type_, reason, action, note.to_string()));
        }
        out
    }

    /// An Event regarding a queued object.
    pub(super) fn object_event(
        &self,
        jk: &JobRef,
        uid: &str,
        type_: &'static str,
        reason: &str,
        action: &'static str,
        note: String,
    ) -> Step {
        Step::Event(EventSpec {
            regarding: reference(jk.kind.api_version(), jk.kind.kind(), &jk.key, Some(uid)),
            type_,
            reason: reason.to_string(),
            action,
            note,
        })
    }

    /// A Workload Sluice made for a Job ([`job::JOB_UID_LABEL`]) that has
    /// lost its owner reference (an orphaning delete) while that Job is
    /// gone (once Jobs are listed): nobody will ever finish it.
    pub(super) fn is_orphan(&self, wk: &ObjKey) -> bool {
        let Some(e) = self.table.workloads.get(wk) else {
            return false;
        };
        let Some(job_uid) = &e.job_uid else { return false };
        if e.owner.is_some() || !self.defs.synced.contains(&Kind::JOB) {
            return false;
        }
        let job_name = wk.name.strip_prefix("job-").unwrap_or(&wk.name);
        self.queued
            .jobs
            .get(&JobRef::job(wk.namespace.clone(), job_name))
            .is_none_or(|j| j.uid != *job_uid)
    }

    /// Finishes an orphaned Workload (JobDeleted): its quota is released
    /// and a restart never takes it again.
    pub(super) fn finish_orphan(&mut self, wk: &ObjKey, now_ms: i64) {
        self.table.unrestored.remove(wk);
        self.table.not_selected.remove(wk);
        if let Some(e) = self.table.workloads.get_mut(wk) {
            e.spec = None;
        }
        tracing::info!(workload = %wk, "its Job was deleted (Workload orphaned): finished");
        self.finish_with(
            wk,
            cond::reasons::JOB_DELETED,
            "The Job was deleted; its Workload was orphaned",
            now_ms,
        );
    }

    /// Orphaned Workloads seen before Jobs were listed.
    pub(super) fn finish_orphans(&mut self, now_ms: i64) {
        let orphans: Vec<ObjKey> = self
            .table
            .workloads
            .iter()
            .filter(|(_, e)| e.job_uid.is_some() && e.owner.is_none() && !is_true(&e.written.status, cond::FINISHED))
            .map(|(k, _)| k.clone())
            .filter(|k| self.is_orphan(k))
            .collect();
        for k in orphans {
            self.finish_orphan(&k, now_ms);
        }
    }

    pub(super) fn finish(&mut self, wk: &ObjKey, succeeded: bool, now_ms: i64) {
        let (reason, message) = if succeeded {
            (cond::reasons::SUCCEEDED, "Job finished successfully")
        } else {
            (cond::reasons::FAILED, "Job failed")
        };
        self.finish_with(wk, reason, message, now_ms);
    }

    pub(super) fn finish_with(&mut self, wk: &ObjKey, reason: &str, message: &str, now_ms: i64) {
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        let uid = e.uid.clone();
        let mut held_quota = false;
        if e.run.in_engine {
            match self.engine.workload_state(&uid) {
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    held_quota = true;
                    if let (Some(at), Some(adm)) = (e.run.admitted_at, self.engine.admission(&uid)) {
                        let ran = now_ms.saturating_sub(at);
                        super::forecast::observe_run_time(&mut self.table.run_times, &adm.cluster_queue, ran);
                    }
                    engine_ok("finish", &uid, self.engine.finish(&uid));
                }
                _ => {
                    engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                    e.run.in_engine = false;
                }
            }
        }
        self.inflight.evicting.remove(&uid);
        e.run.admitted_at = None;
        status::finished(
            &mut e.written.status,
            reason,
            message,
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        e.written.pending_fp = None;
        let mut steps = vec![e.status_write(wk)];
        steps.extend(
            self.events(wk, "Normal", "Finished", "Finish", message)
                .into_iter()
                .take(1),
        );
        // The quota is free in the engine now; the next admission that
        // uses it is queued after this write, in the same lane.
        let purpose = if held_quota {
            Purpose::Release { uid }
        } else {
            Purpose::Finish { uid }
        };
        self.outbox.plans.push(Plan { purpose, steps });
    }
}

/// What the index keeps of a finished workload's status: its state and its
/// Finished condition, which is what later events about it are checked
/// against; not its admission nor its other conditions. A cluster keeps
/// finished Workloads by the thousand (about 2 KiB each in full). A
/// finished workload gets no whole-status write again: its quota is
/// released and nothing it holds changes; its `status.state` is a merge
/// patch of that one field. A newer observed status replaces the cut-down
/// one (and is cut down again).
pub(super) fn slim_finished(e: &mut WlEntry) {
    if e.written.slim || e.written.status.state != Some(sluice_api::v1alpha1::WorkloadState::Finished) {
        return;
    }
    let Some(finished) = e
        .written
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == cond::FINISHED && c.status == cond::status::TRUE)
        .cloned()
    else {
        return;
    };
    e.written.status = sluice_api::v1alpha1::WorkloadStatus {
        state: e.written.status.state,
        conditions: vec![finished],
        ..Default::default()
    };
    e.written.slim = true;
}
