//! Who queues an object when its labels do not: its namespace, or its
//! owner.
//!
//! - **A namespace that queues every object.** In a namespace labelled
//!   `sluice.dev/default-queue: enabled` (Namespaces are cluster objects:
//!   only a cluster admin labels them), an object of a queued kind without
//!   a queue label is queued in the namespace's LocalQueue `default`,
//!   whatever its labels say, as Kueue's `manageJobsWithoutQueueName`
//!   does. The webhook labels such objects when they are created and
//!   refuses taking the label off; this is the controller's own rule for
//!   what the webhook did not see (installed later, down, bypassed): the
//!   object is held suspended in `default` until it is admitted, with an
//!   Event saying why. Nothing is written to the object: the label is put
//!   on the index's copy only. An object whose Kueue Workload holds quota
//!   (a switch-over, [`super::foreign`]) is Kueue's and left alone.
//! - **An owner of a queued kind.** A Job controlled by a JobSet, an MPIJob
//!   or a RayJob is queued as part of that owner, never on its own. Its
//!   owner reference is written by whoever writes the Job, so it counts
//!   only while the owner exists with that uid; once that kind is listed,
//!   a Job whose owner does not exist is a Job like any other.

use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;
use sluice_api::labels;

use super::{Index, Kind};
use crate::plan::JobRef;
use sluice_kinds::JobKind;
use sluice_kinds::job::{JobView, ManagedBy};

/// Whether an owner reference can be believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The owner exists with that uid (or its kind is not listed yet).
    Stands,
    /// Its kind is listed and no such owner exists.
    Missing,
}

impl Index {
    /// Whether namespace `ns` queues every object (its label, as watched).
    pub(super) fn queues_every_object(&self, ns: &str) -> bool {
        self.defs
            .namespaces
            .get(ns)
            .and_then(|l| l.get(labels::DEFAULT_QUEUE))
            .is_some_and(|v| v == labels::DEFAULT_QUEUE_ENABLED)
    }

    /// The object's copy with the default queue's label, when its
    /// namespace queues every object and it has no queue label.
    pub(super) fn labelled_job(&self, j: &Job) -> Option<Job> {
        let ns = j.metadata.namespace.as_deref()?;
        let unlabelled = sluice_kinds::job::queue_of(j, self.config.kueue_compat).is_none();
        let kueues = j.metadata.uid.as_deref().is_some_and(|u| self.held_by_kueue(u));
        (unlabelled && !kueues && self.queues_every_object(ns)).then(|| {
            let mut j = j.clone();
            j.metadata
                .labels
                .get_or_insert_default()
                .insert(labels::QUEUE.into(), labels::DEFAULT_LOCAL_QUEUE_NAME.into());
            j
        })
    }

    /// The same for an object of another kind, as JSON.
    pub(super) fn labelled_object(&self, kind: JobKind, obj: &Value) -> Option<Value> {
        let meta = obj.get("metadata")?;
        let ns = meta.get("namespace")?.as_str()?;
        let labelled = meta
            .get("labels")
            .and_then(|l| serde_json::from_value::<std::collections::BTreeMap<String, String>>(l.clone()).ok())
            .is_some_and(|l| labels::queue_name(&l, self.config.kueue_compat).is_some());
        let kueues = meta
            .get("uid")
            .and_then(Value::as_str)
            .is_some_and(|u| self.held_by_kueue(u));
        let kind_queues = kind.integration().queued_by_namespace(obj);
        (!labelled && !kueues && kind_queues && self.queues_every_object(ns)).then(|| {
            let mut obj = obj.clone();
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = Value::Object(Default::default());
            }
            obj["metadata"]["labels"][labels::QUEUE] = Value::from(labels::DEFAULT_LOCAL_QUEUE_NAME);
            obj
        })
    }

    /// A view without a queue label in a namespace that queues every
    /// object: queued in `default` (a view from the cache; the full object
    /// is labelled by [`Index::labelled_job`] or [`Index::labelled_object`]).
    pub(super) fn queue_by_namespace(&self, view: &mut JobView) {
        if view.queue.is_none()
            && view.namespace_queues
            && !self.held_by_kueue(&view.uid)
            && self.queues_every_object(&view.namespace)
        {
            view.queue = Some(labels::DEFAULT_LOCAL_QUEUE_NAME.into());
            view.queued_by_namespace = true;
        }
    }

    /// A namespace started or stopped queueing every object: its objects
    /// without a queue label are looked at again.
    pub(super) fn namespace_queueing_changed(&mut self, ns: &str, now_ms: i64) {
        let on = self.queues_every_object(ns);
        let keys: Vec<JobRef> = self
            .queued
            .jobs
            .iter()
            .filter(|(k, v)| k.namespace() == ns && (v.queued_by_namespace || v.queue.is_none()))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            let kueues = self.queued.jobs.get(&k).is_some_and(|v| self.held_by_kueue(&v.uid));
            if let Some(v) = self.queued.jobs.get_mut(&k) {
                if on && !kueues && v.namespace_queues {
                    v.queue = Some(labels::DEFAULT_LOCAL_QUEUE_NAME.into());
                    v.queued_by_namespace = true;
                } else {
                    v.queue = None;
                    v.queued_by_namespace = false;
                }
            }
            // Its Workload is made from the full object, read again.
            self.queued.refetch.insert(k.clone());
            self.reconcile_job(&k, now_ms);
        }
    }

    /// Whether the owner a Job names stands: it exists with that uid, or
    /// its kind is not listed yet (then it is given the benefit of the
    /// doubt until it is).
    pub(super) fn owner(&self, namespace: &str, m: &ManagedBy) -> Owner {
        let key = JobRef::new(m.kind, namespace.to_string(), m.name.clone());
        // An owner named by a label (no uid) stands while one of that name exists.
        if self
            .queued
            .jobs
            .get(&key)
            .is_some_and(|v| v.uid == m.uid || m.uid.is_empty())
            || !self.defs.synced.contains(&Kind::Queued(m.kind))
        {
            Owner::Stands
        } else {
            Owner::Missing
        }
    }

    /// Whether a Job is queued as part of its owner (of a queued kind whose
    /// integration is on, and which stands).
    pub(super) fn queued_with_owner(&self, j: &JobView) -> bool {
        j.managed_by
            .as_ref()
            .is_some_and(|m| self.config.integrations.contains(&m.kind) && self.owner(&j.namespace, m) == Owner::Stands)
    }
}

/// The Event note for an object queued by its namespace.
pub(super) fn queued_by_namespace_note(kind: JobKind, ns: &str) -> String {
    format!(
        "queued in LocalQueue {:?} without a {} label: namespace {ns} queues every {} ({}={}); it stays suspended until Sluice admits it",
        labels::DEFAULT_LOCAL_QUEUE_NAME,
        labels::QUEUE,
        kind.kind(),
        labels::DEFAULT_QUEUE,
        labels::DEFAULT_QUEUE_ENABLED
    )
}
