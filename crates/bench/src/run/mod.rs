//! `sluice bench run`: drives a running controller through a scenario.
//!
//! ```text
//!  [--with-floor] floor::measure
//!  apply namespaces, flavors, cluster queues, local queues ── wait until the
//!  controller marks one queue Active ── --settle ── start the Workload watch
//!  (label sluice.dev/bench-run=<run>), wait for its first list ── scrape
//!  --controller-metrics, read the CPU time of --controller-pid,
//!  --apiserver-pid, --etcd-pid ── t0
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
//!  read the CPU times again (the run's CPU seconds: the differences)
//!  stalled: list the run's Workloads, group their pending reasons
//!  scrape --controller-metrics again, read VmHWM ── report
//! ```
//!
//! Every object carries the run label; the caller deletes them all at the
//! end, on error and on Ctrl-C ([`cleanup_or_exit`]).
//!
//! | file          | what                                                        |
//! |---------------|-------------------------------------------------------------|
//! | `mod.rs`      | the steps above ([`execute`]) and the loop (`drive`)        |
//! | `events.rs`   | what the loop hears, and the watch's state                  |
//! | `writes.rs`   | creations and Finished marks: permits, retries, their tasks |
//! | `progress.rs` | the progress line and capped warnings                       |

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::cluster;
use super::floor::{self, FloorOptions};
use super::plan::{self, Plan, RUN_LABEL};
use super::report::{self, Extras, FloorReport, RunReport, StallReport};
use super::scrape::{self, HttpUrl, WriteCounts};
use super::stall::{self, StallRule, Verdict};
use super::track::{Ms, Tracker};
use super::{EXIT_INCOMPLETE, OutputArgs, RunArgs, RunFlags, print};
use sluice_simulate::scenario::{LoadOptions, load_with};
use sluice_simulate::sim::Scenario;
use sluice_simulate::units::format_duration;

mod events;
mod msg;
mod progress;
mod writes;

use events::{WatchState, watch};
use msg::Msg;
use progress::Progress;
pub use writes::finish_body;
use writes::{Creations, Finishes, Writer};

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
    /// The controller's process (`--controller-pid`): its peak RSS and CPU time.
    pub pid: Option<u32>,
    /// The API server's and etcd's processes (`--apiserver-pid`,
    /// `--etcd-pid`): their CPU time.
    pub apiserver_pid: Option<u32>,
    pub etcd_pid: Option<u32>,
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

impl RunOptions {
    /// The processes whose CPU time the run measures.
    pub fn cpu_pids(&self) -> scrape::CpuPids {
        scrape::CpuPids {
            controller: self.pid,
            apiserver: self.apiserver_pid,
            etcd: self.etcd_pid,
        }
    }
}

/// The run's clock: its start `t0`, in whose milliseconds the tracker and
/// the timers count, and its `--timeout` deadline.
#[derive(Debug, Clone, Copy)]
struct Clock {
    t0: Instant,
    deadline: Instant,
}

impl Clock {
    fn start(timeout: Duration) -> Self {
        let t0 = Instant::now();
        Self {
            t0,
            deadline: t0 + timeout,
        }
    }

    fn ms(&self, at: Instant) -> Ms {
        at.saturating_duration_since(self.t0).as_millis() as Ms
    }

    fn instant(&self, ms: Ms) -> Instant {
        self.t0 + Duration::from_millis(ms.max(0) as u64)
    }
}

