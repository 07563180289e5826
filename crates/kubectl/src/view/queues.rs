//! `kubectl sluice queues`: ClusterQueues for those who may read them,
//! else the user's LocalQueues with their ClusterQueue's numbers (from the
//! LocalQueue's status).

use serde::Serialize;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, StopPolicy};

use crate::snapshot::Snapshot;
use crate::table::Table;

/// One queue and its quota, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    /// `ClusterQueue` or `LocalQueue`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// The ClusterQueue (itself, for a ClusterQueue).
    pub cluster_queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// The queue's own stop policy, and its ClusterQueue's (LocalQueues).
    pub stop_policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue_stop_policy: Option<String>,
    /// This queue's pending and admitted workloads.
    pub pending: i32,
    pub admitted: i32,
    /// Its ClusterQueue's, over all its LocalQueues (LocalQueues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue_pending: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue_admitted: Option<i32>,
    /// Per flavor and resource of the ClusterQueue.
    pub resources: Vec<QuotaView>,
    /// LocalQueues that cannot admit (their `Active` condition is False,
    /// e.g. `NamespaceNotSelected`: the ClusterQueue does not select their
    /// namespace): itself for a LocalQueue, those read that point at it for
    /// a ClusterQueue.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inactive: Vec<InactiveQueue>,
    /// A ClusterQueue's own `Active=False` condition (the controller
    /// ignores it: its numbers are not in effect).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue_inactive: Option<InactiveQueue>,
    /// The queue's own `Active` condition (`True` or `False`; unset until
    /// the controller has written it), as `kubectl get` shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active: Option<String>,
    /// The reason of that condition (e.g. `Ready`, `InvalidClusterQueue`,
    /// `NamespaceNotSelected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_reason: Option<String>,
}

impl QueueView {
    /// The ACTIVE cell: `True`, `False (Reason)`, or `-` before the
    /// controller has said.
    pub fn active_cell(&self) -> String {
        match (&self.active, &self.active_reason) {
            (Some(a), Some(r)) if a != "True" && !r.is_empty() => format!("{a} ({r})"),
            (Some(a), _) => a.clone(),
            (None, _) => "-".into(),
        }
    }
}

/// A queue's `Active` condition: its status and reason.
fn active_of(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> (Option<String>, Option<String>) {
    match conditions.iter().find(|c| c.type_ == "Active") {
        Some(c) => (Some(c.status.clone()), Some(c.reason.clone()).filter(|r| !r.is_empty())),
        None => (None, None),
    }
}

/// A LocalQueue that cannot admit new workloads, and why (from its
/// `Active` condition, as the controller wrote it).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InactiveQueue {
    /// `namespace/name`.
    pub local_queue: String,
    pub reason: String,
    pub message: String,
}

/// The LocalQueue's `Active=False` condition, if it has one.
fn inactive(q: &LocalQueue) -> Option<InactiveQueue> {
    let name = format!(
        "{}/{}",
        q.metadata.namespace.as_deref().unwrap_or_default(),
        q.metadata.name.as_deref().unwrap_or_default()
    );
    inactive_of(name, &q.status.as_ref()?.conditions)
}

/// The `Active=False` condition among `conditions`, as an [`InactiveQueue`]
/// named `name`.
fn inactive_of(
    name: String,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<InactiveQueue> {
    let c = conditions.iter().find(|c| c.type_ == "Active" && c.status == "False")?;
    Some(InactiveQueue {
        local_queue: name,
        reason: c.reason.clone(),
        message: c.message.clone(),
    })
}

/// Quota and usage of one resource of one flavor (quantities as the API
/// writes them).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaView {
    pub flavor: String,
    pub resource: String,
    pub nominal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<String>,
    pub in_use: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<String>,
}

