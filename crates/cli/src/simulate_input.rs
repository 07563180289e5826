//! What `sluice simulate` reads: one scenario file, or Kueue's queues
//! (`--kueue`) and a Trace (`--trace`) joined into one scenario. The
//! simulator translates the Kueue documents itself
//! (`sluice_simulate::kueue`); this puts each of its diagnostics back in
//! the file, and at the line, it is about.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sluice_simulate::trace::Diagnostic;

/// A scenario's text, and the files it was joined from.
pub struct Input {
    /// How messages name it: the file, or `KUEUE + TRACE`.
    pub name: String,
    pub text: String,
    /// Each file, with the number of lines of `text` before it.
    parts: Vec<(String, u32)>,
}

/// Reads `scenario`, or `kueue` and `trace` joined (clap makes sure one of
/// the two is given).
pub fn read(scenario: Option<PathBuf>, kueue: Option<PathBuf>, trace: Option<PathBuf>) -> Result<Input> {
    match (scenario, kueue, trace) {
        (Some(path), _, _) => {
            let (file, text) = read_file(&path, "scenario")?;
            Ok(Input {
                name: file.clone(),
                text,
                parts: vec![(file, 0)],
            })
        }
        (None, Some(kueue), Some(trace)) => {
            let (kueue_file, mut text) = read_file(&kueue, "--kueue")?;
            let (trace_file, trace_text) = read_file(&trace, "--trace")?;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("---\n");
            let before_trace = text.lines().count() as u32;
            text.push_str(&trace_text);
            Ok(Input {
                name: format!("{kueue_file} + {trace_file}"),
                text,
                parts: vec![(kueue_file, 0), (trace_file, before_trace)],
            })
        }
        _ => anyhow::bail!("give a scenario file, or --kueue and --trace"),
    }
}

fn read_file(path: &Path, what: &str) -> Result<(String, String)> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {what} {file}"))?;
    Ok((file, text))
}

impl Input {
    /// The diagnostic with the file it is about, and its line there.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if let Some((file, before)) = self.parts.iter().rev().find(|(_, before)| *before < d.line) {
            d.file = file.clone();
            d.line -= before;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_of_joined_files_are_placed_in_theirs() {
        let dir = std::env::temp_dir().join(format!("sluice-sim-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (kueue, trace) = (dir.join("k.yaml"), dir.join("t.yaml"));
        std::fs::write(&kueue, "a: 1\nb: 2").unwrap();
        std::fs::write(&trace, "c: 3\nd: 4\n").unwrap();
        let input = read(None, Some(kueue.clone()), Some(trace.clone())).unwrap();
        assert_eq!(input.text, "a: 1\nb: 2\n---\nc: 3\nd: 4\n");
        let at = |line| {
            let d = Diagnostic {
                file: input.name.clone(),
                line,
                column: 1,
                path: String::new(),
                message: String::new(),
            };
            let d = input.locate(d);
            (d.file, d.line)
        };
        let (k, t) = (kueue.display().to_string(), trace.display().to_string());
        assert_eq!([at(2), at(4), at(5)], [(k, 2), (t.clone(), 1), (t, 2)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
