//! # kubectl sluice
//!
//! The command-line view of Sluice for every user, admin or not, with the
//! user's own kubeconfig and RBAC: `queues`, `workloads`, `why`, `top`,
//! `usage`, `stop` and `resume`. Namespaced users see their ClusterQueue through
//! their LocalQueue's status, which the controller fills for them.
//!
//! ```text
//!   args ─► fetch (kube, the user's rights) ─► Snapshot ─► view (pure) ─► table | json | yaml
//! ```
//!
//! `docs/cli.md` documents every command.
#![forbid(unsafe_code)]

pub mod error;
pub mod fetch;
pub mod quantity;
pub mod snapshot;
pub mod table;
pub mod view;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue};

pub use error::PluginError;
pub use snapshot::Snapshot;
use view::workloads::Filter;

/// `kubectl sluice`: queues, positions, reasons and estimated starts.
/// `-n` and `--context` apply to every command; each command takes the
/// other flags it uses, and only those.
#[derive(Debug, Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
    /// Namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

/// How a view is printed: the flags of every command that prints one.
#[derive(Clone, Copy, Debug, Args)]
pub struct Print {
    /// Output: table (default), wide, json, yaml, or csv (`usage` only).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Print again whenever it changes (every 2 s), until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Which namespaces a listing reads: the flag of `queues`, `workloads`,
/// `top` and `usage`.
#[derive(Clone, Copy, Debug, Args)]
pub struct Namespaces {
    /// All namespaces (the LocalQueues and Workloads of every namespace
    /// you may read), not just `-n`'s.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// ClusterQueues (if you may read them), else your LocalQueues with
    /// their ClusterQueue's quota, usage, counts and stop policy.
    Queues {
        #[command(flatten)]
        namespaces: Namespaces,
        #[command(flatten)]
        print: Print,
    },
    /// One line per workload: job, queue, state, position, reason,
    /// estimated start, age.
    Workloads {
        /// Only waiting workloads.
        #[arg(long, conflicts_with = "admitted")]
        pending: bool,
        /// Only workloads holding quota.
        #[arg(long)]
        admitted: bool,
        /// Label selector for the Workloads.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[command(flatten)]
        namespaces: Namespaces,
        #[command(flatten)]
        print: Print,
    },
    /// Why a workload waits (or what happened to it), in the namespace of
    /// `-n`.
    Why {
        /// The Workload's name, or its job's: `NAME`, `job/NAME`,
        /// `jobset/NAME`, `pytorchjob/NAME`, …
        name: String,
        #[command(flatten)]
        print: Print,
    },
    /// Usage against quota per ClusterQueue and flavor, with a bar.
    Top {
        #[command(flatten)]
        namespaces: Namespaces,
        #[command(flatten)]
        print: Print,
    },
    /// Resource-hours (GPU-hours) per queue, flavor and resource, over
    /// `--since` and in all, with the budget: spent, limit, left,
    /// projection, action. `-o csv` for a spreadsheet.
    #[command(after_help = sluice_api::duration::TRACE_HELP)]
    Usage {
        /// The window USED counts: `7d`, `24h`, `30m` (units ms, s, m, h,
        /// d; a number needs its unit).
        #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = parse_since)]
        since: i64,
        #[command(flatten)]
        namespaces: Namespaces,
        #[command(flatten)]
        print: Print,
    },
    /// Stop a queue: nothing new is admitted (stop policy Hold).
    Stop {
        /// The queue: a LocalQueue of the namespace (`NAME` or
        /// `localqueue/NAME`), or `clusterqueue/NAME` (needs cluster
        /// rights).
        queue: String,
        /// Also evict what the queue has admitted (stop policy
        /// HoldAndDrain).
        #[arg(long)]
        drain: bool,
    },
    /// Resume a stopped queue (stop policy None).
    Resume {
        /// The queue: a LocalQueue of the namespace (`NAME` or
        /// `localqueue/NAME`), or `clusterqueue/NAME`.
        queue: String,
    },
}

impl PluginCommand {
    /// How the command prints its view; `None` for `stop` and `resume`,
    /// which print one line.
    pub fn print(&self) -> Option<Print> {
        match self {
            PluginCommand::Queues { print, .. }
            | PluginCommand::Workloads { print, .. }
            | PluginCommand::Why { print, .. }
            | PluginCommand::Top { print, .. }
            | PluginCommand::Usage { print, .. } => Some(*print),
            PluginCommand::Stop { .. } | PluginCommand::Resume { .. } => None,
        }
    }

