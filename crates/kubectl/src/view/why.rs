//! `kubectl sluice why JOB|WORKLOAD`: the whole story of one workload:
//! where it stands, why it waits (per flavor, in numbers), its ClusterQueue's
//! quota, its admission history, and, for those who may list them, the
//! workloads holding the quota.

use std::fmt::Write as _;

use serde::Serialize;
use sluice_api::v1alpha1::Workload;

use super::queues::QuotaView;
use super::workloads::{WorkloadView, view};
use super::{ordinal, relative_start, seconds_since, short_duration};
use crate::snapshot::Snapshot;

/// An event about the workload or its job (`kubectl get events`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    pub time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    pub type_: String,
    pub reason: String,
    pub note: String,
}

/// Everything `why` says, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhyView {
    pub workload: WorkloadView,
    /// The engine's summary (`status.pending.message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Per flavor tried: (flavor, reason, message with the numbers).
    pub flavors: Vec<(String, String, String)>,
    /// The ClusterQueue's quota and usage, when the user can see it.
    pub quota: Vec<QuotaView>,
    /// Conditions in time order: (time, type, status, reason, message).
    pub history: Vec<(String, String, String, String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    pub events: Vec<EventLine>,
    /// Admitted workloads of the same ClusterQueue; `None`: the user may
    /// not list Workloads in all namespaces.
    pub holders: Option<Vec<WorkloadView>>,
}

/// Finds a workload by its name, or by its job's name (`Job/NAME`, or a
/// bare name owned by a job of that name).
pub fn find<'a>(s: &'a Snapshot, namespace: &str, name: &str) -> Option<&'a Workload> {
    let (kind, bare) = match name.split_once('/') {
        Some((k, n)) => (Some(k.to_ascii_lowercase()), n),
        None => (None, name),
    };
    let in_ns = || {
        s.workloads
            .iter()
            .filter(|w| w.metadata.namespace.as_deref() == Some(namespace))
    };
    if kind
        .as_deref()
        .is_none_or(|k| k == "workload" || k == "workloads" || k == "wl")
        && let Some(w) = in_ns().find(|w| w.metadata.name.as_deref() == Some(bare))
    {
        return Some(w);
    }
    in_ns().find(|w| {
        w.metadata
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|o| o.name == bare && kind.as_deref().is_none_or(|k| o.kind.to_ascii_lowercase() == k))
    })
}

/// The view of `w`; `events` and `holders` as read (see [`WhyView`]).
pub fn why(s: &Snapshot, w: &Workload, events: Vec<EventLine>, holders: Option<Vec<WorkloadView>>) -> WhyView {
    let wv = view(s, w);
    let status = w.status.clone().unwrap_or_default();
    let pending = status.pending.clone().filter(|_| wv.state == "Pending");
    let quota = crate::view::queues::queues(s)
        .into_iter()
        .find(|q| Some(&q.cluster_queue) == wv.cluster_queue.as_ref())
        .map(|q| q.resources)
        .unwrap_or_default();
    let mut history: Vec<_> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.last_transition_time
                    .0
                    .round(k8s_openapi::jiff::Unit::Second)
                    .map(|t| t.to_string())
                    .unwrap_or_default(),
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect();
    history.sort();
    WhyView {
        message: pending.as_ref().map(|p| p.message.clone()).filter(|m| !m.is_empty()),
        flavors: pending
            .iter()
            .flat_map(|p| p.flavors.iter())
            .map(|f| (f.name.clone(), f.reason.clone(), f.message.clone()))
            .collect(),
        quota,
        history,
        requeue_count: status.requeue_state.as_ref().map(|r| r.count),
        requeue_at: status.requeue_state.as_ref().and_then(|r| r.requeue_at.clone()),
        events,
        holders: holders.map(|h| {
            h.into_iter()
                .filter(|x| x.cluster_queue == wv.cluster_queue && x.name != wv.name)
                .collect()
        }),
        workload: wv,
    }
}

/// The text.
pub fn text(v: &WhyView, s: &Snapshot) -> String {
    let mut out = String::new();
    where_it_stands(&mut out, &v.workload, s);
    why_it_waits(&mut out, v);
    quota(&mut out, v);
    history(&mut out, v, s);
    events(&mut out, v, s);
    holders(&mut out, v, s);
    out
}

/// Its queues, state, position and estimated start.
fn where_it_stands(out: &mut String, w: &WorkloadView, s: &Snapshot) {
    let job = w.job.as_deref().map(|j| format!(" ({j})")).unwrap_or_default();
    let _ = writeln!(
        out,
        "Workload {}/{}{job}: LocalQueue {} → ClusterQueue {}",
        w.namespace,
        w.name,
        w.local_queue,
        w.cluster_queue.as_deref().unwrap_or("?")
    );
    let reason = w.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
    let _ = writeln!(out, "State:     {}{reason}, priority {}", w.state, w.priority);
    if let (Some(l), Some(c)) = (w.position_in_local_queue, w.position_in_cluster_queue) {
        let _ = writeln!(
            out,
            "Position:  {} in its LocalQueue, {} in the ClusterQueue ({} ahead of it there)",
            ordinal(l),
            ordinal(c),
            c - 1
        );
    }
    match &w.estimated_start {
        Some(t) if w.state == "Pending" => {
            let at =
                t.0.round(k8s_openapi::jiff::Unit::Second)
                    .map(|x| x.to_string())
                    .unwrap_or_default();
            let _ = writeln!(
                out,
                "Estimate:  admitted {} ({at}), from the expected run times of what runs and waits ahead",
                relative_start(t, s.now)
            );
        }
        None if w.state == "Pending" => {
            let _ = writeln!(out, "Estimate:  {}", no_estimate(w.reason.as_deref()));
        }
        _ => {}
    }
}

