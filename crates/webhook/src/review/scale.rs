//! The `scale` subresource of a queued serving object (`kubectl scale`, a
//! HorizontalPodAutoscaler). A Scale carries no labels, so the object is
//! read from the cache: one that is not queued, or not known yet, is left
//! alone (the controller holds whatever grows without admission).
//!
//! - held (waiting at zero replicas): raising it is refused; its owner
//!   asks for another count on the object itself, which keeps it held;
//! - running: growing past what it runs is refused, as for an update of
//!   the object; scaling down is allowed.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use sluice_api::labels::HELD_REPLICAS;
use sluice_kinds::JobKind;

use super::{Decision, Reviewer, jobs};

impl Reviewer {
    pub(super) fn validate_scale(&self, req: &AdmissionRequest<DynamicObject>, kind: JobKind) -> Decision {
        let mut d = Decision::default();
        let user = req.user_info.username.as_deref().unwrap_or("");
        if req.operation != Operation::Update || self.excluded(req) || self.cfg.is_admission_writer(user) {
            return d;
        }
        let replicas = |o: Option<&DynamicObject>| o.and_then(|o| o.data.pointer("/spec/replicas")?.as_i64());
        let (Some(old), Some(new)) = (replicas(req.old_object.as_ref()), replicas(req.object.as_ref())) else {
            return d;
        };
        if new <= old {
            return d;
        }
        let namespace = req.namespace.as_deref().unwrap_or_default();
        let Some(meta) = self.view.serving_object(kind, namespace, &req.name) else {
            return d;
        };
        let Some(queue) = self
            .cfg
            .queue_label_of(Some(&meta.labels))
            .and_then(|k| meta.labels.get(k))
        else {
            return d;
        };
        let noun = kind.kind();
        d.denials.push(match meta.held_replicas.filter(|_| old == 0) {
            Some(asked) => format!(
                "spec.replicas: cannot be raised from 0 to {new} by {user:?}: the {noun} waits in LocalQueue {queue:?}, held at 0 replicas until Sluice admits it, then runs the {asked} in metadata.annotations[{HELD_REPLICAS}]; to ask for {new}, set spec.replicas of the {noun} itself (it stays held, asking for {new})"
            ),
            None => format!(
                "spec.replicas: cannot grow from {old} to {new} while the {noun} runs: Sluice admitted it in LocalQueue {queue:?} for what it runs now; scaling down is allowed. To run more, {}, or delete and recreate the {noun}",
                jobs::requeue_hint(kind)
            ),
        });
        d
    }
}
