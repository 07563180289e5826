//! `sluice trace record`: a simulator trace from a cluster's Workloads
//! (Sluice's, Kueue's, or both), with what the cluster gave each queue, so
//! that last week can be replayed with Sluice's policies
//! (`sluice simulate`) and the waits compared.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use sluice_simulate::record::{self, Recorded, Window};
use sluice_simulate::units::{self, Millis, format_duration};

/// Arguments of `sluice trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TraceCommand {
    /// Record a Trace from the Workloads created in the last `--since`
    /// (the user's kubeconfig; read only).
    Record(RecordArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_help = sluice_api::duration::TRACE_HELP)]
struct RecordArgs {
    /// How far back: Workloads created since then (e.g. 7d, 24h, 90m).
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = units::parse_duration)]
    since: Millis,
    /// Whose Workloads: `sluice` (sluice.dev), `kueue` (kueue.x-k8s.io,
    /// v1beta2 or v1beta1, whichever is served), or `auto`: every kind
    /// that is served.
    #[arg(long, default_value = "auto", value_parser = ["auto", "sluice", "kueue"])]
    source: String,
    /// How long a Workload never admitted runs in the replay.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = units::parse_duration)]
    unadmitted_runtime: Millis,
    /// Write the Trace here instead of stdout (what the cluster gave each
    /// queue, and what was left out, go to stderr).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn run(args: TraceArgs) -> Result<ExitCode> {
    let TraceCommand::Record(args) = args.command;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let workloads = rt.block_on(list(&args.source))?;
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let recorded = record::record(
        &workloads,
        Window {
            since_ms: now - args.since,
            now_ms: now,
            unadmitted_runtime_ms: args.unadmitted_runtime,
        },
    );
    match &args.output {
        Some(path) => std::fs::write(path, &recorded.trace).with_context(|| format!("writing {}", path.display()))?,
        None => print!("{}", recorded.trace),
    }
    eprint!("{}", observed(&recorded));
    Ok(ExitCode::SUCCESS)
}

/// The Workloads of the chosen source, as JSON.
async fn list(source: &str) -> Result<Vec<serde_json::Value>> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server (kubeconfig)")?;
    let mut resources = Vec::new();
    if source != "kueue" {
        resources.push(("sluice.dev", "v1alpha1"));
    }
    if source != "sluice" {
        for version in ["v1beta2", "v1beta1"] {
            let served = client
                .list_api_group_resources(&format!("kueue.x-k8s.io/{version}"))
                .await
                .is_ok_and(|l| l.resources.iter().any(|r| r.name == "workloads"));
            if served {
                resources.push(("kueue.x-k8s.io", version));
                break;
            }
        }
        anyhow::ensure!(
            source != "kueue" || resources.iter().any(|(g, _)| *g == "kueue.x-k8s.io"),
            "the API server serves no kueue.x-k8s.io Workloads (is Kueue installed?)"
        );
    }
    let mut out = Vec::new();
    for (group, version) in resources {
        let gvk = GroupVersionKind::gvk(group, version, "Workload");
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "workloads"));
        let mut params = ListParams::default().limit(500);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(e)) if e.code == 404 && group == "sluice.dev" && source == "auto" => break,
                Err(e) => return Err(e).with_context(|| format!("listing {group}/{version} Workloads")),
            };
            out.extend(
                page.items
                    .into_iter()
                    .map(|o| serde_json::to_value(o).unwrap_or_default()),
            );
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
    }
    Ok(out)
}

/// What the cluster gave each queue, and what was left out.
fn observed(r: &Recorded) -> String {
    let mut out = String::from("what the cluster gave each LocalQueue (creation to quota reserved):\n");
    for (queue, waits) in &r.waits {
        let mut given: Vec<Millis> = waits.iter().flatten().copied().collect();
        given.sort_unstable();
        let waiting = waits.len() - given.len();
        let line = match given.as_slice() {
            [] => format!("  {queue}: {} workloads, none admitted yet\n", waits.len()),
            g => {
                let mean = g.iter().sum::<Millis>() / g.len() as Millis;
                let p95 = g[(g.len() * 95).div_ceil(100).saturating_sub(1)];
                format!(
                    "  {queue}: {} workloads, mean wait {}, p95 {}, max {}{}\n",
                    waits.len(),
                    format_duration(mean),
                    format_duration(p95),
                    format_duration(*g.last().unwrap_or(&0)),
                    if waiting > 0 {
                        format!(", {waiting} not admitted yet")
                    } else {
                        String::new()
                    }
                )
            }
        };
        out.push_str(&line);
    }
    for s in &r.skipped {
        out.push_str(&format!("left out: {s}\n"));
    }
    out
}
