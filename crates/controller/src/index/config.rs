//! Configuration objects: ResourceFlavors, ClusterQueues, LocalQueues,
//! priority classes and Namespaces (for namespaceSelectors), fed to the
//! engine once they pass validation; and what the index can tell about a
//! queue (why it cannot admit, its counts and usage).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;

use sluice_api::Validate;
use sluice_api::v1alpha1::conditions as cond;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor, WorkloadPriorityClass};
use sluice_scheduler::WorkloadState;
use sluice_scheduler::usage::Account;

use super::errors::{IndexError, admissible};
use super::{Index, Kind, LocalQueueStats, key_of, reference};
use crate::plan::{ObjKey, QueueRef};
use sluice_convert::{adapter, usage};

impl Index {
    /// Names of the ClusterQueues the index holds (valid ones).
    pub fn cluster_queue_names(&self) -> Vec<String> {
        self.defs.cluster_queues.keys().cloned().collect()
    }

    /// A queue's (or a Cohort's) status as last observed from the API server.
    pub fn observed_queue_status(&self, queue: &QueueRef) -> Option<serde_json::Value> {
        let status = match queue {
            QueueRef::ClusterQueue(name) => serde_json::to_value(self.defs.cluster_queues.get(name)?.status.as_ref()?),
            QueueRef::LocalQueue(key) => serde_json::to_value(self.defs.local_queues.get(key)?.status.as_ref()?),
            QueueRef::Cohort(name) => return self.observed_cohort_status(name),
        };
        status.ok()
    }

    /// Why a ClusterQueue cannot admit new workloads, if it cannot: it
    /// failed validation (kept out of the engine), or it names
    /// ResourceFlavors that do not exist. `(reason, message)`.
    pub fn cluster_queue_problem(&self, name: &str) -> Option<(&'static str, String)> {
        if let Some(e) = self.defs.errors.get(&(Kind::ClusterQueue, name.to_string())) {
            return Some((
                "InvalidClusterQueue",
                format!("Ignored by the controller: {}", e.message),
            ));
        }
        let cq = self.defs.cluster_queues.get(name)?;
        let missing: BTreeSet<&str> = cq
            .spec
            .resource_groups
            .iter()
            .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
            .filter(|f| !self.defs.flavors.contains_key(*f))
            .collect();
        (!missing.is_empty()).then(|| {
            let list: Vec<&str> = missing.into_iter().collect();
            (
                "FlavorNotFound",
                format!(
                    "Cannot admit into ResourceFlavor(s) that do not exist: {}",
                    list.join(", ")
                ),
            )
        })
    }

    /// Why a LocalQueue cannot admit new workloads, if it cannot:
    /// `(reason, message)`.
    pub fn local_queue_problem(&self, key: &ObjKey) -> Option<(&'static str, String)> {
        let lq = self.defs.local_queues.get(key)?;
        let cq = &lq.spec.cluster_queue;
        if !self.defs.cluster_queues.contains_key(cq)
            && !self.defs.errors.contains_key(&(Kind::ClusterQueue, cq.clone()))
        {
            return Some(("ClusterQueueDoesNotExist", format!("ClusterQueue {cq} does not exist")));
        }
        if let Some((_, why)) = self.cluster_queue_problem(cq) {
            return Some((
                "ClusterQueueIsInactive",
                format!("ClusterQueue {cq} is inactive: {why}"),
            ));
        }
        self.unselected_by(&key.namespace, &key.name)
            .map(|why| (cond::reasons::NAMESPACE_NOT_SELECTED, why))
    }

