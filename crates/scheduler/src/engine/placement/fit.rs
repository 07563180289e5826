//! The placement rule. Pod sets are placed largest pod first (a pod's size
//! is its largest request relative to the largest node). The pods of one
//! pod set are identical, so whether they fit is exact: node by node, how
//! many whole pods its free capacity takes, summed. Which nodes they go to
//! is *best fit*: the nodes with the least free room of the pod's main
//! resource first, so that empty nodes stay empty for large pods. A pod set
//! that requires one topology domain tries the domains with the least room
//! first and takes the first that holds all its pods. Pod sets share
//! nodes: one placed earlier leaves less room for the next, and no order
//! other than largest-first is tried.

use std::collections::BTreeMap;

use crate::decision::TopologyDomain;
use crate::engine::flavor::{Choice, GroupChoice};
use crate::engine::state::{Cq, PodSet};
use crate::engine::{CqId, Engine, WlId};
use crate::ledger::{FlavorId, ResId};
use crate::model::Amount;

use super::{NodeDelta, NodeId, ResVec, res_add, res_get};

/// Where the pods of a workload go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::engine) struct Placement {
    /// (node, pod set index, pods).
    pub(in crate::engine) pods: Vec<(NodeId, usize, u32)>,
    /// Per pod set index, the topology domain it was placed in.
    pub(in crate::engine) domains: Vec<(usize, TopologyDomain)>,
}

/// Why a workload's pods do not fit: the first pod set that did not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::engine) struct NoRoom {
    pub(in crate::engine) pod_set: usize,
    /// The flavor of the pod's main resource.
    pub(in crate::engine) flavor: FlavorId,
    pub(in crate::engine) resource: ResId,
    pub(in crate::engine) per_pod: Amount,
    pub(in crate::engine) pods: u32,
    pub(in crate::engine) placeable: u32,
    pub(in crate::engine) nodes: usize,
    pub(in crate::engine) largest_free: Amount,
    pub(in crate::engine) largest_node: Option<NodeId>,
    pub(in crate::engine) topology: Option<String>,
}

/// The room `place` sees: the nodes under a what-if, less the pods it
/// placed so far.
struct Room<'a> {
    delta: &'a NodeDelta,
    taken: Vec<(NodeId, ResVec)>,
    /// The nodes as if nothing ran on them (their allocatable).
    empty: bool,
}

impl Room<'_> {
    fn taken(&self, n: NodeId, r: ResId) -> Amount {
        self.taken
            .iter()
            .find(|(m, _)| *m == n)
            .map_or(0, |(_, v)| res_get(v, r))
    }
    fn take(&mut self, n: NodeId, per_pod: &[(ResId, Amount)], k: u32) {
        let i = match self.taken.iter().position(|(m, _)| *m == n) {
            Some(i) => i,
            None => {
                self.taken.push((n, Vec::new()));
                self.taken.len() - 1
            }
        };
        for &(r, a) in per_pod {
            res_add(&mut self.taken[i].1, r, a * k as Amount);
        }
    }
}

/// One pod set to place.
struct Ask {
    pod_set: usize,
    per_pod: ResVec,
    count: u32,
    main: ResId,
    main_flavor: FlavorId,
    size: i128,
    flavors: Vec<FlavorId>,
    topology: Option<String>,
}

impl Engine {
    /// Places the workload's pods with these flavors, on the nodes' free
    /// room plus `delta`.
    pub(in crate::engine) fn place(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        delta: &NodeDelta,
    ) -> Result<Placement, Box<NoRoom>> {
        self.place_pinned(cq, id, choice, delta, &[])
    }

