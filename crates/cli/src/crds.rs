//! `sluice crds`: print the CRDs, or write one file per kind.
//!
//! ```text
//! sluice crds                    # every CRD as multi-document YAML on stdout
//! sluice crds --out-dir crds/    # crds/<plural>.sluice.dev.yaml, one per kind
//! ```
//!
//! The files in the repository's `crds/` are generated this way and checked
//! for drift by this module's test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

/// Arguments of `sluice crds`.
#[derive(Debug, Clone, clap::Args)]
pub struct CrdsArgs {
    /// Write one file per CRD (`<plural>.sluice.dev.yaml`) into this
    /// directory instead of printing them. The directory is created if
    /// missing; other files in it are left alone.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Runs `sluice crds`.
pub fn run(args: CrdsArgs) -> Result<ExitCode> {
    let CrdsArgs { out_dir } = args;
    match out_dir {
        Some(dir) => {
            for path in write_files(&dir)? {
                eprintln!("wrote {}", path.display());
            }
        }
        None => {
            let yaml = sluice_api::crd::all_to_yaml().context("rendering CRDs as YAML")?;
            std::io::stdout()
                .lock()
                .write_all(yaml.as_bytes())
                .context("writing to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The files `--out-dir` writes: (file name, contents), in a stable order.
pub fn rendered_files() -> Result<Vec<(String, String)>> {
    sluice_api::crd::all()
        .iter()
        .map(|crd| {
            let name = sluice_api::crd::file_name(crd);
            let yaml = sluice_api::crd::to_yaml(crd).with_context(|| format!("rendering {name}"))?;
            Ok((name, yaml))
        })
        .collect()
}

/// Writes every CRD into `dir`, returning the paths written.
pub fn write_files(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, yaml) in rendered_files()? {
        let path = dir.join(name);
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGENERATE: &str = "run: cargo run -p sluice-cli -- crds --out-dir crds";

    fn repo_crds_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds")
    }

    /// The committed `crds/` must be exactly what this build generates.
    #[test]
    fn committed_crds_match_generated() {
        let dir = repo_crds_dir();
        let mut problems = Vec::new();
        let files = rendered_files().unwrap();
        for (name, generated) in &files {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Err(e) => problems.push(format!("{}: cannot read ({e})", path.display())),
                Ok(committed) if &committed != generated => problems.push(format!(
                    "{}: differs from generated; {}",
                    path.display(),
                    first_difference(&committed, generated)
                )),
                Ok(_) => {}
            }
        }
        let expected: std::collections::BTreeSet<_> = files.iter().map(|(n, _)| n.clone()).collect();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".sluice.dev.yaml") && !expected.contains(&name) {
                problems.push(format!("{}: no longer generated; delete it", entry.path().display()));
            }
        }
        assert!(
            problems.is_empty(),
            "CRDs in crds/ are out of date ({REGENERATE}):\n{}",
            problems.join("\n")
        );
    }

    fn first_difference(committed: &str, generated: &str) -> String {
        let mut committed_lines = committed.lines();
        let mut generated_lines = generated.lines();
        let mut line = 1;
        loop {
            match (committed_lines.next(), generated_lines.next()) {
                (Some(a), Some(b)) if a == b => line += 1,
                (None, None) => return "line endings differ".to_string(),
                (a, b) => {
                    return format!(
                        "first difference at line {line}:\n  committed: {}\n  generated: {}",
                        a.unwrap_or("<end of file>"),
                        b.unwrap_or("<end of file>")
                    );
                }
            }
        }
    }

    #[test]
    fn stdout_stream_holds_every_file_in_order() {
        let stream = sluice_api::crd::all_to_yaml().unwrap();
        let joined: String = rendered_files()
            .unwrap()
            .into_iter()
            .map(|(_, y)| format!("---\n{y}"))
            .collect();
        assert_eq!(stream, joined);
        assert_eq!(stream.matches("kind: CustomResourceDefinition").count(), 6);
    }

    #[test]
    fn out_dir_writes_one_file_per_kind() {
        let dir = std::env::temp_dir().join(format!("sluice-crds-test-{}", std::process::id()));
        let written = write_files(&dir).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "resourceflavors.sluice.dev.yaml",
                "clusterqueues.sluice.dev.yaml",
                "cohorts.sluice.dev.yaml",
                "localqueues.sluice.dev.yaml",
                "workloadpriorityclasses.sluice.dev.yaml",
                "workloads.sluice.dev.yaml",
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
