//! Whether an admitted workload still runs what it was admitted for.
//!
//! A workload's owner may change the object after admission: scale a Job's
//! `parallelism`, a JobSet's `replicas`, raise a pod's requests. Pods beyond
//! the admission would run on quota nobody granted, so the rule compares
//! what the object asks for now (its pod sets: pods it runs at once, and one
//! pod's requests) with the admission (each pod set's admitted pods and
//! usage):
//!
//! | now, against the admission | [`ShapeChange`] | the controller |
//! |----------------------------|-----------------|----------------|
//! | a pod set with more pods, a resource with more per pod, a pod set or a resource the admission does not cover | [`ShapeChange::Grew`] | suspends the object and evicts the workload (`WorkloadShapeChanged`); it is queued again with its new shape |
//! | otherwise, a pod set with fewer pods | [`ShapeChange::Shrank`] | once the extra pods are gone, the admission is reduced ([`crate::Engine::shrink_admitted`]) |
//! | the same pods and no more per pod | [`ShapeChange::Same`] | nothing |
//!
//! A pod set with no pods now is not growth. Less per pod is not counted as
//! shrinking: the admission keeps what it was granted until it ends.

use crate::{Amount, PodSetAssignment, PodSetSpec};

/// How what an object asks for now compares with its admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeChange {
    /// Nothing asks for more, and no pod set for fewer pods.
    Same,
    /// Something asks for more than was admitted (the first found).
    Grew(Growth),
    /// Nothing grew, and these pod sets run fewer pods than admitted
    /// (pod set name, pods now).
    Shrank(Vec<(String, u32)>),
}

/// What grew beyond an admission, in one pod set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Growth {
    pub pod_set: String,
    pub what: Grown,
}

/// What about a pod set grew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grown {
    /// It runs `now` pods at once; `admitted` were admitted.
    Pods { now: u32, admitted: u32 },
    /// The admission has no such pod set; it runs `now` pods.
    PodSet { now: u32 },
    /// One pod asks for `now` of `resource` (milli-units); one admitted pod
    /// holds `admitted`.
    PerPod {
        resource: String,
        now: Amount,
        admitted: Amount,
    },
}

/// Compares what an object asks for now (`now`: its pod sets, each `count`
/// pods of `requests`) with its admission (`admitted`).
pub fn compare(admitted: &[PodSetAssignment], now: &[PodSetSpec]) -> ShapeChange {
    compare_asked(admitted, &[], now)
}

/// Like [`compare`], one pod's requests compared with what one pod of the
/// workload asked for when admitted (`asked`, [`crate::Engine::requested`])
/// where a pod set is there: with resource transformations an admission
/// holds what the requests are charged (a MIG slice as GPU-equivalents),
/// not the requests themselves. Where it is not, with what one admitted
/// pod holds.
pub fn compare_asked(admitted: &[PodSetAssignment], asked: &[PodSetSpec], now: &[PodSetSpec]) -> ShapeChange {
    let mut shrank = Vec::new();
    for ps in now.iter().filter(|p| p.count > 0) {
        let grown = |what| {
            ShapeChange::Grew(Growth {
                pod_set: ps.name.clone(),
                what,
            })
        };
        let Some(a) = admitted.iter().find(|a| a.name == ps.name) else {
            return grown(Grown::PodSet { now: ps.count });
        };
        if ps.count > a.count {
            return grown(Grown::Pods {
                now: ps.count,
                admitted: a.count,
            });
        }
        let grew = match asked.iter().find(|p| p.name == ps.name) {
            Some(asked) => more_than_asked(asked, ps),
            None => more_per_pod(a, ps),
        };
        if let Some(what) = grew {
            return grown(what);
        }
        if ps.count < a.count {
            shrank.push((ps.name.clone(), ps.count));
        }
    }
    if shrank.is_empty() {
        ShapeChange::Same
    } else {
        ShapeChange::Shrank(shrank)
    }
}

/// The first resource one pod of `ps` asks more of than one admitted pod
/// of `a` holds.
fn more_per_pod(a: &PodSetAssignment, ps: &PodSetSpec) -> Option<Grown> {
    let pods = Amount::from(a.count.max(1));
    ps.requests.iter().find_map(|(resource, &per_pod)| {
        let held = a.usage.get(resource).copied().unwrap_or(0) / pods;
        (per_pod > held).then(|| Grown::PerPod {
            resource: resource.clone(),
            now: per_pod,
            admitted: held,
        })
    })
}

/// The first resource one pod of `ps` asks more of than one pod of the
/// admitted workload asked for.
fn more_than_asked(asked: &PodSetSpec, ps: &PodSetSpec) -> Option<Grown> {
    ps.requests.iter().find_map(|(resource, &per_pod)| {
        let before = asked.requests.get(resource).copied().unwrap_or(0);
        (per_pod > before).then(|| Grown::PerPod {
            resource: resource.clone(),
            now: per_pod,
            admitted: before,
        })
    })
}

/// Whether an object still asks for what its waiting workload asks for:
/// the same pod sets, each with the same pods, partial-admission minimum
/// and requests per pod (where its pods may run is not compared: a
/// suspended object's scheduling directives are Sluice's to inject and put
/// back).
pub fn same_request(asked: &[PodSetSpec], now: &[PodSetSpec]) -> bool {
    asked.len() == now.len()
        && asked.iter().zip(now).all(|(a, n)| {
            a.name == n.name && a.count == n.count && a.min_count == n.min_count && nonzero(a).eq(nonzero(n))
        })
}

/// A pod's requests without the zero ones.
fn nonzero(p: &PodSetSpec) -> impl Iterator<Item = (&String, &Amount)> {
    p.requests.iter().filter(|(_, v)| **v != 0)
}

#[cfg(test)]
mod tests;
