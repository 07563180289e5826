//! Logging flags shared by the long-running subcommands (`controller`,
//! `webhook`): the format and a level filter.

use clap::{Args, ValueEnum};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Json,
    Plain,
}

/// `--log-format` and `--log-level`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
    /// Which events to log: a level (`error`, `warn`, `info`, `debug`,
    /// `trace`), or per target, e.g. `info,sluice_controller=debug,kube=warn`
    /// (RUST_LOG's target=level syntax, without span filters). kube-client's
    /// own lines are off unless a directive names a `kube` target: it logs
    /// every failed request and every dropped watch connection, which Sluice
    /// reports itself (an API outage is one line when it begins and one when
    /// it ends).
    #[arg(long, env = "RUST_LOG", default_value = "info", value_parser = parse_filter)]
    log_level: Targets,
}

fn parse_filter(s: &str) -> Result<Targets, String> {
    s.parse::<Targets>().map_err(|e| {
        format!("{e}: expected a level (error, warn, info, debug, trace) or target=level pairs separated by commas")
    })
}

impl LogArgs {
    /// Installs the global subscriber, writing to stderr.
    pub fn init(self) {
        let Self { log_format, log_level } = self;
        let registry = tracing_subscriber::registry().with(quiet_kube_client(log_level));
        match log_format {
            LogFormat::Json => registry
                .with(tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr))
                .init(),
            LogFormat::Plain => registry
                .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
                .init(),
        }
    }
}

/// `targets`, with kube-client off unless a directive names a `kube` target.
fn quiet_kube_client(targets: Targets) -> Targets {
    if targets.iter().any(|(target, _)| target.starts_with("kube")) {
        targets
    } else {
        targets.with_target("kube_client", tracing_subscriber::filter::LevelFilter::OFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;
    use tracing_subscriber::filter::LevelFilter;

    #[test]
    fn a_level_or_targets_parse_and_nonsense_is_refused() {
        let t = parse_filter("warn").unwrap();
        assert_eq!(t.default_level(), Some(LevelFilter::WARN));
        let t = parse_filter("info,sluice_controller=debug,kube=warn").unwrap();
        assert!(t.would_enable("sluice_controller::writer", &Level::DEBUG));
        assert!(!t.would_enable("kube::client", &Level::INFO));
        assert!(t.would_enable("other", &Level::INFO));
        let err = parse_filter("sluice=loud").unwrap_err();
        assert!(err.contains("expected a level"), "{err}");
    }

    #[test]
    fn kube_clients_own_lines_are_off_unless_a_directive_names_kube() {
        let t = quiet_kube_client(parse_filter("info").unwrap());
        assert!(!t.would_enable("kube_client::client::builder", &Level::ERROR));
        assert!(!t.would_enable("kube_client::client", &Level::WARN));
        assert!(t.would_enable("sluice_controller::outage", &Level::WARN));
        assert!(t.would_enable("kube_runtime::watcher", &Level::INFO));
        let t = quiet_kube_client(parse_filter("info,kube_client=warn").unwrap());
        assert!(t.would_enable("kube_client::client", &Level::WARN));
        let t = quiet_kube_client(parse_filter("info,kube=debug").unwrap());
        assert!(t.would_enable("kube_client::client::builder", &Level::ERROR));
    }
}
