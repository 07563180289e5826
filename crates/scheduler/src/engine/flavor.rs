//! Flavor assignment: for every (pod set, resource group) a workload
//! needs, the first flavor in the queue's order that fits without
//! borrowing, else the first that fits by borrowing. A flavor whose node
//! labels or taints the pod set cannot take is skipped with its verdict
//! ([`compatible`]); when nothing fits, the flavors that could fit by
//! preemption are kept as options.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::decision::{FlavorVerdict, Verdict};
use crate::ledger;
use crate::ledger::{Fit, FlavorId, ResId};
use crate::model::{Amount, FlavorSpec, SharedGpuRequests, TaintEffect, Toleration};

use super::state::{Cq, GpuAsk, Group, GroupFlavor, PodSet};
use super::{CqId, Engine, WlId};

/// The flavor chosen for one resource group of a pod set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GroupChoice {
    pub(super) group: usize,
    pub(super) flavor: FlavorId,
}

/// A workload's flavors: per pod set, one [`GroupChoice`] for every
/// resource group it requests from (none for a pod set that requests
/// nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Choice(pub(super) Vec<Vec<GroupChoice>>);

/// For one (pod set, resource group): the flavors that could hold it, with
/// preemption if need be, in the queue's preference order.
pub(super) struct FlavorOption {
    pub(super) pod_set: usize,
    pub(super) group: usize,
    pub(super) flavors: Vec<FlavorId>,
}

/// What a pod set requests from one resource group: amounts by the
/// resource's position in the group.
pub(super) struct GroupNeed {
    pub(super) group: usize,
    pub(super) amounts: Vec<(usize, Amount)>,
}

/// A flavor choice for every (pod set, resource group) a workload needs.
pub(super) struct Attempt {
    /// Aggregated request per slot of the queue.
    pub(super) usage: Vec<(usize, Amount)>,
    pub(super) choice: Choice,
    pub(super) borrowing: bool,
}

pub(super) enum AssignError {
    NotCovered {
        pod_set: Arc<str>,
        resource: ResId,
    },
    /// Per (pod set, group): candidate flavors that could hold it with
    /// preemption; verdicts for the explanation; whether no flavor ever could.
    NoFit {
        options: Vec<FlavorOption>,
        verdicts: Vec<FlavorVerdict>,
        never: bool,
    },
}

/// One flavor pick for a (pod set, resource group): the chosen flavor's
/// index in the group and whether it borrows; the flavors that could hold
/// it, with preemption if need be; why the others cannot (when explaining).
struct GroupPick {
    best: Option<(usize, bool)>,
    possible: Vec<FlavorId>,
    verdicts: Vec<FlavorVerdict>,
}

/// A slot that cannot hold what a pod set needs of it (`needed`, with
/// what the workload's earlier pod sets took there).
struct Short {
    slot: usize,
    needed: Amount,
    why: Shortage,
}

enum Shortage {
    /// `available` is the most that would fit now.
    NotNow { available: Amount },
    /// `max` is the most the queue can ever hold.
    Never { max: Amount },
}

/// A workload's assignment as it is built, one (pod set, resource group)
/// at a time.
struct Assigning {
    usage: Vec<(usize, Amount)>,
    choice: Vec<Vec<GroupChoice>>,
    borrowing: bool,
    /// Verdicts of every group nothing fits, and whether one never could.
    failure: Option<(Vec<FlavorVerdict>, bool)>,
    options: Vec<FlavorOption>,
}

impl Assigning {
    fn new(pod_sets: usize) -> Self {
        Self {
            usage: Vec::new(),
            choice: Vec::with_capacity(pod_sets),
            borrowing: false,
            failure: None,
            options: Vec::new(),
        }
    }

    /// Records the pick for pod set `pod_set`'s `need`: its flavor's usage
    /// and choice while every group so far found one, else its verdicts.
    fn take(
        &mut self,
        pod_set: usize,
        need: &GroupNeed,
        group: &Group,
        pick: GroupPick,
        explain: bool,
        ps_choice: &mut Vec<GroupChoice>,
    ) {
        if explain {
            self.options.push(FlavorOption {
                pod_set,
                group: need.group,
                flavors: pick.possible.clone(),
            });
        }
        match pick.best {
            Some((fi, borrows)) if self.failure.is_none() => {
                let gf = &group.flavors[fi];
                for &(rpos, amount) in &need.amounts {
                    add_pending(&mut self.usage, gf.slots[rpos], amount);
                }
                self.borrowing |= borrows;
                ps_choice.push(GroupChoice {
                    group: need.group,
                    flavor: gf.flavor,
                });
            }
            Some(_) => {}
            None => {
                let never = pick.possible.is_empty();
                match &mut self.failure {
                    None => self.failure = Some((pick.verdicts, never)),
                    Some((v, n)) => {
                        v.extend(pick.verdicts);
                        *n |= never;
                    }
                }
            }
        }
    }

