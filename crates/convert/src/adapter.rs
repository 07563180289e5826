//! # sluice-convert
//!
//! CRDs → engine model. The engine (`sluice-scheduler`) knows nothing of
//! Kubernetes; this crate is the one place that turns `sluice.dev/v1alpha1`
//! objects into its plain types. The controller and `sluice simulate` both
//! use it, so a scenario file and a cluster mean the same thing.
//!
//! Every conversion is total or fails with the field path of what could not
//! be converted; nothing is silently dropped.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use sluice_api::quantity::{self, QuantityError};
use sluice_api::v1alpha1::{self as api, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload};
use sluice_scheduler as eng;

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("{field}: {value} is out of range for the engine (at most {max} engine units)", max = i64::MAX)]
    OutOfRange { field: String, value: i128 },
    #[error("{field}: unknown taint effect {value:?} (expected NoSchedule, PreferNoSchedule or NoExecute)")]
    TaintEffect { field: String, value: String },
    #[error("{field}: unknown toleration operator {value:?} (expected Exists or Equal)")]
    TolerationOperator { field: String, value: String },
    #[error("{field}: must be set")]
    Missing { field: String },
    #[error("{field}: {value} must be at least 1")]
    Count { field: String, value: i64 },
    #[error("{field}: {value} must be at most count ({count})")]
    MinCount { field: String, value: i64, count: i64 },
    #[error("{field}: {value:?} is not a number of resource-hours (digits, at most six decimals)")]
    Hours { field: String, value: String },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

