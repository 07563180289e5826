//! Preemption with a notice. A victim whose ClusterQueue sets
//! `spec.preemption.noticeSeconds` is told before it is suspended:
//!
//! ```text
//!  engine preempts ─► notice begins: PreemptionNotice=True (its start is
//!                     the condition's lastTransitionTime), an Event, the
//!                     running pods annotated with the deadline
//!                        │  the victim runs on; the engine holds it as
//!                        │  Evicting, its quota claimed for the preemptor
//!                        ▼
//!  deadline passed, or sluice.dev/checkpoint-done at/after the start
//!                     ─► PreemptionNotice=False (Suspended), then the
//!                        usual eviction (`eviction`): Evicted, Preempted,
//!                        the object suspended, the quota released once
//!                        its pods are gone
//! ```
//!
//! Where a notice stands is the pure [`rule`]. The notice is the victim's
//! ClusterQueue's (its admin's); what the tenant writes can only shorten
//! it. A restarted controller takes the start from the condition, so the
//! deadline does not move.

pub(super) mod rule;

use sluice_api::labels::{CHECKPOINT_DONE, PREEMPTION_NOTICE};
use sluice_api::v1alpha1::conditions as cond;
use sluice_kinds as kinds;
use sluice_scheduler::{self as eng, WorkloadState};

use super::status::{is_true, set_condition};
use super::{Index, ms};
use crate::plan::{ObjKey, Plan, Purpose, Step};
use rule::Notice;

/// A notice under way (by victim uid in `InFlight::noticed`).
#[derive(Clone, Debug)]
pub(super) struct Noticed {
    pub(super) start_ms: i64,
    pub(super) secs: u32,
    /// The preemption's reason (the `Preempted` condition's reason).
    pub(super) reason: &'static str,
    /// The preemption's message, for the eviction that follows.
    pub(super) message: String,
}

impl Noticed {
    fn deadline_ms(&self) -> i64 {
        rule::deadline(self.start_ms, self.secs)
    }
}

impl Index {
    /// A victim of the engine: told and left running when its ClusterQueue
    /// gives a notice, evicted at once otherwise.
    pub(super) fn on_preempted(&mut self, p: &eng::Preemption, message: String, now_ms: i64) {
        match self.notice_secs(&p.victim) {
            Some(secs) => self.begin_notice(&p.victim, p.reason.as_str(), message, secs, now_ms),
            None => self.on_evicted(
                &p.victim,
                cond::reasons::PREEMPTED,
                Some(p.reason.as_str()),
                &message,
                now_ms,
            ),
        }
    }

    /// The notice a victim gets: the `noticeSeconds` of the ClusterQueue
    /// it is admitted to.
    fn notice_secs(&self, uid: &str) -> Option<u32> {
        let adm = self.engine.admission(uid)?;
        let cq = self.defs.cluster_queues.get(&*adm.cluster_queue)?;
        cq.spec.preemption.notice_seconds
    }

    /// Tells a victim: the condition (its start kept from a notice already
    /// running, as after a restart), an Event, its pods annotated. Then
    /// looks at once whether it is already over.
    fn begin_notice(&mut self, uid: &str, reason: &'static str, message: String, secs: u32, now_ms: i64) {
        let Some(wk) = self.table.by_uid.get(uid).cloned() else {
            return;
        };
        let e = self.table.workloads.get_mut(&wk).expect("indexed");
        // Whole seconds, as the API keeps the condition's time: an
        // acknowledgement stamped within the same second counts.
        let start_ms = e
            .written
            .status
            .condition(cond::PREEMPTION_NOTICE)
            .filter(|c| c.status == cond::status::TRUE)
            .map_or(now_ms.div_euclid(1000).saturating_mul(1000), |c| {
                ms(&c.last_transition_time)
            });
        let n = Noticed {
            start_ms,
            secs,
            reason,
            message,
        };
        let deadline = rule::rfc3339(n.deadline_ms());
        let text = format!(
            "{}; it is suspended at {deadline}, or as soon as it writes {CHECKPOINT_DONE}",
            n.message
        );
        let conditions = &mut e.written.status.conditions;
        let generation = e.observed.generation;
        set_condition(
            conditions,
            cond::PREEMPTION_NOTICE,
            cond::status::TRUE,
            cond::reasons::PREEMPTED,
            &text,
            start_ms,
            generation,
        );
        let mut steps = vec![e.status_write(&wk)];
        steps.extend(self.events(&wk, "Normal", cond::reasons::PREEMPTION_NOTICE, "Preempt", &text));
        steps.extend(self.annotate_pods_steps(&wk, deadline));
        self.inflight.noticed.insert(uid.to_string(), n);
        self.outbox.plans.push(Plan {
            purpose: Purpose::Notice { uid: uid.to_string() },
            steps,
        });
        self.notice_running(&wk, now_ms);
    }

