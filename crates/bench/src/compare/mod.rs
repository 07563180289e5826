//! `sluice bench compare`: the real controller and the simulator side by
//! side, for calibrating the simulator.
//!
//! ```text
//!  --scenario, --scale ──run::load_plan──▶ Plan (the real run's Workloads)
//!                                     └──▶ Scenario (the same workloads, same scale)
//!  real:      run::run_plan(Plan), as `bench run` ──▶ RunReport ─┐   or --real-report FILE
//!  simulated: fair sharing and placement as the controller's,    │
//!             sim::run(Scenario, --kube-qps/--kube-burst,        │
//!             eviction delay 0) ──▶ SimResult ───────────────────┤
//!                                                               ▼
//!             figures::Real / figures::simulated ──▶ Comparison ──▶ table, --json FILE
//! ```
//!
//! | file | what |
//! |------|------|
//! | `mod.rs` | the command: both sides, the output |
//! | `figures.rs` | the figures of each side, the rows and ratios (pure) |
//! | `render.rs` | the table |

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow};
use sluice_scheduler::FairSharing;
use sluice_simulate::sim::{self, Scenario, SimOptions};

use super::run::{Asked, create_file, load_plan, run_plan, write_json};
use super::{CompareArgs, EXIT_INCOMPLETE, OutputArgs, Switch, print};

pub mod figures;
pub mod render;

pub use figures::{CompareError, Comparison, Figures, Real, Setting};
pub use render::render;

/// `sluice bench compare`.
pub async fn command(args: CompareArgs) -> Result<ExitCode> {
    let CompareArgs {
        run,
        fair_sharing,
        finish_lag,
        api_latency,
        real_report,
        json,
        run_id,
        keep,
        quiet,
    } = args;
    let (kube_qps, kube_burst) = (run.limits.kube_qps, run.limits.kube_burst);
    // Unwritable or unreadable files fail now, not after the run.
    let out = json.map(|p| create_file(&p, "--json").map(|f| (p, f))).transpose()?;
    let saved = real_report.as_deref().map(read_report).transpose()?;
    if !(kube_qps.is_finite() && kube_qps >= 0.0) {
        return Err(anyhow!(
            "--kube-qps must be 0 (no limit) or a positive number, got {kube_qps}"
        ));
    }
    let output = OutputArgs {
        run_id,
        keep,
        json: false,
        quiet,
    };
    let asked = Asked::new(run, output)?;
    let (plan, mut scenario) = match load_plan(&asked)? {
        Ok(loaded) => loaded,
        Err(code) => return Ok(code),
    };
    let (real, real_source) = match saved {
        Some((real, source)) => {
            real.check_matches(&scenario.name, asked.scale)?;
            (real, source)
        }
        None => match run_plan(&asked, &plan).await? {
            Ok(report) => (Real::from_report(&report)?, format!("run {}", asked.run_id)),
            Err(code) => return Ok(code),
        },
    };
    let lags = Lags {
        finish_ms: millis(finish_lag),
        api_latency_ms: millis(api_latency),
    };
    let simulated = simulate(&mut scenario, fair_sharing, (kube_qps, kube_burst), lags, quiet)?;
    let setting = Setting {
        scenario: scenario.name.clone(),
        scale: asked.scale,
        kube_qps,
        kube_burst,
        fair_sharing: fair_sharing == Switch::On,
        finish_lag_ms: lags.finish_ms,
        api_latency_ms: lags.api_latency_ms,
        real_source,
    };
    let comparison = Comparison::new(setting, real.figures, simulated);
    print(&render(&comparison))?;
    if let Some((path, file)) = out {
        write_json(&path, file, &comparison)?;
    }
    Ok(if comparison.real.complete && comparison.simulated.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INCOMPLETE)
    })
}

/// `--real-report`: a saved `bench run` JSON report, and how to name it.
fn read_report(path: &Path) -> Result<(Real, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read --real-report {}", path.display()))?;
    let real = Real::from_json(&text).with_context(|| format!("--real-report {}", path.display()))?;
    Ok((real, format!("report {}", path.display())))
}

/// What the simulator is told of the round trips it does not run.
#[derive(Debug, Clone, Copy)]
struct Lags {
    finish_ms: i64,
    api_latency_ms: i64,
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Runs the scenario in the simulator as the bench's controller runs it:
/// fair sharing as its flag says (default strategies, as the controller's),
/// quota only (a bench run makes no Nodes, and its controller runs with
/// `--placement=quota-only`), writes at the controller's client limit
/// (`--kube-qps` 0: none), evictions complete at once (the bench's
/// Workloads have no pods), and the harness's `Finished` round trip and
/// the write latency as given.
fn simulate(
    scenario: &mut Scenario,
    fair_sharing: Switch,
    (qps, burst): (f64, u32),
    lags: Lags,
    quiet: bool,
) -> Result<Figures> {
    scenario.fair_sharing = match fair_sharing {
        Switch::On => FairSharing::default(),
        Switch::Off => FairSharing::Off,
    };
    scenario.nodes.clear();
    let opts = SimOptions {
        api_qps: (qps > 0.0).then_some(qps),
        api_burst: burst,
        api_latency: lags.api_latency_ms,
        finish_lag: lags.finish_ms,
        eviction_delay: 0,
        ..SimOptions::default()
    };
    if !quiet {
        eprintln!("simulating {} ({} workloads)", scenario.name, scenario.workloads.len());
    }
    let result = sim::run(scenario, &opts, &mut |_| {}).context("simulating the scenario")?;
    Ok(figures::simulated(&result))
}

#[cfg(test)]
mod tests;
