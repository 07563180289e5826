//! `sluice simulate`: the command line of the simulator (`sluice-simulate`):
//! flags, the progress line, and where the report goes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use sluice_simulate::scenario::LoadOptions;
use sluice_simulate::{DEFAULT_EVICTION_DELAY, report, scenario, sim, units};

use crate::simulate_input;

/// Arguments of `sluice simulate`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = sluice_api::duration::TRACE_HELP)]
pub struct SimulateArgs {
    /// Scenario file: Sluice manifests (ResourceFlavor, ClusterQueue,
    /// Cohort, LocalQueue, WorkloadPriorityClass) plus one `Trace` document.
    #[arg(required_unless_present = "kueue")]
    pub scenario: Option<PathBuf>,
    /// Kueue's queues instead (kueue.x-k8s.io manifests, its
    /// Configuration), translated as `sluice import kueue` does (its notes
    /// on stderr); with --trace. A scenario file may hold Kueue documents
    /// too.
    #[arg(long, value_name = "FILE", requires = "trace", conflicts_with = "scenario")]
    pub kueue: Option<PathBuf>,
    /// The `Trace` document to replay on --kueue's queues (e.g. from
    /// `sluice trace record`).
    #[arg(long, value_name = "FILE", requires = "kueue")]
    pub trace: Option<PathBuf>,
    /// Print the figures as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// API writes per second (each admission and each eviction is one
    /// write), as the controller's `--kube-qps` (the same default); 0: no
    /// limit.
    #[arg(long, value_name = "N", default_value_t = sluice_controller::limit::DEFAULT_KUBE_QPS)]
    pub api_qps: f64,
    /// Writes that may go at once after an idle spell (token bucket size),
    /// as the controller's `--kube-burst`.
    #[arg(long, value_name = "N", default_value_t = sluice_controller::limit::DEFAULT_KUBE_BURST)]
    pub api_burst: u32,
    /// Time one API write takes once it has its token (e.g. 5ms); the
    /// controller's writer makes them one at a time, so this bounds the
    /// write rate without a limit.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "0")]
    pub api_latency: units::Millis,
    /// Time from a workload's run ending to the controller seeing it
    /// finished (its owner's `Finished` mark, then the watch); its quota is
    /// held meanwhile (e.g. 100ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "0")]
    pub finish_lag: units::Millis,
    /// Time for a preempted workload's pods to terminate before its quota
    /// is free (e.g. 30s, 2m, 0). Default: the Trace's `spec.evictionDelay`,
    /// else 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub eviction_delay: Option<units::Millis>,
    /// Time between idle-GPU checks of ClusterQueues with `idleReclaim`
    /// (at least 1s). Default: the Trace's `spec.idleInterval`, else 1m.
    #[arg(long, value_name = "DURATION", value_parser = parse_idle_interval_arg)]
    pub idle_interval: Option<units::Millis>,
    /// Idle-GPU evictions of one workload that requeue it; the next one
    /// deactivates it (as the controller's `--requeue-limit`; never
    /// unlimited here, so that a run ends).
    #[arg(long, value_name = "N", default_value_t = sluice_simulate::idle::DEFAULT_REQUEUE_LIMIT)]
    pub requeue_limit: u32,
    /// Estimate each workload's start at its submission, as the controller
    /// does, and report how close the estimates came (docs/simulate.md,
    /// "Start-time estimates"). Costs a forecast per arrival instant.
    #[arg(long)]
    pub forecast: bool,
    /// The run times workloads declare to the engine, which backfill
    /// trusts: `trace` (each job's `expectedRuntime`, none without it),
    /// `exact` (every workload its true run time) or an error such as
    /// `±50%` (every workload its true run time off by up to that much,
    /// the same draw in every run).
    #[arg(long, value_name = "trace|exact|±P%", default_value = "trace", value_parser = sim::DeclaredRuntimes::parse)]
    pub declared_runtimes: sim::DeclaredRuntimes,
    /// Every ClusterQueue's `spec.backfill.policy` instead of its own
    /// (`Reserve` or `None`); with any queue reserving, the report also
    /// shows the run with none.
    #[arg(long, value_name = "Reserve|None", value_parser = parse_backfill)]
    pub backfill: Option<sluice_scheduler::Backfill>,
    /// Every ClusterQueue's `spec.backfill.depth` instead of its own: how
    /// many of its first workloads that do not fit reserve (1 to 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub backfill_depth: Option<u32>,
    /// Fair sharing over time with this half-life (e.g. 12h), instead of
    /// the Trace's `spec.usageHalfLife`: each queue's decayed average usage
    /// above its nominal quota counts as borrowed when shares are compared
    /// (the controller's `--usage-half-life`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub usage_half_life: Option<units::Millis>,
    /// No progress indicator, even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_backfill(s: &str) -> Result<sluice_scheduler::Backfill, String> {
    match s {
        "Reserve" => Ok(sluice_scheduler::Backfill::Reserve),
        "None" => Ok(sluice_scheduler::Backfill::None),
        _ => Err(format!("expected Reserve or None (spec.backfill.policy), got {s:?}")),
    }
}

fn parse_duration_arg(s: &str) -> Result<units::Millis, String> {
    units::parse_duration(s)
}

fn parse_idle_interval_arg(s: &str) -> Result<units::Millis, String> {
    units::parse_duration(s).and_then(sluice_simulate::trace::profile::check_interval)
}

