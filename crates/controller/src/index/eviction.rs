//! Evictions and what follows them: the Workload marked evicted and its
//! Job suspended, the quota released once the Job's pods are gone
//! (confirmed by listing them on servers without `status.terminating`),
//! the requeue (with backoff) and the Job's scheduling restored; and the
//! pods-ready timeout that evicts a workload whose pods never all ran.

use sluice_api::v1alpha1::{RequeueState, conditions as cond};
use sluice_scheduler::WorkloadState;

use super::errors::engine_ok;
use super::status::{self, is_true};
use super::{Index, Kind, time_of};
use crate::plan::{JobRef, ObjKey, Plan, Purpose, Step};
use sluice_kinds as kinds;

/// A pods-gone check of an evicted Job: one in flight at a time, retried
/// with backoff (1 s doubling to 16 s) while pods remain.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Confirmation {
    pub(super) in_flight: bool,
    pub(super) attempts: u32,
    pub(super) not_before_ms: i64,
}

/// The requeue backoff after the `n`th eviction: `base × 2^(n-1)`, at most
/// `max` (saturating: any `n`, any durations).
pub fn backoff_ms(base: i64, max: i64, n: i32) -> i64 {
    let exp = n.saturating_sub(1).clamp(0, 62) as u32;
    base.max(0).saturating_mul(1i64 << exp).min(max.max(0))
}

