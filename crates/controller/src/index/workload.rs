//! Workloads as observed: taken into the index (stale events kept from
//! undoing our writes), put into the engine in the state their status
//! says (restart restore, adoption of another writer's admission,
//! deactivation), held out while their ClusterQueue or namespace does not
//! let them in, and forgotten when deleted.

use std::collections::{BTreeSet, HashMap};
use std::ops::ControlFlow;

use sluice_api::Validate;
use sluice_api::v1alpha1::{Admission, Workload, WorkloadStatus, conditions as cond};
use sluice_scheduler::{self as eng, Engine, WorkloadState};

use super::entry::{Observed, RunState, Written};
use super::errors::{IndexError, engine_ok};
use super::explain::{explanation_fp, slim_pending};
use super::parts::Queued;
use super::status::{self, is_true};
use super::{GangEntry, Index, Kind, WlEntry, key_of, ms};
use crate::plan::{JobRef, ObjKey, Plan, Purpose, Step};
use sluice_convert::adapter;
use sluice_kinds::job;

impl Index {
    /// Takes a Workload as observed: the entry is made or brought up to
    /// date (its spec fields, and its status unless the event is older
    /// than our own writes), then the workload is put into the engine in
    /// the state its status says and its owner is told.
    pub fn apply_workload(&mut self, wl: impl std::borrow::Borrow<Workload>, now_ms: i64) {
        let wl: &Workload = wl.borrow();
        let Some(key) = key_of(wl.metadata.namespace.as_deref(), wl.metadata.name.as_deref()) else {
            return;
        };
        let Some(uid) = wl.metadata.uid.clone() else { return };
        self.inflight.creating.remove(&key);
        if let Some(old) = self.table.workloads.get(&key)
            && old.uid != uid
        {
            // Deleted and recreated under the same name while we looked away.
            self.delete_workload(&key, now_ms);
        }
        let mut seen = Seen::read(wl, &key, now_ms);
        if let Some(g) = &seen.gang {
            note_gang_made(&mut self.queued, &key, g);
        }
        seen.active = settle_deactivation(&mut self.inflight.deactivating, &uid, seen.active);
        match self.table.workloads.get_mut(&key) {
            Some(e) => {
                requeue_if_moved(&mut self.engine, e, &seen);
                take_seen(e, seen, self.table.fetched, &mut self.table.prior);
            }
            None => {
                self.table.by_uid.insert(uid.clone(), key.clone());
                self.table.workloads.insert(key.clone(), Box::new(seen.into_entry(uid)));
            }
        }
        if let Some(e) = self.table.workloads.get_mut(&key)
            && e.written.status.pending.is_some()
        {
            slim_pending(e);
        }
        self.sync_workload(&key, Some(wl), now_ms);
        self.reconcile_owner(&key, now_ms);
        if let Some(e) = self.table.workloads.get_mut(&key) {
            super::finish::slim_finished(e);
        }
    }

    /// `status.state` (a printer column) follows the conditions: a
    /// workload its owner marked `Finished` gets that state written, alone
    /// (a bookkeeping write: its quota is released already), once at a
    /// time, and again after a failure (the Workload is read back). The
    /// write is marked due on the entry and handed out by
    /// [`Index::take_finished_states`].
    fn follow_finished_state(&mut self, key: &ObjKey) {
        let Some(e) = self.table.workloads.get_mut(key) else {
            return;
        };
        // A whole-status write of ours in flight writes the state as well;
        // its own watch event brings it back here if it did not.
        if e.written.awaiting || e.written.state_out {
            return;
        }
        let state = e.written.status.derive_state(e.observed.active);
        if e.written.status.state == Some(state) {
            return;
        }
        e.written.state_out = true;
        e.written.state_due = true;
        e.written.status.state = Some(state);
        self.outbox.states_due += 1;
    }

    /// The `status.state` writes that are due, as plans: at most
    /// `explanations_per_cycle` out at once (handed out and not yet
    /// answered or superseded). Thousands of finished workloads thus wait
    /// as a flag on their entry, not as queued plans, and the bookkeeping
    /// lane writes them as its budget allows.
    pub fn take_finished_states(&mut self) -> Vec<Plan> {
        let room = self
            .config
            .explanations_per_cycle
            .saturating_sub(self.outbox.states_out);
        if self.outbox.states_due == 0 || room == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (key, e) in self.table.workloads.iter_mut() {
            if out.len() >= room || self.outbox.states_due == 0 {
                break;
            }
            if !e.written.state_due {
                continue;
            }
            e.written.state_due = false;
            self.outbox.states_due -= 1;
            let Some(state) = e.written.status.state else {
                e.written.state_out = false;
                continue;
            };
            out.push(Plan {
                purpose: Purpose::Finish { uid: e.uid.clone() },
                steps: vec![Step::PatchWorkloadState {
                    key: key.clone(),
                    uid: e.uid.clone(),
                    state,
                }],
            });
        }
        self.outbox.states_out += out.len();
        out
    }

