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
use sluice_api::quantity::{self, QuantityError};
use sluice_api::v1alpha1::{self as api, ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use sluice_scheduler as eng;

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error("{field}: {value} is out of range for the engine (at most {max} milli-units)", max = i64::MAX)]
    OutOfRange { field: String, value: i128 },
    #[error("{field}: unknown taint effect {value:?} (expected NoSchedule, PreferNoSchedule or NoExecute)")]
    TaintEffect { field: String, value: String },
    #[error("{field}: unknown toleration operator {value:?} (expected Exists or Equal)")]
    TolerationOperator { field: String, value: String },
    #[error("{field}: must be set")]
    Missing { field: String },
    #[error("{field}: {value} must be at least 1")]
    Count { field: String, value: i64 },
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
    })
}

/// A ClusterQueue as the engine sees it.
pub fn cluster_queue(cq: &ClusterQueue) -> Result<eng::ClusterQueueSpec, AdapterError> {
    let name = required_name(cq.metadata.name.as_deref())?;
    let spec = &cq.spec;
    let mut resource_groups = Vec::with_capacity(spec.resource_groups.len());
    for (gi, g) in spec.resource_groups.iter().enumerate() {
        let mut flavors = Vec::with_capacity(g.flavors.len());
        for (fi, f) in g.flavors.iter().enumerate() {
            let mut resources = Vec::with_capacity(f.resources.len());
            for (ri, r) in f.resources.iter().enumerate() {
                let path = format!("spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]");
                resources.push(eng::ResourceQuotaSpec {
                    resource: r.name.clone(),
                    nominal: amount(&format!("{path}.nominalQuota"), &r.nominal_quota)?,
                    borrowing_limit: r
                        .borrowing_limit
                        .as_ref()
                        .map(|q| amount(&format!("{path}.borrowingLimit"), q))
                        .transpose()?,
                    lending_limit: r
                        .lending_limit
                        .as_ref()
                        .map(|q| amount(&format!("{path}.lendingLimit"), q))
                        .transpose()?,
                });
            }
            flavors.push(eng::FlavorQuotaSpec {
                flavor: f.name.clone(),
                resources,
            });
        }
        resource_groups.push(eng::ResourceGroupSpec {
            covered_resources: g.covered_resources.clone(),
            flavors,
        });
    }
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
        fair_weight: eng::Weight::default(),
    })
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
            min_count: None,
        });
    }
    Ok(eng::WorkloadSpec {
        uid,
        name: format!("{namespace}/{name}"),
        local_queue: local_queue_key(namespace, &wl.spec.queue_name),
        priority,
        queue_order_time,
        pod_sets,
    })
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
                .map(|(r, q)| Ok((r.clone(), amount(&format!("{path}.resourceUsage.{r}"), q)?)))
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
                    .map(|(r, milli)| (r.clone(), quantity::to_quantity(r, i128::from(*milli))))
                    .collect(),
                count: ps.count as i32,
                topology_domain: ps.topology.as_ref().map(|d| api::TopologyDomain {
                    key: d.key.clone(),
                    value: d.value.clone(),
                }),
            })
            .collect(),
    }
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

