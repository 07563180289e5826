//! Reading what a command needs, with the user's own credentials. A
//! ClusterQueue list that is forbidden is not an error: namespaced users
//! see their LocalQueues' copy instead.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, Workload};

use crate::error::{PluginError, api_error};
use crate::snapshot::Snapshot;
use crate::view::why::EventLine;

/// Where to look: one namespace, or all.
#[derive(Clone, Debug)]
pub struct Scope {
    /// `None`: all namespaces.
    pub namespace: Option<String>,
}

/// Lists everything of one kind in the scope.
async fn list<K>(client: &Client, scope: &Scope, resource: &'static str, lp: &ListParams) -> Result<Vec<K>, PluginError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = match &scope.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    api.list(lp)
        .await
        .map(|l| l.items)
        .map_err(|e| api_error(e, "list", resource, scope.namespace.as_deref()))
}

/// What `queues`, `workloads`, `why` and `top` need. `workloads`: also
/// read the Workloads (with `labels` as selector).
pub async fn snapshot(
    client: &Client,
    scope: &Scope,
    workloads: bool,
    labels: Option<&str>,
) -> Result<Snapshot, PluginError> {
    let cluster_queues = match Api::<ClusterQueue>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Some(l.items),
        Err(kube::Error::Api(s)) if s.code == 403 => None,
        Err(e) => return Err(api_error(e, "list", "clusterqueues.sluice.dev", None)),
    };
    let local_queues: Vec<LocalQueue> = list(client, scope, "localqueues.sluice.dev", &ListParams::default()).await?;
    let workloads: Vec<Workload> = if workloads {
        let mut lp = ListParams::default();
        if let Some(l) = labels {
            lp = lp.labels(l);
        }
        list(client, scope, "workloads.sluice.dev", &lp).await?
    } else {
        Vec::new()
    };
    Ok(Snapshot {
        cluster_queues,
        local_queues,
        workloads,
        now: Timestamp::now(),
    })
}

/// Admitted workloads in all namespaces, if the user may list them.
pub async fn all_workloads(client: &Client) -> Option<Vec<Workload>> {
    Api::<Workload>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()
        .map(|l| l.items)
}

/// Events regarding `names` (the workload and its job) in `namespace`,
/// oldest first; none if the user may not list events.
pub async fn events(client: &Client, namespace: &str, names: &[String]) -> Vec<EventLine> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = api.list(&ListParams::default()).await else {
        return Vec::new();
    };
    let mut out: Vec<EventLine> = list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .and_then(|r| r.name.as_ref())
                .is_some_and(|n| names.contains(n))
        })
        .map(|e| EventLine {
            time: e
                .event_time
                .map(|t| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t.0))
                .or(e.metadata.creation_timestamp.clone()),
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            note: e.note.unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| a.time.cmp(&b.time));
    out
}
