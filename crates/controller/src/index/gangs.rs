//! Multi-Job gangs in the index: which Jobs carry a gang label, the
//! gang's Workload made once every Job of it exists (from all of them at
//! once), what its Jobs are told while it is not whole or its labels
//! conflict, and its Workload retired when a member goes (evicted first if
//! admitted: the rest are suspended and its quota released once their
//! pods are gone; a new Workload is made when the gang is whole again).
//! Driving an intact gang's Jobs is the same rule as a single Job's
//! (`jobs::drive`), over every member.

use k8s_openapi::api::batch::v1::Job;
use sluice_api::Validate;
use sluice_api::v1alpha1::conditions as cond;
use sluice_scheduler::WorkloadState;

use super::errors::engine_ok;
use super::status::is_true;
use super::{Index, Kind, reference};
use crate::plan::{EventSpec, JobRef, ObjKey, Plan, Purpose, Step};
use sluice_kinds::Full;
use sluice_kinds::gang::{self, Assessment};
use sluice_kinds::job::JobView;

impl Index {
    /// Keeps the gang membership of a Job about to be stored as `view`
    /// (and its whole object, while its gang's Workload `wk` is still to
    /// be made). Returns the gang it left, if it changed gangs.
    pub(super) fn track_gang(
        &mut self,
        key: &JobRef,
        view: &JobView,
        full: Option<&Job>,
        wk: &ObjKey,
    ) -> Option<ObjKey> {
        let gang_key = |v: &JobView| v.gang.as_ref().map(|g| ObjKey::new(key.namespace(), g.name.clone()));
        let old = self.queued.jobs.get(key).and_then(gang_key);
        let new = gang_key(view);
        let left = old.filter(|o| new.as_ref() != Some(o));
        if let Some(o) = &left {
            self.leave_gang(o, key);
        }
        // A member seen finished counts as done from now on: its Workload
        // may lose the owner reference to it (a TTL deletes it in the
        // foreground) before the Job is gone.
        if let Some(ok) = view.finished
            && let Some(wk) = self.queued.member_of.get(key)
            && let Some(g) = self.table.workloads.get_mut(wk).and_then(|e| e.gang.as_mut())
            && g.members
                .iter()
                .any(|(n, u)| n == key.name() && u.as_deref() == Some(view.uid.as_str()))
        {
            g.done.insert(key.name().to_string(), ok);
        }
        if let Some(n) = new {
            self.queued.gangs.entry(n).or_default().insert(key.name().to_string());
            if let Some(full) = full
                && !self.table.workloads.contains_key(wk)
            {
                let mut whole = full.clone();
                whole.metadata.managed_fields = None;
                whole.status = None;
                self.queued.gang_jobs.insert(key.clone(), whole);
            }
        }
        left
    }

    /// Job `key` no longer carries gang `gk`'s label (deleted, or
    /// relabelled). A member of the gang's Workload stays one
    /// (`member_of`) until that Workload goes.
    pub(super) fn leave_gang(&mut self, gk: &ObjKey, key: &JobRef) {
        if let Some(names) = self.queued.gangs.get_mut(gk) {
            names.remove(key.name());
            if names.is_empty() {
                self.queued.gangs.remove(gk);
                self.queued.gang_told.remove(gk);
            }
        }
        self.queued.gang_jobs.remove(key);
        self.clear_error(Kind::JOB, &key.to_string());
    }

    /// Level-triggered: what gang `gk` (namespace, gang name) needs. With
    /// its Workload made: Jobs not in it refused, then the gang broken or
    /// driven. Without: its Jobs held, and its Workload made once they are
    /// whole and agree.
    pub(super) fn reconcile_gang(&mut self, gk: &ObjKey, now_ms: i64) {
        let wk = ObjKey::new(gk.namespace.clone(), gang::workload_name(&gk.name));
        let names = self.gang_members(gk);
        if self.table.workloads.contains_key(&wk) {
            self.reconcile_made_gang(gk, &wk, &names, now_ms);
            return;
        }
        if self.inflight.creating.contains(&wk) {
            return;
        }
        let Some(assessment) = self.assess_gang(gk, &names) else {
            // Not queued: not Sluice's.
            return;
        };
        for k in &names {
            self.hold(k);
        }
        match assessment {
            Assessment::Conflict(err) => self.record_gang_error(&names, &err),
            Assessment::Incomplete { have, want } => {
                for k in &names {
                    self.clear_error(Kind::JOB, &k.to_string());
                }
                self.tell_waiting(gk, &names, have, want);
            }
            Assessment::Complete { queue, .. } => self.make_gang_workload(gk, wk, &names, &queue),
        }
    }

