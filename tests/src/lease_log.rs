//! Every state of one Lease as a watch sees it, with the moment it was
//! seen: who held it when, and whether a Lease naming a replica was
//! renewed after that replica died.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};

/// One state of the Lease.
#[derive(Clone, Debug)]
pub struct State {
    /// When the watch delivered it.
    pub seen: Instant,
    pub holder: Option<String>,
    pub renewed: Option<Timestamp>,
    pub transitions: i32,
    pub version: String,
}

/// Watches Lease `namespace/name` until dropped.
pub struct LeaseLog {
    states: Arc<Mutex<Vec<State>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseLog {
    pub fn start(client: Client, namespace: &str, name: &str) -> Self {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let states = Arc::new(Mutex::new(Vec::new()));
        let record = states.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, cfg).boxed();
            while let Some(event) = stream.next().await {
                let (Ok(Event::Apply(lease)) | Ok(Event::InitApply(lease))) = event else {
                    continue;
                };
                let spec = lease.spec.clone().unwrap_or_default();
                let state = State {
                    seen: Instant::now(),
                    holder: spec.holder_identity.filter(|h| !h.is_empty()),
                    renewed: spec.renew_time.map(|t| t.0),
                    transitions: spec.lease_transitions.unwrap_or(0),
                    version: lease.metadata.resource_version.unwrap_or_default(),
                };
                let mut states = record.lock().unwrap_or_else(|e| e.into_inner());
                if states.last().is_none_or(|s: &State| s.version != state.version) {
                    states.push(state);
                }
            }
        });
        Self { states, task }
    }

    pub fn states(&self) -> Vec<State> {
        self.states.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The holder last seen.
    pub fn holder(&self) -> Option<String> {
        self.states().last().and_then(|s| s.holder.clone())
    }

    /// When the Lease was first seen held by someone other than `old`
    /// (and not free) after `after`.
    pub fn taken_from(&self, old: &str, after: Instant) -> Option<(Instant, String)> {
        self.states()
            .into_iter()
            .filter(|s| s.seen >= after)
            .find_map(|s| s.holder.filter(|h| h != old).map(|h| (s.seen, h)))
    }

    /// States that renewed a Lease naming `holder` after `died` (wall
    /// clock): a dead replica's Lease extended by someone.
    pub fn renewed_after_death(&self, holder: &str, died: Timestamp) -> Vec<State> {
        self.states()
            .into_iter()
            .filter(|s| s.holder.as_deref() == Some(holder) && s.renewed.is_some_and(|r| r > died))
            .collect()
    }
}

impl Drop for LeaseLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}
