//! ClusterQueue, LocalQueue and Cohort status: computed from the index by
//! pure, typed functions ([`cluster_queue_status`], [`local_queue_status`],
//! [`cohort_status`]), serialized for a server-side apply, and written only
//! when changed, within a share of the write budget. With fair sharing on,
//! ClusterQueues and Cohorts carry their weighted share
//! (`status.fairSharing.weightedShare`), also exported as gauges.
//!
//! These writes are bookkeeping: they go through the write queue's lazy
//! lane (latest value wins per object), after admissions and evictions,
//! and each tick hands out at most ~10 % of the write budget of them. A
//! share moves with every admission in a cohort; coalescing per tick is
//! what keeps that from costing a write per admission.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::quantity::{to_milli, to_quantity};
use sluice_api::v1alpha1::conditions as cond;
use sluice_api::v1alpha1::{
    ClusterQueueStatus, ClusterQueueSummary, CohortStatus, FairSharingStatus, FlavorUsage, LocalQueueStatus,
    ResourceUsage, UsageStatus,
};
use sluice_convert::adapter;
use sluice_scheduler::usage::{self, Account};
use sluice_scheduler::{FairShare, QueueUsage};

use super::RunConfig;
use crate::index::{Index, Kind, LocalQueueStats, PendingSnapshot};
use crate::metrics::Metrics;
use crate::plan::{EventSpec, ObjKey, Plan, Purpose, QueueRef, Step};

/// ClusterQueue, LocalQueue and Cohort status: written when changed, at
/// most once per tick per object, and at most ~10 % of the write budget
/// per tick (the rest waits for the next tick; latest value wins, no
/// backlog).
#[derive(Default)]
pub(super) struct QueueStatusWriter {
    /// Last status written per queue.
    pub(super) last: HashMap<QueueRef, Value>,
    /// Handed to the writer, not written yet.
    pub(super) queued: HashMap<QueueRef, Value>,
    /// When each queue's Active condition last changed: (status, time).
    pub(super) active_since: HashMap<QueueRef, (bool, Time)>,
    /// When each ClusterQueue's NamespacesSelected condition last changed.
    pub(super) selected_since: HashMap<QueueRef, (bool, Time)>,
    /// When each ClusterQueue's WithinBudget condition last changed.
    pub(super) budget_since: HashMap<QueueRef, (bool, Time)>,
    /// The NamespacesSelected problem last logged and told in an Event,
    /// per ClusterQueue with LocalQueues (once per distinct message).
    pub(super) selection_warned: HashMap<String, String>,
}

/// Whether two queue statuses say the same, fields left out and empty or
/// null ones alike (the server's copy omits empty lists).
pub(super) fn same_status(a: &Value, b: &Value) -> bool {
    fn norm(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !(v.is_null() || v.as_array().is_some_and(Vec::is_empty)))
                    .map(|(k, v)| (k.clone(), norm(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(norm).collect()),
            other => other.clone(),
        }
    }
    norm(a) == norm(b)
}

