//! The engine's internal types: interned names, ClusterQueues with their
//! slots and candidate lists, cohorts, workloads and their states, timers
//! and shape keys.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::decision::{Explanation, PodSetAssignment};
use crate::ledger::{FlavorId, FrKey, Pool, ResId, Slot};
use crate::model::{Amount, ClusterQueueSpec, CohortSpec, Millis, Toleration};

use super::charge::SharedPart;
use super::fast_map::FastMap;
use super::placement::Placement;
use super::placement::{NodeId, ResVec};
use super::{CohortId, CqId, WlId};

/// Queue order: priority descending, then queue-order time, then arrival
/// (the order the engine was given the workloads: queue-order times in
/// whole seconds tie often, and a workload that arrived later is behind),
/// then UID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OrderKey {
    pub(super) prio: Reverse<i32>,
    pub(super) ts: Millis,
    pub(super) arrival: u64,
    pub(super) uid: Arc<str>,
    pub(super) id: WlId,
}

#[derive(Default, Clone)]
pub(super) struct Interner {
    pub(super) ids: HashMap<Arc<str>, u32>,
    pub(super) names: Vec<Arc<str>>,
}

impl Interner {
    pub(super) fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        let name: Arc<str> = Arc::from(s);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }
    pub(super) fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }
    pub(super) fn name(&self, id: u32) -> &Arc<str> {
        &self.names[id as usize]
    }
}

#[derive(Clone)]
pub(super) struct GroupFlavor {
    pub(super) flavor: FlavorId,
    /// Slot per resource of the group, aligned with `Group::resources`.
    pub(super) slots: Vec<usize>,
}

#[derive(Clone)]
pub(super) struct Group {
    pub(super) resources: Vec<ResId>,
    pub(super) flavors: Vec<GroupFlavor>,
}

#[derive(Clone)]
pub(super) struct Cq {
    pub(super) name: Arc<str>,
    pub(super) spec: ClusterQueueSpec,
    pub(super) deleted: bool,
    pub(super) cohort: Option<CohortId>,
    /// Its resource groups and quota slots (`config.rs`; usage: `admit.rs`).
    pub(super) quota: Quota,
    /// Its pending workloads and candidate lists (`queue.rs`, `cycle.rs`).
    pub(super) waiting: Waiting,
    /// Admitted and evicting workloads.
    pub(super) admitted: BTreeSet<WlId>,
    /// How many of them the cycle in progress admitted.
    pub(super) admitted_now: usize,
    pub(super) evicting: usize,
}

/// A ClusterQueue's quota: resource groups with their flavors, and one
/// ledger slot per (flavor, resource).
#[derive(Clone, Default)]
pub(super) struct Quota {
    pub(super) groups: Vec<Group>,
    pub(super) group_of: FastMap<ResId, usize>,
    pub(super) slots: Vec<Slot>,
    pub(super) slot_of: FastMap<FrKey, usize>,
}

/// A ClusterQueue's pending workloads and the candidate lists a cycle
/// tries them from.
#[derive(Clone, Default)]
pub(super) struct Waiting {
    /// Every pending workload (also preemptors waiting for victims), in
    /// queue order: for positions and counts.
    pub(super) pending: BTreeSet<OrderKey>,
    /// Pending workloads with an explanation of their own (or none yet).
    pub(super) loose: BTreeSet<OrderKey>,
    /// Pending workloads parked because their shape did not fit: they share
    /// the (queue, shape) explanation in `Memo::shape_expl`.
    pub(super) shaped: BTreeMap<u32, BTreeSet<OrderKey>>,
    /// Pending workloads not yet tried since they (re)entered the queue.
    pub(super) fresh: BTreeSet<OrderKey>,
    /// Quota may have been freed: retry every pending workload.
    pub(super) woken: bool,
    /// Preemptors waiting for their victims.
    pub(super) preempting: usize,
}

impl Waiting {
    pub(super) fn insert_pending(&mut self, key: OrderKey) {
        self.pending.insert(key.clone());
        self.loose.insert(key.clone());
        self.fresh.insert(key);
    }

