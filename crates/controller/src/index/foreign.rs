//! The quota Kueue holds while a cluster switches over: every Kueue
//! Workload that holds quota ([`sluice_convert::foreign`]) is counted in
//! Sluice's ClusterQueue of the same name as a foreign admission (never
//! preempted or evicted by Sluice), until Kueue lets go of it (finished,
//! its reservation released, or deleted). One whose ClusterQueue Sluice
//! does not have is reported (a Warning Event on it, once) and counted as
//! soon as that ClusterQueue appears. A Job whose Kueue Workload holds
//! quota is Kueue's: a namespace that queues every object leaves it alone.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use sluice_convert::foreign::ForeignAdmission;
use sluice_scheduler::EngineError;

use super::{Index, Kind};
use crate::plan::{EventSpec, Plan, Purpose, Step};

/// What the index keeps of Kueue's admissions.
#[derive(Default)]
pub(super) struct KueueUsage {
    /// By Kueue Workload key: its admission, and whether the engine counts it.
    held: BTreeMap<String, (Arc<ForeignAdmission>, bool)>,
    /// The uids of the objects (Jobs) whose Kueue Workload holds quota.
    owners: HashSet<String>,
}

impl KueueUsage {
    fn owners_of(&self) -> HashSet<String> {
        self.held.values().filter_map(|(a, _)| a.owner_uid.clone()).collect()
    }
}

impl Index {
    /// A Kueue Workload observed: `None` when it holds no quota (any more).
    pub fn apply_foreign(&mut self, key: &str, admission: Option<Arc<ForeignAdmission>>) {
        self.clear_error(Kind::KueueWorkload, key);
        match admission {
            Some(new) => {
                if self.kueue.held.get(key).is_some_and(|(old, _)| **old == *new) {
                    return;
                }
                self.release_foreign(key);
                self.kueue.held.insert(key.to_string(), (new, false));
                self.count_foreign(key);
            }
            None => self.release_foreign(key),
        }
        self.kueue.owners = self.kueue.owners_of();
    }

    /// A Kueue Workload deleted.
    pub fn delete_foreign(&mut self, key: &str) {
        self.clear_error(Kind::KueueWorkload, key);
        self.release_foreign(key);
        self.kueue.owners = self.kueue.owners_of();
    }

    /// Whether the object with this uid is Kueue's: its Kueue Workload
    /// holds quota.
    pub(super) fn held_by_kueue(&self, uid: &str) -> bool {
        !self.kueue.owners.is_empty() && self.kueue.owners.contains(uid)
    }

    /// Counts Kueue admissions waiting for their ClusterQueue (one appeared).
    pub(super) fn count_waiting_foreign(&mut self) {
        let waiting: Vec<String> = self
            .kueue
            .held
            .iter()
            .filter(|(_, (_, counted))| !counted)
            .map(|(k, _)| k.clone())
            .collect();
        for key in waiting {
            self.count_foreign(&key);
        }
    }

    /// How many Kueue admissions are counted, and how many are not (their
    /// ClusterQueue is not Sluice's).
    pub fn foreign_counts(&self) -> (usize, usize) {
        let counted = self.kueue.held.values().filter(|(_, c)| *c).count();
        (counted, self.kueue.held.len() - counted)
    }

    fn count_foreign(&mut self, key: &str) {
        let Some((adm, counted)) = self.kueue.held.get(key) else {
            return;
        };
        if *counted {
            return;
        }
        let adm = adm.clone();
        match self
            .engine
            .hold_foreign(adm.spec.clone(), &adm.cluster_queue, &adm.assignments, adm.admitted_at)
        {
            Ok(()) => {
                tracing::info!(workload = %key, cluster_queue = %adm.cluster_queue, "counting quota Kueue holds");
                if let Some(entry) = self.kueue.held.get_mut(key) {
                    entry.1 = true;
                }
            }
            Err(EngineError::UnknownClusterQueue(cq)) => self.not_counted(key, &cq),
            Err(e) => {
                let message = format!("cannot count the quota it holds: {e}");
                tracing::warn!(workload = %key, "{message}");
                self.record_foreign_error(key, message);
            }
        }
    }

    fn release_foreign(&mut self, key: &str) {
        if let Some((adm, true)) = self.kueue.held.remove(key) {
            tracing::info!(workload = %key, "Kueue let go of its quota");
            super::errors::engine_ok(
                "release_foreign",
                &adm.spec.uid,
                self.engine.release_foreign(&adm.spec.uid),
            );
        }
    }

    /// Kueue admitted it into a ClusterQueue Sluice does not have: said
    /// once, on the Kueue Workload.
    fn not_counted(&mut self, key: &str, cluster_queue: &str) {
        let message = format!(
            "not counted: Kueue admitted it into ClusterQueue {cluster_queue}, which Sluice does not have; \
             the quota it holds is invisible to Sluice until a ClusterQueue of that name exists"
        );
        tracing::warn!(workload = %key, "{message}");
        self.record_foreign_error(key, message);
    }

    fn record_foreign_error(&mut self, key: &str, message: String) {
        if self.defs.errors.contains_key(&(Kind::KueueWorkload, key.to_string())) {
            return;
        }
        let reason = "KueueQuotaNotCounted";
        self.defs.errors.insert(
            (Kind::KueueWorkload, key.to_string()),
            super::ObjectError {
                reason,
                message: message.clone(),
            },
        );
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let api_version = self.config.kueue_workloads.clone().unwrap_or_default();
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: k8s_openapi::api::core::v1::ObjectReference {
                    api_version: Some(api_version),
                    kind: Some("Workload".into()),
                    namespace: Some(namespace.to_string()),
                    name: Some(name.to_string()),
                    ..Default::default()
                },
                type_: "Warning",
                reason: reason.to_string(),
                action: "Count",
                note: message,
            })],
        });
    }
}
