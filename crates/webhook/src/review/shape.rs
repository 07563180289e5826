//! The shape of a queued object: how many pods each of its parts runs at
//! once (its kind says: `sluice_kinds`), and what one pod of each template
//! asks for. While an object runs,
//! its admission covers the shape it had when it started; an update that
//! asks for more (a scaled Job, more JobSet replicas, a larger pod) is
//! refused here, and the controller suspends and requeues an object that
//! grew anyway (it never relies on this check).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use kube::core::DynamicObject;
use sluice_api::v1alpha1::PodSet;

use sluice_kinds::JobKind;

/// What one pod of each template of `obj` asks for (milli-units), by the
/// template's field path; a template that cannot be read is left out (the
/// API server validates pod templates).
fn pod_requests(kind: JobKind, obj: &DynamicObject) -> BTreeMap<String, BTreeMap<String, i128>> {
    super::jobs::templates(kind, obj)
        .into_iter()
        .filter_map(|(at, _)| {
            let spec: PodSpec = serde_json::from_value(obj.data.pointer(at.pointer.as_str())?.clone()).ok()?;
            let ps = PodSet {
                name: String::new(),
                count: 1,
                min_count: None,
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(spec),
                },
                topology: None,
            };
            Some((at.field.clone(), ps.pod_requests(&at.field).ok()?))
        })
        .collect()
}

/// Where `new` asks for more than `old` of `kind`: each in words, with the
/// field.
pub fn grown(kind: JobKind, old: &DynamicObject, new: &DynamicObject) -> Vec<String> {
    let counts = |o: &DynamicObject| kind.integration().counts(&o.data);
    let before = counts(old);
    let mut out: Vec<String> = counts(new)
        .into_iter()
        .filter_map(|c| {
            let was = before.iter().find(|b| b.field == c.field).map_or(0, |b| b.value);
            (c.value > was).then(|| format!("{}: {} pods at once, was {was}", c.field, c.value))
        })
        .collect();
    let before = pod_requests(kind, old);
    for (field, reqs) in pod_requests(kind, new) {
        let was = before.get(&field);
        for (resource, amount) in reqs {
            let had = was.and_then(|w| w.get(&resource)).copied().unwrap_or(0);
            if amount > had {
                out.push(format!(
                    "{field}: a pod asks for {} of {resource}, was {}",
                    milli(amount),
                    milli(had)
                ));
            }
        }
    }
    out
}

fn milli(v: i128) -> String {
    if v % 1000 == 0 {
        (v / 1000).to_string()
    } else {
        format!("{v}m")
    }
}