impl Index {
    pub(super) fn on_evicted(&mut self, uid: &str, reason: &str, preempted: Option<&str>, message: &str, now_ms: i64) {
        let Some(wk) = self.table.by_uid.get(uid).cloned() else {
            return;
        };
        let e = self.table.workloads.get_mut(&wk).expect("indexed");
        // No pods-ready deadline while it is evicted (set again on admission).
        e.run.admitted_at = None;
        status::evicted(
            &mut e.written.status,
            reason,
            preempted,
            message,
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        let step = e.status_write(&wk);
        self.inflight.evicting.insert(uid.to_string());
        self.outbox.stats.evicted.push(match reason {
            cond::reasons::PREEMPTED => cond::reasons::PREEMPTED,
            cond::reasons::PODS_READY_TIMEOUT => cond::reasons::PODS_READY_TIMEOUT,
            cond::reasons::DEACTIVATED => cond::reasons::DEACTIVATED,
            cond::reasons::IDLE_GPU => cond::reasons::IDLE_GPU,
            cond::reasons::WORKLOAD_SHAPE_CHANGED => cond::reasons::WORKLOAD_SHAPE_CHANGED,
            _ => "Other",
        });
        let mut steps = vec![step];
        for jk in self.member_keys(&wk) {
            if let Some(j) = self.queued.jobs.get(&jk).filter(|j| j.finished.is_none()) {
                let patch = kinds::suspend_patch(j);
                self.inflight.suspending.insert(jk.clone());
                steps.push(Step::PatchJob { patch, job: jk });
            }
        }
        steps.extend(self.pod_group_deletions(&wk));
        steps.extend(self.events(&wk, "Normal", reason, "Evict", message));
        self.outbox.plans.push(Plan {
            purpose: Purpose::Evict { uid: uid.to_string() },
            steps,
        });
    }

    /// All pods of an admitted workload were seen ready: no pods-ready
    /// deadline any more, and `PodsReady=True` persisted so that a
    /// restarted controller knows it too.
    pub(super) fn pods_ready(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        let retry = std::mem::take(&mut e.run.pods_ready_unwritten);
        if e.run.pods_ready_seen && !retry {
            return;
        }
        e.run.pods_ready_seen = true;
        if !retry && is_true(&e.written.status, cond::PODS_READY) {
            return;
        }
        status::pods_ready(&mut e.written.status, e.observed.active, now_ms, e.observed.generation);
        let step = e.status_write(wk);
        let uid = e.uid.clone();
        self.outbox.plans.push(Plan {
            purpose: Purpose::PodsReady { uid },
            steps: vec![step],
        });
    }

    /// Looks at the pods of an evicted workload's objects (key, selector).
    pub(super) fn confirm_pods_gone(&mut self, jobs: Vec<(JobRef, String)>, uid: String, now_ms: i64) {
        let c = self.inflight.confirming.entry(uid.clone()).or_default();
        if c.in_flight || now_ms < c.not_before_ms {
            return;
        }
        c.in_flight = true;
        self.outbox.plans.push(Plan {
            purpose: Purpose::ConfirmPodsGone { uid },
            steps: jobs
                .into_iter()
                .map(|(job, selector)| Step::ConfirmPodsGone { job, selector })
                .collect(),
        });
    }

    /// The pods of an evicted workload's Job are gone: release its quota
    /// and requeue it (if it is still being evicted and its Job still
    /// reports no active pods).
    pub fn pods_gone(&mut self, uid: &str, now_ms: i64) {
        if self.inflight.confirming.remove(uid).is_none() {
            return;
        }
        let Some(wk) = self.table.by_uid.get(uid).cloned() else {
            return;
        };
        if self.engine.workload_state(uid) != Some(WorkloadState::Evicting) {
            return;
        }
        // Something changed meanwhile: the next tick looks again.
        let settled = self
            .member_keys(&wk)
            .iter()
            .filter_map(|jk| self.queued.jobs.get(jk))
            .all(|j| j.finished.is_some() || (j.suspended && j.live == 0));
        if settled {
            self.complete_eviction(&wk, now_ms);
        }
    }

    /// Pods of an evicted workload's Job remain (or the list failed): look
    /// again after a backoff.
    pub fn pods_remain(&mut self, uid: &str, now_ms: i64) {
        if let Some(c) = self.inflight.confirming.get_mut(uid) {
            c.in_flight = false;
            c.attempts = c.attempts.saturating_add(1);
            c.not_before_ms = now_ms.saturating_add(1000 << c.attempts.min(4));
        }
    }

    pub(super) fn complete_eviction(&mut self, wk: &ObjKey, now_ms: i64) {
        if self.gang_broken(wk) {
            // Not requeued: a gang without all its Jobs cannot run.
            self.retire_gang(wk);
            return;
        }
        if self.evicted_for_shape(wk) {
            // Not requeued as it was: made again with its new shape.
            self.make_again(wk);
            return;
        }
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        let uid = e.uid.clone();
        self.inflight.confirming.remove(&uid);
        let not_before = status::backoff_until(&e.written.status, now_ms);
        if self
            .engine
            .eviction_complete_with_backoff(&uid, now_ms, not_before)
            .is_err()
        {
            return;
        }
        self.inflight.evicting.remove(&uid);
        e.run.admitted_at = None;
        e.run.pods_ready_seen = false;
        if !e.observed.active {
            engine_ok("remove_workload", &uid, self.engine.remove_workload(&uid));
            e.run.in_engine = false;
        }
        let message = status::requeued(
            &mut e.written.status,
            not_before,
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        let mut steps = vec![e.status_write(wk)];
        steps.extend(self.restoration_steps(wk));
        steps.extend(self.events(wk, "Normal", "Requeued", "Requeue", message));
        self.outbox.plans.push(Plan {
            purpose: Purpose::Requeue { uid },
            steps,
        });
    }

    /// The steps that put back the scheduling directives the user wrote
    /// into an evicted workload's (suspended, unfinished) Jobs.
    pub(super) fn restoration_steps(&mut self, wk: &ObjKey) -> Vec<Step> {
        let mut steps = Vec::new();
        for jk in self.member_keys(wk) {
            let Some(j) = self.queued.jobs.get(&jk) else { continue };
            if j.finished.is_some() {
                continue;
            }
            match kinds::restore_patches(j) {
                Ok(patches) => steps.extend(
                    patches
                        .into_iter()
                        .map(|(status, patch)| super::jobs::job_step(&jk, status, patch)),
                ),
                Err(err) => {
                    self.record_error(
                        Kind::Queued(jk.kind),
                        jk.to_string(),
                        err.metric_label(),
                        err.to_string(),
                    );
                }
            }
        }
        steps
    }

    /// Time-driven checks: pods-ready timeouts, preemption notices whose
    /// deadline passed, and evictions whose pods are gone.
    pub(super) fn tick(&mut self, now_ms: i64) {
        self.recheck_pods_over(now_ms);
        self.tick_notices(now_ms);
        let evicting: Vec<String> = self.inflight.evicting.iter().cloned().collect();
        for uid in evicting {
            let Some(wk) = self.table.by_uid.get(&uid).cloned() else {
                continue;
            };
            if self.member_keys(&wk).is_empty() {
                // No Job: nobody we know runs its pods.
                self.complete_eviction(&wk, now_ms);
            } else {
                self.reconcile_owner(&wk, now_ms);
            }
        }
        let Some(timeout) = self.config.pods_ready_timeout_ms else {
            return;
        };
        let mut expired = Vec::new();
        for (wk, e) in &self.table.workloads {
            if e.run.pods_ready_seen || !e.run.in_engine || !e.has_jobs() {
                continue;
            }
            if let Some(at) = e.run.admitted_at
                && at.saturating_add(timeout) <= now_ms
                && self.engine.workload_state(&e.uid) == Some(WorkloadState::Admitted)
            {
                expired.push(wk.clone());
            }
        }
        for wk in expired {
            // A server that does not report `status.ready` (JobReadyPods off)
            // cannot tell us: give up the check rather than evict running work.
            let members = self.member_keys(&wk);
            let measurable = !members.is_empty()
                && members
                    .iter()
                    .all(|jk| self.queued.jobs.get(jk).is_some_and(|j| j.ready.is_some()));
            let e = self.table.workloads.get_mut(&wk).expect("present");
            if !measurable {
                tracing::warn!(workload = %wk, "Job reports no status.ready; pods-ready timeout not applied");
                e.run.pods_ready_seen = true;
                continue;
            }
            let msg = format!("Not all pods were ready within {}s of admission", timeout / 1000);
            self.evict_and_requeue(&wk, cond::reasons::PODS_READY_TIMEOUT, msg, false, now_ms);
        }
    }

    /// Evicts an admitted workload on the controller's own decision (a
    /// pods-ready timeout, idle GPUs): counted as a requeue with backoff,
    /// or deactivated (`spec.active: false`) when `deactivate` is asked or
    /// the requeue limit is exceeded.
    pub(super) fn evict_and_requeue(
        &mut self,
        wk: &ObjKey,
        reason: &'static str,
        mut msg: String,
        deactivate: bool,
        now_ms: i64,
    ) {
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        // The count comes from the API (anyone may write it): no overflow.
        let n = e
            .written
            .status
            .requeue_state
            .as_ref()
            .map_or(0, |r| r.count.max(0))
            .saturating_add(1);
        let over = self
            .config
            .requeue_limit
            .is_some_and(|limit| i64::from(n) > i64::from(limit));
        let uid = e.uid.clone();
        if over || deactivate {
            e.written.status.requeue_state = Some(RequeueState {
                count: n,
                requeue_at: None,
            });
            e.observed.active = false;
            if over {
                // Requeued as often as allowed: deactivated, as if its owner
                // had set spec.active to false (Kueue's RequeuingLimitExceeded).
                msg.push_str(&format!(
                    "; evicted {n} times, over the requeue limit of {}: deactivated (set spec.active to true to queue it again)",
                    self.config.requeue_limit.unwrap_or_default()
                ));
            } else {
                msg.push_str("; deactivated (set spec.active to true to queue it again)");
            }
            self.inflight.deactivating.insert(uid.clone());
            self.outbox.plans.push(Plan {
                purpose: Purpose::Deactivate { uid: uid.clone() },
                steps: vec![Step::PatchWorkload {
                    key: wk.clone(),
                    patch: serde_json::json!({"spec": {"active": false}}),
                }],
            });
        } else {
            let backoff = backoff_ms(self.config.backoff_base_ms, self.config.backoff_max_ms, n);
            e.written.status.requeue_state = Some(RequeueState {
                count: n,
                requeue_at: Some(time_of(now_ms.saturating_add(backoff))),
            });
        }
        if self.engine.evict(&uid).is_ok() {
            self.on_evicted(&uid, reason, None, &msg, now_ms);
        }
    }

    pub(super) fn next_pods_ready_deadline(&self) -> Option<i64> {
        let timeout = self.config.pods_ready_timeout_ms?;
        self.table
            .workloads
            .values()
            .filter(|e| !e.run.pods_ready_seen && e.run.in_engine && e.has_jobs())
            // Same rule as `tick`: only an admitted workload has a deadline
            // (a finished or evicting one would wake the loop at once, forever).
            .filter(|e| self.engine.workload_state(&e.uid) == Some(WorkloadState::Admitted))
            .filter_map(|e| e.run.admitted_at)
            .map(|t| t.saturating_add(timeout))
            .min()
    }
}
