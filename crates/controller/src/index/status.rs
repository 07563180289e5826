//! Decision → Workload status: the conditions (type, status, reason,
//! message), `state`, admission and pending explanation that each decision
//! writes. Pure functions of the status; the callers plan the writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use sluice_api::v1alpha1::{Admission, FlavorPendingReason, PendingExplanation, WorkloadStatus, conditions as cond};
use sluice_convert::text;
use sluice_scheduler::{self as eng, Explanation};

use super::ms;

pub(super) use sluice_convert::adapter::time_of;

/// Sets a condition, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now_ms: i64,
    generation: Option<i64>,
) {
    let now = time_of(now_ms);
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_transition_time: now,
            observed_generation: generation,
        }),
    }
}

/// Sets each `(type, status, reason, message)` in order (see
/// [`set_condition`]).
fn set_all(status: &mut WorkloadStatus, conds: &[(&str, &str, &str, &str)], now_ms: i64, generation: Option<i64>) {
    for (type_, st, reason, message) in conds {
        set_condition(&mut status.conditions, type_, st, reason, message, now_ms, generation);
    }
}

/// Whether the condition `type_` is `True`.
pub(super) fn is_true(status: &WorkloadStatus, type_: &str) -> bool {
    status.condition(type_).is_some_and(|c| c.status == cond::status::TRUE)
}

/// The end of a requeue backoff still running at `now_ms`, if any.
pub(super) fn backoff_until(status: &WorkloadStatus, now_ms: i64) -> Option<i64> {
    status
        .requeue_state
        .as_ref()
        .and_then(|r| r.requeue_at.as_ref())
        .map(ms)
        .filter(|t| *t > now_ms)
}

/// Fields of an observed status that others own, taken even from an event
/// older than our latest write: the `Finished` condition a workload's owner
/// sets.
pub(super) fn take_foreign(ours: &mut WorkloadStatus, observed: &WorkloadStatus) {
    if is_true(observed, cond::FINISHED)
        && !is_true(ours, cond::FINISHED)
        && let Some(c) = observed.condition(cond::FINISHED)
    {
        ours.conditions.retain(|x| x.type_ != cond::FINISHED);
        ours.conditions.push(c.clone());
    }
}

/// `status.pending` for an explanation: its summary `message`, the detail
/// per flavor (one entry per flavor), and the queue positions.
pub(super) fn pending_explanation(
    expl: &Explanation,
    message: &str,
    pos: Option<eng::QueuePosition>,
) -> PendingExplanation {
    PendingExplanation {
        reason: expl.reason_code().to_string(),
        message: message.to_string(),
        flavors: expl
            .flavors
            .iter()
            .map(|f| FlavorPendingReason {
                name: f.flavor.clone(),
                reason: verdict_reason(&f.verdict).to_string(),
                message: text::flavor_verdict(f),
                resources: Vec::new(),
            })
            .fold(Vec::new(), |mut acc: Vec<FlavorPendingReason>, f| {
                // The list is keyed by flavor name: one entry per flavor.
                match acc.iter_mut().find(|x| x.name == f.name) {
                    Some(x) => {
                        x.message.push_str("; ");
                        x.message.push_str(&f.message);
                    }
                    None => acc.push(f),
                }
                acc
            }),
        // 1-based, as every position users read (1: next).
        position_in_cluster_queue: pos.map(|p| p.in_cluster_queue as i32 + 1),
        position_in_local_queue: pos.map(|p| p.in_local_queue as i32 + 1),
        estimated_start: None,
    }
}

/// The reason code of a flavor's verdict.
pub(super) fn verdict_reason(v: &eng::Verdict) -> &'static str {
    match v {
        eng::Verdict::FlavorNotFound => "FlavorNotFound",
        eng::Verdict::UntoleratedTaint { .. } => "UntoleratedTaint",
        eng::Verdict::NodeLabelMismatch { .. } => "NodeLabelMismatch",
        eng::Verdict::InsufficientQuota { .. } => "InsufficientQuota",
        eng::Verdict::ExceedsMaxQuota { .. } => "ExceedsMaxQuota",
        eng::Verdict::PreemptionNotPossible { .. } => "PreemptionNotPossible",
        eng::Verdict::NoNodeFits { .. } => "NoNodeFits",
        eng::Verdict::NeverOnNodes(_) => "NeverOnNodes",
        eng::Verdict::SharedGpusOnly { .. } => "SharedGpusOnly",
        eng::Verdict::WholeGpusOnly => "WholeGpusOnly",
    }
}

