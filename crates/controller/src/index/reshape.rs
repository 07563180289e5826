//! An object whose shape changed after its Workload was made
//! ([`sluice_scheduler::shape`] decides):
//!
//! - **admitted, and it asks for more** (a scaled Job, a JobSet's replicas,
//!   larger requests): Sluice never relies on the webhook to refuse that.
//!   The object is suspended and its workload evicted
//!   (`WorkloadShapeChanged`, with an Event on both); once its pods are
//!   gone it waits again, and its Workload is made again with the new
//!   shape (below);
//! - **admitted, and it runs fewer pods** (a batch/v1 Job scaled down): once
//!   the Job has no more pods than it now runs, the admission is reduced
//!   and what it gave back is offered to waiting work;
//! - **waiting, and it asks for something else** (a suspended object's
//!   pods or requests changed): its Workload is deleted and made again
//!   from the object, so that what is admitted is what will run.
//!
//! A multi-Job gang's member is compared on its own pod set (named after
//! the Job): one that grew evicts the whole gang; a waiting gang whose
//! member changed has its Workload deleted and made again from all its
//! Jobs. A gang member scaled down keeps the gang's admission until the
//! gang ends.

use sluice_api::v1alpha1::conditions as cond;
use sluice_convert::{adapter, text};
use sluice_scheduler::WorkloadState;
use sluice_scheduler::shape::{self, ShapeChange};

use super::Index;
use crate::plan::{JobRef, ObjKey, Plan, Purpose};
use sluice_kinds::job::JobError;
use sluice_kinds::{Full, JobKind};
use sluice_scheduler as eng;

