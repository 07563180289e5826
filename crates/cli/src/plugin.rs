//! The kubectl plugin's entry point, shared by the `kubectl-sluice` binary
//! and by `sluice` when it is invoked under that name.

use std::process::ExitCode;

use clap::Parser;

/// kubectl sluice: Sluice's queues, positions, reasons and estimated starts.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl sluice",
    version,
    about = "Sluice's queues, positions, reasons and estimated start times, with your own kubeconfig and rights."
)]
struct PluginCli {
    #[command(flatten)]
    args: sluice_kubectl::PluginArgs,
}

/// Whether the process was started as the plugin (`kubectl-sluice`).
// Only `sluice` asks; the plugin binary compiles this module too.
#[allow(dead_code)]
pub fn invoked_as_plugin() -> bool {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .is_some_and(|name| name == "kubectl-sluice")
}

/// Parses the plugin's arguments and runs it: one error line and exit 1
/// on failure.
pub fn main() -> ExitCode {
    let cli = PluginCli::parse();
    match sluice_kubectl::run(cli.args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
