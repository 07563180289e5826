//! Jobs in the index: the level-triggered Job ↔ Workload reconcile (create
//! the Workload, hold a Job that runs without admission, start an admitted
//! one on its flavors, finish the Workload when its Job finishes), and
//! Workloads orphaned by a deleted Job.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use sluice_api::v1alpha1::{ResourceFlavor, conditions as cond};
use sluice_scheduler::{self as eng, WorkloadState};

use super::errors::engine_ok;
use super::status::{self, is_true};
use super::{Index, Kind, reference};
use crate::job;
use crate::plan::{EventSpec, ObjKey, Plan, Purpose, Step};

impl Index {
    /// A Job as observed (the full object: its Workload may be created from it).
    pub fn apply_job(&mut self, j: impl std::borrow::Borrow<Job>, now_ms: i64) {
        let j: &Job = j.borrow();
        let view = job::JobView::of(j, self.config.kueue_compat);
        self.apply_job_view(view, Some(j), now_ms);
    }

    /// A Job known only by its view (a new leader building its index from
    /// the cache). If its Workload must be created, the Job is listed in
    /// [`Index::take_refetch`] so that the caller reads it again.
    pub fn apply_job_view(&mut self, view: job::JobView, full: Option<&Job>, now_ms: i64) {
        let key = ObjKey::new(view.namespace.clone(), view.name.clone());
        if view.name.is_empty() {
            return;
        }
        if view.suspended {
            self.suspending.remove(&key);
        } else {
            self.starting.remove(&key);
        }
        self.refetch.remove(&key);
        self.jobs.insert(key.clone(), view);
        // Its Workload, seen first and kept aside, can come in now.
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        if self
            .workloads
            .get(&wk)
            .is_some_and(|e| !e.in_engine && e.spec.is_some())
        {
            self.sync_workload(&wk, None, now_ms);
        }
        self.reconcile(&key, full, now_ms);
    }

    /// Jobs to read again from the API server and pass to [`Index::apply_job`].
    pub fn take_refetch(&mut self) -> Vec<ObjKey> {
        std::mem::take(&mut self.refetch).into_iter().collect()
    }

    pub fn delete_job(&mut self, key: &ObjKey, now_ms: i64) {
        self.jobs.remove(key);
        self.refetch.remove(key);
        self.suspending.remove(key);
        self.starting.remove(key);
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        // Quota is released now; the Workload goes with its owner (garbage
        // collector) and is forgotten when its deletion is observed.
        if let Some(e) = self.workloads.get_mut(&wk)
            && e.in_engine
        {
            engine_ok("remove_workload", &e.uid, self.engine.remove_workload(&e.uid));
            e.in_engine = false;
            self.evicting.remove(&e.uid);
        }
        let _ = now_ms;
    }

    pub(super) fn reconcile_job(&mut self, key: &ObjKey, now_ms: i64) {
        self.reconcile(key, None, now_ms);
    }

