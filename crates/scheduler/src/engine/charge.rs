//! What a pod set is charged: its requests through the resource
//! transformations (a MIG slice as a seventh of a GPU-equivalent), and, on
//! a flavor whose nodes share each GPU among `r` replicas, a replica's
//! part of what a whole GPU is charged. Quota, fair sharing, budgets and
//! metering see the charge; nodes see what pods really request.
//!
//! ```text
//!   pod requests ──transformations──▶ charge (flavor-free)     PodSet::total
//!        │                                │ shared parts
//!        │                                ▼
//!        │                   charge on the flavors chosen       charged_total
//!        ▼
//!   PodSet::nodes (placement)
//! ```

use std::borrow::Cow;

use crate::ledger::{FlavorId, ResId};
use crate::model::{Amount, Ratio, TransformStrategy, Transformation};

use super::fast_map::FastMap;
use super::parts::Catalog;
use super::state::{Cq, PodSet};
use super::{Engine, EngineError};

/// The transformations, by input resource.
#[derive(Clone, Default)]
pub(super) struct Transforms {
    by_input: FastMap<ResId, Rule>,
}

#[derive(Clone)]
struct Rule {
    replace: bool,
    outputs: Vec<(ResId, Ratio)>,
    /// The input is what a sharing node advertises as replicas.
    shared: bool,
}

/// The part of a pod's charge of `output` that comes from a GPU a sharing
/// node may give as a replica (`input`): on such a node it is charged a
/// replica's part of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct SharedPart {
    pub(super) input: ResId,
    pub(super) output: ResId,
    pub(super) per_pod: Amount,
}

/// What one pod is charged.
pub(super) struct PodCharge {
    /// By resource, sorted, no zeros.
    pub(super) charged: Vec<(ResId, Amount)>,
    pub(super) shared: Vec<SharedPart>,
}

impl Catalog {
    /// What a pod requesting `raw` (sorted by resource) is charged. `Err`
    /// names an output whose amount overflows.
    pub(super) fn charge(&self, raw: &[(ResId, Amount)]) -> Result<PodCharge, ResId> {
        let mut out = PodCharge {
            charged: Vec::with_capacity(raw.len()),
            shared: Vec::new(),
        };
        if self.transforms.by_input.is_empty() {
            out.charged.extend_from_slice(raw);
            return Ok(out);
        }
        for &(res, amount) in raw {
            let Some(rule) = self.transforms.by_input.get(&res) else {
                add(&mut out.charged, res, amount).ok_or(res)?;
                continue;
            };
            if !rule.replace {
                add(&mut out.charged, res, amount).ok_or(res)?;
            }
            for &(output, ratio) in &rule.outputs {
                let part = scaled(amount, ratio).ok_or(output)?;
                add(&mut out.charged, output, part).ok_or(output)?;
                if rule.shared {
                    out.shared.push(SharedPart {
                        input: res,
                        output,
                        per_pod: part,
                    });
                }
            }
        }
        out.charged.retain(|&(_, a)| a != 0);
        out.charged.sort_unstable();
        Ok(out)
    }
}

/// `amount × num / den`, rounded up (a fraction of a unit is charged as a
/// unit, never less than what is held); `None` on overflow.
fn scaled(amount: Amount, ratio: Ratio) -> Option<Amount> {
    let product = i128::from(amount) * i128::from(ratio.num);
    let den = i128::from(ratio.den);
    let q = product / den + i128::from(product % den != 0);
    Amount::try_from(q).ok()
}

fn add(v: &mut Vec<(ResId, Amount)>, res: ResId, amount: Amount) -> Option<()> {
    match v.iter_mut().find(|(r, _)| *r == res) {
        Some((_, a)) => *a = a.checked_add(amount)?,
        None => v.push((res, amount)),
    }
    Some(())
}

