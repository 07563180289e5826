//! Partial admission of a batch/v1 Job: a Job with the
//! [`sluice_api::labels::MIN_PARALLELISM`] annotation may be admitted with
//! fewer pods than it asks for. It is then started with `spec.parallelism`
//! lowered to the pods admitted, the parallelism the user wrote kept in the
//! [`ORIGINAL_PARALLELISM`] annotation, and both put back when it is
//! evicted (with the template, by [`super::restoration_patch`]), so that
//! it asks for all its pods again when it is requeued, also after a
//! controller restart.
//!
//! `spec.completions` is left alone, as Kueue does: a Job of 8 completions
//! admitted with 2 of its 4 pods runs them 2 at a time. (A Job without
//! `completions` ends when one pod succeeds and the rest finish, whatever
//! its parallelism.)

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use super::{JobError, pods_count};

/// Job annotation holding `spec.parallelism` as the user wrote it, while
/// Sluice has lowered it to a partial admission. Present exactly while
/// `spec.parallelism` may differ from what the user wrote.
pub const ORIGINAL_PARALLELISM: &str = "sluice.dev/original-parallelism";

/// The recorded original parallelism, if Sluice lowered it.
fn recorded(job: &Job) -> Result<Option<i32>, JobError> {
    let Some(raw) = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ORIGINAL_PARALLELISM))
    else {
        return Ok(None);
    };
    match raw.trim().parse::<i32>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(JobError::Invalid {
            field: format!("metadata.annotations[{ORIGINAL_PARALLELISM}]"),
            problem: format!("expected the Job's original spec.parallelism (a positive integer), got {raw:?}"),
        }),
    }
}

/// The parallelism the user wrote: the recorded one while Sluice has
/// lowered it, else `spec.parallelism` (default 1).
pub fn original_parallelism(job: &Job) -> Result<i32, JobError> {
    let current = job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
    Ok(recorded(job)?.unwrap_or(current))
}

/// Adds to a Job's start patch (a merge patch) what running `admitted`
/// pods of its pod set needs: below the pods it asks for
/// (`min(parallelism, completions)` of the original parallelism),
/// `spec.parallelism: admitted` and the original recorded (unless already
/// recorded); otherwise the original parallelism back if it was lowered
/// (a Job admitted whole whose last partial run was never restored).
/// Idempotent: computed again on the patched Job it adds nothing.
pub(super) fn add_to_start(job: &Job, admitted: Option<u32>, patch: &mut Value) -> Result<(), JobError> {
    let recorded = recorded(job)?;
    let original = original_parallelism(job)?;
    let completions = job.spec.as_ref().and_then(|s| s.completions);
    let asked = pods_count(Some(original), completions);
    let target = match admitted.map(|n| i32::try_from(n).unwrap_or(i32::MAX)) {
        Some(n) if (1..asked).contains(&n) => n,
        _ => original,
    };
    let current = job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
    if target != current {
        patch["spec"]["parallelism"] = json!(target);
    }
    match (target != original, recorded.is_some()) {
        (true, false) => patch["metadata"]["annotations"][ORIGINAL_PARALLELISM] = json!(original.to_string()),
        (false, true) => patch["metadata"]["annotations"][ORIGINAL_PARALLELISM] = Value::Null,
        _ => {}
    }
    Ok(())
}

/// Adds to a Job's restoration patch the recorded parallelism and the
/// removal of its annotation; whether anything was recorded.
pub(super) fn add_to_restore(job: &Job, patch: &mut Value) -> Result<bool, JobError> {
    let Some(original) = recorded(job)? else {
        return Ok(false);
    };
    patch["spec"]["parallelism"] = json!(original);
    patch["metadata"]["annotations"][ORIGINAL_PARALLELISM] = Value::Null;
    Ok(true)
}
