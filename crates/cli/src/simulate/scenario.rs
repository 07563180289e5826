//! Loading a scenario file: the admin's Sluice manifests plus one `Trace`.
//!
//! The file is split into YAML documents here (not by the api crate's
//! parser) so that every document keeps its first line: errors from any
//! document then carry file positions. Sluice kinds are deserialized into the
//! api crate's types and checked with their `validate()`; the `Trace` is
//! the simulator's own kind ([`super::trace`]). Other kinds (Jobs, Namespaces)
//! are ignored, so a cluster's manifests can be pasted in as they are.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor, WorkloadPriorityClass};
use sluice_api::validation::Validate;

use super::sim::Scenario;
use super::trace::{self, Diagnostic, DocOrigin, ScenarioNames};

/// One YAML document of a multi-document file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    pub text: &'a str,
    /// Lines of the file before the document's first line.
    pub line_offset: u32,
}

/// Splits a YAML stream at `---` / `...` marker lines. A marker followed by
/// content on the same line (`--- {a: 1}`) keeps that content in its document.
pub fn split_documents(text: &str) -> Vec<Document<'_>> {
    let mut docs = Vec::new();
    let mut start = 0usize; // byte offset of the current document
    let mut start_line = 0u32;
    let mut offset = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_start = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
        let is_end = bare == "..." || bare.starts_with("... ");
        if is_start || is_end {
            if offset > start {
                docs.push(Document {
                    text: &text[start..offset],
                    line_offset: start_line,
                });
            }
            if is_start && bare.len() > 3 {
                // Content after the marker: keep the line, blank the marker.
                start = offset + 3;
                start_line = n as u32;
            } else {
                start = offset + line.len();
                start_line = n as u32 + 1;
            }
        }
        offset += line.len();
    }
    if text.len() > start {
        docs.push(Document {
            text: &text[start..],
            line_offset: start_line,
        });
    }
    docs.retain(|d| {
        d.text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    });
    docs
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

fn parse_doc<T: DeserializeOwned>(doc: &Document<'_>, origin: DocOrigin<'_>) -> Result<T, Diagnostic> {
    let mut path = String::new();
    serde_saphyr::with_deserializer_from_str(doc.text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| trace::saphyr_diagnostic(&e, &path, origin))
}

fn violations(
    kind: &str,
    name: &str,
    v: Vec<sluice_api::validation::Violation>,
    origin: DocOrigin<'_>,
) -> Vec<Diagnostic> {
    v.into_iter()
        .map(|v| Diagnostic {
            file: origin.file.into(),
            line: origin.line_offset + 1,
            column: 1,
            path: v.path,
            message: format!("{kind} {name}: {}", v.message),
        })
        .collect()
}

