//! Pods against admissions: the second line behind the webhook and the
//! shape rule ([`super::reshape`]). Whatever the cause (a foreign
//! controller, a race, a write that got past both), a batch/v1 Job of an
//! admitted workload that has more live pods than its admission covers
//! for longer than one reconcile is reported: a Warning Event
//! (`PodsOverAdmission`) on the Workload and the Job, and
//! `sluice_pods_over_admission_total`. Once seen over, the workload is
//! looked at again on every tick until it is not.

use std::collections::BTreeMap;

use super::Index;
use crate::plan::{JobRef, ObjKey, Plan, Purpose};
use sluice_kinds::JobKind;

/// Workloads seen running more pods than admitted, by uid: whether that
/// was reported.
pub(super) type OverAdmission = BTreeMap<String, bool>;

impl Index {
    /// Checks an admitted workload's batch/v1 Jobs (`members`) against its
    /// admission: each Job's live pods (`status.active`, and terminating
    /// ones where reported) at most its pod set's admitted pods (a gang
    /// member's own pod set; a Job's all of them).
    pub(super) fn account_pods(&mut self, wk: &ObjKey, members: &[JobRef]) {
        let Some(e) = self.table.workloads.get(wk) else { return };
        let uid = e.uid.clone();
        let gang = e.gang.is_some();
        let Some(adm) = self.engine.admission(&uid) else { return };
        let over: Vec<(JobRef, i32, u32)> = members
            .iter()
            .filter(|k| k.kind == JobKind::Job)
            .filter_map(|k| {
                let j = self.queued.jobs.get(k).filter(|j| j.finished.is_none())?;
                let admitted: u32 = adm
                    .pod_sets
                    .iter()
                    .filter(|p| !gang || p.name == k.name())
                    .map(|p| p.count)
                    .sum();
                (i64::from(j.live) > i64::from(admitted)).then(|| (k.clone(), j.live, admitted))
            })
            .collect();
        if over.is_empty() {
            self.pods_over.remove(&uid);
            return;
        }
        match self.pods_over.get(&uid).copied() {
            None => {
                // Seen once: a reconcile's grace (the suspension of a Job
                // that grew may be in flight); looked at again soon.
                self.pods_over.insert(uid, false);
                self.outbox.retry_soon = true;
            }
            Some(false) => {
                self.pods_over.insert(uid.clone(), true);
                self.outbox.stats.pods_over_admission += 1;
                let said: Vec<String> = over
                    .iter()
                    .map(|(k, live, admitted)| format!("Job {} has {live} pods, {admitted} admitted", k.name()))
                    .collect();
                let note = format!(
                    "More pods run than the admission covers ({}): something other than Sluice started them",
                    said.join("; ")
                );
                tracing::warn!(workload = %wk, "{note}");
                let steps = self.events(wk, "Warning", "PodsOverAdmission", "Account", &note);
                self.outbox.plans.push(Plan {
                    purpose: Purpose::Report,
                    steps,
                });
            }
            Some(true) => {}
        }
    }

    /// Workloads seen over their admission and not reported yet: looked at
    /// again (on a tick).
    pub(super) fn recheck_pods_over(&mut self, now_ms: i64) {
        let unreported: Vec<ObjKey> = self
            .pods_over
            .iter()
            .filter(|(_, reported)| !**reported)
            .filter_map(|(uid, _)| self.table.by_uid.get(uid).cloned())
            .collect();
        for wk in unreported {
            self.drive(&wk, now_ms);
        }
    }
}