impl Engine {
    /// Sets the resource transformations. Only an engine without
    /// workloads takes them (what a workload is charged is worked out when
    /// it is added). Errors name the transformation and what is wrong.
    pub fn set_transformations(&mut self, list: &[Transformation]) -> Result<(), EngineError> {
        let bad = |input: &str, why: &str| EngineError::BadTransformation {
            input: input.to_string(),
            why: why.to_string(),
        };
        if !self.workloads.by_uid.is_empty() {
            return Err(bad(
                list.first().map_or("", |t| t.input.as_str()),
                "transformations are set before any workload",
            ));
        }
        let mut by_input = FastMap::default();
        for t in list {
            if t.outputs.is_empty() && t.strategy == TransformStrategy::Retain {
                return Err(bad(&t.input, "retains its input and has no outputs: it does nothing"));
            }
            if list.iter().any(|o| o.outputs.iter().any(|(r, _)| *r == t.input)) {
                return Err(bad(&t.input, "is the output of a transformation (they do not chain)"));
            }
            if let Some((r, _)) = t.outputs.iter().find(|(_, q)| q.num <= 0 || q.den <= 0) {
                return Err(bad(&t.input, &format!("output {r}: the factor must be positive")));
            }
            let rule = Rule {
                replace: t.strategy == TransformStrategy::Replace,
                outputs: t
                    .outputs
                    .iter()
                    .map(|(r, q)| (self.catalog.resources.intern(r), *q))
                    .collect(),
                shared: crate::sharing::is_shared_resource(&t.input),
            };
            let input = self.catalog.resources.intern(&t.input);
            if by_input.insert(input, rule).is_some() {
                return Err(bad(&t.input, "is transformed twice"));
            }
        }
        self.catalog.transforms = Transforms { by_input };
        Ok(())
    }

    /// How many replicas of each GPU a flavor's nodes advertise: from the
    /// flavor's own node labels, else from its nodes (with placement); 1
    /// when they are whole.
    pub(super) fn gpu_replicas(&self, flavor: FlavorId) -> u32 {
        let own = self
            .catalog
            .flavors
            .get(&flavor)
            .and_then(|f| crate::sharing::replicas(&f.node_labels));
        own.or_else(|| self.inv.flavor_replicas.get(&flavor).copied())
            .unwrap_or(1)
    }

