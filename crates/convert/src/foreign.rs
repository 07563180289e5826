//! Another controller's admissions as quota the engine must count: a
//! Kueue Workload (`kueue.x-k8s.io` `v1beta1` or `v1beta2`, the same
//! `status.admission` in both) that holds quota — `QuotaReserved=True`,
//! not `Finished=True`, with an admission — becomes a
//! [`ForeignAdmission`] for [`sluice_scheduler::Engine::hold_foreign`].
//! The admission's `resourceUsage` is what is counted; a pod's requests
//! are that divided by the pods admitted. Only the status subresource
//! (Kueue's controller, or whoever may write it) decides what holds.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;
use sluice_scheduler as eng;

use crate::adapter::{AdapterError, amount};

/// A Kueue admission that holds quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignAdmission {
    pub spec: eng::WorkloadSpec,
    /// The ClusterQueue Kueue admitted it into (counted in Sluice's of
    /// that name).
    pub cluster_queue: String,
    pub assignments: Vec<eng::PodSetAssignment>,
    /// The uid of the object that owns it (its Job), if any.
    pub owner_uid: Option<String>,
    /// When its quota was reserved (ms since the epoch; 0 when unknown).
    pub admitted_at: i64,
}

/// The admission a Kueue Workload holds, or `None` when it holds none
/// (not admitted, finished, or its reservation released).
pub fn kueue_workload(wl: &Value) -> Result<Option<ForeignAdmission>, AdapterError> {
    let status = &wl["status"];
    let conditions = status["conditions"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c["type"].as_str() == Some(t) && c["status"].as_str() == Some("True"))
    };
    let admission = &status["admission"];
    if !is_true("QuotaReserved") || is_true("Finished") || !admission.is_object() {
        return Ok(None);
    }
    let cluster_queue = text(admission, "status.admission.clusterQueue", "clusterQueue")?;
    let meta = &wl["metadata"];
    let uid = text(meta, "metadata.uid", "uid")?;
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    let name = meta["name"].as_str().unwrap_or_default();
    let counts = spec_counts(&wl["spec"]);
    let assignments = assignments(admission, &counts)?;
    let pod_sets = assignments.iter().map(pod_set).collect();
    let admitted_at = conditions
        .iter()
        .find(|c| c["type"].as_str() == Some("QuotaReserved"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(0, |t| t.as_millisecond());
    let owner_uid = meta["ownerReferences"]
        .as_array()
        .and_then(|o| o.iter().find(|r| r["controller"].as_bool() == Some(true)).or(o.first()))
        .and_then(|r| r["uid"].as_str())
        .map(str::to_string);
    Ok(Some(ForeignAdmission {
        spec: eng::WorkloadSpec {
            uid,
            name: format!("{namespace}/{name} (Kueue)"),
            local_queue: crate::adapter::local_queue_key(namespace, wl["spec"]["queueName"].as_str().unwrap_or("")),
            priority: wl["spec"]["priority"]
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            queue_order_time: admitted_at,
            pod_sets,
            expected_runtime: None,
        },
        cluster_queue,
        assignments,
        owner_uid,
        admitted_at,
    }))
}

fn text(v: &Value, field: &str, key: &str) -> Result<String, AdapterError> {
    v[key]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| AdapterError::Missing {
            field: field.to_string(),
        })
}

/// Pod counts of `spec.podSets` by name (an assignment without `count`
/// was admitted whole).
fn spec_counts(spec: &Value) -> BTreeMap<String, i64> {
    spec["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["count"].as_i64().unwrap_or(1))))
        .collect()
}

fn assignments(admission: &Value, counts: &BTreeMap<String, i64>) -> Result<Vec<eng::PodSetAssignment>, AdapterError> {
    let list = admission["podSetAssignments"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            let path = format!("status.admission.podSetAssignments[{i}]");
            let name = text(a, &format!("{path}.name"), "name")?;
            let count = a["count"].as_i64().or_else(|| counts.get(&name).copied()).unwrap_or(1);
            if count < 1 {
                return Err(AdapterError::Count {
                    field: format!("{path}.count"),
                    value: count,
                });
            }
            let flavors = strings(&a["flavors"]);
            let usage = strings(&a["resourceUsage"])
                .into_iter()
                .map(|(r, q)| {
                    Ok((
                        r.clone(),
                        amount(&r, &format!("{path}.resourceUsage.{r}"), &Quantity(q))?,
                    ))
                })
                .collect::<Result<_, AdapterError>>()?;
            Ok(eng::PodSetAssignment {
                name,
                count: count as u32,
                flavors,
                usage,
                topology: None,
            })
        })
        .collect()
}