    /// Level-triggered: what a Job needs given its Workload's state.
    pub(super) fn reconcile(&mut self, key: &ObjKey, full: Option<&Job>, now_ms: i64) {
        let Some(j) = self.jobs.get(key) else { return };
        if j.queue.is_none() {
            return;
        }
        let job_uid = j.uid.clone();
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        let owned = self
            .workloads
            .get(&wk)
            .filter(|e| e.owner.as_ref().is_some_and(|(_, u)| *u == job_uid));
        let Some(e) = owned else {
            if self.workloads.contains_key(&wk) {
                self.record_error(
                    Kind::Job,
                    key.to_string(),
                    "WorkloadNameTaken",
                    format!("Workload {wk} exists but is not owned by this Job"),
                );
                return;
            }
            if j.finished.is_some() {
                return;
            }
            // No Workload yet: create it, and hold the Job if it runs.
            if !j.suspended && self.suspending.insert(key.clone()) {
                self.plans.push(Plan {
                    purpose: Purpose::SuspendJob,
                    steps: vec![Step::PatchJob {
                        key: key.clone(),
                        patch: job::suspend_patch(),
                    }],
                });
            }
            if !self.creating.contains(&wk) {
                let Some(full) = full else {
                    self.refetch.insert(key.clone());
                    return;
                };
                let wcs = &self.workload_classes;
                let pcs = &self.pod_classes;
                match job::workload_for_job(
                    full,
                    self.config.kueue_compat,
                    |n| wcs.get(n).copied(),
                    |n| pcs.get(n).copied(),
                ) {
                    Ok(wl) => {
                        self.creating.insert(wk);
                        self.plans.push(Plan {
                            purpose: Purpose::CreateWorkload,
                            steps: vec![Step::ApplyWorkload(Box::new(wl))],
                        });
                    }
                    Err(err) => {
                        self.record_error(Kind::Job, key.to_string(), err.metric_label(), err.to_string());
                    }
                }
            }
            return;
        };
        let uid = e.uid.clone();
        let count = e.count;
        let state = if e.in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        let finished_status = is_true(&e.status, cond::FINISHED);
        let unrestored = self.unrestored.contains(&wk);
        if let Some(ok) = j.finished {
            if !finished_status {
                self.finish(&wk, ok, now_ms);
            }
            return;
        }
        if finished_status || unrestored {
            return;
        }
        let suspended = j.suspended;
        let live = j.live;
        match state {
            Some(WorkloadState::Admitted) => {
                if j.all_pods_ready(count) {
                    self.pods_ready(&wk, now_ms);
                }
                if suspended && !self.starting.contains(key) {
                    // Admitted but the Job never started (e.g. a crash between
                    // the status write and the Job patch): start it.
                    if let Some(adm) = self.engine.admission(&uid) {
                        let steps = self.start_job_steps(key, &adm.pod_sets);
                        if !steps.is_empty() {
                            self.starting.insert(key.clone());
                            self.plans.push(Plan {
                                purpose: Purpose::StartJob { uid },
                                steps,
                            });
                        }
                    }
                }
            }
            Some(WorkloadState::Evicting) => {
                if !suspended {
                    if self.suspending.insert(key.clone()) {
                        self.plans.push(Plan {
                            purpose: Purpose::SuspendJob,
                            steps: vec![Step::PatchJob {
                                key: key.clone(),
                                patch: job::suspend_patch(),
                            }],
                        });
                    }
                } else if live == 0 {
                    if j.reports_terminating {
                        self.complete_eviction(&wk, now_ms);
                    } else {
                        // `active` is 0 but pods being deleted are not
                        // counted: look before releasing their quota.
                        self.confirm_pods_gone(key, job_uid, uid, now_ms);
                    }
                }
            }
            Some(WorkloadState::Pending | WorkloadState::Preempting) | None => {
                if !suspended && self.suspending.insert(key.clone()) {
                    self.plans.push(Plan {
                        purpose: Purpose::SuspendJob,
                        steps: vec![Step::PatchJob {
                            key: key.clone(),
                            patch: job::suspend_patch(),
                        }],
                    });
                }
            }
            Some(WorkloadState::Finished) => {}
        }
    }

    pub(super) fn job_key_of(&self, wl: &ObjKey) -> Option<ObjKey> {
        let e = self.workloads.get(wl)?;
        let (name, _) = e.owner.as_ref()?;
        Some(ObjKey::new(wl.namespace.clone(), name.clone()))
    }

