//! Which kinds the controller queues: `--integrations`, or by default
//! every kind whose resource the API server serves, found once at start
//! (a kind installed later needs a restart).

use std::collections::BTreeSet;

use kube::Client;

use super::RunError;
use sluice_kinds::JobKind;

/// Whether the API server serves `kind`'s resource and those its pod sets
/// are read from ([`JobKind::referent_kinds`]: a TrainJob's runtimes),
/// which the controller watches too.
async fn served(client: &Client, kind: JobKind) -> Result<bool, RunError> {
    let r = kind.integration().resource();
    if !served_resource(client, r.api_version, r.plural).await? {
        return Ok(false);
    }
    for r in kind.referent_kinds() {
        if !served_resource(client, r.api_version, r.plural).await? {
            tracing::warn!(
                kind = kind.flag_name(),
                missing = %format!("{}/{}", r.api_version, r.plural),
                "not queued: its pod sets are read from a resource the server does not serve"
            );
            return Ok(false);
        }
    }
    Ok(true)
}

async fn served_resource(client: &Client, api_version: &str, plural: &str) -> Result<bool, RunError> {
    match client.list_api_group_resources(api_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == plural)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(RunError::Discovery {
            api_version: api_version.to_string(),
            message: e.to_string(),
        }),
    }
}

/// The kinds to queue: batch/v1 Jobs always, and `requested` (each must
/// be served), or with `None` every other kind the server serves. Logged.
pub async fn integrations(client: &Client, requested: Option<&[JobKind]>) -> Result<BTreeSet<JobKind>, RunError> {
    let mut kinds = BTreeSet::from([JobKind::Job]);
    for kind in JobKind::ALL.into_iter().filter(|k| *k != JobKind::Job) {
        let wanted = requested.is_none_or(|r| r.contains(&kind));
        if !wanted {
            continue;
        }
        if served(client, kind).await? {
            kinds.insert(kind);
        } else if requested.is_some() {
            let ar = kind.api_resource();
            return Err(RunError::NotServed {
                kind: kind.flag_name(),
                resource: format!("{}/{}", ar.api_version, ar.plural),
            });
        }
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.flag_name()).collect();
    let skipped: Vec<&str> = JobKind::ALL
        .into_iter()
        .filter(|k| !kinds.contains(k))
        .map(|k| k.flag_name())
        .collect();
    tracing::info!(
        queued = %names.join(", "),
        not_served_or_not_asked = %skipped.join(", "),
        "integrations (a kind installed later is picked up after a restart)"
    );
    Ok(kinds)
}

/// Whether this server has pod scheduling gates (Kubernetes 1.27+): then
/// the pods the webhook gates are queued (a Workload per pod or pod
/// group); without them the webhook refuses such pods. Says which, once.
/// Never fails (an unreadable version counts as none).
pub async fn pod_gates(client: &Client) -> bool {
    let version = client.apiserver_version().await.ok();
    let gates = version
        .as_ref()
        .is_some_and(|v| sluice_kinds::pod::has_scheduling_gates(&v.major, &v.minor));
    let server = version.map_or_else(|| "unknown".to_string(), |v| v.git_version);
    if gates {
        tracing::info!(server = %server, "plain Pods and pod groups are queued: the webhook gates them (spec.schedulingGates) until admitted");
    } else {
        tracing::info!(
            server = %server,
            "plain Pods are not queued: this server has no pod scheduling gates (Kubernetes 1.27+); the webhook refuses a bare GPU pod that would have to wait"
        );
    }
    gates
}

/// Kueue's Workload resource, newest served version first (`v1beta2`, then
/// `v1beta1`), or `None` when Kueue's CRDs are not installed. Logged.
pub async fn kueue_workloads(client: &Client) -> Result<Option<kube::api::ApiResource>, RunError> {
    for version in ["v1beta2", "v1beta1"] {
        let api_version = format!("kueue.x-k8s.io/{version}");
        let served = match client.list_api_group_resources(&api_version).await {
            Ok(list) => list.resources.iter().any(|r| r.name == "workloads"),
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                return Err(RunError::Discovery {
                    api_version,
                    message: e.to_string(),
                });
            }
        };
        if served {
            tracing::info!(%api_version, "Kueue's Workloads are served: the quota they hold is counted");
            let gvk = kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", version, "Workload");
            return Ok(Some(kube::api::ApiResource::from_gvk_with_plural(&gvk, "workloads")));
        }
    }
    Ok(None)
}
