use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sluice: a GPU batch-job queue and admission controller for Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a scenario (Sluice manifests + a Trace) through the real engine in virtual time.
    Simulate(sluice_cli::simulate::SimulateArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Simulate(args) => sluice_cli::simulate::run(args),
    }
}
