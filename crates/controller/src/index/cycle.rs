//! A cycle: retries due, time-driven checks, the periodic drift check of
//! the ledger against the Workload statuses, the engine run, and what its
//! decisions become (admissions here; evictions and explanations in their
//! own modules). Also when the loop should wake next.

use std::collections::BTreeSet;

use sluice_api::v1alpha1::conditions as cond;
use sluice_scheduler::{self as eng, WorkloadState};

use super::Index;
use super::status::{self, is_true};
use crate::plan::{Plan, Purpose, Step};
use sluice_convert::{adapter, text};

/// How often the ledger is checked against the Workload statuses.
const DRIFT_CHECK_MS: i64 = 60_000;
/// Eviction reason when a Workload's status lost its admission.
const ADMISSION_LOST: &str = "AdmissionLost";

impl Index {
    /// Runs the engine once (if ready) and returns every plan due: those
    /// from events since the last call, admissions, preemptions,
    /// evictions, requeues and changed explanations. Also returns when the
    /// engine next wants to run.
    pub fn cycle(&mut self, now_ms: i64) -> (Vec<Plan>, Option<i64>) {
        if !self.is_ready() {
            return (self.take_plans(), None);
        }
        self.outbox.retry_soon = false;
        self.catch_up(now_ms);
        self.flush_placement();
        self.govern_usage(now_ms);
        let cycle = self.engine.schedule_within(now_ms, self.outbox.cycle_budget);
        let admissions_at = self.outbox.plans.len();
        self.take_decisions(&cycle, now_ms);
        self.plan_backstop(admissions_at, now_ms);
        self.judge_unqueued(now_ms);
        self.charge_usage(now_ms);
        self.withdraw_stale_notices(now_ms);
        let wake = self.next_wake(cycle.next_wakeup);
        let wake = match self.next_govern(now_ms) {
            Some(t) => Some(wake.map_or(t, |w| w.min(t))),
            None => wake,
        };
        let mut plans = self.take_plans();
        plans.extend(self.take_explanations(self.config.explanations_per_cycle, now_ms));
        plans.extend(self.take_finished_states());
        (plans, wake)
    }

    /// What is due before the engine runs: the orphan scan after Jobs are
    /// listed, time-driven checks, Jobs and deactivations to try again,
    /// and the periodic drift check.
    fn catch_up(&mut self, now_ms: i64) {
        if std::mem::take(&mut self.queued.orphan_scan_due) {
            self.finish_orphans(now_ms);
            self.reconcile_gangs(now_ms);
        }
        self.tick(now_ms);
        for key in std::mem::take(&mut self.inflight.retry_jobs) {
            self.reconcile_job(&key, now_ms);
        }
        self.retry_pod_groups(now_ms);
        for uid in std::mem::take(&mut self.inflight.deactivate_retry) {
            if self.inflight.deactivating.contains(&uid)
                && let Some(wk) = self.table.by_uid.get(&uid).cloned()
            {
                self.outbox.plans.push(Plan {
                    purpose: Purpose::Deactivate { uid },
                    steps: vec![Step::PatchWorkload {
                        key: wk,
                        patch: serde_json::json!({"spec": {"active": false}}),
                    }],
                });
            }
        }
        if now_ms >= self.outbox.next_drift_check_ms {
            self.check_drift(now_ms);
            self.outbox.next_drift_check_ms = now_ms.saturating_add(DRIFT_CHECK_MS);
        }
    }

    /// The engine's decisions into the index: admissions, preemptions,
    /// evictions, changed explanations, reservations that moved.
    fn take_decisions(&mut self, cycle: &eng::Cycle, now_ms: i64) {
        for adm in &cycle.admitted {
            self.on_admitted(adm, now_ms);
        }
        for p in &cycle.preempted {
            let preemptor = self
                .table
                .by_uid
                .get(&*p.preemptor)
                .map(ToString::to_string)
                .unwrap_or_else(|| p.preemptor.to_string());
            let message = sluice_convert::text::preemption(p, &preemptor);
            self.on_preempted(p, message, now_ms);
            self.outbox.stats.preempted += 1;
        }
        for ev in &cycle.evicted {
            self.on_evicted(
                &ev.uid,
                ev.reason.as_str(),
                None,
                &sluice_convert::text::eviction(ev),
                now_ms,
            );
        }
        for (uid, expl) in &cycle.pending_changed {
            self.on_pending(uid, expl, now_ms);
        }
        for m in &cycle.moved {
            self.on_reservation_moved(m);
        }
    }