/// Runs the plan against the cluster (objects are left for the caller to
/// delete) and reports. Call [`cluster::ensure_fresh`] first.
pub async fn execute(client: &Client, plan: &Plan, opts: &RunOptions) -> Result<RunReport> {
    let floor = measure_floor(client, plan, opts).await?;
    set_up(client, plan, opts).await?;
    let mut tasks: JoinSet<()> = JoinSet::new();
    let max_rss = opts.pid.map(|pid| sample_rss(&mut tasks, pid));
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    tasks.spawn(watch(client.clone(), plan.run_id.clone(), tx.clone()));
    let mut watch = WatchState::first_list(&mut rx).await?;
    let before = match &opts.metrics {
        Some(url) => Some(scrape::WriteSample::parse(&fetch_metrics(url).await?)),
        None => None,
    };

    let cpu_pids = opts.cpu_pids();
    let cpu_before = cpu_pids.read();

    let mut tracker = Tracker::new(plan.quotas.clone(), plan.workloads.iter().map(|w| (w.key(), w.runtime)));
    let writer = Writer::new(client, plan, opts, tx);
    let ended = drive(&writer, &mut rx, &mut tasks, &mut tracker, &mut watch, opts).await?;
    let cpu = scrape::cpu_seconds(cpu_before, cpu_pids.read());

    let mut extras = Extras {
        floor,
        cpu,
        timed_out: matches!(ended.how, End::TimedOut),
        watch_restarts: watch.restarts(),
        create_write_errors: ended.create_write_errors,
        finish_write_errors: ended.finish_write_errors,
        ..Extras::default()
    };
    if let End::Stalled(s) = ended.how {
        extras.stalled = Some(stall_report(client, plan, opts, s).await);
    }
    if let (Some(url), Some(before)) = (&opts.metrics, &before) {
        extras.writes = writes_since(url, before).await;
    }
    if let (Some(pid), Some(max_rss)) = (opts.pid, max_rss) {
        let at_end = scrape::read_proc_status(pid).ok();
        extras.rss = scrape::peak_rss(at_end, max_rss.load(Ordering::Relaxed));
    }
    tasks.abort_all();
    Ok(report::build(plan, &tracker.close(ended.at), extras))
}

/// The write floor before the run, when `--with-floor` asks for it.
async fn measure_floor(client: &Client, plan: &Plan, opts: &RunOptions) -> Result<Option<FloorReport>> {
    let Some(f) = &opts.floor else {
        return Ok(None);
    };
    let floor = floor::measure(client, &plan.run_id, f, false)
        .await
        .context("measuring the write floor (--with-floor)")?;
    Ok(Some(floor))
}

/// Applies the run's namespaces, flavors and queues, waits until the
/// controller sees them, and lets it settle for `--settle`.
async fn set_up(client: &Client, plan: &Plan, opts: &RunOptions) -> Result<()> {
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
    Ok(())
}

/// Samples the controller's RSS every [`RSS_PERIOD`] in a task; the
/// highest seen so far is in the returned cell.
fn sample_rss(tasks: &mut JoinSet<()>, pid: u32) -> Arc<AtomicU64> {
    let max_rss = Arc::new(AtomicU64::new(0));
    let max = max_rss.clone();
    tasks.spawn(async move {
        loop {
            if let Ok(m) = scrape::read_proc_status(pid) {
                max.fetch_max(m.vm_rss.unwrap_or(0), Ordering::Relaxed);
            }
            tokio::time::sleep(RSS_PERIOD).await;
        }
    });
    max_rss
}

/// The controller's `/metrics` text (`--controller-metrics`).
async fn fetch_metrics(url: &HttpUrl) -> Result<String> {
    scrape::fetch(url)
        .await
        .map_err(|e| anyhow!("--controller-metrics http://{}:{}{}: {e}", url.host, url.port, url.path))
}

/// The controller's writes since `before`; none, with a warning, if
/// `/metrics` cannot be read or does not add up.
async fn writes_since(url: &HttpUrl, before: &scrape::WriteSample) -> Option<WriteCounts> {
    match scrape::fetch(url).await {
        Ok(text) => match scrape::writes_delta(before, &scrape::WriteSample::parse(&text)) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("warning: controller writes not reported: {e}");
                None
            }
        },
        Err(e) => {
            eprintln!("warning: controller writes not reported: --controller-metrics: {e}");
            None
        }
    }
}

/// Why the run loop stopped.
enum End {
    /// Every workload was seen Finished.
    Done,
    /// `--timeout` came first.
    TimedOut,
    Stalled(stall::Stall),
}

/// How the run loop ended: why, at which ms of the run, and the harness's
/// failed writes.
struct Ended {
    at: Ms,
    how: End,
    create_write_errors: u64,
    finish_write_errors: u64,
}

