//! Random GPU gangs for the fault tests: Jobs of 1 to 4 pods with 1 or 2
//! GPUs each (a gang: admitted whole or not at all), arriving at random
//! moments in one LocalQueue and running for a random time once admitted.
//!
//! Two ways to run them:
//! - [`Style::Bare`], on an API server without a kubelet: created
//!   suspended (what the webhook would do), and this load acts as the
//!   kubelet: the pods of an admitted Job (made by the job controller) are
//!   marked Running and Ready, then Succeeded once the gang's time is up;
//! - [`Style::Node`], on the e2e node: created unsuspended (the webhook
//!   suspends them), their pods run `sleep` for the gang's time.
//!
//! The seed fixes the gangs, so a failing run can be replayed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_api::v1alpha1::Workload;

use crate::cluster::{GPU, jiff_now, kubelet_status};

/// A small deterministic generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// One gang: a Job of `pods` pods with `gpus` GPUs each.
#[derive(Clone, Debug)]
pub struct Gang {
    pub name: String,
    pub pods: i32,
    pub gpus: u32,
    /// How long it runs once admitted.
    pub runs_for: Duration,
    /// Created this long after the one before it.
    pub gap: Duration,
}

impl Gang {
    pub fn total_gpus(&self) -> i64 {
        i64::from(self.pods) * i64::from(self.gpus)
    }
}

/// `count` gangs from `seed`: 1–4 pods of 1–2 GPUs, running 2–6 s, each
/// arriving up to `max_gap` after the one before.
pub fn gangs(seed: u64, count: usize, max_gap: Duration) -> Vec<Gang> {
    let mut rng = Rng::new(seed);
    let max_gap = u64::try_from(max_gap.as_millis()).unwrap_or(u64::MAX);
    (0..count)
        .map(|i| Gang {
            name: format!("g{i:02}"),
            pods: rng.between(1, 4) as i32,
            gpus: rng.between(1, 2) as u32,
            runs_for: Duration::from_millis(rng.between(2_000, 6_000)),
            gap: Duration::from_millis(rng.between(0, max_gap)),
        })
        .collect()
}

/// Where the gangs run.
#[derive(Clone, Debug)]
pub enum Style {
    /// No kubelet: created suspended; the load marks their pods.
    Bare,
    /// The e2e node: created unsuspended (the webhook suspends them);
    /// their pods run this image's `sleep`.
    Node { image: String },
}

/// What the load saw so far.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// Jobs created.
    pub created: usize,
    /// Creations refused (then tried again a second later), with why.
    pub refused: Vec<String>,
    /// Calls of the kubelet's part that failed (retried at its next pass).
    pub kubelet_errors: usize,
    /// Jobs created unsuspended with [`Style::Node`]: the webhook did not
    /// suspend them.
    pub not_suspended: Vec<String>,
}

/// Gangs being created (and, bare, run) in a namespace; stops when dropped.
pub struct Load {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Creates `gangs` as Jobs in LocalQueue `queue` of `namespace`, and
    /// (bare) acts as their kubelet.
    pub fn start(client: Client, namespace: &str, queue: &str, gangs: Vec<Gang>, style: Style) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        let runs_for: HashMap<String, Duration> = gangs.iter().map(|g| (g.name.clone(), g.runs_for)).collect();
        let mut tasks = vec![tokio::spawn(create(
            jobs,
            queue.to_string(),
            gangs,
            style.clone(),
            seen.clone(),
        ))];
        if matches!(style, Style::Bare) {
            let pods: Api<Pod> = Api::namespaced(client, namespace);
            tasks.push(tokio::spawn(kubelet(pods, runs_for, seen.clone())));
        }
        Self { seen, tasks }
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The Job of gang `g` in `queue`.
pub fn job(g: &Gang, queue: &str, style: &Style) -> Result<Job> {
    let (suspend, image, command) = match style {
        Style::Bare => (true, "busybox".to_string(), json!(["true"])),
        Style::Node { image } => (
            false,
            image.clone(),
            json!(["sleep", format!("{:.1}", g.runs_for.as_secs_f64())]),
        ),
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": g.name, "labels": {sluice_api::labels::QUEUE: queue}},
        "spec": {"parallelism": g.pods, "completions": g.pods, "suspend": suspend, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "command": command,
                    "resources": {"limits": {GPU: g.gpus.to_string()}}}]}}}
    }))?)
}

async fn create(jobs: Api<Job>, queue: String, gangs: Vec<Gang>, style: Style, seen: Arc<Mutex<Seen>>) {
    for g in gangs {
        tokio::time::sleep(g.gap).await;
        let Ok(job) = job(&g, &queue, &style) else { continue };
        loop {
            match jobs.create(&PostParams::default(), &job).await {
                Ok(made) => {
                    if matches!(style, Style::Node { .. }) && made.spec.and_then(|s| s.suspend) != Some(true) {
                        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                        s.not_suspended.push(g.name.clone());
                    }
                    break;
                }
                Err(kube::Error::Api(e)) if e.code == 409 => break, // created by a try whose answer was lost
                Err(e) => {
                    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                    s.refused.push(format!("{}: {e}", g.name));
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        seen.lock().unwrap_or_else(|e| e.into_inner()).created += 1;
    }
}

/// The kubelet's part on a bare API server, every 250 ms: the pods of
/// each Job are marked Running, and Succeeded once the gang's time since
/// its first pod ran is up.
async fn kubelet(pods: Api<Pod>, runs_for: HashMap<String, Duration>, seen: Arc<Mutex<Seen>>) {
    let mut started: HashMap<String, Instant> = HashMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(list) = pods.list(&ListParams::default()).await else {
            seen.lock().unwrap_or_else(|e| e.into_inner()).kubelet_errors += 1;
            continue;
        };
        let now = jiff_now();
        for p in list.items {
            let (Some(name), Some(job)) = (p.metadata.name.clone(), job_of(&p)) else {
                continue;
            };
            let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
            if p.metadata.deletion_timestamp.is_some() || phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            let since = *started.entry(job.clone()).or_insert_with(Instant::now);
            let done = runs_for.get(&job).is_some_and(|d| since.elapsed() >= *d);
            let to = match (phase.as_str(), done) {
                (_, true) => "Succeeded",
                ("Running", false) => continue,
                _ => "Running",
            };
            let patch = Patch::Strategic(kubelet_status(to, &now));
            if pods.patch_status(&name, &PatchParams::default(), &patch).await.is_err() {
                seen.lock().unwrap_or_else(|e| e.into_inner()).kubelet_errors += 1;
            }
        }
    }
}

fn job_of(p: &Pod) -> Option<String> {
    p.metadata.labels.as_ref()?.get("job-name").cloned()
}

/// How many Workloads of `namespace` are Finished.
pub async fn finished(client: &Client, namespace: &str) -> Result<usize> {
    let list = Api::<Workload>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .filter(|w| {
            w.status
                .as_ref()
                .and_then(|s| s.condition("Finished"))
                .is_some_and(|c| c.status == "True")
        })
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_gangs_within_their_bounds() {
        let a = gangs(7, 60, Duration::from_secs(2));
        let b = gangs(7, 60, Duration::from_secs(2));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(a.iter().all(|g| (1..=4).contains(&g.pods) && (1..=2).contains(&g.gpus)));
        assert!(a.iter().all(|g| g.gap <= Duration::from_secs(2)));
        assert!(a.iter().any(|g| g.pods == 4) && a.iter().any(|g| g.pods == 1));
        assert_ne!(format!("{a:?}"), format!("{:?}", gangs(8, 60, Duration::from_secs(2))));
    }
}