    pub(super) fn engine_spec(&self, wl: &Workload) -> Result<eng::WorkloadSpec, IndexError> {
        wl.check()?;
        let prio = adapter::priority(wl, |n| self.defs.workload_classes.get(n).copied());
        let created = wl.metadata.creation_timestamp.as_ref().map(ms).unwrap_or(0);
        Ok(adapter::workload(wl, prio, created)?)
    }

    /// Puts a workload into the engine in the state its status says. `wl`
    /// is the object when it was just observed; without it, the spec kept
    /// while it waited is used.
    pub(super) fn sync_workload(&mut self, key: &ObjKey, wl: Option<&Workload>, now_ms: i64) {
        let Some(e) = self.table.workloads.get(key) else { return };
        let uid = e.uid.clone();
        let finished = is_true(&e.written.status, cond::FINISHED);
        if !finished && self.is_orphan(key) {
            self.finish_orphan(key, now_ms);
            return;
        }
        if e.run.in_engine && self.follow_status_in_engine(key, &uid, finished, now_ms).is_break() {
            return;
        }
        if finished {
            self.follow_finished_state(key);
            return;
        }
        let Some(spec) = self.spec_to_sync(key, wl) else { return };
        if self.owner_missing(key) {
            // Kept aside; its Job's arrival brings it in.
            if let Some(e) = self.table.workloads.get_mut(key) {
                e.spec = Some(Box::new(spec));
            }
            return;
        }
        let Some(e) = self.table.workloads.get(key) else { return };
        let holds = e.written.status.holds_quota() && e.written.status.admission.is_some();
        let admitted_at = e
            .written
            .status
            .condition(cond::QUOTA_RESERVED)
            .map(|c| ms(&c.last_transition_time))
            .unwrap_or(now_ms);
        let result = if holds {
            let adm = e.written.status.admission.as_ref().expect("checked");
            restore(&mut self.engine, spec.clone(), adm, admitted_at)
        } else if !e.observed.active {
            return;
        } else if let Some(why) = self.unselected_by(&key.namespace, &e.observed.queue_name) {
            self.hold_unselected(key, spec, &why, now_ms);
            return;
        } else {
            self.table.not_selected.remove(key);
            queue_pending(&mut self.engine, &e.written.status, spec.clone(), now_ms)
        };
        match result {
            Ok(()) => self.entered_engine(key, holds.then_some(admitted_at)),
            Err(err) => {
                if holds {
                    self.table.unrestored.insert(key.clone());
                    if let Some(e) = self.table.workloads.get_mut(key) {
                        e.spec = Some(Box::new(spec));
                    }
                }
                self.record(Kind::Workload, key.to_string(), &err);
            }
        }
    }

    /// A workload already in the engine, whose status changed: finished by
    /// its owner, admitted by another writer, or deactivated. Goes on
    /// (`Continue`) when it is to be put into the engine again, or
    /// follows its finished state.
    fn follow_status_in_engine(&mut self, key: &ObjKey, uid: &str, finished: bool, now_ms: i64) -> ControlFlow<()> {
        let Some(e) = self.table.workloads.get(key) else {
            return ControlFlow::Break(());
        };
        let state = self.engine.workload_state(uid);
        if finished {
            // Its owner (a Job, or whoever created it) marked it finished.
            if matches!(state, Some(WorkloadState::Admitted | WorkloadState::Evicting)) {
                engine_ok("finish", uid, self.engine.finish(uid));
                self.inflight.evicting.remove(uid);
                self.follow_finished_state(key);
                return ControlFlow::Continue(());
            }
            self.take_out_of_engine(key, uid);
            self.follow_finished_state(key);
            return ControlFlow::Break(());
        }
        let pending = matches!(state, Some(WorkloadState::Pending | WorkloadState::Preempting));
        if e.written.status.holds_quota() && e.written.status.admission.is_some() && pending {
            // Admitted by someone else (a previous leader writing during
            // the hand-over): take its admission as it is, never admit it
            // a second time.
            self.take_out_of_engine(key, uid);
            tracing::warn!(workload = %key, "adopting an admission made by another writer");
            return ControlFlow::Continue(());
        }
        if !e.observed.active {
            // Deactivated (spec.active: false): evicted if admitted, out
            // of the queue otherwise, until it is activated again.
            if state == Some(WorkloadState::Admitted) {
                if self.engine.evict(uid).is_ok() {
                    let msg = "The workload was deactivated (spec.active: false)";
                    self.on_evicted(uid, cond::reasons::DEACTIVATED, None, msg, now_ms);
                }
            } else if pending {
                self.take_out_of_engine(key, uid);
            }
        }
        ControlFlow::Break(())
    }

