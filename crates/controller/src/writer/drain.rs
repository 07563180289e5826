//! The writer's task: takes plans from the [`WriteQueue`] in lane order
//! and hands what comes of them back to the index.

use std::sync::Arc;

use super::{Feedback, Lane, WriteError, WriteQueue, Writer};
use crate::metrics::Metrics;
use crate::plan::{Plan, Step};

/// Where the outcome of a plan goes: `(epoch, plan, feedback)`.
type Outcomes = tokio::sync::mpsc::UnboundedSender<(u64, Plan, Feedback)>;

/// Writes queued plans forever:
/// - state changes first, each as soon as the client-side limit allows;
/// - while a state change waits for its token, one lazy plan from the lazy
///   lanes' own share (a write made in the gap, which costs the state
///   change nothing from its budget);
/// - with no state change waiting, the lazy lanes in turn from budget the
///   state lane leaves unused or their own share ([`Writer::spare`]).
///
/// Failures (other than "not the leader"), status-write acknowledgements
/// and pods-gone answers go back to the index.
pub async fn drain(
    writer: Writer,
    queue: Arc<WriteQueue>,
    outcomes: Outcomes,
    metrics: Arc<impl AsRef<Metrics> + Send + Sync + 'static>,
) {
    let metrics = (*metrics).as_ref();
    loop {
        if let Some((epoch, plan)) = queue.pop_state() {
            if writer.state_wait().is_some()
                && let Some((which, writes)) = queue.peek_lazy()
                && writer.share(writes)
                && let Some((lazy_epoch, lazy)) = queue.pop_lazy(which)
                && !write(&writer, lazy_epoch, lazy, true, &outcomes, metrics).await
            {
                return;
            }
            if !write(&writer, epoch, plan, false, &outcomes, metrics).await {
                return;
            }
        } else if let Some((which, writes)) = queue.next_lazy() {
            match writer.spare(writes) {
                Ok(()) => {
                    if let Some((epoch, plan)) = queue.pop_lazy(which)
                        && !write(&writer, epoch, plan, true, &outcomes, metrics).await
                    {
                        return;
                    }
                }
                Err(wait) => {
                    // A state change queued meanwhile goes first.
                    tokio::select! {
                        () = queue.wait() => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        } else {
            queue.wait().await;
        }
    }
}

/// Applies one plan (`prepaid`: its tokens are taken) and hands the
/// outcome back; `false` when nobody listens any more.
async fn write(writer: &Writer, epoch: u64, plan: Plan, prepaid: bool, outcomes: &Outcomes, metrics: &Metrics) -> bool {
    let result = writer.apply_with(&plan, Some(metrics), prepaid).await;
    match result {
        // Status writes are acknowledged and pod checks answered; other
        // successes need nothing.
        Ok(acks) if plan.steps.iter().any(Step::wants_feedback) => {
            crate::outage::succeeded();
            outcomes.send((epoch, plan, Ok(acks))).is_ok()
        }
        Ok(_) => {
            crate::outage::succeeded();
            true
        }
        Err(e) if matches!(e.error, WriteError::NotLeader { .. }) => {
            metrics.dropped(Lane::of(&plan.purpose).label(), "not_leader");
            // Still told: if this replica still leads (the fence lapsed
            // for a moment), the index rolls the admission back.
            outcomes.send((epoch, plan, Err(e))).is_ok()
        }
        Err(e) => {
            if e.error.unavailable() {
                crate::outage::failed("write", &e);
            } else if !matches!(e.error, WriteError::PodsRemain { .. }) {
                tracing::warn!(error = %e, reason = e.error.metric_label(), "write failed");
            }
            outcomes.send((epoch, plan, Err(e))).is_ok()
        }
    }
}
