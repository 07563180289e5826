//! Jobs in the index (every kind Sluice queues: a batch/v1 Job, a
//! JobSet): the level-triggered object ↔ Workload reconcile (create the
//! Workload, hold an object that runs without admission, start an admitted
//! one on its flavors, finish the Workload when its objects finish).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use sluice_api::v1alpha1::{ResourceFlavor, conditions as cond};
use sluice_scheduler::{self as eng, WorkloadState};

use super::errors::engine_ok;
use super::status::is_true;
use super::{Index, Kind};
use crate::plan::{JobRef, ObjKey, Plan, Purpose, Step};
use sluice_kinds::{self as kinds, Full, JobKind};
use sluice_kinds::{gang, job};

impl Kind {
    /// The queued kind this is, if it is one.
    pub fn queued(self) -> Option<JobKind> {
        match self {
            Kind::Queued(k) => Some(k),
            _ => None,
        }
    }
}

impl Index {
    /// A Job as observed (the full object: its Workload may be created from it).
    pub fn apply_job(&mut self, j: impl std::borrow::Borrow<Job>, now_ms: i64) {
        let j: &Job = j.borrow();
        let labelled = self.labelled_job(j);
        let j = labelled.as_ref().unwrap_or(j);
        let mut view = job::JobView::of(j, self.config.kueue_compat);
        view.queued_by_namespace = labelled.is_some();
        self.apply_job_view(view, Some(Full::Job(j)), now_ms);
    }

    /// An object of `kind` (a JobSet, a Kubeflow job) as observed (its
    /// JSON); a malformed one is recorded and skipped.
    pub fn apply_object(&mut self, kind: JobKind, obj: &serde_json::Value, now_ms: i64) {
        let ik = Kind::Queued(kind);
        let labelled = self.labelled_object(kind, obj);
        let obj = labelled.as_ref().unwrap_or(obj);
        match kinds::view(kind, obj, self.config.kueue_compat) {
            Ok(mut view) => {
                view.queued_by_namespace = labelled.is_some();
                let key = format!("{}/{}", view.namespace, view.name);
                // It was malformed before: no longer.
                if self
                    .defs
                    .errors
                    .get(&(ik, key.clone()))
                    .is_some_and(|e| e.reason.starts_with("job_"))
                {
                    self.clear_error(ik, &key);
                }
                self.apply_job_view(view, Some(Full::Dynamic(kind, obj)), now_ms)
            }
            Err(err) => {
                let key = format!(
                    "{}/{}",
                    obj["metadata"]["namespace"].as_str().unwrap_or_default(),
                    obj["metadata"]["name"].as_str().unwrap_or_default()
                );
                self.record_error(ik, key, err.metric_label(), err.to_string());
            }
        }
    }

    /// An object known only by its view (a new leader building its index
    /// from the cache). If its Workload must be created, it is listed in
    /// [`Index::take_refetch`] so that the caller reads it again.
    pub fn apply_job_view(&mut self, view: job::JobView, full: Option<Full<'_>>, now_ms: i64) {
        let key = JobRef::new(view.kind, view.namespace.clone(), view.name.clone());
        if view.name.is_empty() {
            return;
        }
        let mut view = view;
        self.queue_by_namespace(&mut view);
        if view.suspended {
            self.inflight.suspending.remove(&key);
        } else {
            self.inflight.starting.remove(&key);
        }
        self.queued.refetch.remove(&key);
        let wk = self.workload_key_of(&key, &view);
        let full_job = match full {
            Some(Full::Job(j)) => Some(j),
            _ => None,
        };
        let left = self.track_gang(&key, &view, full_job, &wk);
        if view.pods_selector.is_none()
            && let Some(old) = self.queued.jobs.get(&key).filter(|o| o.uid == view.uid)
        {
            // The last RayCluster name seen: its pods outlive the status.
            view.pods_selector = old.pods_selector.clone();
        }
        self.warn_bad_expected_runtime(&key, &view);
        self.note_pod_owner(&key, Some(&view));
        self.queued.jobs.insert(key.clone(), view);
        if let Some(old) = left {
            self.reconcile_gang(&old, now_ms);
        }
        // Its Workload, seen first and kept aside, can come in now.
        if self
            .table
            .workloads
            .get(&wk)
            .is_some_and(|e| !e.run.in_engine && e.spec.is_some())
        {
            self.sync_workload(&wk, None, now_ms);
        }
        self.reconcile(&key, full, now_ms);
    }

