//! `sluice bench run`: drives a running controller through a scenario.
//!
//! ```text
//!  [--with-floor] floor::measure
//!  apply namespaces, flavors, cluster queues, local queues ── wait until the
//!  controller marks one queue Active ── --settle ── start the Workload watch
//!  (label sluice.dev/bench-run=<run>), wait for its first list ── scrape
//!  --controller-metrics ── t0
//!
//!  loop until every workload is seen Finished, or --timeout, or a stall:
//!    arrival due   → create the Workload (server-side apply; ≤ --concurrency in flight)
//!    watch event   → Tracker::observe (admissions, usage, quota checks);
//!                    a new admission sets a timer at now + its run time
//!    timer due     → still running in that admission? apply Finished=True
//!                    (reason Succeeded) on /status, as a Job completion does
//!    every second  → Tracker::sample → StallRule (no admission or finish for
//!                    --stall-window while workloads wait and none runs?)
//!
//!  stalled: list the run's Workloads, group their pending reasons
//!  scrape --controller-metrics again, read VmHWM ── report
//! ```
//!
//! Every object carries the run label; the caller deletes them all at the
//! end, on error and on Ctrl-C ([`cleanup_or_exit`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::cluster::{self, CallError};
use super::floor::{self, FloorOptions};
use super::plan::{self, Plan, RUN_LABEL};
use super::report::{self, Extras, RunReport, StallReport};
use super::scrape::{self, HttpUrl};
use super::stall::{self, StallRule, Verdict};
use super::track::{Ms, Observation, Tracker};
use super::{EXIT_INCOMPLETE, OutputArgs, RunArgs, print};
use sluice_controller::limit::Limiter;
use sluice_simulate::scenario::{LoadOptions, load_with};
use sluice_simulate::units::format_duration;

mod events;
mod progress;

pub use events::finish_body;
use events::{Msg, WatchMsg, watch};
use progress::{Progress, Warnings};

/// How long to wait for the controller to show it sees the run's queues.
pub const CONTROLLER_WAIT: Duration = Duration::from_secs(60);
/// How long to wait for the Workload watch's first list.
const WATCH_WAIT: Duration = Duration::from_secs(60);
/// `/proc` sampling period of `--controller-pid`.
const RSS_PERIOD: Duration = Duration::from_millis(250);
/// A creation or Finished mark that failed after its tries is tried again
/// this much later.
const RETRY_MS: Ms = 1_000;
/// How often the stall rule looks at the run.
const STALL_SAMPLE: Duration = Duration::from_secs(1);

/// How to run a plan.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub timeout: Duration,
    /// Creations in flight at once, and Finished marks in flight at once.
    pub concurrency: usize,
    pub settle: Duration,
    pub metrics: Option<HttpUrl>,
    pub pid: Option<u32>,
    pub floor: Option<FloorOptions>,
    /// The harness's own client-side limit on its writes (creations and
    /// Finished marks): `--harness-qps`, `--harness-burst` (qps 0: none).
    pub harness_qps: f64,
    pub harness_burst: u32,
    /// Stop when nothing was admitted or finished for this long while
    /// workloads wait and none runs (`--stall-window`; zero: never).
    pub stall_window: Duration,
    pub quiet: bool,
}

fn ms_since(t0: Instant, at: Instant) -> Ms {
    at.saturating_duration_since(t0).as_millis() as Ms
}

fn instant_at(t0: Instant, ms: Ms) -> Instant {
    t0 + Duration::from_millis(ms.max(0) as u64)
}

