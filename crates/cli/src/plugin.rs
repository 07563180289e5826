//! The kubectl plugin's entry point, shared by the `kubectl-sluice` binary
//! and by `sluice` when it is invoked under that name.

use std::process::ExitCode;

use clap::Parser;

/// kubectl sluice: Sluice's queues, positions, reasons and estimated starts.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl sluice",
    // Usage lines say what users type (kubectl runs `kubectl-sluice`).
    bin_name = "kubectl sluice",
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
/// on failure, bad arguments included (docs/cli.md, "Errors").
pub fn main() -> ExitCode {
    let cli = match PluginCli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return arguments_error(&e),
    };
    match sluice_kubectl::run(cli.args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `--help` and `--version` as clap prints them (exit 0); any other
/// argument error as one line on stderr, exit 1.
fn arguments_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    eprintln!("{}", one_line(e));
    ExitCode::FAILURE
}

/// clap's message (its first line, `error: …`) and where to read more.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("error: bad arguments").trim_end();
    format!("{first} (see 'kubectl sluice --help')")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(args: &[&str]) -> String {
        let argv = std::iter::once("kubectl-sluice").chain(args.iter().copied());
        one_line(&PluginCli::try_parse_from(argv).unwrap_err())
    }

    /// Bad arguments give one line, as every other error does.
    #[test]
    fn argument_errors_are_one_line() {
        for args in [
            &["workloads", "--bogus"][..],
            &["why"],
            &["stop", "q", "-o", "json"],
            &["why", "x", "-A"],
            &["usage", "--since", "90"],
        ] {
            let e = parse_error(args);
            assert!(e.starts_with("error: "), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        }
        assert!(parse_error(&["usage", "--since", "90"]).contains("needs a unit, e.g. 90s"));
    }

    /// The usage line names the command as users type it.
    #[test]
    fn usage_says_kubectl_sluice() {
        use clap::CommandFactory;
        let usage = PluginCli::command().render_usage().to_string();
        assert!(usage.contains("kubectl sluice "), "{usage}");
        assert!(!usage.contains("kubectl-sluice"), "{usage}");
    }
}