    /// Out of the candidate lists (loose, shaped, fresh), still pending.
    pub(super) fn take_off_lists(&mut self, key: &OrderKey, shape: u32) {
        self.loose.remove(key);
        self.fresh.remove(key);
        if let Some(set) = self.shaped.get_mut(&shape) {
            set.remove(key);
            if set.is_empty() {
                self.shaped.remove(&shape);
            }
        }
    }

    pub(super) fn remove_pending(&mut self, key: &OrderKey, shape: u32) {
        self.pending.remove(key);
        self.take_off_lists(key, shape);
    }
}

#[derive(Clone)]
pub(super) struct Cohort {
    pub(super) name: Arc<str>,
    /// The Cohort object, if one describes it.
    pub(super) spec: Option<CohortSpec>,
    pub(super) parent: Option<CohortId>,
    pub(super) children: BTreeSet<CohortId>,
    /// Its own queues (not those of child cohorts).
    pub(super) members: BTreeSet<CqId>,
    pub(super) pools: Vec<Pool>,
    pub(super) pool_of: FastMap<FrKey, usize>,
    /// Per resource, the most its children could take from it, summed over
    /// flavors (Kueue's lendable): what their shares are measured against.
    pub(super) lendable: FastMap<ResId, Amount>,
    /// For a root: every queue of its tree, in id order.
    pub(super) tree: Vec<CqId>,
}

#[derive(Clone)]
pub(super) struct PodSet {
    pub(super) name: Arc<str>,
    pub(super) count: u32,
    /// Total (count × per pod) by resource that quota is charged, on a
    /// flavor that shares no GPU (`charge.rs`), sorted, zero amounts dropped.
    pub(super) total: Vec<(ResId, Amount)>,
    /// What the pods request of nodes in total, when it differs from
    /// `total` (resource transformations); see [`PodSet::requested`].
    pub(super) raw: Option<Vec<(ResId, Amount)>>,
    /// The parts of the charge that a flavor sharing its GPUs lowers.
    pub(super) shared: Vec<SharedPart>,
    /// Whether it asks for GPUs that sharing nodes replicate, and whole
    /// ones or a replica (`charge.rs`, [`crate::sharing`]).
    pub(super) gpu_ask: GpuAsk,
    pub(super) node_selector: BTreeMap<String, String>,
    pub(super) tolerations: Vec<Toleration>,
    pub(super) require_single_domain: bool,
    /// Fewest pods partial admission may give it (`None`: all or nothing).
    pub(super) min_count: Option<u32>,
}

/// What a pod set asks of a GPU resource that sharing nodes replicate
/// (`nvidia.com/gpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) enum GpuAsk {
    /// It asks for none.
    #[default]
    None,
    /// Whole GPUs: a flavor whose nodes share their GPUs takes it only if
    /// it takes any request.
    Whole,
    /// A replica (its node selector names the sharing label): a flavor
    /// whose nodes are known to give whole GPUs does not take it.
    Replica,
}

impl PodSet {
    /// What its pods request of nodes in total, by resource, sorted.
    pub(super) fn requested(&self) -> &[(ResId, Amount)] {
        self.raw.as_deref().unwrap_or(&self.total)
    }
}

/// Quota a workload holds (admitted or evicting) or claims (preempting).
#[derive(Clone)]
pub(super) struct Holding {
    pub(super) cq: CqId,
    pub(super) usage: Vec<(FrKey, Amount)>,
    pub(super) assignment: Arc<[PodSetAssignment]>,
    pub(super) borrowing: bool,
    pub(super) admitted_at: Millis,
    /// Victims still to go, by id and uid (ids are reused after removal).
    pub(super) victims: Vec<(WlId, Arc<str>)>,
    /// Where its pods were placed (empty without placement).
    pub(super) placement: Placement,
}

#[derive(Clone)]
pub(super) enum State {
    Pending,
    Backoff(Millis),
    Preempting(Box<Holding>),
    Admitted(Box<Holding>),
    Evicting(Box<Holding>),
    Finished,
}

impl State {
    pub(super) fn name(&self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Backoff(_) => "backing off",
            State::Preempting(_) => "waiting for its victims",
            State::Admitted(_) => "admitted",
            State::Evicting(_) => "being evicted",
            State::Finished => "finished",
        }
    }
}