/// A queue's `Active` condition: `True` (reason `Ready`, message `ok`)
/// unless there is a `problem` (reason, message); `since`: when it took
/// that status.
pub(super) fn active_condition(problem: Option<(&'static str, String)>, ok: &str, since: Time) -> Condition {
    let active = problem.is_none();
    let (reason, message) = problem.unwrap_or(("Ready", ok.to_string()));
    Condition {
        type_: "Active".into(),
        status: if active { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: None,
    }
}

/// A ClusterQueue's status: its `Active` condition and, while the engine
/// holds the queue (`usage`), its counts and its usage per flavor (with
/// what is borrowed, when anything is).
pub(super) fn cluster_queue_status(active: Condition, usage: Option<&QueueUsage>) -> ClusterQueueStatus {
    let mut status = ClusterQueueStatus {
        conditions: vec![active],
        ..Default::default()
    };
    if let Some(u) = usage {
        status.pending_workloads = count(u.pending);
        status.admitted_workloads = count(u.admitted);
        status.flavors_usage = by_flavor(u.resources.iter().map(|r| {
            let borrowed = (r.borrowed > 0).then(|| to_quantity(&r.resource, i128::from(r.borrowed)));
            (&r.flavor, &r.resource, r.used, borrowed)
        }));
    }
    status
}

/// A Cohort's status: its `Active` condition and, with fair sharing on
/// and the cohort in the engine, its weighted share.
pub(super) fn cohort_status(active: Condition, share: Option<&FairShare>) -> CohortStatus {
    CohortStatus {
        fair_sharing: share.map(share_status),
        conditions: vec![active],
    }
}

/// The `status.fairSharing` of a ClusterQueue or Cohort.
pub(super) fn share_status(share: &FairShare) -> FairSharingStatus {
    FairSharingStatus {
        weighted_share: share.weighted_share,
    }
}

/// A LocalQueue's status: its `Active` condition, its counts, and the
/// usage of its admitted workloads per flavor.
pub(super) fn local_queue_status(
    active: Condition,
    stats: &LocalQueueStats,
    cluster_queue: Option<ClusterQueueSummary>,
    pending: Option<&PendingSnapshot>,
    usage: Option<UsageStatus>,
) -> LocalQueueStatus {
    LocalQueueStatus {
        pending_workloads: count(stats.pending),
        admitted_workloads: count(stats.admitted),
        flavors_usage: by_flavor(stats.usage.iter().map(|((f, r), used)| (f, r, *used, None))),
        conditions: vec![active],
        cluster_queue,
        pending: pending.map(|p| p.workloads.clone()).unwrap_or_default(),
        pending_as_of: pending.and_then(|p| p.as_of.clone()),
        usage: usage.map(Box::new),
    }
}

/// Usage per flavor, flavors in name order, resources in the order given:
/// `(flavor, resource, used, borrowed)`.
fn by_flavor<'a>(usage: impl Iterator<Item = (&'a String, &'a String, i64, Option<Quantity>)>) -> Vec<FlavorUsage> {
    let mut flavors: BTreeMap<String, Vec<ResourceUsage>> = BTreeMap::new();
    for (flavor, resource, used, borrowed) in usage {
        flavors.entry(flavor.clone()).or_default().push(ResourceUsage {
            name: resource.clone(),
            total: to_quantity(resource, i128::from(used)),
            borrowed,
        });
    }
    flavors
        .into_iter()
        .map(|(name, resources)| FlavorUsage { name, resources })
        .collect()
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The `status` of a ClusterQueue's apply, as written before it was typed:
/// the counts only while the engine holds the queue (`held`: the API type
/// always serializes them), `flavorsUsage` then even when empty (the API
/// type leaves an empty list out).
pub(super) fn cluster_queue_body(status: &ClusterQueueStatus, held: bool) -> Value {
    let mut body = json!({"conditions": status.conditions});
    if held {
        body["pendingWorkloads"] = json!(status.pending_workloads);
        body["admittedWorkloads"] = json!(status.admitted_workloads);
        body["flavorsUsage"] = json!(status.flavors_usage);
    }
    if let Some(g) = &status.gpus {
        body["gpus"] = json!(g);
    }
    if let Some(f) = &status.fair_sharing {
        body["fairSharing"] = json!(f);
    }
    if let Some(u) = &status.usage {
        body["usage"] = json!(u);
    }
    if let Some(b) = &status.budget {
        body["budget"] = json!(b);
    }
    body
}

/// The `status` of a LocalQueue's apply (`flavorsUsage` even when empty).
pub(super) fn local_queue_body(status: &LocalQueueStatus) -> Value {
    let mut body = json!({
        "conditions": status.conditions,
        "pendingWorkloads": status.pending_workloads,
        "admittedWorkloads": status.admitted_workloads,
        "flavorsUsage": status.flavors_usage,
    });
    if let Some(cq) = &status.cluster_queue {
        body["clusterQueue"] = json!(cq);
    }
    if let Some(at) = &status.pending_as_of {
        body["pending"] = json!(status.pending);
        body["pendingAsOf"] = json!(at);
    }
    if let Some(u) = &status.usage {
        body["usage"] = json!(u);
    }
    body
}

/// The usage metrics of a ClusterQueue the engine holds.
fn record_usage(m: &Metrics, name: &str, u: &QueueUsage) {
    let labels = |f: &str, r: &str| {
        vec![
            ("cluster_queue", name.to_string()),
            ("flavor", f.to_string()),
            ("resource", r.to_string()),
        ]
    };
    m.pending
        .get_or_create(&vec![("cluster_queue", name.to_string()), ("status", "active".into())])
        .set(u.pending as i64);
    for r in &u.resources {
        m.usage.get_or_create(&labels(&r.flavor, &r.resource)).set(r.used);
        m.nominal.get_or_create(&labels(&r.flavor, &r.resource)).set(r.nominal);
    }
}

/// The budget and usage-over-time metrics of a ClusterQueue, as of the
/// last flush.
fn record_budget(m: &Metrics, name: &str, ix: &Index) {
    if let Some(record) = ix.usage_records().get(&Account::ClusterQueue(Arc::from(name))) {
        for meter in &record.meters {
            let hours = usage::hours(to_milli(&meter.resource, meter.total));
            m.usage_hours(name, &meter.flavor, &meter.resource, hours);
        }
    }
    if let Some((b, s)) = ix.budget_spending(name) {
        let hours = |v| usage::hours(to_milli(&b.resource, v));
        let (spent, limit, projected) = (hours(s.spent), hours(s.limit), hours(s.projected));
        m.budget(name, &b.resource, spent, limit, projected);
        m.budget_action(name, ix.budget_action(name).flatten().map_or(0, |a| a as i64 + 1));
    }
}

/// `names` (objects of `kind` the index holds) and those of `kind` it
/// keeps out as invalid: each gets a status, the invalid ones to say why.
fn with_errors(ix: &Index, names: Vec<String>, kind: Kind) -> BTreeSet<String> {
    let mut all: BTreeSet<String> = names.into_iter().collect();
    all.extend(
        ix.errors()
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, name)| name.clone()),
    );
    all
}

