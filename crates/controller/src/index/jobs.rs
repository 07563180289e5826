//! Jobs in the index: the level-triggered Job ↔ Workload reconcile (create
//! the Workload, hold a Job that runs without admission, start an admitted
//! one on its flavors, finish the Workload when its Job finishes), and
//! Workloads orphaned by a deleted Job.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use sluice_api::v1alpha1::{ResourceFlavor, conditions as cond};
use sluice_scheduler::{self as eng, WorkloadState};

use super::errors::engine_ok;
use super::status::{self, is_true};
use super::{Index, Kind, reference};
use crate::plan::{EventSpec, ObjKey, Plan, Purpose, Step};
use crate::{gang, job};

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
        let wk = ObjKey::new(
            key.namespace.clone(),
            gang::workload_name_of(&key.name, view.gang.as_ref()),
        );
        let left = self.track_gang(&key, &view, full, &wk);
        self.jobs.insert(key.clone(), view);
        if let Some(old) = left {
            self.reconcile_gang(&old, now_ms);
        }
        // Its Workload, seen first and kept aside, can come in now.
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
        let view = self.jobs.remove(key);
        self.refetch.remove(key);
        self.suspending.remove(key);
        self.starting.remove(key);
        if let Some(g) = view.as_ref().and_then(|v| v.gang.as_ref()) {
            let gk = ObjKey::new(key.namespace.clone(), g.name.clone());
            let finished = view.as_ref().and_then(|v| v.finished.map(|ok| (ok, v.uid.as_str())));
            self.leave_gang(&gk, key, finished);
            self.reconcile_gang(&gk, now_ms);
            return;
        }
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
    }

    pub(super) fn reconcile_job(&mut self, key: &ObjKey, now_ms: i64) {
        self.reconcile(key, None, now_ms);
    }

    /// Level-triggered: what a Job needs given its Workload's state.
    pub(super) fn reconcile(&mut self, key: &ObjKey, full: Option<&Job>, now_ms: i64) {
        let Some(j) = self.jobs.get(key) else { return };
        if let Some(g) = &j.gang {
            let gk = ObjKey::new(key.namespace.clone(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
            return;
        }
        if j.queue.is_none() {
            return;
        }
        let job_uid = j.uid.clone();
        let wk = ObjKey::new(key.namespace.clone(), job::workload_name(&key.name));
        let owned = self
            .workloads
            .get(&wk)
            .is_some_and(|e| e.owner.as_ref().is_some_and(|(_, u)| *u == job_uid));
        if owned {
            self.drive(&wk, now_ms);
            return;
        }
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
        self.hold(key);
        if self.creating.contains(&wk) {
            return;
        }
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

    /// Suspends a queued Job that runs without admission (once per
    /// observed state).
    pub(super) fn hold(&mut self, key: &ObjKey) {
        let Some(j) = self.jobs.get(key) else { return };
        if j.suspended || j.finished.is_some() || !self.suspending.insert(key.clone()) {
            return;
        }
        self.plans.push(Plan {
            purpose: Purpose::SuspendJob,
            steps: vec![Step::PatchJob {
                key: key.clone(),
                patch: job::suspend_patch(),
            }],
        });
    }

    /// Level-triggered: what the Jobs of a Workload (its own Job, or a
    /// gang's members) need given its state.
    pub(super) fn drive(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        let count = e.count;
        let gang = e.gang.as_ref().map(|g| (g.members.len(), g.done.clone()));
        let state = if e.in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        let finished_status = is_true(&e.status, cond::FINISHED);
        let unrestored = self.unrestored.contains(wk);
        let members = self.member_keys(wk);
        let views: Vec<&job::JobView> = members.iter().filter_map(|k| self.jobs.get(k)).collect();
        if views.is_empty() {
            return;
        }
        // Finished when every Job finished (a gang's deleted after
        // finishing count with the outcome they had).
        let whole = gang.as_ref().is_none_or(|(n, done)| views.len() + done.len() == *n);
        if whole && views.iter().all(|j| j.finished.is_some()) {
            if !finished_status {
                let ok = views.iter().all(|j| j.finished == Some(true))
                    && gang.as_ref().is_none_or(|(_, done)| done.values().all(|ok| *ok));
                self.finish(wk, ok, now_ms);
            }
            return;
        }
        if finished_status || unrestored {
            return;
        }
        match state {
            Some(WorkloadState::Admitted) => {
                let ready = views
                    .iter()
                    .all(|j| j.finished.is_some() || j.all_pods_ready(if gang.is_some() { j.pods } else { count }));
                if ready {
                    self.pods_ready(wk, now_ms);
                }
                // Admitted but a Job never started (e.g. a crash between the
                // status write and the Job patch): start it.
                let idle: Vec<ObjKey> = members
                    .iter()
                    .filter(|k| {
                        self.jobs.get(*k).is_some_and(|j| j.suspended && j.finished.is_none())
                            && !self.starting.contains(*k)
                    })
                    .cloned()
                    .collect();
                if idle.is_empty() {
                    return;
                }
                let Some(adm) = self.engine.admission(&uid) else { return };
                for k in idle {
                    let flavors = flavors_of(&adm.pod_sets, gang.is_some().then_some(k.name.as_str()));
                    let steps = self.start_job_steps(&k, &flavors);
                    if !steps.is_empty() {
                        self.starting.insert(k);
                        self.plans.push(Plan {
                            purpose: Purpose::StartJob { uid: uid.clone() },
                            steps,
                        });
                    }
                }
            }
            Some(WorkloadState::Evicting) => self.drive_eviction(wk, now_ms),
            Some(WorkloadState::Pending | WorkloadState::Preempting) | None => {
                for k in &members {
                    self.hold(k);
                }
            }
            Some(WorkloadState::Finished) => {}
        }
    }

    /// An evicted workload's Jobs: suspended, and once none has a pod
    /// left, the eviction completes (quota released).
    pub(super) fn drive_eviction(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        let members = self.member_keys(wk);
        let mut settled = true;
        let mut terminating_known = true;
        let mut checks = Vec::new();
        for k in &members {
            let Some(j) = self.jobs.get(k) else { continue };
            if j.finished.is_some() {
                continue;
            }
            if !j.suspended {
                settled = false;
                self.hold(k);
                continue;
            }
            settled &= j.live == 0;
            terminating_known &= j.reports_terminating;
            checks.push((k.clone(), j.uid.clone()));
        }
        if !settled {
            return;
        }
        if terminating_known || checks.is_empty() {
            self.complete_eviction(wk, now_ms);
        } else {
            // `active` is 0 but pods being deleted are not counted: look
            // before releasing their quota.
            self.confirm_pods_gone(checks, uid, now_ms);
        }
    }

    /// The Jobs a Workload stands for that exist: its own Job (its key,
    /// whether or not it exists), or the gang's members still there with
    /// the uid it was made from.
    pub(super) fn member_keys(&self, wk: &ObjKey) -> Vec<ObjKey> {
        let Some(e) = self.workloads.get(wk) else {
            return Vec::new();
        };
        match (&e.gang, &e.owner) {
            (Some(g), _) => g
                .members
                .iter()
                .filter(|(name, uid)| {
                    uid.is_some()
                        && self
                            .jobs
                            .get(&ObjKey::new(wk.namespace.clone(), name.clone()))
                            .is_some_and(|j| Some(&j.uid) == uid.as_ref())
                })
                .map(|(name, _)| ObjKey::new(wk.namespace.clone(), name.clone()))
                .collect(),
            (None, Some((name, _))) => vec![ObjKey::new(wk.namespace.clone(), name.clone())],
            (None, None) => Vec::new(),
        }
    }

    /// Reconciles whatever owns a Workload: its Job, or its gang.
    pub(super) fn reconcile_owner(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.workloads.get(wk) else { return };
        if let Some(g) = &e.gang {
            let gk = ObjKey::new(wk.namespace.clone(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
        } else if let Some((name, _)) = &e.owner {
            let jk = ObjKey::new(wk.namespace.clone(), name.clone());
            self.reconcile_job(&jk, now_ms);
        }
    }

    /// The steps that start an admitted workload's suspended Job on `flavors`.
    pub(super) fn start_job_steps(&mut self, key: &ObjKey, flavors: &BTreeSet<String>) -> Vec<Step> {
        let Some(j) = self.jobs.get(key) else { return Vec::new() };
        let flavors: Vec<&ResourceFlavor> = flavors.iter().filter_map(|n| self.flavors.get(n)).collect();
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
        for jk in self.member_keys(wk) {
            let Some(j) = self.jobs.get(&jk) else { continue };
            out.push(Step::Event(EventSpec {
                regarding: reference("batch/v1", "Job", &jk, Some(&j.uid)),
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

/// The flavors an admission assigned: to every pod set, or to the pod
/// set named `pod_set` (a gang member's).
pub(super) fn flavors_of(pod_sets: &[eng::PodSetAssignment], pod_set: Option<&str>) -> BTreeSet<String> {
    pod_sets
        .iter()
        .filter(|p| pod_set.is_none_or(|n| p.name == n))
        .flat_map(|p| p.flavors.values().cloned())
        .collect()
}
