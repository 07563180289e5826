//! Patches for kinds whose pod templates sit at positions in lists (a
//! JobSet's replicated Jobs, a RayJob's worker groups): the originals are
//! recorded by a merge patch (the object may have no annotations at all),
//! then one JSON patch (RFC 6902) writes every template, each position
//! guarded by a `test` of what names it, so an object edited meanwhile is
//! refused rather than patched in the wrong place.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sluice_api::v1alpha1::ResourceFlavor;

use crate::ObjPatch;
use crate::job::{JobError, JobView, ORIGINAL_SCHEDULING, SchedulingDirectives, TemplateDirectives};

/// Where one of the object's pod templates is.
pub(super) struct Placed<'a> {
    pub(super) template: &'a TemplateDirectives,
    /// JSON pointer of its pod spec.
    pub(super) spec: String,
    /// A `test` that must hold for the position to be this template's:
    /// (pointer, expected value).
    pub(super) guard: Option<(String, Value)>,
}

/// The originals recorded in [`ORIGINAL_SCHEDULING`], by pod set.
pub(super) fn recorded(raw: Option<&str>) -> Result<Option<BTreeMap<String, SchedulingDirectives>>, JobError> {
    raw.map(|r| serde_json::from_str(r).map_err(|e| JobError::BadAnnotation(e.to_string())))
        .transpose()
}

/// The originals: recorded, or the templates as they are now.
pub(super) fn originals(view: &JobView) -> Result<BTreeMap<String, SchedulingDirectives>, JobError> {
    Ok(match recorded(view.original.as_deref())? {
        Some(o) => o,
        None => view
            .templates
            .iter()
            .map(|t| {
                (
                    t.pod_set.clone(),
                    SchedulingDirectives {
                        node_selector: t.node_selector.clone(),
                        tolerations: t.tolerations.clone(),
                    },
                )
            })
            .collect(),
    })
}

/// `original` plus the flavors' node labels and tolerations (no duplicates).
pub(super) fn with_flavors(original: &SchedulingDirectives, flavors: &[&ResourceFlavor]) -> SchedulingDirectives {
    let mut selector = original.node_selector.clone().unwrap_or_default();
    let mut tolerations = original.tolerations.clone().unwrap_or_default();
    for f in flavors {
        selector.extend(f.spec.node_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        for tol in &f.spec.tolerations {
            if !tolerations.contains(tol) {
                tolerations.push(tol.clone());
            }
        }
    }
    SchedulingDirectives {
        node_selector: Some(selector),
        tolerations: Some(tolerations),
    }
}

/// Operations that set a template's directives to `target` (adding,
/// replacing or removing each field as needed).
fn set_ops(p: &Placed<'_>, target: &SchedulingDirectives, ops: &mut Vec<Value>) {
    let at = |field: &str| format!("{}/{field}", p.spec);
    let t = p.template;
    match target.node_selector.clone().filter(|m| !m.is_empty()) {
        Some(m) => ops.push(json!({"op": "add", "path": at("nodeSelector"), "value": m})),
        None if t.node_selector.is_some() => ops.push(json!({"op": "remove", "path": at("nodeSelector")})),
        None => {}
    }
    match target.tolerations.clone().filter(|v| !v.is_empty()) {
        Some(v) => ops.push(json!({"op": "add", "path": at("tolerations"), "value": v})),
        None if t.tolerations.is_some() => ops.push(json!({"op": "remove", "path": at("tolerations")})),
        None => {}
    }
}

fn guards(placed: &[Placed<'_>]) -> Vec<Value> {
    placed
        .iter()
        .filter_map(|p| p.guard.as_ref())
        .map(|(path, value)| json!({"op": "test", "path": path, "value": value}))
        .collect()
}

/// The patches that admit a suspended object: the originals recorded
/// (unless already), then every template given its pod set's flavors on
/// top of its original, and `resume` (JSON patch operations, e.g.
/// `spec.suspend: false`).
pub(super) fn injection_patches(
    view: &JobView,
    placed: &[Placed<'_>],
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
    resume: Vec<Value>,
) -> Result<Vec<ObjPatch>, JobError> {
    let originals = originals(view)?;
    let mut out = Vec::new();
    if view.original.is_none() {
        let recorded = serde_json::to_string(&originals).expect("directives serialise");
        out.push(ObjPatch::Merge(
            json!({"metadata": {"annotations": {ORIGINAL_SCHEDULING: recorded}}}),
        ));
    }
    let mut ops = guards(placed);
    for p in placed {
        // A template added after the originals were recorded: as it is now.
        let original = originals
            .get(&p.template.pod_set)
            .cloned()
            .unwrap_or_else(|| SchedulingDirectives {
                node_selector: p.template.node_selector.clone(),
                tolerations: p.template.tolerations.clone(),
            });
        let assigned: Vec<&ResourceFlavor> = flavors.get(&p.template.pod_set).cloned().unwrap_or_default();
        set_ops(p, &with_flavors(&original, &assigned), &mut ops);
    }
    ops.extend(resume);
    out.push(ObjPatch::Json(Value::Array(ops)));
    Ok(out)
}

/// The patches that put back every template's recorded directives (a JSON
/// patch), then drop the annotation (a merge patch); `None` when nothing
/// was injected.
pub(super) fn restoration_patches(view: &JobView, placed: &[Placed<'_>]) -> Result<Option<Vec<ObjPatch>>, JobError> {
    let Some(originals) = recorded(view.original.as_deref())? else {
        return Ok(None);
    };
    let mut ops = guards(placed);
    for p in placed {
        // A template added after the injection was never written: as is.
        if let Some(original) = originals.get(&p.template.pod_set) {
            set_ops(p, original, &mut ops);
        }
    }
    Ok(Some(vec![
        ObjPatch::Json(Value::Array(ops)),
        ObjPatch::Merge(json!({"metadata": {"annotations": {ORIGINAL_SCHEDULING: null}}})),
    ]))
}
