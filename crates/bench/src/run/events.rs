//! What the run loop hears: the Workload watch, creation and Finished-mark
//! results; the watch's state as the loop follows it ([`WatchState`]); and
//! the Finished mark itself.

use std::time::Instant;

use anyhow::{Result, bail};
use futures::StreamExt as _;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt as _, watcher};
use sluice_api::v1alpha1::Workload;
use tokio::sync::mpsc;

use super::WATCH_WAIT;
use super::msg::{Msg, WatchMsg};
use super::progress::Warnings;
use super::writes::Finishes;
use crate::cluster;
use crate::track::{self, Ms, Observation, Tracker};

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

/// The Workload watch as the run loop follows it: its lists, and the
/// objects of a relist held until the list is in.
pub(super) struct WatchState {
    /// Lists the watch began: the first, and one per restart.
    lists: u64,
    /// Objects of a relist of the watch, taken in together at its end.
    relist: Option<Vec<(usize, Ms, Observation)>>,
    warnings: Warnings,
    object_warnings: Warnings,
}

impl WatchState {
    /// Waits up to [`WATCH_WAIT`] for the watch's first list.
    pub(super) async fn first_list(rx: &mut mpsc::UnboundedReceiver<Msg>) -> Result<Self> {
        let mut state = Self {
            lists: 0,
            relist: None,
            warnings: Warnings::default(),
            object_warnings: Warnings::default(),
        };
        let listed = tokio::time::timeout(WATCH_WAIT, async {
            while let Some(m) = rx.recv().await {
                match m {
                    Msg::Watch(_, WatchMsg::Init) => state.lists += 1,
                    Msg::Watch(_, WatchMsg::InitDone) => return true,
                    Msg::Watch(_, WatchMsg::Error(e)) => state.warnings.warn(&format!("Workload watch: {e}")),
                    _ => {}
                }
            }
            false
        })
        .await;
        if !matches!(listed, Ok(true)) {
            bail!(
                "the Workload watch did not list within {}s (can this user list and watch workloads.sluice.dev in all namespaces?)",
                WATCH_WAIT.as_secs()
            );
        }
        Ok(state)
    }

    /// Whether the watch lists again: the tracker is behind until the list
    /// is in.
    pub(super) fn relisting(&self) -> bool {
        self.relist.is_some()
    }

    /// How often the watch lost its place and listed again.
    pub(super) fn restarts(&self) -> u64 {
        self.lists.saturating_sub(1)
    }

    /// Takes in what the watch said at `at`: an object goes to the tracker
    /// (held while the watch lists again), and a new admission sets its
    /// Finished timer.
    pub(super) fn heard(&mut self, msg: WatchMsg, at: Ms, tracker: &mut Tracker, finishes: &mut Finishes) {
        match msg {
            WatchMsg::Init => {
                // The watch lists again (it lost its place): what follows
                // until InitDone is one snapshot.
                self.lists += 1;
                self.relist = Some(Vec::new());
            }
            WatchMsg::InitDone => {
                if let Some(list) = self.relist.take() {
                    for f in tracker.observe_list(list) {
                        finishes.set(f);
                    }
                }
            }
            WatchMsg::Error(e) => self.warnings.warn(&format!("Workload watch: {e}")),
            WatchMsg::Object(key, obs) => match (tracker.index_of(&key), obs) {
                (Some(i), Ok(obs)) => match self.relist.as_mut() {
                    Some(list) => list.push((i, at, obs)),
                    None => {
                        if let Some(f) = tracker.observe(i, at, obs) {
                            finishes.set(f);
                        }
                    }
                },
                (Some(_), Err(e)) => self.object_warnings.warn(&format!("Workload {key}: {e}")),
                (None, _) => {}
            },
        }
    }
}