    /// Pending and admitted counts and usage per (flavor, resource) of
    /// every LocalQueue, in one pass over the workloads.
    pub fn local_queue_stats(&self) -> BTreeMap<ObjKey, LocalQueueStats> {
        let mut out: BTreeMap<ObjKey, LocalQueueStats> = self
            .defs
            .local_queues
            .keys()
            .map(|k| (k.clone(), LocalQueueStats::default()))
            .collect();
        for (k, e) in &self.table.workloads {
            if !e.run.in_engine {
                continue;
            }
            let Some(st) = out.get_mut(&ObjKey::new(k.namespace.clone(), e.observed.queue_name.clone())) else {
                continue;
            };
            match self.engine.workload_state(&e.uid) {
                Some(WorkloadState::Pending | WorkloadState::Preempting) => st.pending += 1,
                Some(WorkloadState::Admitted | WorkloadState::Evicting) => {
                    st.admitted += 1;
                    for ps in self.engine.admission(&e.uid).iter().flat_map(|a| a.pod_sets.iter()) {
                        for (res, amount) in &ps.usage {
                            if let Some(fl) = ps.flavors.get(res) {
                                *st.usage.entry((fl.clone(), res.clone())).or_default() += amount;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    pub fn apply_flavor(&mut self, rf: ResourceFlavor) {
        let Some(name) = rf.metadata.name.clone() else { return };
        match admissible(&rf, adapter::flavor) {
            Ok(spec) => {
                self.clear_error(Kind::ResourceFlavor, &name);
                self.engine.upsert_flavor(spec);
                self.defs.flavors.insert(name, rf);
            }
            Err(e) => {
                self.record(Kind::ResourceFlavor, name, &e);
            }
        }
    }

    pub fn delete_flavor(&mut self, name: &str) {
        self.clear_error(Kind::ResourceFlavor, name);
        if self.defs.flavors.remove(name).is_some() {
            self.engine.remove_flavor(name);
        }
    }

    pub fn apply_cluster_queue(&mut self, cq: ClusterQueue) {
        let Some(name) = cq.metadata.name.clone() else { return };
        self.restore_usage(
            Account::ClusterQueue(Arc::from(name.as_str())),
            cq.status.as_ref().and_then(|s| s.usage.as_deref()),
            cluster_queue_ref(&name),
        );
        if let Some(old) = self.defs.cluster_queues.get_mut(&name)
            && old.spec == cq.spec
        {
            // A status update (our own, mostly), or back to the version
            // the engine holds after an invalid edit: nothing for the engine.
            *old = cq;
            self.clear_error(Kind::ClusterQueue, &name);
            return;
        }
        match admissible(&cq, adapter::cluster_queue) {
            Ok(spec) => {
                self.clear_error(Kind::ClusterQueue, &name);
                // Validated with the queue: the budget converts.
                let budget = cq.spec.budget.as_deref().and_then(|b| usage::budget(b).ok());
                self.usage.accounting.set_budget(&name, budget);
                self.engine.upsert_cluster_queue(spec);
                self.defs.cluster_queues.insert(name, cq);
                self.retry_unrestored();
                self.retry_not_selected(0);
                self.count_waiting_foreign();
            }
            Err(e) => {
                self.record(Kind::ClusterQueue, name, &e);
            }
        }
    }

    pub fn delete_cluster_queue(&mut self, name: &str) {
        self.clear_error(Kind::ClusterQueue, name);
        if self.defs.cluster_queues.remove(name).is_some() {
            self.engine.remove_cluster_queue(name);
            self.usage.accounting.set_budget(name, None);
        }
    }

    pub fn apply_local_queue(&mut self, lq: LocalQueue) {
        let Some(key) = key_of(lq.metadata.namespace.as_deref(), lq.metadata.name.as_deref()) else {
            return;
        };
        self.restore_usage(
            Account::LocalQueue(Arc::from(adapter::local_queue_key(&key.namespace, &key.name).as_str())),
            lq.status.as_ref().and_then(|s| s.usage.as_deref()),
            reference("sluice.dev/v1alpha1", "LocalQueue", &key, lq.metadata.uid.as_deref()),
        );
        if let Some(old) = self.defs.local_queues.get_mut(&key)
            && old.spec == lq.spec
        {
            *old = lq;
            return;
        }
        match admissible(&lq, adapter::local_queue) {
            Ok(spec) => {
                self.clear_error(Kind::LocalQueue, &key.to_string());
                self.engine.upsert_local_queue(spec);
                self.defs.local_queues.insert(key, lq);
                self.retry_not_selected(0);
            }
            Err(e) => {
                self.record(Kind::LocalQueue, key.to_string(), &e);
            }
        }
    }

    pub fn delete_local_queue(&mut self, key: &ObjKey) {
        self.clear_error(Kind::LocalQueue, &key.to_string());
        if self.defs.local_queues.remove(key).is_some() {
            self.engine
                .remove_local_queue(&adapter::local_queue_key(&key.namespace, &key.name));
        }
    }

    pub fn apply_workload_priority_class(&mut self, wpc: WorkloadPriorityClass) {
        let Some(name) = wpc.metadata.name.clone() else { return };
        match wpc.check() {
            Ok(()) => {
                self.clear_error(Kind::WorkloadPriorityClass, &name);
                self.wake_class_waiters(&name);
                self.defs.workload_classes.insert(name, wpc.spec.value);
            }
            Err(e) => {
                self.record(Kind::WorkloadPriorityClass, name, &IndexError::from(e));
            }
        }
    }

    pub fn delete_workload_priority_class(&mut self, name: &str) {
        self.defs.workload_classes.remove(name);
    }

    /// A Namespace's labels.
    pub fn apply_namespace(&mut self, name: &str, labels: BTreeMap<String, String>, now_ms: i64) {
        if self.defs.namespaces.get(name) != Some(&labels) {
            let queued_every = self.queues_every_object(name);
            self.defs.namespaces.insert(name.to_string(), labels);
            self.retry_not_selected(now_ms);
            if self.queues_every_object(name) != queued_every {
                self.namespace_queueing_changed(name, now_ms);
            }
        }
    }

    pub fn delete_namespace(&mut self, name: &str) {
        self.defs.namespaces.remove(name);
    }

    /// Why LocalQueue `ns/lq` may not use its ClusterQueue, if that is the
    /// case: the ClusterQueue's namespaceSelector (unset: none) does not
    /// select the namespace ([`ClusterQueueSpec::selects_namespace`], the
    /// one rule). A selector that needs labels does not hold back a
    /// namespace not yet seen before Namespaces are listed.
    ///
    /// [`ClusterQueueSpec::selects_namespace`]: sluice_api::v1alpha1::ClusterQueueSpec::selects_namespace
    pub(super) fn unselected_by(&self, ns: &str, lq: &str) -> Option<String> {
        let lq = self.defs.local_queues.get(&ObjKey::new(ns, lq))?;
        let name = &lq.spec.cluster_queue;
        let cq = self.defs.cluster_queues.get(name)?;
        let labels = match self.namespace_labels(ns) {
            Some(l) => l,
            None if cq.spec.namespace_selector.is_none() => &BTreeMap::new(),
            None => return None,
        };
        cq.spec.namespace_not_selected(name, ns, labels)
    }

    /// A namespace's labels; `None` while Namespaces are not listed and
    /// it has not been seen (listed: a namespace not seen has none).
    fn namespace_labels(&self, ns: &str) -> Option<&BTreeMap<String, String>> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        match self.defs.namespaces.get(ns) {
            Some(l) => Some(l),
            None if self.defs.synced.contains(&Kind::Namespace) => Some(&NONE),
            None => None,
        }
    }

    /// The LocalQueues pointing at ClusterQueue `cq` whose namespace it
    /// does not select (their new workloads wait), and how many point at it.
    pub fn local_queues_not_selected(&self, cq: &str) -> (Vec<ObjKey>, usize) {
        let mut stranded = Vec::new();
        let mut all = 0;
        for (k, lq) in &self.defs.local_queues {
            if lq.spec.cluster_queue == cq {
                all += 1;
                if self.unselected_by(&k.namespace, &k.name).is_some() {
                    stranded.push(k.clone());
                }
            }
        }
        (stranded, all)
    }

    /// A ClusterQueue's `NamespacesSelected` condition (without its
    /// transition time): `False` when it has no namespaceSelector (it
    /// serves no namespace) or when LocalQueues pointing at it are in
    /// namespaces it does not select, naming them. `(status, reason,
    /// message)`; `None` for a ClusterQueue the index does not hold.
    pub fn namespace_selection(&self, cq: &str) -> Option<(bool, &'static str, String)> {
        let spec = &self.defs.cluster_queues.get(cq)?.spec;
        let (stranded, all) = self.local_queues_not_selected(cq);
        let list = || {
            let mut names: Vec<String> = stranded.iter().take(10).map(ToString::to_string).collect();
            if stranded.len() > 10 {
                names.push(format!("and {} more", stranded.len() - 10));
            }
            names.join(", ")
        };
        let kept = "workloads already admitted keep running";
        Some(match &spec.namespace_selector {
            None if stranded.is_empty() => (
                false,
                cond::reasons::NO_NAMESPACE_SELECTOR,
                "It has no namespaceSelector, which selects no namespace: no LocalQueue can use it \
                 (set namespaceSelector: {} to serve every namespace, or a selector for the namespaces it serves)"
                    .to_string(),
            ),
            None => (
                false,
                cond::reasons::NO_NAMESPACE_SELECTOR,
                format!(
                    "It has no namespaceSelector, which selects no namespace, so the {} LocalQueue(s) pointing at it \
                     cannot admit new workloads: {}. Set namespaceSelector: {{}} to serve every namespace, or a \
                     selector for the namespaces it serves ({kept})",
                    stranded.len(),
                    list()
                ),
            ),
            Some(sel) if !stranded.is_empty() => (
                false,
                cond::reasons::LOCAL_QUEUES_NOT_SELECTED,
                format!(
                    "Its namespaceSelector {} does not select the namespace of {} of the {all} LocalQueue(s) \
                     pointing at it, which cannot admit new workloads: {} ({kept})",
                    sluice_api::selector::display(sel),
                    stranded.len(),
                    list()
                ),
            ),
            Some(sel) => (
                true,
                cond::reasons::NAMESPACES_SELECTED,
                format!(
                    "Its namespaceSelector {} selects the namespaces of all {all} LocalQueue(s) pointing at it",
                    sluice_api::selector::display(sel)
                ),
            ),
        })
    }

    /// Selection changed (a ClusterQueue, a LocalQueue or a namespace's
    /// labels): held workloads whose namespace is selected now join their
    /// queue, and pending ones whose namespace is no longer selected leave
    /// it and are held with the reason. Admitted ones keep running.
    pub(super) fn retry_not_selected(&mut self, now_ms: i64) {
        let keys: Vec<ObjKey> = self.table.not_selected.iter().cloned().collect();
        for k in keys {
            self.sync_workload(&k, None, now_ms);
        }
        self.withdraw_unselected(now_ms);
    }

    /// Pending workloads whose namespace their ClusterQueue no longer
    /// selects: out of the queue, held with the reason.
    fn withdraw_unselected(&mut self, now_ms: i64) {
        let withdrawn: Vec<(ObjKey, String)> = self
            .table
            .workloads
            .iter()
            .filter(|(_, e)| {
                e.run.in_engine
                    && e.observed.active
                    && matches!(
                        self.engine.workload_state(&e.uid),
                        Some(sluice_scheduler::WorkloadState::Pending)
                    )
            })
            .filter_map(|(k, e)| Some((k.clone(), self.unselected_by(&k.namespace, &e.observed.queue_name)?)))
            .collect();
        for (key, why) in withdrawn {
            let Some(e) = self.table.workloads.get_mut(&key) else {
                continue;
            };
            let Some(spec) = self.engine.workload_spec(&e.uid) else {
                continue;
            };
            super::errors::engine_ok("remove_workload", &e.uid, self.engine.remove_workload(&e.uid));
            e.run.in_engine = false;
            self.hold_unselected(&key, spec, &why, now_ms);
        }
    }

    /// A scheduling.k8s.io PriorityClass (name and value).
    pub fn apply_priority_class(&mut self, name: &str, value: i32) {
        self.defs.pod_classes.insert(name.to_string(), value);
    }

    pub fn delete_priority_class(&mut self, name: &str) {
        self.defs.pod_classes.remove(name);
    }
}

/// A reference to a ClusterQueue, for Events.
fn cluster_queue_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("sluice.dev/v1alpha1".into()),
        kind: Some("ClusterQueue".into()),
        name: Some(name.to_string()),
        ..Default::default()
    }
}
