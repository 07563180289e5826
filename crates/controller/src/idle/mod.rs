//! Idle-GPU reclaim, the measuring side: every `--idle-interval`, the
//! admitted workloads under a ClusterQueue `idleReclaim` policy are matched
//! to their running GPU pods, and one range query to Prometheus gives the
//! utilisation of every pod over the longest window; each workload is then
//! judged by `sluice_scheduler::idle`. The index acts on the verdicts
//! ([`crate::index::Index::apply_idle`]).
//!
//! ```text
//!  event loop ─ tick ─► Index::idle_targets ─► check (pods list, query_range) ─► IdleOutcome ─► Index::apply_idle
//! ```
//!
//! Safety: a failed or garbled answer judges nothing (the outcome is
//! `Unavailable`, and the ClusterQueues say so); a pod without a series, a
//! gap in its samples, or a pod list that fails is "cannot tell", never
//! idle.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use sluice_api::v1alpha1::conditions as cond;
use sluice_scheduler::idle::{IdleWindow, Idleness, PodSamples, Unknown};

use sluice_api::resources::is_gpu;

use crate::index::{IdleOutcome, IdleTarget};

pub mod prometheus;

/// Pod lists a check has in flight at once.
const POD_LISTS_AT_ONCE: usize = 8;

pub use prometheus::{PromError, PromSettings, Prometheus};

/// `--idle-query` default: the per-pod mean of dcgm-exporter's GPU
/// utilisation, by the `namespace` and `pod` labels it sets when it maps
/// GPUs to pods.
pub const DEFAULT_QUERY: &str = "avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)";

/// Settings of the idle checks (`--prometheus-*`, `--idle-*`).
#[derive(Clone, Debug)]
pub struct IdleSettings {
    /// `None`: no Prometheus given; ClusterQueues with a policy say so.
    pub prometheus: Option<PromSettings>,
    /// PromQL giving one series per pod, labelled `namespace` and `pod`.
    pub query: String,
    /// Time between checks, also the query's step.
    pub interval: Duration,
}

impl Default for IdleSettings {
    fn default() -> Self {
        Self {
            prometheus: None,
            query: DEFAULT_QUERY.to_string(),
            interval: Duration::from_secs(60),
        }
    }
}

/// Runs checks: a Kubernetes client for the pods, a Prometheus client.
pub struct Checker {
    client: Client,
    prometheus: Option<Prometheus>,
    query: String,
    step_ms: i64,
}

impl Checker {
    /// A checker; fails when the Prometheus settings are unusable (bad
    /// URL, unreadable CA file).
    pub fn new(client: Client, settings: &IdleSettings) -> Result<Self, PromError> {
        let prometheus = settings.prometheus.clone().map(Prometheus::new).transpose()?;
        Ok(Self {
            client,
            prometheus,
            query: settings.query.clone(),
            step_ms: i64::try_from(settings.interval.as_millis())
                .unwrap_or(i64::MAX)
                .max(1000),
        })
    }

    /// One check of `targets` at `now_ms`.
    pub async fn check(&self, targets: Vec<IdleTarget>, now_ms: i64) -> IdleOutcome {
        let Some(prom) = &self.prometheus else {
            return IdleOutcome::Unavailable {
                reason: "PrometheusNotConfigured",
                metric: "not_configured",
                message: unavailable_message("idleReclaim needs the controller's --prometheus-url"),
            };
        };
        // With nothing to judge, a short query still tells whether
        // Prometheus answers (the queues' condition must not guess).
        let window = targets.iter().map(|t| t.policy.window_ms).max().unwrap_or(self.step_ms);
        // One step of margin before the longest window.
        let start = now_ms.saturating_sub(window).saturating_sub(self.step_ms);
        let matrix = match prom.query_range(&self.query, start, now_ms, self.step_ms).await {
            Ok(m) => m,
            Err(e) => {
                return IdleOutcome::Unavailable {
                    reason: cond::reasons::PROMETHEUS_UNAVAILABLE,
                    metric: e.metric_label(),
                    message: unavailable_message(e),
                };
            }
        };
        // The pods of each (namespace, selector), a few lists at a time.
        let keys: std::collections::BTreeSet<(String, String)> = targets
            .iter()
            .flat_map(|t| t.pods.iter().map(|(job, sel)| (job.key.namespace.clone(), sel.clone())))
            .collect();
        let pods_by_selector: BTreeMap<(String, String), Result<Vec<String>, String>> = futures::stream::iter(keys)
            .map(|key| async move {
                let pods = self.gpu_pods(&key.0, &key.1).await;
                (key, pods)
            })
            .buffer_unordered(POD_LISTS_AT_ONCE)
            .collect()
            .await;
        let mut verdicts = Vec::with_capacity(targets.len());
        for t in targets {
            let mut names = Vec::new();
            let mut failed = None;
            for (job, selector) in &t.pods {
                match &pods_by_selector[&(job.key.namespace.clone(), selector.clone())] {
                    Ok(p) => names.extend(p.iter().map(|n| (job.key.namespace.clone(), n.clone()))),
                    Err(e) => failed = Some(e.clone()),
                }
            }
            let verdict = match failed {
                Some(e) => Idleness::Unknown(Unknown::PodMissing {
                    pod: format!("(pods not listed: {e})"),
                }),
                None => {
                    let pods: Vec<PodSamples<'_>> = names
                        .iter()
                        .map(|(ns, pod)| PodSamples {
                            pod,
                            samples: matrix.get(&(ns.clone(), pod.clone())).map(Vec::as_slice),
                        })
                        .collect();
                    let rule = IdleWindow {
                        below_percent: f64::from(t.policy.utilization_below),
                        window_ms: t.policy.window_ms,
                        step_ms: self.step_ms,
                    };
                    rule.judge(now_ms, t.admitted_at_ms.saturating_add(t.policy.grace_period_ms), &pods)
                }
            };
            verdicts.push((t.uid, t.admitted_at_ms, verdict));
        }
        IdleOutcome::Checked { verdicts }
    }

    /// Names of the running GPU pods matching `selector` in `namespace`.
    async fn gpu_pods(&self, namespace: &str, selector: &str) -> Result<Vec<String>, String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| e.to_string())?;
        Ok(list
            .items
            .iter()
            .filter(|p| is_running_gpu_pod(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect())
    }
}

/// Running, not being deleted, and some container asks for a GPU.
pub fn is_running_gpu_pod(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
        return false;
    }
    let Some(spec) = &pod.spec else { return false };
    spec.containers.iter().any(|c| {
        c.resources.as_ref().is_some_and(|r| {
            [r.limits.as_ref(), r.requests.as_ref()]
                .into_iter()
                .flatten()
                .any(|m| m.iter().any(|(name, q)| is_gpu(name) && q.0.trim() != "0"))
        })
    })
}

#[cfg(test)]
mod tests;

/// What a queue's condition and the log say when no check can be made:
/// the cause, and that nothing is judged idle meanwhile.
pub fn unavailable_message(cause: impl std::fmt::Display) -> String {
    format!("{cause}; nothing is judged idle")
}