/// Admitted with `admission`: quota reserved and admitted (`note`, why it
/// went ahead of a reservation, added to the message); an earlier
/// eviction or preemption is over, and readiness of an earlier admission
/// does not carry over. No pending explanation any more.
pub(super) fn admitted(
    status: &mut WorkloadStatus,
    admission: Admission,
    note: Option<&str>,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) {
    let mut msg = format!("Quota reserved in ClusterQueue {}", admission.cluster_queue);
    if let Some(note) = note {
        msg = format!("{msg}; {note}");
    }
    let conds = [
        (
            cond::QUOTA_RESERVED,
            cond::status::TRUE,
            cond::reasons::QUOTA_RESERVED,
            msg.as_str(),
        ),
        (
            cond::ADMITTED,
            cond::status::TRUE,
            cond::reasons::ADMITTED,
            "The workload is admitted",
        ),
    ];
    set_all(status, &conds, now_ms, generation);
    let c = &mut status.conditions;
    for t in [cond::EVICTED, cond::PREEMPTED] {
        if let Some(x) = c.iter_mut().find(|x| x.type_ == t && x.status == cond::status::TRUE) {
            x.status = cond::status::FALSE.into();
            x.last_transition_time = time_of(now_ms);
            x.reason = cond::reasons::ADMITTED.into();
            x.message = "Admitted again".into();
        }
    }
    // Readiness of a previous admission does not carry over.
    if let Some(x) = c
        .iter_mut()
        .find(|x| x.type_ == cond::PODS_READY && x.status == cond::status::TRUE)
    {
        x.status = cond::status::FALSE.into();
        x.last_transition_time = time_of(now_ms);
        x.reason = cond::reasons::WAIT_FOR_START.into();
        x.message = "Admitted again; waiting for its pods".into();
    }
    status.admission = Some(admission);
    status.pending = None;
    status.state = Some(status.derive_state(active));
}

/// Evicted for `reason` (and preempted, with the preemption's reason):
/// it keeps its quota until its pods are gone.
pub(super) fn evicted(
    status: &mut WorkloadStatus,
    reason: &str,
    preempted: Option<&str>,
    message: &str,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) {
    let mut conds = vec![(cond::EVICTED, cond::status::TRUE, reason, message)];
    conds.extend(preempted.map(|p| (cond::PREEMPTED, cond::status::TRUE, p, message)));
    set_all(status, &conds, now_ms, generation);
    // Its GPUs go back to the queue: an idle warning no longer applies.
    status.conditions.retain(|c| c.type_ != cond::GPU_IDLE);
    status.state = Some(status.derive_state(active));
}

/// An eviction is complete: quota released, no admission; requeued at
/// once, after a backoff (`not_before`), or not at all while deactivated
/// (not `active`). Returns the `Requeued` condition's message.
pub(super) fn requeued(
    status: &mut WorkloadStatus,
    not_before: Option<i64>,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) -> &'static str {
    let (requeued, reason, message) = match not_before {
        _ if !active => (
            cond::status::FALSE,
            cond::reasons::DEACTIVATED,
            "Deactivated; not requeued until spec.active is true",
        ),
        Some(_) => (cond::status::FALSE, cond::reasons::BACKOFF, "Requeue after backoff"),
        None => (cond::status::TRUE, cond::reasons::PENDING, "Requeued after eviction"),
    };
    let conds = [
        (
            cond::QUOTA_RESERVED,
            cond::status::FALSE,
            cond::reasons::PENDING,
            "Quota released after eviction",
        ),
        (
            cond::ADMITTED,
            cond::status::FALSE,
            cond::reasons::PENDING,
            "Evicted; waiting in the queue again",
        ),
        (cond::REQUEUED, requeued, reason, message),
    ];
    set_all(status, &conds, now_ms, generation);
    status.admission = None;
    status.state = Some(status.derive_state(active));
    message
}

