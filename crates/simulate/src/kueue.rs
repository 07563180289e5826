//! Kueue documents in a scenario: each one is replaced by the Sluice
//! object `sluice import kueue` translates it to (`sluice-import`), so a
//! cluster's Kueue manifests simulate as they are. Kueue's other kinds
//! (AdmissionChecks, Topologies, a Configuration) give no object and leave
//! the scenario; the importer's notes, what is not copied as it is, come
//! back to be printed. Kueue's Configuration sets the fair sharing, unless
//! the Trace does.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_import::{import, is_kueue};
use sluice_scheduler::{FairShareStrategies, FairSharing};

use super::scenario::Document;
use super::trace::Diagnostic;

/// What the Kueue documents of a scenario became.
#[derive(Debug, Default)]
pub struct Converted {
    /// The translation of each Kueue document, by its position among the
    /// scenario's documents; `None`: it gives no Sluice object.
    texts: BTreeMap<usize, Option<String>>,
    /// The importer's notes, one a line.
    pub notes: Vec<String>,
    /// Fair sharing as Kueue's Configuration sets it, if there is one.
    pub fair_sharing: Option<FairSharing>,
}

/// Translates the Kueue documents among `docs`. Errors (a document the
/// importer cannot read, a translation Sluice would refuse) are at the
/// Kueue document's first line.
pub fn convert(file: &str, docs: &[Document<'_>]) -> Result<Converted, Vec<Diagnostic>> {
    let kueue: Vec<(usize, Value)> = (docs.iter().enumerate())
        .filter_map(|(i, d)| Some((i, serde_saphyr::from_str::<Value>(d.text).ok()?)))
        .filter(|(_, v)| is_kueue(v))
        .collect();
    if kueue.is_empty() {
        return Ok(Converted::default());
    }
    let values: Vec<Value> = kueue.iter().map(|(_, v)| v.clone()).collect();
    let at = |k: usize, message: String| Diagnostic {
        file: file.to_string(),
        line: docs[kueue[k].0].line_offset + 1,
        column: 1,
        path: String::new(),
        message,
    };
    let imported = import(&values, false).map_err(|e| vec![at(e.document(&values).unwrap_or(0), e.to_string())])?;
    let mut texts: BTreeMap<usize, Option<String>> = kueue.iter().map(|(i, _)| (*i, None)).collect();
    for (k, text) in imported.origins.iter().zip(&imported.documents) {
        texts.insert(kueue[*k].0, Some(text.clone()));
    }
    let fair_sharing = match &imported.fair_sharing {
        Some(f) => {
            let configuration = (values.iter())
                .position(|v| v["kind"] == "Configuration" || v["kind"] == "ConfigMap")
                .unwrap_or(0);
            Some(engine_fair_sharing(f).map_err(|m| vec![at(configuration, m)])?)
        }
        None => None,
    };
    Ok(Converted {
        texts,
        notes: imported.notes.iter().map(ToString::to_string).collect(),
        fair_sharing,
    })
}

impl Converted {
    /// The scenario's documents with each Kueue document replaced by its
    /// translation (at the same place in the file), or left out.
    pub fn apply<'a>(&'a self, docs: Vec<Document<'a>>) -> Vec<Document<'a>> {
        (docs.into_iter().enumerate())
            .filter_map(|(i, doc)| match self.texts.get(&i) {
                None => Some(doc),
                Some(None) => None,
                Some(Some(text)) => Some(Document {
                    text,
                    line_offset: doc.line_offset,
                }),
            })
            .collect()
    }
}

/// Kueue's fair sharing as the engine's; a strategy list Kueue would
/// refuse is an error, as in a Trace's `spec.fairSharing`.
fn engine_fair_sharing(f: &sluice_import::FairSharing) -> Result<FairSharing, String> {
    if !f.enabled {
        return Ok(FairSharing::Off);
    }
    let names: Vec<&str> = f.strategies.iter().map(String::as_str).collect();
    let strategies = match names.as_slice() {
        [] | ["LessThanOrEqualToFinalShare", "LessThanInitialShare"] => FairShareStrategies::Both,
        ["LessThanOrEqualToFinalShare"] => FairShareStrategies::LessThanOrEqualToFinalShare,
        ["LessThanInitialShare"] => FairShareStrategies::LessThanInitialShare,
        other => {
            return Err(format!(
                "Kueue's Configuration: fairSharing.preemptionStrategies {other:?} is not a list Kueue accepts"
            ));
        }
    };
    Ok(FairSharing::On { strategies })
}