/// Runs `sluice simulate`.
pub fn run(args: SimulateArgs) -> Result<ExitCode> {
    let SimulateArgs {
        scenario,
        kueue,
        trace,
        json,
        html,
        api_qps,
        api_burst,
        api_latency,
        finish_lag,
        eviction_delay,
        idle_interval,
        requeue_limit,
        forecast,
        declared_runtimes,
        backfill,
        backfill_depth,
        usage_half_life,
        quiet,
    } = args;
    let api_qps = qps_limit(api_qps)?;
    // An unwritable --html fails now, not after the whole run.
    let html_file = html
        .as_ref()
        .map(|path| std::fs::File::create(path).with_context(|| format!("cannot write --html {}", path.display())))
        .transpose()?;
    let input = simulate_input::read(scenario, kueue, trace)?;
    let Some((scenario, manifests)) = load(&input) else {
        return Ok(ExitCode::from(2));
    };
    // Kueue documents were translated as `sluice import kueue` does.
    for note in &manifests.kueue_notes {
        eprintln!("note: {note}");
    }
    let opts = sim::SimOptions {
        api_qps,
        api_burst,
        api_latency,
        finish_lag,
        eviction_delay: eviction_delay
            .or(scenario.eviction_delay)
            .unwrap_or(DEFAULT_EVICTION_DELAY),
        idle_interval,
        requeue_limit,
        forecast,
        declared_runtimes,
        backfill,
        backfill_depth,
        usage_half_life,
        ..sim::SimOptions::default()
    };

    let started = Instant::now();
    let mut line = ProgressLine::new(!quiet && std::io::stderr().is_terminal(), &scenario);
    let result = sim::run(&scenario, &opts, &mut |p| line.draw(p))?;
    line.clear();
    let elapsed = started.elapsed();
    let report = report::build(&scenario.name, &opts, &result);

    let text = if json {
        serde_json::to_string_pretty(&report).context("serializing the report")? + "\n"
    } else {
        report::table::render(&report)
    };
    write_stdout(&text)?;
    if let (Some(path), Some(mut out)) = (html, html_file) {
        out.write_all(report::html::render(&report, &result).as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("HTML report written to {}", path.display());
    }
    warn_rejected(&result);
    if !quiet && std::io::stderr().is_terminal() {
        eprintln!("simulated in {:.2} s of wall time", elapsed.as_secs_f64());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--api-qps` as the simulator takes it: 0 is no limit, as for the
/// controller.
fn qps_limit(api_qps: f64) -> Result<Option<f64>> {
    if !(api_qps.is_finite() && api_qps >= 0.0) {
        anyhow::bail!("--api-qps must be 0 (no limit) or a positive number, got {api_qps}");
    }
    Ok((api_qps > 0.0).then_some(api_qps))
}

/// The scenario and its manifests, or `None` when it has errors, each
/// printed on stderr.
fn load(input: &simulate_input::Input) -> Option<(sim::Scenario, scenario::Manifests)> {
    match scenario::load_with(&input.name, &input.text, &LoadOptions::default()) {
        Ok(loaded) => Some(loaded),
        Err(errors) => {
            let mut err = std::io::stderr().lock();
            for e in errors.iter().cloned() {
                let _ = writeln!(err, "error: {}", input.locate(e));
            }
            let _ = writeln!(
                err,
                "{} error{} in {}; nothing was simulated.",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                input.name
            );
            None
        }
    }
}

/// The progress bar on a terminal, redrawn at most every 100 ms.
struct ProgressLine {
    show: bool,
    last_draw: Instant,
    drawn: bool,
    last_arrival: units::Millis,
}

impl ProgressLine {
    fn new(show: bool, scenario: &sim::Scenario) -> Self {
        ProgressLine {
            show,
            last_draw: Instant::now(),
            drawn: false,
            last_arrival: scenario.workloads.iter().map(|w| w.arrival).max().unwrap_or(0),
        }
    }

    fn draw(&mut self, p: sim::Progress) {
        if !self.show || self.last_draw.elapsed().as_millis() < 100 {
            return;
        }
        self.last_draw = Instant::now();
        self.drawn = true;
        let frac = if p.total == 0 {
            1.0
        } else {
            p.done as f64 / p.total as f64
        };
        let width = 30;
        let filled = (frac * width as f64).round() as usize;
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K[{}{}] {:>3.0}%  {}/{} workloads done  virtual {} of ≥{}",
            "█".repeat(filled),
            "░".repeat(width - filled),
            frac * 100.0,
            p.done,
            p.total,
            units::format_duration(p.now),
            units::format_duration(self.last_arrival)
        );
    }

    /// Wipes the bar, if it was drawn.
    fn clear(&self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// Writes the report on stdout; a closed pipe (`| head`) is not an error
/// worth a panic.
fn write_stdout(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// The first few workloads the engine refused, on stderr.
fn warn_rejected(result: &sim::SimResult) {
    let rejected =
        (result.records.iter().zip(&result.workloads)).filter_map(|(r, w)| r.rejected.as_ref().map(|e| (w, e)));
    for (w, e) in rejected.take(5) {
        eprintln!("warning: the engine refused {}: {e}", w.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_html_path_fails_before_the_run() {
        let dir = std::env::temp_dir().join(format!("sluice-sim-html-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scenario = dir.join("s.yaml");
        std::fs::write(&scenario, "apiVersion: sluice.dev/v1alpha1\nkind: Trace\nspec: {}\n").unwrap();
        let args = SimulateArgs {
            scenario: Some(scenario),
            kueue: None,
            trace: None,
            json: true,
            html: Some(dir.join("no-such-dir/report.html")),
            api_qps: 0.0,
            api_burst: 1,
            api_latency: 0,
            finish_lag: 0,
            eviction_delay: None,
            idle_interval: None,
            requeue_limit: 10,
            forecast: false,
            declared_runtimes: sim::DeclaredRuntimes::Trace,
            backfill: None,
            backfill_depth: None,
            usage_half_life: None,
            quiet: true,
        };
        let err = run(args).unwrap_err();
        assert!(format!("{err:#}").starts_with("cannot write --html "), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