    /// Whether the command reads every namespace (`-A`).
    pub fn all_namespaces(&self) -> bool {
        match self {
            PluginCommand::Queues { namespaces, .. }
            | PluginCommand::Workloads { namespaces, .. }
            | PluginCommand::Top { namespaces, .. }
            | PluginCommand::Usage { namespaces, .. } => namespaces.all_namespaces,
            PluginCommand::Why { .. } | PluginCommand::Stop { .. } | PluginCommand::Resume { .. } => false,
        }
    }
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Wide,
    Json,
    Yaml,
    /// Comma-separated values (`usage` only).
    Csv,
}

/// Runs the plugin: exit 0, or an error line.
pub fn run(args: PluginArgs) -> Result<ExitCode, PluginError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PluginError::Connect(e.to_string()))?;
    rt.block_on(run_async(args))
}

async fn client(context: Option<&str>) -> Result<Client, PluginError> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match kube::Config::from_kubeconfig(&options).await {
        Ok(c) => c,
        Err(e) if context.is_some() => return Err(PluginError::Connect(e.to_string())),
        Err(_) => kube::Config::infer()
            .await
            .map_err(|e| PluginError::Connect(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| PluginError::Connect(e.to_string()))
}

async fn run_async(args: PluginArgs) -> Result<ExitCode, PluginError> {
    let client = client(args.context.as_deref()).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let scope = fetch::Scope {
        namespace: (!args.command.all_namespaces()).then(|| namespace.clone()),
    };
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let how = match &args.command {
        PluginCommand::Stop { queue, drain } => {
            let policy = if *drain { "HoldAndDrain" } else { "Hold" };
            set_stop_policy(&client, &namespace, queue, policy).await?;
            return Ok(ExitCode::SUCCESS);
        }
        PluginCommand::Resume { queue } => {
            set_stop_policy(&client, &namespace, queue, "None").await?;
            return Ok(ExitCode::SUCCESS);
        }
        command => command.print().unwrap_or(Print {
            output: Output::Table,
            watch: false,
        }),
    };
    // Printed again when what it says changes (not when only ages move).
    let mut last: Option<String> = None;
    loop {
        let (text, said) = render(&client, &args.command, how.output, &scope, &namespace, colour).await?;
        if last.as_ref() != Some(&said) {
            if last.is_some() {
                println!();
            }
            print(&text)?;
            last = Some(said);
        }
        if !how.watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn print(text: &str) -> Result<(), PluginError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| PluginError::Output(e.to_string()))
}

/// `-o json|yaml` of any view.
fn structured<T: serde::Serialize>(v: &T, output: Output) -> Result<String, PluginError> {
    match output {
        Output::Yaml => serde_saphyr::to_string(v).map_err(|e| PluginError::Output(e.to_string())),
        _ => serde_json::to_string_pretty(v)
            .map(|s| s + "\n")
            .map_err(|e| PluginError::Output(e.to_string())),
    }
}

/// The output (`text` for tables, else the view in JSON or YAML) and
/// what it says (the view as JSON: without ages, which only move).
fn output<T: serde::Serialize>(
    v: &T,
    format: Output,
    text: impl FnOnce() -> String,
) -> Result<(String, String), PluginError> {
    let said = serde_json::to_string(v).map_err(|e| PluginError::Output(e.to_string()))?;
    let out = match format {
        Output::Table | Output::Wide => text(),
        _ => structured(v, format)?,
    };
    Ok((out, said))
}

/// The output of the command asked for, and what it says.
async fn render(
    client: &Client,
    command: &PluginCommand,
    output: Output,
    scope: &fetch::Scope,
    namespace: &str,
    colour: bool,
) -> Result<(String, String), PluginError> {
    let wide = output == Output::Wide;
    if output == Output::Csv && !matches!(command, PluginCommand::Usage { .. }) {
        return Err(PluginError::Usage(
            "-o csv: only `kubectl sluice usage` prints CSV".into(),
        ));
    }
    match command {
        PluginCommand::Queues { .. } => queues(client, scope, output, wide).await,
        PluginCommand::Top { .. } => top(client, scope, output, colour).await,
        PluginCommand::Workloads {
            pending,
            admitted,
            selector,
            ..
        } => {
            let filter = if *pending {
                Filter::Pending
            } else if *admitted {
                Filter::Admitted
            } else {
                Filter::All
            };
            workloads(client, scope, selector.as_deref(), filter, output, colour).await
        }
        PluginCommand::Why { name, .. } => why(client, namespace, name, output).await,
        PluginCommand::Usage { since, .. } => usage(client, scope, *since, output).await,
        PluginCommand::Stop { .. } | PluginCommand::Resume { .. } => Ok((String::new(), String::new())),
    }
}

/// `queues`: the queues table, and its notes.
async fn queues(
    client: &Client,
    scope: &fetch::Scope,
    format: Output,
    wide: bool,
) -> Result<(String, String), PluginError> {
    let s = fetch::snapshot(client, scope, false, None).await?;
    let v = view::queues::queues(&s);
    output(&v, format, || {
        let notes = view::queues::notes(&v);
        let table = view::queues::table(&v, wide).render("No queues found.");
        if notes.is_empty() {
            table
        } else {
            format!("{table}\n{notes}")
        }
    })
}

/// `top`: usage bars per queue, and the queues' notes.
async fn top(
    client: &Client,
    scope: &fetch::Scope,
    format: Output,
    colour: bool,
) -> Result<(String, String), PluginError> {
    let s = fetch::snapshot(client, scope, false, None).await?;
    let queues = view::queues::queues(&s);
    let v = view::top::usage(&queues);
    output(&v, format, || {
        let table = view::top::table(&v, colour).render("No queues found.");
        match view::queues::notes(&queues) {
            notes if notes.is_empty() => table,
            notes => format!("{table}\n{notes}"),
        }
    })
}

/// `usage`: resource-hours per queue over the last `since` seconds, with
/// budgets.
async fn usage(
    client: &Client,
    scope: &fetch::Scope,
    since: i64,
    format: Output,
) -> Result<(String, String), PluginError> {
    let s = fetch::snapshot(client, scope, false, None).await?;
    let v = view::usage::usage(&s, since);
    if format == Output::Csv {
        let text = view::usage::csv(&v);
        return Ok((text.clone(), text));
    }
    output(&v, format, || {
        let table = view::usage::table(&v).render("No queues found.");
        format!("{table}\n{}", view::usage::notes(&v))
    })
}

/// `--since`: a duration (`7d`, `24h`; a number needs its unit), in
/// whole seconds.
fn parse_since(text: &str) -> Result<i64, String> {
    let d = sluice_api::duration::parse(text, sluice_api::duration::Units::TRACE).map_err(|e| e.to_string())?;
    i64::try_from(d.as_secs()).map_err(|_| format!("{text}: too long"))
}

/// `workloads`: the workloads in scope that pass `filter`.
async fn workloads(
    client: &Client,
    scope: &fetch::Scope,
    selector: Option<&str>,
    filter: Filter,
    format: Output,
    colour: bool,
) -> Result<(String, String), PluginError> {
    let s = fetch::snapshot(client, scope, true, selector).await?;
    let v = view::workloads::workloads(&s, filter);
    let empty = match &scope.namespace {
        Some(ns) => format!("No workloads found in namespace {ns}."),
        None => "No workloads found.".to_string(),
    };
    output(&v, format, || {
        view::workloads::table(&v, &s, scope.namespace.is_none(), format == Output::Wide, colour).render(&empty)
    })
}

/// `why NAME`: the workload (or its job's), its events, and who holds its
/// ClusterQueue's quota when the user may list every Workload.
async fn why(client: &Client, namespace: &str, name: &str, format: Output) -> Result<(String, String), PluginError> {
    let one = fetch::Scope {
        namespace: Some(namespace.to_string()),
    };
    let s = fetch::snapshot(client, &one, true, None).await?;
    let w = view::why::find(&s, namespace, name).ok_or_else(|| {
        PluginError::NotFound(format!(
            "no Workload {name:?} in namespace {namespace}, and no job of that name has one"
        ))
    })?;
    let mut names = vec![w.metadata.name.clone().unwrap_or_default()];
    names.extend(w.metadata.owner_references.iter().flatten().map(|o| o.name.clone()));
    let events = fetch::events(client, namespace, &names).await;
    let holders = fetch::all_workloads(client).await.map(|all| {
        let everyone = Snapshot {
            workloads: all,
            ..s.clone()
        };
        view::workloads::workloads(&everyone, Filter::Admitted)
    });
    let v = view::why::why(&s, w, events, holders);
    output(&v, format, || view::why::text(&v, &s))
}

/// Which queue a `stop`/`resume` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueName {
    Local(String),
    Cluster(String),
}

