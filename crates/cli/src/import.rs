//! `sluice import kueue`: Kueue's configuration (files, stdin, or the
//! cluster's objects) as Sluice manifests on stdout; what is not copied as
//! it is, and the controller flags Kueue's Configuration asks for, on
//! stderr (`sluice_import`).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

/// Arguments of `sluice import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    command: ImportCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ImportCommand {
    /// Kueue (kueue.x-k8s.io v1alpha1, v1beta1, v1beta2; its Configuration)
    /// into Sluice objects.
    Kueue(KueueArgs),
}

#[derive(Debug, clap::Args)]
struct KueueArgs {
    /// YAML files of Kueue objects (`-`: stdin).
    files: Vec<PathBuf>,
    /// Read the cluster's Kueue objects instead (the user's kubeconfig; read
    /// only): ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
    /// WorkloadPriorityClasses.
    #[arg(long, conflicts_with = "files")]
    from_cluster: bool,
    /// Any field Sluice does not support is an error, listed by path.
    #[arg(long)]
    strict: bool,
    /// Write the Sluice manifests here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn run(args: ImportArgs) -> Result<ExitCode> {
    let ImportCommand::Kueue(args) = args.command;
    let docs = if args.from_cluster {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(from_cluster())?
    } else {
        from_files(&args.files)?
    };
    let out = sluice_import::import(&docs, args.strict)?;
    let mut yaml = String::new();
    for o in &out.objects {
        yaml.push_str("---\n");
        let doc = serde_saphyr::to_string(o).context("writing YAML")?;
        yaml.push_str(doc.trim_end());
        yaml.push('\n');
    }
    match &args.output {
        Some(p) => std::fs::write(p, &yaml).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{yaml}"),
    }
    for n in &out.notes {
        eprintln!("{} ({}): {}", n.place, n.status.as_str(), n.message);
    }
    if !out.flags.is_empty() {
        eprintln!(
            "sluice controller flags for Kueue's Configuration: {}",
            out.flags.join(" ")
        );
    }
    eprintln!("{} Sluice object(s), {} note(s)", out.objects.len(), out.notes.len());
    Ok(ExitCode::SUCCESS)
}

/// The documents of the files (or stdin).
pub(crate) fn from_files(files: &[PathBuf]) -> Result<Vec<Value>> {
    anyhow::ensure!(
        !files.is_empty(),
        "give Kueue YAML files (or - for stdin), or --from-cluster"
    );
    let mut docs = Vec::new();
    for f in files {
        let text = if f.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        } else {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        };
        for (i, d) in text.split("\n---").enumerate() {
            if d.lines()
                .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#') || l.trim() == "---")
            {
                continue;
            }
            let v: Value = serde_saphyr::from_str(d).with_context(|| format!("{}: document {i}", f.display()))?;
            docs.push(v);
        }
    }
    Ok(docs)
}

/// The cluster's Kueue queue objects, in the newest version it serves.
async fn from_cluster() -> Result<Vec<Value>> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let mut version = None;
    for v in ["v1beta2", "v1beta1"] {
        if client
            .list_api_group_resources(&format!("kueue.x-k8s.io/{v}"))
            .await
            .is_ok()
        {
            version = Some(v);
            break;
        }
    }
    let version = version.context("the API server serves no kueue.x-k8s.io API (is Kueue installed?)")?;
    let mut docs = Vec::new();
    for (kind, plural) in [
        ("ResourceFlavor", "resourceflavors"),
        ("Cohort", "cohorts"),
        ("ClusterQueue", "clusterqueues"),
        ("LocalQueue", "localqueues"),
        ("WorkloadPriorityClass", "workloadpriorityclasses"),
    ] {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", version, kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        // LocalQueues from every namespace.
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        match api.list(&ListParams::default()).await {
            Ok(list) => docs.extend(
                list.items
                    .into_iter()
                    .map(|o| serde_json::to_value(o).unwrap_or_default()),
            ),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("listing {kind}s")),
        }
    }
    Ok(docs)
}