/// A ResourceFlavor as the engine sees it.
pub fn flavor(rf: &ResourceFlavor) -> Result<eng::FlavorSpec, AdapterError> {
    let name = required_name(rf.metadata.name.as_deref())?;
    let taints = rf
        .spec
        .node_taints
        .iter()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.nodeTaints[{i}]")))
        .collect::<Result<_, _>>()?;
    let tolerations = rf
        .spec
        .tolerations
        .iter()
        .enumerate()
        .map(|(i, t)| toleration(t, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(eng::FlavorSpec {
        name,
        node_labels: rf.spec.node_labels.clone(),
        taints,
        tolerations,
        topology_key: rf.spec.topology_key.clone(),
        shared_gpu_requests: match rf.spec.shared_gpu_requests {
            api::SharedGpuRequests::Marked => eng::SharedGpuRequests::Marked,
            api::SharedGpuRequests::All => eng::SharedGpuRequests::All,
        },
    })
}

/// A ClusterQueue as the engine sees it.
pub fn cluster_queue(cq: &ClusterQueue) -> Result<eng::ClusterQueueSpec, AdapterError> {
    let name = required_name(cq.metadata.name.as_deref())?;
    let spec = &cq.spec;
    let resource_groups = resource_groups(&spec.resource_groups)?;
    let p = &spec.preemption;
    let preemption = eng::PreemptionPolicy {
        within_cluster_queue: match p.within_cluster_queue {
            api::WithinClusterQueue::Never => eng::WithinClusterQueue::Never,
            api::WithinClusterQueue::LowerPriority => eng::WithinClusterQueue::LowerPriority,
            api::WithinClusterQueue::LowerOrNewerEqualPriority => eng::WithinClusterQueue::LowerOrNewerEqualPriority,
        },
        reclaim_within_cohort: match p.reclaim_within_cohort {
            api::ReclaimWithinCohort::Never => eng::ReclaimWithinCohort::Never,
            api::ReclaimWithinCohort::LowerPriority => eng::ReclaimWithinCohort::LowerPriority,
            api::ReclaimWithinCohort::Any => eng::ReclaimWithinCohort::Any,
        },
        borrow_within_cohort: match p.borrow_within_cohort.policy {
            api::BorrowWithinCohortPolicy::Never => eng::BorrowWithinCohort::Never,
            api::BorrowWithinCohortPolicy::LowerPriority => eng::BorrowWithinCohort::LowerPriority {
                max_priority_threshold: p.borrow_within_cohort.max_priority_threshold,
            },
        },
        victim_order: match p.victim_order {
            api::VictimOrder::Newest => eng::VictimOrderPolicy::Newest,
            api::VictimOrder::LeastWorkLost => eng::VictimOrderPolicy::LeastWorkLost,
        },
        // Validation keeps it within 1 minute to a week; anything else
        // that gets here (an API server without the schema) means none.
        recently_preempted_grace: p
            .recently_preempted_grace_minutes
            .filter(|&m| m > 0)
            .map(|m| i64::from(m) * 60_000),
    };
    Ok(eng::ClusterQueueSpec {
        name,
        cohort: spec.cohort.clone().filter(|c| !c.is_empty()),
        strategy: match spec.queueing_strategy {
            api::QueueingStrategy::StrictFifo => eng::QueueingStrategy::StrictFifo,
            api::QueueingStrategy::BestEffortFifo => eng::QueueingStrategy::BestEffortFifo,
        },
        resource_groups,
        preemption,
        min_runtime: spec.min_runtime_seconds.unwrap_or(0).max(0).saturating_mul(1000),
        stop_policy: stop_policy(spec.stop_policy),
        fair_weight: fair_weight(spec.fair_sharing.as_ref())?,
        backfill: match spec.backfill.as_ref().map(|b| b.policy) {
            Some(api::BackfillPolicy::Reserve) => eng::Backfill::Reserve,
            Some(api::BackfillPolicy::None) | None => eng::Backfill::None,
        },
        backfill_max_delay: (spec.backfill.as_ref())
            .and_then(|b| b.max_delay_minutes)
            .map_or(0, |m| eng::Millis::from(m) * 60_000),
        backfill_depth: (spec.backfill.as_ref()).and_then(|b| b.depth).unwrap_or(1).max(1),
    })
}

/// A Cohort as the engine sees it.
pub fn cohort(c: &Cohort) -> Result<eng::CohortSpec, AdapterError> {
    let name = required_name(c.metadata.name.as_deref())?;
    Ok(eng::CohortSpec {
        name,
        parent: c.spec.parent.clone().filter(|p| !p.is_empty()),
        resource_groups: resource_groups(&c.spec.resource_groups)?,
        fair_weight: fair_weight(c.spec.fair_sharing.as_ref())?,
    })
}

/// `spec.resourceGroups` of a ClusterQueue or Cohort, quotas in milli-units.
fn resource_groups(groups: &[api::ResourceGroup]) -> Result<Vec<eng::ResourceGroupSpec>, AdapterError> {
    let mut out = Vec::with_capacity(groups.len());
    for (gi, g) in groups.iter().enumerate() {
        let mut flavors = Vec::with_capacity(g.flavors.len());
        for (fi, f) in g.flavors.iter().enumerate() {
            let mut resources = Vec::with_capacity(f.resources.len());
            for (ri, r) in f.resources.iter().enumerate() {
                let path = format!("spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]");
                resources.push(eng::ResourceQuotaSpec {
                    resource: r.name.clone(),
                    nominal: amount(&r.name, &format!("{path}.nominalQuota"), &r.nominal_quota)?,
                    borrowing_limit: r
                        .borrowing_limit
                        .as_ref()
                        .map(|q| amount(&r.name, &format!("{path}.borrowingLimit"), q))
                        .transpose()?,
                    lending_limit: r
                        .lending_limit
                        .as_ref()
                        .map(|q| amount(&r.name, &format!("{path}.lendingLimit"), q))
                        .transpose()?,
                });
            }
            flavors.push(eng::FlavorQuotaSpec {
                flavor: f.name.clone(),
                resources,
            });
        }
        out.push(eng::ResourceGroupSpec {
            covered_resources: g.covered_resources.clone(),
            flavors,
        });
    }
    Ok(out)
}

/// `spec.fairSharing.weight` in milli-units; weight 1 when unset.
fn fair_weight(fair: Option<&api::FairSharing>) -> Result<eng::Weight, AdapterError> {
    let Some(fair) = fair else {
        return Ok(eng::Weight::default());
    };
    let field = "spec.fairSharing.weight";
    Ok(eng::Weight(narrow(field, fair.weight_milli(field)?)?))
}

/// A LocalQueue as the engine sees it; its key is `namespace/name`.
pub fn local_queue(lq: &LocalQueue) -> Result<eng::LocalQueueSpec, AdapterError> {
    let name = required_name(lq.metadata.name.as_deref())?;
    let namespace = lq.metadata.namespace.as_deref().ok_or_else(|| AdapterError::Missing {
        field: "metadata.namespace".into(),
    })?;
    Ok(eng::LocalQueueSpec {
        key: local_queue_key(namespace, &name),
        cluster_queue: lq.spec.cluster_queue.clone(),
        stop_policy: stop_policy(lq.spec.stop_policy),
    })
}

/// The engine's key of a LocalQueue.
pub fn local_queue_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The priority of a Workload: `spec.priority` if set (the controller sets
/// it when it creates the Workload from a Job); else the value of the
/// WorkloadPriorityClass named by `spec.priorityClassName`, looked up with
/// `class_value`; else 0.
pub fn priority(wl: &Workload, class_value: impl Fn(&str) -> Option<i32>) -> i32 {
    wl.spec
        .priority
        .or_else(|| wl.spec.priority_class_name.as_deref().and_then(class_value))
        .unwrap_or(0)
}

/// A Workload as the engine sees it. `queue_order_time` is its creation
/// time in milliseconds (the caller's clock domain: epoch milliseconds on a
/// cluster, virtual time in a simulation).
pub fn workload(
    wl: &Workload,
    priority: i32,
    queue_order_time: eng::Millis,
) -> Result<eng::WorkloadSpec, AdapterError> {
    let name = required_name(wl.metadata.name.as_deref())?;
    let namespace = wl.metadata.namespace.as_deref().ok_or_else(|| AdapterError::Missing {
        field: "metadata.namespace".into(),
    })?;
    let uid = wl.metadata.uid.clone().unwrap_or_else(|| format!("{namespace}/{name}"));
    let mut pod_sets = Vec::with_capacity(wl.spec.pod_sets.len());
    for (i, ps) in wl.spec.pod_sets.iter().enumerate() {
        let path = format!("spec.podSets[{i}]");
        if ps.count < 1 {
            return Err(AdapterError::Count {
                field: format!("{path}.count"),
                value: ps.count.into(),
            });
        }
        let requests = ps
            .pod_requests(&path)?
            .into_iter()
            .map(|(r, v)| {
                Ok((
                    r.clone(),
                    narrow(&format!("{path}.template.spec (requests of {r})"), v)?,
                ))
            })
            .collect::<Result<BTreeMap<_, _>, AdapterError>>()?;
        let pod = ps.template.spec.as_ref();
        let node_selector = pod.and_then(|p| p.node_selector.clone()).unwrap_or_default();
        let tolerations = pod
            .and_then(|p| p.tolerations.as_ref())
            .map(|ts| {
                ts.iter()
                    .enumerate()
                    .map(|(ti, t)| toleration(t, &format!("{path}.template.spec.tolerations[{ti}]")))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        pod_sets.push(eng::PodSetSpec {
            name: ps.name.clone(),
            count: ps.count as u32,
            requests,
            node_selector,
            tolerations,
            require_single_domain: ps.topology == Some(api::TopologyRequest::Required),
            min_count: min_count(ps, &path)?,
        });
    }
    Ok(eng::WorkloadSpec {
        uid,
        name: format!("{namespace}/{name}"),
        local_queue: local_queue_key(namespace, &wl.spec.queue_name),
        priority,
        queue_order_time,
        pod_sets,
        expected_runtime: declared_runtime(wl),
    })
}

/// The run time the Workload's owner declared: its
/// `sluice.dev/expected-runtime` annotation, which the controller copies
/// from the queued object (from a Job's `activeDeadlineSeconds` when the
/// object has none). A malformed one counts as none (unbounded); the
/// controller warns on the object that carries it.
fn declared_runtime(wl: &Workload) -> Option<eng::Millis> {
    sluice_api::labels::expected_runtime_ms(wl.metadata.annotations.as_ref())
        .ok()
        .flatten()
}

/// A pod set's `minCount`: from 1 to its `count`, or unset.
fn min_count(ps: &api::PodSet, path: &str) -> Result<Option<u32>, AdapterError> {
    let Some(min) = ps.min_count else {
        return Ok(None);
    };
    let field = format!("{path}.minCount");
    if min < 1 {
        return Err(AdapterError::Count {
            field,
            value: min.into(),
        });
    }
    if min > ps.count {
        return Err(AdapterError::MinCount {
            field,
            value: min.into(),
            count: ps.count.into(),
        });
    }
    Ok(Some(min as u32))
}

/// A ClusterQueue's idle policy as the reclaim rule
/// ([`sluice_scheduler::reclaim`]) takes it.
pub fn reclaim_policy(p: &api::IdlePolicy) -> eng::reclaim::ReclaimPolicy {
    eng::reclaim::ReclaimPolicy {
        action: match p.action {
            api::IdleAction::Warn => eng::reclaim::ReclaimAction::Warn,
            api::IdleAction::Evict => eng::reclaim::ReclaimAction::Evict,
            api::IdleAction::Deactivate => eng::reclaim::ReclaimAction::Deactivate,
        },
        only_when_contended: p.only_when_contended,
    }
}

/// A recorded admission (`status.admission`) as engine pod set assignments,
/// for rebuilding the ledger after a restart.
pub fn admission(adm: &api::Admission) -> Result<Vec<eng::PodSetAssignment>, AdapterError> {
    adm.pod_set_assignments
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let path = format!("status.admission.podSetAssignments[{i}]");
            if a.count < 1 {
                return Err(AdapterError::Count {
                    field: format!("{path}.count"),
                    value: a.count.into(),
                });
            }
            let usage = a
                .resource_usage
                .iter()
                .map(|(r, q)| Ok((r.clone(), amount(r, &format!("{path}.resourceUsage.{r}"), q)?)))
                .collect::<Result<_, AdapterError>>()?;
            Ok(eng::PodSetAssignment {
                name: a.name.clone(),
                count: a.count as u32,
                flavors: a.flavors.clone(),
                usage,
                topology: a.topology_domain.as_ref().map(|d| eng::TopologyDomain {
                    key: d.key.clone(),
                    value: d.value.clone(),
                }),
            })
        })
        .collect()
}

/// An engine admission as the Workload's `status.admission`.
pub fn admission_status(adm: &eng::Admission) -> api::Admission {
    api::Admission {
        cluster_queue: adm.cluster_queue.to_string(),
        pod_set_assignments: adm
            .pod_sets
            .iter()
            .map(|ps| api::PodSetAssignment {
                name: ps.name.clone(),
                flavors: ps.flavors.clone(),
                resource_usage: ps
                    .usage
                    .iter()
                    .map(|(r, a)| (r.clone(), quantity::to_quantity(r, i128::from(*a))))
                    .collect(),
                count: ps.count as i32,
                topology_domain: ps.topology.as_ref().map(|d| api::TopologyDomain {
                    key: d.key.clone(),
                    value: d.value.clone(),
                }),
            })
            .collect(),
        backfill: adm.backfill.as_ref().and_then(backfill_admission),
    }
}

/// What an admission ahead of a reservation by its declared run time
/// keeps for a restart (nothing for one that fits beside it).
fn backfill_admission(b: &eng::Backfilled) -> Option<api::BackfillAdmission> {
    let due = b.due?;
    Some(api::BackfillAdmission {
        cluster_queue: b.queue.to_string(),
        reserved_for: b.reserved_for.to_string(),
        until: time_of(due),
    })
}

/// Epoch milliseconds as an API time (the epoch if out of range).
pub fn time_of(ms: eng::Millis) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// An API time as epoch milliseconds.
pub fn millis_of(t: &Time) -> eng::Millis {
    t.0.as_millisecond()
}

/// The record of [`backfill_admission`] as the engine takes it back
/// ([`eng::Engine::restore_backfill`]): queue, head, due.
pub fn restored_backfill(adm: &api::Admission) -> Option<(&str, &str, eng::Millis)> {
    let b = adm.backfill.as_ref()?;
    Some((&b.cluster_queue, &b.reserved_for, b.until.0.as_millisecond()))
}

fn stop_policy(p: api::StopPolicy) -> eng::StopPolicy {
    match p {
        api::StopPolicy::None => eng::StopPolicy::None,
        api::StopPolicy::Hold => eng::StopPolicy::Hold,
        api::StopPolicy::HoldAndDrain => eng::StopPolicy::HoldAndDrain,
    }
}

fn required_name(name: Option<&str>) -> Result<String, AdapterError> {
    match name {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(AdapterError::Missing {
            field: "metadata.name".into(),
        }),
    }
}

/// A quantity of `resource` in engine units ([`quantity::units_per_whole`]).
pub(crate) fn amount(
    resource: &str,
    field: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<i64, AdapterError> {
    narrow(field, quantity::non_negative_amount(resource, field, q)?)
}

pub(crate) fn narrow(field: &str, value: i128) -> Result<i64, AdapterError> {
    i64::try_from(value).map_err(|_| AdapterError::OutOfRange {
        field: field.to_string(),
        value,
    })
}

fn effect(field: &str, value: &str) -> Result<eng::TaintEffect, AdapterError> {
    match value {
        "NoSchedule" => Ok(eng::TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(eng::TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(eng::TaintEffect::NoExecute),
        other => Err(AdapterError::TaintEffect {
            field: field.to_string(),
            value: other.to_string(),
        }),
    }
}

pub(crate) fn taint(t: &Taint, path: &str) -> Result<eng::Taint, AdapterError> {
    Ok(eng::Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: effect(&format!("{path}.effect"), &t.effect)?,
    })
}

fn toleration(t: &Toleration, path: &str) -> Result<eng::Toleration, AdapterError> {
    let operator = match t.operator.as_deref() {
        None | Some("") | Some("Equal") => eng::TolerationOperator::Equal,
        Some("Exists") => eng::TolerationOperator::Exists,
        Some(other) => {
            return Err(AdapterError::TolerationOperator {
                field: format!("{path}.operator"),
                value: other.to_string(),
            });
        }
    };
    Ok(eng::Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        operator,
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(effect(&format!("{path}.effect"), e)?),
        },
    })
}

#[cfg(test)]
mod tests;
