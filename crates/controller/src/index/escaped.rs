//! GPU pods that run outside the queue where every GPU is queued: a pod
//! bound to a node in a namespace that queues every object (and is not
//! trusted with GPU system pods), asking for a GPU, that no queued object
//! runs (none of its owner labels names one). The webhook refuses such a
//! pod at create; one that got past it (an outage: the pods entry fails
//! open) is reported here, once: a Warning Event `UnqueuedGpuPod` on the
//! pod and `sluice_unqueued_gpu_pods_total`. With
//! `--unqueued-gpu-pod-grace`, one still running that long after it was
//! first seen is deleted (default: report only). The GPU quota backstop
//! (`backstop`) keeps such pods within what was admitted there meanwhile.
//!
//! Only bound pods are seen (the placement watch, `--placement=nodes`).
//! A pod is judged [`SETTLE_MS`] after a cycle first sees it, so that the
//! object that runs it is known by then.

use std::collections::BTreeMap;

use sluice_api::labels;

use super::Index;
use super::placement::PodEntry;
use crate::plan::{EventSpec, ObjKey, Plan, Purpose, Step};

/// How long after it is first seen a pod is judged.
const SETTLE_MS: i64 = 15_000;

/// The rule's state: candidates by key (`namespace/name`).
#[derive(Default)]
pub(super) struct Escaped {
    /// Delete an unqueued GPU pod this long after it was first seen.
    grace_ms: Option<i64>,
    /// When each candidate was first judged (`None`: not yet), and
    /// whether it was reported.
    seen: BTreeMap<String, (Option<i64>, bool)>,
}

impl Escaped {
    pub(super) fn new(grace_ms: Option<i64>) -> Self {
        Self {
            grace_ms,
            seen: BTreeMap::new(),
        }
    }
}

impl Index {
    /// A bound pod, added or changed (`None`: gone): a candidate if it may
    /// run outside the queue.
    pub(super) fn note_unqueued(&mut self, key: &str, pod: Option<&PodEntry>) {
        match pod.filter(|p| self.may_be_unqueued(p)) {
            Some(_) => {
                self.escaped.seen.entry(key.to_string()).or_insert((None, false));
            }
            None => {
                self.escaped.seen.remove(key);
            }
        }
    }

    /// The candidates judged this cycle: reported once, deleted after the
    /// grace when one is set.
    pub(super) fn judge_unqueued(&mut self, now_ms: i64) {
        for (at, _) in self.escaped.seen.values_mut() {
            at.get_or_insert(now_ms);
        }
        let due: Vec<(String, i64, bool)> = self
            .escaped
            .seen
            .iter()
            .filter_map(|(k, (at, told))| Some((k.clone(), (*at)?, *told)))
            .filter(|(_, at, _)| now_ms - at >= SETTLE_MS)
            .collect();
        for (key, at, told) in due {
            let still = self.bound_pod(&key).is_some_and(|p| self.may_be_unqueued(p));
            if !still {
                self.escaped.seen.remove(&key);
                continue;
            }
            if !told {
                self.report_unqueued(&key);
                if let Some(e) = self.escaped.seen.get_mut(&key) {
                    e.1 = true;
                }
            }
            if let Some(grace) = self.escaped.grace_ms
                && now_ms - at >= grace
            {
                self.escaped.seen.remove(&key);
                let (ns, name) = key.split_once('/').unwrap_or(("", &key));
                self.outbox.plans.push(Plan {
                    purpose: Purpose::Report,
                    steps: vec![Step::DeletePod {
                        key: ObjKey::new(ns, name),
                    }],
                });
            }
        }
    }

    /// Whether a bound pod asks for a GPU in a namespace that queues every
    /// object (untrusted) and no queued object's label is on it.
    fn may_be_unqueued(&self, p: &PodEntry) -> bool {
        let gpu = p
            .requests
            .iter()
            .any(|(r, a)| *a > 0 && sluice_api::resources::is_gpu(r));
        let queued_ns = self.defs.namespaces.get(&*p.namespace).is_some_and(|l| {
            l.get(labels::DEFAULT_QUEUE).map(String::as_str) == Some(labels::DEFAULT_QUEUE_ENABLED)
                && l.get(labels::ALLOW_GPU_FIXES_SKIP).map(String::as_str) != Some("true")
        });
        gpu && !p.terminating && queued_ns && !self.runs_for_a_queued_object(p)
    }

    fn report_unqueued(&mut self, key: &str) {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        self.outbox.stats.unqueued_gpu_pods += 1;
        tracing::warn!(pod = key, "a GPU pod runs outside the queue");
        let grace = match self.escaped.grace_ms {
            Some(g) => format!("it is deleted {}s after it was first seen", g / 1000),
            None => "it is left running (--unqueued-gpu-pod-grace is not set)".to_owned(),
        };
        let note = format!(
            "This pod asks for a GPU and runs outside the queue: namespace {ns} queues every GPU ({}={}), and no queued object runs it (the webhook refuses such pods; it was down or bypassed when this one was created); the namespace's ResourceQuota keeps such pods within what Sluice admitted there; {grace}",
            labels::DEFAULT_QUEUE,
            labels::DEFAULT_QUEUE_ENABLED
        );
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: super::reference("v1", "Pod", &ObjKey::new(ns, name), None),
                type_: "Warning",
                reason: "UnqueuedGpuPod".into(),
                action: "Report",
                note,
            })],
        });
    }
}
