//! `sluice bench floor`: how fast the API server takes Workload status
//! writes under the controller's client rate limit: the physical floor for
//! admissions, since each admission is at least one such write.
//!
//! 1. Creates `--count` Workloads in a fresh namespace `<run>-floor`, with
//!    `spec.active: false` and a LocalQueue name that does not exist, so that
//!    a running controller keeps them out of its queues and writes nothing
//!    to them.
//! 2. With a full token bucket of `--kube-qps`/`--kube-burst` (the
//!    controller's rule, [`sluice_controller::limit`]) and `--concurrency` patches in
//!    flight, sends one server-side apply of `status.conditions` to each (a
//!    `BenchFloor` condition whose message differs every time, so that the
//!    server really writes; field manager `sluice-bench`, on `/status`, with
//!    the controller's 10 s time limit) — the shape of the controller's
//!    admission write.
//! 3. Reports successful patches per second over the time from the first
//!    patch to the last answer, and the latency of each.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::DynamicObject;
use serde_json::Value;
use sluice_api::v1alpha1::Workload;
use tokio::sync::Mutex;

use super::cluster::{self, CallError};
use super::plan::{self, PlannedWorkload};
use super::report::{self, FloorReport};
use super::{FloorArgs, OutputArgs, print};
use sluice_controller::limit::Limiter;
use sluice_simulate::trace::TracePodSet;

/// Condition type the floor writes (the controller reads no such type).
pub const CONDITION: &str = "BenchFloor";
/// LocalQueue name of floor Workloads (never created).
pub const QUEUE: &str = "bench-floor";
/// Creations in flight while setting up (not measured).
const SETUP_CONCURRENCY: usize = 32;

/// What to measure.
#[derive(Debug, Clone)]
pub struct FloorOptions {
    pub count: u32,
    pub concurrency: u32,
    pub kube_qps: f64,
    pub kube_burst: u32,
    pub quiet: bool,
}

/// The namespace of a run's floor measurement.
pub fn namespace(run_id: &str) -> String {
    format!("{run_id}-floor")
}

/// Floor Workload `i`: inactive, one pod of 1 CPU.
pub fn workload(run_id: &str, i: u32) -> Workload {
    let planned = PlannedWorkload {
        namespace: namespace(run_id),
        name: format!("floor-{i}"),
        class: "floor".into(),
        queue: QUEUE.into(),
        priority: 0,
        arrival: 0,
        runtime: 0,
        pod_sets: vec![TracePodSet {
            name: "main".into(),
            count: 1,
            requests: [("cpu".to_string(), 1_000)].into(),
            ..TracePodSet::default()
        }],
    };
    let mut wl = planned.object(run_id);
    wl.spec.active = false;
    wl
}

/// The status apply of patch `n` to `name`: one condition, new each time.
pub fn patch_body(namespace: &str, name: &str, n: usize, generation: Option<i64>, now: Timestamp) -> Value {
    let condition = Condition {
        type_: CONDITION.into(),
        status: "True".into(),
        reason: "Measured".into(),
        message: format!("floor patch {n} at {now}"),
        last_transition_time: Time(now),
        observed_generation: generation,
    };
    cluster::condition_apply_body(namespace, name, condition)
}

/// Creates the floor Workloads, patches each once, and deletes the
/// namespace again unless `keep`.
pub async fn measure(client: &Client, run_id: &str, opts: &FloorOptions, keep: bool) -> Result<FloorReport> {
    if opts.count == 0 {
        bail!("--count must be at least 1");
    }
    if opts.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let ns = namespace(run_id);
    cluster::apply_namespace(client, run_id, &ns).await?;
    let result = measure_in(client, run_id, &ns, opts).await;
    if !keep {
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
        let bg = kube::api::DeleteParams::background();
        if let Err(e) = cluster::retry(|| cluster::call(namespaces.delete(&ns, &bg))).await
            && e.code() != Some(404)
        {
            eprintln!("warning: could not delete namespace {ns}: {e} (`sluice bench cleanup --run-id {run_id}`)");
        }
    }
    result
}