fn stop(p: StopPolicy) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn cluster_queue_view(q: &ClusterQueue, local_queues: &[LocalQueue]) -> QueueView {
    let name = q.metadata.name.clone().unwrap_or_default();
    let status = q.status.clone().unwrap_or_default();
    let mut resources = Vec::new();
    for (_, f) in q.spec.flavors() {
        for r in &f.resources {
            let used = status
                .flavors_usage
                .iter()
                .find(|u| u.name == f.name)
                .and_then(|u| u.resources.iter().find(|x| x.name == r.name));
            resources.push(QuotaView {
                flavor: f.name.clone(),
                resource: r.name.clone(),
                nominal: r.nominal_quota.0.clone(),
                borrowing_limit: r.borrowing_limit.as_ref().map(|q| q.0.clone()),
                in_use: used.map_or_else(|| "0".into(), |u| u.total.0.clone()),
                borrowed: used.and_then(|u| u.borrowed.as_ref().map(|b| b.0.clone())),
            });
        }
    }
    let (active, active_reason) = active_of(&status.conditions);
    QueueView {
        kind: "ClusterQueue",
        namespace: None,
        cluster_queue: name.clone(),
        name,
        cohort: q.spec.cohort.clone(),
        stop_policy: stop(q.spec.stop_policy),
        cluster_queue_stop_policy: None,
        pending: status.pending_workloads,
        admitted: status.admitted_workloads,
        cluster_queue_pending: None,
        cluster_queue_admitted: None,
        inactive: local_queues
            .iter()
            .filter(|l| q.metadata.name.as_deref() == Some(l.spec.cluster_queue.as_str()))
            .filter_map(inactive)
            .collect(),
        cluster_queue_inactive: inactive_of(q.metadata.name.clone().unwrap_or_default(), &status.conditions),
        active,
        active_reason,
        resources,
    }
}

fn local_queue_view(q: &LocalQueue) -> QueueView {
    let status = q.status.clone().unwrap_or_default();
    let cq = status.cluster_queue.clone();
    let resources = cq
        .iter()
        .flat_map(|c| c.flavors.iter())
        .flat_map(|f| {
            f.resources.iter().map(move |r| QuotaView {
                flavor: f.name.clone(),
                resource: r.name.clone(),
                nominal: r.nominal.0.clone(),
                borrowing_limit: r.borrowing_limit.as_ref().map(|q| q.0.clone()),
                in_use: r.used.0.clone(),
                borrowed: r.borrowed.as_ref().map(|b| b.0.clone()),
            })
        })
        .collect();
    let (active, active_reason) = active_of(&status.conditions);
    QueueView {
        kind: "LocalQueue",
        namespace: q.metadata.namespace.clone(),
        name: q.metadata.name.clone().unwrap_or_default(),
        cluster_queue: q.spec.cluster_queue.clone(),
        cohort: cq.as_ref().and_then(|c| c.cohort.clone()),
        stop_policy: stop(q.spec.stop_policy),
        cluster_queue_stop_policy: cq.as_ref().map(|c| stop(c.stop_policy)),
        pending: status.pending_workloads,
        admitted: status.admitted_workloads,
        cluster_queue_pending: cq.as_ref().map(|c| c.pending_workloads),
        cluster_queue_admitted: cq.as_ref().map(|c| c.admitted_workloads),
        inactive: inactive(q).into_iter().collect(),
        cluster_queue_inactive: None,
        active,
        active_reason,
        resources,
    }
}

/// ClusterQueues when the user may list them, else the LocalQueues read.
pub fn queues(s: &Snapshot) -> Vec<QueueView> {
    match &s.cluster_queues {
        Some(cqs) => cqs.iter().map(|q| cluster_queue_view(q, &s.local_queues)).collect(),
        None => s.local_queues.iter().map(local_queue_view).collect(),
    }
}

/// The table: a row per (queue, flavor, resource); the queue's own
/// columns on its first row only. ACTIVE is the queue's `Active`
/// condition with its reason when False ([`notes`] adds the message).
pub fn table(views: &[QueueView], wide: bool) -> Table {
    let local = views.iter().any(|v| v.kind == "LocalQueue");
    let mut header = if local {
        vec!["NAMESPACE", "LOCALQUEUE", "CLUSTERQUEUE"]
    } else {
        vec!["CLUSTERQUEUE", "COHORT"]
    };
    header.push("ACTIVE");
    header.extend([
        "FLAVOR",
        "RESOURCE",
        "NOMINAL",
        "BORROWING-LIMIT",
        "IN-USE",
        "BORROWED",
        "PENDING",
        "ADMITTED",
        "STOP",
    ]);
    if wide && local {
        header.extend(["CQ-PENDING", "CQ-ADMITTED", "CQ-STOP", "COHORT"]);
    }
    let mut t = Table::new(header);
    for v in views {
        let rows = if v.resources.is_empty() { 1 } else { v.resources.len() };
        for i in 0..rows {
            let r = v.resources.get(i);
            let first = i == 0;
            let own = |s: String| if first { s } else { String::new() };
            let mut row = if local {
                vec![
                    own(v.namespace.clone().unwrap_or_default()),
                    own(v.name.clone()),
                    own(v.cluster_queue.clone()),
                ]
            } else {
                vec![own(v.name.clone()), own(v.cohort.clone().unwrap_or_else(|| "-".into()))]
            };
            row.push(own(v.active_cell()));
            let dash = || "-".to_string();
            row.extend([
                r.map_or_else(dash, |r| r.flavor.clone()),
                r.map_or_else(dash, |r| r.resource.clone()),
                r.map_or_else(dash, |r| shown(&r.resource, &r.nominal)),
                r.and_then(|r| r.borrowing_limit.as_ref().map(|b| shown(&r.resource, b)))
                    .unwrap_or_else(dash),
                r.map_or_else(dash, |r| shown(&r.resource, &r.in_use)),
                r.and_then(|r| r.borrowed.as_ref().map(|b| shown(&r.resource, b)))
                    .unwrap_or_else(|| if r.is_some() { "0".into() } else { dash() }),
                own(v.pending.to_string()),
                own(v.admitted.to_string()),
                own(v.stop_policy.clone()),
            ]);
            if wide && local {
                row.extend([
                    own(v.cluster_queue_pending.map_or_else(dash, |n| n.to_string())),
                    own(v.cluster_queue_admitted.map_or_else(dash, |n| n.to_string())),
                    own(v.cluster_queue_stop_policy.clone().unwrap_or_else(dash)),
                    own(v.cohort.clone().unwrap_or_else(dash)),
                ]);
            }
            t.rows.push(row);
        }
    }
    t
}

