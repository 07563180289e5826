//! An import as people read it: the Sluice manifests as one YAML stream,
//! and a report of the notes and of the controller settings. `sluice
//! import kueue` prints these (manifests on stdout, report on stderr), and
//! the golden tests compare them.

use serde_json::Value;

use crate::kueue::Import;

impl Import {
    /// The Sluice objects as a multi-document YAML stream, each document
    /// starting with `---`; empty without objects.
    pub fn manifests(&self) -> String {
        let mut out = String::new();
        for document in &self.documents {
            out.push_str("---\n");
            out.push_str(document.trim_end());
            out.push('\n');
        }
        out
    }

    /// The notes, one a line, then the `sluice controller` flags and chart
    /// values of Kueue's Configuration (when there was one), then a count.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for note in &self.notes {
            out.push_str(&format!("{note}\n"));
        }
        if !self.flags.is_empty() {
            out.push_str("sluice controller flags for Kueue's Configuration:\n");
            for flag in &self.flags {
                out.push_str(&format!("  {flag}\n"));
            }
            out.push_str("the same as chart values (helm install -f):\n");
            for line in yaml(&self.chart_values).lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out.push_str(&format!(
            "{} Sluice object(s), {} note(s)\n",
            self.objects.len(),
            self.notes.len()
        ));
        out
    }
}

/// A JSON value as YAML. The values are serde_json's, which always
/// serialize; a failure would be a bug in the YAML writer, shown inline.
fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|e| format!("# cannot write YAML: {e}\n"))
}