/// `NAME` or `localqueue/NAME` (`lq/`): a LocalQueue; `clusterqueue/NAME`
/// (`cq/`): a ClusterQueue.
pub fn parse_queue(arg: &str) -> Result<QueueName, PluginError> {
    match arg.split_once('/') {
        None => Ok(QueueName::Local(arg.to_string())),
        Some(("localqueue" | "localqueues" | "lq", n)) => Ok(QueueName::Local(n.to_string())),
        Some(("clusterqueue" | "clusterqueues" | "cq", n)) => Ok(QueueName::Cluster(n.to_string())),
        Some((kind, _)) => Err(PluginError::Usage(format!(
            "{arg:?}: expected NAME, localqueue/NAME or clusterqueue/NAME, not a {kind}"
        ))),
    }
}

async fn set_stop_policy(client: &Client, namespace: &str, queue: &str, policy: &str) -> Result<(), PluginError> {
    let patch = Patch::Merge(serde_json::json!({"spec": {"stopPolicy": policy}}));
    let pp = PatchParams::default();
    let (what, name) = match parse_queue(queue)? {
        QueueName::Local(name) => {
            let api: Api<LocalQueue> = Api::namespaced(client.clone(), namespace);
            api.patch(&name, &pp, &patch).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 404 => {
                    PluginError::NotFound(format!("no LocalQueue {name:?} in namespace {namespace}"))
                }
                e => error::api_error(e, "patch", "localqueues.sluice.dev", Some(namespace)),
            })?;
            ("localqueue", format!("{namespace}/{name}"))
        }
        QueueName::Cluster(name) => {
            let api: Api<ClusterQueue> = Api::all(client.clone());
            api.patch(&name, &pp, &patch).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 404 => PluginError::NotFound(format!("no ClusterQueue {name:?}")),
                e => error::api_error(e, "patch", "clusterqueues.sluice.dev", None),
            })?;
            ("clusterqueue", name)
        }
    };
    let effect = match policy {
        "Hold" => "stopped (Hold): nothing new is admitted; admitted workloads keep running",
        "HoldAndDrain" => "stopped (HoldAndDrain): nothing new is admitted; admitted workloads are evicted",
        _ => "resumed: admitting again",
    };
    print(&format!("{what} {name} {effect}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_arguments() {
        assert_eq!(parse_queue("team-a").unwrap(), QueueName::Local("team-a".into()));
        assert_eq!(parse_queue("lq/team-a").unwrap(), QueueName::Local("team-a".into()));
        assert_eq!(
            parse_queue("clusterqueue/gpu").unwrap(),
            QueueName::Cluster("gpu".into())
        );
        assert_eq!(parse_queue("cq/gpu").unwrap(), QueueName::Cluster("gpu".into()));
        assert!(parse_queue("job/x").unwrap_err().to_string().contains("expected NAME"));
    }
}