    /// Like [`Engine::place`], with some pod sets (by index) held to one
    /// topology domain (by value) when they require one.
    pub(in crate::engine) fn place_pinned(
        &self,
        cq: CqId,
        id: WlId,
        choice: &Choice,
        delta: &NodeDelta,
        pinned: &[(usize, &str)],
    ) -> Result<Placement, Box<NoRoom>> {
        let wl = self.wl(id);
        let q = &self.queues.cqs[cq];
        let mut asks: Vec<Ask> = wl
            .pod_sets
            .iter()
            .enumerate()
            .filter_map(|(pi, ps)| self.ask(q, pi, ps, choice.0.get(pi).map(Vec::as_slice).unwrap_or(&[])))
            .collect();
        asks.sort_by(|a, b| b.size.cmp(&a.size).then(a.pod_set.cmp(&b.pod_set)));
        let mut room = Room {
            delta,
            taken: Vec::new(),
            empty: false,
        };
        let mut placement = Placement::default();
        for ask in &asks {
            let ps = &wl.pod_sets[ask.pod_set];
            let nodes = self.candidate_nodes(&ask.flavors, ps);
            let placed = match &ask.topology {
                None => self.fill(&nodes, ask, &room),
                Some(key) => {
                    let pin = pinned.iter().find(|(pi, _)| *pi == ask.pod_set).map(|(_, v)| *v);
                    self.fill_domain(&nodes, ask, key, pin, &room).map(|(pods, value)| {
                        placement.domains.push((
                            ask.pod_set,
                            TopologyDomain {
                                key: key.clone(),
                                value,
                            },
                        ));
                        pods
                    })
                }
            };
            match placed {
                Ok(pods) => {
                    for &(n, k) in &pods {
                        room.take(n, &ask.per_pod, k);
                        placement.pods.push((n, ask.pod_set, k));
                    }
                }
                Err(placeable) => return Err(self.no_room(ask, &nodes, placeable, &room)),
            }
        }
        Ok(placement)
    }

    /// Whether pod set `pi` of the workload, with `choice`'s flavor for
    /// each resource group, would fit on the nodes of those flavors
    /// (cordoned ones too) if nothing ran on them (their allocatable); on
    /// failure, the numbers of the best try.
    pub(in crate::engine) fn fits_empty_nodes(
        &self,
        cq: CqId,
        id: WlId,
        pi: usize,
        choice: &[GroupChoice],
    ) -> Result<(), Box<NoRoom>> {
        let ps = &self.wl(id).pod_sets[pi];
        let Some(ask) = self.ask(&self.queues.cqs[cq], pi, ps, choice) else {
            return Ok(());
        };
        let room = Room {
            delta: &NodeDelta::default(),
            taken: Vec::new(),
            empty: true,
        };
        let nodes = self.nodes_for(&ask.flavors, ps, true);
        let placed = match &ask.topology {
            None => self.fill(&nodes, &ask, &room).map(drop),
            Some(key) => self.fill_domain(&nodes, &ask, key, None, &room).map(drop),
        };
        placed.map_err(|placeable| self.no_room(&ask, &nodes, placeable, &room))
    }

    /// What a pod set to place asks for with these flavors (`None` when it
    /// asks for nothing).
    fn ask(&self, q: &Cq, pi: usize, ps: &PodSet, groups: &[GroupChoice]) -> Option<Ask> {
        if groups.is_empty() || ps.requested().is_empty() {
            return None;
        }
        let mut flavors: Vec<FlavorId> = groups.iter().map(|g| g.flavor).collect();
        flavors.sort_unstable();
        flavors.dedup();
        let count = ps.count.max(1);
        let mut per_pod: ResVec = ps.requested().iter().map(|&(r, a)| (r, a / count as Amount)).collect();
        res_add(&mut per_pod, self.catalog.pods_res, 1000);
        // The main resource: the largest share of the largest node.
        let (mut main, mut size) = (self.catalog.pods_res, -1i128);
        for &(r, a) in &per_pod {
            if r == self.catalog.pods_res {
                continue;
            }
            let scale = self.inv.max_alloc.get(&r).copied().unwrap_or(0).max(1) as i128;
            let s = (a as i128) * 1_000_000 / scale;
            if s > size {
                (main, size) = (r, s);
            }
        }
        let main_flavor = q
            .quota
            .group_of
            .get(&main)
            .and_then(|&g| groups.iter().find(|c| c.group == g))
            .map_or(flavors[0], |c| c.flavor);
        let topology = if ps.require_single_domain {
            std::iter::once(main_flavor)
                .chain(flavors.iter().copied())
                .find_map(|f| self.catalog.flavors.get(&f).and_then(|s| s.topology_key.clone()))
        } else {
            None
        };
        Some(Ask {
            pod_set: pi,
            per_pod,
            count: ps.count,
            main,
            main_flavor,
            size,
            flavors,
            topology,
        })
    }