/// Finished for `reason`: no pending explanation any more.
pub(super) fn finished(
    status: &mut WorkloadStatus,
    reason: &str,
    message: &str,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) {
    set_all(
        status,
        &[(cond::FINISHED, cond::status::TRUE, reason, message)],
        now_ms,
        generation,
    );
    if is_true(status, cond::PREEMPTION_NOTICE) {
        // It finished during its notice: nothing is left to suspend.
        set_condition(
            &mut status.conditions,
            cond::PREEMPTION_NOTICE,
            cond::status::FALSE,
            reason,
            "Finished during its preemption notice",
            now_ms,
            generation,
        );
    }
    status.pending = None;
    status.state = Some(status.derive_state(active));
}

/// All pods were ready (or succeeded) at least once.
pub(super) fn pods_ready(status: &mut WorkloadStatus, active: bool, now_ms: i64, generation: Option<i64>) {
    let ready = "All pods were ready or succeeded";
    set_all(
        status,
        &[(cond::PODS_READY, cond::status::TRUE, cond::reasons::PODS_READY, ready)],
        now_ms,
        generation,
    );
    status.state = Some(status.derive_state(active));
}

/// Pending because the namespace is not selected by its ClusterQueue's
/// namespaceSelector; `message` says which and why
/// (`ClusterQueueSpec::namespace_not_selected`).
pub(super) fn namespace_not_selected(
    status: &mut WorkloadStatus,
    message: &str,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) {
    let message = message.to_string();
    let reason = cond::reasons::NAMESPACE_NOT_SELECTED;
    set_all(
        status,
        &[(cond::QUOTA_RESERVED, cond::status::FALSE, reason, &message)],
        now_ms,
        generation,
    );
    status.pending = Some(PendingExplanation {
        reason: cond::reasons::NAMESPACE_NOT_SELECTED.into(),
        message,
        ..Default::default()
    });
    status.state = Some(status.derive_state(active));
}

/// Pending for `reason`, its text not written yet (see [`explained`]).
pub(super) fn pending(status: &mut WorkloadStatus, reason: &str, active: bool, now_ms: i64, generation: Option<i64>) {
    set_all(
        status,
        &[(cond::QUOTA_RESERVED, cond::status::FALSE, reason, "")],
        now_ms,
        generation,
    );
    status.pending = None;
    status.state = Some(status.derive_state(active));
}

/// Pending with the engine's explanation and position: the condition says
/// it all (its transition time kept when already `False`);
/// `status.pending` has the summary and the per-flavor detail.
pub(super) fn explained(
    status: &mut WorkloadStatus,
    expl: &Explanation,
    pos: Option<eng::QueuePosition>,
    active: bool,
    now_ms: i64,
    generation: Option<i64>,
) {
    let full = text::explanation(expl);
    let position = pos
        .map(|p| {
            format!(
                " (position {} in ClusterQueue, {} in LocalQueue)",
                p.in_cluster_queue + 1,
                p.in_local_queue + 1
            )
        })
        .unwrap_or_default();
    // The condition says it all; `status.pending` has the summary, and
    // the per-flavor detail in its own list (not repeated).
    let summary = text::explanation_summary(expl);
    status.pending = Some(pending_explanation(expl, &format!("{summary}{position}"), pos));
    // Kept as it is when already False (its transition time with it).
    let since = status
        .condition(cond::QUOTA_RESERVED)
        .filter(|c| c.status == cond::status::FALSE)
        .map(|c| ms(&c.last_transition_time))
        .unwrap_or(now_ms);
    let message = format!("{full}{position}");
    set_all(
        status,
        &[(cond::QUOTA_RESERVED, cond::status::FALSE, expl.reason_code(), &message)],
        since,
        generation,
    );
    status.state = Some(status.derive_state(active));
}

#[cfg(test)]
mod tests;
