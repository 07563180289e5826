//! ClusterQueue and LocalQueue status.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::json;
use sluice_api::v1alpha1::{FlavorUsage, ResourceUsage};

use super::RunConfig;
use crate::index::{Index, Kind};
use crate::metrics::Metrics;
use crate::plan::{Plan, Purpose, QueueRef, Step};

/// ClusterQueue and LocalQueue status: written when changed, at most once
/// per tick per object, and at most ~10 % of the write budget per tick
/// (the rest waits for the next tick; latest value wins, no backlog).
#[derive(Default)]
pub(super) struct QueueStatusWriter {
    /// Last status written per queue.
    pub(super) last: HashMap<QueueId, serde_json::Value>,
    /// Handed to the writer, not written yet.
    pub(super) queued: HashMap<QueueId, serde_json::Value>,
    /// When each queue's Active condition last changed: (status, time).
    pub(super) active_since: HashMap<QueueId, (bool, String)>,
}

/// (cluster-scoped, namespace, name)
pub(super) type QueueId = (bool, Option<String>, String);

/// Whether two queue statuses say the same, fields left out and empty or
/// null ones alike (the server's copy omits empty lists).
pub(super) fn same_status(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    fn norm(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .filter(|(_, v)| !(v.is_null() || v.as_array().is_some_and(Vec::is_empty)))
                    .map(|(k, v)| (k.clone(), norm(v)))
                    .collect(),
            ),
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(norm).collect()),
            other => other.clone(),
        }
    }
    norm(a) == norm(b)
}

/// When the server's `Active` condition of a queue took its status, if it
/// has that status now.
pub(super) fn observed_active_since(ix: &Index, id: &QueueId, active: bool) -> Option<String> {
    let status = ix.observed_queue_status(id.1.as_deref(), &id.2)?;
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Active")?;
    let same = c["status"] == if active { "True" } else { "False" };
    same.then(|| c["lastTransitionTime"].as_str().map(String::from))?
}