impl Index {
    /// Acts on a change of shape of `key`, the owner of Workload `wk`, as
    /// observed in full; whether the workload was evicted or is being made
    /// again (nothing else is to be done for it now).
    pub(super) fn reshape(&mut self, wk: &ObjKey, key: &JobRef, full: Option<Full<'_>>, now_ms: i64) -> bool {
        let Some(full) = full else { return false };
        let Some(e) = self.table.workloads.get(wk) else {
            return false;
        };
        if !e.run.in_engine || e.gang.is_some() || self.queued.retiring.contains(&e.uid) {
            return false;
        }
        // An object whose pod sets are read from another (a TrainJob's
        // runtime) is compared with what that says now; without it, as is.
        let referent = self.referent_of(full);
        let full = match (full, referent.as_deref()) {
            (Full::Dynamic(kind, obj), Some(r)) => Full::Resolved(kind, obj, r),
            _ => full,
        };
        let uid = e.uid.clone();
        match self.engine.workload_state(&uid) {
            Some(WorkloadState::Admitted) => match running_pod_sets(full, self.config.kueue_compat) {
                Ok(now) => self.admitted_shape(wk, key, &uid, &now, now_ms),
                Err(JobError::NothingAsked { .. }) => self.scaled_to_zero(wk, key),
                Err(_) => false,
            },
            Some(WorkloadState::Pending) => {
                let suspended = self.queued.jobs.get(key).is_some_and(|j| j.suspended);
                let asked = self.engine.requested(&uid);
                match (suspended, asked, requested_pod_sets(full, self.config.kueue_compat)) {
                    (true, Some(asked), Ok(now)) if !shape::same_request(&asked, &now) => {
                        self.make_again(wk);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Acts on a change of shape of `key`, a member of gang Workload `wk`,
    /// as observed in full; whether the gang was evicted or is being made
    /// again.
    pub(super) fn reshape_member(&mut self, wk: &ObjKey, key: &JobRef, full: Option<Full<'_>>, now_ms: i64) -> bool {
        let Some(full @ Full::Job(_)) = full else { return false };
        let Some(e) = self.table.workloads.get(wk) else {
            return false;
        };
        if !e.run.in_engine || self.queued.retiring.contains(&e.uid) {
            return false;
        }
        let uid = e.uid.clone();
        let mine = |mut sets: Vec<sluice_scheduler::PodSetSpec>| {
            sets.iter_mut().for_each(|p| p.name = key.name().to_string());
            sets
        };
        match self.engine.workload_state(&uid) {
            Some(WorkloadState::Admitted) => {
                let Ok(now) = running_pod_sets(full, self.config.kueue_compat) else {
                    return false;
                };
                let Some(adm) = self.engine.admission(&uid) else {
                    return false;
                };
                let held: Vec<_> = adm.pod_sets.iter().filter(|p| p.name == key.name()).cloned().collect();
                let asked: Vec<_> = (self.engine.requested(&uid).unwrap_or_default().into_iter())
                    .filter(|p| p.name == key.name())
                    .collect();
                match shape::compare_asked(&held, &asked, &mine(now)) {
                    ShapeChange::Grew(g) => {
                        let msg = format!(
                            "Job {} of the gang asks for more than its admission ({}): the gang is suspended and queued again with its new shape",
                            key.name(),
                            text::growth(&g)
                        );
                        self.evict_for_shape(&uid, &msg, now_ms);
                        true
                    }
                    _ => false,
                }
            }
            Some(WorkloadState::Pending) => {
                let suspended = self.queued.jobs.get(key).is_some_and(|j| j.suspended);
                let asked: Option<Vec<_>> = self
                    .engine
                    .requested(&uid)
                    .map(|a| a.into_iter().filter(|p| p.name == key.name()).collect());
                let now = requested_pod_sets(full, self.config.kueue_compat).map(mine);
                match (suspended, asked, now) {
                    (true, Some(asked), Ok(now)) if !shape::same_request(&asked, &now) => {
                        tracing::info!(workload = %wk, job = %key, "a Job of the waiting gang changed: its Workload is made again");
                        self.make_again(wk);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// An admitted workload's object as it runs now (`now`) against its
    /// admission.
    fn admitted_shape(
        &mut self,
        wk: &ObjKey,
        key: &JobRef,
        uid: &str,
        now: &[sluice_scheduler::PodSetSpec],
        now_ms: i64,
    ) -> bool {
        let Some(adm) = self.engine.admission(uid) else {
            return false;
        };
        let asked = self.engine.requested(uid).unwrap_or_default();
        match shape::compare_asked(&adm.pod_sets, &asked, now) {
            ShapeChange::Same => false,
            ShapeChange::Grew(g) => {
                let msg = format!(
                    "The {} asks for more than its admission ({}): it is suspended and queued again with its new shape",
                    key.kind.kind(),
                    text::growth(&g)
                );
                tracing::warn!(workload = %wk, object = %key, "{msg}");
                self.evict_for_shape(uid, &msg, now_ms);
                true
            }
            ShapeChange::Shrank(counts) => {
                self.shrink_when_gone(wk, key, uid, &counts);
                false
            }
        }
    }

    /// A batch/v1 Job or a serving object scaled down: once it has no more
    /// pods than it runs now, its admission holds only those.
    fn shrink_when_gone(&mut self, wk: &ObjKey, key: &JobRef, uid: &str, counts: &[(String, u32)]) {
        let Some(j) = self.queued.jobs.get(key) else { return };
        let running: i64 = counts.iter().map(|(_, c)| i64::from(*c)).sum();
        if !shrinks_in_place(key.kind) || i64::from(j.live) > running {
            return;
        }
        if !matches!(self.engine.shrink_admitted(uid, counts), Ok(true)) {
            return;
        }
        let Some(adm) = self.engine.admission(uid) else { return };
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        e.written.status.admission = Some(adapter::admission_status(&adm));
        let pods: Vec<String> = counts
            .iter()
            .map(|(ps, c)| format!("{c} pods of pod set {ps}"))
            .collect();
        let note = format!(
            "The {} was scaled down: its admission now holds {}, and the rest of its quota is released",
            key.kind.kind(),
            pods.join(", ")
        );
        let mut steps = vec![e.status_write(wk)];
        steps.extend(self.events(wk, "Normal", "AdmissionReduced", "Shrink", &note));
        self.outbox.plans.push(Plan {
            purpose: Purpose::Reshape { uid: uid.to_string() },
            steps,
        });
    }

    /// An admitted serving object scaled to zero replicas: once its pods
    /// are gone, its Workload goes (the quota it held released); the object,
    /// asking for nothing, is held and waits for its owner to ask for
    /// replicas again. Whether the Workload is going.
    fn scaled_to_zero(&mut self, wk: &ObjKey, key: &JobRef) -> bool {
        let gone = self.queued.jobs.get(key).is_some_and(|j| j.live == 0);
        if !shrinks_in_place(key.kind) || !gone {
            return false;
        }
        self.make_again(wk);
        true
    }

    /// Evicts an admitted workload whose object grew: once its pods are
    /// gone it is made again ([`Index::make_again`]), not requeued as it
    /// was.
    fn evict_for_shape(&mut self, uid: &str, msg: &str, now_ms: i64) {
        if self.engine.evict(uid).is_ok() {
            self.inflight.reshaping.insert(uid.to_string());
            self.on_evicted(uid, cond::reasons::WORKLOAD_SHAPE_CHANGED, None, msg, now_ms);
        }
    }

    /// Whether Workload `wk` is being evicted because its object grew.
    pub(super) fn evicted_for_shape(&self, wk: &ObjKey) -> bool {
        self.table
            .workloads
            .get(wk)
            .is_some_and(|e| self.inflight.reshaping.contains(&e.uid))
    }

    /// A workload whose object now asks for something else (it waits, or
    /// its eviction for growing is complete): the quota it held is released,
    /// what Sluice injected into its objects is put back, and the Workload
    /// is deleted; its object (or gang) gets a new one, made from what it
    /// asks for now, once the deletion is seen.
    pub(super) fn make_again(&mut self, wk: &ObjKey) {
        let Some(uid) = self.retire(wk) else { return };
        let note = "Its objects changed: the Workload is made again with what they ask for now";
        let events = self.events(wk, "Normal", cond::reasons::WORKLOAD_SHAPE_CHANGED, "Requeue", note);
        self.delete_retired(wk, Purpose::Reshape { uid: uid.clone() }, &uid, events);
    }
}

/// Whether objects of `kind` run fewer pods when their owner scales them
/// down, their admission then shrinking to what they run: a batch/v1
/// Job's parallelism, a serving object's replicas.
fn shrinks_in_place(kind: JobKind) -> bool {
    kind == JobKind::Job || kind.integration().hold() == sluice_kinds::Hold::Replicas
}

/// The pod sets an object asks for, as its Workload would (a batch/v1
/// Job's pods from the parallelism its user wrote), in the engine's terms.
fn requested_pod_sets(full: Full<'_>, kueue_compat: bool) -> Result<Vec<eng::PodSetSpec>, JobError> {
    let wl = full.workload(kueue_compat, |_| None, |_| None)?;
    sluice_convert::adapter::workload(&wl, 0, 0)
        .map(|spec| spec.pod_sets)
        .map_err(|e| JobError::Invalid {
            field: "spec".into(),
            problem: e.to_string(),
        })
}

/// The pod sets an object runs now: those it asks for, except that a
/// batch/v1 Job runs as many pods as its parallelism says now (a partial
/// admission lowers it; so does a user who scales it).
fn running_pod_sets(full: Full<'_>, kueue_compat: bool) -> Result<Vec<eng::PodSetSpec>, JobError> {
    let mut sets = requested_pod_sets(full, kueue_compat)?;
    if let Full::Job(j) = full
        && let (Some(spec), Some(ps)) = (j.spec.as_ref(), sets.first_mut())
    {
        ps.count = u32::try_from(sluice_kinds::job::pods_count(spec.parallelism, spec.completions)).unwrap_or(0);
    }
    Ok(sets)
}