    /// The Workload an object belongs to: a gang's that has it as a member
    /// (whatever its labels say now), its own when it has one, else the
    /// one its labels ask for.
    pub(super) fn workload_key_of(&self, key: &JobRef, view: &job::JobView) -> ObjKey {
        if let Some(wk) = self.queued.member_of.get(key) {
            return wk.clone();
        }
        let own = ObjKey::new(key.namespace(), key.kind.workload_name(key.name()));
        if key.kind != JobKind::Job || self.owns(&own, &view.uid) {
            return own;
        }
        ObjKey::new(key.namespace(), gang::workload_name_of(key.name(), view.gang.as_ref()))
    }

    /// Whether Workload `wk` is the unfinished own Workload of the object
    /// with uid `uid`.
    pub(super) fn owns(&self, wk: &ObjKey, uid: &str) -> bool {
        self.table.workloads.get(wk).is_some_and(|e| {
            e.owner.as_ref().is_some_and(|(_, u)| u == uid) && !is_true(&e.written.status, cond::FINISHED)
        })
    }

    /// Objects to read again from the API server and pass to
    /// [`Index::apply_job`] or [`Index::apply_object`].
    pub fn take_refetch(&mut self) -> Vec<JobRef> {
        std::mem::take(&mut self.queued.refetch).into_iter().collect()
    }

    pub fn delete_job(&mut self, key: &JobRef, now_ms: i64) {
        let view = self.queued.jobs.remove(key);
        self.note_pod_owner(key, None);
        self.queued.refetch.remove(key);
        self.stop_reading(key);
        self.stop_waiting_for_class(key);
        self.inflight.suspending.remove(key);
        self.inflight.starting.remove(key);
        self.clear_error(Kind::Queued(key.kind), &key.to_string());
        let gang = view.as_ref().and_then(|v| v.gang.as_ref());
        if let Some(g) = gang {
            let gk = ObjKey::new(key.namespace(), g.name.clone());
            self.leave_gang(&gk, key);
        }
        if let Some(wk) = self.queued.member_of.get(key).cloned() {
            self.reconcile_owner(&wk, now_ms);
            if let Some(g) = gang {
                self.reconcile_gang(&ObjKey::new(key.namespace(), g.name.clone()), now_ms);
            }
            return;
        }
        let wk = ObjKey::new(key.namespace(), key.kind.workload_name(key.name()));
        // The Workload goes with its owner (garbage collector) and is
        // forgotten when its deletion is observed. Until then the API shows
        // it: quota it holds is released through its Finished write, queued
        // before any admission that reuses it; a waiting one just leaves
        // the queue.
        if let Some(e) = self.table.workloads.get_mut(&wk)
            && e.run.in_engine
            && view
                .as_ref()
                .is_some_and(|v| e.owner.as_ref().is_some_and(|(_, u)| *u == v.uid))
        {
            if matches!(
                self.engine.workload_state(&e.uid),
                Some(WorkloadState::Admitted | WorkloadState::Evicting)
            ) {
                self.finish_with(&wk, cond::reasons::JOB_DELETED, "The Job was deleted", now_ms);
            } else {
                engine_ok("remove_workload", &e.uid, self.engine.remove_workload(&e.uid));
                e.run.in_engine = false;
                self.inflight.evicting.remove(&e.uid);
            }
        }
        if let Some(g) = gang {
            self.reconcile_gang(&ObjKey::new(key.namespace(), g.name.clone()), now_ms);
        }
    }

    pub(super) fn reconcile_job(&mut self, key: &JobRef, now_ms: i64) {
        self.reconcile(key, None, now_ms);
    }