    /// The pods of the workload's unfinished objects, annotated with the
    /// deadline.
    fn annotate_pods_steps(&self, wk: &ObjKey, deadline: String) -> Vec<Step> {
        self.member_keys(wk)
            .into_iter()
            .filter_map(|jk| {
                let j = self.queued.jobs.get(&jk).filter(|j| j.finished.is_none())?;
                Some(Step::AnnotatePods {
                    selector: kinds::pods_selector_of(j),
                    job: jk,
                    key: PREEMPTION_NOTICE,
                    value: deadline.clone(),
                })
            })
            .collect()
    }

    /// Whether the workload is under a notice that still runs. One that is
    /// over (deadline passed, or acknowledged) ends here: the workload is
    /// evicted. One whose workload is no longer being evicted (it finished,
    /// or went) is forgotten.
    pub(super) fn notice_running(&mut self, wk: &ObjKey, now_ms: i64) -> bool {
        let Some(uid) = self.table.workloads.get(wk).map(|e| e.uid.clone()) else {
            return false;
        };
        let Some(n) = self.inflight.noticed.get(&uid).cloned() else {
            return false;
        };
        if self.engine.workload_state(&uid) != Some(WorkloadState::Evicting) {
            self.inflight.noticed.remove(&uid);
            return false;
        }
        match rule::notice_state(now_ms, n.start_ms, Some(n.secs), self.acknowledged_at(wk)) {
            Notice::Running { .. } => true,
            state => {
                self.end_notice(wk, &uid, n, state, now_ms);
                false
            }
        }
    }

    /// The latest time the workload's objects say their state was saved
    /// ([`CHECKPOINT_DONE`]); values that are not times are ignored.
    fn acknowledged_at(&self, wk: &ObjKey) -> Option<i64> {
        self.member_keys(wk)
            .iter()
            .filter_map(|jk| self.queued.jobs.get(jk)?.checkpoint_done.as_deref())
            .filter_map(rule::ack_time)
            .max()
    }

    /// The notice is over: `PreemptionNotice=False`, and the eviction the
    /// preemption asked for, written with it.
    fn end_notice(&mut self, wk: &ObjKey, uid: &str, n: Noticed, state: Notice, now_ms: i64) {
        self.inflight.noticed.remove(uid);
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        let why = match state {
            Notice::Acknowledged => format!("Suspended: it wrote {CHECKPOINT_DONE}"),
            _ => format!("Suspended: its notice ended at {}", rule::rfc3339(n.deadline_ms())),
        };
        let generation = e.observed.generation;
        set_condition(
            &mut e.written.status.conditions,
            cond::PREEMPTION_NOTICE,
            cond::status::FALSE,
            cond::reasons::SUSPENDED,
            &why,
            now_ms,
            generation,
        );
        self.on_evicted(uid, cond::reasons::PREEMPTED, Some(n.reason), &n.message, now_ms);
    }

    /// Time-driven: notices whose deadline passed end.
    pub(super) fn tick_notices(&mut self, now_ms: i64) {
        let uids: Vec<String> = self.inflight.noticed.keys().cloned().collect();
        for uid in uids {
            match self.table.by_uid.get(&uid).cloned() {
                Some(wk) => {
                    self.notice_running(&wk, now_ms);
                }
                None => {
                    self.inflight.noticed.remove(&uid);
                }
            }
        }
    }

    /// Once, after the first engine run of this index (a restart, a new
    /// leader): a `PreemptionNotice=True` left on a workload that run did
    /// not preempt again (its preemptor went meanwhile, or was not reached)
    /// is withdrawn, so that it does not shorten a later notice.
    pub(super) fn withdraw_stale_notices(&mut self, now_ms: i64) {
        if std::mem::replace(&mut self.inflight.notices_checked, true) {
            return;
        }
        let stale: Vec<ObjKey> = self
            .table
            .workloads
            .iter()
            .filter(|(_, e)| is_true(&e.written.status, cond::PREEMPTION_NOTICE))
            .filter(|(_, e)| !self.inflight.noticed.contains_key(&e.uid))
            .filter(|(_, e)| self.engine.workload_state(&e.uid) == Some(WorkloadState::Admitted))
            .map(|(wk, _)| wk.clone())
            .collect();
        for wk in stale {
            let e = self.table.workloads.get_mut(&wk).expect("listed");
            let generation = e.observed.generation;
            set_condition(
                &mut e.written.status.conditions,
                cond::PREEMPTION_NOTICE,
                cond::status::FALSE,
                cond::reasons::WITHDRAWN,
                "The preemption no longer stands: the controller restarted and did not preempt it again",
                now_ms,
                generation,
            );
            let uid = e.uid.clone();
            let steps = vec![e.status_write(&wk)];
            self.outbox.plans.push(Plan {
                purpose: Purpose::Notice { uid },
                steps,
            });
        }
    }

    /// The earliest deadline of a notice under way.
    pub(super) fn next_notice_deadline(&self) -> Option<i64> {
        self.inflight.noticed.values().map(Noticed::deadline_ms).min()
    }
}
