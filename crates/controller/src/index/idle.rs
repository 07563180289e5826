//! Idle-GPU reclaim, the index's side: which admitted workloads a check
//! looks at, and what a check's verdicts do (warn, evict, deactivate),
//! under each ClusterQueue's `spec.idleReclaim`.
//!
//! The rule itself (a window of utilisation samples, missing data never
//! idle) is `sluice_scheduler::idle`; who waits for a workload's quota is
//! [`sluice_scheduler::Engine::waiting_for_quota_of`]; the samples come
//! from Prometheus (`crate::idle`).

use std::collections::BTreeMap;

use sluice_api::resources::is_gpu;
use sluice_api::v1alpha1::{IdleAction, IdlePolicy, conditions as cond};
use sluice_scheduler::WorkloadState;
use sluice_scheduler::idle::Idleness;
use sluice_scheduler::reclaim;

use super::status::{is_true, set_condition};
use super::{Index, time_of};
use crate::plan::{JobRef, ObjKey, Plan, Purpose};
use sluice_kinds as kinds;

/// An admitted workload a check looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleTarget {
    pub workload: ObjKey,
    pub uid: String,
    pub cluster_queue: String,
    pub policy: IdlePolicy,
    pub admitted_at_ms: i64,
    /// Its objects and the label selector of their pods.
    pub pods: Vec<(JobRef, String)>,
}

/// What a check found.
#[derive(Clone, Debug)]
pub enum IdleOutcome {
    /// Prometheus could not be asked or gave no usable answer: nothing is
    /// judged; the ClusterQueues with a policy say why.
    Unavailable {
        /// The condition's reason.
        reason: &'static str,
        /// `sluice_idle_check_failures_total{reason}`.
        metric: &'static str,
        message: String,
    },
    /// A verdict per target: its uid, the admission time it was judged
    /// for (a workload admitted again since is not judged by it), and the
    /// verdict.
    Checked { verdicts: Vec<(String, i64, Idleness)> },
}

/// What applying a check did, for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdleApplied {
    /// Workloads found idle, per ClusterQueue with a policy (0 included).
    pub idle: BTreeMap<String, usize>,
    /// Actions taken: (ClusterQueue, action).
    pub reclaims: Vec<(String, IdleAction)>,
    /// GPUs × idle window of the workloads evicted or deactivated, hours.
    pub gpu_hours_reclaimed: f64,
}

/// The last check's health, for the `IdleCheckUnavailable` condition.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct IdleHealth {
    pub(super) unavailable: Option<(&'static str, String)>,
    pub(super) since_ms: i64,
}

impl Index {
    /// The idle policy of a ClusterQueue, if it has one. A ClusterQueue
    /// with an invalid policy is refused whole (its `Active` condition
    /// names the field) and the one before it stays in force.
    fn idle_policy(&self, cluster_queue: &str) -> Option<IdlePolicy> {
        let spec = self
            .defs
            .cluster_queues
            .get(cluster_queue)?
            .spec
            .idle_reclaim
            .as_ref()?;
        spec.policy().ok()
    }

    /// Whether any ClusterQueue has an idle policy (checks run only then).
    pub fn has_idle_policies(&self) -> bool {
        self.defs
            .cluster_queues
            .values()
            .any(|cq| cq.spec.idle_reclaim.is_some())
    }

    /// The admitted workloads whose ClusterQueue has a valid idle policy
    /// and whose window may already be judged (admitted at least grace
    /// period + window ago).
    pub fn idle_targets(&self, now_ms: i64) -> Vec<IdleTarget> {
        let mut out = Vec::new();
        for (wk, e) in &self.table.workloads {
            let Some(at) = e.run.admitted_at else { continue };
            if !e.run.in_engine || self.engine.workload_state(&e.uid) != Some(WorkloadState::Admitted) {
                continue;
            }
            let Some(adm) = self.engine.admission(&e.uid) else {
                continue;
            };
            let Some(policy) = self.idle_policy(&adm.cluster_queue) else {
                continue;
            };
            if at
                .saturating_add(policy.grace_period_ms)
                .saturating_add(policy.window_ms)
                > now_ms
            {
                continue;
            }
            let pods: Vec<(JobRef, String)> = self
                .member_keys(wk)
                .into_iter()
                .filter_map(|jk| {
                    let j = self.queued.jobs.get(&jk)?;
                    Some((jk, kinds::pods_selector_of(j)))
                })
                .collect();
            if pods.is_empty() {
                continue;
            }
            out.push(IdleTarget {
                workload: wk.clone(),
                uid: e.uid.clone(),
                cluster_queue: adm.cluster_queue.to_string(),
                policy,
                admitted_at_ms: at,
                pods,
            });
        }
        out
    }