/// The run loop (the module's diagram): until the run ends, start the
/// creations and Finished marks due, then sleep until the next is due or
/// a message comes, and take the message in.
async fn drive(
    writer: &Writer<'_>,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    tasks: &mut JoinSet<()>,
    tracker: &mut Tracker,
    watch: &mut WatchState,
    opts: &RunOptions,
) -> Result<Ended> {
    let mut creations = Creations::new(opts.concurrency);
    let mut finishes = Finishes::new(opts.concurrency);
    let mut progress = Progress::new(opts.quiet);
    let clock = Clock::start(opts.timeout);
    let mut stall = StallCheck::new(opts.stall_window, clock.t0);
    let (at, how) = loop {
        let now = Instant::now();
        let now_ms = clock.ms(now);
        if let Some(end) = ended(tracker, &clock, now, watch, stall.as_mut()) {
            break end;
        }
        let creates_blocked = creations.start_due(writer, tasks, now_ms);
        // None while the watch lists again (whether a workload still runs
        // in the admission its timer is for is known once the list is in).
        let finishes_blocked = watch.relisting() || finishes.start_due(writer, tracker, tasks, now_ms);
        reap(tasks)?;
        progress.show(tracker, creations.created, now_ms);

        // Sleep until something is due, or a message comes. While every
        // permit of a kind is taken, what is due of that kind waits for a
        // task's message (which frees a permit), not for a timer already
        // past.
        let creation_due = (!creates_blocked).then(|| creations.next_due(writer.plan)).flatten();
        let finish_due = (!finishes_blocked).then(|| finishes.next_due()).flatten();
        let due = creation_due.into_iter().chain(finish_due).map(|at| clock.instant(at));
        let sample = stall.as_ref().map(|s| s.next_sample);
        let wake = due
            .chain(sample)
            .fold(clock.deadline.min(now + progress.period()), Instant::min);
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => continue,
        };
        match msg {
            None => bail!("the Workload watch stopped"),
            Some(Msg::Watch(at, msg)) => watch.heard(msg, clock.ms(at), tracker, &mut finishes),
            Some(Msg::Created { index, at, result }) => {
                let times = (clock.ms(at), clock.ms(Instant::now()));
                creations.answered(tracker, writer.plan, index, times, result)?;
            }
            Some(Msg::Finished { index, epoch, result }) => {
                finishes.answered(writer.plan, index, epoch, clock.ms(Instant::now()), result)?;
            }
        }
    };
    progress.clear();
    Ok(Ended {
        at,
        how,
        create_write_errors: creations.write_errors,
        finish_write_errors: finishes.write_errors,
    })
}

/// Whether the run ends at `now`, and at which ms: every workload seen
/// Finished (at the last finish), the deadline, or a stall.
fn ended(
    tracker: &Tracker,
    clock: &Clock,
    now: Instant,
    watch: &WatchState,
    stall: Option<&mut StallCheck>,
) -> Option<(Ms, End)> {
    let now_ms = clock.ms(now);
    if tracker.done() {
        let last = tracker.records().iter().filter_map(|r| r.finished_at).max();
        return Some((last.unwrap_or(now_ms), End::Done));
    }
    if now >= clock.deadline {
        return Some((now_ms, End::TimedOut));
    }
    // Not while the watch lists again: the tracker is behind until the
    // list is in.
    let s = stall.filter(|_| !watch.relisting())?.sample(tracker, now, now_ms)?;
    Some((now_ms, End::Stalled(s)))
}

/// The stall rule, and when it looks at the run next.
struct StallCheck {
    rule: StallRule,
    next_sample: Instant,
}

impl StallCheck {
    /// None when `window` is zero: the run never stalls.
    fn new(window: Duration, t0: Instant) -> Option<Self> {
        (!window.is_zero()).then(|| Self {
            rule: StallRule::new(window.as_millis() as Ms),
            next_sample: t0,
        })
    }