    /// The steps that start an admitted workload's suspended Job on its flavors.
    pub(super) fn start_job_steps(&mut self, key: &ObjKey, pod_sets: &[eng::PodSetAssignment]) -> Vec<Step> {
        let Some(j) = self.jobs.get(key) else { return Vec::new() };
        let names: BTreeSet<&String> = pod_sets.iter().flat_map(|p| p.flavors.values()).collect();
        let flavors: Vec<&ResourceFlavor> = names.iter().filter_map(|n| self.flavors.get(*n)).collect();
        let base = j.patch_base();
        let patch = match job::injection_patch(&base, &flavors) {
            Ok(p) => p,
            Err(err) => {
                self.record_error(Kind::Job, key.to_string(), err.metric_label(), err.to_string());
                return Vec::new();
            }
        };
        let mut steps = Vec::new();
        if j.started {
            steps.push(Step::PatchJobStatus {
                key: key.clone(),
                patch: job::clear_start_time_patch(),
            });
        }
        steps.push(Step::PatchJob {
            key: key.clone(),
            patch,
        });
        steps
    }

    pub(super) fn job_reference(&self, wk: &ObjKey) -> Option<ObjectReference> {
        let jk = self.job_key_of(wk)?;
        let j = self.jobs.get(&jk)?;
        Some(reference("batch/v1", "Job", &jk, Some(&j.uid)))
    }

    pub(super) fn events(
        &self,
        wk: &ObjKey,
        type_: &'static str,
        reason: &str,
        action: &'static str,
        note: &str,
    ) -> Vec<Step> {
        let mut out = Vec::new();
        if let Some(e) = self.workloads.get(wk) {
            out.push(Step::Event(EventSpec {
                regarding: reference("sluice.dev/v1alpha1", "Workload", wk, Some(&e.uid)),
                type_,
                reason: reason.to_string(),
                action,
                note: note.to_string(),
            }));
        }
        if let Some(r) = self.job_reference(wk) {
            out.push(Step::Event(EventSpec {
                regarding: r,
                type_,
                reason: reason.to_string(),
                action,
                note: note.to_string(),
            }));
        }
        out
    }

    /// A Workload Sluice made for a Job ([`job::JOB_UID_LABEL`]) that has
    /// lost its owner reference (an orphaning delete) while that Job is
    /// gone (once Jobs are listed): nobody will ever finish it.
    pub(super) fn is_orphan(&self, wk: &ObjKey) -> bool {
        let Some(e) = self.workloads.get(wk) else { return false };
        let Some(job_uid) = &e.job_uid else { return false };
        if e.owner.is_some() || !self.synced.contains(&Kind::Job) {
            return false;
        }
        let job_name = wk.name.strip_prefix("job-").unwrap_or(&wk.name);
        self.jobs
            .get(&ObjKey::new(wk.namespace.clone(), job_name))
            .is_none_or(|j| j.uid != *job_uid)
    }

    /// Finishes an orphaned Workload (JobDeleted): its quota is released
    /// and a restart never takes it again.
    pub(super) fn finish_orphan(&mut self, wk: &ObjKey, now_ms: i64) {
        self.unrestored.remove(wk);
        self.not_selected.remove(wk);
        if let Some(e) = self.workloads.get_mut(wk) {
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
            .workloads
            .iter()
            .filter(|(_, e)| e.job_uid.is_some() && e.owner.is_none() && !is_true(&e.status, cond::FINISHED))
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
        let Some(e) = self.workloads.get_mut(wk) else { return };
        let uid = e.uid.clone();
        if e.in_engine {
            match self.engine.workload_state(&uid) {
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    engine_ok("finish", &uid, self.engine.finish(&uid));
                }
                _ => {
                    engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                    e.in_engine = false;
                }
            }
        }
        self.evicting.remove(&uid);
        e.admitted_at = None;
        status::finished(&mut e.status, reason, message, e.active, now_ms, e.generation);
        e.pending_fp = None;
        let mut steps = vec![e.status_write(wk)];
        steps.extend(
            self.events(wk, "Normal", "Finished", "Finish", message)
                .into_iter()
                .take(1),
        );
        self.plans.push(Plan {
            purpose: Purpose::Finish { uid },
            steps,
        });
    }
}
