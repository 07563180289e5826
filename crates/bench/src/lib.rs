//! # sluice-bench
//!
//! `sluice bench`: Kueue's scheduler performance scenarios against a real API
//! server and a running `sluice controller`, and the write floor beside them.
//!
//! ```text
//!  --scenario (built-in or file) ──plan::build──▶ Plan: objects and Workloads named with the run id,
//!                                                  arrival and run times, quotas            [pure]
//!       │
//!  run::execute ── apply flavors, queues, namespaces ──▶ API server ◀──── sluice controller
//!       │          create Workloads on schedule ────────▶     │              (admits them)
//!       │          watch them (label sluice.dev/bench-run) ◀──┘
//!       │          mark each one Finished after its run time ─▶
//!       ▼
//!  track::Tracker: the admitted set as observed — times, usage integrals,
//!                  quota checks at every change                                             [pure]
//!       ▼
//!  report::build ──▶ RunReport ──▶ table (terminal) or --json
//!
//!  floor::measure: N inactive Workloads, status patches (server-side apply)
//!                  under the controller's client rate limit ──▶ patches/s, p50/p95
//!
//!  compare: run::execute (or a saved report) and sluice_simulate's sim::run on
//!           the same scenario and limit ──▶ figures side by side, ratios   [pure]
//! ```
//!
//! Figures are computed from recorded observations only (`track`, `report`),
//! so that they are unit-tested without a cluster. The user-facing reference
//! is `docs/benchmarks.md`.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod compare;
pub mod floor;
pub mod plan;
pub mod report;
pub mod run;
pub mod scrape;
pub mod stall;
pub mod track;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use sluice_api::duration::parse_duration;

/// Arguments of `sluice bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The `sluice bench` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Run a scenario against the cluster's controller and report Kueue's figures.
    Run(Box<RunArgs>),
    /// Measure how fast the API server takes Workload status patches under the
    /// controller's client rate limit (the floor for admissions).
    Floor(FloorArgs),
    /// Run a scenario on the real controller and in the simulator, at the
    /// same client rate limit, and put their figures side by side.
    Compare(Box<CompareArgs>),
    /// Delete what bench runs left behind, by their label.
    Cleanup(CleanupArgs),
}

/// The client rate limit of the controller being compared against.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Sustained writes per second, as the controller's --kube-qps (0: no limit).
    #[arg(long, value_name = "N", default_value_t = sluice_controller::limit::DEFAULT_KUBE_QPS)]
    pub kube_qps: f64,
    /// Writes allowed in a burst above --kube-qps, as the controller's --kube-burst.
    #[arg(long, value_name = "N", default_value_t = sluice_controller::limit::DEFAULT_KUBE_BURST)]
    pub kube_burst: u32,
}

/// Arguments of `sluice bench run`.
#[derive(Debug, clap::Args)]
#[command(after_help = sluice_api::duration::FLAGS_HELP)]
pub struct RunArgs {
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Also write the report as JSON to this file (what `bench compare
    /// --real-report` reads), with or without --json.
    #[arg(long, value_name = "FILE")]
    pub json_file: Option<PathBuf>,
}

/// What to run and how: the flags `sluice bench run` and `bench compare`
/// share.
#[derive(Debug, clap::Args)]
pub struct RunFlags {
    /// A built-in scenario (kueue-baseline, kueue-large-scale, deep-queue) or a scenario
    /// file in `sluice simulate`'s format.
    #[arg(long, value_name = "NAME|FILE")]
    pub scenario: String,
    /// Multiply every generator's workload count by this (rounded, at least 1);
    /// queues, quotas, intervals and run times are kept.
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,
    /// Stop waiting after this long (e.g. 30m, 90s), and report what was seen.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The controller's Prometheus endpoint (http://HOST:PORT/metrics), scraped
    /// before and after to count its API writes.
    #[arg(long, value_name = "URL")]
    pub controller_metrics: Option<String>,
    /// The controller's process id on this machine, for its peak RSS and
    /// its CPU time over the run (/proc).
    #[arg(long, value_name = "PID")]
    pub controller_pid: Option<u32>,
    /// The API server's process id on this machine, for its CPU time over
    /// the run (/proc).
    #[arg(long, value_name = "PID")]
    pub apiserver_pid: Option<u32>,
    /// etcd's process id on this machine, for its CPU time over the run (/proc).
    #[arg(long, value_name = "PID")]
    pub etcd_pid: Option<u32>,
    /// Measure the write floor first, in the same run, and report admissions/s
    /// as a ratio of it.
    #[arg(long)]
    pub with_floor: bool,
    /// Workloads patched by the floor measurement of --with-floor.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub floor_count: u32,
    /// Patches in flight at once in the floor measurement (1: like the
    /// controller's writer).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub floor_concurrency: u32,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The harness's own API calls in flight at once (Workload creations, and
    /// Finished marks, each).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub concurrency: u32,
    /// Client-side limit on the harness's own writes (creations and Finished
    /// marks), per second (0: no limit). Kueue's runner runs with 1000.
    #[arg(long, value_name = "N", default_value_t = HARNESS_QPS)]
    pub harness_qps: f64,
    /// Harness writes allowed in a burst above --harness-qps (Kueue's runner: 2000).
    #[arg(long, value_name = "N", default_value_t = HARNESS_BURST)]
    pub harness_burst: u32,
    /// Pause between creating the queues and the first Workload, so that the
    /// controller has seen every queue.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Stop when no workload was admitted or finished for this long while
    /// some wait and none runs, and report why they wait (0: never).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub stall_window: Duration,
}

