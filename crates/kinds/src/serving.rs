//! Serving objects as queued objects: `apps/v1` Deployment and
//! StatefulSet ([`crate::deployment`], [`crate::statefulset`]) and
//! `leaderworkerset.x-k8s.io/v1` LeaderWorkerSet
//! ([`crate::leaderworkerset`]). They have no suspend flag, so Sluice holds
//! one at zero replicas ([`crate::Hold::Replicas`]):
//!
//! - **held**: `spec.replicas: 0`, and the replicas its owner asked for in
//!   the [`HELD_REPLICAS`] annotation. The webhook holds a new queued
//!   object so; the controller holds one that runs without admission (the
//!   replicas it ran kept). An object held with nothing asked (`"0"`) has
//!   no Workload: it waits for its owner to ask for replicas;
//! - **started**: at admission one merge patch sets `spec.replicas` to
//!   what was asked, removes the annotation, and puts the flavors' node
//!   labels and tolerations into each pod template (what the user wrote
//!   kept in [`ORIGINAL_SCHEDULING`], by pod set), with the object's uid
//!   as the templates' [`POD_OWNER`] label: how its pods are found;
//! - **evicted**: held again (its pods go with its replicas), then its
//!   templates put back (the label removed);
//! - never finished: it runs until it is deleted, and its Workload holds
//!   its quota until then (or until it is scaled down, which frees what it
//!   no longer runs once those pods are gone).
//!
//! Its Workload asks for the pods it runs at once: its replicas, plus a
//! Deployment's rollout surge (`crate::deployment`).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sluice_api::labels::{HELD_REPLICAS, POD_OWNER};
use sluice_api::v1alpha1::ResourceFlavor;

use crate::Hold;
use crate::job::{JobError, JobView, ORIGINAL_SCHEDULING, SchedulingDirectives};
use crate::{object, placed, shape};

/// Where one of a serving object's pod templates is: its pod set and the
/// path of keys from the object's root to the template
/// (`["spec", "template"]`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Template {
    pub(crate) pod_set: &'static str,
    pub(crate) path: &'static [&'static str],
}

impl Template {
    /// Its JSON pointer (`/spec/template`).
    pub(crate) fn pointer(&self) -> String {
        self.path.iter().map(|k| format!("/{k}")).collect()
    }

    /// Its field path (`spec.template`).
    pub(crate) fn field(&self) -> String {
        self.path.join(".")
    }
}

/// The replicas a serving object asks for: while it is held, those in its
/// [`HELD_REPLICAS`] annotation; else its `spec.replicas` (default 1).
pub(crate) fn asked(obj: &Value) -> Result<i32, JobError> {
    if Hold::Replicas.is_held(obj) {
        let raw = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(HELD_REPLICAS))
            .and_then(Value::as_str)
            .unwrap_or_default();
        return raw
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| JobError::Invalid {
                field: format!("metadata.annotations[{HELD_REPLICAS}]"),
                problem: format!("expected the replicas asked for, a whole number from 0, got {raw:?}"),
            });
    }
    let replicas = shape::int(obj.pointer("/spec/replicas"), 1);
    i32::try_from(replicas)
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| JobError::Invalid {
            field: "spec.replicas".into(),
            problem: format!("{replicas} must be a whole number from 0"),
        })
}

/// An int-or-percent field (`maxSurge`) resolved against `of`: a whole
/// number as it is, a percentage of `of` rounded up (as the Deployment
/// and LeaderWorkerSet controllers round a surge). `None`: malformed.
pub(crate) fn int_or_percent(v: &Value, of: i32) -> Option<i32> {
    match v {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()).filter(|n| *n >= 0),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok().filter(|p| *p >= 0)?;
            i32::try_from((i64::from(of.max(0)) * pct + 99) / 100).ok()
        }
        _ => None,
    }
}

/// The label selector of the pods of a serving object with uid `uid`
/// that Sluice started.
pub(crate) fn pods_selector(uid: &str) -> String {
    format!("{POD_OWNER}={uid}")
}

/// Whether a serving object's pods are all ready: `ready` of `asked`
/// units (replicas, or LeaderWorkerSet groups) ready, as the view counts
/// it: all `pods` when every asked unit is ready, else `ready × per_unit`.
pub(crate) fn ready_pods(ready: i64, asked: i32, per_unit: i32, pods: i32) -> i32 {
    if ready >= i64::from(asked) {
        pods
    } else {
        i32::try_from(ready).unwrap_or(0).saturating_mul(per_unit)
    }
}