    /// When the loop should wake next: the engine's next wake-up, a pods
    /// ready deadline, a preemption notice's deadline, or a pods-gone
    /// check waiting out its backoff, whichever is first.
    fn next_wake(&self, engine_wake: Option<i64>) -> Option<i64> {
        let mut wake = engine_wake;
        for t in [self.next_pods_ready_deadline(), self.next_notice_deadline()]
            .into_iter()
            .flatten()
        {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if let Some(t) = self
            .inflight
            .confirming
            .values()
            .filter(|c| !c.in_flight)
            .map(|c| c.not_before_ms)
            .min()
        {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        wake
    }

    /// The periodic check of the ledger against reality (the Workload
    /// statuses as last observed or written): a workload the ledger holds
    /// as admitted whose status no longer records an admission (changed
    /// outside Sluice) is evicted, so its Job stops and its quota is
    /// released; one whose status records an admission the ledger does not
    /// hold is taken as admitted. Workloads with a status write in flight
    /// are left alone. Each repair is counted (`sluice_ledger_drift_total`).
    /// Runs with the first cycle a minute after the last check (drift comes
    /// from changes, and every change is an event that brings a cycle).
    pub(super) fn check_drift(&mut self, now_ms: i64) {
        let mut engine_only = Vec::new();
        let mut status_only = Vec::new();
        for (k, e) in &self.table.workloads {
            if !e.run.in_engine || e.written.awaiting || self.table.unrestored.contains(k) {
                continue;
            }
            let recorded = e.written.status.holds_quota() && e.written.status.admission.is_some();
            match self.engine.workload_state(&e.uid) {
                Some(WorkloadState::Admitted) if !recorded && !is_true(&e.written.status, cond::FINISHED) => {
                    engine_only.push((k.clone(), e.uid.clone()));
                }
                Some(WorkloadState::Pending | WorkloadState::Preempting) if recorded => status_only.push(k.clone()),
                _ => {}
            }
        }
        for k in status_only {
            tracing::warn!(workload = %k, "ledger drift: admitted in its status, pending in the ledger; taking the admission");
            self.outbox.stats.drift.push("status_only");
            self.sync_workload(&k, None, now_ms);
        }
        for (k, uid) in engine_only {
            tracing::warn!(workload = %k, "ledger drift: admitted in the ledger, not in its status; evicting");
            self.outbox.stats.drift.push("engine_only");
            if self.engine.evict(&uid).is_ok() {
                let msg = "Its status no longer records the admission (changed outside Sluice): evicted so that the ledger and the cluster agree";
                self.on_evicted(&uid, ADMISSION_LOST, None, msg, now_ms);
            }
        }
    }

    pub(super) fn on_admitted(&mut self, adm: &eng::Admission, now_ms: i64) {
        let Some(wk) = self.table.by_uid.get(&*adm.uid).cloned() else {
            return;
        };
        let e = self.table.workloads.get_mut(&wk).expect("indexed");
        self.table.prior.insert(adm.uid.to_string(), e.written.status.clone());
        let note = adm.backfill.as_ref().map(text::backfilled);
        status::admitted(
            &mut e.written.status,
            adapter::admission_status(adm),
            note.as_deref(),
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        e.written.pending_fp = None;
        e.run.admitted_at = Some(now_ms);
        e.run.pods_ready_seen = false;
        let created = e.observed.created_ms;
        self.outbox
            .stats
            .wait_seconds
            .push(((now_ms - created).max(0)) as f64 / 1000.0);
        self.outbox.stats.admitted += 1;
        let mut steps = vec![e.status_write(&wk)];
        let gang = self.table.workloads.get(&wk).is_some_and(|e| e.gang.is_some());
        for jk in self.member_keys(&wk) {
            let only = gang.then_some(jk.name());
            let job_steps = self.start_job_steps(&jk, &adm.pod_sets, only);
            if !job_steps.is_empty() {
                self.inflight.starting.insert(jk);
            }
            steps.extend(job_steps);
        }
        steps.extend(self.ungate_steps(&wk, &adm.pod_sets));
        let flavors: BTreeSet<&String> = adm.pod_sets.iter().flat_map(|p| p.flavors.values()).collect();
        let pods: u32 = adm.pod_sets.iter().map(|p| p.count).sum();
        let note = format!(
            "Admitted by ClusterQueue {}: {pods} pods on flavor(s) {}",
            adm.cluster_queue,
            flavors.into_iter().cloned().collect::<Vec<_>>().join(", ")
        );
        steps.extend(self.events(&wk, "Normal", "Admitted", "Admit", &note));
        self.outbox.plans.push(Plan {
            purpose: Purpose::Admit {
                uid: adm.uid.to_string(),
            },
            steps,
        });
    }
}
