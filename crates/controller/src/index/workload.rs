//! Workloads as observed: taken into the index (stale events kept from
//! undoing our writes), put into the engine in the state their status
//! says (restart restore, adoption of another writer's admission,
//! deactivation), held out while their ClusterQueue or namespace does not
//! let them in, and forgotten when deleted.

use sluice_api::Validate;
use sluice_api::v1alpha1::{Workload, conditions as cond};
use sluice_scheduler::{self as eng, WorkloadState};

use super::errors::{IndexError, engine_ok};
use super::explain::{explanation_fp, slim_pending};
use super::status::{self, is_true};
use super::{GangEntry, Index, Kind, WlEntry, key_of, ms};
use crate::plan::{JobRef, ObjKey, Plan, Purpose, Step};
use sluice_convert::adapter;
use sluice_kinds::job;

impl Index {
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
        let observed = wl.status.clone().unwrap_or_default();
        let owner = job::owner_of(wl)
            .map(|(kind, n, u)| (JobRef::new(kind, key.namespace.clone(), n.to_string()), u.to_string()));
        let job_uid = wl
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(job::JOB_UID_LABEL))
            .cloned();
        let gang = sluice_kinds::gang::members_of(wl).map(|members| GangEntry {
            name: wl
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(sluice_api::labels::GANG))
                .cloned()
                .unwrap_or_default(),
            members,
            done: Default::default(),
        });
        if let Some(g) = &gang {
            for (name, uid) in &g.members {
                let jk = JobRef::job(key.namespace.clone(), name.clone());
                // Made: its Jobs no longer need to be held whole.
                self.queued.gang_jobs.remove(&jk);
                if uid.is_some() {
                    self.queued.member_of.insert(jk, key.clone());
                }
            }
        }
        let generation = wl.metadata.generation;
        let mut active = wl.spec.active;
        if self.inflight.deactivating.contains(&uid) {
            if active {
                // Older than our `spec.active: false`: not a reactivation.
                active = false;
            } else {
                self.inflight.deactivating.remove(&uid);
            }
        }
        let queue_name = wl.spec.queue_name.clone();
        let count = wl.spec.pod_sets.first().map(|p| p.count).unwrap_or(1);
        let created_ms = wl.metadata.creation_timestamp.as_ref().map(ms).unwrap_or(now_ms);
        let priority = wl.spec.priority;
        match self.table.workloads.get_mut(&key) {
            Some(e) => {
                // Moved to another queue or reprioritised while it waits:
                // queued again with its new spec.
                if e.in_engine
                    && (e.queue_name != queue_name || e.priority != priority)
                    && matches!(self.engine.workload_state(&uid), Some(WorkloadState::Pending))
                {
                    engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                    e.in_engine = false;
                }
                let reactivated = !e.active && active;
                e.owner = owner;
                e.job_uid = job_uid;
                match (&mut e.gang, gang) {
                    (Some(old), Some(mut new)) => {
                        new.done = std::mem::take(&mut old.done);
                        *old = new;
                    }
                    (slot, new) => *slot = new,
                }
                e.generation = generation;
                e.active = active;
                e.queue_name = queue_name;
                e.priority = priority;
                e.count = count;
                let rv = wl
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok());
                let older = matches!((rv, e.written_rv), (Some(o), Some(w)) if o < w);
                // A Workload read on purpose counts unless a status write of
                // ours is in flight.
                let stale = e.awaiting || (older && !self.table.fetched);
                if !stale {
                    // What an admission that fails goes back to is no longer
                    // needed: the server's answer is here.
                    self.table.prior.remove(&uid);
                }
                if stale {
                    // Older than what we wrote (or are writing): keep ours,
                    // but take what others own (an owner's Finished).
                    status::take_foreign(&mut e.status, &observed);
                } else {
                    e.status = observed;
                    e.slim = false;
                    slim_pending(e);
                }
                if reactivated {
                    // A fresh start: pods-ready evictions count from zero
                    // (persisted with its next status write).
                    e.status.requeue_state = None;
                }
            }
            None => {
                self.table.by_uid.insert(uid.clone(), key.clone());
                self.table.workloads.insert(
                    key.clone(),
                    Box::new(WlEntry {
                        uid,
                        priority,
                        owner,
                        job_uid,
                        gang,
                        generation,
                        active,
                        queue_name,
                        count,
                        created_ms,
                        spec: None,
                        status: observed,
                        pending_fp: None,
                        seq: 0,
                        awaiting: false,
                        written_rv: None,
                        in_engine: false,
                        admitted_at: None,
                        pods_ready_seen: false,
                        pods_ready_unwritten: false,
                        state_out: false,
                        state_due: false,
                        published: None,
                        slim: false,
                    }),
                );
            }
        }
        if let Some(e) = self.table.workloads.get_mut(&key)
            && e.status.pending.is_some()
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
        if e.awaiting || e.state_out {
            return;
        }
        let state = e.status.derive_state(e.active);
        if e.status.state == Some(state) {
            return;
        }
        e.state_out = true;
        e.state_due = true;
        e.status.state = Some(state);
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
            if !e.state_due {
                continue;
            }
            e.state_due = false;
            self.outbox.states_due -= 1;
            let Some(state) = e.status.state else {
                e.state_out = false;
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
        let finished = is_true(&e.status, cond::FINISHED);
        if !finished && self.is_orphan(key) {
            self.finish_orphan(key, now_ms);
            return;
        }
        if e.in_engine {
            // Its owner (a Job, or whoever created it) marked it finished.
            if finished
                && matches!(
                    self.engine.workload_state(&uid),
                    Some(WorkloadState::Admitted | WorkloadState::Evicting)
                )
            {
                engine_ok("finish", &uid, self.engine.finish(&uid));
                self.inflight.evicting.remove(&uid);
                self.follow_finished_state(key);
            } else if finished {
                engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                self.table.workloads.get_mut(key).expect("present").in_engine = false;
                self.follow_finished_state(key);
                return;
            } else if e.status.holds_quota()
                && e.status.admission.is_some()
                && matches!(
                    self.engine.workload_state(&uid),
                    Some(WorkloadState::Pending | WorkloadState::Preempting)
                )
            {
                // Admitted by someone else (a previous leader writing during
                // the hand-over): take its admission as it is, never admit it
                // a second time.
                engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                self.table.workloads.get_mut(key).expect("present").in_engine = false;
                tracing::warn!(workload = %key, "adopting an admission made by another writer");
            } else if !e.active {
                // Deactivated (spec.active: false): evicted if admitted, out
                // of the queue otherwise, until it is activated again.
                match self.engine.workload_state(&uid) {
                    Some(WorkloadState::Admitted) if self.engine.evict(&uid).is_ok() => {
                        let msg = "The workload was deactivated (spec.active: false)";
                        self.on_evicted(&uid, cond::reasons::DEACTIVATED, None, msg, now_ms);
                    }
                    Some(WorkloadState::Pending | WorkloadState::Preempting) => {
                        engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
                        self.table.workloads.get_mut(key).expect("present").in_engine = false;
                    }
                    _ => {}
                }
                return;
            } else {
                return;
            }
        }
        if finished {
            self.follow_finished_state(key);
            return;
        }
        let spec = match wl.map(|w| self.engine_spec(w)) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                self.record(Kind::Workload, key.to_string(), &e);
                return;
            }
            None => match self.table.workloads.get_mut(key).and_then(|e| e.spec.take()) {
                Some(s) => *s,
                None => return,
            },
        };
        // Its Job is not (or no longer) there: once Jobs are listed, it must
        // not take quota (a deleted Job's Workload is about to be garbage
        // collected). Kept aside; its Job's arrival brings it in.
        if let Some(e) = self.table.workloads.get_mut(key)
            && let Some((owner, owner_uid)) = &e.owner
            && self.defs.synced.contains(&Kind::Queued(owner.kind))
            && self.queued.jobs.get(owner).is_none_or(|j| j.uid != *owner_uid)
        {
            e.spec = Some(Box::new(spec));
            return;
        }
        let Some(e) = self.table.workloads.get(key) else { return };
        let holds = e.status.holds_quota() && e.status.admission.is_some();
        let evicted = is_true(&e.status, cond::EVICTED);
        let admitted_at = e
            .status
            .condition(cond::QUOTA_RESERVED)
            .map(|c| ms(&c.last_transition_time))
            .unwrap_or(now_ms);
        let result = if holds {
            let adm = e.status.admission.as_ref().expect("checked");
            match adapter::admission(adm) {
                Err(err) => Err(IndexError::InvalidAdmission(err)),
                Ok(assignments) => self
                    .engine
                    .restore_admitted(spec.clone(), &adm.cluster_queue, &assignments, admitted_at)
                    .map_err(IndexError::RestoreFailed),
            }
        } else if e.active
            && let Some(why) = self.unselected_by(&key.namespace, &e.queue_name)
        {
            self.hold_unselected(key, spec, &why, now_ms);
            return;
        } else if e.active {
            self.table.not_selected.remove(key);
            // A requeue backoff still running (found after a restart) is kept.
            let backoff = status::backoff_until(&e.status, now_ms);
            match backoff {
                Some(t) => self.engine.add_workload_backing_off(spec.clone(), t),
                None => self.engine.add_workload(spec.clone()),
            }
            .map_err(IndexError::Refused)
        } else {
            return;
        };
        match result {
            Ok(()) => {
                self.table.unrestored.remove(key);
                self.clear_error(Kind::Workload, &key.to_string());
                let e = self.table.workloads.get_mut(key).expect("present");
                e.in_engine = true;
                if holds {
                    e.admitted_at = Some(admitted_at);
                    // Its pods were seen ready before a restart: no deadline.
                    e.pods_ready_seen = is_true(&e.status, cond::PODS_READY);
                    // Its pods may be known already: told to the engine.
                    self.pods_changed(key);
                    if evicted {
                        engine_ok("evict", &uid, self.engine.evict(&uid));
                        self.inflight.evicting.insert(uid);
                    }
                }
            }
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
        if e.pending_fp == Some(fp) {
            return;
        }
        status::namespace_not_selected(&mut e.status, why, e.active, now_ms, e.generation);
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
        if e.state_due {
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
        if e.in_engine {
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