    /// Why `ask` did not fit on `nodes`: `placeable` of its pods did.
    fn no_room(&self, ask: &Ask, nodes: &[NodeId], placeable: u32, room: &Room<'_>) -> Box<NoRoom> {
        let (largest_free, largest_node) = nodes
            .iter()
            .map(|&n| (self.room_free(n, ask.main, room), n))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map_or((0, None), |(f, n)| (f.max(0), Some(n)));
        Box::new(NoRoom {
            pod_set: ask.pod_set,
            flavor: ask.main_flavor,
            resource: ask.main,
            per_pod: res_get(&ask.per_pod, ask.main),
            pods: ask.count,
            placeable,
            nodes: nodes.len(),
            largest_free,
            largest_node,
            topology: ask.topology.clone(),
        })
    }

    /// How many of the pod fit on node `n` under `delta`.
    pub(in crate::engine) fn fit_count(&self, n: NodeId, per_pod: &[(ResId, Amount)], delta: &NodeDelta) -> u32 {
        let room = Room {
            delta,
            taken: Vec::new(),
            empty: false,
        };
        self.fit(n, per_pod, self.catalog.pods_res, &room).0
    }

    /// Free `r` on node `n` in `room`.
    fn room_free(&self, n: NodeId, r: ResId, room: &Room<'_>) -> Amount {
        let free = if room.empty {
            self.inv.nodes[n].capacity(r, self.catalog.pods_res)
        } else {
            self.node_free(n, r, room.delta)
        };
        free - room.taken(n, r)
    }

    /// How many of the pod fit on node `n` in `room`, and the free amount
    /// of `main` there.
    fn fit(&self, n: NodeId, per_pod: &[(ResId, Amount)], main: ResId, room: &Room<'_>) -> (u32, Amount) {
        // The main resource first: on a busy cluster most nodes stop there.
        let main_free = self.room_free(n, main, room);
        let mut k = match res_get(per_pod, main) {
            a if a > 0 => main_free.max(0) / a,
            _ => u32::MAX as Amount,
        };
        for &(r, a) in per_pod {
            if k == 0 {
                break;
            }
            if a > 0 && r != main {
                k = k.min(self.room_free(n, r, room).max(0) / a);
            }
        }
        (k.clamp(0, u32::MAX as Amount) as u32, main_free)
    }

    /// Best fit of `ask.count` identical pods on `nodes`; on failure, how
    /// many would fit.
    fn fill(&self, nodes: &[NodeId], ask: &Ask, room: &Room<'_>) -> Result<Vec<(NodeId, u32)>, u32> {
        let mut fits: Vec<(Amount, NodeId, u32)> = Vec::with_capacity(nodes.len());
        let mut total: u64 = 0;
        for &n in nodes {
            let (k, main_free) = self.fit(n, &ask.per_pod, ask.main, room);
            if k > 0 {
                total += k as u64;
                fits.push((main_free, n, k));
            }
        }
        if total < ask.count as u64 {
            return Err(total as u32);
        }
        fits.sort_unstable();
        let mut left = ask.count;
        let mut out = Vec::new();
        for (_, n, k) in fits {
            if left == 0 {
                break;
            }
            let take = k.min(left);
            out.push((n, take));
            left -= take;
        }
        Ok(out)
    }

    /// Best fit within one domain of `key` (`pin`, when given): the
    /// domains with the least room of the main resource first. On failure,
    /// the most pods one domain would take.
    fn fill_domain(
        &self,
        nodes: &[NodeId],
        ask: &Ask,
        key: &str,
        pin: Option<&str>,
        room: &Room<'_>,
    ) -> Result<(Vec<(NodeId, u32)>, String), u32> {
        let mut domains: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
        for &n in nodes {
            if let Some(v) = self.inv.nodes[n].labels.get(key)
                && pin.is_none_or(|p| p == v)
            {
                domains.entry(v.as_str()).or_default().push(n);
            }
        }
        let mut ordered: Vec<(Amount, &str, Vec<NodeId>)> = domains
            .into_iter()
            .map(|(v, ns)| {
                let free: Amount = ns.iter().map(|&n| self.room_free(n, ask.main, room).max(0)).sum();
                (free, v, ns)
            })
            .collect();
        ordered.sort();
        let mut best = 0;
        for (_, value, ns) in ordered {
            match self.fill(&ns, ask, room) {
                Ok(pods) => return Ok((pods, value.to_string())),
                Err(k) => best = best.max(k),
            }
        }
        Err(best)
    }
}