async fn measure_in(client: &Client, run_id: &str, ns: &str, opts: &FloorOptions) -> Result<FloorReport> {
    let api = cluster::workloads(client, ns);
    progress(opts.quiet, &format!("creating {} Workloads in {ns}", opts.count));
    let generations = create_workloads(&api, run_id, opts.count as usize).await?;
    progress(
        opts.quiet,
        &format!(
            "patching each status once: --kube-qps {} --kube-burst {}, {} in flight",
            opts.kube_qps, opts.kube_burst, opts.concurrency
        ),
    );
    let patched = patch_statuses(&api, ns, generations, opts).await?;
    if patched.latencies.is_empty()
        && let Some(e) = patched.failures.first()
    {
        bail!("every status patch failed; the first: {e}");
    }
    if let Some(e) = patched.failures.first() {
        eprintln!(
            "warning: {} of {} status patches failed; the first: {e}",
            patched.failures.len(),
            opts.count
        );
    }
    Ok(report::floor_figures(
        run_id,
        (opts.kube_qps, opts.kube_burst, opts.concurrency),
        patched.latencies,
        patched.failures.len() as u64,
        patched.elapsed_ms,
    ))
}

/// Setup, not measured: creates the `count` floor Workloads with some
/// concurrency, and returns the generation each one got (for
/// observedGeneration).
async fn create_workloads(api: &kube::Api<DynamicObject>, run_id: &str, count: usize) -> Result<Arc<Vec<Option<i64>>>> {
    let next = Arc::new(AtomicUsize::new(0));
    let generations = Arc::new(Mutex::new(vec![None::<i64>; count]));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..SETUP_CONCURRENCY.min(count) {
        let (api, next, generations, run_id) = (api.clone(), next.clone(), generations.clone(), run_id.to_string());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<(), anyhow::Error>(());
                }
                generations.lock().await[i] = create_workload(&api, &run_id, i).await?;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a creation task failed")??;
    }
    let generations = std::mem::take(&mut *generations.lock().await);
    Ok(Arc::new(generations))
}

/// Creates floor Workload `i` (server-side apply, tried again on
/// transient errors); its generation.
async fn create_workload(api: &kube::Api<DynamicObject>, run_id: &str, i: usize) -> Result<Option<i64>> {
    let wl = workload(run_id, i as u32);
    let name = wl.metadata.name.clone().unwrap_or_default();
    let body = serde_json::to_value(&wl).context("serializing a floor Workload")?;
    let params = kube::api::PatchParams::apply(plan::FIELD_MANAGER).force();
    let patch = kube::api::Patch::Apply(&body);
    let created = cluster::retry(|| cluster::call(api.patch(&name, &params, &patch)))
        .await
        .with_context(|| {
            format!(
                "creating Workload {}/{name}",
                wl.metadata.namespace.as_deref().unwrap_or_default()
            )
        })?;
    Ok(created.metadata.generation)
}

/// What the measured part gave: each successful patch's latency (µs),
/// the failures, and the time from the first patch to the last answer.
struct Patched {
    latencies: Vec<i64>,
    failures: Vec<CallError>,
    elapsed_ms: f64,
}

