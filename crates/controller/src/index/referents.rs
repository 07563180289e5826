//! What queued objects read their pod sets from besides themselves (a
//! TrainJob's training runtime, [`sluice_kinds::Queueable::referent`]):
//! kept as observed; an object whose referent is missing is reported
//! (reason [`REFERENT_MISSING`], naming it) and has no Workload. Every
//! object that reads a referent is read again when it appears or changes:
//! a waiting one gets its Workload, an admitted one whose runtime now asks
//! for more than its admission is evicted like one that grew itself
//! ([`Index::reshape`]), so editing a runtime (a namespaced one is the
//! tenant's own) cannot run more than was admitted.

use std::sync::Arc;

use serde_json::Value;
use sluice_kinds::{Full, Resource};

use super::{Index, Kind};
use crate::plan::JobRef;

/// The reason recorded on an object whose referent does not exist.
pub const REFERENT_MISSING: &str = "RuntimeMissing";

impl Index {
    /// An object a queued kind reads its pod sets from, as observed (its
    /// key: `<namespace>/<name>`, or `<name>` when cluster-scoped).
    pub fn apply_referent(&mut self, resource: Resource, key: &str, obj: Arc<Value>) {
        let k = (resource, key.to_string());
        let changed = self.queued.referents.get(&k).is_none_or(|old| **old != *obj);
        self.queued.referents.insert(k.clone(), obj);
        if !changed {
            return;
        }
        // Objects that read it are read again: those that waited get their
        // Workload, the others are compared with what it says now.
        for job in self.queued.readers.get(&k).into_iter().flatten() {
            if self.queued.jobs.contains_key(job) {
                self.queued.refetch.insert(job.clone());
            }
        }
    }

    /// Such an object is gone: Workloads made from it stay as they are;
    /// new ones wait for it again.
    pub fn delete_referent(&mut self, resource: Resource, key: &str) {
        self.queued.referents.remove(&(resource, key.to_string()));
    }

    /// A deleted object waits for no referent.
    pub(super) fn stop_reading(&mut self, key: &JobRef) {
        self.queued.readers.retain(|_, jobs| {
            jobs.remove(key);
            !jobs.is_empty()
        });
    }

    /// The referent of `full`, when its kind reads one and it is known
    /// (nothing reported).
    pub(super) fn referent_of(&self, full: Full<'_>) -> Option<Arc<Value>> {
        let Full::Dynamic(kind, obj) = full else { return None };
        let r = kind.integration().referent(obj).ok()??;
        self.queued.referents.get(&(r.resource, r.key())).cloned()
    }

    /// What the Workload of `full` is made from besides it: `Ok(Some)`
    /// its referent when its kind reads one, `Ok(None)` nothing. `Err`
    /// when the referent is missing (the object is reported and waits for
    /// it) or cannot be named (reported).
    pub(super) fn resolve(&mut self, key: &JobRef, full: Full<'_>) -> Result<Option<Arc<Value>>, Unresolved> {
        let Full::Dynamic(kind, obj) = full else {
            return Ok(None);
        };
        let referent = match kind.integration().referent(obj) {
            Ok(None) => return Ok(None),
            Ok(Some(r)) => r,
            Err(err) => {
                self.record_error(Kind::Queued(kind), key.to_string(), err.metric_label(), err.to_string());
                return Err(Unresolved);
            }
        };
        let k = (referent.resource, referent.key());
        self.queued.readers.entry(k.clone()).or_default().insert(key.clone());
        if let Some(r) = self.queued.referents.get(&k).cloned() {
            if self
                .defs
                .errors
                .get(&(Kind::Queued(kind), key.to_string()))
                .is_some_and(|e| e.reason == REFERENT_MISSING)
            {
                self.clear_error(Kind::Queued(kind), &key.to_string());
            }
            return Ok(Some(r));
        }
        self.record_error(
            Kind::Queued(kind),
            key.to_string(),
            REFERENT_MISSING,
            format!(
                "{} {key} names {}, which does not exist (or is not listed yet): its pod sets are read from it, so it has no Workload and stays suspended until it exists",
                kind.kind(),
                referent.describe()
            ),
        );
        Err(Unresolved)
    }
}

/// An object whose Workload cannot be made yet (see [`Index::resolve`]).
#[derive(Debug)]
pub(super) struct Unresolved;
