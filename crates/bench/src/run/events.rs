//! What the run loop hears: the Workload watch, creation and Finished-mark
//! results; and the Finished mark itself.

use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use sluice_api::v1alpha1::Workload;
use sluice_api::v1alpha1::conditions as cond;
use tokio::sync::mpsc;

use crate::cluster::{self, CallError};
use crate::track::{self, Ms, Observation};

/// The `Finished` mark of a workload: what the controller writes when a
/// Job completes (type Finished, status True, reason Succeeded), applied
/// by the harness's own field manager.
pub fn finish_body(namespace: &str, name: &str, generation: Option<i64>, runtime: Ms, now: Timestamp) -> Value {
    let condition = Condition {
        type_: cond::FINISHED.into(),
        status: cond::status::TRUE.into(),
        reason: cond::reasons::SUCCEEDED.into(),
        message: format!("Finished by sluice bench after its run time of {runtime} ms"),
        last_transition_time: Time(now),
        observed_generation: generation,
    };
    cluster::condition_apply_body(namespace, name, condition)
}

pub(super) enum WatchMsg {
    Init,
    InitDone,
    Object(String, Result<Observation, String>),
    Error(String),
}

pub(super) enum Msg {
    Watch(Instant, WatchMsg),
    Created {
        index: usize,
        at: Instant,
        result: Result<(), CallError>,
    },
    Finished {
        index: usize,
        epoch: u32,
        result: Result<(), CallError>,
    },
}

pub(super) fn decode(o: DynamicObject) -> (String, Result<Observation, String>) {
    let key = format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or_default(),
        o.metadata.name.as_deref().unwrap_or_default()
    );
    let obs = serde_json::to_value(o)
        .and_then(serde_json::from_value::<Workload>)
        .map_err(|e| format!("not a readable Workload: {e}"))
        .and_then(|wl| track::observe(&wl));
    (key, obs)
}

/// The Workload watch of a run, as messages on `tx`.
pub(super) async fn watch(client: Client, run_id: String, tx: mpsc::UnboundedSender<Msg>) {
    let cfg = watcher::Config::default().labels(&cluster::selector(Some(&run_id)));
    let stream = watcher(cluster::all_workloads(&client), cfg).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        let at = Instant::now();
        let msg = match ev {
            Ok(watcher::Event::Init) => WatchMsg::Init,
            Ok(watcher::Event::InitDone) => WatchMsg::InitDone,
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let (key, obs) = decode(o);
                WatchMsg::Object(key, obs)
            }
            Ok(watcher::Event::Delete(_)) => continue,
            Err(e) => WatchMsg::Error(e.to_string()),
        };
        if tx.send(Msg::Watch(at, msg)).is_err() {
            return;
        }
    }
}