/// When the server's condition `type_` of a queue took its status, if it
/// has that status now.
fn observed_since(ix: &Index, id: &QueueRef, type_: &str, holds: bool) -> Option<Time> {
    let status = ix.observed_queue_status(id)?;
    let c = status["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    let same = c["status"] == if holds { "True" } else { "False" };
    same.then(|| serde_json::from_value(c["lastTransitionTime"].clone()).ok())?
}

/// When a queue's condition `type_` took the status `holds`, as `since`
/// keeps it: what the server has for a new leader, now when it changes.
fn transition_time(
    since: &mut HashMap<QueueRef, (bool, Time)>,
    ix: &Index,
    id: QueueRef,
    type_: &str,
    holds: bool,
    now: &Time,
) -> Time {
    let observed = match since.contains_key(&id) {
        true => None,
        false => observed_since(ix, &id, type_, holds),
    };
    let at = since
        .entry(id)
        .or_insert_with(|| (holds, observed.unwrap_or_else(|| now.clone())));
    if at.0 != holds {
        *at = (holds, now.clone());
    }
    at.1.clone()
}

impl QueueStatusWriter {
    /// A queue's `Active` condition, keeping its transition time while the
    /// status stays the same.
    pub(super) fn active_condition(
        &mut self,
        ix: &Index,
        id: QueueRef,
        problem: Option<(&'static str, String)>,
        ok: &str,
        now: &Time,
    ) -> Condition {
        let active = problem.is_none();
        let since = transition_time(&mut self.active_since, ix, id, "Active", active, now);
        active_condition(problem, ok, since)
    }

    /// A ClusterQueue's `NamespacesSelected` condition, keeping its
    /// transition time while the status stays the same; a problem with
    /// LocalQueues in use is logged and told in a Warning Event on the
    /// ClusterQueue, once per distinct message (`events`).
    fn selection_condition(&mut self, ix: &Index, name: &str, now: &Time, events: &mut Vec<Plan>) -> Option<Condition> {
        let (holds, reason, message) = ix.namespace_selection(name)?;
        let id = QueueRef::ClusterQueue(name.to_string());
        let since = transition_time(&mut self.selected_since, ix, id, cond::NAMESPACES_SELECTED, holds, now);
        let in_use = !ix.local_queues_not_selected(name).0.is_empty();
        if holds || !in_use {
            self.selection_warned.remove(name);
        } else if self.selection_warned.get(name) != Some(&message) {
            tracing::warn!(cluster_queue = name, reason, %message, "LocalQueues cannot use their ClusterQueue");
            self.selection_warned.insert(name.to_string(), message.clone());
            events.push(Plan {
                purpose: Purpose::Report,
                steps: vec![Step::Event(EventSpec {
                    regarding: ObjectReference {
                        api_version: Some("sluice.dev/v1alpha1".into()),
                        kind: Some("ClusterQueue".into()),
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    type_: "Warning",
                    reason: reason.to_string(),
                    action: "Select",
                    note: message.clone(),
                })],
            });
        }
        Some(Condition {
            type_: cond::NAMESPACES_SELECTED.into(),
            status: if holds { cond::status::TRUE } else { cond::status::FALSE }.into(),
            reason: reason.into(),
            message,
            last_transition_time: since,
            observed_generation: None,
        })
    }

    /// A ClusterQueue's `WithinBudget` condition (with a budget), keeping
    /// its transition time while the status stays the same. The figures
    /// are those of the last flush; the status follows the action now.
    fn budget_condition(&mut self, ix: &Index, name: &str, now: &Time) -> Option<Condition> {
        let action = ix.budget_action(name)?;
        let holds = action.is_none();
        let id = QueueRef::ClusterQueue(name.to_string());
        let since = transition_time(&mut self.budget_since, ix, id, cond::WITHIN_BUDGET, holds, now);
        let figures = ix
            .budget_status(name)
            .map(|b| {
                format!(
                    "{} of {} {}-hours spent ({}%) from {}; {} projected by {}",
                    b.spent, b.limit, b.resource, b.percent, b.period_start.0, b.projected, b.period_end.0
                )
            })
            .unwrap_or_else(|| "not measured yet".to_string());
        let (reason, message) = match action {
            None => ("WithinBudget".to_string(), figures),
            Some(a) => (
                format!("{a:?}"),
                format!("{}: {figures}", sluice_convert::text::budget_effect(a)),
            ),
        };
        Some(Condition {
            type_: cond::WITHIN_BUDGET.into(),
            status: if holds { cond::status::TRUE } else { cond::status::FALSE }.into(),
            reason,
            message,
            last_transition_time: since,
            observed_generation: None,
        })
    }

    /// The status every queue and Cohort should have now (`now`: RFC
    /// 3339, as [`QueueStatusWriter::plans`] gives it); updates the usage
    /// and weighted-share metrics.
    #[cfg(test)]
    pub(super) fn wanted(&mut self, ix: &Index, m: &Metrics, now: &str) -> Vec<(QueueRef, Value)> {
        self.wanted_and_events(ix, m, now).0
    }

    /// [`QueueStatusWriter::wanted`], and the Warning Events to create
    /// (see [`QueueStatusWriter::selection_condition`]): each
    /// ClusterQueue's, LocalQueue's and Cohort's status, the queues no
    /// longer there forgotten, and only those that differ from what was
    /// last written (or what the server holds) kept.
    pub(super) fn wanted_and_events(
        &mut self,
        ix: &Index,
        m: &Metrics,
        now: &str,
    ) -> (Vec<(QueueRef, Value)>, Vec<Plan>) {
        let mut events = Vec::new();
        let now = Time(now.parse().unwrap_or_else(|_| Timestamp::now()));
        let fair = ix.fair_sharing();
        let mut wanted = Vec::new();
        for name in with_errors(ix, ix.cluster_queue_names(), Kind::ClusterQueue) {
            wanted.push(self.cluster_queue_wanted(ix, m, name, &now, &mut events));
        }
        for (key, st) in ix.local_queue_stats() {
            wanted.push(self.local_queue_wanted(ix, m, key, &st, &now));
        }
        for name in with_errors(ix, ix.cohort_object_names(), Kind::Cohort) {
            let id = QueueRef::Cohort(name.clone());
            let condition = self.active_condition(
                ix,
                id.clone(),
                ix.cohort_problem(&name),
                "Its parent, quota and weight are in effect",
                &now,
            );
            let share = fair.then(|| ix.engine().cohort_share(&name)).flatten();
            wanted.push((id, json!(cohort_status(condition, share.as_ref()))));
        }
        if fair {
            for name in ix.cohort_names() {
                if let Some(share) = ix.engine().cohort_share(&name) {
                    m.cohort_share(&name, share.weighted_share);
                }
            }
        }
        self.forget_gone(&wanted);
        self.adopt_observed(ix, &wanted);
        wanted.retain(|(id, status)| !self.last.get(id).is_some_and(|l| same_status(l, status)));
        (wanted, events)
    }

    /// A ClusterQueue's status (its usage and weighted share recorded as
    /// metrics), and a Warning Event if its selection changed.
    fn cluster_queue_wanted(
        &mut self,
        ix: &Index,
        m: &Metrics,
        name: String,
        now: &Time,
        events: &mut Vec<Plan>,
    ) -> (QueueRef, Value) {
        let id = QueueRef::ClusterQueue(name.clone());
        let condition = self.active_condition(
            ix,
            id.clone(),
            ix.cluster_queue_problem(&name),
            "Can admit workloads",
            now,
        );
        let usage = ix.engine().cluster_queue_usage(&name);
        if let Some(u) = &usage {
            record_usage(m, &name, u);
        }
        let mut status = cluster_queue_status(condition, usage.as_ref());
        status
            .conditions
            .extend(self.selection_condition(ix, &name, now, events));
        status.conditions.extend(ix.idle_check_condition(&name));
        status.conditions.extend(self.budget_condition(ix, &name, now));
        status.gpus = ix.cluster_queue_gpus(&name);
        status.usage = ix
            .usage_status(&Account::ClusterQueue(Arc::from(name.as_str())))
            .map(Box::new);
        status.budget = ix.budget_status(&name).map(Box::new);
        record_budget(m, &name, ix);
        if ix.fair_sharing()
            && usage.is_some()
            && let Some(share) = ix.engine().cluster_queue_share(&name)
        {
            m.cluster_queue_share(&name, share.weighted_share);
            status.fair_sharing = Some(share_status(&share));
        }
        (id, cluster_queue_body(&status, usage.is_some()))
    }

    /// A LocalQueue's status: its counts, its ClusterQueue's summary, its
    /// pending workloads.
    fn local_queue_wanted(
        &mut self,
        ix: &Index,
        m: &Metrics,
        key: ObjKey,
        st: &LocalQueueStats,
        now: &Time,
    ) -> (QueueRef, Value) {
        let problem = ix.local_queue_problem(&key);
        let summary = ix.local_queue_target(&key).and_then(|cq| ix.cluster_queue_summary(cq));
        let pending = ix.pending_snapshot(&key);
        let id = QueueRef::LocalQueue(key);
        let condition = self.active_condition(
            ix,
            id.clone(),
            problem,
            "Can submit new workloads to its ClusterQueue",
            now,
        );
        let account = match &id {
            QueueRef::LocalQueue(k) => Some(Account::LocalQueue(Arc::from(
                adapter::local_queue_key(&k.namespace, &k.name).as_str(),
            ))),
            _ => None,
        };
        if let Some(record) = account.as_ref().and_then(|a| ix.usage_records().get(a))
            && let Some(Account::LocalQueue(lq)) = &account
        {
            for meter in &record.meters {
                let hours = usage::hours(to_milli(&meter.resource, meter.total));
                m.local_usage_hours(lq, &meter.flavor, &meter.resource, hours);
            }
        }
        let usage = account.and_then(|a| ix.usage_status(&a));
        let status = local_queue_status(condition, st, summary, pending, usage);
        (id, local_queue_body(&status))
    }

    /// Queues no longer there are forgotten.
    fn forget_gone(&mut self, wanted: &[(QueueRef, Value)]) {
        let ids: BTreeSet<&QueueRef> = wanted.iter().map(|(id, _)| id).collect();
        self.last.retain(|id, _| ids.contains(id));
        self.queued.retain(|id, _| ids.contains(id));
        self.active_since.retain(|id, _| ids.contains(id));
        self.selected_since.retain(|id, _| ids.contains(id));
        self.budget_since.retain(|id, _| ids.contains(id));
        self.selection_warned
            .retain(|name, _| ids.contains(&QueueRef::ClusterQueue(name.clone())));
    }

    /// A new leader knows what the server holds: what is already there is
    /// not written again.
    fn adopt_observed(&mut self, ix: &Index, wanted: &[(QueueRef, Value)]) {
        for (id, _) in wanted {
            if !self.last.contains_key(id)
                && let Some(observed) = ix.observed_queue_status(id)
            {
                self.last.insert(id.clone(), observed);
            }
        }
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
        // Events go to their own lane: they do not count against the budget.
        let (wanted, mut out) = self.wanted_and_events(ix, m, &now);
        let events = out.len();
        for (id, status) in wanted {
            if out.len() - events >= budget {
                break;
            }
            if self.queued.get(&id) == Some(&status) {
                continue;
            }
            self.queued.insert(id.clone(), status.clone());
            out.push(Plan {
                purpose: Purpose::QueueStatus,
                steps: vec![Step::ApplyQueueStatus { queue: id, status }],
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
            if self.queued.get(queue) == Some(status) {
                self.queued.remove(queue);
            }
            if ok {
                self.last.insert(queue.clone(), status.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