/// A quantity of `resource` as the table shows it: as written, but a
/// GPU-equivalent to three decimals (`0.143` for a 1g MIG slice, not
/// `0.142857143`).
fn shown(resource: &str, quantity: &str) -> String {
    if resource != sluice_api::quantity::GPU_EQUIVALENT {
        return quantity.to_string();
    }
    sluice_api::quantity::parse_amount(resource, "", quantity)
        .ok()
        .and_then(|a| i64::try_from(a).ok())
        .map_or_else(|| quantity.to_string(), |a| sluice_convert::text::amount(resource, a))
}

/// What the table cannot show: the ClusterQueues the controller ignores
/// and the LocalQueues that cannot admit, one line each (`LocalQueue
/// team-b/gpu is inactive (NamespaceNotSelected): …`); empty when there
/// are none.
pub fn notes(views: &[QueueView]) -> String {
    let mut out = String::new();
    for q in views.iter().filter_map(|v| v.cluster_queue_inactive.as_ref()) {
        out.push_str(&format!(
            "ClusterQueue {} is inactive ({}): {}\n",
            q.local_queue, q.reason, q.message
        ));
    }
    for q in views.iter().flat_map(|v| v.inactive.iter()) {
        out.push_str(&format!(
            "LocalQueue {} is inactive ({}): {}\n",
            q.local_queue, q.reason, q.message
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClusterQueue the controller ignores (one created without the
    /// webhook that fails validate(), e.g. a borrowingLimit without a
    /// cohort on a server without CEL, before the CRD's schema refused it)
    /// is said to be inactive, with its reason: its numbers are not in
    /// effect.
    #[test]
    fn an_inactive_cluster_queue_is_shown_inactive_with_its_reason() {
        let cq: ClusterQueue = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "team-x"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"}]}]}]},
            "status": {"conditions": [{"type": "Active", "status": "False", "reason": "InvalidClusterQueue",
                "message": "Ignored by the controller: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: requires spec.cohort",
                "lastTransitionTime": "2026-11-28T00:00:00Z"}]}
        }))
        .unwrap();
        let views = [cluster_queue_view(&cq, &[])];
        assert_eq!(
            notes(&views),
            "ClusterQueue team-x is inactive (InvalidClusterQueue): Ignored by the controller: \
             spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: requires spec.cohort\n"
        );
        // The row says it too, as does top's.
        let table = table(&views, false).render("");
        let row = table.lines().nth(1).unwrap();
        assert!(
            row.starts_with("team-x         -        False (InvalidClusterQueue)   a100"),
            "{table}"
        );
        let top = crate::view::top::table(&crate::view::top::usage(&views), false).render("");
        assert!(
            top.lines()
                .nth(1)
                .unwrap()
                .starts_with("team-x         False (InvalidClusterQueue)   a100"),
            "{top}"
        );
        let mut active = cq.clone();
        active.status.as_mut().unwrap().conditions[0].status = "True".into();
        active.status.as_mut().unwrap().conditions[0].reason = "Ready".into();
        assert_eq!(notes(&[cluster_queue_view(&active, &[])]), "");
        assert_eq!(cluster_queue_view(&active, &[]).active_cell(), "True");
        let mut unknown = cq.clone();
        unknown.status = None;
        assert_eq!(cluster_queue_view(&unknown, &[]).active_cell(), "-");
    }
}