    /// The Jobs carrying gang `gk`'s label, but those queued on their own
    /// before they were labelled (not the gang's).
    fn gang_members(&self, gk: &ObjKey) -> Vec<JobRef> {
        self.queued
            .gangs
            .get(gk)
            .into_iter()
            .flatten()
            .map(|n| JobRef::job(gk.namespace.clone(), n.clone()))
            .filter(|k| {
                let own = ObjKey::new(k.namespace(), sluice_kinds::job::workload_name(k.name()));
                self.queued.jobs.get(k).is_none_or(|j| !self.owns(&own, &j.uid))
            })
            .collect()
    }

    /// A gang whose Workload `wk` exists: Jobs labelled into it that it
    /// was not made from are held and told; unless it finished, it is
    /// broken (a member went) or driven.
    fn reconcile_made_gang(&mut self, gk: &ObjKey, wk: &ObjKey, names: &[JobRef], now_ms: i64) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        let Some(g) = &e.gang else {
            for k in names {
                self.record_error(
                    Kind::JOB,
                    k.to_string(),
                    "WorkloadNameTaken",
                    format!("Workload {wk} of gang {} exists but is not a gang's", gk.name),
                );
            }
            return;
        };
        let finished = is_true(&e.written.status, cond::FINISHED);
        let members: Vec<String> = g.members.iter().map(|(n, _)| n.clone()).collect();
        self.refuse_latecomers(gk, wk, names, &members, finished);
        if finished {
            return;
        }
        if self.gang_broken(wk) {
            self.break_gang(wk, now_ms);
        } else {
            self.drive(wk, now_ms);
        }
    }

    /// Jobs labelled into a gang whose Workload `wk` was made without
    /// them (from `members`): held, with an error saying so.
    fn refuse_latecomers(&mut self, gk: &ObjKey, wk: &ObjKey, names: &[JobRef], members: &[String], finished: bool) {
        let current = self.member_keys(wk);
        for k in names {
            if current.contains(k) {
                continue;
            }
            self.hold(k);
            let why = if finished {
                format!(
                    "gang {:?} already ran as Workload {wk} (Jobs {}), which goes when the last of those Jobs is deleted; this Job is not one of them: give it another gang name, or delete the old Jobs",
                    gk.name,
                    members.join(", ")
                )
            } else {
                format!(
                    "gang {:?} already has its Workload {wk}, made from Jobs {}; this Job is not one of them",
                    gk.name,
                    members.join(", ")
                )
            };
            self.record_error(Kind::JOB, k.to_string(), "GangConflict", why);
        }
    }

    /// Whether the gang's Jobs are whole and agree; `None` when none of
    /// them is queued.
    fn assess_gang(&self, gk: &ObjKey, names: &[JobRef]) -> Option<Assessment> {
        let views: Vec<(JobRef, &JobView)> = names
            .iter()
            .filter_map(|k| self.queued.jobs.get(k).map(|v| (k.clone(), v)))
            .collect();
        if views.iter().all(|(_, v)| v.queue.is_none()) {
            return None;
        }
        let labels: Vec<gang::Labels> = views.iter().filter_map(|(_, v)| v.gang.clone()).collect();
        let members: Vec<gang::Member<'_>> = views
            .iter()
            .zip(&labels)
            .map(|((k, v), l)| gang::Member {
                job: k.name(),
                labels: l,
                queue: v.queue.as_deref(),
            })
            .collect();
        Some(gang::assess(&gk.name, &members))
    }

    fn record_gang_error(&mut self, names: &[JobRef], err: &gang::GangError) {
        for k in names {
            self.record_error(Kind::JOB, k.to_string(), err.reason(), err.to_string());
        }
    }

    /// A whole gang's Workload, made from all its Jobs at once (those
    /// known by their views only, after a new leader, are read again
    /// first) and planned for creation; what the API server would refuse
    /// is said on its Jobs instead.
    fn make_gang_workload(&mut self, gk: &ObjKey, wk: ObjKey, names: &[JobRef], queue: &str) {
        let missing: Vec<JobRef> = names
            .iter()
            .filter(|k| !self.queued.gang_jobs.contains_key(*k))
            .cloned()
            .collect();
        if !missing.is_empty() {
            self.queued.refetch.extend(missing);
            return;
        }
        let classes: Vec<(JobRef, Option<String>)> = names
            .iter()
            .map(|k| {
                let class = self
                    .queued
                    .gang_jobs
                    .get(k)
                    .and_then(|j| Full::Job(j).priority_class_label());
                (k.clone(), class)
            })
            .collect();
        let mut known = true;
        for (k, class) in &classes {
            known &= self.class_known(Kind::JOB, k, class.as_deref());
        }
        if !known {
            return;
        }
        let jobs: Vec<&Job> = names.iter().filter_map(|k| self.queued.gang_jobs.get(k)).collect();
        let wcs = &self.defs.workload_classes;
        let pcs = &self.defs.pod_classes;
        let made = gang::workload_for_gang(&gk.name, queue, &jobs, |n| wcs.get(n).copied(), |n| pcs.get(n).copied());
        // What the API server would refuse (more pod sets than a Workload
        // holds, names that are not DNS labels) is said here.
        let made = made.and_then(|wl| {
            wl.check().map(|()| wl).map_err(|e| gang::GangError::Unusable {
                gang: gk.name.clone(),
                reason: e.to_string(),
            })
        });
        match made {
            Ok(wl) => {
                for k in names {
                    self.clear_error(Kind::JOB, &k.to_string());
                }
                self.queued.gang_told.remove(gk);
                self.inflight.creating.insert(wk);
                self.outbox.plans.push(Plan {
                    purpose: Purpose::CreateWorkload,
                    steps: vec![Step::ApplyWorkload(Box::new(wl))],
                });
            }
            Err(err) => self.record_gang_error(names, &err),
        }
    }

    /// Every gang Workload checked against its Jobs (once Jobs are listed:
    /// members deleted while no one watched).
    pub(super) fn reconcile_gangs(&mut self, now_ms: i64) {
        let gangs: Vec<ObjKey> = self
            .table
            .workloads
            .iter()
            .filter_map(|(wk, e)| {
                e.gang
                    .as_ref()
                    .map(|g| ObjKey::new(wk.namespace.clone(), g.name.clone()))
            })
            .collect();
        for gk in gangs {
            self.reconcile_gang(&gk, now_ms);
        }
    }

    /// A gang Workload one of whose Jobs is gone (or was replaced by
    /// another of the same name), once Jobs are listed.
    pub(super) fn gang_broken(&self, wk: &ObjKey) -> bool {
        let Some(g) = self.table.workloads.get(wk).and_then(|e| e.gang.as_ref()) else {
            return false;
        };
        if !self.defs.synced.contains(&Kind::JOB) {
            return false;
        }
        let present = self.member_keys(wk);
        g.members
            .iter()
            .any(|(name, _)| !g.done.contains_key(name) && !present.iter().any(|k| k.name() == name))
    }

    /// A gang that lost a Job: evicted if admitted (its other Jobs are
    /// suspended; the eviction ends in [`Index::retire_gang`] once their
    /// pods are gone), retired at once otherwise.
    fn break_gang(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        let state = if e.run.in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        match state {
            Some(WorkloadState::Admitted) => {
                let present = self.member_keys(wk);
                let (name, missing) = match &e.gang {
                    Some(g) => (
                        g.name.clone(),
                        g.members
                            .iter()
                            .filter(|(n, _)| !g.done.contains_key(n) && !present.iter().any(|k| k.name() == n))
                            .map(|(n, _)| n.clone())
                            .collect::<Vec<_>>(),
                    ),
                    None => return,
                };
                let message = format!(
                    "Job {} of gang {name} was deleted: a gang runs whole or not at all",
                    missing.join(", ")
                );
                if self.engine.evict(&uid).is_ok() {
                    self.on_evicted(&uid, cond::reasons::GANG_INCOMPLETE, None, &message, now_ms);
                }
            }
            Some(WorkloadState::Evicting) => self.drive_eviction(wk, now_ms),
            // Admitted, but its ClusterQueue is not known yet (kept out of
            // the engine): its Jobs may run; hold them, and break it once
            // it is restored.
            _ if e.written.status.holds_quota() && e.written.status.admission.is_some() => {
                for k in self.member_keys(wk) {
                    self.hold(&k);
                }
            }
            _ => self.retire_gang(wk),
        }
    }

    /// Deletes the Workload of a gang that lost a Job (its quota released
    /// first, its other Jobs' templates restored); the gang gets a new one
    /// when it is whole again.
    pub(super) fn retire_gang(&mut self, wk: &ObjKey) {
        let Some(uid) = self.retire(wk) else { return };
        tracing::info!(workload = %wk, "a Job of its gang is gone: the Workload is deleted");
        self.delete_retired(wk, Purpose::RetireGang { uid: uid.clone() }, &uid, Vec::new());
    }

    /// Deletes a retired Workload `wk` (uid precondition) in one plan: the
    /// scheduling directives of its objects put back first, then `events`.
    pub(super) fn delete_retired(&mut self, wk: &ObjKey, purpose: Purpose, uid: &str, events: Vec<Step>) {
        let mut steps = self.restoration_steps(wk);
        steps.extend(events);
        steps.push(Step::DeleteWorkload {
            key: wk.clone(),
            uid: uid.to_string(),
        });
        self.outbox.plans.push(Plan { purpose, steps });
    }

    /// Takes Workload `wk` out of the engine (releasing what it held) and
    /// out of eviction, once: its uid, unless it is already being retired.
    pub(super) fn retire(&mut self, wk: &ObjKey) -> Option<String> {
        let e = self.table.workloads.get_mut(wk)?;
        let uid = e.uid.clone();
        if !self.queued.retiring.insert(uid.clone()) {
            return None;
        }
        if e.run.in_engine {
            engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
            e.run.in_engine = false;
        }
        e.run.admitted_at = None;
        self.inflight.evicting.remove(&uid);
        self.inflight.confirming.remove(&uid);
        self.inflight.reshaping.remove(&uid);
        Some(uid)
    }

    /// The retirement of a gang Workload failed: it is read again (and
    /// retired again if it still exists).
    pub(super) fn retire_failed(&mut self, uid: &str) {
        self.queued.retiring.remove(uid);
        if let Some(wk) = self.table.by_uid.get(uid) {
            self.inflight.refetch_workloads.insert(wk.clone());
        }
    }

    /// Tells a gang's Jobs (an Event each, once per change) how many of its
    /// Jobs exist.
    fn tell_waiting(&mut self, gk: &ObjKey, jobs: &[JobRef], have: usize, want: usize) {
        let note = gang::waiting_message(&gk.name, have, want);
        if self.queued.gang_told.get(gk) == Some(&note) {
            return;
        }
        tracing::info!(gang = %gk, have, want, "gang not whole yet");
        self.queued.gang_told.insert(gk.clone(), note.clone());
        let steps: Vec<Step> = jobs
            .iter()
            .filter_map(|k| self.queued.jobs.get(k).map(|j| (k, j)))
            .map(|(k, j)| {
                Step::Event(EventSpec {
                    regarding: reference("batch/v1", "Job", &k.key, Some(&j.uid)),
                    type_: "Normal",
                    reason: cond::reasons::WAITING_FOR_GANG.to_string(),
                    action: "Wait",
                    note: note.clone(),
                })
            })
            .collect();
        if !steps.is_empty() {
            self.outbox.plans.push(Plan {
                purpose: Purpose::Report,
                steps,
            });
        }
    }
}
