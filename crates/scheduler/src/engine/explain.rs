//! Why a workload waits. Explanations are shared (`Arc`): workloads of one
//! shape that failed in one queue are parked under the queue's explanation
//! for that shape, and a cycle reports a workload only when its reason
//! changed, not when the numbers in it moved.

use std::sync::Arc;

use crate::decision::{Cycle, Explanation, FlavorVerdict, PendingReason, Verdict};

use super::flavor::AssignError;
use super::{CqId, Engine, WlId};

impl Engine {
    /// What a workload admitted neither whole, nor by preemption, nor with
    /// fewer pods is told, given what its whole was told:
    /// - with a minimum count, why its minimum is not admitted, its whole
    ///   numbers beside ("needs at least 3 … (up to 8)");
    /// - when no node could ever hold it (its minimum, if it has one), that
    ///   (beside the quota's verdicts when its quota never suffices either).
    ///
    /// Waiting for evictions or preemptions under way is left as it is.
    pub(super) fn unadmitted_explanation(&mut self, cq: CqId, id: WlId, whole: Explanation) -> Explanation {
        if matches!(
            whole.reason,
            PendingReason::WaitingForEvictions | PendingReason::WaitingForPreemption { .. }
        ) {
            return whole;
        }
        let e = match self.minimum_counts(id) {
            Some(counts) => {
                self.set_counts(id, &counts);
                self.minimum_explanation(cq, id, whole)
            }
            None => whole,
        };
        let e = match self.never_placeable(cq, id) {
            // Both never: the quota's reason, and the nodes' verdicts too.
            Some(nodes) if e.reason == PendingReason::NeverFits => {
                let mut e = e;
                e.flavors.extend(
                    nodes
                        .flavors
                        .into_iter()
                        .filter(|v| matches!(v.verdict, Verdict::NeverOnNodes(_))),
                );
                e
            }
            Some(nodes) => nodes,
            None => e,
        };
        self.restore_full(id);
        e
    }

    /// Why a workload set to its minimum counts is not admitted.
    fn minimum_explanation(&mut self, cq: CqId, id: WlId, whole: Explanation) -> Explanation {
        let mut e = match self.assign_with(cq, id, true) {
            Err(AssignError::NoFit { verdicts, never, .. }) => Explanation {
                reason: if never {
                    PendingReason::NeverFits
                } else {
                    PendingReason::NoFit
                },
                flavors: verdicts,
            },
            Ok(attempt) => match self.try_place(cq, id, &attempt.choice) {
                Err(unplaced) => self.no_room_explanation(cq, id, &unplaced.room),
                // It fits now: the next cycle admits it.
                Ok(_) => return whole,
            },
            Err(AssignError::NotCovered { .. }) => return whole,
        };
        for v in &mut e.flavors {
            with_whole_need(v, &whole);
        }
        // Why preemption could not help the whole.
        e.flavors
            .extend(whole.flavors.iter().filter(|v| v.pod_set.is_empty()).cloned());
        e
    }

    pub(super) fn note(&mut self, id: WlId, e: Explanation) {
        let wl = self.wl_mut(id);
        if wl.explanation.as_deref().is_none_or(|old| !old.same_reason(&e)) {
            self.turn.buffered_notes.insert(id);
        }
        self.wl_mut(id).explanation = Some(Arc::new(e));
    }

    /// What a pending workload is told: its own explanation, or its
    /// queue's for its shape when parked by shape.
    pub(super) fn current_explanation(&self, id: WlId) -> Option<&Arc<Explanation>> {
        let wl = self.wl(id);
        if wl.shaped {
            return self.memo.shape_expl.get(&(wl.cq?, wl.shape));
        }
        wl.explanation.as_ref()
    }

    /// Records why a workload waits, and reports it when the reason changed.
    /// Explanations are shared: re-explaining the same one is a pointer
    /// comparison.
    pub(super) fn explain(&mut self, id: WlId, e: Arc<Explanation>, out: &mut Cycle) {
        if let Some(old) = self.current_explanation(id) {
            if Arc::ptr_eq(old, &e) {
                return;
            }
            if old.same_reason(&e) {
                self.own_explanation(id, e);
                return;
            }
        }
        out.pending_changed.push((self.wl(id).uid.clone(), e.clone()));
        self.turn.buffered_notes.remove(&id);
        self.own_explanation(id, e);
    }

    pub(super) fn own_explanation(&mut self, id: WlId, e: Arc<Explanation>) {
        let wl = self.workloads.wls[id].as_mut().expect("live workload");
        wl.explanation = Some(e);
        if wl.shaped {
            wl.shaped = false;
            let (key, shape, cq) = (wl.key(id), wl.shape, wl.cq.expect("shaped workloads are queued"));
            let q = &mut self.queues.cqs[cq];
            q.waiting.take_off_lists(&key, shape);
            q.waiting.loose.insert(key);
        }
    }

    /// Sets why workloads of a shape wait in a queue; when the reason
    /// changed, every workload parked under it is told.
    pub(super) fn set_shape_explanation(&mut self, cq: CqId, shape: u32, e: Arc<Explanation>, out: &mut Cycle) {
        let old = self.memo.shape_expl.insert((cq, shape), e.clone());
        if old.is_some_and(|o| !o.same_reason(&e))
            && let Some(members) = self.queues.cqs[cq].waiting.shaped.get(&shape)
        {
            for key in members {
                out.pending_changed.push((key.uid.clone(), e.clone()));
            }
        }
    }

    /// Parks a workload under its queue's explanation for its shape.
    pub(super) fn park_shaped(&mut self, cq: CqId, id: WlId, out: &mut Cycle) {
        let wl = self.wl(id);
        if wl.shaped {
            return;
        }
        let shape = wl.shape;
        let e = self.memo.shape_expl[&(cq, shape)].clone();
        if wl.explanation.as_ref().is_none_or(|old| !old.same_reason(&e)) {
            out.pending_changed.push((wl.uid.clone(), e.clone()));
            self.turn.buffered_notes.remove(&id);
        }
        let wl = self.workloads.wls[id].as_mut().expect("live workload");
        wl.explanation = None;
        wl.shaped = true;
        let key = wl.key(id);
        let q = &mut self.queues.cqs[cq];
        q.waiting.loose.remove(&key);
        q.waiting.fresh.remove(&key);
        q.waiting.shaped.entry(shape).or_default().insert(key);
    }
}

/// Sets a minimum's quota verdict's `up_to` to what the whole needed of the
/// same resource, in the same pod set and flavor.
fn with_whole_need(v: &mut FlavorVerdict, whole: &Explanation) {
    let whole_need = |resource: &str| {
        whole
            .flavors
            .iter()
            .filter(|w| w.pod_set == v.pod_set && w.flavor == v.flavor)
            .find_map(|w| match &w.verdict {
                Verdict::InsufficientQuota {
                    resource: r, needed, ..
                }
                | Verdict::ExceedsMaxQuota {
                    resource: r, needed, ..
                } if r == resource => Some(*needed),
                _ => None,
            })
    };
    match &mut v.verdict {
        Verdict::InsufficientQuota {
            resource,
            needed,
            up_to,
            ..
        }
        | Verdict::ExceedsMaxQuota {
            resource,
            needed,
            up_to,
            ..
        } => {
            *up_to = whole_need(resource).filter(|w| w > needed);
        }
        _ => {}
    }
}