    /// A pod set's charge on the flavors chosen for its resource groups
    /// (`flavor_of(group)`; `None` for a group not chosen yet): its
    /// flavor-free charge, less what its shared parts save on a flavor
    /// whose nodes share their GPUs. A shared part saves only when its
    /// output is charged in another resource group than its GPU (the one
    /// that chose the sharing flavor).
    pub(super) fn charged_total<'a>(
        &self,
        cq: &Cq,
        ps: &'a PodSet,
        flavor_of: impl Fn(usize) -> Option<FlavorId>,
    ) -> Cow<'a, [(ResId, Amount)]> {
        let mut total = Cow::Borrowed(&ps.total[..]);
        for part in &ps.shared {
            let (Some(&gi), Some(&go)) = (cq.quota.group_of.get(&part.input), cq.quota.group_of.get(&part.output))
            else {
                continue;
            };
            let Some(flavor) = flavor_of(gi).filter(|_| gi != go) else {
                continue;
            };
            let replicas = self.gpu_replicas(flavor);
            if replicas <= 1 {
                continue;
            }
            let saved = (part.per_pod - crate::sharing::per_replica(part.per_pod, replicas)) * Amount::from(ps.count);
            if let Some(entry) = total.to_mut().iter_mut().find(|(r, _)| *r == part.output) {
                entry.1 -= saved;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Ratio, TransformStrategy, Transformation};

    fn engine_with(list: &[Transformation]) -> Engine {
        let mut e = Engine::new();
        e.set_transformations(list).expect("valid transformations");
        e
    }

    fn mig(strategy: TransformStrategy) -> Transformation {
        Transformation {
            input: "nvidia.com/mig-1g.10gb".into(),
            strategy,
            outputs: vec![
                // 1/7 of 720 720 units per 1 000 milli-slices.
                ("sluice.dev/gpu-equivalent".into(), Ratio { num: 2574, den: 25 }),
                ("example.com/gpu-memory".into(), Ratio { num: 10, den: 1 }),
            ],
        }
    }

    fn charged(e: &mut Engine, raw: &[(&str, Amount)]) -> Vec<(String, Amount)> {
        let mut ids: Vec<(ResId, Amount)> = raw.iter().map(|&(r, a)| (e.catalog.resources.intern(r), a)).collect();
        ids.sort_unstable();
        let c = e.catalog.charge(&ids).expect("no overflow");
        c.charged
            .into_iter()
            .map(|(r, a)| (e.catalog.resources.name(r).to_string(), a))
            .collect()
    }

    #[test]
    fn replace_charges_the_outputs_only_and_retain_the_input_too() {
        let mut e = engine_with(&[mig(TransformStrategy::Replace)]);
        let c = charged(&mut e, &[("nvidia.com/mig-1g.10gb", 1000), ("cpu", 500)]);
        let get = |r: &str| c.iter().find(|(x, _)| x == r).map(|(_, a)| *a);
        assert_eq!(get("cpu"), Some(500));
        assert_eq!(get("sluice.dev/gpu-equivalent"), Some(102_960));
        assert_eq!(get("example.com/gpu-memory"), Some(10_000));
        assert_eq!(get("nvidia.com/mig-1g.10gb"), None, "replaced");
        assert_eq!(c.len(), 3);
        let mut e = engine_with(&[mig(TransformStrategy::Retain)]);
        let c = charged(&mut e, &[("nvidia.com/mig-1g.10gb", 2000)]);
        let get = |r: &str| c.iter().find(|(x, _)| x == r).map(|(_, a)| *a);
        assert_eq!(get("nvidia.com/mig-1g.10gb"), Some(2000));
        assert_eq!(get("sluice.dev/gpu-equivalent"), Some(205_920));
        assert_eq!(get("example.com/gpu-memory"), Some(20_000));
    }

    #[test]
    fn seven_slices_are_exactly_one_equivalent() {
        let mut e = engine_with(&[mig(TransformStrategy::Replace)]);
        let one = charged(&mut e, &[("nvidia.com/mig-1g.10gb", 1000)]);
        let eq = one.iter().find(|(r, _)| r == "sluice.dev/gpu-equivalent").unwrap().1;
        assert_eq!(eq * 7, 720_720);
    }

    #[test]
    fn a_fraction_of_a_unit_is_charged_as_a_unit() {
        assert_eq!(scaled(1, Ratio { num: 1, den: 3 }), Some(1));
        assert_eq!(scaled(3, Ratio { num: 1, den: 3 }), Some(1));
        assert_eq!(scaled(4, Ratio { num: 1, den: 3 }), Some(2));
        assert_eq!(scaled(i64::MAX, Ratio { num: 2, den: 1 }), None);
    }

    #[test]
    fn bad_transformations_are_refused_with_their_input() {
        let mut e = Engine::new();
        let twice = [mig(TransformStrategy::Replace), mig(TransformStrategy::Retain)];
        let err = e.set_transformations(&twice).unwrap_err().to_string();
        assert!(err.contains("nvidia.com/mig-1g.10gb") && err.contains("twice"), "{err}");
        let chain = [
            mig(TransformStrategy::Replace),
            Transformation {
                input: "sluice.dev/gpu-equivalent".into(),
                strategy: TransformStrategy::Retain,
                outputs: vec![("credits".into(), Ratio { num: 1, den: 1 })],
            },
        ];
        let err = e.set_transformations(&chain).unwrap_err().to_string();
        assert!(err.contains("do not chain"), "{err}");
        let zero = [Transformation {
            input: "nvidia.com/gpu".into(),
            strategy: TransformStrategy::Retain,
            outputs: vec![("credits".into(), Ratio { num: 0, den: 1 })],
        }];
        let err = e.set_transformations(&zero).unwrap_err().to_string();
        assert!(err.contains("positive"), "{err}");
    }
}