    /// Out of the engine, its entry kept (put back in by a later sync).
    fn take_out_of_engine(&mut self, key: &ObjKey, uid: &str) {
        engine_ok("remove_workload", uid, self.engine.remove_workload(uid));
        self.table.workloads.get_mut(key).expect("present").run.in_engine = false;
    }

    /// The engine's spec of the workload: from the object just observed
    /// (an invalid one is recorded as an error), or the one kept while it
    /// waited.
    fn spec_to_sync(&mut self, key: &ObjKey, wl: Option<&Workload>) -> Option<eng::WorkloadSpec> {
        match wl.map(|w| self.engine_spec(w)) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                self.record(Kind::Workload, key.to_string(), &e);
                None
            }
            None => self
                .table
                .workloads
                .get_mut(key)
                .and_then(|e| e.spec.take())
                .map(|s| *s),
        }
    }

    /// Its Job is not (or no longer) there: once Jobs are listed, it must
    /// not take quota (a deleted Job's Workload is about to be garbage
    /// collected).
    fn owner_missing(&self, key: &ObjKey) -> bool {
        self.table.workloads.get(key).is_some_and(|e| {
            e.owner.as_ref().is_some_and(|(owner, owner_uid)| {
                self.defs.synced.contains(&Kind::Queued(owner.kind))
                    && self.queued.jobs.get(owner).is_none_or(|j| j.uid != *owner_uid)
            })
        })
    }

    /// Put into the engine: its error cleared; if it holds quota
    /// (`admitted_at`), what is known of its pods and eviction follows.
    fn entered_engine(&mut self, key: &ObjKey, admitted_at: Option<i64>) {
        self.table.unrestored.remove(key);
        self.clear_error(Kind::Workload, &key.to_string());
        let e = self.table.workloads.get_mut(key).expect("present");
        e.run.in_engine = true;
        let Some(at) = admitted_at else { return };
        e.run.admitted_at = Some(at);
        // Its pods were seen ready before a restart: no deadline.
        e.run.pods_ready_seen = is_true(&e.written.status, cond::PODS_READY);
        let evicted = is_true(&e.written.status, cond::EVICTED);
        let uid = e.uid.clone();
        // Its pods may be known already: told to the engine.
        self.pods_changed(key);
        if evicted {
            engine_ok("evict", &uid, self.engine.evict(&uid));
            self.inflight.evicting.insert(uid);
        }
    }

    /// Keeps a pending workload out of the engine because its namespace is
    /// not selected (`why`: the reason users read), and says so once: in
    /// its status and in a Warning Event on it and its Job(s).
    pub(super) fn hold_unselected(&mut self, key: &ObjKey, spec: eng::WorkloadSpec, why: &str, now_ms: i64) {
        self.table.not_selected.insert(key.clone());
        let Some(e) = self.table.workloads.get_mut(key) else {
            return;
        };
        e.spec = Some(Box::new(spec));
        let fp = explanation_fp(cond::reasons::NAMESPACE_NOT_SELECTED, std::iter::empty());
        if e.written.pending_fp == Some(fp) {
            return;
        }
        status::namespace_not_selected(
            &mut e.written.status,
            why,
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        let step = e.status_write(key);
        slim_pending(e);
        let uid = e.uid.clone();
        let mut steps = vec![step];
        steps.extend(self.events(key, "Warning", cond::reasons::NAMESPACE_NOT_SELECTED, "Hold", why));
        self.outbox.plans.push(Plan {
            purpose: Purpose::Pending { uid },
            steps,
        });
    }

    pub(super) fn retry_unrestored(&mut self) {
        let keys: Vec<ObjKey> = self.table.unrestored.iter().cloned().collect();
        for k in keys {
            // Time only matters for fresh admissions, which these are not.
            self.sync_workload(&k, None, 0);
        }
    }

    pub fn delete_workload(&mut self, key: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.remove(key) else {
            return;
        };
        if e.written.state_due {
            self.outbox.states_due -= 1;
        }
        self.table.not_selected.remove(key);
        self.table.by_uid.remove(&e.uid);
        self.table.unrestored.remove(key);
        self.inflight.evicting.remove(&e.uid);
        self.inflight.confirming.remove(&e.uid);
        self.inflight.deactivating.remove(&e.uid);
        self.inflight.deactivate_retry.remove(&e.uid);
        self.table.prior.remove(&e.uid);
        self.inflight.refetch_workloads.remove(key);
        self.clear_error(Kind::Workload, &key.to_string());
        if e.run.in_engine {
            engine_ok("remove_workload", &e.uid, self.engine.remove_workload(&e.uid));
        }
        self.queued.retiring.remove(&e.uid);
        self.inflight.reshaping.remove(&e.uid);
        self.pods_over.remove(&e.uid);
        // The object (or gang) still wants a Workload: recreate it.
        if let Some(g) = &e.gang {
            for (name, _) in &g.members {
                let jk = JobRef::job(key.namespace.clone(), name.clone());
                if self.queued.member_of.get(&jk) == Some(key) {
                    self.queued.member_of.remove(&jk);
                }
            }
            let gk = ObjKey::new(key.namespace.clone(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
            // Members relabelled meanwhile go where their labels say.
            for (name, _) in &g.members {
                self.reconcile_job(&JobRef::job(key.namespace.clone(), name.clone()), now_ms);
            }
        } else if let Some((owner, _)) = &e.owner {
            let jk = owner.clone();
            self.reconcile_job(&jk, now_ms);
        }
    }

    /// Workloads to read again from the API (after a failed status write).
    pub fn take_workload_refetch(&mut self) -> Vec<ObjKey> {
        std::mem::take(&mut self.inflight.refetch_workloads)
            .into_iter()
            .collect()
    }

    /// A Workload read from the API on purpose: taken as it is, unless a
    /// newer status write of ours is still in flight.
    pub fn apply_fetched_workload(&mut self, wl: &Workload, now_ms: i64) {
        self.table.fetched = true;
        self.apply_workload(wl, now_ms);
        self.table.fetched = false;
    }
}

/// The fields of an observed Workload that its entry keeps.
struct Seen {
    owner: Option<(JobRef, String)>,
    job_uid: Option<String>,
    gang: Option<GangEntry>,
    generation: Option<i64>,
    /// `spec.active`, or what it is taken as
    /// ([`settle_deactivation`]).
    active: bool,
    queue_name: String,
    priority: Option<i32>,
    count: i32,
    created_ms: i64,
    status: WorkloadStatus,
    /// Its resourceVersion, as a number.
    rv: Option<u64>,
}

impl Seen {
    fn read(wl: &Workload, key: &ObjKey, now_ms: i64) -> Self {
        let labels = wl.metadata.labels.as_ref();
        let gang = sluice_kinds::gang::members_of(wl).map(|members| GangEntry {
            name: labels
                .and_then(|l| l.get(sluice_api::labels::GANG))
                .cloned()
                .unwrap_or_default(),
            members,
            done: Default::default(),
        });
        Seen {
            owner: job::owner_of(wl)
                .map(|(kind, n, u)| (JobRef::new(kind, key.namespace.clone(), n.to_string()), u.to_string())),
            job_uid: labels.and_then(|l| l.get(job::JOB_UID_LABEL)).cloned(),
            gang,
            generation: wl.metadata.generation,
            active: wl.spec.active,
            queue_name: wl.spec.queue_name.clone(),
            priority: wl.spec.priority,
            count: wl.spec.pod_sets.first().map(|p| p.count).unwrap_or(1),
            created_ms: wl.metadata.creation_timestamp.as_ref().map(ms).unwrap_or(now_ms),
            status: wl.status.clone().unwrap_or_default(),
            rv: wl
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok()),
        }
    }

    /// The entry of a Workload seen for the first time.
    fn into_entry(self, uid: String) -> WlEntry {
        WlEntry {
            uid,
            owner: self.owner,
            job_uid: self.job_uid,
            gang: self.gang,
            observed: Observed {
                generation: self.generation,
                active: self.active,
                queue_name: self.queue_name,
                priority: self.priority,
                count: self.count,
                created_ms: self.created_ms,
            },
            spec: None,
            written: Written {
                status: self.status,
                ..Written::default()
            },
            run: RunState::default(),
        }
    }
}

/// A gang's Workload is made: its Jobs no longer need to be held whole,
/// and those it was made from are its members.
fn note_gang_made(queued: &mut Queued, key: &ObjKey, gang: &GangEntry) {
    for (name, uid) in &gang.members {
        let jk = JobRef::job(key.namespace.clone(), name.clone());
        queued.gang_jobs.remove(&jk);
        if uid.is_some() {
            queued.member_of.insert(jk, key.clone());
        }
    }
}

/// `spec.active` as observed, unless we deactivated the workload and this
/// event is older than our `spec.active: false` (not a reactivation).
/// Once that write is seen, the deactivation is no longer awaited.
fn settle_deactivation(deactivating: &mut BTreeSet<String>, uid: &str, active: bool) -> bool {
    if !deactivating.contains(uid) {
        return active;
    }
    if !active {
        deactivating.remove(uid);
    }
    false
}

/// Moved to another queue or reprioritised while it waits: out of the
/// engine, to be queued again with its new spec.
fn requeue_if_moved(engine: &mut Engine, e: &mut WlEntry, seen: &Seen) {
    if e.run.in_engine
        && (e.observed.queue_name != seen.queue_name || e.observed.priority != seen.priority)
        && matches!(engine.workload_state(&e.uid), Some(WorkloadState::Pending))
    {
        engine_ok("remove_workload", &e.uid, engine.remove_workload(&e.uid));
        e.run.in_engine = false;
    }
}

/// An entry brought up to date with what was observed: its spec fields
/// always, its status as [`take_status`] decides.
fn take_seen(e: &mut WlEntry, seen: Seen, fetched: bool, prior: &mut HashMap<String, WorkloadStatus>) {
    let reactivated = !e.observed.active && seen.active;
    e.owner = seen.owner;
    e.job_uid = seen.job_uid;
    match (&mut e.gang, seen.gang) {
        (Some(old), Some(mut new)) => {
            new.done = std::mem::take(&mut old.done);
            *old = new;
        }
        (slot, new) => *slot = new,
    }
    e.observed.generation = seen.generation;
    e.observed.active = seen.active;
    e.observed.queue_name = seen.queue_name;
    e.observed.priority = seen.priority;
    e.observed.count = seen.count;
    take_status(e, seen.status, seen.rv, fetched, prior);
    if reactivated {
        // A fresh start: pods-ready evictions count from zero
        // (persisted with its next status write).
        e.written.status.requeue_state = None;
    }
}

/// The observed status replaces ours unless the event is stale: older
/// than what we wrote, or a write of ours is in flight (a Workload read on
/// purpose, `fetched`, counts unless a write is in flight).
fn take_status(
    e: &mut WlEntry,
    observed: WorkloadStatus,
    rv: Option<u64>,
    fetched: bool,
    prior: &mut HashMap<String, WorkloadStatus>,
) {
    let older = matches!((rv, e.written.written_rv), (Some(o), Some(w)) if o < w);
    let stale = e.written.awaiting || (older && !fetched);
    if stale {
        // Older than what we wrote (or are writing): keep ours, but take
        // what others own (an owner's Finished).
        status::take_foreign(&mut e.written.status, &observed);
        return;
    }
    // What an admission that fails goes back to is no longer needed: the
    // server's answer is here.
    prior.remove(&e.uid);
    e.written.status = observed;
    e.written.slim = false;
    slim_pending(e);
}

/// An admitted workload back in the engine with the admission its status
/// holds (after a restart, or made by another writer).
fn restore(engine: &mut Engine, spec: eng::WorkloadSpec, adm: &Admission, admitted_at: i64) -> Result<(), IndexError> {
    let assignments = adapter::admission(adm).map_err(IndexError::InvalidAdmission)?;
    let uid = spec.uid.clone();
    engine
        .restore_admitted(spec, &adm.cluster_queue, &assignments, admitted_at)
        .map_err(IndexError::RestoreFailed)?;
    if let Some((queue, head, due)) = adapter::restored_backfill(adm)
        && let Err(err) = engine.restore_backfill(&uid, queue, head, due)
    {
        // Only the overrun check is lost; the admission stands.
        tracing::warn!(workload = %uid, %err, "its backfill record names an unknown ClusterQueue; not held to it");
    }
    Ok(())
}

/// A pending workload queued; a requeue backoff still running (found
/// after a restart) is kept.
fn queue_pending(
    engine: &mut Engine,
    status: &WorkloadStatus,
    spec: eng::WorkloadSpec,
    now_ms: i64,
) -> Result<(), IndexError> {
    match status::backoff_until(status, now_ms) {
        Some(t) => engine.add_workload_backing_off(spec, t),
        None => engine.add_workload(spec),
    }
    .map_err(IndexError::Refused)
}