fn amount(field: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<i64, AdapterError> {
    narrow(field, quantity::non_negative_milli(field, q)?)
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
mod tests {
    use super::*;
    use sluice_api::manifest::{SluiceObject, parse_manifests};

    fn objects(yaml: &str) -> Vec<SluiceObject> {
        parse_manifests(yaml)
            .expect("parses")
            .into_iter()
            .filter_map(|d| d.as_sluice().cloned())
            .collect()
    }

    fn example(file: &str) -> String {
        std::fs::read_to_string(format!("{}/../../examples/{file}", env!("CARGO_MANIFEST_DIR")))
            .expect("example exists")
    }

    #[test]
    fn every_shipped_example_converts_and_the_engine_admits_a_gpu_gang() {
        let mut engine = eng::Engine::new();
        for file in ["flavors.yaml", "cluster-queues.yaml", "local-queues.yaml"] {
            for obj in objects(&example(file)) {
                match obj {
                    SluiceObject::ResourceFlavor(rf) => engine.upsert_flavor(flavor(&rf).unwrap()),
                    SluiceObject::ClusterQueue(cq) => engine.upsert_cluster_queue(cluster_queue(&cq).unwrap()),
                    SluiceObject::LocalQueue(lq) => engine.upsert_local_queue(local_queue(&lq).unwrap()),
                    _ => {}
                }
            }
        }
        assert!(engine.cluster_queue_names().len() >= 3);
        // The flavors' GPU taint is tolerated the way the webhook makes pods tolerate it.
        let lq = objects(&example("local-queues.yaml"))
            .into_iter()
            .find_map(|o| match o {
                SluiceObject::LocalQueue(lq) => Some(lq),
                _ => None,
            })
            .unwrap();
        let wl: Workload = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": "train", "namespace": lq.metadata.namespace, "uid": "u-1"},
            "spec": {"queueName": lq.metadata.name, "podSets": [{"name": "workers", "count": 2, "template": {"spec": {
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}]}
        }))
        .unwrap();
        engine.add_workload(workload(&wl, 0, 0).unwrap()).unwrap();
        let cycle = engine.schedule(0);
        assert_eq!(
            cycle.admitted.len(),
            1,
            "{:?}",
            engine.explanation("u-1").map(crate::text::explanation)
        );
        let status = admission_status(&cycle.admitted[0]);
        assert_eq!(status.pod_set_assignments[0].resource_usage["nvidia.com/gpu"].0, "2");
        assert_eq!(admission(&status).unwrap(), &cycle.admitted[0].pod_sets[..]);
    }

    #[test]
    fn quotas_become_milli_units_and_policies_map_one_to_one() {
        let cq = match objects(
            r#"
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: research
  queueingStrategy: StrictFIFO
  minRuntimeSeconds: 600
  stopPolicy: Hold
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "2"}
      - {name: memory, nominalQuota: 1Gi, lendingLimit: 512Mi}
"#,
        )
        .remove(0)
        {
            SluiceObject::ClusterQueue(cq) => cq,
            other => panic!("not a ClusterQueue: {other:?}"),
        };
        let spec = cluster_queue(&cq).unwrap();
        assert_eq!(spec.cohort.as_deref(), Some("research"));
        assert_eq!(spec.strategy, eng::QueueingStrategy::StrictFifo);
        assert_eq!(spec.min_runtime, 600_000);
        assert_eq!(spec.stop_policy, eng::StopPolicy::Hold);
        assert_eq!(
            spec.preemption,
            eng::PreemptionPolicy {
                within_cluster_queue: eng::WithinClusterQueue::LowerOrNewerEqualPriority,
                reclaim_within_cohort: eng::ReclaimWithinCohort::Any,
                borrow_within_cohort: eng::BorrowWithinCohort::LowerPriority {
                    max_priority_threshold: Some(100)
                },
            }
        );
        let r = &spec.resource_groups[0].flavors[0].resources;
        assert_eq!(
            (r[0].nominal, r[0].borrowing_limit, r[0].lending_limit),
            (500, Some(2000), None)
        );
        assert_eq!(
            (r[1].nominal, r[1].lending_limit),
            (1024 * 1024 * 1024 * 1000, Some(512 * 1024 * 1024 * 1000))
        );
    }

    #[test]
    fn a_bad_quantity_names_its_field() {
        let mut cq: ClusterQueue = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
                {"name": "cpu", "nominalQuota": "1"}]}]}]}
        }))
        .unwrap();
        cq.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit =
            Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()));
        let err = cluster_queue(&cq).unwrap_err().to_string();
        assert!(
            err.contains("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
            "{err}"
        );
    }

    #[test]
    fn tolerations_and_taints_follow_kubernetes_defaults() {
        let t = toleration(
            &Toleration {
                key: Some("nvidia.com/gpu".into()),
                ..Default::default()
            },
            "spec.tolerations[0]",
        )
        .unwrap();
        assert_eq!(t.operator, eng::TolerationOperator::Equal, "operator defaults to Equal");
        assert_eq!(t.effect, None, "no effect tolerates every effect");
        let err = toleration(
            &Toleration {
                operator: Some("Sometimes".into()),
                ..Default::default()
            },
            "spec.tolerations[3]",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.tolerations[3].operator: unknown toleration operator \"Sometimes\" (expected Exists or Equal)"
        );
        let err = taint(
            &Taint {
                key: "k".into(),
                effect: "Sometimes".into(),
                ..Default::default()
            },
            "spec.nodeTaints[0]",
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("spec.nodeTaints[0].effect"), "{err}");
    }

    #[test]
    fn workload_priority_prefers_spec_then_class_then_zero() {
        let mut wl: Workload = serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "q", "priorityClassName": "training", "podSets": [{"name": "main", "count": 1, "template": {}}]}
        }))
        .unwrap();
        let classes = |n: &str| (n == "training").then_some(100);
        assert_eq!(priority(&wl, classes), 100);
        wl.spec.priority = Some(7);
        assert_eq!(priority(&wl, classes), 7);
        wl.spec.priority = None;
        wl.spec.priority_class_name = Some("unknown".into());
        assert_eq!(priority(&wl, classes), 0);
        let spec = workload(&wl, 0, 42).unwrap();
        assert_eq!(
            (spec.uid.as_str(), spec.local_queue.as_str(), spec.queue_order_time),
            ("ns/w", "ns/q", 42)
        );
    }
}
