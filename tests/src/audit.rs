//! An auditor of quota as the API shows it: watches every Workload event in
//! a namespace and sums, after each one, the GPUs that Workloads hold per
//! ClusterQueue (`QuotaReserved=True`, not `Finished=True`, with an
//! `admission`), the way a dashboard, an exporter or a second scheduler
//! reading `kubectl get workloads` would. It records the largest sum it
//! ever saw, so a test can say the API never showed more than the quota.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use sluice_api::v1alpha1::Workload;

use crate::cluster::GPU;

/// What the auditor saw so far.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Workload events observed.
    pub events: usize,
    /// Per ClusterQueue, the most GPUs held at once.
    pub most: BTreeMap<String, i64>,
    /// Per ClusterQueue, each moment its sum went above `limit` (if set):
    /// the Workloads holding then.
    pub over: Vec<String>,
    /// Per Workload name, how many times it began to hold quota (seen
    /// not holding, or not at all, then holding).
    pub admissions: BTreeMap<String, usize>,
    /// When a Workload last began to hold quota.
    pub last_admission: Option<std::time::Instant>,
}

impl Seen {
    /// The Workloads that began to hold quota more than once.
    pub fn admitted_twice(&self) -> Vec<String> {
        self.admissions
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(name, n)| format!("{name} ({n} times)"))
            .collect()
    }
}

/// Audits the Workloads of one namespace until dropped.
pub struct QuotaAudit {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl QuotaAudit {
    /// Starts watching; `limit` per ClusterQueue name (missing: no limit,
    /// only the maximum is kept).
    pub fn start(client: kube::Client, namespace: &str, limit: BTreeMap<String, i64>) -> Self {
        Self::start_for(client, namespace, GPU, limit)
    }

    /// Like [`QuotaAudit::start`], summing `resource` in its engine units
    /// (milli-units; 720 720ths of a GPU-equivalent), and whole GPUs for
    /// `nvidia.com/gpu` as before.
    pub fn start_for(client: kube::Client, namespace: &str, resource: &str, limit: BTreeMap<String, i64>) -> Self {
        let resource = resource.to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let api: Api<Workload> = Api::namespaced(client, namespace);
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut holding: HashMap<String, (String, i64, String)> = HashMap::new();
            // A relist (the watch restarted): what it lists, to drop the
            // Workloads deleted meanwhile.
            let mut relisted: Option<std::collections::HashSet<String>> = None;
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let objects = match event {
                    Event::Apply(wl) => vec![(wl, true)],
                    Event::InitApply(wl) => {
                        if let Some(r) = relisted.as_mut() {
                            r.insert(wl.metadata.uid.clone().unwrap_or_default());
                        }
                        vec![(wl, true)]
                    }
                    Event::Delete(wl) => vec![(wl, false)],
                    Event::Init => {
                        relisted = Some(Default::default());
                        Vec::new()
                    }
                    Event::InitDone => {
                        if let Some(r) = relisted.take() {
                            holding.retain(|uid, _| r.contains(uid));
                        }
                        Vec::new()
                    }
                };
                let mut seen = record.lock().unwrap_or_else(|e| e.into_inner());
                for (wl, present) in objects {
                    let uid = wl.metadata.uid.clone().unwrap_or_default();
                    match held_of(&wl, &resource).filter(|_| present) {
                        Some((cq, gpus)) => {
                            let name = wl.metadata.name.clone().unwrap_or_default();
                            if !holding.contains_key(&uid) {
                                *seen.admissions.entry(name.clone()).or_default() += 1;
                                seen.last_admission = Some(std::time::Instant::now());
                            }
                            holding.insert(uid, (cq, gpus, name));
                        }
                        None => {
                            holding.remove(&uid);
                        }
                    }
                    seen.events += 1;
                    check(&holding, &limit, &mut seen);
                }
            }
        });
        Self { seen, task }
    }

    /// What was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for QuotaAudit {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The ClusterQueue and GPUs a Workload holds as its status shows it.
pub fn held(wl: &Workload) -> Option<(String, i64)> {
    held_of(wl, GPU)
}

/// The ClusterQueue and amount of `resource` a Workload holds as its
/// status shows it: whole GPUs for `nvidia.com/gpu`, engine units
/// otherwise.
pub fn held_of(wl: &Workload, resource: &str) -> Option<(String, i64)> {
    let status = wl.status.as_ref()?;
    if !status.holds_quota() {
        return None;
    }
    let admission = status.admission.as_ref()?;
    let amount = |q: &str| -> Option<i64> {
        if resource == GPU {
            return q.parse::<i64>().ok();
        }
        sluice_api::quantity::parse_amount(resource, "", q)
            .ok()
            .and_then(|a| i64::try_from(a).ok())
    };
    let sum = admission
        .pod_set_assignments
        .iter()
        .filter_map(|a| a.resource_usage.get(resource))
        .filter_map(|q| amount(&q.0))
        .sum();
    Some((admission.cluster_queue.clone(), sum))
}

fn check(holding: &HashMap<String, (String, i64, String)>, limit: &BTreeMap<String, i64>, seen: &mut Seen) {
    let mut sums: BTreeMap<&str, i64> = BTreeMap::new();
    for (cq, gpus, _) in holding.values() {
        *sums.entry(cq).or_default() += gpus;
    }
    for (cq, sum) in sums {
        let most = seen.most.entry(cq.to_string()).or_default();
        *most = (*most).max(sum);
        if limit.get(cq).is_some_and(|l| sum > *l) {
            let mut who: Vec<String> = holding
                .values()
                .filter(|(c, _, _)| c == cq)
                .map(|(_, g, n)| format!("{n}={g}"))
                .collect();
            who.sort();
            seen.over.push(format!("{cq}: {sum} GPUs held by {}", who.join(", ")));
        }
    }
}