/// Runs the plan against the cluster (objects are left for the caller to
/// delete) and reports. Call [`cluster::ensure_fresh`] first.
pub async fn execute(client: &Client, plan: &Plan, opts: &RunOptions) -> Result<RunReport> {
    let mut extras = Extras::default();
    if let Some(f) = &opts.floor {
        extras.floor = Some(
            floor::measure(client, &plan.run_id, f, false)
                .await
                .context("measuring the write floor (--with-floor)")?,
        );
    }
    if !opts.quiet {
        eprintln!(
            "run {}: {} namespaces, {} flavors, {} cluster queues, {} local queues",
            plan.run_id,
            plan.namespaces.len(),
            plan.flavors.len(),
            plan.cluster_queues.len(),
            plan.local_queues.len()
        );
    }
    cluster::apply_setup(client, plan).await?;
    cluster::wait_for_controller(client, plan, CONTROLLER_WAIT).await?;
    tokio::time::sleep(opts.settle).await;

    let mut tasks: JoinSet<()> = JoinSet::new();
    let max_rss = Arc::new(AtomicU64::new(0));
    if let Some(pid) = opts.pid {
        let max_rss = max_rss.clone();
        tasks.spawn(async move {
            loop {
                if let Ok(m) = scrape::read_proc_status(pid) {
                    max_rss.fetch_max(m.vm_rss.unwrap_or(0), Ordering::Relaxed);
                }
                tokio::time::sleep(RSS_PERIOD).await;
            }
        });
    }

    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    tasks.spawn(watch(client.clone(), plan.run_id.clone(), tx.clone()));
    let mut watch_warnings = Warnings::default();
    let mut inits = 0u64;
    let listed = tokio::time::timeout(WATCH_WAIT, async {
        while let Some(m) = rx.recv().await {
            match m {
                Msg::Watch(_, WatchMsg::Init) => inits += 1,
                Msg::Watch(_, WatchMsg::InitDone) => return true,
                Msg::Watch(_, WatchMsg::Error(e)) => watch_warnings.warn(&format!("Workload watch: {e}")),
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

    let before = match &opts.metrics {
        Some(url) => Some(scrape::WriteSample::parse(&scrape::fetch(url).await.map_err(|e| {
            anyhow!("--controller-metrics http://{}:{}{}: {e}", url.host, url.port, url.path)
        })?)),
        None => None,
    };

    let mut tracker = Tracker::new(plan.quotas.clone(), plan.workloads.iter().map(|w| (w.key(), w.runtime)));
    // The harness's writes: at most --concurrency creations and as many
    // Finished marks in flight, every try under the --harness-qps bucket.
    // A task is spawned only with a permit in hand: a backlog (50 000
    // arrivals due at once in kueue-large-scale) stays an index into the
    // plan and a heap of timers, not 50 000 waiting tasks.
    let limiter = Arc::new(Limiter::new(opts.harness_qps, opts.harness_burst));
    let creates = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let finishes = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let mut timers: BinaryHeap<Reverse<(Ms, usize, u32)>> = BinaryHeap::new();
    let mut create_retries: BinaryHeap<Reverse<(Ms, usize)>> = BinaryHeap::new();
    // Objects of a relist of the watch, taken in together at its end.
    let mut relist: Option<Vec<(usize, Ms, Observation)>> = None;
    let mut progress = Progress::new(opts.quiet);
    let mut object_warnings = Warnings::default();
    let mut create_warnings = Warnings::default();
    let mut finish_warnings = Warnings::default();
    let mut next = 0usize;
    let mut created = 0usize;
    let n = plan.workloads.len();

    let mut stall_rule = (!opts.stall_window.is_zero()).then(|| StallRule::new(opts.stall_window.as_millis() as Ms));
    let mut stalled = None;

    let t0 = Instant::now();
    let deadline = t0 + opts.timeout;
    let mut next_sample = t0;
    let end = loop {
        let now = Instant::now();
        let now_ms = ms_since(t0, now);
        if tracker.done() {
            break tracker
                .records()
                .iter()
                .filter_map(|r| r.finished_at)
                .max()
                .unwrap_or(now_ms);
        }
        if now >= deadline {
            extras.timed_out = true;
            break now_ms;
        }
        // Not while the watch lists again: the tracker is behind until the
        // list is in.
        if let Some(rule) = stall_rule.as_mut()
            && now >= next_sample
            && relist.is_none()
        {
            next_sample = now + STALL_SAMPLE;
            if let Verdict::Stalled(s) = rule.sample(tracker.sample(now_ms)) {
                stalled = Some(s);
                break now_ms;
            }
        }
        // Creations due: failed ones first, then the schedule.
        let mut creates_blocked = false;
        loop {
            let retry_due = create_retries.peek().is_some_and(|Reverse((at, _))| *at <= now_ms);
            let arrival_due = next < n && plan.workloads[next].arrival <= now_ms;
            if !(retry_due || arrival_due) {
                break;
            }
            let Ok(permit) = creates.clone().try_acquire_owned() else {
                creates_blocked = true;
                break;
            };
            let index = match retry_due.then(|| create_retries.pop()).flatten() {
                Some(Reverse((_, i))) => i,
                None => {
                    next += 1;
                    next - 1
                }
            };
            let w = plan.workloads[index].clone();
            let api = cluster::workloads(client, &w.namespace);
            let (tx, run_id, limiter) = (tx.clone(), plan.run_id.clone(), limiter.clone());
            tasks.spawn(async move {
                // Built once a creation may go: a backlog holds no bodies.
                let result = match serde_json::to_value(w.object(&run_id)) {
                    Ok(body) => cluster::apply_limited(&api, &w.name, &body, &limiter).await,
                    Err(e) => Err(CallError::Api(kube::Error::SerdeError(e))),
                };
                let at = Instant::now();
                // Given back before the answer is read: the loop may start
                // the next one as soon as it hears of this one.
                drop(permit);
                let _ = tx.send(Msg::Created { index, at, result });
            });
        }
        // Finished marks due; none while the watch lists again (whether a
        // workload still runs in the admission its timer is for is known
        // once the list is in).
        let mut finishes_blocked = relist.is_some();
        while !finishes_blocked && let Some(&Reverse((at, index, epoch))) = timers.peek() {
            if at > now_ms {
                break;
            }
            let Some(generation) = tracker.finish_due(index, epoch) else {
                // An earlier admission's timer, or no longer running.
                timers.pop();
                continue;
            };
            let Ok(permit) = finishes.clone().try_acquire_owned() else {
                finishes_blocked = true;
                break;
            };
            timers.pop();
            let w = &plan.workloads[index];
            let body = finish_body(&w.namespace, &w.name, generation, w.runtime, Timestamp::now());
            let api = cluster::workloads(client, &w.namespace);
            let (tx, name, limiter) = (tx.clone(), w.name.clone(), limiter.clone());
            tasks.spawn(async move {
                let result = cluster::retry(|| async {
                    limiter.acquire().await;
                    cluster::apply_status(&api, &name, &body).await
                })
                .await;
                drop(permit);
                let _ = tx.send(Msg::Finished { index, epoch, result });
            });
        }
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done
                && e.is_panic()
            {
                bail!("a harness task panicked: {e}");
            }
        }
        progress.show(&tracker, created, now_ms);

        // Sleep until something is due, or a message comes. While every
        // permit of a kind is taken, what is due of that kind waits for a
        // task's message (which frees a permit), not for a timer already
        // past.
        let mut wake = deadline.min(now + progress.period());
        if !creates_blocked {
            if let Some(w) = plan.workloads.get(next) {
                wake = wake.min(instant_at(t0, w.arrival));
            }
            if let Some(Reverse((at, _))) = create_retries.peek() {
                wake = wake.min(instant_at(t0, *at));
            }
        }
        if !finishes_blocked && let Some(Reverse((at, _, _))) = timers.peek() {
            wake = wake.min(instant_at(t0, *at));
        }
        if stall_rule.is_some() {
            wake = wake.min(next_sample);
        }
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => continue,
        };
        match msg {
            None => bail!("the Workload watch stopped"),
            Some(Msg::Watch(_, WatchMsg::Init)) => {
                // The watch lists again (it lost its place): what follows
                // until InitDone is one snapshot.
                inits += 1;
                relist = Some(Vec::new());
            }
            Some(Msg::Watch(_, WatchMsg::InitDone)) => {
                if let Some(list) = relist.take() {
                    for f in tracker.observe_list(list) {
                        timers.push(Reverse((f.at, f.index, f.epoch)));
                    }
                }
            }
            Some(Msg::Watch(_, WatchMsg::Error(e))) => watch_warnings.warn(&format!("Workload watch: {e}")),
            Some(Msg::Watch(at, WatchMsg::Object(key, obs))) => match (tracker.index_of(&key), obs) {
                (Some(i), Ok(obs)) => {
                    let at = ms_since(t0, at);
                    match relist.as_mut() {
                        Some(list) => list.push((i, at, obs)),
                        None => {
                            if let Some(f) = tracker.observe(i, at, obs) {
                                timers.push(Reverse((f.at, f.index, f.epoch)));
                            }
                        }
                    }
                }
                (Some(_), Err(e)) => object_warnings.warn(&format!("Workload {key}: {e}")),
                (None, _) => {}
            },
            Some(Msg::Created { index, at, result }) => match result {
                Ok(()) => {
                    created += 1;
                    tracker.created(index, ms_since(t0, at));
                }
                Err(e) => {
                    let key = plan.workloads[index].key();
                    if !e.transient() {
                        bail!("creating Workload {key}: {e}");
                    }
                    // The API server is overloaded or away: the run goes
                    // on, and this creation is tried again (late, which
                    // creationLag shows).
                    extras.create_write_errors += 1;
                    create_warnings.warn(&format!("creating Workload {key}: {e}; trying again"));
                    create_retries.push(Reverse((ms_since(t0, Instant::now()) + RETRY_MS, index)));
                }
            },
            Some(Msg::Finished { index, epoch, result }) => {
                if let Err(e) = result {
                    extras.finish_write_errors += 1;
                    let key = plan.workloads[index].key();
                    if !e.transient() {
                        bail!("marking Workload {key} Finished: {e}");
                    }
                    finish_warnings.warn(&format!("marking Workload {key} Finished: {e}; trying again"));
                    timers.push(Reverse((ms_since(t0, Instant::now()) + RETRY_MS, index, epoch)));
                }
            }
        }
    };
    progress.clear();
    extras.watch_restarts = inits.saturating_sub(1);
    if let Some(s) = stalled {
        extras.stalled = Some(stall_report(client, plan, opts, s).await);
    }

    if let (Some(url), Some(before)) = (&opts.metrics, &before) {
        match scrape::fetch(url).await {
            Ok(text) => match scrape::writes_delta(before, &scrape::WriteSample::parse(&text)) {
                Ok(w) => extras.writes = Some(w),
                Err(e) => eprintln!("warning: controller writes not reported: {e}"),
            },
            Err(e) => eprintln!("warning: controller writes not reported: --controller-metrics: {e}"),
        }
    }
    if let Some(pid) = opts.pid {
        let at_end = scrape::read_proc_status(pid).ok();
        extras.rss = scrape::peak_rss(at_end, max_rss.load(Ordering::Relaxed));
    }
    tasks.abort_all();
    Ok(report::build(plan, &tracker.close(end), extras))
}

/// The report of a stall: the run's Workloads listed once, the waiting
/// ones' reasons grouped. A list that fails leaves the reasons empty, with
/// a warning.
async fn stall_report(client: &Client, plan: &Plan, opts: &RunOptions, s: stall::Stall) -> StallReport {
    if !opts.quiet {
        eprintln!(
            "stalled: nothing admitted or finished for {} while {} workloads waited and none ran; reading why they wait",
            format_duration(opts.stall_window.as_millis() as Ms),
            s.pending
        );
    }
    let reasons = match cluster::run_workloads(client, &plan.run_id).await {
        Ok((workloads, unreadable)) => {
            if unreadable > 0 {
                eprintln!("warning: {unreadable} of the run's Workloads could not be read; their reasons are left out");
            }
            stall::pending_reasons(&workloads)
        }
        Err(e) => {
            eprintln!("warning: the reasons of the waiting workloads are not reported: {e:#}");
            Vec::new()
        }
    };
    StallReport {
        window_ms: opts.stall_window.as_millis() as Ms,
        since_ms: s.since,
        pending: s.pending,
        reasons,
    }
}

/// How long after an interruption the cleanup looks again: a write that
/// was in flight when the run was stopped may still land after the first
/// pass listed what to delete.
const LATE_WRITES: Duration = Duration::from_secs(2);

/// Deletes what run `run_id` created (twice, [`LATE_WRITES`] apart, after
/// an interruption or a failure); a second signal stops the cleanup and
/// says how to finish it.
pub async fn cleanup_or_exit(client: &Client, run_id: &str, interrupted: bool) {
    eprintln!("deleting what run {run_id} created ({RUN_LABEL}={run_id})");
    let work = async {
        let mut total = cluster::Deleted::default();
        let passes = if interrupted { 2 } else { 1 };
        for pass in 0..passes {
            if pass > 0 {
                tokio::time::sleep(LATE_WRITES).await;
            }
            let d = cluster::delete_run(client, Some(run_id)).await?;
            total.namespaces += d.namespaces;
            total.cluster_queues += d.cluster_queues;
            total.flavors += d.flavors;
        }
        anyhow::Ok(total)
    };
    tokio::select! {
        r = work => match r {
            Ok(d) => eprintln!(
                "deleted {} namespace(s), {} cluster queue(s), {} resource flavor(s)",
                d.namespaces, d.cluster_queues, d.flavors
            ),
            Err(e) => eprintln!("warning: {e:#}"),
        },
        stop = super::stop_signal() => eprintln!(
            "{} again: objects may be left; `sluice bench cleanup --run-id {run_id}` deletes them",
            stop.describe()
        ),
    }
}

/// `sluice bench run`.
pub async fn command(args: RunArgs) -> Result<ExitCode> {
    let RunArgs {
        scenario,
        scale,
        timeout,
        controller_metrics,
        controller_pid,
        with_floor,
        floor_count,
        floor_concurrency,
        limits,
        concurrency,
        harness_qps,
        harness_burst,
        settle,
        stall_window,
        output: OutputArgs {
            run_id,
            keep,
            json,
            quiet,
        },
    } = args;
    if concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if with_floor && (floor_count == 0 || floor_concurrency == 0) {
        bail!("--floor-count and --floor-concurrency must be at least 1");
    }
    let metrics = controller_metrics
        .as_deref()
        .map(scrape::parse_url)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    if let Some(pid) = controller_pid {
        scrape::read_proc_status(pid).map_err(|e| anyhow!(e))?;
    }
    let run_id = match run_id {
        Some(id) => {
            plan::check_run_id(&id).map_err(|e| anyhow!("--run-id: {e}"))?;
            id
        }
        None => plan::new_run_id(),
    };
    let source = plan::scenario_text(&scenario).map_err(|e| anyhow!(e))?;
    let (loaded, manifests) = match load_with(&source.file, &source.text, &LoadOptions { scale }) {
        Ok(v) => v,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!("{} error(s) in {}; nothing was run.", errors.len(), source.file);
            return Ok(ExitCode::from(2));
        }
    };
    let plan = match plan::build(&run_id, &loaded, &manifests, scale) {
        Ok(plan) => plan,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!(
                "{} error(s): {} cannot be run as {run_id}; nothing was run.",
                errors.len(),
                source.file
            );
            return Ok(ExitCode::from(2));
        }
    };
    if plan.workloads.is_empty() {
        bail!("{}: the scenario has no workloads", source.file);
    }
    let opts = RunOptions {
        timeout,
        concurrency: concurrency as usize,
        settle,
        metrics,
        pid: controller_pid,
        floor: with_floor.then_some(FloorOptions {
            count: floor_count,
            concurrency: floor_concurrency,
            kube_qps: limits.kube_qps,
            kube_burst: limits.kube_burst,
            quiet,
        }),
        harness_qps,
        harness_burst,
        stall_window,
        quiet,
    };
    if !quiet {
        eprintln!(
            "{}: {} workloads at scale {scale}, timeout {}",
            plan.scenario,
            plan.workloads.len(),
            format_duration(timeout.as_millis() as Ms)
        );
    }
    // Before anything is written: nothing to clean up if these fail.
    if let Some(url) = &opts.metrics {
        scrape::fetch(url)
            .await
            .map_err(|e| anyhow!("--controller-metrics http://{}:{}{}: {e}", url.host, url.port, url.path))?;
    }
    let client = super::client().await?;
    cluster::ensure_fresh(&client, &run_id).await?;
    match cluster::terminating_namespaces(&client).await {
        Ok(names) if !names.is_empty() => eprintln!(
            "warning: {} namespace(s) of earlier bench runs are still being deleted ({}{}): deleting their Workloads loads the API server and the controller during this run; for figures to compare, wait until they are gone",
            names.len(),
            names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if names.len() > 3 { ", …" } else { "" }
        ),
        Ok(_) => {}
        Err(e) => eprintln!("warning: {e:#}"),
    }
    let outcome = tokio::select! {
        r = execute(&client, &plan, &opts) => Ok(r),
        stop = super::stop_signal() => Err(stop),
    };
    if let Err(stop) = outcome {
        eprintln!("\n{}", stop.describe());
    }
    if keep {
        eprintln!("kept run {run_id}: `sluice bench cleanup --run-id {run_id}` deletes it");
    } else {
        // Stopped or failed midway, writes may have been in flight.
        cleanup_or_exit(&client, &run_id, !matches!(outcome, Ok(Ok(_)))).await;
    }
    let result = match outcome {
        Ok(result) => result,
        Err(stop) => return Ok(stop.exit_code()),
    };
    let report = result?;
    let text = if json {
        serde_json::to_string_pretty(&report).context("serializing the report")? + "\n"
    } else {
        report::render(&report)
    };
    print(&text)?;
    Ok(if report.complete && report.quota_violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INCOMPLETE)
    })
}

#[cfg(test)]
mod tests;