/// The merge patch that starts a held serving object: `spec.replicas` to
/// what it asked, the annotation removed, and each template given its pod
/// set's flavors on top of what the user wrote (recorded first).
pub(crate) fn start_patch(
    view: &JobView,
    templates: &[Template],
    flavors: &BTreeMap<String, Vec<&ResourceFlavor>>,
) -> Result<Value, JobError> {
    let originals = placed::originals(view)?;
    let recorded = serde_json::to_string(&originals).expect("directives serialise");
    let mut patch = json!({
        "metadata": {"annotations": {HELD_REPLICAS: null, ORIGINAL_SCHEDULING: recorded}},
        "spec": {"replicas": view.replicas.unwrap_or(1)},
    });
    for (t, now) in templates_of(view, templates) {
        let original = originals
            .get(t.pod_set)
            .cloned()
            .unwrap_or_else(|| SchedulingDirectives {
                node_selector: now.node_selector.clone(),
                tolerations: now.tolerations.clone(),
            });
        let assigned = flavors.get(t.pod_set).cloned().unwrap_or_default();
        let target = placed::with_flavors(&original, &assigned);
        nest(
            &mut patch,
            t.path,
            json!({
                "metadata": {"labels": {POD_OWNER: view.uid}},
                "spec": object::pod_spec_patch(now, &target),
            }),
        );
    }
    Ok(patch)
}

/// The merge patch that puts back what the user wrote into each template
/// of an evicted, held serving object and drops the record; `None` when
/// nothing was injected.
pub(crate) fn restore_patch(view: &JobView, templates: &[Template]) -> Result<Option<Value>, JobError> {
    let Some(originals) = placed::recorded(view.original.as_deref())? else {
        return Ok(None);
    };
    let mut patch = json!({"metadata": {"annotations": {ORIGINAL_SCHEDULING: null}}});
    for (t, now) in templates_of(view, templates) {
        if let Some(original) = originals.get(t.pod_set) {
            nest(
                &mut patch,
                t.path,
                json!({
                    "metadata": {"labels": {POD_OWNER: null}},
                    "spec": object::pod_spec_patch(now, original),
                }),
            );
        }
    }
    Ok(Some(patch))
}

/// Each template with its directives as the view has them now.
fn templates_of<'a>(
    view: &'a JobView,
    templates: &'a [Template],
) -> impl Iterator<Item = (&'a Template, &'a crate::job::TemplateDirectives)> {
    templates
        .iter()
        .filter_map(|t| Some((t, view.templates.iter().find(|d| d.pod_set == t.pod_set)?)))
}

/// Puts `leaf` at `path` in `root` (a merge patch), creating the maps on
/// the way and keeping what is there.
fn nest(root: &mut Value, path: &[&str], leaf: Value) {
    let mut at = root;
    for key in path {
        if !at.get(*key).is_some_and(Value::is_object) {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    if let (Value::Object(into), Value::Object(from)) = (at, leaf) {
        into.extend(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_object_asks_for_its_kept_replicas_and_a_running_one_for_its_own() {
        let held = json!({"metadata": {"annotations": {HELD_REPLICAS: "3"}}, "spec": {"replicas": 0}});
        assert_eq!(asked(&held), Ok(3));
        assert_eq!(asked(&json!({"spec": {"replicas": 2}})), Ok(2));
        assert_eq!(asked(&json!({"spec": {}})), Ok(1));
        // Scaled up while held: the new count is what it asks for.
        let scaled = json!({"metadata": {"annotations": {HELD_REPLICAS: "3"}}, "spec": {"replicas": 5}});
        assert_eq!(asked(&scaled), Ok(5));
        let bad = json!({"metadata": {"annotations": {HELD_REPLICAS: "many"}}, "spec": {"replicas": 0}});
        assert_eq!(
            asked(&bad).unwrap_err().to_string(),
            "metadata.annotations[sluice.dev/held-replicas]: expected the replicas asked for, a whole number from 0, got \"many\""
        );
        assert!(asked(&json!({"spec": {"replicas": -1}})).is_err());
    }

    #[test]
    fn a_surge_is_a_number_or_a_percentage_rounded_up() {
        assert_eq!(int_or_percent(&json!(2), 10), Some(2));
        assert_eq!(int_or_percent(&json!("25%"), 1), Some(1));
        assert_eq!(int_or_percent(&json!("25%"), 8), Some(2));
        assert_eq!(int_or_percent(&json!("0%"), 8), Some(0));
        assert_eq!(int_or_percent(&json!("x%"), 8), None);
        assert_eq!(int_or_percent(&json!(-1), 8), None);
    }

    #[test]
    fn nesting_keeps_what_is_there() {
        let mut p = json!({"spec": {"replicas": 2}});
        nest(
            &mut p,
            &["spec", "template"],
            json!({"spec": {"nodeSelector": {"a": "b"}}}),
        );
        assert_eq!(
            p,
            json!({"spec": {"replicas": 2, "template": {"spec": {"nodeSelector": {"a": "b"}}}}})
        );
    }
}
