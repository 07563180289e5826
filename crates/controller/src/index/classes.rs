//! Objects that name a WorkloadPriorityClass the controller has not seen
//! (not created yet, or its watch event not arrived yet) wait for it: their
//! Workload takes its priority when made and keeps it, so one made at
//! priority 0 because the class came a moment later would never preempt
//! what its owner meant it to. Such an object is reported (reason
//! [`CLASS_MISSING`], naming the class), has no Workload and stays
//! suspended; it is read again when the class appears.

use super::{Index, Kind};
use crate::plan::JobRef;

/// The reason recorded on an object whose WorkloadPriorityClass does not
/// exist.
pub const CLASS_MISSING: &str = "PriorityClassMissing";

impl Index {
    /// Whether the WorkloadPriorityClass `class` (an object's
    /// `sluice.dev/priority-class` label) is known, or none is named. When
    /// not, the object `key` of `kind` is reported and waits for it.
    pub(super) fn class_known(&mut self, kind: Kind, key: &JobRef, class: Option<&str>) -> bool {
        let Some(class) = class else { return true };
        if self.defs.workload_classes.contains_key(class) {
            self.stop_waiting_for_class(key);
            if self
                .defs
                .errors
                .get(&(kind, key.to_string()))
                .is_some_and(|e| e.reason == CLASS_MISSING)
            {
                self.clear_error(kind, &key.to_string());
            }
            return true;
        }
        self.queued
            .class_waiters
            .entry(class.to_string())
            .or_default()
            .insert(key.clone());
        self.record_error(
            kind,
            key.to_string(),
            CLASS_MISSING,
            format!(
                "{key} names WorkloadPriorityClass {class:?} (label sluice.dev/priority-class), which does not exist (or is not listed yet): it has no Workload and stays suspended until the class exists"
            ),
        );
        false
    }

    /// The WorkloadPriorityClass `name` appeared: the objects waiting for
    /// it are read again.
    pub(super) fn wake_class_waiters(&mut self, name: &str) {
        for key in self.queued.class_waiters.remove(name).into_iter().flatten() {
            if self.queued.jobs.contains_key(&key) || self.queued.gang_jobs.contains_key(&key) {
                self.queued.refetch.insert(key);
            }
        }
    }

    /// A deleted object (or one whose class is known) waits for no class.
    pub(super) fn stop_waiting_for_class(&mut self, key: &JobRef) {
        self.queued.class_waiters.retain(|_, keys| {
            keys.remove(key);
            !keys.is_empty()
        });
    }
}
