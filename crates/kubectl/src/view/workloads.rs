//! `kubectl sluice workloads`: one line per workload with its job, queue,
//! state, position, reason and estimated start.
//!
//! Positions and estimates come from the LocalQueue's status (refreshed by
//! the controller at most once a minute) when it lists the workload, else
//! from the workload's own status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;
use sluice_api::v1alpha1::{Workload, WorkloadState};

use super::{relative_start, seconds_since, short_duration};
use crate::snapshot::Snapshot;
use crate::table::{Colour, Table, paint};

/// Which workloads to show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    #[default]
    All,
    /// Waiting: Pending or Inactive.
    Pending,
    /// Holding quota: QuotaReserved, Admitted or Evicting.
    Admitted,
}

/// One workload, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    pub namespace: String,
    pub name: String,
    /// `Kind/name` of the object it was made for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    pub local_queue: String,
    /// Where it was admitted, else where its LocalQueue sends it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    pub state: String,
    pub priority: i32,
    /// 0-based places among the pending workloads (pending only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_in_local_queue: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_in_cluster_queue: Option<i32>,
    /// Why it waits (pending), or the latest eviction's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<Time>,
}

fn state_name(s: WorkloadState) -> &'static str {
    match s {
        WorkloadState::Pending => "Pending",
        WorkloadState::QuotaReserved => "QuotaReserved",
        WorkloadState::Admitted => "Admitted",
        WorkloadState::Evicting => "Evicting",
        WorkloadState::Finished => "Finished",
        WorkloadState::Inactive => "Inactive",
    }
}

/// The object a Workload was made for: its controlling owner (a Job, a
/// Deployment, …), else a gang's `sluice.dev/gang` label, a pod group's
/// `sluice.dev/pod-group`, or the one pod it was made for.
pub fn job_of(w: &Workload) -> Option<String> {
    let owners = w.metadata.owner_references.as_deref().unwrap_or_default();
    if let Some(o) = owners.iter().find(|o| o.controller == Some(true)) {
        return Some(format!("{}/{}", o.kind, o.name));
    }
    let labels = w.metadata.labels.as_ref();
    if let Some(gang) = labels.and_then(|l| l.get(sluice_api::labels::GANG)) {
        return Some(format!("gang/{gang}"));
    }
    if let Some(group) = labels.and_then(|l| l.get(sluice_api::labels::POD_GROUP)) {
        return Some(format!("pod-group/{group}"));
    }
    match owners {
        [o] if o.kind == "Pod" => Some(format!("Pod/{}", o.name)),
        _ => None,
    }
}

