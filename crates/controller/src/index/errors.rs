//! Malformed and unusable objects: why one is kept out of the engine
//! ([`IndexError`]), recorded in [`Index::errors`] once, reported as a
//! Warning Event once every kind is listed.

use k8s_openapi::api::core::v1::ObjectReference;
use sluice_api::{Validate, ValidationError};
use sluice_scheduler as eng;

use super::{Index, Kind, ObjectError};
use crate::plan::{EventSpec, Plan, Purpose, Step};
use sluice_convert::adapter;

/// Why an object (or a Workload's recorded admission) is kept out of the
/// engine. Its text is what the object's Warning Event says.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// It fails `validate()`.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The adapter cannot convert it to the engine's model.
    #[error(transparent)]
    Unconvertible(#[from] adapter::AdapterError),
    /// A Workload's `status.admission` cannot be read.
    #[error(transparent)]
    InvalidAdmission(adapter::AdapterError),
    /// The engine refused to restore a Workload's admission.
    #[error(transparent)]
    RestoreFailed(eng::EngineError),
    /// The engine refused the object: a Workload it cannot queue, a
    /// Cohort whose parent chain leads back to itself.
    #[error(transparent)]
    Refused(eng::EngineError),
}

impl IndexError {
    /// Machine-readable reason (event reason, metric label) for an object
    /// of `kind`.
    pub fn reason(&self, kind: Kind) -> &'static str {
        match self {
            IndexError::Invalid(_) | IndexError::Unconvertible(_) | IndexError::Refused(_) => kind.invalid_reason(),
            IndexError::InvalidAdmission(_) => "InvalidAdmission",
            IndexError::RestoreFailed(_) => "RestoreFailed",
        }
    }
}

impl Kind {
    /// The reason recorded for an invalid object of this kind.
    pub fn invalid_reason(self) -> &'static str {
        match self {
            Kind::ResourceFlavor => "InvalidResourceFlavor",
            Kind::Cohort => "InvalidCohort",
            Kind::ClusterQueue => "InvalidClusterQueue",
            Kind::LocalQueue => "InvalidLocalQueue",
            Kind::WorkloadPriorityClass => "InvalidWorkloadPriorityClass",
            Kind::PriorityClass => "InvalidPriorityClass",
            Kind::Namespace => "InvalidNamespace",
            Kind::KueueWorkload => "InvalidKueueWorkload",
            Kind::Workload => "InvalidWorkload",
            Kind::Queued(k) => k.invalid_reason(),
            Kind::Referent(_) => "InvalidReferent",
            Kind::Node => "InvalidNode",
            Kind::Pod | Kind::GatedPod => "InvalidPod",
        }
    }
}

/// `validate()`, then the adapter: the engine only ever sees objects that
/// pass both; the error is what the object's Warning Event and condition say.
pub(super) fn admissible<T: Validate, S>(
    obj: &T,
    adapt: impl FnOnce(&T) -> Result<S, adapter::AdapterError>,
) -> Result<S, IndexError> {
    obj.check()?;
    Ok(adapt(obj)?)
}

/// The outcome of an engine call made knowing the workload's state (so it
/// cannot fail unless the index and the engine disagree): an error is
/// logged with the workload's uid, never dropped.
pub(super) fn engine_ok(op: &'static str, uid: &str, result: Result<(), eng::EngineError>) {
    if let Err(error) = result {
        tracing::warn!(uid, op, %error, "engine call failed: the index and the engine disagree");
    }
}

impl Index {
    /// A Warning Event on a skipped object, so `kubectl describe` shows why.
    pub(super) fn report(&mut self, kind: Kind, key: &str, e: &ObjectError) {
        let (namespace, name) = match key.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, key.to_string()),
        };
        let api_version = match (kind, kind.queued()) {
            (_, Some(k)) => k.api_version(),
            (Kind::Referent(r), _) => r.api_version,
            (Kind::PriorityClass, _) => "scheduling.k8s.io/v1",
            (Kind::Namespace | Kind::Node | Kind::Pod | Kind::GatedPod, _) => "v1",
            (Kind::KueueWorkload, _) => self
                .config
                .kueue_workloads
                .as_deref()
                .unwrap_or("kueue.x-k8s.io/v1beta1"),
            _ => "sluice.dev/v1alpha1",
        };
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: ObjectReference {
                    api_version: Some(api_version.into()),
                    kind: Some(kind.as_str().into()),
                    namespace,
                    name: Some(name),
                    ..Default::default()
                },
                type_: "Warning",
                reason: e.reason.to_string(),
                action: "Skip",
                note: format!("Ignored by Sluice: {}", e.message),
            })],
        });
    }

    pub(super) fn record_error(&mut self, kind: Kind, key: String, reason: &'static str, message: String) -> bool {
        let e = ObjectError { reason, message };
        let fresh = self.defs.errors.get(&(kind, key.clone())) != Some(&e);
        if fresh {
            self.outbox.stats.errors.push((kind.as_str(), reason));
            tracing::warn!(kind = kind.as_str(), object = %key, reason, message = %e.message, "skipping object");
            // Reported once everything is listed: before that, a
            // Workload listed before its ClusterQueue is not an error.
            if self.is_ready() {
                self.report(kind, &key, &e);
            }
        }
        self.defs.errors.insert((kind, key), e);
        fresh
    }

    /// Records `e` about the object `key` of `kind` (see `record_error`).
    pub(super) fn record(&mut self, kind: Kind, key: String, e: &IndexError) -> bool {
        self.record_error(kind, key, e.reason(kind), e.to_string())
    }

    /// An object that could not be decoded at all.
    pub fn report_malformed(&mut self, kind: Kind, key: &str, message: &str) {
        self.record_error(kind, key.to_string(), "Malformed", message.to_string());
    }

    pub(super) fn clear_error(&mut self, kind: Kind, key: &str) {
        self.defs.errors.remove(&(kind, key.to_string()));
    }
}