    fn finish(self) -> Result<Attempt, AssignError> {
        match self.failure {
            None => Ok(Attempt {
                usage: self.usage,
                choice: Choice(self.choice),
                borrowing: self.borrowing,
            }),
            Some((verdicts, never)) => Err(AssignError::NoFit {
                options: self.options,
                verdicts,
                never,
            }),
        }
    }
}

impl Engine {
    /// Chooses a flavor for every (pod set, resource group) of the workload:
    /// in the queue's flavor order, the first flavor that fits without
    /// borrowing, else the first that fits by borrowing.
    pub(super) fn assign(&self, cq_id: CqId, id: WlId) -> Result<Attempt, AssignError> {
        // Most calls succeed: a quick pass builds no explanation, and only a
        // failure is worked out again with verdicts and preemption options.
        match self.assign_with(cq_id, id, false) {
            Err(AssignError::NoFit { .. }) => self.assign_with(cq_id, id, true),
            other => other,
        }
    }

    pub(super) fn assign_with(&self, cq_id: CqId, id: WlId, explain: bool) -> Result<Attempt, AssignError> {
        let cq = &self.queues.cqs[cq_id];
        let wl = self.wl(id);
        let mut acc = Assigning::new(wl.pod_sets.len());
        for (pi, ps) in wl.pod_sets.iter().enumerate() {
            let mut needs = self.group_needs(cq, ps).map_err(|resource| AssignError::NotCovered {
                pod_set: ps.name.clone(),
                resource,
            })?;
            if !ps.shared.is_empty() {
                // The groups of shared GPUs choose first: what the others
                // are charged depends on their flavors.
                needs.sort_by_key(|n| {
                    !ps.shared
                        .iter()
                        .any(|p| cq.quota.group_of.get(&p.input) == Some(&n.group))
                });
            }
            let mut ps_choice: Vec<GroupChoice> = Vec::with_capacity(needs.len());
            for mut need in needs {
                if !ps.shared.is_empty() {
                    need = self.charged_need(cq, ps, need, &ps_choice);
                }
                let group = &cq.quota.groups[need.group];
                let pick = self.pick_flavor(cq_id, group, ps, &need.amounts, &acc.usage, explain);
                if pick.best.is_none() && !explain {
                    // Not assignable: the caller asks again with explain.
                    return Err(AssignError::NoFit {
                        options: Vec::new(),
                        verdicts: Vec::new(),
                        never: false,
                    });
                }
                acc.take(pi, &need, group, pick, explain, &mut ps_choice);
            }
            acc.choice.push(ps_choice);
        }
        acc.finish()
    }

    /// For one (pod set, resource group): in the queue's flavor order, the
    /// first flavor that holds `reqs` (on top of `usage`, what the
    /// workload's earlier pod sets took) without borrowing, else the first
    /// that holds them by borrowing; the flavors that could hold them with
    /// preemption; and, when explaining, why each other flavor cannot.
    fn pick_flavor(
        &self,
        cq_id: CqId,
        group: &Group,
        ps: &PodSet,
        reqs: &[(usize, Amount)],
        usage: &[(usize, Amount)],
        explain: bool,
    ) -> GroupPick {
        let mut pick = GroupPick {
            best: None,
            possible: Vec::new(),
            verdicts: Vec::new(),
        };
        for (fi, gf) in group.flavors.iter().enumerate() {
            if let Err(v) = self.flavor_compatible(gf.flavor, ps, group) {
                if explain {
                    pick.verdicts.push(self.verdict(ps, gf.flavor, v));
                }
                continue;
            }
            match self.flavor_fit(cq_id, gf, reqs, usage) {
                Ok(false) => {
                    pick.best = Some((fi, false));
                    pick.possible.push(gf.flavor);
                    break;
                }
                Ok(true) => {
                    if pick.best.is_none() {
                        pick.best = Some((fi, true));
                    }
                    pick.possible.push(gf.flavor);
                }
                Err(short) => {
                    if explain {
                        pick.verdicts.push(self.quota_verdict(cq_id, ps, gf.flavor, &short));
                    }
                    if let Shortage::NotNow { .. } = short.why {
                        pick.possible.push(gf.flavor);
                    }
                }
            }
        }
        pick
    }

