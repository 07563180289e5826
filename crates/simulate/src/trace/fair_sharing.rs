//! The Trace's `spec.fairSharing`: how the engine shares what a cohort
//! tree lends, the one setting of a scenario that is the controller's
//! configuration rather than a manifest. Its names are those of Kueue's
//! Configuration `fairSharing`:
//!
//! ```yaml
//! fairSharing:
//!   enable: true                       # default; false: FairSharing::Off
//!   preemptionStrategies:              # default: both, in this order
//!   - LessThanOrEqualToFinalShare
//!   - LessThanInitialShare
//! ```
//!
//! Absent, the engine runs with its default, [`FairSharing::On`] with both
//! strategies, as the controller does. Cohorts and weights are not here:
//! they are the scenario's Cohort and ClusterQueue documents.

use serde::Deserialize;
use serde_saphyr::Spanned;
use sluice_scheduler::{FairShareStrategies, FairSharing};

use super::{Diagnostic, DocOrigin};

/// `spec.fairSharing`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairSharingEntry {
    /// `false` runs the engine with [`FairSharing::Off`]; the strategies
    /// are then not used.
    #[serde(default = "yes")]
    pub enable: bool,
    /// The fair-share preemption strategies, in the order they are tried;
    /// absent or empty: both (Kueue's default).
    #[serde(default)]
    pub preemption_strategies: Option<Spanned<Vec<Strategy>>>,
}

fn yes() -> bool {
    true
}

/// One of Kueue's fair-share preemption strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Strategy {
    LessThanOrEqualToFinalShare,
    LessThanInitialShare,
}

/// The lists Kueue accepts, and what each means to the engine.
const VALID: [(&[Strategy], FairShareStrategies); 3] = [
    (
        &[Strategy::LessThanOrEqualToFinalShare],
        FairShareStrategies::LessThanOrEqualToFinalShare,
    ),
    (
        &[Strategy::LessThanInitialShare],
        FairShareStrategies::LessThanInitialShare,
    ),
    (
        &[Strategy::LessThanOrEqualToFinalShare, Strategy::LessThanInitialShare],
        FairShareStrategies::Both,
    ),
];

/// The engine's setting for `spec.fairSharing`; a strategy list Kueue
/// would refuse (a repeat, the two in the other order) is an error at it.
pub fn read(entry: Option<&FairSharingEntry>, origin: DocOrigin<'_>) -> Result<FairSharing, Diagnostic> {
    let Some(entry) = entry else {
        return Ok(FairSharing::default());
    };
    let strategies = match &entry.preemption_strategies {
        None => FairShareStrategies::Both,
        Some(list) if list.value.is_empty() => FairShareStrategies::Both,
        Some(list) => match VALID.iter().find(|(valid, _)| *valid == list.value.as_slice()) {
            Some((_, s)) => *s,
            None => {
                let written = |l: &[Strategy]| format!("{l:?}").replace(['[', ']'], "");
                let valid: Vec<String> = VALID.iter().map(|(l, _)| format!("[{}]", written(l))).collect();
                return Err(origin.at(
                    list.referenced,
                    "spec.fairSharing.preemptionStrategies",
                    format!(
                        "[{}] is not a list Kueue accepts; use one of {}",
                        written(&list.value),
                        valid.join(", ")
                    ),
                ));
            }
        },
    };
    Ok(if entry.enable {
        FairSharing::On { strategies }
    } else {
        FairSharing::Off
    })
}
