//! `sluice import kueue`: Kueue's configuration (files, stdin, or the
//! cluster's objects) as Sluice manifests on stdout (or `--out`); the
//! notes (what is not copied as it is) and the controller flags and chart
//! values Kueue's Configuration asks for on stderr (`sluice_import`).
//!
//! An input with nothing to import (no Kueue queue object and no
//! Configuration: a Deployment, a text file, an empty file) is an error,
//! and so is YAML that does not parse: one line each, `FILE:LINE:COLUMN:`
//! first, exit 1.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use sluice_import::mapping::QUEUE_KINDS;
use sluice_simulate::scenario::split_documents;
use sluice_simulate::trace::{DocOrigin, saphyr_diagnostic};

/// Arguments of `sluice import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    command: ImportCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ImportCommand {
    /// Kueue (kueue.x-k8s.io v1beta1, v1beta2; v1alpha1 Cohorts; its
    /// Configuration) into Sluice objects.
    Kueue(KueueArgs),
}

#[derive(Debug, clap::Args)]
struct KueueArgs {
    /// YAML files of Kueue objects, and of Kueue's Configuration (alone or
    /// in its ConfigMap); `-`: stdin.
    files: Vec<PathBuf>,
    /// Read the cluster's Kueue objects instead (the user's kubeconfig; read
    /// only): ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
    /// WorkloadPriorityClasses, Topologies, AdmissionChecks, and the
    /// Configuration in --kueue-config.
    #[arg(long, conflicts_with = "files")]
    from_cluster: bool,
    /// With --from-cluster: the ConfigMap holding Kueue's Configuration.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "kueue-system/kueue-manager-config"
    )]
    kueue_config: String,
    /// Any field Sluice does not support is an error, listed by path; nothing
    /// is written.
    #[arg(long)]
    strict: bool,
    /// Write the Sluice manifests here instead of stdout.
    #[arg(long, short = 'o', visible_alias = "output", value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the chart values Kueue's Configuration asks for here
    /// (for `helm install -f`).
    #[arg(long, value_name = "FILE")]
    chart_values: Option<PathBuf>,
}

pub fn run(args: ImportArgs) -> Result<ExitCode> {
    let ImportCommand::Kueue(args) = args.command;
    let docs = if args.from_cluster {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let docs = rt.block_on(from_cluster(&args.kueue_config))?;
        docs.into_iter()
            .map(|value| Input {
                at: "the cluster".into(),
                value,
            })
            .collect()
    } else {
        from_files(&args.files)?
    };
    let values: Vec<Value> = docs.iter().map(|d| d.value.clone()).collect();
    let out = sluice_import::import(&values, args.strict).map_err(|e| match e.document(&values) {
        Some(i) => anyhow::anyhow!("{}: {e}", docs[i].at),
        None => e.into(),
    })?;
    if out.is_empty() {
        bail!(nothing_to_import(&docs));
    }
    match &args.out {
        Some(p) => std::fs::write(p, out.manifests()).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{}", out.manifests()),
    }
    if let Some(p) = &args.chart_values {
        let values = serde_saphyr::to_string(&out.chart_values).context("writing the chart values")?;
        std::fs::write(p, values).with_context(|| format!("writing {}", p.display()))?;
    }
    eprint!("{}", out.report());
    Ok(ExitCode::SUCCESS)
}

/// One input document: where it is (`FILE:LINE`, or the cluster), and
/// its content as JSON.
struct Input {
    at: String,
    value: Value,
}

/// The documents of the files (or stdin).
fn from_files(files: &[PathBuf]) -> Result<Vec<Input>> {
    anyhow::ensure!(
        !files.is_empty(),
        "give Kueue YAML files (or - for stdin), or --from-cluster"
    );
    let mut docs = Vec::new();
    for f in files {
        let text = if f.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
            s
        } else {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        };
        let name = if f.as_os_str() == "-" {
            "<stdin>".into()
        } else {
            f.display().to_string()
        };
        let found = documents(&name, &text)?;
        if found.is_empty() {
            bail!("{name}: nothing to import: no YAML document in it");
        }
        docs.extend(found);
    }
    Ok(docs)
}

/// The YAML documents of one file, each a mapping (an object); an error is
/// one line at the place it is about (`FILE:LINE:COLUMN: …`).
fn documents(file: &str, text: &str) -> Result<Vec<Input>> {
    split_documents(text)
        .iter()
        .map(|d| {
            let origin = DocOrigin {
                file,
                line_offset: d.line_offset,
            };
            let value = serde_saphyr::from_str::<Value>(d.text)
                .map_err(|e| anyhow::anyhow!("{}", saphyr_diagnostic(&e, ".", origin)))?;
            let at = format!("{file}:{}", d.line_offset + 1);
            if !value.is_object() {
                bail!(
                    "{at}:1: not a Kubernetes object: expected a YAML mapping with apiVersion and kind, found {}",
                    shape(&value)
                );
            }
            Ok(Input { at, value })
        })
        .collect()
}