/// A JSON object of strings (numbers too, as Kubernetes quantities may be
/// written) as a map.
fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Number(n) => Some((k.clone(), n.to_string())),
            _ => None,
        })
        .collect()
}

/// The pod set the engine keeps for an assignment: its pods' requests are
/// the admitted usage divided among them.
fn pod_set(a: &eng::PodSetAssignment) -> eng::PodSetSpec {
    eng::PodSetSpec {
        name: a.name.clone(),
        count: a.count,
        requests: a
            .usage
            .iter()
            .map(|(r, total)| (r.clone(), total / a.count.max(1) as i64))
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kueue(conditions: Value, admission: Value) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "job-train-1a2b", "namespace": "team-a", "uid": "k-uid",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                              "uid": "job-uid", "controller": true}]},
            "spec": {"queueName": "user-queue", "priority": 100,
                     "podSets": [{"name": "main", "count": 2, "template": {}}]},
            "status": {"conditions": conditions, "admission": admission}
        })
    }

    fn reserved() -> Value {
        json!([{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-11-28T06:00:00Z"},
               {"type": "Admitted", "status": "True"}])
    }

    fn admission() -> Value {
        json!({"clusterQueue": "team-a", "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": "a100"},
             "resourceUsage": {"nvidia.com/gpu": "8", "cpu": "4"}, "count": 2}]})
    }

    #[test]
    fn a_workload_holding_quota_is_its_admission_with_per_pod_requests() {
        let f = kueue_workload(&kueue(reserved(), admission()))
            .unwrap()
            .expect("holds quota");
        assert_eq!(f.cluster_queue, "team-a");
        assert_eq!(f.owner_uid.as_deref(), Some("job-uid"));
        assert_eq!(f.spec.uid, "k-uid");
        assert_eq!(f.spec.name, "team-a/job-train-1a2b (Kueue)");
        assert_eq!(f.spec.local_queue, "team-a/user-queue");
        assert_eq!(f.spec.priority, 100);
        assert_eq!(f.admitted_at, 1_795_845_600_000);
        assert_eq!(f.assignments[0].usage["nvidia.com/gpu"], 8_000);
        assert_eq!(f.assignments[0].flavors["nvidia.com/gpu"], "a100");
        assert_eq!(f.spec.pod_sets[0].count, 2);
        assert_eq!(f.spec.pod_sets[0].requests["nvidia.com/gpu"], 4_000);
        assert_eq!(f.spec.pod_sets[0].requests["cpu"], 2_000);
    }

    #[test]
    fn finished_not_reserved_or_not_admitted_holds_nothing() {
        let finished = json!([{"type": "QuotaReserved", "status": "True"}, {"type": "Finished", "status": "True"}]);
        assert_eq!(kueue_workload(&kueue(finished, admission())).unwrap(), None);
        let released = json!([{"type": "QuotaReserved", "status": "False"}]);
        assert_eq!(kueue_workload(&kueue(released, admission())).unwrap(), None);
        assert_eq!(kueue_workload(&kueue(reserved(), Value::Null)).unwrap(), None);
    }

    #[test]
    fn a_missing_count_is_the_pod_sets_and_bad_input_names_its_field() {
        let mut adm = admission();
        adm["podSetAssignments"][0].as_object_mut().unwrap().remove("count");
        let f = kueue_workload(&kueue(reserved(), adm)).unwrap().unwrap();
        assert_eq!(f.assignments[0].count, 2);
        let mut adm = admission();
        adm["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] = json!("-1");
        let err = kueue_workload(&kueue(reserved(), adm)).unwrap_err().to_string();
        assert!(
            err.contains("status.admission.podSetAssignments[0].resourceUsage.nvidia.com/gpu"),
            "{err}"
        );
        let mut adm = admission();
        adm.as_object_mut().unwrap().remove("clusterQueue");
        let err = kueue_workload(&kueue(reserved(), adm)).unwrap_err().to_string();
        assert_eq!(err, "status.admission.clusterQueue: must be set");
    }
}