    /// A sample of the run, when one is due ([`STALL_SAMPLE`] apart): the
    /// stall it finds.
    fn sample(&mut self, tracker: &Tracker, now: Instant, now_ms: Ms) -> Option<stall::Stall> {
        if now < self.next_sample {
            return None;
        }
        self.next_sample = now + STALL_SAMPLE;
        match self.rule.sample(tracker.sample(now_ms)) {
            Verdict::Stalled(s) => Some(s),
            Verdict::Moving => None,
        }
    }
}

/// Takes in the harness's finished tasks: a panic ends the run.
fn reap(tasks: &mut JoinSet<()>) -> Result<()> {
    while let Some(done) = tasks.try_join_next() {
        if let Err(e) = done
            && e.is_panic()
        {
            bail!("a harness task panicked: {e}");
        }
    }
    Ok(())
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
    let RunArgs { run, output, json_file } = args;
    let json = output.json;
    // An unwritable --json-file fails now, not after the whole run.
    let saved = json_file
        .map(|p| create_file(&p, "--json-file").map(|f| (p, f)))
        .transpose()?;
    let asked = Asked::new(run, output)?;
    let (plan, _) = match load_plan(&asked)? {
        Ok(loaded) => loaded,
        Err(code) => return Ok(code),
    };
    let report = match run_plan(&asked, &plan).await? {
        Ok(report) => report,
        Err(code) => return Ok(code),
    };
    if let Some((path, file)) = saved {
        write_json(&path, file, &report)?;
    }
    print_report(&report, json)
}

/// Creates (truncates) an output file named by `flag`.
pub(crate) fn create_file(path: &Path, flag: &str) -> Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot write {flag} {}", path.display()))
}

/// Writes `value` as pretty JSON to `file`, created from `path` earlier.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, mut file: std::fs::File, value: &T) -> Result<()> {
    use std::io::Write as _;
    let text = serde_json::to_string_pretty(value).context("serializing to JSON")? + "\n";
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Runs the plan on the cluster as asked, and deletes what it created
/// (unless --keep): its report, or the exit code of a run stopped by a
/// signal.
pub(crate) async fn run_plan(asked: &Asked, plan: &Plan) -> Result<Result<RunReport, ExitCode>> {
    let (opts, run_id) = (&asked.opts, &asked.run_id);
    if !opts.quiet {
        eprintln!(
            "{}: {} workloads at scale {}, timeout {}",
            plan.scenario,
            plan.workloads.len(),
            asked.scale,
            format_duration(opts.timeout.as_millis() as Ms)
        );
    }
    // Before anything is written: nothing to clean up if these fail.
    if let Some(url) = &opts.metrics {
        fetch_metrics(url).await?;
    }
    let client = super::client().await?;
    cluster::ensure_fresh(&client, run_id).await?;
    warn_of_terminating_namespaces(&client).await;
    let outcome = tokio::select! {
        r = execute(&client, plan, opts) => Ok(r),
        stop = super::stop_signal() => Err(stop),
    };
    if let Err(stop) = &outcome {
        eprintln!("\n{}", stop.describe());
    }
    if asked.keep {
        eprintln!("kept run {run_id}: `sluice bench cleanup --run-id {run_id}` deletes it");
    } else {
        // Stopped or failed midway, writes may have been in flight.
        cleanup_or_exit(&client, run_id, !matches!(outcome, Ok(Ok(_)))).await;
    }
    match outcome {
        Ok(result) => Ok(Ok(result?)),
        Err(stop) => Ok(Err(stop.exit_code())),
    }
}

/// What `sluice bench run` (or `bench compare`'s real side) was asked,
/// its flags checked.
pub(crate) struct Asked {
    pub(crate) scenario: String,
    pub(crate) scale: f64,
    pub(crate) run_id: String,
    pub(crate) keep: bool,
    pub(crate) opts: RunOptions,
}