    /// Whether `reqs` fit in one flavor's slots on top of `usage`, and
    /// whether by borrowing; or the first slot that cannot hold its amount.
    fn flavor_fit(
        &self,
        cq_id: CqId,
        gf: &GroupFlavor,
        reqs: &[(usize, Amount)],
        usage: &[(usize, Amount)],
    ) -> Result<bool, Short> {
        let cq = &self.queues.cqs[cq_id];
        let mut borrows = false;
        for &(rpos, amount) in reqs {
            let slot = gf.slots[rpos];
            let needed = amount + pending_amount(usage, slot);
            let why = match ledger::check(&cq.quota.slots[slot], 0, needed, self.chain(cq_id, slot, None)) {
                Fit::Fits => continue,
                Fit::Borrows if self.deprioritized(cq_id) => {
                    // A deprioritized queue keeps to its nominal quota.
                    let s = &cq.quota.slots[slot];
                    Shortage::NotNow {
                        available: (s.nominal - s.effective()).max(0),
                    }
                }
                Fit::Borrows => {
                    borrows = true;
                    continue;
                }
                Fit::NotNow { available } => Shortage::NotNow { available },
                Fit::Never { max } => Shortage::Never { max },
            };
            return Err(Short { slot, needed, why });
        }
        Ok(borrows)
    }

    /// Why a flavor cannot hold a pod set: its slot's quota, now or ever.
    fn quota_verdict(&self, cq_id: CqId, ps: &PodSet, flavor: FlavorId, short: &Short) -> FlavorVerdict {
        let s = &self.queues.cqs[cq_id].quota.slots[short.slot];
        let resource = self.catalog.resources.name(s.fr.1).to_string();
        let needed = short.needed;
        let verdict = match short.why {
            Shortage::NotNow { available } => {
                let free_nominal = (s.nominal - s.effective()).clamp(0, available);
                Verdict::InsufficientQuota {
                    resource,
                    needed,
                    up_to: None,
                    free_nominal,
                    nominal: s.nominal,
                    borrowable: available - free_nominal,
                }
            }
            Shortage::Never { max } => Verdict::ExceedsMaxQuota {
                resource,
                needed,
                up_to: None,
                max,
            },
        };
        self.verdict(ps, flavor, verdict)
    }

    /// A group's need as charged on the flavors chosen so far for the pod
    /// set's other groups (`charge.rs`).
    fn charged_need(&self, cq: &Cq, ps: &PodSet, need: GroupNeed, chosen: &[GroupChoice]) -> GroupNeed {
        let total = self.charged_total(cq, ps, |g| chosen.iter().find(|c| c.group == g).map(|c| c.flavor));
        let group = &cq.quota.groups[need.group];
        GroupNeed {
            group: need.group,
            amounts: need
                .amounts
                .into_iter()
                .map(|(rpos, amount)| {
                    let res = group.resources[rpos];
                    let charged = total.iter().find(|(r, _)| *r == res).map_or(amount, |&(_, a)| a);
                    (rpos, charged)
                })
                .collect(),
        }
    }

    /// For each resource group the pod set needs, the requested amounts by
    /// position in the group. Errors with a resource no group covers.
    pub(super) fn group_needs(&self, cq: &Cq, ps: &PodSet) -> Result<Vec<GroupNeed>, ResId> {
        let mut needs: Vec<GroupNeed> = Vec::new();
        for &(res, amount) in &ps.total {
            let Some(&g) = cq.quota.group_of.get(&res) else {
                return Err(res);
            };
            let rpos = cq.quota.groups[g]
                .resources
                .iter()
                .position(|&r| r == res)
                .expect("group covers resource");
            match needs.iter_mut().find(|n| n.group == g) {
                Some(n) => n.amounts.push((rpos, amount)),
                None => needs.push(GroupNeed {
                    group: g,
                    amounts: vec![(rpos, amount)],
                }),
            }
        }
        Ok(needs)
    }