/// The measured part: each Workload's status patched once, at most
/// `--concurrency` in flight, under the `--kube-qps` bucket.
async fn patch_statuses(
    api: &kube::Api<DynamicObject>,
    ns: &str,
    generations: Arc<Vec<Option<i64>>>,
    opts: &FloorOptions,
) -> Result<Patched> {
    let limiter = Arc::new(Limiter::new(opts.kube_qps, opts.kube_burst));
    let next = Arc::new(AtomicUsize::new(0));
    let mut patchers = tokio::task::JoinSet::new();
    let start = Instant::now();
    for _ in 0..opts.concurrency.min(opts.count) {
        let (api, next, limiter, generations, ns) = (
            api.clone(),
            next.clone(),
            limiter.clone(),
            generations.clone(),
            ns.to_string(),
        );
        let count = opts.count as usize;
        patchers.spawn(async move {
            let mut latencies = Vec::new();
            let mut failures: Vec<CallError> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                limiter.acquire().await;
                let name = format!("floor-{i}");
                let body = patch_body(&ns, &name, i, generations[i], Timestamp::now());
                let sent = Instant::now();
                match cluster::apply_status(&api, &name, &body).await {
                    Ok(()) => latencies.push(sent.elapsed().as_micros() as i64),
                    Err(e) => failures.push(e),
                }
            }
            (latencies, failures, Instant::now())
        });
    }
    let mut patched = Patched {
        latencies: Vec::new(),
        failures: Vec::new(),
        elapsed_ms: 0.0,
    };
    let mut end = start;
    while let Some(r) = patchers.join_next().await {
        let (l, f, done) = r.context("a patch task failed")?;
        patched.latencies.extend(l);
        patched.failures.extend(f);
        end = end.max(done);
    }
    patched.elapsed_ms = end.duration_since(start).as_secs_f64() * 1000.0;
    Ok(patched)
}

fn progress(quiet: bool, what: &str) {
    if !quiet {
        eprintln!("floor: {what}");
    }
}

/// `sluice bench floor`.
pub async fn command(args: FloorArgs) -> Result<ExitCode> {
    let FloorArgs {
        count,
        concurrency,
        limits,
        output: OutputArgs {
            run_id,
            keep,
            json,
            quiet,
        },
    } = args;
    let run_id = match run_id {
        Some(id) => {
            plan::check_run_id(&id).map_err(|e| anyhow::anyhow!("--run-id: {e}"))?;
            id
        }
        None => plan::new_run_id(),
    };
    let opts = FloorOptions {
        count,
        concurrency,
        kube_qps: limits.kube_qps,
        kube_burst: limits.kube_burst,
        quiet,
    };
    let client = super::client().await?;
    cluster::ensure_fresh(&client, &run_id).await?;
    let work = measure(&client, &run_id, &opts, keep);
    let result = tokio::select! {
        r = work => Ok(r),
        stop = super::stop_signal() => Err(stop),
    };
    let result = match result {
        Ok(r) => r,
        Err(stop) => {
            eprintln!("{}", stop.describe());
            if !keep {
                super::run::cleanup_or_exit(&client, &run_id, true).await;
            }
            return Ok(stop.exit_code());
        }
    };
    let report = result?;
    let text = if json {
        serde_json::to_string_pretty(&report).context("serializing the report")? + "\n"
    } else {
        report::render_floor(&report)
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RUN_LABEL;
    use sluice_api::validation::Validate;

    #[test]
    fn floor_workloads_are_inactive_and_valid() {
        let wl = workload("sb-x", 7);
        assert_eq!(wl.metadata.name.as_deref(), Some("floor-7"));
        assert_eq!(wl.metadata.namespace.as_deref(), Some("sb-x-floor"));
        assert!(!wl.spec.active, "a controller must leave them alone");
        assert_eq!(wl.spec.queue_name, QUEUE);
        assert_eq!(wl.metadata.labels.as_ref().map(|l| l[RUN_LABEL].as_str()), Some("sb-x"));
        assert!(wl.validate().is_empty());
        let json = serde_json::to_value(&wl).expect("serializes");
        assert_eq!(json["spec"]["active"], false);
    }

    #[test]
    fn each_patch_is_a_new_condition_message() {
        let now: Timestamp = "2025-01-02T03:04:05Z".parse().expect("a time");
        let a = patch_body("ns", "floor-1", 1, Some(1), now);
        let b = patch_body("ns", "floor-1", 2, Some(1), now);
        assert_ne!(a, b, "an unchanged apply would not be written by the server");
        assert_eq!(a["kind"], "Workload");
        assert_eq!(a["metadata"]["namespace"], "ns");
        let c = &a["status"]["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str()),
            (Some(CONDITION), Some("True"))
        );
        assert_eq!(c["lastTransitionTime"], "2025-01-02T03:04:05Z");
        assert_eq!(c["observedGeneration"], 1);
    }
}
