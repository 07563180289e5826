//! The Trace's fair-sharing settings: cohort trees, fair-sharing weights,
//! and whether fair sharing is on.
//!
//! Sluice's manifests have no Cohort kind and no `fairSharing` field yet,
//! so a scenario declares them in its Trace, beside the other things a
//! cluster's manifests do not say (its nodes):
//!
//! ```yaml
//! fairSharing: {enable: false}      # optional; default on
//! cohorts:
//! - name: research
//!   parent: org                     # optional: a cohort tree
//!   resourceGroups: [...]           # optional: the cohort's own quota, as a ClusterQueue's
//!   fairSharing: {weight: 2}        # optional; default 1
//! clusterQueues:
//! - name: team-a                    # a ClusterQueue of the scenario
//!   fairSharing: {weight: 0.5}
//! ```
//!
//! A weight is a number or a Kubernetes quantity (`0.5`, `500m`), at least
//! 0, kept in thousandths ([`Weight`]). A cohort's `resourceGroups` are
//! read, checked and converted by a ClusterQueue's rules (its schema for
//! unknown fields, `validate()`, the controller's conversion), so they mean
//! what a queue's quota means. [`expand`] refuses what could not mean what
//! was written: a cycle of parents (the engine's own check), a cohort
//! declared twice or with nothing under it, a weight below 0, a flavor or
//! ClusterQueue the scenario does not have.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_saphyr::Spanned;
use sluice_api::strict;
use sluice_api::v1alpha1::{self as api, ResourceGroup};
use sluice_api::validation::{Validate, is_dns1123_subdomain};
use sluice_convert::adapter;
use sluice_scheduler::{ClusterQueueSpec, CohortSpec, Engine, FairSharing, ResourceGroupSpec, Weight};

use super::{Amount, Diagnostic, DocOrigin, TraceDoc};
use crate::checks::{adapter_field, diagnostic, locate, suggestion};
use crate::scenario::Document;

/// `spec.fairSharing`: the engine-wide switch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairSharingEntry {
    /// `false` runs the engine with [`FairSharing::Off`].
    #[serde(default = "yes")]
    pub enable: bool,
}

fn yes() -> bool {
    true
}

/// A Cohort: a node of a cohort tree, with its own quota and weight.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CohortEntry {
    pub name: Spanned<String>,
    #[serde(default)]
    pub parent: Option<Spanned<String>>,
    /// Same shape as a ClusterQueue's `spec.resourceGroups`.
    #[serde(default)]
    pub resource_groups: Vec<ResourceGroup>,
    #[serde(default)]
    pub fair_sharing: Option<WeightEntry>,
}

/// A ClusterQueue's fair-sharing weight.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueEntry {
    pub name: Spanned<String>,
    #[serde(default)]
    pub fair_sharing: Option<WeightEntry>,
}

/// `fairSharing: {weight: …}` of a cohort or ClusterQueue.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightEntry {
    /// Absent: 1.
    #[serde(default)]
    pub weight: Option<Spanned<Amount>>,
}

/// What the Trace's fair-sharing settings give the engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FairSetup {
    /// In file order.
    pub cohorts: Vec<CohortSpec>,
    pub fair_sharing: FairSharing,
}

/// Reads `spec.fairSharing`, `spec.cohorts` and `spec.clusterQueues`,
/// setting the weights of `cluster_queues` (the scenario's, with their
/// `spec.cohort` already read).
pub fn expand<'a>(
    trace: &TraceDoc,
    flavors: &BTreeSet<String>,
    cluster_queues: impl Iterator<Item = &'a mut ClusterQueueSpec>,
    doc: &Document<'_>,
    origin: DocOrigin<'_>,
) -> Result<FairSetup, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let at = |path: String, message: String| diagnostic(origin, locate(doc, &path), &path, message);
    let mut cluster_queues: Vec<&mut ClusterQueueSpec> = cluster_queues.collect();
    let spec = &trace.spec;

    // A queue or cohort that names a cohort puts something under it.
    let mut named: BTreeSet<&str> = cluster_queues.iter().filter_map(|c| c.cohort.as_deref()).collect();
    named.extend(
        spec.cohorts
            .iter()
            .filter_map(|c| Some(c.parent.as_ref()?.value.as_str())),
    );
    // The document as written, for unknown fields in cohorts' quota.
    let raw: Option<serde_json::Value> = (spec.cohorts.iter().any(|c| !c.resource_groups.is_empty()))
        .then(|| serde_saphyr::from_str(doc.text).ok())
        .flatten();
    let mut cohorts = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, c) in spec.cohorts.iter().enumerate() {
        let p = format!("spec.cohorts[{i}]");
        let name = &c.name.value;
        let before = errors.len();
        if !is_dns1123_subdomain(name) {
            errors.push(at(
                format!("{p}.name"),
                format!("cohort {name:?} is not a DNS-1123 subdomain"),
            ));
        } else if !seen.insert(name.as_str()) {
            errors.push(at(format!("{p}.name"), format!("cohort {name} is declared twice")));
        } else if !named.contains(name.as_str()) {
            let named: BTreeSet<String> = named.iter().map(|n| n.to_string()).collect();
            errors.push(at(
                format!("{p}.name"),
                format!(
                    "cohort {name} has nothing under it: no ClusterQueue names it in spec.cohort and no cohort as its parent{}",
                    suggestion(name, named.iter())
                ),
            ));
        }
        if let Some(parent) = &c.parent
            && !is_dns1123_subdomain(&parent.value)
        {
            let message = format!("cohort {name}: parent {:?} is not a DNS-1123 subdomain", parent.value);
            errors.push(at(format!("{p}.parent"), message));
        }
        let groups = raw
            .as_ref()
            .map_or(&serde_json::Value::Null, |v| &v["spec"]["cohorts"][i]["resourceGroups"]);
        let resource_groups = quota(name, &c.resource_groups, groups, &p, flavors, &at, &mut errors);
        let fair_weight = weight(c.fair_sharing.as_ref(), &p, &mut errors, origin);
        if errors.len() == before {
            cohorts.push(CohortSpec {
                name: name.clone(),
                parent: c.parent.as_ref().map(|p| p.value.clone()),
                resource_groups,
                fair_weight,
            });
        }
    }
    // Cycles, by the engine's own rule; the engine names the chain.
    let mut tree = Engine::default();
    for c in &cohorts {
        if let Err(e) = tree.upsert_cohort(c.clone()) {
            let i = spec.cohorts.iter().position(|x| x.name.value == c.name).unwrap_or(0);
            errors.push(at(format!("spec.cohorts[{i}].parent"), e.to_string()));
        }
    }

    let names: BTreeSet<String> = cluster_queues.iter().map(|c| c.name.clone()).collect();
    let mut weighted = BTreeSet::new();
    for (i, q) in spec.cluster_queues.iter().enumerate() {
        let p = format!("spec.clusterQueues[{i}]");
        let w = weight(q.fair_sharing.as_ref(), &p, &mut errors, origin);
        let name = &q.name.value;
        let Some(cq) = cluster_queues.iter_mut().find(|c| c.name == *name) else {
            let message = format!(
                "`{name}` is not a ClusterQueue of the scenario{}",
                suggestion(name, names.iter())
            );
            errors.push(origin.at(q.name.referenced, format!("{p}.name"), message));
            continue;
        };
        if !weighted.insert(name.as_str()) {
            let message = format!("ClusterQueue {name} is given a weight twice");
            errors.push(origin.at(q.name.referenced, format!("{p}.name"), message));
        }
        cq.fair_weight = w;
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let fair_sharing = match &spec.fair_sharing {
        Some(FairSharingEntry { enable: false }) => FairSharing::Off,
        _ => FairSharing::default(),
    };
    Ok(FairSetup { cohorts, fair_sharing })
}

