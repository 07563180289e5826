//! Cohort objects: a cohort tree's parents, the cohorts' own quota and
//! their fair-sharing weights, fed to the engine once they pass
//! validation, the adapter and the engine's cycle check.
//!
//! A Cohort that fails any of them is recorded like every invalid
//! configuration object (in [`Index::errors`], a log line, a Warning Event,
//! and `Active=False` in its status) and **the version the engine last
//! took stays in effect**: the tree does not change under admitted work
//! because of a bad edit. One the engine refused because its parent chain
//! leads back to it is tried again whenever another Cohort changes or
//! goes (the chain may be broken then); the webhook refuses such chains
//! up front, so this covers objects written while it was not running.

use std::collections::{BTreeMap, BTreeSet};

use sluice_api::v1alpha1::{Cohort, CohortSpec};

use super::errors::{IndexError, admissible};
use super::{Index, Kind};
use sluice_convert::adapter;

/// The Cohort objects the index knows.
#[derive(Default)]
pub(super) struct Cohorts {
    /// Every Cohort as last observed, valid or not.
    objects: BTreeMap<String, Cohort>,
    /// The spec the engine holds, per Cohort (the last one it took).
    held: BTreeMap<String, CohortSpec>,
    /// Cohorts whose latest version the engine refused (a cycle).
    refused: BTreeSet<String>,
}

impl Index {
    /// A Cohort as observed. The engine is called only when the spec
    /// differs from the one it holds: a status update (our own, mostly) or
    /// the same object seen again changes nothing.
    pub fn apply_cohort(&mut self, c: Cohort) {
        let Some(name) = c.metadata.name.clone() else { return };
        self.defs.cohorts.objects.insert(name.clone(), c);
        if self.try_cohort(&name) {
            self.retry_refused_cohorts();
        }
    }

    /// A Cohort is gone: the cohort lives on without parent, quota or
    /// weight of its own while queues or other cohorts name it.
    pub fn delete_cohort(&mut self, name: &str) {
        self.clear_error(Kind::Cohort, name);
        self.defs.cohorts.objects.remove(name);
        self.defs.cohorts.refused.remove(name);
        if self.defs.cohorts.held.remove(name).is_some() {
            self.engine.remove_cohort(name);
            self.retry_refused_cohorts();
        }
    }

    /// Hands the latest version of Cohort `name` to the engine; whether
    /// the engine's tree changed.
    fn try_cohort(&mut self, name: &str) -> bool {
        let Some(c) = self.defs.cohorts.objects.get(name) else {
            return false;
        };
        if self.defs.cohorts.held.get(name) == Some(&c.spec) {
            // Back to the version the engine holds.
            self.defs.cohorts.refused.remove(name);
            self.clear_error(Kind::Cohort, name);
            return false;
        }
        let spec = c.spec.clone();
        let outcome =
            admissible(c, adapter::cohort).and_then(|s| self.engine.upsert_cohort(s).map_err(IndexError::Refused));
        match outcome {
            Ok(()) => {
                self.defs.cohorts.refused.remove(name);
                self.clear_error(Kind::Cohort, name);
                self.defs.cohorts.held.insert(name.to_string(), spec);
                true
            }
            Err(e) => {
                if matches!(e, IndexError::Refused(_)) {
                    self.defs.cohorts.refused.insert(name.to_string());
                } else {
                    self.defs.cohorts.refused.remove(name);
                }
                self.record(Kind::Cohort, name.to_string(), &e);
                false
            }
        }
    }

    /// The tree changed: Cohorts refused for a cycle are tried again,
    /// until none more is taken (each success may break another's cycle).
    fn retry_refused_cohorts(&mut self) {
        loop {
            let refused: Vec<String> = self.defs.cohorts.refused.iter().cloned().collect();
            let mut changed = false;
            for name in refused {
                changed |= self.try_cohort(&name);
            }
            if !changed {
                return;
            }
        }
    }

    /// Names of the Cohort objects the index knows (valid or not).
    pub fn cohort_object_names(&self) -> Vec<String> {
        self.defs.cohorts.objects.keys().cloned().collect()
    }

    /// Every cohort that exists: a Cohort object, a parent the engine's
    /// Cohorts name, or the cohort of a ClusterQueue the engine holds.
    pub fn cohort_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.defs.cohorts.objects.keys().cloned().collect();
        names.extend(self.defs.cohorts.held.values().filter_map(|s| s.parent.clone()));
        names.extend(
            self.defs
                .cluster_queues
                .values()
                .filter_map(|cq| cq.spec.cohort.clone()),
        );
        names.retain(|n| !n.is_empty());
        names
    }

    /// A Cohort's status as last observed from the API server.
    pub(super) fn observed_cohort_status(&self, name: &str) -> Option<serde_json::Value> {
        serde_json::to_value(self.defs.cohorts.objects.get(name)?.status.as_ref()?).ok()
    }

    /// Why the latest version of a Cohort is not in effect, if it is not:
    /// `(reason, message)`.
    pub fn cohort_problem(&self, name: &str) -> Option<(&'static str, String)> {
        let e = self.defs.errors.get(&(Kind::Cohort, name.to_string()))?;
        let kept = match self.defs.cohorts.held.contains_key(name) {
            true => " (its previous version stays in effect)",
            false => "",
        };
        Some((e.reason, format!("Ignored by the controller{kept}: {}", e.message)))
    }

    /// Whether fair sharing is on (queue and Cohort statuses then carry
    /// their weighted shares).
    pub fn fair_sharing(&self) -> bool {
        self.config.fair_sharing != sluice_scheduler::FairSharing::Off
    }
}