    /// Applies a check's outcome: records the check's health, and for
    /// each idle workload takes its queue's action (when someone waits for
    /// its quota, unless the policy says always).
    pub fn apply_idle(&mut self, outcome: IdleOutcome, now_ms: i64) -> IdleApplied {
        let mut applied = IdleApplied::default();
        for (name, cq) in &self.defs.cluster_queues {
            if cq.spec.idle_reclaim.is_some() {
                applied.idle.insert(name.clone(), 0);
            }
        }
        let verdicts = match outcome {
            IdleOutcome::Unavailable { reason, message, .. } => {
                self.set_idle_health(Some((reason, message)), now_ms);
                return applied;
            }
            IdleOutcome::Checked { verdicts } => verdicts,
        };
        self.set_idle_health(None, now_ms);
        for (uid, admitted_at, verdict) in verdicts {
            let Some(wk) = self.table.by_uid.get(&uid).cloned() else {
                continue;
            };
            if self.engine.workload_state(&uid) != Some(WorkloadState::Admitted)
                || self.table.workloads.get(&wk).and_then(|e| e.run.admitted_at) != Some(admitted_at)
            {
                continue;
            }
            let Some(adm) = self.engine.admission(&uid) else {
                continue;
            };
            let cq_name = adm.cluster_queue.to_string();
            let Some(policy) = self.idle_policy(&cq_name) else {
                continue;
            };
            match verdict {
                Idleness::Idle {
                    mean_percent,
                    max_percent,
                    pods,
                } => {
                    *applied.idle.entry(cq_name.clone()).or_default() += 1;
                    let gpus: i64 = adm
                        .pod_sets
                        .iter()
                        .flat_map(|ps| ps.usage.iter())
                        .filter(|(r, _)| is_gpu(r))
                        .map(|(_, a)| *a)
                        .sum::<i64>()
                        / 1000;
                    let waiter = self.engine.waiting_for_quota_of(&uid);
                    let facts = self.idle_facts(&wk, &cq_name, waiter.is_some(), now_ms);
                    let decision = reclaim::decide(sluice_convert::reclaim_policy(&policy), &facts);
                    let mut msg = format!(
                        "GPUs idle: utilisation {mean_percent:.1} % on average (at most {max_percent:.1} %) across {pods} GPU pod(s) for the last {}, below {} %",
                        minutes(policy.window_ms),
                        policy.utilization_below
                    );
                    if let Some(w) = &waiter
                        && let Some(wwk) = self.table.by_uid.get(&**w)
                    {
                        msg.push_str(&format!("; {wwk} waits for its quota"));
                    }
                    if self.act_on_idle(&wk, decision, msg, now_ms) {
                        applied.reclaims.push((cq_name, policy.action));
                        if policy.action != IdleAction::Warn {
                            applied.gpu_hours_reclaimed += gpus as f64 * policy.window_ms as f64 / 3_600_000.0;
                        }
                    }
                }
                Idleness::Busy { .. } => self.gpu_busy(&wk, now_ms),
                Idleness::Unknown(why) => {
                    tracing::debug!(workload = %wk, %why, "idle check: cannot tell");
                }
            }
        }
        applied
    }

    /// What the reclaim rule needs to know of an idle workload now. Its
    /// requeue limit is `--requeue-limit`, applied to every eviction by
    /// [`Index::evict_and_requeue`].
    fn idle_facts(&self, wk: &ObjKey, cq_name: &str, contended: bool, now_ms: i64) -> reclaim::IdleFacts {
        let e = self.table.workloads.get(wk);
        let min_runtime_ms = self
            .defs
            .cluster_queues
            .get(cq_name)
            .and_then(|cq| cq.spec.min_runtime_seconds)
            .unwrap_or(0)
            .max(0)
            .saturating_mul(1000);
        reclaim::IdleFacts {
            now: now_ms,
            contended,
            warned: e.is_some_and(|e| is_true(&e.written.status, cond::GPU_IDLE)),
            admitted_at: e.and_then(|e| e.run.admitted_at).unwrap_or(now_ms),
            min_runtime_ms,
            idle_evictions: 0,
            requeue_limit: None,
        }
    }