/// Arguments of `sluice bench floor`.
#[derive(Debug, clap::Args)]
pub struct FloorArgs {
    /// Workloads to create and then patch once each.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub count: u32,
    /// Patches in flight at once (1: like the controller's writer, which has
    /// one write in flight at a time).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: u32,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Run id, cleanup and output flags of `sluice bench run` and `floor`.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Names and label value of this run (default: sb-<random hex>).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Leave what the run created in the cluster (delete it later with
    /// `sluice bench cleanup`).
    #[arg(long)]
    pub keep: bool,
    /// Print the figures as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// No progress line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Arguments of `sluice bench compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = sluice_api::duration::FLAGS_HELP)]
pub struct CompareArgs {
    /// The scenario, scale and limits of the real run (--scenario, --scale,
    /// --kube-qps and --kube-burst are the simulator's too).
    #[command(flatten)]
    pub run: RunFlags,
    /// Fair sharing as the controller runs it (its --fair-sharing, `on` by
    /// default there too); the simulator runs the scenario the same way,
    /// whatever its Trace says.
    #[arg(long, value_enum, value_name = "on|off", default_value_t = Switch::On)]
    pub fair_sharing: Switch,
    /// The simulator's time from a workload's run ending to the controller
    /// seeing it finished: the harness's `Finished` mark and the two
    /// watches around it (50ms matched this machine's runs).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_duration)]
    pub finish_lag: Duration,
    /// The simulator's time per API write once it has its token (the
    /// controller's writer makes them one at a time).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub api_latency: Duration,
    /// Take the real side from this report of `bench run --json` (or
    /// --json-file) instead of running the scenario.
    #[arg(long, value_name = "FILE")]
    pub real_report: Option<PathBuf>,
    /// Also write the comparison (both sides' figures and the ratios) as
    /// JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Names and label value of the real run (default: sb-<random hex>).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Leave what the real run created in the cluster.
    #[arg(long)]
    pub keep: bool,
    /// No progress line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `on` / `off`, as the controller's switches are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// Arguments of `sluice bench cleanup`.
#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// Only this run's objects (default: every bench run's).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
}

fn parse_scale(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("must be a positive number, got {s}"));
    }
    Ok(v)
}

/// Exit code of a run whose figures were printed but that did not finish
/// every workload (timed out or stalled), or saw a quota violation.
pub const EXIT_INCOMPLETE: u8 = 3;

/// `--harness-qps` default: the `--qps` Kueue's Makefile gives its
/// scheduler performance runner.
pub const HARNESS_QPS: f64 = 1000.0;
/// `--harness-burst` default: Kueue's runner's `--burst`.
pub const HARNESS_BURST: u32 = 2000;

/// How a run was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, `timeout`, a Pod or CI job being stopped).
    Terminate,
}

impl Stop {
    /// The shell's convention: 128 + the signal number.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stop::Interrupt => "interrupted",
            Stop::Terminate => "terminated",
        }
    }
}

/// Waits for SIGINT or SIGTERM. Both stop a run the same way: what it
/// created is deleted before the process exits. (Without a handler,
/// SIGTERM would end the process at once and leave everything behind.)
pub async fn stop_signal() -> Stop {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: never fires.
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = interrupt => Stop::Interrupt,
                _ = term.recv() => Stop::Terminate,
            };
        }
    }
    interrupt.await;
    Stop::Interrupt
}

/// Runs `sluice bench`.
pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        match args.command {
            BenchCommand::Run(a) => run::command(*a).await,
            BenchCommand::Floor(a) => floor::command(a).await,
            BenchCommand::Compare(a) => compare::command(*a).await,
            BenchCommand::Cleanup(a) => cleanup_command(a).await,
        }
    })
}

/// The API client, from the kubeconfig in the usual places (`KUBECONFIG`,
/// `~/.kube/config`, or the pod's service account).
pub async fn client() -> Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("connecting to the API server (kubeconfig from KUBECONFIG, ~/.kube/config or in-cluster)")
}

async fn cleanup_command(args: CleanupArgs) -> Result<ExitCode> {
    let CleanupArgs { run_id } = args;
    if let Some(id) = &run_id {
        plan::check_run_id(id).map_err(|e| anyhow::anyhow!("--run-id: {e}"))?;
    }
    let client = client().await?;
    let deleted = cluster::delete_run(&client, run_id.as_deref()).await?;
    let _ = writeln!(
        std::io::stderr(),
        "deleted {} namespace(s), {} cluster queue(s) and {} resource flavor(s) labelled {}",
        deleted.namespaces,
        deleted.cluster_queues,
        deleted.flavors,
        cluster::selector(run_id.as_deref()),
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[tokio::test]
    async fn sigterm_stops_a_run_like_ctrl_c() {
        // Without a handler SIGTERM ends the process at once, before the
        // cleanup. Once stop_signal has been polled, it is a Stop instead.
        let mut stop = Box::pin(stop_signal());
        assert!(futures::poll!(&mut stop).is_pending());
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let got = tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("the signal is seen");
        assert_eq!(got, Stop::Terminate);
        assert_eq!(
            (got.describe(), Stop::Interrupt.describe()),
            ("terminated", "interrupted")
        );
    }

    #[test]
    fn scale_must_be_positive_and_finite() {
        assert_eq!(parse_scale("0.1"), Ok(0.1));
        assert_eq!(parse_scale("2"), Ok(2.0));
        assert!(parse_scale("0").unwrap_err().contains("positive"));
        assert!(parse_scale("-1").unwrap_err().contains("positive"));
        assert!(parse_scale("inf").unwrap_err().contains("positive"));
        assert!(parse_scale("a tenth").unwrap_err().contains("not a number"));
    }
}