    /// Whether `flavor` may hold what pod set `ps` asks of `group`: its node
    /// labels and taints ([`compatible`]), and for a group of GPUs that
    /// sharing nodes replicate, whole GPUs or replicas as the pod set asks.
    #[inline]
    pub(super) fn flavor_compatible(&self, flavor: FlavorId, ps: &PodSet, group: &Group) -> Result<(), Verdict> {
        let spec = self.catalog.flavors.get(&flavor);
        compatible(spec, &ps.node_selector, &ps.tolerations)?;
        if ps.gpu_ask == GpuAsk::None
            || !group
                .resources
                .iter()
                .any(|r| self.catalog.shared_resources.contains(r))
        {
            return Ok(());
        }
        match ps.gpu_ask {
            GpuAsk::None => {}
            GpuAsk::Whole if spec.is_some_and(|s| s.shared_gpu_requests == SharedGpuRequests::Marked) => {
                let replicas = self.gpu_replicas(flavor);
                if replicas > 1 {
                    return Err(Verdict::SharedGpusOnly { replicas });
                }
            }
            GpuAsk::Whole => {}
            GpuAsk::Replica => {
                // Known whole: its nodes are known, and none shares.
                let has_nodes = self.inv.flavor_nodes.get(&flavor).is_some_and(|n| !n.is_empty());
                if has_nodes && self.gpu_replicas(flavor) == 1 {
                    return Err(Verdict::WholeGpusOnly);
                }
            }
        }
        Ok(())
    }

    pub(super) fn verdict(&self, ps: &PodSet, flavor: FlavorId, verdict: Verdict) -> FlavorVerdict {
        FlavorVerdict {
            pod_set: ps.name.to_string(),
            flavor: self.catalog.flavor_names.name(flavor).to_string(),
            verdict,
        }
    }

    /// The request per slot of one choice of flavors (option indices).
    pub(super) fn option_usage(
        &self,
        cq: CqId,
        id: WlId,
        options: &[FlavorOption],
        pick: &[usize],
    ) -> Vec<(usize, Amount)> {
        let cq_ref = &self.queues.cqs[cq];
        let wl = self.wl(id);
        let mut usage = Vec::new();
        for (option, &k) in options.iter().zip(pick) {
            let flavor = option.flavors[k];
            let group = &cq_ref.quota.groups[option.group];
            let gf = group
                .flavors
                .iter()
                .find(|f| f.flavor == flavor)
                .expect("option flavor in group");
            let flavor_of = |g: usize| {
                options
                    .iter()
                    .zip(pick)
                    .find(|(o, _)| o.pod_set == option.pod_set && o.group == g)
                    .map(|(o, &j)| o.flavors[j])
            };
            let total = self.charged_total(cq_ref, &wl.pod_sets[option.pod_set], flavor_of);
            for &(res, amount) in total.iter() {
                if let Some(rpos) = group.resources.iter().position(|&r| r == res) {
                    add_pending(&mut usage, gf.slots[rpos], amount);
                }
            }
        }
        usage
    }

    pub(super) fn first_option_usage(
        &self,
        cq: CqId,
        id: WlId,
        options: &[FlavorOption],
    ) -> Option<Vec<(usize, Amount)>> {
        let pick = picks_per_flavor(options).next()?;
        Some(self.option_usage(cq, id, options, &pick))
    }

    /// The usage of each flavor in preference order, with its flavors:
    /// the `j`-th takes every option's `j`-th flavor (its last, when it
    /// has fewer). None when some option has no flavor.
    pub(super) fn choices_per_flavor<'a>(
        &'a self,
        cq: CqId,
        id: WlId,
        options: &'a [FlavorOption],
    ) -> impl Iterator<Item = (Vec<(usize, Amount)>, Choice)> + 'a {
        let pod_sets = self.wl(id).pod_sets.len();
        picks_per_flavor(options).map(move |pick| {
            (
                self.option_usage(cq, id, options, &pick),
                self.choice_from_pick(pod_sets, options, &pick),
            )
        })
    }

    pub(super) fn choice_from_pick(&self, pod_sets: usize, options: &[FlavorOption], pick: &[usize]) -> Choice {
        // One entry per pod set, also for pod sets that request nothing.
        let mut choice = vec![Vec::new(); pod_sets];
        for (option, &k) in options.iter().zip(pick) {
            choice[option.pod_set].push(GroupChoice {
                group: option.group,
                flavor: option.flavors[k],
            });
        }
        Choice(choice)
    }
}

/// The `j`-th pick of every option (its last flavor when it has fewer),
/// for each `j`; none when some option has no flavor.
fn picks_per_flavor(options: &[FlavorOption]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let most = if options.iter().any(|o| o.flavors.is_empty()) {
        0
    } else {
        options.iter().map(|o| o.flavors.len()).max().unwrap_or(0)
    };
    (0..most).map(move |j| options.iter().map(|o| j.min(o.flavors.len() - 1)).collect())
}

fn pending_amount(usage: &[(usize, Amount)], slot: usize) -> Amount {
    usage.iter().find(|(s, _)| *s == slot).map(|(_, a)| *a).unwrap_or(0)
}