    /// Does what the reclaim rule decided; `false` when nothing was done.
    fn act_on_idle(&mut self, wk: &ObjKey, decision: reclaim::Reclaim, msg: String, now_ms: i64) -> bool {
        use reclaim::{Hold, Reclaim};
        match decision {
            Reclaim::Hold(Hold::MinRuntime) => {
                tracing::info!(workload = %wk, "idle, but within its ClusterQueue's minRuntimeSeconds: not reclaimed yet");
                false
            }
            Reclaim::Hold(_) => false,
            Reclaim::Warn => {
                self.warn_idle(wk, &msg, now_ms);
                true
            }
            Reclaim::Evict | Reclaim::Deactivate { .. } => {
                let deactivate = matches!(decision, Reclaim::Deactivate { .. });
                tracing::info!(workload = %wk, deactivate, "{msg}");
                self.evict_and_requeue(wk, cond::reasons::IDLE_GPU, msg, deactivate, now_ms);
                true
            }
        }
    }

    /// `GPUIdle=True` with the reason, and a Warning Event.
    fn warn_idle(&mut self, wk: &ObjKey, msg: &str, now_ms: i64) {
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        set_condition(
            &mut e.written.status.conditions,
            cond::GPU_IDLE,
            cond::status::TRUE,
            cond::reasons::IDLE_GPU,
            msg,
            now_ms,
            e.observed.generation,
        );
        let uid = e.uid.clone();
        let mut steps = vec![e.status_write(wk)];
        steps.extend(self.events(wk, "Warning", cond::reasons::IDLE_GPU, "Warn", msg));
        self.outbox.plans.push(Plan {
            purpose: Purpose::IdleGpu { uid },
            steps,
        });
    }

    /// A warned workload uses its GPUs again: `GPUIdle=False`.
    fn gpu_busy(&mut self, wk: &ObjKey, now_ms: i64) {
        let Some(e) = self.table.workloads.get_mut(wk) else {
            return;
        };
        if !is_true(&e.written.status, cond::GPU_IDLE) {
            return;
        }
        set_condition(
            &mut e.written.status.conditions,
            cond::GPU_IDLE,
            cond::status::FALSE,
            cond::reasons::GPU_BUSY,
            "GPU utilisation is above the idle threshold again",
            now_ms,
            e.observed.generation,
        );
        let uid = e.uid.clone();
        let step = e.status_write(wk);
        self.outbox.plans.push(Plan {
            purpose: Purpose::IdleGpu { uid },
            steps: vec![step],
        });
    }

    fn set_idle_health(&mut self, unavailable: Option<(&'static str, String)>, now_ms: i64) {
        let changed = self
            .idle_health
            .as_ref()
            .is_none_or(|h| h.unavailable.is_some() != unavailable.is_some());
        let since_ms = match &self.idle_health {
            Some(h) if !changed => h.since_ms,
            _ => now_ms,
        };
        if let Some((_, message)) = &unavailable
            && changed
        {
            tracing::warn!("{}", unavailable_log(message));
        } else if changed && self.idle_health.is_some() {
            tracing::info!("idle-GPU check available again");
        }
        self.idle_health = Some(IdleHealth { unavailable, since_ms });
    }

    /// A ClusterQueue's `IdleCheckUnavailable` condition: only for a queue
    /// with an idle policy, once a check ran or could not.
    pub fn idle_check_condition(
        &self,
        cluster_queue: &str,
    ) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
        self.idle_policy(cluster_queue)?;
        let h = self.idle_health.as_ref()?;
        let (status, reason, message) = match &h.unavailable {
            Some((reason, message)) => (cond::status::TRUE, *reason, message.clone()),
            None => (
                cond::status::FALSE,
                cond::reasons::IDLE_CHECK_OK,
                "The last idle-GPU check succeeded".to_string(),
            ),
        };
        Some(Condition {
            type_: cond::IDLE_CHECK_UNAVAILABLE.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: time_of(h.since_ms),
            observed_generation: None,
        })
    }
}

fn minutes(ms: i64) -> String {
    if ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else {
        format!("{} s", ms / 1000)
    }
}

/// The warning logged when the idle-GPU check becomes unavailable (its
/// `message` already says that nothing is judged idle).
pub(crate) fn unavailable_log(message: &str) -> String {
    format!("idle-GPU check unavailable: {message}")
}
