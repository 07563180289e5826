//! Validation of Sluice's own kinds: the api crate's `validate()` (the rule
//! of record, since CEL rules may be dropped by the API server) plus the
//! update rules that need the old object, and a Cohort's parent chain,
//! which needs the other Cohorts (from the cache).

use std::collections::{BTreeMap, BTreeSet};

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_api::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Validate, Workload, WorkloadPriorityClass};

mod selection;

use crate::cache::ClusterView;
use crate::config::WebhookConfig;

/// The API group of Sluice's kinds.
pub const GROUP: &str = "sluice.dev";
/// Their version.
pub const VERSION: &str = "v1alpha1";

/// Sluice's kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SluiceKind {
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    WorkloadPriorityClass,
    Workload,
}

impl SluiceKind {
    pub const ALL: [SluiceKind; 6] = [
        SluiceKind::ClusterQueue,
        SluiceKind::Cohort,
        SluiceKind::LocalQueue,
        SluiceKind::ResourceFlavor,
        SluiceKind::WorkloadPriorityClass,
        SluiceKind::Workload,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            Self::ClusterQueue => "ClusterQueue",
            Self::Cohort => "Cohort",
            Self::LocalQueue => "LocalQueue",
            Self::ResourceFlavor => "ResourceFlavor",
            Self::WorkloadPriorityClass => "WorkloadPriorityClass",
            Self::Workload => "Workload",
        }
    }

    /// The plural resource name.
    pub fn plural(self) -> &'static str {
        match self {
            Self::ClusterQueue => "clusterqueues",
            Self::Cohort => "cohorts",
            Self::LocalQueue => "localqueues",
            Self::ResourceFlavor => "resourceflavors",
            Self::WorkloadPriorityClass => "workloadpriorityclasses",
            Self::Workload => "workloads",
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Self::ClusterQueue => "/validate/clusterqueues",
            Self::Cohort => "/validate/cohorts",
            Self::LocalQueue => "/validate/localqueues",
            Self::ResourceFlavor => "/validate/resourceflavors",
            Self::WorkloadPriorityClass => "/validate/workloadpriorityclasses",
            Self::Workload => "/validate/workloads",
        }
    }

    pub fn namespaced(self) -> bool {
        matches!(self, Self::LocalQueue | Self::Workload)
    }
}