impl QueueStatusWriter {
    /// A queue's `Active` condition, keeping its transition time while the
    /// status stays the same.
    pub(super) fn active_condition(
        &mut self,
        ix: &Index,
        id: QueueId,
        problem: Option<(&'static str, String)>,
        ok: &str,
        now: &str,
    ) -> serde_json::Value {
        let active = problem.is_none();
        // A new leader keeps the transition time the server has.
        let observed = match self.active_since.contains_key(&id) {
            true => None,
            false => observed_active_since(ix, &id, active),
        };
        let since = self
            .active_since
            .entry(id)
            .or_insert_with(|| (active, observed.unwrap_or_else(|| now.to_string())));
        if since.0 != active {
            *since = (active, now.to_string());
        }
        let (reason, message) = problem.unwrap_or(("Ready", ok.to_string()));
        json!([{
            "type": "Active",
            "status": if active { "True" } else { "False" },
            "reason": reason,
            "message": message,
            "lastTransitionTime": since.1,
        }])
    }

    /// The status every queue should have now; updates the usage metrics.
    pub(super) fn wanted(&mut self, ix: &Index, m: &Metrics, now: &str) -> Vec<(QueueId, serde_json::Value)> {
        let mut wanted = Vec::new();
        let cqs = ix.cluster_queue_names();
        let mut names: BTreeSet<String> = cqs.into_iter().collect();
        names.extend(
            ix.errors()
                .keys()
                .filter(|(k, _)| *k == Kind::ClusterQueue)
                .map(|(_, name)| name.clone()),
        );
        for name in names {
            let condition = self.active_condition(
                ix,
                (true, None, name.clone()),
                ix.cluster_queue_problem(&name),
                "Can admit workloads",
                now,
            );
            let mut status = json!({"conditions": condition});
            if let Some(u) = ix.engine().cluster_queue_usage(&name) {
                let labels = |f: &str, r: &str| {
                    vec![
                        ("cluster_queue", name.clone()),
                        ("flavor", f.to_string()),
                        ("resource", r.to_string()),
                    ]
                };
                m.pending
                    .get_or_create(&vec![("cluster_queue", name.clone()), ("status", "active".into())])
                    .set(u.pending as i64);
                let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
                for r in &u.resources {
                    m.usage.get_or_create(&labels(&r.flavor, &r.resource)).set(r.used);
                    m.nominal.get_or_create(&labels(&r.flavor, &r.resource)).set(r.nominal);
                    flavors.entry(r.flavor.clone()).or_default().push(ResourceUsage {
                        name: r.resource.clone(),
                        total: sluice_api::quantity::to_quantity(&r.resource, i128::from(r.used)),
                        borrowed: (r.borrowed > 0)
                            .then(|| sluice_api::quantity::to_quantity(&r.resource, i128::from(r.borrowed))),
                    });
                }
                status["pendingWorkloads"] = json!(u.pending);
                status["admittedWorkloads"] = json!(u.admitted);
                status["flavorsUsage"] = serde_json::to_value(
                    flavors
                        .into_iter()
                        .map(|(name, resources)| FlavorUsage { name, resources })
                        .collect::<Vec<_>>(),
                )
                .unwrap_or_default();
            }
            wanted.push(((true, None, name), status));
        }
        for (key, st) in ix.local_queue_stats() {
            let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
            for ((flavor, resource), used) in &st.usage {
                flavors.entry(flavor.clone()).or_default().push(ResourceUsage {
                    name: resource.clone(),
                    total: sluice_api::quantity::to_quantity(resource, i128::from(*used)),
                    borrowed: None,
                });
            }
            let usage: Vec<FlavorUsage> = flavors
                .into_iter()
                .map(|(name, resources)| FlavorUsage { name, resources })
                .collect();
            let id = (false, Some(key.namespace.clone()), key.name.clone());
            let condition = self.active_condition(
                ix,
                id.clone(),
                ix.local_queue_problem(&key),
                "Can submit new workloads to its ClusterQueue",
                now,
            );
            let status = json!({
                "conditions": condition,
                "pendingWorkloads": st.pending,
                "admittedWorkloads": st.admitted,
                "flavorsUsage": usage,
            });
            wanted.push((id, status));
        }
        // Queues no longer there are forgotten.
        let ids: BTreeSet<&QueueId> = wanted.iter().map(|(id, _)| id).collect();
        self.last.retain(|id, _| ids.contains(id));
        self.queued.retain(|id, _| ids.contains(id));
        self.active_since.retain(|id, _| ids.contains(id));
        // A new leader knows what the server holds: what is already there
        // is not written again.
        for (id, _) in &wanted {
            if !self.last.contains_key(id)
                && let Some(observed) = ix.observed_queue_status(id.1.as_deref(), &id.2)
            {
                self.last.insert(id.clone(), observed);
            }
        }
        wanted.retain(|(id, status)| !self.last.get(id).is_some_and(|l| same_status(l, status)));
        wanted
    }

    /// Plans for the queues whose status changed (not already queued with
    /// that status), at most ~10 % of the write budget per interval: the
    /// writer applies them (rate limit, lease) and reports back.
    pub(super) fn plans(&mut self, ix: &Index, m: &Metrics, cfg: &RunConfig) -> Vec<Plan> {
        let budget = ((cfg.kube_qps * 0.1 * cfg.queue_status_interval.as_secs_f64()).floor() as usize).max(1);
        let now = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let mut out = Vec::new();
        for (id, status) in self.wanted(ix, m, &now) {
            if out.len() >= budget {
                break;
            }
            if self.queued.get(&id) == Some(&status) {
                continue;
            }
            self.queued.insert(id.clone(), status.clone());
            let (_, namespace, name) = id;
            out.push(Plan {
                purpose: Purpose::QueueStatus,
                steps: vec![Step::ApplyQueueStatus {
                    queue: QueueRef { namespace, name },
                    status,
                }],
            });
        }
        out
    }

    /// The writer is done with a queue status plan.
    pub(super) fn written(&mut self, plan: &Plan, ok: bool) {
        for step in &plan.steps {
            let Step::ApplyQueueStatus { queue, status } = step else {
                continue;
            };
            let id = (queue.namespace.is_none(), queue.namespace.clone(), queue.name.clone());
            if self.queued.get(&id) == Some(status) {
                self.queued.remove(&id);
            }
            if ok {
                self.last.insert(id, status.clone());
            }
        }
    }
}