/// What a document that is not a mapping is, in words.
fn shape(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text (a YAML string)",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The error for an input that gave no Sluice object and no Configuration,
/// at its first document.
fn nothing_to_import(docs: &[Input]) -> String {
    let what = |d: &Input| {
        let api_version = d.value["apiVersion"].as_str().unwrap_or("(no apiVersion)");
        let kind = d.value["kind"].as_str().unwrap_or("(no kind)");
        format!("{api_version} {kind}")
    };
    let Some(first) = docs.first() else {
        return "nothing to import: no Kueue object found".into();
    };
    let others = match docs.len() - 1 {
        0 => String::new(),
        n => format!(" (nor are the {n} other document(s))"),
    };
    format!(
        "{}: nothing to import: {} is not a Kueue {} or Configuration{others}",
        first.at,
        what(first),
        QUEUE_KINDS.join(", ")
    )
}

/// The kinds `--from-cluster` reads, with their plural.
const KINDS: [(&str, &str); 7] = [
    ("ResourceFlavor", "resourceflavors"),
    ("Topology", "topologies"),
    ("Cohort", "cohorts"),
    ("ClusterQueue", "clusterqueues"),
    ("LocalQueue", "localqueues"),
    ("WorkloadPriorityClass", "workloadpriorityclasses"),
    ("AdmissionCheck", "admissionchecks"),
];

/// The cluster's Kueue objects, in the newest version it serves, and
/// Kueue's Configuration from its ConfigMap when it can be read.
async fn from_cluster(kueue_config: &str) -> Result<Vec<Value>> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server (kubeconfig)")?;
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
    let version = version.context(
        "the API server serves no kueue.x-k8s.io/v1beta2 or v1beta1 API: Kueue's CRDs are not installed (nothing to import)",
    )?;
    let mut docs = Vec::new();
    for (kind, plural) in KINDS {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", version, kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural));
        match api.list(&ListParams::default()).await {
            Ok(list) => docs.extend(list.items.into_iter().map(|o| {
                let mut v = serde_json::to_value(o).unwrap_or_default();
                v["apiVersion"] = format!("kueue.x-k8s.io/{version}").into();
                v["kind"] = kind.into();
                v
            })),
            // A kind this Kueue does not have (Cohorts before 0.11, Topologies).
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).with_context(|| format!("listing Kueue's {kind}s ({version})")),
        }
    }
    docs.extend(configuration(&client, kueue_config).await);
    Ok(docs)
}

/// Kueue's ConfigMap, or a word on stderr why it is not read (it is
/// optional: the queues translate without it).
async fn configuration(client: &kube::Client, at: &str) -> Option<Value> {
    let Some((namespace, name)) = at.split_once('/') else {
        eprintln!("--kueue-config {at:?}: expected NAMESPACE/NAME; Kueue's Configuration is not read");
        return None;
    };
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.get(name).await {
        Ok(cm) => {
            let mut v = serde_json::to_value(cm).ok()?;
            v["apiVersion"] = "v1".into();
            v["kind"] = "ConfigMap".into();
            Some(v)
        }
        Err(e) => {
            eprintln!("Kueue's Configuration (ConfigMap {at}) is not read: {e}; give it as a file to translate it");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sluice_kinds::JobKind;

    /// `sluice controller`'s own flags, to parse what the importer gives.
    #[derive(Parser)]
    struct Controller {
        #[command(flatten)]
        args: crate::controller::ControllerArgs,
    }

    /// Every flag a Configuration can give is one `sluice controller` takes.
    #[test]
    fn the_flags_of_kueues_configuration_are_the_controllers() {
        let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/../import/tests/samples");
        for sample in [
            "configuration-v1beta1",
            "configuration-v1beta2",
            "hierarchical-cohorts-fair-sharing",
        ] {
            let path = std::path::PathBuf::from(format!("{samples}/{sample}.kueue.yaml"));
            let docs: Vec<_> = super::from_files(&[path])
                .unwrap()
                .into_iter()
                .map(|d| d.value)
                .collect();
            let out = sluice_import::import(&docs, false).unwrap();
            assert!(!out.flags.is_empty(), "{sample}");
            let argv = std::iter::once("controller".to_string()).chain(out.flags.iter().cloned());
            if let Err(e) = Controller::try_parse_from(argv) {
                panic!("{sample}: {:?}: {e}", out.flags);
            }
        }
    }

    /// The frameworks the importer keeps are the kinds the controller queues.
    #[test]
    fn the_importers_frameworks_are_the_controllers_integrations() {
        let mut controller: Vec<&str> = JobKind::ALL.iter().map(|k| k.flag_name()).collect();
        let mut importer = sluice_import::kueue::SLUICE_FRAMEWORKS.to_vec();
        controller.sort();
        importer.sort();
        assert_eq!(importer, controller);
    }
}