fn add_pending(usage: &mut Vec<(usize, Amount)>, slot: usize, amount: Amount) {
    match usage.iter_mut().find(|(s, _)| *s == slot) {
        Some((_, a)) => *a += amount,
        None => usage.push((slot, amount)),
    }
}

/// Whether a pod set with this node selector and these tolerations can use
/// a flavor at all, whatever its quota: the flavor exists, its node labels
/// do not contradict the selector (a key the flavor does not label is
/// left to the scheduler), and every `NoSchedule`/`NoExecute` taint of its
/// nodes is tolerated by the pod set or by the flavor's own tolerations
/// (which admission injects). `PreferNoSchedule` never excludes.
#[inline]
pub(super) fn compatible(
    spec: Option<&FlavorSpec>,
    node_selector: &BTreeMap<String, String>,
    tolerations: &[Toleration],
) -> Result<(), Verdict> {
    let Some(spec) = spec else {
        return Err(Verdict::FlavorNotFound);
    };
    for (key, wanted) in node_selector {
        if let Some(has) = spec.node_labels.get(key)
            && has != wanted
        {
            return Err(Verdict::NodeLabelMismatch {
                key: key.clone(),
                wanted: wanted.clone(),
                flavor_has: has.clone(),
            });
        }
    }
    for taint in &spec.taints {
        if taint.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        let tolerated = tolerations.iter().chain(&spec.tolerations).any(|t| t.tolerates(taint));
        if !tolerated {
            let value = taint.value.as_deref().map(|v| format!("={v}")).unwrap_or_default();
            return Err(Verdict::UntoleratedTaint {
                taint: format!("{}{value}:{:?}", taint.key, taint.effect),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Taint, TolerationOperator};

    fn flavor(labels: &[(&str, &str)], taints: &[(&str, Option<&str>, TaintEffect)]) -> FlavorSpec {
        FlavorSpec {
            name: "a100".into(),
            node_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: taints
                .iter()
                .map(|(k, v, effect)| Taint {
                    key: k.to_string(),
                    value: v.map(str::to_string),
                    effect: *effect,
                })
                .collect(),
            tolerations: Vec::new(),
            topology_key: None,
            shared_gpu_requests: SharedGpuRequests::Marked,
        }
    }

    fn exists(key: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: TolerationOperator::Exists,
            value: None,
            effect: None,
        }
    }

    fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_missing_flavor_is_never_compatible() {
        assert_eq!(compatible(None, &selector(&[]), &[]), Err(Verdict::FlavorNotFound));
    }

    #[test]
    fn node_selector_against_flavor_labels() {
        let f = flavor(&[("gpu", "a100")], &[]);
        assert_eq!(compatible(Some(&f), &selector(&[("gpu", "a100")]), &[]), Ok(()));
        // A key the flavor does not label is for the scheduler to decide.
        assert_eq!(compatible(Some(&f), &selector(&[("zone", "b")]), &[]), Ok(()));
        assert_eq!(
            compatible(Some(&f), &selector(&[("gpu", "h100")]), &[]),
            Err(Verdict::NodeLabelMismatch {
                key: "gpu".into(),
                wanted: "h100".into(),
                flavor_has: "a100".into(),
            })
        );
    }

    #[test]
    fn taints_need_a_toleration_from_the_pod_set_or_the_flavor() {
        let mut f = flavor(&[], &[("nvidia.com/gpu", Some("present"), TaintEffect::NoSchedule)]);
        assert_eq!(
            compatible(Some(&f), &selector(&[]), &[]),
            Err(Verdict::UntoleratedTaint {
                taint: "nvidia.com/gpu=present:NoSchedule".into()
            })
        );
        assert_eq!(
            compatible(Some(&f), &selector(&[]), &[exists("nvidia.com/gpu")]),
            Ok(())
        );
        f.tolerations.push(exists("nvidia.com/gpu"));
        assert_eq!(compatible(Some(&f), &selector(&[]), &[]), Ok(()));
    }

    #[test]
    fn prefer_no_schedule_never_excludes() {
        let f = flavor(&[], &[("spot", None, TaintEffect::PreferNoSchedule)]);
        assert_eq!(compatible(Some(&f), &selector(&[]), &[]), Ok(()));
        let f = flavor(&[], &[("maintenance", None, TaintEffect::NoExecute)]);
        assert_eq!(
            compatible(Some(&f), &selector(&[]), &[]),
            Err(Verdict::UntoleratedTaint {
                taint: "maintenance:NoExecute".into()
            })
        );
    }
}