/// The engine's summary, then per flavor tried.
fn why_it_waits(out: &mut String, v: &WhyView) {
    if v.message.is_none() && v.flavors.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nWhy it waits:");
    if let Some(m) = &v.message {
        let _ = writeln!(out, "  {m}");
    }
    for (flavor, reason, message) in &v.flavors {
        let _ = writeln!(out, "  {flavor} ({reason}): {message}");
    }
}

/// Its ClusterQueue's quota and usage, when the user can see it.
fn quota(out: &mut String, v: &WhyView) {
    if v.quota.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nQuota of ClusterQueue {}:",
        v.workload.cluster_queue.as_deref().unwrap_or("?")
    );
    let mut t = crate::table::Table::new(vec![
        "  FLAVOR",
        "RESOURCE",
        "NOMINAL",
        "BORROWING-LIMIT",
        "IN-USE",
        "BORROWED",
    ]);
    for q in &v.quota {
        t.rows.push(vec![
            format!("  {}", q.flavor),
            q.resource.clone(),
            q.nominal.clone(),
            q.borrowing_limit.clone().unwrap_or_else(|| "-".into()),
            q.in_use.clone(),
            q.borrowed.clone().unwrap_or_else(|| "0".into()),
        ]);
    }
    out.push_str(&t.render(""));
}

/// Its conditions in time order, and how often it was requeued.
fn history(out: &mut String, v: &WhyView, s: &Snapshot) {
    if !v.history.is_empty() {
        let _ = writeln!(out, "\nHistory:");
        for (at, type_, st, reason, message) in &v.history {
            let msg = if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            };
            let _ = writeln!(out, "  {at}  {type_}={st} ({reason}){msg}");
        }
    }
    if let Some(n) = v.requeue_count {
        let next = v
            .requeue_at
            .as_ref()
            .map(|t| format!("; back in the queue {}", relative_start(t, s.now)))
            .unwrap_or_default();
        let _ = writeln!(out, "  evicted and requeued {n} time(s){next}");
    }
}

/// The events about it or its job, with their ages.
fn events(out: &mut String, v: &WhyView, s: &Snapshot) {
    if v.events.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nEvents:");
    for e in &v.events {
        let age = e
            .time
            .as_ref()
            .map(|t| short_duration(seconds_since(t, s.now)))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "  {age:>6} ago  {:<7}  {}: {}", e.type_, e.reason, e.note);
    }
}

/// The workloads holding its ClusterQueue's quota, or why they are not
/// shown.
fn holders(out: &mut String, v: &WhyView, s: &Snapshot) {
    let cluster_queue = v.workload.cluster_queue.as_deref().unwrap_or("?");
    match &v.holders {
        Some(h) if !h.is_empty() => {
            let _ = writeln!(out, "\nHolding the quota of {cluster_queue}:");
            for x in h {
                let age = x
                    .created
                    .as_ref()
                    .map(|t| short_duration(seconds_since(t, s.now)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {}/{} ({}), priority {}, {}, age {age}",
                    x.namespace,
                    x.name,
                    x.job.as_deref().unwrap_or("-"),
                    x.priority,
                    x.state
                );
            }
        }
        Some(_) => {}
        None => {
            let _ = writeln!(
                out,
                "\n(The workloads holding the quota are not shown: you may not list Workloads in all namespaces.)"
            );
        }
    }
}

/// What to say when a pending workload has no estimated start: never, when
/// its reason says waiting cannot admit it; else that none was made.
fn no_estimate(reason: Option<&str>) -> String {
    use sluice_api::v1alpha1::conditions::reasons::waiting_cannot_admit;
    match reason {
        Some(r) if waiting_cannot_admit(r) => {
            format!("never as it is ({r}: waiting alone does not admit it; see why below)")
        }
        _ => "none yet (not within the forecast's horizon, or not computed yet)".to_string(),
    }
}

#[cfg(test)]
mod estimate_tests {
    use super::no_estimate;

    #[test]
    fn a_workload_that_can_never_be_admitted_is_not_told_it_has_no_estimate_yet() {
        assert_eq!(
            no_estimate(Some("ExceedsQuota")),
            "never as it is (ExceedsQuota: waiting alone does not admit it; see why below)"
        );
        assert_eq!(
            no_estimate(Some("ResourceNotCovered")),
            "never as it is (ResourceNotCovered: waiting alone does not admit it; see why below)"
        );
        assert_eq!(
            no_estimate(Some("InsufficientQuota")),
            "none yet (not within the forecast's horizon, or not computed yet)"
        );
        assert_eq!(
            no_estimate(None),
            "none yet (not within the forecast's horizon, or not computed yet)"
        );
    }
}
