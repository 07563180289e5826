//! `sluice`: one binary, one subcommand per job.
//!
//! Each subcommand has a clap `Args` struct and a `run` function, in its own
//! module here (`bench`'s, whose flags reach deep into the harness, in the
//! `sluice-bench` crate); the work itself is in the library crates. Adding
//! one means adding a variant to [`Command`] and an arm to the `match` in
//! `main`.

#![forbid(unsafe_code)]

mod controller;
mod crds;
#[cfg(test)]
mod docs_tests;
mod import;
mod logging;
mod plugin;
mod simulate;
mod simulate_input;
mod trace;
mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sluice: a GPU batch-job queue and admission controller for Kubernetes.
///
/// Jobs wait suspended in LocalQueues until their whole gang fits the
/// GPU quota of their ClusterQueue, then are admitted; lower-priority work
/// is preempted when a higher-priority gang needs the GPUs. This binary
/// runs the controller and the webhook in a cluster, and replays,
/// records, imports and benchmarks without one. `kubectl sluice` (this
/// binary named `kubectl-sluice`) is the users' view.
#[derive(Debug, Parser)]
#[command(name = "sluice", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Drive a running controller through Kueue's performance scenarios on a
    /// real API server (`bench run`), measure the write floor (`bench floor`),
    /// put the controller and the simulator side by side (`bench compare`).
    Bench(sluice_bench::BenchArgs),
    /// Run the controller: queue Jobs, admit them through the engine, apply decisions.
    Controller(Box<controller::ControllerArgs>),
    /// Print the CustomResourceDefinitions of every Sluice kind.
    Crds(crds::CrdsArgs),
    /// Replay a scenario (Sluice manifests + a Trace) through the real engine in virtual time.
    Simulate(simulate::SimulateArgs),
    /// Record a simulator Trace from a cluster's Workloads (`trace record`).
    Trace(trace::TraceArgs),
    /// Translate another queue system's configuration (`import kueue`).
    Import(import::ImportArgs),
    /// Serve the admission webhook, or print its configurations (`webhook manifests`).
    Webhook(Box<webhook::WebhookArgs>),
}

fn main() -> ExitCode {
    if plugin::invoked_as_plugin() {
        return plugin::main();
    }
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Bench(args) => sluice_bench::run(args),
        Command::Controller(args) => controller::run(*args),
        Command::Crds(args) => crds::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Import(args) => import::run(args),
        Command::Webhook(args) => webhook::run(*args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sluice: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// `sluice --help` says what Sluice is (not the package's description)
    /// and lists every subcommand.
    #[test]
    fn help_says_what_sluice_is_and_lists_every_subcommand() {
        let help = Cli::command().render_help().to_string();
        assert!(
            help.starts_with("Sluice: a GPU batch-job queue and admission controller for Kubernetes\n"),
            "{help}"
        );
        for sub in Cli::command().get_subcommands().filter(|s| s.get_name() != "help") {
            assert!(
                help.contains(&format!("\n  {} ", sub.get_name())),
                "{} missing:\n{help}",
                sub.get_name()
            );
        }
        for name in ["controller", "webhook", "simulate", "trace", "import", "bench", "crds"] {
            assert!(Cli::command().find_subcommand(name).is_some(), "{name}");
        }
    }
}