/// Reads a scenario; every problem found is returned, none is skipped.
pub fn load(file: &str, text: &str) -> Result<Scenario, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let mut flavors = Vec::new();
    let mut cluster_queues = Vec::new();
    let mut local_queues = Vec::new();
    let mut priority_classes: BTreeMap<String, i32> = BTreeMap::new();
    let mut trace_doc = None;

    for doc in split_documents(text) {
        let origin = DocOrigin {
            file,
            line_offset: doc.line_offset,
        };
        let head: Head = match parse_doc(&doc, origin) {
            Ok(h) => h,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let sluice = head
            .api_version
            .as_deref()
            .is_some_and(|v| v.starts_with("sluice.dev/"));
        if !sluice {
            continue;
        }
        macro_rules! sluice_kind {
            ($ty:ty, $kind:literal) => {
                match parse_doc::<$ty>(&doc, origin) {
                    Ok(obj) => {
                        let name = obj.metadata.name.clone().unwrap_or_default();
                        let v = obj.validate();
                        if v.is_empty() {
                            Some(obj)
                        } else {
                            errors.extend(violations($kind, &name, v, origin));
                            None
                        }
                    }
                    Err(e) => {
                        errors.push(e);
                        None
                    }
                }
            };
        }
        match head.kind.as_deref().unwrap_or("") {
            "ResourceFlavor" => flavors.extend(sluice_kind!(ResourceFlavor, "ResourceFlavor")),
            "ClusterQueue" => cluster_queues.extend(sluice_kind!(ClusterQueue, "ClusterQueue")),
            "LocalQueue" => local_queues.extend(sluice_kind!(LocalQueue, "LocalQueue")),
            "WorkloadPriorityClass" => {
                if let Some(pc) = sluice_kind!(WorkloadPriorityClass, "WorkloadPriorityClass") {
                    priority_classes.insert(pc.metadata.name.clone().unwrap_or_default(), pc.spec.value);
                }
            }
            "Trace" => match trace::parse_trace(doc.text, origin) {
                Ok(t) if trace_doc.is_none() => trace_doc = Some((t, doc.line_offset)),
                Ok(_) => errors.push(Diagnostic {
                    file: file.into(),
                    line: doc.line_offset + 1,
                    column: 1,
                    path: String::new(),
                    message: "a scenario has exactly one Trace document; this is the second".into(),
                }),
                Err(e) => errors.push(e),
            },
            // Workloads and future kinds: not part of a scenario's setup.
            _ => {}
        }
    }

    let mut lq_keys = BTreeSet::new();
    for lq in &local_queues {
        lq_keys.insert(format!(
            "{}/{}",
            lq.metadata.namespace.as_deref().unwrap_or("default"),
            lq.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let Some((trace_doc, trace_offset)) = trace_doc else {
        if errors.is_empty() {
            errors.push(Diagnostic {
                file: file.into(),
                line: 1,
                column: 1,
                path: String::new(),
                message: "no Trace document (apiVersion: sluice.dev/v1alpha1, kind: Trace): nothing to simulate".into(),
            });
        }
        return Err(errors);
    };
    let origin = DocOrigin {
        file,
        line_offset: trace_offset,
    };
    let names = ScenarioNames {
        local_queues: &lq_keys,
        priority_classes: &priority_classes,
    };
    let workloads = match trace::expand(&trace_doc, &names, origin) {
        Ok(w) => w,
        Err(e) => {
            errors.extend(e);
            Vec::new()
        }
    };
    let converted = convert::all(&flavors, &cluster_queues, &local_queues);
    let (flavor_specs, cq_specs, lq_specs) = match converted {
        Ok(x) => x,
        Err(msgs) => {
            errors.extend(msgs.into_iter().map(|(path, message)| Diagnostic {
                file: file.into(),
                line: 1,
                column: 1,
                path,
                message,
            }));
            return Err(errors);
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let name = trace_doc.metadata.and_then(|m| m.name).unwrap_or_else(|| {
        std::path::Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(Scenario {
        name,
        flavors: flavor_specs,
        cluster_queues: cq_specs,
        local_queues: lq_specs,
        workloads,
    })
}

/// CRD → engine conversion.
///
/// TEMPORARY and private: the controller's adapter
/// (`sluice_controller::adapter`) is the conversion of record; this copy
/// exists only until it lands, then these calls go to the adapter.
mod convert {
    use k8s_openapi::api::core::v1::{Taint, Toleration};
    use sluice_api::v1alpha1 as api;
    use sluice_scheduler as eng;

    type Errors = Vec<(String, String)>;
    type All = (
        Vec<eng::FlavorSpec>,
        Vec<eng::ClusterQueueSpec>,
        Vec<eng::LocalQueueSpec>,
    );

    fn effect(e: &str) -> eng::TaintEffect {
        match e {
            "NoExecute" => eng::TaintEffect::NoExecute,
            "PreferNoSchedule" => eng::TaintEffect::PreferNoSchedule,
            _ => eng::TaintEffect::NoSchedule,
        }
    }

    fn taint(t: &Taint) -> eng::Taint {
        eng::Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: effect(&t.effect),
        }
    }

    fn toleration(t: &Toleration) -> eng::Toleration {
        eng::Toleration {
            key: t.key.clone().filter(|k| !k.is_empty()),
            operator: match t.operator.as_deref() {
                Some("Exists") => eng::TolerationOperator::Exists,
                _ => eng::TolerationOperator::Equal,
            },
            value: t.value.clone(),
            effect: t.effect.as_deref().filter(|e| !e.is_empty()).map(effect),
        }
    }

    fn stop(s: api::StopPolicy) -> eng::StopPolicy {
        match s {
            api::StopPolicy::None => eng::StopPolicy::None,
            api::StopPolicy::Hold => eng::StopPolicy::Hold,
            api::StopPolicy::HoldAndDrain => eng::StopPolicy::HoldAndDrain,
        }
    }

    fn milli(path: String, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, errors: &mut Errors) -> i64 {
        match sluice_api::quantity::parse_milli(&path, &q.0) {
            Ok(v) => i64::try_from(v).unwrap_or_else(|_| {
                errors.push((path, format!("quantity {:?} is too large", q.0)));
                0
            }),
            Err(e) => {
                errors.push((path, e.to_string()));
                0
            }
        }
    }

    pub fn all(
        flavors: &[api::ResourceFlavor],
        cqs: &[api::ClusterQueue],
        lqs: &[api::LocalQueue],
    ) -> Result<All, Errors> {
        let mut errors = Errors::new();
        let f = flavors
            .iter()
            .map(|rf| eng::FlavorSpec {
                name: rf.metadata.name.clone().unwrap_or_default(),
                node_labels: rf.spec.node_labels.clone(),
                taints: rf.spec.node_taints.iter().map(taint).collect(),
                tolerations: rf.spec.tolerations.iter().map(toleration).collect(),
            })
            .collect();
        let mut c = Vec::new();
        for cq in cqs {
            let name = cq.metadata.name.clone().unwrap_or_default();
            let s = &cq.spec;
            let mut groups = Vec::new();
            for (g, rg) in s.resource_groups.iter().enumerate() {
                let mut fl = Vec::new();
                for (fi, fq) in rg.flavors.iter().enumerate() {
                    let mut resources = Vec::new();
                    for (ri, rq) in fq.resources.iter().enumerate() {
                        let p = format!("ClusterQueue {name}: spec.resourceGroups[{g}].flavors[{fi}].resources[{ri}]");
                        resources.push(eng::ResourceQuotaSpec {
                            resource: rq.name.clone(),
                            nominal: milli(format!("{p}.nominalQuota"), &rq.nominal_quota, &mut errors),
                            borrowing_limit: rq
                                .borrowing_limit
                                .as_ref()
                                .map(|q| milli(format!("{p}.borrowingLimit"), q, &mut errors)),
                            lending_limit: rq
                                .lending_limit
                                .as_ref()
                                .map(|q| milli(format!("{p}.lendingLimit"), q, &mut errors)),
                        });
                    }
                    fl.push(eng::FlavorQuotaSpec {
                        flavor: fq.name.clone(),
                        resources,
                    });
                }
                groups.push(eng::ResourceGroupSpec {
                    covered_resources: rg.covered_resources.clone(),
                    flavors: fl,
                });
            }
            let pre = &s.preemption;
            c.push(eng::ClusterQueueSpec {
                name,
                cohort: s.cohort.clone(),
                strategy: match s.queueing_strategy {
                    api::QueueingStrategy::StrictFifo => eng::QueueingStrategy::StrictFifo,
                    api::QueueingStrategy::BestEffortFifo => eng::QueueingStrategy::BestEffortFifo,
                },
                resource_groups: groups,
                preemption: eng::PreemptionPolicy {
                    within_cluster_queue: match pre.within_cluster_queue {
                        api::WithinClusterQueue::Never => eng::WithinClusterQueue::Never,
                        api::WithinClusterQueue::LowerPriority => eng::WithinClusterQueue::LowerPriority,
                        api::WithinClusterQueue::LowerOrNewerEqualPriority => {
                            eng::WithinClusterQueue::LowerOrNewerEqualPriority
                        }
                    },
                    reclaim_within_cohort: match pre.reclaim_within_cohort {
                        api::ReclaimWithinCohort::Never => eng::ReclaimWithinCohort::Never,
                        api::ReclaimWithinCohort::LowerPriority => eng::ReclaimWithinCohort::LowerPriority,
                        api::ReclaimWithinCohort::Any => eng::ReclaimWithinCohort::Any,
                    },
                    borrow_within_cohort: match pre.borrow_within_cohort.policy {
                        api::BorrowWithinCohortPolicy::Never => eng::BorrowWithinCohort::Never,
                        api::BorrowWithinCohortPolicy::LowerPriority => eng::BorrowWithinCohort::LowerPriority {
                            max_priority_threshold: pre.borrow_within_cohort.max_priority_threshold,
                        },
                    },
                },
                min_runtime: s.min_runtime_seconds.unwrap_or(0).saturating_mul(1000),
                stop_policy: stop(s.stop_policy),
            });
        }
        let l = lqs
            .iter()
            .map(|lq| eng::LocalQueueSpec {
                key: format!(
                    "{}/{}",
                    lq.metadata.namespace.as_deref().unwrap_or("default"),
                    lq.metadata.name.as_deref().unwrap_or_default()
                ),
                cluster_queue: lq.spec.cluster_queue.clone(),
                stop_policy: stop(lq.spec.stop_policy),
            })
            .collect();
        if errors.is_empty() { Ok((f, c, l)) } else { Err(errors) }
    }
}