impl Asked {
    pub(crate) fn new(flags: RunFlags, output: OutputArgs) -> Result<Self> {
        let RunFlags {
            scenario,
            scale,
            timeout,
            controller_metrics,
            controller_pid,
            apiserver_pid,
            etcd_pid,
            with_floor,
            floor_count,
            floor_concurrency,
            limits,
            concurrency,
            harness_qps,
            harness_burst,
            settle,
            stall_window,
        } = flags;
        let OutputArgs {
            run_id,
            keep,
            json: _,
            quiet,
        } = output;
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
        check_pids(controller_pid, apiserver_pid, etcd_pid)?;
        let run_id = run_id_or_new(run_id)?;
        let floor = with_floor.then_some(FloorOptions {
            count: floor_count,
            concurrency: floor_concurrency,
            kube_qps: limits.kube_qps,
            kube_burst: limits.kube_burst,
            quiet,
        });
        let opts = RunOptions {
            timeout,
            concurrency: concurrency as usize,
            settle,
            metrics,
            pid: controller_pid,
            apiserver_pid,
            etcd_pid,
            floor,
            harness_qps,
            harness_burst,
            stall_window,
            quiet,
        };
        Ok(Self {
            scenario,
            scale,
            run_id,
            keep,
            opts,
        })
    }
}

/// The processes whose /proc the run reads are there and readable: the
/// controller's memory and CPU, the API server's and etcd's CPU.
fn check_pids(controller: Option<u32>, apiserver: Option<u32>, etcd: Option<u32>) -> Result<()> {
    if let Some(pid) = controller {
        scrape::read_proc_status(pid).map_err(|e| anyhow!(e))?;
    }
    for (flag, pid) in [
        ("--controller-pid", controller),
        ("--apiserver-pid", apiserver),
        ("--etcd-pid", etcd),
    ] {
        if let Some(pid) = pid {
            scrape::read_proc_stat(pid).map_err(|e| anyhow!("{flag} {pid}: {e}"))?;
        }
    }
    Ok(())
}

/// `--run-id` checked, or a new one.
fn run_id_or_new(run_id: Option<String>) -> Result<String> {
    match run_id {
        Some(id) => {
            plan::check_run_id(&id).map_err(|e| anyhow!("--run-id: {e}"))?;
            Ok(id)
        }
        None => Ok(plan::new_run_id()),
    }
}

/// The plan of the scenario asked for, and the scenario as the simulator
/// takes it (the same workloads, scaled the same); its errors printed and
/// exit code 2 when it does not load or cannot be run as the run id.
pub(crate) fn load_plan(asked: &Asked) -> Result<Result<(Plan, Scenario), ExitCode>> {
    let source = plan::scenario_text(&asked.scenario).map_err(|e| anyhow!(e))?;
    let (loaded, manifests) = match load_with(&source.file, &source.text, &LoadOptions { scale: asked.scale }) {
        Ok(v) => v,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!("{} error(s) in {}; nothing was run.", errors.len(), source.file);
            return Ok(Err(ExitCode::from(2)));
        }
    };
    let plan = match plan::build(&asked.run_id, &loaded, &manifests, asked.scale) {
        Ok(plan) => plan,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!(
                "{} error(s): {} cannot be run as {}; nothing was run.",
                errors.len(),
                source.file,
                asked.run_id
            );
            return Ok(Err(ExitCode::from(2)));
        }
    };
    if plan.workloads.is_empty() {
        bail!("{}: the scenario has no workloads", source.file);
    }
    Ok(Ok((plan, loaded)))
}

/// Namespaces of earlier runs still being deleted load the API server and
/// the controller during this run: a warning names them.
async fn warn_of_terminating_namespaces(client: &Client) {
    match cluster::terminating_namespaces(client).await {
        Ok(names) if !names.is_empty() => eprintln!(
            "warning: {} namespace(s) of earlier bench runs are still being deleted ({}{}): deleting their Workloads loads the API server and the controller during this run; for figures to compare, wait until they are gone",
            names.len(),
            names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if names.len() > 3 { ", …" } else { "" }
        ),
        Ok(_) => {}
        Err(e) => eprintln!("warning: {e:#}"),
    }
}

/// Prints the report (`--json` or text); exit code 0 only if the run
/// completed without quota violations.
fn print_report(report: &RunReport, json: bool) -> Result<ExitCode> {
    let text = if json {
        serde_json::to_string_pretty(report).context("serializing the report")? + "\n"
    } else {
        report::render(report)
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