#[derive(Clone)]
pub(super) struct Wl {
    pub(super) uid: Arc<str>,
    pub(super) name: Arc<str>,
    pub(super) lq: Arc<str>,
    pub(super) priority: i32,
    pub(super) ts: Millis,
    /// When the engine was given it, counted from the first workload:
    /// breaks ties of `ts` in queue order. Kept when it is requeued.
    pub(super) arrival: u64,
    pub(super) pod_sets: Vec<PodSet>,
    pub(super) shape: u32,
    pub(super) state: State,
    /// Resolved cluster queue while pending.
    pub(super) cq: Option<CqId>,
    pub(super) explanation: Option<Arc<Explanation>>,
    /// Parked by shape: the explanation is the queue's one for its shape.
    pub(super) shaped: bool,
    /// Its pods on nodes (placement only; `None` while it has none).
    pub(super) nodes: Option<Box<WlNodes>>,
    /// While admitted with fewer pods than it asked for: its full pod sets
    /// and shape, given back when it returns to its queue.
    pub(super) full: Option<Box<(Vec<PodSet>, u32)>>,
    /// When this engine last chose it as a victim (a preemption's grace).
    pub(super) last_preempted: Option<Millis>,
    /// Its declared run time ([`crate::WorkloadSpec::expected_runtime`]).
    pub(super) expected_runtime: Option<Millis>,
}

/// A workload's pods on nodes.
#[derive(Clone, Default)]
pub(super) struct WlNodes {
    /// Its pods bound to nodes (node, pods, their requests), as reported.
    pub(super) bound: Vec<(NodeId, u32, ResVec)>,
    /// What it holds on nodes now (reservations of unbound pods).
    pub(super) reserved: Vec<(NodeId, ResVec)>,
}

impl Wl {
    pub(super) fn bound(&self) -> &[(NodeId, u32, ResVec)] {
        self.nodes.as_ref().map_or(&[], |n| &n.bound)
    }

    pub(super) fn reserved(&self) -> &[(NodeId, ResVec)] {
        self.nodes.as_ref().map_or(&[], |n| &n.reserved)
    }

    pub(super) fn set_bound(&mut self, bound: Vec<(NodeId, u32, ResVec)>) -> Vec<(NodeId, u32, ResVec)> {
        self.with_nodes(bound.is_empty(), |n| std::mem::replace(&mut n.bound, bound))
    }

    pub(super) fn set_reserved(&mut self, reserved: Vec<(NodeId, ResVec)>) -> Vec<(NodeId, ResVec)> {
        self.with_nodes(reserved.is_empty(), |n| std::mem::replace(&mut n.reserved, reserved))
    }

    /// Changes its pods on nodes (nothing to do when `clearing` what it
    /// does not have), dropping the box once both lists are empty.
    fn with_nodes<T: Default>(&mut self, clearing: bool, f: impl FnOnce(&mut WlNodes) -> T) -> T {
        if clearing && self.nodes.is_none() {
            return T::default();
        }
        let n = self.nodes.get_or_insert_default();
        let out = f(n);
        if n.bound.is_empty() && n.reserved.is_empty() {
            self.nodes = None;
        }
        out
    }

    pub(super) fn key(&self, id: WlId) -> OrderKey {
        OrderKey {
            prio: Reverse(self.priority),
            ts: self.ts,
            arrival: self.arrival,
            uid: self.uid.clone(),
            id,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    WakeCq(CqId),
    Backoff(WlId),
}

/// What makes two workloads fail the same way, with the same explanation:
/// per pod set its name (explanations name pod sets), count, requests,
/// node selector and tolerations.
pub(super) type ShapeKey = Vec<PodSetShape>;

/// One pod set's part of a [`ShapeKey`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PodSetShape {
    pub(super) name: Arc<str>,
    pub(super) count: u32,
    pub(super) total: Vec<(ResId, Amount)>,
    pub(super) raw: Option<Vec<(ResId, Amount)>>,
    pub(super) gpu_ask: GpuAsk,
    pub(super) node_selector: BTreeMap<String, String>,
    pub(super) tolerations: Vec<Toleration>,
    pub(super) require_single_domain: bool,
    pub(super) min_count: Option<u32>,
}