/// A weight at `{path}.fairSharing.weight`: 1 when absent, never negative.
fn weight(entry: Option<&WeightEntry>, path: &str, errors: &mut Vec<Diagnostic>, origin: DocOrigin<'_>) -> Weight {
    let Some(w) = entry.and_then(|e| e.weight.as_ref()) else {
        return Weight::default();
    };
    if w.value.0 < 0 {
        errors.push(origin.at(
            w.referenced,
            format!("{path}.fairSharing.weight"),
            format!("a weight must be at least 0, got {}", w.value.0 as f64 / 1000.0),
        ));
    }
    Weight(w.value.0.max(0))
}

/// A cohort's own quota, read with a ClusterQueue's rules: `raw` is its
/// `resourceGroups` as written (for unknown fields), `p` its path.
fn quota(
    name: &str,
    groups: &[ResourceGroup],
    raw: &serde_json::Value,
    p: &str,
    flavors: &BTreeSet<String>,
    at: &dyn Fn(String, String) -> Diagnostic,
    errors: &mut Vec<Diagnostic>,
) -> Vec<ResourceGroupSpec> {
    if groups.is_empty() {
        return Vec::new();
    }
    // The queue's paths (`spec.resourceGroups…`) become the cohort's.
    let here = |path: &str| path.replacen("spec.resourceGroups", &format!("{p}.resourceGroups"), 1);
    let before = errors.len();
    if let Some(crd) = strict::crd_of("ClusterQueue") {
        let object = serde_json::json!({"spec": {"resourceGroups": raw}});
        for u in strict::unknown_fields(&crd, &object) {
            let mut message = format!("cohort {name}: unknown field `{}`", u.key);
            if let Some(s) = &u.suggestion {
                message.push_str(&format!(", did you mean `{s}`?"));
            }
            errors.push(at(here(&u.path), message));
        }
    }
    // A cohort may lend and borrow: validated as a queue in a cohort.
    let cq = api::ClusterQueue::new(
        name,
        api::ClusterQueueSpec {
            resource_groups: groups.to_vec(),
            cohort: Some(name.to_string()),
            ..api::ClusterQueueSpec::default()
        },
    );
    for v in cq
        .validate()
        .into_iter()
        .filter(|v| v.path.starts_with("spec.resourceGroups"))
    {
        errors.push(at(here(&v.path), format!("cohort {name}: {}", v.message)));
    }
    for (g, group) in groups.iter().enumerate() {
        for (f, flavor) in group.flavors.iter().enumerate() {
            if !flavors.contains(&flavor.name) {
                let message = format!(
                    "cohort {name}: flavor `{}` is not a ResourceFlavor of the scenario{}",
                    flavor.name,
                    suggestion(&flavor.name, flavors.iter())
                );
                errors.push(at(format!("{p}.resourceGroups[{g}].flavors[{f}].name"), message));
            }
        }
    }
    if errors.len() > before {
        return Vec::new();
    }
    match adapter::cluster_queue(&cq) {
        Ok(spec) => spec.resource_groups,
        Err(e) => {
            let path = adapter_field(&e)
                .map(here)
                .unwrap_or_else(|| format!("{p}.resourceGroups"));
            errors.push(at(path, format!("cohort {name}: {}", here(&e.to_string()))));
            Vec::new()
        }
    }
}
