//! Pods the webhook gated (servers with pod scheduling gates, Kubernetes
//! 1.27+): a gated pod, or a group of them, is one Workload
//! ([`sluice_kinds::pod`]), made once the group is whole.
//!
//! - admitted: each gated pod is given its flavors and its gate removed
//!   (one guarded JSON patch per pod, with the admission's status write);
//! - evicted: a running pod cannot be held again: its pods are deleted,
//!   and once none is left the eviction completes (quota released); the
//!   group's Workload then waits again for its pods (their owner, if any,
//!   makes them again, gated);
//! - finished once every pod has; a pod deleted while its group waits
//!   breaks the group: its Workload is deleted, and made again when the
//!   group is whole.
//!
//! Only the pods labelled [`sluice_api::labels::MANAGED_POD`] are watched
//! (the webhook labels what it gates). Not run on a real server here:
//! this project's API server (1.24) has no scheduling gates; index tests
//! drive it with pods that have them.

use std::collections::{BTreeMap, BTreeSet};

use sluice_api::v1alpha1::conditions as cond;
use sluice_kinds::pod::{self, Assessment, GatedPod};
use sluice_scheduler::{self as eng, WorkloadState};

use super::Index;
use super::status::is_true;
use crate::plan::{ObjKey, Plan, Purpose, Step};

/// The rule's state: the gated pods and their groups.
#[derive(Default)]
pub(super) struct PodGroups {
    /// By key (namespace, pod name).
    pods: BTreeMap<ObjKey, GatedPod>,
    /// (namespace, group name) → its pods' names.
    groups: BTreeMap<ObjKey, BTreeSet<String>>,
    /// Pods whose start or deletion is planned and not yet observed.
    acting: BTreeSet<ObjKey>,
    /// Groups to reconcile again (a pod step failed).
    retry: BTreeSet<ObjKey>,
}

impl Index {
    /// A gated pod as observed (`key`: namespace/name; `None`: deleted).
    pub fn apply_gated_pod(&mut self, key: &ObjKey, pod: Option<GatedPod>, now_ms: i64) {
        let old = self.pod_groups.pods.remove(key);
        self.pod_groups.acting.remove(key);
        if let Some(o) = &old {
            let gk = ObjKey::new(key.namespace.clone(), o.group_name());
            if let Some(names) = self.pod_groups.groups.get_mut(&gk) {
                names.remove(&key.name);
                if names.is_empty() {
                    self.pod_groups.groups.remove(&gk);
                }
            }
            self.reconcile_pod_group(&gk, now_ms);
        }
        if let Some(p) = pod {
            let gk = ObjKey::new(key.namespace.clone(), p.group_name());
            self.pod_groups
                .groups
                .entry(gk.clone())
                .or_default()
                .insert(key.name.clone());
            self.pod_groups.pods.insert(key.clone(), p);
            self.reconcile_pod_group(&gk, now_ms);
        }
    }

    /// The group whose Workload `wk` is, if it is a pod group's.
    pub(super) fn pod_group_of(&self, wk: &ObjKey) -> Option<ObjKey> {
        let e = self.table.workloads.get(wk)?;
        let group = wk.name.strip_prefix(pod::WORKLOAD_PREFIX)?;
        (!e.has_jobs()).then(|| ObjKey::new(wk.namespace.clone(), group))
    }

    /// Level-triggered: what a group's pods and Workload need now.
    pub(super) fn reconcile_pod_group(&mut self, gk: &ObjKey, now_ms: i64) {
        let wk = ObjKey::new(gk.namespace.clone(), format!("{}{}", pod::WORKLOAD_PREFIX, gk.name));
        let members = self.group_pods(gk);
        let Some(e) = self.table.workloads.get(&wk) else {
            self.create_pod_group_workload(&wk, &members);
            return;
        };
        let (uid, in_engine, done) = (
            e.uid.clone(),
            e.run.in_engine,
            is_true(&e.written.status, cond::FINISHED),
        );
        if done || self.queued.retiring.contains(&uid) {
            return;
        }
        let refs: Vec<&GatedPod> = members.iter().collect();
        if let Some(ok) = pod::finished(&refs) {
            self.finish(&wk, ok, now_ms);
            return;
        }
        let state = if in_engine {
            self.engine.workload_state(&uid)
        } else {
            None
        };
        match state {
            Some(WorkloadState::Admitted) => self.start_idle_pods(&wk, &uid),
            Some(WorkloadState::Evicting) => self.drive_pod_group_eviction(&wk, now_ms),
            Some(WorkloadState::Pending | WorkloadState::Preempting) if assess(&refs) != Assessment::Whole => {
                // Broken while it waits: made again once whole.
                if let Some(uid) = self.retire(&wk) {
                    self.delete_retired(&wk, Purpose::RetireGang { uid: uid.clone() }, &uid, Vec::new());
                }
            }
            _ => {}
        }
    }