/// Decodes the request's objects as `K`.
fn decode<K: DeserializeOwned>(obj: &DynamicObject, which: &str, kind: SluiceKind) -> Result<K, String> {
    let value = serde_json::to_value(obj).map_err(|e| format!("{which}: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("{which}: not a valid {GROUP}/{VERSION} {}: {e}", kind.kind()))
}

/// The object's fields other than metadata (which `data` never holds) and
/// status: what a user writes.
fn without_status(data: &Value) -> Value {
    match data {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "status")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What the rules found in a CREATE or UPDATE of a Sluice object.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Every reason to deny it, each naming its field.
    pub denials: Vec<String>,
    /// What could not be checked, and what will not work as the writer
    /// may expect (a ClusterQueue that does not serve a LocalQueue's
    /// namespace).
    pub warnings: Vec<String>,
}

/// Every reason to deny a CREATE or UPDATE of a Sluice object, each naming
/// its field, and what could not be checked. `Err` when the object does not
/// decode. The kind's rules run on what the user wrote
/// ([`rules_apply`]); a LocalQueue's ClusterQueue and a Workload's
/// admission are checked on every write.
pub fn validate_sluice(
    kind: SluiceKind,
    req: &AdmissionRequest<DynamicObject>,
    cfg: &WebhookConfig,
    view: &dyn ClusterView,
) -> Result<Findings, String> {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(Findings::default());
    }
    let Some(obj) = &req.object else {
        return Err("object: missing from the request".to_owned());
    };
    let old = if req.operation == Operation::Update {
        req.old_object.as_ref()
    } else {
        None
    };
    let run_validate = rules_apply(req, obj, old);
    let mut found = Findings::default();
    match kind {
        SluiceKind::ClusterQueue if run_validate => check_cluster_queue(obj, old, view, &mut found)?,
        SluiceKind::Cohort if run_validate => check_cohort(obj, view, &mut found)?,
        SluiceKind::ResourceFlavor if run_validate => found.denials.extend(violations::<ResourceFlavor>(obj, kind)?),
        SluiceKind::WorkloadPriorityClass if run_validate => {
            found.denials.extend(violations::<WorkloadPriorityClass>(obj, kind)?)
        }
        SluiceKind::LocalQueue => {
            if run_validate {
                check_local_queue(req, obj, view, &mut found)?;
            }
            found.denials.extend(cluster_queue_change(old, obj));
        }
        SluiceKind::Workload => {
            if run_validate {
                found.denials.extend(violations::<Workload>(obj, kind)?);
            }
            found.denials.extend(admission_change(req, cfg, old, obj));
        }
        SluiceKind::ClusterQueue
        | SluiceKind::Cohort
        | SluiceKind::ResourceFlavor
        | SluiceKind::WorkloadPriorityClass => {}
    }
    Ok(found)
}

/// Whether the kind's rules (`validate()`, what the user wrote) run: on
/// CREATE and on an UPDATE that changes it; not on writes to the status
/// subresource, not when only metadata or status changed (finalizer
/// removal, labels), and not once the object is being deleted: a stored
/// object that a newer rule (or a newer schema) rejects must still be
/// able to go away.
fn rules_apply(req: &AdmissionRequest<DynamicObject>, obj: &DynamicObject, old: Option<&DynamicObject>) -> bool {
    let status_only = req.sub_resource.as_deref() == Some("status");
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let written_changed = old.is_none_or(|o| without_status(&o.data) != without_status(&obj.data));
    !status_only && !deleting && written_changed
}

/// The object decoded as `K`, and what its rules find.
fn violations<K: DeserializeOwned + Validate>(obj: &DynamicObject, kind: SluiceKind) -> Result<Vec<String>, String> {
    let new: K = decode(obj, "object", kind)?;
    Ok(new.validate().iter().map(ToString::to_string).collect())
}

/// A ClusterQueue's rules; created, or its namespaceSelector changed: the
/// LocalQueues it leaves out (compared as JSON: unset and null alike).
fn check_cluster_queue(
    obj: &DynamicObject,
    old: Option<&DynamicObject>,
    view: &dyn ClusterView,
    found: &mut Findings,
) -> Result<(), String> {
    let new: ClusterQueue = decode(obj, "object", SluiceKind::ClusterQueue)?;
    found.denials.extend(new.validate().iter().map(ToString::to_string));
    let selector = |o: &DynamicObject| {
        o.data
            .pointer("/spec/namespaceSelector")
            .filter(|s| !s.is_null())
            .cloned()
    };
    if old.is_none_or(|o| selector(o) != selector(obj)) {
        let name = new.metadata.name.as_deref().unwrap_or_default();
        found.warnings.extend(selection::cluster_queue_warning(
            name,
            new.spec.namespace_selector.as_ref(),
            view,
        ));
    }
    Ok(())
}

/// A Cohort's rules, and its parent chain must not lead back to it (a
/// warning when the Cohorts are not listed yet).
fn check_cohort(obj: &DynamicObject, view: &dyn ClusterView, found: &mut Findings) -> Result<(), String> {
    let new: Cohort = decode(obj, "object", SluiceKind::Cohort)?;
    found.denials.extend(new.validate().iter().map(ToString::to_string));
    let name = new.metadata.name.as_deref().unwrap_or_default();
    // Its own name as parent is a validate() violation already.
    let Some(parent) = new.spec.parent.as_deref().filter(|p| *p != name) else {
        return Ok(());
    };
    match view.cohort_parents() {
        Some(parents) => {
            if let Some(path) = cohort_cycle(name, parent, &parents) {
                found.denials.push(format!(
                    "spec.parent: cohort {} forms a cycle; a parent chain must end at a cohort without a parent",
                    path.join(" -> ")
                ));
            }
        }
        None => found.warnings.push(format!(
            "sluice: the webhook has not yet listed Cohorts, so it could not check that the parent chain of cohort {name:?} (spec.parent {parent:?}) does not lead back to it; the scheduler refuses a cohort whose parent chain forms a cycle"
        )),
    }
    Ok(())
}

/// A LocalQueue's rules, and a warning when its ClusterQueue does not
/// serve its namespace.
fn check_local_queue(
    req: &AdmissionRequest<DynamicObject>,
    obj: &DynamicObject,
    view: &dyn ClusterView,
    found: &mut Findings,
) -> Result<(), String> {
    let new: LocalQueue = decode(obj, "object", SluiceKind::LocalQueue)?;
    found.denials.extend(new.validate().iter().map(ToString::to_string));
    let namespace = req.namespace.as_deref().or(new.metadata.namespace.as_deref());
    found.warnings.extend(namespace.and_then(|ns| {
        let name = new.metadata.name.as_deref().unwrap_or_default();
        selection::local_queue_warning(ns, name, &new.spec.cluster_queue, view)
    }));
    Ok(())
}

/// A LocalQueue's `spec.clusterQueue` is immutable. Compared as JSON: an
/// old object that no longer decodes must not block the update.
fn cluster_queue_change(old: Option<&DynamicObject>, obj: &DynamicObject) -> Option<String> {
    let old = old?;
    let field = |o: &DynamicObject| o.data.pointer("/spec/clusterQueue").cloned().unwrap_or(Value::Null);
    let (was, now) = (field(old), field(obj));
    (was != now).then(|| {
        format!(
            "spec.clusterQueue: is immutable (was {was}, now {now}); delete and recreate the LocalQueue to point it elsewhere"
        )
    })
}

/// Any change of a Workload's admission (set, changed or cleared) admits
/// it past quota or takes it away: only the controller may. Compared as
/// JSON so an old object that no longer decodes cannot block the check.
fn admission_change(
    req: &AdmissionRequest<DynamicObject>,
    cfg: &WebhookConfig,
    old: Option<&DynamicObject>,
    obj: &DynamicObject,
) -> Option<String> {
    let admission = |o: &DynamicObject| o.data.pointer("/status/admission").filter(|v| !v.is_null()).cloned();
    let before = old.and_then(admission);
    let after = admission(obj);
    let user = req.user_info.username.as_deref().unwrap_or("");
    if before == after || cfg.is_admission_writer(user) {
        return None;
    }
    let what = match (&before, &after) {
        (None, _) => "cannot be set",
        (_, None) => "cannot be removed",
        _ => "cannot be changed",
    };
    Some(format!(
        "status.admission: {what} by {user:?}; only the Sluice controller ({}) admits Workloads",
        if cfg.admission_writers.is_empty() {
            "no admission writers configured".to_owned()
        } else {
            cfg.admission_writers.join(", ")
        }
    ))
}

/// The parent chain of cohort `name`, given the parent it is to have and
/// the parents of the other Cohorts (its own entry is not read), when the
/// chain leads back to it: `[name, parent, …, name]`. A loop above it that
/// does not pass through it is not its cycle: `None`.
pub fn cohort_cycle(name: &str, parent: &str, parents: &BTreeMap<String, Option<String>>) -> Option<Vec<String>> {
    let mut path = vec![name.to_owned()];
    let mut seen = BTreeSet::new();
    let mut at = Some(parent);
    while let Some(cohort) = at {
        path.push(cohort.to_owned());
        if cohort == name {
            return Some(path);
        }
        if !seen.insert(cohort) {
            return None;
        }
        at = parents.get(cohort).and_then(Option::as_deref);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cohort_cycles_are_found_through_the_other_cohorts() {
        let parents: BTreeMap<String, Option<String>> = [
            ("b", Some("c")),
            ("c", Some("a")),
            ("a", Some("root")),
            ("root", None),
            ("x", Some("y")),
            ("y", Some("x")),
        ]
        .into_iter()
        .map(|(k, p)| (k.to_owned(), p.map(str::to_owned)))
        .collect();
        // a's stored parent (root) is what changes: it is not read.
        assert_eq!(
            cohort_cycle("a", "b", &parents),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
        assert_eq!(cohort_cycle("a", "a", &parents), Some(vec!["a".into(), "a".into()]));
        // Ends at a root, or at a cohort no object describes.
        assert_eq!(cohort_cycle("a", "root", &parents), None);
        assert_eq!(cohort_cycle("b", "elsewhere", &parents), None);
        assert_eq!(cohort_cycle("new", "b", &parents), None);
        // A loop above that does not come back: not this cohort's cycle.
        assert_eq!(cohort_cycle("a", "x", &parents), None);
    }
}
