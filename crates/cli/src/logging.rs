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
    /// (RUST_LOG's target=level syntax, without span filters).
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
        let registry = tracing_subscriber::registry().with(log_level);
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
}