/// The view of one workload.
pub fn view(s: &Snapshot, w: &Workload) -> WorkloadView {
    let namespace = w.metadata.namespace.clone().unwrap_or_default();
    let name = w.metadata.name.clone().unwrap_or_default();
    let state = w.derived_state();
    let status = w.status.as_ref();
    let lq = s.local_queue(&namespace, &w.spec.queue_name);
    let listed = lq
        .and_then(|q| q.status.as_ref())
        .and_then(|st| st.pending.iter().find(|p| p.name == name));
    let own = status.and_then(|st| st.pending.as_ref());
    let pending = matches!(state, WorkloadState::Pending);
    let reason = if pending {
        listed
            .map(|p| p.reason.clone())
            .filter(|r| !r.is_empty())
            .or_else(|| own.map(|p| p.reason.clone()))
    } else {
        status
            .and_then(|st| st.condition("Evicted"))
            .filter(|c| c.status == "True" && state != WorkloadState::Admitted)
            .map(|c| c.reason.clone())
    };
    WorkloadView {
        job: job_of(w),
        local_queue: w.spec.queue_name.clone(),
        cluster_queue: status
            .and_then(|st| st.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
            .or_else(|| lq.map(|q| q.spec.cluster_queue.clone())),
        state: state_name(state).to_string(),
        priority: w.spec.effective_priority(),
        position_in_local_queue: pending
            .then(|| {
                listed
                    .map(|p| p.position_in_local_queue)
                    .or(own.and_then(|p| p.position_in_local_queue))
            })
            .flatten(),
        position_in_cluster_queue: pending
            .then(|| {
                listed
                    .map(|p| p.position_in_cluster_queue)
                    .or(own.and_then(|p| p.position_in_cluster_queue))
            })
            .flatten(),
        reason,
        estimated_start: pending
            .then(|| {
                listed
                    .and_then(|p| p.estimated_start.clone())
                    .or(own.and_then(|p| p.estimated_start.clone()))
            })
            .flatten(),
        created: w.metadata.creation_timestamp.clone(),
        namespace,
        name,
    }
}

/// The workloads of the snapshot that pass `filter`, oldest first.
pub fn workloads(s: &Snapshot, filter: Filter) -> Vec<WorkloadView> {
    let mut out: Vec<WorkloadView> = s
        .workloads
        .iter()
        .filter(|w| match filter {
            Filter::All => true,
            Filter::Pending => matches!(w.derived_state(), WorkloadState::Pending | WorkloadState::Inactive),
            Filter::Admitted => matches!(
                w.derived_state(),
                WorkloadState::QuotaReserved | WorkloadState::Admitted | WorkloadState::Evicting
            ),
        })
        .map(|w| view(s, w))
        .collect();
    out.sort_by(|a, b| {
        (
            &a.namespace,
            &a.local_queue,
            a.position_in_local_queue.is_none(),
            a.position_in_local_queue,
            &a.created,
            &a.name,
        )
            .cmp(&(
                &b.namespace,
                &b.local_queue,
                b.position_in_local_queue.is_none(),
                b.position_in_local_queue,
                &b.created,
                &b.name,
            ))
    });
    out
}

fn state_colour(state: &str) -> Option<Colour> {
    match state {
        "Admitted" => Some(Colour::Green),
        "Pending" | "QuotaReserved" => Some(Colour::Yellow),
        "Evicting" | "Inactive" => Some(Colour::Red),
        "Finished" => Some(Colour::Dim),
        _ => None,
    }
}

/// The table (`all_namespaces`: a NAMESPACE column; `wide`: ClusterQueue,
/// priority, position in the ClusterQueue, absolute estimate).
pub fn table(views: &[WorkloadView], s: &Snapshot, all_namespaces: bool, wide: bool, colour: bool) -> Table {
    let mut header = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE");
    }
    header.extend([
        "NAME",
        "JOB",
        "QUEUE",
        "STATE",
        "POSITION",
        "REASON",
        "EST. START",
        "AGE",
    ]);
    if wide {
        header.extend(["CLUSTERQUEUE", "PRIORITY", "CQ-POSITION", "EST. START (UTC)"]);
    }
    let mut t = Table::new(header);
    let dash = || "-".to_string();
    for v in views {
        let mut row = Vec::new();
        if all_namespaces {
            row.push(v.namespace.clone());
        }
        let state = match state_colour(&v.state) {
            Some(c) => paint(&v.state, c, colour),
            None => v.state.clone(),
        };
        row.extend([
            v.name.clone(),
            v.job.clone().unwrap_or_else(dash),
            v.local_queue.clone(),
            state,
            v.position_in_local_queue.map_or_else(dash, |p| p.to_string()),
            v.reason.clone().unwrap_or_else(dash),
            v.estimated_start
                .as_ref()
                .map_or_else(dash, |t| relative_start(t, s.now)),
            v.created
                .as_ref()
                .map_or_else(dash, |t| short_duration(seconds_since(t, s.now))),
        ]);
        if wide {
            row.extend([
                v.cluster_queue.clone().unwrap_or_else(dash),
                v.priority.to_string(),
                v.position_in_cluster_queue.map_or_else(dash, |p| p.to_string()),
                v.estimated_start.as_ref().map_or_else(dash, |t| {
                    t.0.round(k8s_openapi::jiff::Unit::Second)
                        .map(|x| x.to_string())
                        .unwrap_or_default()
                }),
            ]);
        }
        t.rows.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::job_of;
    use sluice_api::v1alpha1::Workload;

    fn workload(meta: serde_json::Value) -> Workload {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload", "metadata": meta,
            "spec": {"podSets": [], "queueName": "q"}
        }))
        .unwrap()
    }

    #[test]
    fn the_object_a_workload_is_for_is_named_by_kind() {
        let owned = |kind: &str, controller: bool| {
            workload(serde_json::json!({"name": "w", "ownerReferences": [
                {"apiVersion": "v1", "kind": kind, "name": "x", "uid": "u", "controller": controller}]}))
        };
        assert_eq!(job_of(&owned("Deployment", true)).as_deref(), Some("Deployment/x"));
        assert_eq!(job_of(&owned("Pod", false)).as_deref(), Some("Pod/x"));
        let group = workload(serde_json::json!({"name": "pod-g", "labels": {"sluice.dev/pod-group": "g"}}));
        assert_eq!(job_of(&group).as_deref(), Some("pod-group/g"));
        let gang = workload(serde_json::json!({"name": "gang-g", "labels": {"sluice.dev/gang": "g"}}));
        assert_eq!(job_of(&gang).as_deref(), Some("gang/g"));
    }
}