    /// Level-triggered: what an object needs given its Workload's state.
    pub(super) fn reconcile(&mut self, key: &JobRef, full: Option<Full<'_>>, now_ms: i64) {
        let Some(j) = self.queued.jobs.get(key) else { return };
        if self.queued_with_owner(j) {
            // Made by a queued object (a JobSet's child, an MPIJob's
            // launcher): that object is what is queued.
            return;
        }
        if let Some(wk) = self.queued.member_of.get(key).cloned() {
            self.reconcile_member(key, &wk, full, now_ms);
            return;
        }
        let job_uid = j.uid.clone();
        let wk = ObjKey::new(key.namespace(), key.kind.workload_name(key.name()));
        let owned = self
            .table
            .workloads
            .get(&wk)
            .is_some_and(|e| e.owner.as_ref().is_some_and(|(_, u)| *u == job_uid));
        if let Some(g) = &j.gang
            && !(owned && self.owns(&wk, &job_uid))
        {
            let gk = ObjKey::new(key.namespace(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
            return;
        }
        if j.queue.is_none() {
            return;
        }
        if owned {
            self.reconcile_owned(key, &wk, full, now_ms);
            return;
        }
        if self.table.workloads.contains_key(&wk) {
            self.record_error(
                Kind::Queued(key.kind),
                key.to_string(),
                "WorkloadNameTaken",
                format!("Workload {wk} exists but is not owned by this {}", key.kind.kind()),
            );
            return;
        }
        if j.finished.is_none() {
            self.create_workload(key, wk, full);
        }
    }

    /// A gang member: reshaped with its gang, or the gang reconciled (a
    /// member stays one until the gang's Workload goes).
    fn reconcile_member(&mut self, key: &JobRef, wk: &ObjKey, full: Option<Full<'_>>, now_ms: i64) {
        if self.reshape_member(wk, key, full, now_ms) {
            return;
        }
        if let Some(g) = self.table.workloads.get(wk).and_then(|e| e.gang.as_ref()) {
            let gk = ObjKey::new(key.namespace(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
        }
    }

    /// An object with its own Workload: reshaped if it grew, else driven
    /// by its Workload's state (a gang label added since is reported).
    fn reconcile_owned(&mut self, key: &JobRef, wk: &ObjKey, full: Option<Full<'_>>, now_ms: i64) {
        if self.reshape(wk, key, full, now_ms) {
            return;
        }
        let Some(j) = self.queued.jobs.get(key) else { return };
        if j.gang.is_some() {
            // Labelled into a gang after it was queued on its own.
            self.record_error(
                Kind::Queued(key.kind),
                key.to_string(),
                "GangConflict",
                format!(
                    "queued on its own as Workload {wk} before it was labelled into a gang: it stays so until it finishes; gang labels count when a Job is created"
                ),
            );
        }
        self.drive(wk, now_ms);
    }

    /// No Workload yet: holds the object if it runs, and plans its
    /// Workload (read the whole object first when only its view is held).
    fn create_workload(&mut self, key: &JobRef, wk: ObjKey, full: Option<Full<'_>>) {
        self.hold(key);
        if self.inflight.creating.contains(&wk) {
            return;
        }
        let Some(full) = full else {
            self.queued.refetch.insert(key.clone());
            return;
        };
        let Ok(referent) = self.resolve(key, full) else { return };
        if !self.class_known(Kind::Queued(key.kind), key, full.priority_class_label().as_deref()) {
            return;
        }
        let full = match (full, referent.as_deref()) {
            (Full::Dynamic(kind, obj), Some(r)) => Full::Resolved(kind, obj, r),
            _ => full,
        };
        let wcs = &self.defs.workload_classes;
        let pcs = &self.defs.pod_classes;
        match full.workload(
            self.config.kueue_compat,
            |n| wcs.get(n).copied(),
            |n| pcs.get(n).copied(),
        ) {
            Ok(wl) => {
                self.inflight.creating.insert(wk);
                let mut steps = vec![Step::ApplyWorkload(Box::new(wl))];
                if let Some(j) = self.queued.jobs.get(key).filter(|j| j.queued_by_namespace) {
                    let note = super::default_queue::queued_by_namespace_note(key.kind, key.namespace());
                    steps.push(self.object_event(key, &j.uid, "Normal", "QueuedByNamespace", "Queue", note));
                }
                self.outbox.plans.push(Plan {
                    purpose: Purpose::CreateWorkload,
                    steps,
                });
            }
            // Held with no replicas asked for: nothing to queue until some are.
            Err(kinds::job::JobError::NothingAsked { .. }) => {}
            Err(err) => {
                self.record_error(
                    Kind::Queued(key.kind),
                    key.to_string(),
                    err.metric_label(),
                    err.to_string(),
                );
            }
        }
    }

    /// Suspends a queued object that runs without admission (once per
    /// observed state).
    pub(super) fn hold(&mut self, key: &JobRef) {
        let Some(j) = self.queued.jobs.get(key) else { return };
        if j.suspended || j.finished.is_some() || !self.inflight.suspending.insert(key.clone()) {
            return;
        }
        let patch = kinds::suspend_patch(j);
        self.outbox.plans.push(Plan {
            purpose: Purpose::SuspendJob,
            steps: vec![Step::PatchJob {
                job: key.clone(),
                patch,
            }],
        });
    }

    /// Level-triggered: what the Jobs of a Workload (its own Job, or a
    /// gang's members) need given its state: finished with them, or as
    /// the engine has it (admitted, evicting, waiting).
    pub(super) fn drive(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        let count = e.observed.count;
        let gang = e.gang.as_ref().map(|g| {
            let names: Vec<String> = g.members.iter().map(|(n, _)| n.clone()).collect();
            (names, g.done.clone())
        });
        let state = if e.run.in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        let finished_status = is_true(&e.written.status, cond::FINISHED);
        let unrestored = self.table.unrestored.contains(wk);
        let members = self.member_keys(wk);
        let views: Vec<&job::JobView> = members.iter().filter_map(|k| self.queued.jobs.get(k)).collect();
        if views.is_empty() {
            return;
        }
        if let Some(ok) = Self::jobs_outcome(&views, &members, gang.as_ref()) {
            if !finished_status {
                self.finish(wk, ok, now_ms);
            }
            return;
        }
        if finished_status || unrestored {
            return;
        }
        if state != Some(WorkloadState::Admitted) {
            self.pods_over.remove(&uid);
        }
        match state {
            Some(WorkloadState::Admitted) => {
                self.account_pods(wk, &members);
                self.note_pods_ready(wk, &members, gang.is_some(), count, now_ms);
                self.start_idle_jobs(&uid, &members, gang.is_some());
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

    /// An admitted workload whose Jobs' pods are all ready (or finished):
    /// a gang member's or a JobSet's own count, a Job's at most what was
    /// admitted (`count`).
    fn note_pods_ready(&mut self, wk: &ObjKey, members: &[JobRef], gang: bool, count: i32, now_ms: i64) {
        let ready = members.iter().filter_map(|k| self.queued.jobs.get(k)).all(|j| {
            let admitted = if gang || j.kind != JobKind::Job { j.pods } else { count };
            j.finished.is_some() || j.all_pods_ready(admitted)
        });
        if ready {
            self.pods_ready(wk, now_ms);
        }
    }

    /// Admitted but a Job never started (e.g. a crash between the status
    /// write and the Job patch): start it.
    fn start_idle_jobs(&mut self, uid: &str, members: &[JobRef], gang: bool) {
        let idle: Vec<JobRef> = members
            .iter()
            .filter(|k| {
                self.queued
                    .jobs
                    .get(*k)
                    .is_some_and(|j| j.suspended && j.finished.is_none())
                    && !self.inflight.starting.contains(*k)
            })
            .cloned()
            .collect();
        if idle.is_empty() {
            return;
        }
        let Some(adm) = self.engine.admission(uid) else { return };
        for k in idle {
            let only = gang.then_some(k.name());
            let steps = self.start_job_steps(&k, &adm.pod_sets, only);
            if !steps.is_empty() {
                self.inflight.starting.insert(k);
                self.outbox.plans.push(Plan {
                    purpose: Purpose::StartJob { uid: uid.to_string() },
                    steps,
                });
            }
        }
    }

    /// Whether every Job of a workload finished (a gang's deleted after
    /// finishing count with the outcome they had), and if so, whether all
    /// succeeded.
    fn jobs_outcome(
        views: &[&job::JobView],
        members: &[JobRef],
        gang: Option<&(Vec<String>, BTreeMap<String, bool>)>,
    ) -> Option<bool> {
        let whole = gang.is_none_or(|(names, done)| {
            names
                .iter()
                .all(|n| done.contains_key(n) || members.iter().any(|k| k.name() == n))
        });
        if !whole || !views.iter().all(|j| j.finished.is_some()) {
            return None;
        }
        Some(views.iter().all(|j| j.finished == Some(true)) && gang.is_none_or(|(_, done)| done.values().all(|ok| *ok)))
    }

    /// An evicted workload's Jobs: suspended, and once none has a pod
    /// left, the eviction completes (quota released). A workload under a
    /// preemption notice runs on until the notice is over (`notice`).
    pub(super) fn drive_eviction(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        if self.inflight.noticed.contains_key(&uid) {
            self.notice_running(wk, now_ms);
            return;
        }
        if self.pod_group_of(wk).is_some() {
            self.drive_pod_group_eviction(wk, now_ms);
            return;
        }
        let members = self.member_keys(wk);
        let mut settled = true;
        let mut terminating_known = true;
        let mut checks = Vec::new();
        for k in &members {
            let Some(j) = self.queued.jobs.get(k) else { continue };
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
            checks.push((k.clone(), kinds::pods_selector_of(j)));
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

    /// The objects a Workload stands for: its own (its key, whether or not
    /// it exists), or the gang's Jobs still there with the uid it was
    /// made from.
    pub(super) fn member_keys(&self, wk: &ObjKey) -> Vec<JobRef> {
        let Some(e) = self.table.workloads.get(wk) else {
            return Vec::new();
        };
        match (&e.gang, &e.owner) {
            (Some(g), _) => g
                .members
                .iter()
                .filter(|(name, uid)| {
                    uid.is_some()
                        && self
                            .queued
                            .jobs
                            .get(&JobRef::job(wk.namespace.clone(), name.clone()))
                            .is_some_and(|j| Some(&j.uid) == uid.as_ref())
                })
                .map(|(name, _)| JobRef::job(wk.namespace.clone(), name.clone()))
                .collect(),
            (None, Some((owner, _))) => vec![owner.clone()],
            (None, None) => Vec::new(),
        }
    }

    /// Reconciles whatever owns a Workload: its object, or its gang.
    pub(super) fn reconcile_owner(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        if let Some(g) = &e.gang {
            let gk = ObjKey::new(wk.namespace.clone(), g.name.clone());
            self.reconcile_gang(&gk, now_ms);
        } else if let Some((owner, _)) = &e.owner {
            let jk = owner.clone();
            self.reconcile_job(&jk, now_ms);
        } else if let Some(gk) = self.pod_group_of(wk) {
            self.reconcile_pod_group(&gk, now_ms);
        }
    }

    /// The steps that start an admitted workload's suspended object as
    /// its admission's pod sets say (all of them, or only the pod set
    /// named `only`, a gang member's): on their flavors, pinned to their
    /// topology domains, with the pods admitted (a partial admission).
    pub(super) fn start_job_steps(
        &mut self,
        key: &JobRef,
        pod_sets: &[eng::PodSetAssignment],
        only: Option<&str>,
    ) -> Vec<Step> {
        let flavors = flavors_of(pod_sets, only);
        let domains = domains_of(pod_sets, only);
        let admitted: BTreeMap<String, u32> = pod_sets
            .iter()
            .filter(|p| only.is_none_or(|n| p.name == n))
            .map(|p| (p.name.clone(), p.count))
            .collect();
        let Some(j) = self.queued.jobs.get(key) else {
            return Vec::new();
        };
        // A domain is pinned like a flavor's node label.
        let pins: BTreeMap<&String, ResourceFlavor> = domains
            .iter()
            .map(|(ps, d)| {
                let mut pin = ResourceFlavor::new("topology", Default::default());
                pin.spec.node_labels.insert(d.key.clone(), d.value.clone());
                (ps, pin)
            })
            .collect();
        let flavors: BTreeMap<String, Vec<&ResourceFlavor>> = flavors
            .iter()
            .map(|(ps, names)| {
                let mut list: Vec<&ResourceFlavor> = names.iter().filter_map(|n| self.defs.flavors.get(n)).collect();
                list.extend(pins.get(ps));
                (ps.clone(), list)
            })
            .collect();
        match kinds::start_patches(j, &flavors, &admitted) {
            Ok(patches) => patches
                .into_iter()
                .map(|(status, patch)| job_step(key, status, patch))
                .collect(),
            Err(err) => {
                self.record_error(
                    Kind::Queued(key.kind),
                    key.to_string(),
                    err.metric_label(),
                    err.to_string(),
                );
                Vec::new()
            }
        }
    }
}

/// A patch of an object as a step: through `/status` (a Job's
/// `startTime`) or of the object.
pub(super) fn job_step(key: &JobRef, status: bool, patch: kinds::ObjPatch) -> Step {
    match (status, patch) {
        (true, kinds::ObjPatch::Merge(p)) => Step::PatchJobStatus {
            key: key.key.clone(),
            patch: p,
        },
        (_, patch) => Step::PatchJob {
            job: key.clone(),
            patch,
        },
    }
}

/// The flavors an admission assigned, by pod set: every pod set's, or
/// only that of the pod set named `pod_set` (a gang member's).
fn flavors_of(pod_sets: &[eng::PodSetAssignment], pod_set: Option<&str>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pod_sets.iter().filter(|p| pod_set.is_none_or(|n| p.name == n)) {
        out.entry(p.name.clone())
            .or_default()
            .extend(p.flavors.values().cloned());
    }
    out
}

/// The topology domains an admission pins pod sets to, by pod set (or
/// only that of the pod set named `pod_set`).
fn domains_of(pod_sets: &[eng::PodSetAssignment], pod_set: Option<&str>) -> BTreeMap<String, eng::TopologyDomain> {
    pod_sets
        .iter()
        .filter(|p| pod_set.is_none_or(|n| p.name == n))
        .filter_map(|p| p.topology.clone().map(|d| (p.name.clone(), d)))
        .collect()
}