    /// The group's pods, by name.
    fn group_pods(&self, gk: &ObjKey) -> Vec<GatedPod> {
        self.pod_groups
            .groups
            .get(gk)
            .into_iter()
            .flatten()
            .filter_map(|n| self.pod_groups.pods.get(&ObjKey::new(gk.namespace.clone(), n.clone())))
            .cloned()
            .collect()
    }

    /// No Workload yet: made once the group is whole and every pod of it
    /// still waits at its gate.
    fn create_pod_group_workload(&mut self, wk: &ObjKey, members: &[GatedPod]) {
        let refs: Vec<&GatedPod> = members.iter().collect();
        if assess(&refs) != Assessment::Whole
            || members.iter().any(|p| p.gate_at.is_none())
            || self.inflight.creating.contains(wk)
        {
            return;
        }
        let (wcs, pcs) = (&self.defs.workload_classes, &self.defs.pod_classes);
        match pod::workload(&refs, |n| wcs.get(n).copied(), |n| pcs.get(n).copied()) {
            Ok(wl) => {
                self.inflight.creating.insert(wk.clone());
                self.outbox.plans.push(Plan {
                    purpose: Purpose::CreateWorkload,
                    steps: vec![Step::ApplyWorkload(Box::new(wl))],
                });
            }
            Err(err) => {
                let key = format!("{}/{}", members[0].namespace, members[0].name);
                self.record_error(super::Kind::GatedPod, key, err.metric_label(), err.to_string());
            }
        }
    }

    /// A pod's start or deletion failed: tried again at the next event of
    /// its group (or cycle).
    pub(super) fn pod_step_failed(&mut self, key: &ObjKey) {
        self.pod_groups.acting.remove(key);
        if let Some(p) = self.pod_groups.pods.get(key) {
            let gk = ObjKey::new(key.namespace.clone(), p.group_name());
            self.pod_groups.retry.insert(gk);
        }
    }

    /// Groups whose pod step failed, reconciled again.
    pub(super) fn retry_pod_groups(&mut self, now_ms: i64) {
        for gk in std::mem::take(&mut self.pod_groups.retry) {
            self.reconcile_pod_group(&gk, now_ms);
        }
    }

    /// The steps that start an admitted group's gated pods on the flavors
    /// of their pod sets.
    pub(super) fn ungate_steps(&mut self, wk: &ObjKey, pod_sets: &[eng::PodSetAssignment]) -> Vec<Step> {
        let Some(gk) = self.pod_group_of(wk) else {
            return Vec::new();
        };
        let flavors: BTreeSet<&String> = pod_sets.iter().flat_map(|p| p.flavors.values()).collect();
        let flavors: Vec<&sluice_api::v1alpha1::ResourceFlavor> =
            flavors.into_iter().filter_map(|f| self.defs.flavors.get(f)).collect();
        let mut steps = Vec::new();
        for p in self.group_pods(&gk) {
            let key = ObjKey::new(p.namespace.clone(), p.name.clone());
            if let Some(patch) = pod::ungate_patch(&p, &flavors)
                && self.pod_groups.acting.insert(key.clone())
            {
                steps.push(Step::PatchPod { key, patch });
            }
        }
        steps
    }

    /// Admitted, and a pod still gated (a restart between the status write
    /// and the pod's patch, or a pod made again): started.
    fn start_idle_pods(&mut self, wk: &ObjKey, uid: &str) {
        let Some(adm) = self.engine.admission(uid) else { return };
        let steps = self.ungate_steps(wk, &adm.pod_sets);
        if !steps.is_empty() {
            self.outbox.plans.push(Plan {
                purpose: Purpose::StartJob { uid: uid.to_string() },
                steps,
            });
        }
    }

    /// The steps that stop an evicted group: its pods that have not
    /// finished are deleted.
    pub(super) fn pod_group_deletions(&mut self, wk: &ObjKey) -> Vec<Step> {
        let Some(gk) = self.pod_group_of(wk) else {
            return Vec::new();
        };
        let mut steps = Vec::new();
        for p in self.group_pods(&gk) {
            let key = ObjKey::new(p.namespace.clone(), p.name.clone());
            if p.finished.is_none() && !p.deleting && self.pod_groups.acting.insert(key.clone()) {
                steps.push(Step::DeletePod { key });
            }
        }
        steps
    }

    /// An evicted group: its quota is released once none of its pods is
    /// left (gone, or finished).
    pub(super) fn drive_pod_group_eviction(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(gk) = self.pod_group_of(wk) else { return };
        let steps = self.pod_group_deletions(wk);
        if !steps.is_empty() {
            let uid = self.table.workloads.get(wk).map(|e| e.uid.clone()).unwrap_or_default();
            self.outbox.plans.push(Plan {
                purpose: Purpose::Evict { uid },
                steps,
            });
        }
        if self.group_pods(&gk).iter().all(|p| p.finished.is_some()) {
            self.complete_eviction(wk, now_ms);
        }
    }
}

fn assess(pods: &[&GatedPod]) -> Assessment {
    pod::assess(pods)
}
