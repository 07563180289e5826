//! The [`Engine`]: state, lifecycle events and the admission cycle.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use crate::decision::{
    Admission, Cycle, Eviction, EvictionReason, Explanation, FlavorVerdict, PendingReason, PodSetAssignment,
    Preemption, PreemptionReason, Verdict,
};
use crate::ledger::{self, Fit, FlavorId, FrKey, Pool, ResId, Slot};
use crate::model::{
    Amount, BorrowWithinCohort, ClusterQueueSpec, EngineConfig, FlavorSpec, LocalQueueSpec, Millis, QueueingStrategy,
    ReclaimWithinCohort, RequeueOrder, StopPolicy, TaintEffect, Toleration, WithinClusterQueue, WorkloadSpec,
};

pub(crate) type CqId = usize;
pub(crate) type CohortId = usize;
pub(crate) type WlId = usize;

/// Errors from lifecycle calls. The engine's state is unchanged when one is
/// returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("workload {0} is already known to the engine")]
    DuplicateWorkload(String),
    #[error("workload {0} is not known to the engine")]
    UnknownWorkload(String),
    #[error("workload {uid} is {state}, not {expected}")]
    WrongState {
        uid: String,
        state: &'static str,
        expected: &'static str,
    },
    #[error("workload {uid}: pod set {pod_set}: count must be at least 1")]
    EmptyPodSet { uid: String, pod_set: String },
    #[error("workload {uid}: pod set {pod_set}: request for {resource} is negative")]
    NegativeRequest {
        uid: String,
        pod_set: String,
        resource: String,
    },
    #[error("workload {uid}: pod set {pod_set}: {resource} total overflows")]
    Overflow {
        uid: String,
        pod_set: String,
        resource: String,
    },
    #[error("cluster queue {0} does not exist")]
    UnknownClusterQueue(String),
    #[error("workload {uid}: admission names pod set {pod_set}, which the workload does not have")]
    UnknownPodSet { uid: String, pod_set: String },
    #[error("workload {uid}: pod set {pod_set} requests {resource} but the admission assigns it no flavor")]
    UnassignedResource {
        uid: String,
        pod_set: String,
        resource: String,
    },
}

/// A hash map for small integer keys: the engine hashes ids on hot paths,
/// where SipHash's flood resistance buys nothing (keys are not user input).
pub(crate) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Multiply-rotate hashing of integers (the FxHash scheme).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Queue order: priority descending, then queue-order time, then UID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OrderKey {
    prio: Reverse<i32>,
    ts: Millis,
    uid: Arc<str>,
    id: WlId,
}

#[derive(Default)]
struct Interner {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        let name: Arc<str> = Arc::from(s);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }
    fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }
    fn name(&self, id: u32) -> &Arc<str> {
        &self.names[id as usize]
    }
}

struct GroupFlavor {
    flavor: FlavorId,
    /// Slot per resource of the group, aligned with `Group::resources`.
    slots: Vec<usize>,
}

struct Group {
    resources: Vec<ResId>,
    flavors: Vec<GroupFlavor>,
}

struct Cq {
    name: Arc<str>,
    spec: ClusterQueueSpec,
    deleted: bool,
    cohort: Option<CohortId>,
    groups: Vec<Group>,
    group_of: FastMap<ResId, usize>,
    slots: Vec<Slot>,
    slot_of: FastMap<FrKey, usize>,
    /// Every pending workload (also preemptors waiting for victims), in
    /// queue order: for positions and counts.
    pending: BTreeSet<OrderKey>,
    /// Pending workloads with an explanation of their own (or none yet).
    loose: BTreeSet<OrderKey>,
    /// Pending workloads parked because their shape did not fit: they share
    /// the (queue, shape) explanation in `Engine::shape_expl`.
    shaped: BTreeMap<u32, BTreeSet<OrderKey>>,
    /// Pending workloads not yet tried since they (re)entered the queue.
    fresh: BTreeSet<OrderKey>,
    /// Quota may have been freed: retry every pending workload.
    woken: bool,
    /// Admitted and evicting workloads.
    admitted: BTreeSet<WlId>,
    evicting: usize,
    preempting: usize,
}

impl Cq {
    fn insert_pending(&mut self, key: OrderKey) {
        self.pending.insert(key.clone());
        self.loose.insert(key.clone());
        self.fresh.insert(key);
    }

    /// Out of the candidate lists (loose, shaped, fresh), still pending.
    fn take_off_lists(&mut self, key: &OrderKey, shape: u32) {
        self.loose.remove(key);
        self.fresh.remove(key);
        if let Some(set) = self.shaped.get_mut(&shape) {
            set.remove(key);
            if set.is_empty() {
                self.shaped.remove(&shape);
            }
        }
    }

    fn remove_pending(&mut self, key: &OrderKey, shape: u32) {
        self.pending.remove(key);
        self.take_off_lists(key, shape);
    }
}

struct Cohort {
    members: BTreeSet<CqId>,
    pools: Vec<Pool>,
    pool_of: FastMap<FrKey, usize>,
}

struct PodSet {
    name: Arc<str>,
    count: u32,
    /// Total (count × per pod) by resource, sorted, zero amounts dropped.
    total: Vec<(ResId, Amount)>,
    node_selector: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
}

/// Where a cycle's candidate list comes from.
enum Source {
    /// A queue's fresh workloads, taken out for this cycle.
    Owned(BTreeSet<OrderKey>),
    /// A woken queue's workloads with their own explanation.
    Loose,
    /// A woken queue's workloads parked under one shape.
    Shape(u32),
}

/// Quota a workload holds (admitted or evicting) or claims (preempting).
struct Holding {
    cq: CqId,
    usage: Vec<(FrKey, Amount)>,
    assignment: Arc<[PodSetAssignment]>,
    borrowing: bool,
    admitted_at: Millis,
    /// Victims still to go, by id and uid (ids are reused after removal).
    victims: Vec<(WlId, Arc<str>)>,
}

enum State {
    Pending,
    Backoff(Millis),
    Preempting(Box<Holding>),
    Admitted(Box<Holding>),
    Evicting(Box<Holding>),
    Finished,
}

impl State {
    fn name(&self) -> &'static str {
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

struct Wl {
    uid: Arc<str>,
    name: Arc<str>,
    lq: Arc<str>,
    priority: i32,
    ts: Millis,
    pod_sets: Vec<PodSet>,
    shape: u32,
    state: State,
    /// Resolved cluster queue while pending.
    cq: Option<CqId>,
    explanation: Option<Arc<Explanation>>,
    /// Parked by shape: the explanation is the queue's one for its shape.
    shaped: bool,
}

impl Wl {
    fn key(&self, id: WlId) -> OrderKey {
        OrderKey {
            prio: Reverse(self.priority),
            ts: self.ts,
            uid: self.uid.clone(),
            id,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    WakeCq(CqId),
    Backoff(WlId),
}

/// A flavor choice for every (pod set, resource group) a workload needs.
struct Attempt {
    /// Aggregated request per slot of the queue.
    usage: Vec<(usize, Amount)>,
    /// Per pod set: (group index, flavor).
    choice: Choice,
    borrowing: bool,
}

enum AssignError {
    NotCovered {
        pod_set: Arc<str>,
        resource: ResId,
    },
    /// Per (pod set, group): candidate flavors that could hold it with
    /// preemption; verdicts for the explanation; whether no flavor ever could.
    NoFit {
        options: Vec<(usize, usize, Vec<FlavorId>)>,
        verdicts: Vec<FlavorVerdict>,
        never: bool,
    },
}

/// What-if state for preemption: usage removed from slots, and the resulting
/// change of every touched cohort pool.
#[derive(Clone, Default)]
struct Overlay {
    slot: FastMap<(CqId, usize), Amount>,
    pool: FastMap<(CohortId, usize), Amount>,
}

struct Candidate<'a> {
    id: WlId,
    cq: CqId,
    priority: i32,
    admitted_at: Millis,
    uid: &'a str,
    in_borrowing_queue: bool,
    reclaim_ok: bool,
    borrow_ok: bool,
}

enum PreemptOutcome {
    Victims(Vec<(WlId, PreemptionReason)>, Attempt),
    WaitForEvictions,
    /// `protected` candidates were skipped for their minimum runtime; the
    /// first protection ends at `until`.
    Impossible {
        protected: usize,
        until: Option<Millis>,
    },
}

/// Result of a victim search for one flavor choice.
struct VictimSearch {
    victims: Option<Vec<(WlId, PreemptionReason)>>,
    protected: usize,
    until: Option<Millis>,
}

/// Usage of one (flavor, resource) in a ClusterQueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceUsage {
    pub flavor: String,
    pub resource: String,
    /// Held by admitted workloads (including ones being evicted).
    pub used: Amount,
    pub nominal: Amount,
    /// Part of `used` above nominal: borrowed from the cohort.
    pub borrowed: Amount,
    /// Reserved by preemptors waiting for their victims.
    pub reserved: Amount,
}

/// A ClusterQueue's counts and usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueUsage {
    pub name: String,
    pub cohort: Option<String>,
    pub pending: usize,
    pub admitted: usize,
    pub resources: Vec<ResourceUsage>,
}

/// A pending workload's place in line (0 is next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePosition {
    pub in_cluster_queue: usize,
    pub in_local_queue: usize,
}

/// A workload's lifecycle state, as seen from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadState {
    Pending,
    /// Waiting for its victims to release quota.
    Preempting,
    Admitted,
    Evicting,
    Finished,
}

/// The admission engine. See the crate documentation for the algorithm.
pub struct Engine {
    config: EngineConfig,
    resources: Interner,
    flavor_names: Interner,
    flavors: FastMap<FlavorId, FlavorSpec>,
    cqs: Vec<Cq>,
    cq_by_name: HashMap<Arc<str>, CqId>,
    cohorts: Vec<Cohort>,
    cohort_by_name: HashMap<String, CohortId>,
    lqs: HashMap<Arc<str>, LocalQueueSpec>,
    wls: Vec<Option<Wl>>,
    free_ids: Vec<WlId>,
    by_uid: HashMap<Arc<str>, WlId>,
    /// Pending workloads whose LocalQueue or ClusterQueue is missing.
    unresolved: BTreeSet<WlId>,
    /// Queues with fresh or woken workloads.
    dirty: BTreeSet<CqId>,
    timers: BTreeSet<(Millis, Timer)>,
    preempting: BTreeSet<OrderKey>,
    shapes: HashMap<ShapeKey, u32>,
    /// Decisions made outside a cycle (drains, explanations of unresolved
    /// workloads), reported by the next cycle.
    buffered_evictions: Vec<Eviction>,
    buffered_notes: BTreeSet<WlId>,
    /// Workloads admitted by the cycle in progress, with their index in its
    /// output, and the indices of admissions withdrawn in the same cycle.
    admitted_now: FastMap<WlId, usize>,
    withdrawn: Vec<usize>,
    /// LocalQueues with a stop policy (most clusters have none: fast path).
    stopped_local_queues: usize,
    /// Why parked workloads of a (queue, shape) wait.
    shape_expl: FastMap<(CqId, u32), Arc<Explanation>>,
    /// Admissions already built, per (queue, shape) and flavor choice:
    /// workloads of one shape admitted to the same flavors share one.
    /// Cleared whenever a queue or flavor changes.
    assignments: FastMap<(CqId, u32), Vec<(Choice, SharedAssignment)>>,
    /// Shared explanations for the common per-workload reasons, so that
    /// re-explaining is a pointer comparison.
    blocked_expl: Arc<Explanation>,
    held_expl: [Arc<Explanation>; 2],
}

/// Victim order key: not in a borrowing queue, priority, newest admission
/// first, UID, and the candidate's index.
type VictimKey<'a> = (bool, i32, Reverse<Millis>, &'a str, usize);

/// Per pod set: (resource group index, flavor).
type Choice = Vec<Vec<(usize, FlavorId)>>;
/// An admission's pod set assignments, shared rather than copied.
type SharedAssignment = Arc<[PodSetAssignment]>;

/// Per resource group a pod set needs: (group, [(position in group, amount)]).
type GroupNeeds = Vec<(usize, Vec<(usize, Amount)>)>;
/// Per (pod set, group): flavors that could hold it, in preference order.
type FlavorOptions = [(usize, usize, Vec<FlavorId>)];

/// What makes two workloads fail the same way, with the same explanation:
/// per pod set its name (explanations name pod sets), count, requests,
/// node selector and tolerations.
type ShapeKey = Vec<(
    Arc<str>,
    u32,
    Vec<(ResId, Amount)>,
    BTreeMap<String, String>,
    Vec<Toleration>,
)>;

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    pub fn new() -> Self {
        Self::with_config(EngineConfig::default())
    }

    pub fn with_config(config: EngineConfig) -> Self {
        Self {
            config,
            resources: Interner::default(),
            flavor_names: Interner::default(),
            flavors: FastMap::default(),
            cqs: Vec::new(),
            cq_by_name: HashMap::new(),
            cohorts: Vec::new(),
            cohort_by_name: HashMap::new(),
            lqs: HashMap::new(),
            wls: Vec::new(),
            free_ids: Vec::new(),
            by_uid: HashMap::new(),
            unresolved: BTreeSet::new(),
            dirty: BTreeSet::new(),
            timers: BTreeSet::new(),
            preempting: BTreeSet::new(),
            shapes: HashMap::new(),
            buffered_evictions: Vec::new(),
            buffered_notes: BTreeSet::new(),
            admitted_now: FastMap::default(),
            withdrawn: Vec::new(),
            stopped_local_queues: 0,
            shape_expl: FastMap::default(),
            assignments: FastMap::default(),
            blocked_expl: Arc::new(Explanation::new(PendingReason::BlockedByHead)),
            held_expl: [
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: false })),
                Arc::new(Explanation::new(PendingReason::Held { by_local_queue: true })),
            ],
        }
    }

    // ----- configuration objects -------------------------------------------------

    /// Creates or replaces a flavor. Every queue may now fit differently, so
    /// all are retried.
    pub fn upsert_flavor(&mut self, spec: FlavorSpec) {
        let id = self.flavor_names.intern(&spec.name);
        self.flavors.insert(id, spec);
        self.wake_all();
    }

    /// Removes a flavor: queues that name it can no longer admit into it.
    pub fn remove_flavor(&mut self, name: &str) {
        if let Some(id) = self.flavor_names.get(name) {
            self.flavors.remove(&id);
        }
    }

    /// Creates or replaces a ClusterQueue. Usage of admitted workloads is kept,
    /// also for flavors the new spec no longer lists.
    pub fn upsert_cluster_queue(&mut self, spec: ClusterQueueSpec) {
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let id = match self.cq_by_name.get(&name) {
            Some(&id) => {
                self.wake_domain(id);
                self.detach_from_cohort(id);
                id
            }
            None => {
                let id = self.cqs.len();
                self.cqs.push(Cq {
                    name: name.clone(),
                    spec: ClusterQueueSpec::default(),
                    deleted: false,
                    cohort: None,
                    groups: Vec::new(),
                    group_of: FastMap::default(),
                    slots: Vec::new(),
                    slot_of: FastMap::default(),
                    pending: BTreeSet::new(),
                    loose: BTreeSet::new(),
                    shaped: BTreeMap::new(),
                    fresh: BTreeSet::new(),
                    woken: false,
                    admitted: BTreeSet::new(),
                    evicting: 0,
                    preempting: 0,
                });
                self.cq_by_name.insert(name, id);
                id
            }
        };
        let old_stop = self.cqs[id].spec.stop_policy;
        self.rebuild_slots(id, &spec);
        let cohort = spec.cohort.as_ref().map(|c| self.cohort_id(c));
        let cq = &mut self.cqs[id];
        cq.spec = spec;
        cq.deleted = false;
        cq.cohort = cohort;
        self.attach_to_cohort(id);
        self.wake_domain(id);
        let stop = self.cqs[id].spec.stop_policy;
        if stop == StopPolicy::HoldAndDrain && old_stop != StopPolicy::HoldAndDrain {
            self.drain(id, None);
        }
        self.resolve_unresolved();
    }

    /// Deletes a ClusterQueue. Its pending workloads wait with reason
    /// `ClusterQueueMissing`; quota of its admitted workloads stays accounted
    /// until they finish or are evicted.
    pub fn remove_cluster_queue(&mut self, name: &str) {
        let Some(&id) = self.cq_by_name.get(name) else { return };
        if self.cqs[id].deleted {
            return;
        }
        self.wake_domain(id);
        self.cqs[id].deleted = true;
        let pending: Vec<OrderKey> = std::mem::take(&mut self.cqs[id].pending).into_iter().collect();
        self.cqs[id].fresh.clear();
        self.cqs[id].loose.clear();
        self.cqs[id].shaped.clear();
        for key in &pending {
            self.wl_mut(key.id).shaped = false;
        }
        for key in pending {
            self.wl_mut(key.id).cq = None;
            self.enqueue(key.id);
        }
        let preempting: Vec<OrderKey> = self
            .preempting
            .iter()
            .filter(|k| matches!(&self.wl(k.id).state, State::Preempting(h) if h.cq == id))
            .cloned()
            .collect();
        for key in preempting {
            self.drop_claim(key.id);
            self.wl_mut(key.id).cq = None;
            self.enqueue(key.id);
        }
        self.collect_deleted(id);
    }

    /// Creates or replaces a LocalQueue.
    pub fn upsert_local_queue(&mut self, spec: LocalQueueSpec) {
        let key: Arc<str> = Arc::from(spec.key.as_str());
        let old = self.lqs.insert(key.clone(), spec.clone());
        self.stopped_local_queues += (spec.stop_policy != StopPolicy::None) as usize;
        self.stopped_local_queues -= old.as_ref().is_some_and(|o| o.stop_policy != StopPolicy::None) as usize;
        let retarget = old.as_ref().is_some_and(|o| o.cluster_queue != spec.cluster_queue);
        if retarget {
            // Pending workloads follow the queue to its new ClusterQueue.
            self.requeue_local_queue(&key);
        }
        if let Some(&cq) = self.cq_by_name.get(spec.cluster_queue.as_str()) {
            self.wake_queue(cq);
            if spec.stop_policy == StopPolicy::HoldAndDrain
                && old.is_none_or(|o| o.stop_policy != StopPolicy::HoldAndDrain)
            {
                self.drain(cq, Some(key));
            }
        }
        self.resolve_unresolved();
    }

    /// Deletes a LocalQueue: its pending workloads wait with reason
    /// `LocalQueueMissing`; admitted ones keep running.
    pub fn remove_local_queue(&mut self, key: &str) {
        let Some(old) = self.lqs.remove(key) else { return };
        self.stopped_local_queues -= (old.stop_policy != StopPolicy::None) as usize;
        self.requeue_local_queue(key);
    }

    /// Takes every pending workload of a LocalQueue out of its ClusterQueue
    /// and queues it again where the LocalQueue now points (or parks it with
    /// the reason it cannot be queued).
    fn requeue_local_queue(&mut self, key: &str) {
        let moving: Vec<WlId> = self
            .cqs
            .iter()
            .flat_map(|cq| cq.pending.iter())
            .filter(|k| &*self.wl(k.id).lq == key)
            .map(|k| k.id)
            .collect();
        for id in moving {
            self.drop_claim(id);
            self.unqueue(id);
            self.enqueue(id);
        }
    }

    // ----- workload lifecycle -----------------------------------------------------

    /// Adds a pending workload.
    pub fn add_workload(&mut self, spec: WorkloadSpec) -> Result<(), EngineError> {
        let id = self.insert_workload(spec)?;
        self.enqueue(id);
        Ok(())
    }

    /// Adds a pending workload whose requeue backoff runs until `not_before`
    /// (a controller rebuilding its ledger after a restart finds it in the
    /// Workload's status): it joins its queue when the backoff ends, as if
    /// [`Engine::eviction_complete_with_backoff`] had put it there.
    pub fn add_workload_backing_off(&mut self, spec: WorkloadSpec, not_before: Millis) -> Result<(), EngineError> {
        let id = self.insert_workload(spec)?;
        let wl = self.wl_mut(id);
        wl.state = State::Backoff(not_before);
        wl.explanation = None;
        self.timers.insert((not_before, Timer::Backoff(id)));
        self.note(id, Explanation::new(PendingReason::Backoff { until: not_before }));
        Ok(())
    }

    /// Records a workload that is already admitted (a controller rebuilding its
    /// ledger after a restart). Its usage is accounted as it is, even above
    /// quota: reality wins, and nothing new is admitted until it fits again.
    pub fn restore_admitted(
        &mut self,
        spec: WorkloadSpec,
        cluster_queue: &str,
        pod_sets: &[PodSetAssignment],
        admitted_at: Millis,
    ) -> Result<(), EngineError> {
        let Some(&cq) = self.cq_by_name.get(cluster_queue) else {
            return Err(EngineError::UnknownClusterQueue(cluster_queue.to_string()));
        };
        let uid = spec.uid.clone();
        // Validate the assignment before touching any state.
        let mut usage: Vec<(FrKey, Amount)> = Vec::new();
        {
            let ps_specs = &spec.pod_sets;
            for a in pod_sets {
                let Some(ps) = ps_specs.iter().find(|p| p.name == a.name) else {
                    return Err(EngineError::UnknownPodSet {
                        uid,
                        pod_set: a.name.clone(),
                    });
                };
                for (res, per_pod) in &ps.requests {
                    if *per_pod == 0 {
                        continue;
                    }
                    let Some(flavor) = a.flavors.get(res) else {
                        return Err(EngineError::UnassignedResource {
                            uid,
                            pod_set: a.name.clone(),
                            resource: res.clone(),
                        });
                    };
                    let amount = a
                        .usage
                        .get(res)
                        .copied()
                        .unwrap_or(per_pod.saturating_mul(a.count as i64));
                    if amount <= 0 {
                        continue;
                    }
                    let fr = (self.flavor_names.intern(flavor), self.resources.intern(res));
                    match usage.iter_mut().find(|(k, _)| *k == fr) {
                        Some((_, v)) => *v += amount,
                        None => usage.push((fr, amount)),
                    }
                }
            }
        }
        let id = self.insert_workload(spec)?;
        for &(fr, amount) in &usage {
            let slot = self.slot_for(cq, fr);
            self.add_usage(cq, slot, amount, 0);
        }
        let borrowing = self.is_borrowing(cq, &usage);
        let holding = Holding {
            cq,
            usage,
            assignment: pod_sets.into(),
            borrowing,
            admitted_at,
            victims: Vec::new(),
        };
        self.cqs[cq].admitted.insert(id);
        self.wl_mut(id).state = State::Admitted(Box::new(holding));
        Ok(())
    }

    /// An admitted workload completed: its quota is released.
    pub fn finish(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        match self.wl(id).state {
            State::Admitted(_) | State::Evicting(_) => {
                self.release(id);
                self.wl_mut(id).state = State::Finished;
                Ok(())
            }
            ref s => Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: s.name(),
                expected: "admitted",
            }),
        }
    }

    /// The caller evicts an admitted workload (pods-ready timeout,
    /// deactivation). It keeps its quota until [`Engine::eviction_complete`].
    pub fn evict(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        self.start_eviction(id).map_err(|s| EngineError::WrongState {
            uid: uid.to_string(),
            state: s,
            expected: "admitted",
        })
    }

    /// A preempted or evicted workload's pods are gone: its quota is released
    /// and it waits in its queue again.
    pub fn eviction_complete(&mut self, uid: &str, now: Millis) -> Result<(), EngineError> {
        self.eviction_complete_with_backoff(uid, now, None)
    }

    /// Like [`Engine::eviction_complete`], but the workload is not considered
    /// before `not_before` (requeue backoff).
    pub fn eviction_complete_with_backoff(
        &mut self,
        uid: &str,
        now: Millis,
        not_before: Option<Millis>,
    ) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        if !matches!(self.wl(id).state, State::Evicting(_)) {
            return Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: self.wl(id).state.name(),
                expected: "being evicted",
            });
        }
        self.release(id);
        if self.config.requeue_order == RequeueOrder::EvictionTime {
            self.wl_mut(id).ts = now;
        }
        match not_before {
            Some(t) if t > now => {
                let wl = self.wl_mut(id);
                wl.state = State::Backoff(t);
                wl.explanation = None;
                self.timers.insert((t, Timer::Backoff(id)));
                self.note(id, Explanation::new(PendingReason::Backoff { until: t }));
            }
            _ => {
                self.wl_mut(id).state = State::Pending;
                self.enqueue(id);
            }
        }
        Ok(())
    }

    /// Forgets a workload (deleted). Quota it held or claimed is released.
    pub fn remove_workload(&mut self, uid: &str) -> Result<(), EngineError> {
        let id = self.id_of(uid)?;
        match self.wl(id).state {
            State::Admitted(_) | State::Evicting(_) => self.release(id),
            State::Preempting(_) => {
                self.drop_claim(id);
                self.unqueue(id);
            }
            State::Pending => self.unqueue(id),
            State::Backoff(t) => {
                self.timers.remove(&(t, Timer::Backoff(id)));
            }
            State::Finished => {}
        }
        self.unresolved.remove(&id);
        self.buffered_notes.remove(&id);
        let wl = self.wls[id].take().expect("live workload");
        self.by_uid.remove(&wl.uid);
        self.free_ids.push(id);
        Ok(())
    }

    // ----- queries -----------------------------------------------------------------

    pub fn workload_state(&self, uid: &str) -> Option<WorkloadState> {
        let id = *self.by_uid.get(uid)?;
        Some(match self.wl(id).state {
            State::Pending | State::Backoff(_) => WorkloadState::Pending,
            State::Preempting(_) => WorkloadState::Preempting,
            State::Admitted(_) => WorkloadState::Admitted,
            State::Evicting(_) => WorkloadState::Evicting,
            State::Finished => WorkloadState::Finished,
        })
    }

    /// The latest explanation of a pending workload, with current numbers.
    pub fn explanation(&self, uid: &str) -> Option<&Explanation> {
        let id = *self.by_uid.get(uid)?;
        self.current_explanation(id).map(|e| &**e)
    }

    /// Where a pending workload stands in its ClusterQueue and LocalQueue.
    /// Costs O(pending in its ClusterQueue); meant for views, not cycles.
    pub fn position(&self, uid: &str) -> Option<QueuePosition> {
        let id = *self.by_uid.get(uid)?;
        let wl = self.wl(id);
        let cq = &self.cqs[wl.cq?];
        let key = wl.key(id);
        if !cq.pending.contains(&key) {
            return None;
        }
        let mut pos = QueuePosition {
            in_cluster_queue: 0,
            in_local_queue: 0,
        };
        for k in cq.pending.range(..key) {
            pos.in_cluster_queue += 1;
            if self.wl(k.id).lq == wl.lq {
                pos.in_local_queue += 1;
            }
        }
        Some(pos)
    }

    /// UIDs of a ClusterQueue's pending workloads, in queue order.
    pub fn pending_in_order(&self, cluster_queue: &str) -> Vec<Arc<str>> {
        self.cq_by_name
            .get(cluster_queue)
            .map(|&id| self.cqs[id].pending.iter().map(|k| k.uid.clone()).collect())
            .unwrap_or_default()
    }

    /// Counts and per (flavor, resource) usage of a ClusterQueue.
    pub fn cluster_queue_usage(&self, name: &str) -> Option<QueueUsage> {
        let &id = self.cq_by_name.get(name)?;
        let cq = &self.cqs[id];
        let resources = cq
            .slots
            .iter()
            .map(|s| ResourceUsage {
                flavor: self.flavor_names.name(s.fr.0).to_string(),
                resource: self.resources.name(s.fr.1).to_string(),
                used: s.usage,
                nominal: s.nominal,
                borrowed: (s.usage - s.nominal).max(0),
                reserved: s.claimed,
            })
            .collect();
        Some(QueueUsage {
            name: name.to_string(),
            cohort: cq.spec.cohort.clone(),
            pending: cq.pending.len(),
            admitted: cq.admitted.len(),
            resources,
        })
    }

    /// Names of all ClusterQueues, sorted.
    pub fn cluster_queue_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<Arc<str>> = self.cqs.iter().filter(|c| !c.deleted).map(|c| c.name.clone()).collect();
        names.sort();
        names
    }

    /// The admission of an admitted (or evicting) workload.
    pub fn admission(&self, uid: &str) -> Option<Admission> {
        let id = *self.by_uid.get(uid)?;
        match &self.wl(id).state {
            State::Admitted(h) | State::Evicting(h) => Some(Admission {
                uid: self.wl(id).uid.clone(),
                cluster_queue: self.cqs[h.cq].name.clone(),
                pod_sets: h.assignment.clone(),
                borrowing: h.borrowing,
            }),
            _ => None,
        }
    }

    /// Number of workloads the engine tracks, in any state.
    pub fn workload_count(&self) -> usize {
        self.by_uid.len()
    }

    // ----- the cycle ------------------------------------------------------------------

    /// Runs one admission cycle at time `now`: admits as many workloads as fit,
    /// in order, chooses victims for those that need preemption, and explains
    /// why the rest wait. Only queues touched since the last cycle are visited.
    pub fn schedule(&mut self, now: Millis) -> Cycle {
        let mut out = Cycle::default();
        self.fire_timers(now);
        self.complete_claims(now, &mut out);
        let dirty: Vec<CqId> = std::mem::take(&mut self.dirty).into_iter().collect();
        let mut done: BTreeSet<CqId> = BTreeSet::new();
        for cq in dirty {
            if done.contains(&cq) {
                continue;
            }
            let members: Vec<CqId> = match self.cqs[cq].cohort {
                Some(c) => self.cohorts[c].members.iter().copied().collect(),
                None => vec![cq],
            };
            done.extend(members.iter().copied());
            self.schedule_domain(&members, now, &mut out);
        }
        // Evictions decided outside a cycle (drains), unless the workload
        // finished, was removed or completed its eviction meanwhile.
        for ev in std::mem::take(&mut self.buffered_evictions) {
            let still = self
                .by_uid
                .get(&ev.uid)
                .is_some_and(|&id| matches!(self.wl(id).state, State::Evicting(_)));
            if still {
                out.evicted.push(ev);
            }
        }
        for id in std::mem::take(&mut self.buffered_notes) {
            if let Some(Some(wl)) = self.wls.get(id)
                && let Some(e) = &wl.explanation
            {
                out.pending_changed.push((wl.uid.clone(), e.clone()));
            }
        }
        out.next_wakeup = if self.dirty.is_empty() {
            self.timers.first().map(|(t, _)| *t)
        } else {
            // Work arrived during the cycle (a withdrawn admission requeued,
            // a claim dropped): cycle again right away.
            Some(now)
        };
        self.admitted_now.clear();
        if !self.withdrawn.is_empty() {
            self.withdrawn.sort_unstable();
            let mut next = 0;
            let mut index = 0;
            out.admitted.retain(|_| {
                let keep = self.withdrawn.get(next) != Some(&index);
                if !keep {
                    next += 1;
                }
                index += 1;
                keep
            });
            self.withdrawn.clear();
        }
        out
    }

    fn fire_timers(&mut self, now: Millis) {
        while let Some(&(t, timer)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            match timer {
                Timer::WakeCq(cq) => self.wake_queue(cq),
                Timer::Backoff(id) => {
                    if matches!(self.wl(id).state, State::Backoff(_)) {
                        self.wl_mut(id).state = State::Pending;
                        self.enqueue(id);
                    }
                }
            }
        }
    }

    /// Admits preemptors whose victims are gone.
    fn complete_claims(&mut self, now: Millis, out: &mut Cycle) {
        let keys: Vec<OrderKey> = self.preempting.iter().cloned().collect();
        for key in keys {
            self.try_complete_claim(key, now, out);
        }
    }

    fn try_complete_claim(&mut self, key: OrderKey, now: Millis, out: &mut Cycle) {
        let id = key.id;
        let State::Preempting(h) = &self.wl(id).state else {
            return;
        };
        let waiting = h
            .victims
            .iter()
            .any(|(v, uid)| matches!(self.wls.get(*v), Some(Some(w)) if w.uid == *uid && matches!(w.state, State::Evicting(_))));
        if waiting {
            return;
        }
        let cq = h.cq;
        if let Some(held) = self.held(cq, id) {
            // Hold admits nothing new, preemptors included.
            self.drop_claim(id);
            self.explain(id, held, out);
            return;
        }
        let usage: Vec<(usize, Amount)> = h.usage.iter().map(|&(fr, a)| (self.cqs[cq].slot_of[&fr], a)).collect();
        // Check against what is really held now (evictions under way still
        // count), without the preemptor's own claim. Another preemptor's
        // claim may delay this one until its victims are gone too.
        let mut ov = Overlay::default();
        for &(slot, amount) in &usage {
            self.overlay_add(&mut ov, cq, slot, -amount);
        }
        if self.fits_overlay(&ov, cq, &usage, false) {
            let State::Preempting(h) = std::mem::replace(&mut self.wl_mut(id).state, State::Pending) else {
                unreachable!("checked above")
            };
            self.preempting.remove(&key);
            self.cqs[cq].preempting -= 1;
            for &(slot, amount) in &usage {
                self.add_usage(cq, slot, amount, -amount);
            }
            let shape = self.wl(id).shape;
            self.cqs[cq].remove_pending(&key, shape);
            self.admit_holding(id, *h, now, out);
            // StrictFIFO queues were blocked behind it.
            self.wake_queue(cq);
        } else {
            // Quota shrank meanwhile: try again from scratch.
            self.drop_claim(id);
            self.dirty.insert(cq);
        }
    }

    fn schedule_domain(&mut self, members: &[CqId], now: Millis, out: &mut Cycle) {
        // Candidate lists, each in queue order: for a woken queue, its loose
        // workloads and one list per parked shape; for the others, only the
        // fresh ones.
        // A woken queue's lists are read lazily from its live sets (a
        // skipped shape costs one look, not one per member); a non-woken
        // queue's fresh set is moved out, so workloads requeued during this
        // cycle stay fresh for the next.
        let mut lists: Vec<(CqId, Source)> = Vec::new();
        for &m in members {
            let cq = &mut self.cqs[m];
            if cq.woken {
                cq.fresh.clear();
                if !cq.loose.is_empty() {
                    lists.push((m, Source::Loose));
                }
                lists.extend(cq.shaped.keys().map(|&shape| (m, Source::Shape(shape))));
            } else if !cq.fresh.is_empty() {
                lists.push((m, Source::Owned(std::mem::take(&mut cq.fresh))));
            }
            cq.woken = false;
        }
        if lists.is_empty() {
            return;
        }
        // StrictFIFO queues whose head did not fit this cycle.
        let mut blocked: BTreeSet<CqId> = BTreeSet::new();
        // Per queue, shapes that failed this cycle: availability only shrinks
        // within a cycle, and later workloads of the same shape have no more
        // preemption candidates, so they fail the same way. The rest of a
        // failed shape's parked list is skipped without a look.
        let mut failed: BTreeSet<(CqId, u32)> = BTreeSet::new();
        // k-way merge of the lists into global order.
        let mut heap: BinaryHeap<Reverse<(OrderKey, usize)>> = BinaryHeap::with_capacity(lists.len());
        for (i, (cq, source)) in lists.iter().enumerate() {
            if let Some(first) = self.list_next(*cq, source, None) {
                heap.push(Reverse((first, i)));
            }
        }
        // Two passes, as in Kueue: workloads that fit within their queue's
        // nominal quota go first; one that could only be admitted by
        // borrowing waits for the second pass, and its queue with it (so a
        // queue's own order is never inverted). Borrowed quota is what a
        // peer may reclaim: handing it out before every peer had its
        // guaranteed share would be undone within the same cycle.
        let mut deferring = lists.iter().any(|(c, _)| *c != lists[0].0);
        let mut paused: Vec<CqId> = Vec::new();
        let mut deferred: Vec<Reverse<(OrderKey, usize)>> = Vec::new();
        loop {
            let Some(Reverse((key, i))) = heap.pop() else {
                if deferred.is_empty() {
                    break;
                }
                deferring = false;
                heap.extend(deferred.drain(..));
                continue;
            };
            let cq = lists[i].0;
            if deferring && paused.contains(&cq) {
                // The list resumes from here in the second pass.
                deferred.push(Reverse((key, i)));
                continue;
            }
            let list_shape = match lists[i].1 {
                Source::Shape(shape) => Some(shape),
                _ => None,
            };
            let id = key.id;
            let strict = self.cqs[cq].spec.strategy == QueueingStrategy::StrictFifo;
            if let Some(shape) = list_shape
                && failed.contains(&(cq, shape))
                && !blocked.contains(&cq)
            {
                // Parked under this shape, which failed again: nothing to do
                // for the rest of the list either.
                continue;
            }
            if let Some(next) = self.list_next(cq, &lists[i].1, Some(&key)) {
                heap.push(Reverse((next, i)));
            }
            // The workload may have left the queue during this cycle.
            if !matches!(self.wl(id).state, State::Pending) || self.wl(id).cq != Some(cq) {
                continue;
            }
            if blocked.contains(&cq) {
                let e = self.blocked_expl.clone();
                self.explain(id, e, out);
                continue;
            }
            if let Some(held) = self.held(cq, id) {
                self.explain(id, held, out);
                continue;
            }
            // A StrictFIFO queue waits behind a preemptor that is ahead in
            // order; a newcomer ahead of it (higher priority) is tried.
            if strict && self.cqs[cq].preempting > 0 && self.preemptor_ahead(cq, &key) {
                blocked.insert(cq);
                let e = self.blocked_expl.clone();
                self.explain(id, e, out);
                continue;
            }
            let shape = self.wl(id).shape;
            if failed.contains(&(cq, shape)) {
                self.park_shaped(cq, id, out);
                if strict {
                    blocked.insert(cq);
                }
                continue;
            }
            let e = match self.assign(cq, id) {
                Ok(attempt) if deferring && attempt.borrowing && self.peers_have_idle_quota(cq, &attempt) => {
                    paused.push(cq);
                    deferred.push(Reverse((key, i)));
                    continue;
                }
                Ok(attempt) => {
                    self.admit(cq, id, attempt, now, out);
                    continue;
                }
                Err(AssignError::NotCovered { pod_set, resource }) => {
                    Explanation::new(PendingReason::ResourceNotCovered {
                        pod_set: pod_set.to_string(),
                        resource: self.resources.name(resource).to_string(),
                    })
                }
                Err(AssignError::NoFit {
                    options,
                    mut verdicts,
                    never,
                }) => {
                    let mut reason = if never {
                        PendingReason::NeverFits
                    } else {
                        PendingReason::NoFit
                    };
                    if !never && self.cqs[cq].spec.preemption.can_preempt() {
                        match self.preempt(cq, id, &options, now) {
                            PreemptOutcome::Victims(victims, attempt) => {
                                self.start_claim(cq, id, victims, attempt, now, out);
                                if strict {
                                    blocked.insert(cq);
                                }
                                continue;
                            }
                            PreemptOutcome::WaitForEvictions => {
                                reason = PendingReason::WaitingForEvictions;
                            }
                            PreemptOutcome::Impossible { protected, until } => {
                                if let Some(t) = until {
                                    self.timers.insert((t, Timer::WakeCq(cq)));
                                }
                                verdicts.push(FlavorVerdict {
                                    pod_set: String::new(),
                                    flavor: "preemption".to_string(),
                                    verdict: Verdict::PreemptionNotPossible { protected },
                                });
                            }
                        }
                    } else if !never && self.evicting_in_domain(cq) {
                        // Evictions under way may free enough.
                        let ov = self.evictions_overlay(cq);
                        if let Some(usage) = self.first_option_usage(cq, id, &options)
                            && self.fits_overlay(&ov, cq, &usage, false)
                        {
                            reason = PendingReason::WaitingForEvictions;
                        }
                    }
                    Explanation {
                        reason,
                        flavors: verdicts,
                    }
                }
            };
            failed.insert((cq, shape));
            self.set_shape_explanation(cq, shape, Arc::new(e), out);
            self.park_shaped(cq, id, out);
            if strict {
                blocked.insert(cq);
            }
        }
    }

    /// Whether a preemptor of `cq` waiting for its victims is ahead of `key`.
    fn preemptor_ahead(&self, cq: CqId, key: &OrderKey) -> bool {
        self.preempting
            .range(..key)
            .any(|k| matches!(&self.wl(k.id).state, State::Preempting(h) if h.cq == cq))
    }

    /// Whether, on a resource this attempt borrows, another queue of the
    /// cohort has nominal quota it does not use: only then could deferring
    /// the borrower let someone admit within nominal quota.
    fn peers_have_idle_quota(&self, cq: CqId, attempt: &Attempt) -> bool {
        let q = &self.cqs[cq];
        let Some(c) = q.cohort else { return false };
        attempt.usage.iter().any(|&(slot, amount)| {
            let s = &q.slots[slot];
            s.effective() + amount > s.nominal
                && s.pool.is_some_and(|p| self.cohorts[c].pools[p].idle > ledger::idle(s))
        })
    }

    /// The next candidate of a list after `after` (the first if `None`).
    fn list_next(&self, cq: CqId, source: &Source, after: Option<&OrderKey>) -> Option<OrderKey> {
        let q = &self.cqs[cq];
        let set = match source {
            Source::Owned(set) => set,
            Source::Loose => &q.loose,
            Source::Shape(shape) => q.shaped.get(shape)?,
        };
        match after {
            None => set.first().cloned(),
            Some(k) => set.range((Bound::Excluded(k), Bound::Unbounded)).next().cloned(),
        }
    }

    fn held(&self, cq: CqId, id: WlId) -> Option<Arc<Explanation>> {
        if self.cqs[cq].spec.stop_policy != StopPolicy::None {
            return Some(self.held_expl[0].clone());
        }
        if self.stopped_local_queues == 0 {
            return None;
        }
        let lq = self.lqs.get(&self.wl(id).lq)?;
        (lq.stop_policy != StopPolicy::None).then(|| self.held_expl[1].clone())
    }

    // ----- flavor assignment -------------------------------------------------------------

    /// Chooses a flavor for every (pod set, resource group) of the workload:
    /// in the queue's flavor order, the first flavor that fits without
    /// borrowing, else the first that fits by borrowing.
    fn assign(&self, cq_id: CqId, id: WlId) -> Result<Attempt, AssignError> {
        // Most calls succeed: a quick pass builds no explanation, and only a
        // failure is worked out again with verdicts and preemption options.
        match self.assign_with(cq_id, id, false) {
            Err(AssignError::NoFit { .. }) => self.assign_with(cq_id, id, true),
            other => other,
        }
    }

    fn assign_with(&self, cq_id: CqId, id: WlId, explain: bool) -> Result<Attempt, AssignError> {
        let cq = &self.cqs[cq_id];
        let wl = self.wl(id);
        let pools = cq.cohort.map(|c| &self.cohorts[c].pools);
        let mut usage: Vec<(usize, Amount)> = Vec::new();
        let mut choice: Vec<Vec<(usize, FlavorId)>> = Vec::with_capacity(wl.pod_sets.len());
        let mut borrowing = false;
        let mut failure: Option<(Vec<FlavorVerdict>, bool)> = None;
        let mut options: Vec<(usize, usize, Vec<FlavorId>)> = Vec::new();
        for (pi, ps) in wl.pod_sets.iter().enumerate() {
            let needs = match self.group_needs(cq, ps) {
                Ok(n) => n,
                Err(resource) => {
                    return Err(AssignError::NotCovered {
                        pod_set: ps.name.clone(),
                        resource,
                    });
                }
            };
            let mut ps_choice = Vec::with_capacity(needs.len());
            for (g, reqs) in needs {
                let group = &cq.groups[g];
                let mut best: Option<(usize, bool)> = None;
                let mut verdicts = Vec::new();
                let mut possible = Vec::new();
                for (fi, gf) in group.flavors.iter().enumerate() {
                    if let Err(v) = self.flavor_compatible(gf.flavor, ps) {
                        if explain {
                            verdicts.push(self.verdict(ps, gf.flavor, v));
                        }
                        continue;
                    }
                    let mut kind = Fit::Fits;
                    for &(rpos, amount) in &reqs {
                        let slot = gf.slots[rpos];
                        let s = &cq.slots[slot];
                        let pool = s.pool.and_then(|p| pools.map(|ps| &ps[p]));
                        let extra = amount + pending_amount(&usage, slot);
                        match ledger::check(s, pool, 0, 0, extra) {
                            Fit::Fits => {}
                            Fit::Borrows => kind = Fit::Borrows,
                            Fit::NotNow { available } if !explain => {
                                kind = Fit::NotNow { available };
                                break;
                            }
                            Fit::Never { max } if !explain => {
                                kind = Fit::Never { max };
                                break;
                            }
                            Fit::NotNow { available } => {
                                let free_nominal = (s.nominal - s.effective()).clamp(0, available);
                                verdicts.push(self.verdict(
                                    ps,
                                    gf.flavor,
                                    Verdict::InsufficientQuota {
                                        resource: self.resources.name(s.fr.1).to_string(),
                                        needed: extra,
                                        free_nominal,
                                        nominal: s.nominal,
                                        borrowable: available - free_nominal,
                                    },
                                ));
                                kind = Fit::NotNow { available };
                                break;
                            }
                            Fit::Never { max } => {
                                verdicts.push(self.verdict(
                                    ps,
                                    gf.flavor,
                                    Verdict::ExceedsMaxQuota {
                                        resource: self.resources.name(s.fr.1).to_string(),
                                        needed: extra,
                                        max,
                                    },
                                ));
                                kind = Fit::Never { max };
                                break;
                            }
                        }
                    }
                    match kind {
                        Fit::Fits => {
                            best = Some((fi, false));
                            possible.push(gf.flavor);
                            break;
                        }
                        Fit::Borrows => {
                            if best.is_none() {
                                best = Some((fi, true));
                            }
                            possible.push(gf.flavor);
                        }
                        Fit::NotNow { .. } => possible.push(gf.flavor),
                        Fit::Never { .. } => {}
                    }
                }
                if best.is_none() && !explain {
                    // Not assignable: the caller asks again with explain.
                    return Err(AssignError::NoFit {
                        options: Vec::new(),
                        verdicts: Vec::new(),
                        never: false,
                    });
                }
                if explain {
                    options.push((pi, g, possible.clone()));
                }
                match best {
                    Some((fi, b)) if failure.is_none() => {
                        let gf = &group.flavors[fi];
                        for &(rpos, amount) in &reqs {
                            add_pending(&mut usage, gf.slots[rpos], amount);
                        }
                        borrowing |= b;
                        ps_choice.push((g, gf.flavor));
                    }
                    Some(_) => {}
                    None => {
                        let never = possible.is_empty();
                        match &mut failure {
                            None => failure = Some((verdicts, never)),
                            Some((v, n)) => {
                                v.extend(verdicts);
                                *n |= never;
                            }
                        }
                    }
                }
            }
            choice.push(ps_choice);
        }
        match failure {
            None => Ok(Attempt {
                usage,
                choice,
                borrowing,
            }),
            Some((verdicts, never)) => Err(AssignError::NoFit {
                options,
                verdicts,
                never,
            }),
        }
    }

    /// For each resource group the pod set needs, the requested amounts by
    /// position in the group. Errors with a resource no group covers.
    fn group_needs(&self, cq: &Cq, ps: &PodSet) -> Result<GroupNeeds, ResId> {
        let mut needs: GroupNeeds = Vec::new();
        for &(res, amount) in &ps.total {
            let Some(&g) = cq.group_of.get(&res) else {
                return Err(res);
            };
            let rpos = cq.groups[g]
                .resources
                .iter()
                .position(|&r| r == res)
                .expect("group covers resource");
            match needs.iter_mut().find(|(gg, _)| *gg == g) {
                Some((_, v)) => v.push((rpos, amount)),
                None => needs.push((g, vec![(rpos, amount)])),
            }
        }
        Ok(needs)
    }

    fn flavor_compatible(&self, flavor: FlavorId, ps: &PodSet) -> Result<(), Verdict> {
        let Some(spec) = self.flavors.get(&flavor) else {
            return Err(Verdict::FlavorNotFound);
        };
        for (key, wanted) in &ps.node_selector {
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
            let tolerated = ps
                .tolerations
                .iter()
                .chain(&spec.tolerations)
                .any(|t| t.tolerates(taint));
            if !tolerated {
                let value = taint.value.as_deref().map(|v| format!("={v}")).unwrap_or_default();
                return Err(Verdict::UntoleratedTaint {
                    taint: format!("{}{value}:{:?}", taint.key, taint.effect),
                });
            }
        }
        Ok(())
    }

    fn verdict(&self, ps: &PodSet, flavor: FlavorId, verdict: Verdict) -> FlavorVerdict {
        FlavorVerdict {
            pod_set: ps.name.to_string(),
            flavor: self.flavor_names.name(flavor).to_string(),
            verdict,
        }
    }

    /// The request per slot of one choice of flavors (option indices).
    fn option_usage(&self, cq: CqId, id: WlId, options: &FlavorOptions, pick: &[usize]) -> Vec<(usize, Amount)> {
        let cq_ref = &self.cqs[cq];
        let wl = self.wl(id);
        let mut usage = Vec::new();
        for ((pi, g, flavors), &k) in options.iter().zip(pick) {
            let flavor = flavors[k];
            let group = &cq_ref.groups[*g];
            let gf = group
                .flavors
                .iter()
                .find(|f| f.flavor == flavor)
                .expect("option flavor in group");
            for &(res, amount) in &wl.pod_sets[*pi].total {
                if let Some(rpos) = group.resources.iter().position(|&r| r == res) {
                    add_pending(&mut usage, gf.slots[rpos], amount);
                }
            }
        }
        usage
    }

    fn first_option_usage(&self, cq: CqId, id: WlId, options: &FlavorOptions) -> Option<Vec<(usize, Amount)>> {
        if options.iter().any(|(_, _, f)| f.is_empty()) {
            return None;
        }
        Some(self.option_usage(cq, id, options, &vec![0; options.len()]))
    }

    // ----- preemption ------------------------------------------------------------------

    /// Finds a minimal set of victims that lets the workload fit, trying the
    /// flavor combinations in preference order (at most 16).
    fn preempt(&self, cq: CqId, id: WlId, options: &FlavorOptions, now: Millis) -> PreemptOutcome {
        if options.iter().any(|(_, _, f)| f.is_empty()) {
            return PreemptOutcome::Impossible {
                protected: 0,
                until: None,
            };
        }
        let base = self.evictions_overlay(cq);
        let mut pick = vec![0usize; options.len()];
        let mut protected_total = 0;
        let mut until: Option<Millis> = None;
        for _ in 0..16 {
            let usage = self.option_usage(cq, id, options, &pick);
            if self.fits_overlay(&base, cq, &usage, false) {
                return PreemptOutcome::WaitForEvictions;
            }
            let search = self.find_victims(cq, id, &usage, &base, now);
            protected_total = protected_total.max(search.protected);
            until = match (until, search.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(victims) = search.victims {
                let choice = self.choice_from_pick(self.wl(id).pod_sets.len(), options, &pick);
                return PreemptOutcome::Victims(
                    victims,
                    Attempt {
                        usage,
                        choice,
                        borrowing: false,
                    },
                );
            }
            // Next combination, last option fastest.
            let mut k = options.len();
            loop {
                if k == 0 {
                    return PreemptOutcome::Impossible {
                        protected: protected_total,
                        until,
                    };
                }
                k -= 1;
                pick[k] += 1;
                if pick[k] < options[k].2.len() {
                    break;
                }
                pick[k] = 0;
            }
        }
        PreemptOutcome::Impossible {
            protected: protected_total,
            until,
        }
    }

    fn choice_from_pick(&self, pod_sets: usize, options: &FlavorOptions, pick: &[usize]) -> Choice {
        // One entry per pod set, also for pod sets that request nothing.
        let mut choice: Choice = vec![Vec::new(); pod_sets];
        for ((pi, g, flavors), &k) in options.iter().zip(pick) {
            choice[*pi].push((*g, flavors[k]));
        }
        choice
    }

    /// Adds the admitted workloads of queue `m` that the preemptor's policy
    /// allows as victims and that use any of `frs`. Those protected by their
    /// queue's minimum runtime are counted, with the first expiry.
    #[allow(clippy::too_many_arguments)]
    fn collect_candidates<'a>(
        &'a self,
        m: CqId,
        cq: CqId,
        me: &Wl,
        frs: &[FrKey],
        now: Millis,
        out: &mut Vec<Candidate<'a>>,
        protected: &mut usize,
        until: &mut Option<Millis>,
    ) {
        let policy = self.cqs[cq].spec.preemption;
        let same = m == cq;
        let queue_borrowing = self.queue_borrows_any(m, frs, None);
        let min_runtime = self.cqs[m].spec.min_runtime;
        for &v in &self.cqs[m].admitted {
            let w = self.wl(v);
            let State::Admitted(h) = &w.state else { continue };
            if !h.usage.iter().any(|(fr, _)| frs.contains(fr)) {
                continue;
            }
            let (reclaim_ok, borrow_ok, within_ok) = if same {
                let ok = match policy.within_cluster_queue {
                    WithinClusterQueue::Never => false,
                    WithinClusterQueue::LowerPriority => w.priority < me.priority,
                    WithinClusterQueue::LowerOrNewerEqualPriority => {
                        w.priority < me.priority || (w.priority == me.priority && w.ts > me.ts)
                    }
                };
                (false, false, ok)
            } else {
                let reclaim = match policy.reclaim_within_cohort {
                    ReclaimWithinCohort::Never => false,
                    ReclaimWithinCohort::LowerPriority => w.priority < me.priority,
                    ReclaimWithinCohort::Any => true,
                };
                let borrow = match policy.borrow_within_cohort {
                    BorrowWithinCohort::Never => false,
                    BorrowWithinCohort::LowerPriority { max_priority_threshold } => {
                        w.priority < me.priority && max_priority_threshold.is_none_or(|t| w.priority <= t)
                    }
                };
                (reclaim, borrow, false)
            };
            if !(within_ok || reclaim_ok || borrow_ok) {
                continue;
            }
            if min_runtime > 0 && h.admitted_at + min_runtime > now {
                *protected += 1;
                let t = h.admitted_at + min_runtime;
                *until = Some(until.map_or(t, |u| u.min(t)));
                continue;
            }
            out.push(Candidate {
                id: v,
                cq: m,
                priority: w.priority,
                admitted_at: h.admitted_at,
                uid: &w.uid,
                in_borrowing_queue: queue_borrowing,
                reclaim_ok,
                borrow_ok,
            });
        }
    }

    /// Returns victims (or none) and how many candidates were protected by
    /// their queue's minimum runtime.
    fn find_victims(&self, cq: CqId, id: WlId, usage: &[(usize, Amount)], base: &Overlay, now: Millis) -> VictimSearch {
        let me = self.wl(id);
        let policy = self.cqs[cq].spec.preemption;
        // Only the (flavor, resource) pairs that are short decide who can be
        // a victim and whose queue counts as borrowing (as in Kueue): a queue
        // borrowing cpu is no victim for a shortage of GPUs.
        let frs: Vec<FrKey> = usage
            .iter()
            .filter(|&&(s, amount)| !self.fits_overlay(base, cq, &[(s, amount)], false))
            .map(|&(s, _)| self.cqs[cq].slots[s].fr)
            .collect();
        let mut protected = 0;
        let mut until: Option<Millis> = None;
        let domain_admitted: usize = self.domain(cq).map(|m| self.cqs[m].admitted.len()).sum();
        let mut candidates: Vec<Candidate> = Vec::with_capacity(domain_admitted);
        // Own queue first: few workloads, and they decide whether looking
        // at the rest of the cohort can help at all.
        if policy.within_cluster_queue != WithinClusterQueue::Never {
            self.collect_candidates(cq, cq, me, &frs, now, &mut candidates, &mut protected, &mut until);
        }
        // Reclaiming needs the preemptor to end within its nominal quota
        // even after every own-queue candidate is gone; otherwise only
        // borrowWithinCohort can take from other queues.
        let q = &self.cqs[cq];
        let reclaim_feasible = policy.reclaim_within_cohort != ReclaimWithinCohort::Never
            && usage.iter().all(|&(s, amount)| {
                let slot = &q.slots[s];
                let removable: Amount = candidates
                    .iter()
                    .filter_map(|c| match &self.wl(c.id).state {
                        State::Admitted(h) => h.usage.iter().find(|(fr, _)| *fr == slot.fr).map(|(_, a)| *a),
                        _ => None,
                    })
                    .sum();
                let delta = base.slot.get(&(cq, s)).copied().unwrap_or(0);
                slot.effective() + delta - removable + amount <= slot.nominal
            });
        let borrow_possible = policy.borrow_within_cohort != BorrowWithinCohort::Never;
        if let Some(c) = q.cohort
            && (reclaim_feasible || borrow_possible)
        {
            for &m in &self.cohorts[c].members {
                // Only queues that borrow these resources give anything back.
                if m != cq && self.queue_borrows_any(m, &frs, Some(base)) {
                    self.collect_candidates(m, cq, me, &frs, now, &mut candidates, &mut protected, &mut until);
                }
            }
        }
        // First without borrowing (reclaiming what the cohort borrowed), then
        // borrowing (preempting lower-priority work elsewhere to borrow).
        // Reclaiming (ending within nominal) is tried first only when there is
        // someone to reclaim from; with own-queue candidates alone, requiring
        // the preemptor to end within nominal would evict more than needed.
        let within_nominal_possible = usage.iter().all(|&(s, a)| a <= self.cqs[cq].slots[s].nominal)
            && candidates.iter().any(|c| c.cq != cq && c.reclaim_ok);
        for within_nominal in [true, false] {
            if within_nominal && !within_nominal_possible {
                continue;
            }
            let allowed = |c: &Candidate| c.cq == cq || if within_nominal { c.reclaim_ok } else { c.borrow_ok };
            if let Some(victims) = self.greedy_victims(cq, usage, base, &candidates, &allowed, within_nominal) {
                let reasons = victims
                    .into_iter()
                    .map(|i| {
                        let c = &candidates[i];
                        let reason = if c.cq == cq {
                            PreemptionReason::InClusterQueue
                        } else if within_nominal {
                            PreemptionReason::InCohortReclamation
                        } else {
                            PreemptionReason::InCohortReclaimWhileBorrowing
                        };
                        (c.id, reason)
                    })
                    .collect();
                return VictimSearch {
                    victims: Some(reasons),
                    protected,
                    until,
                };
            }
        }
        VictimSearch {
            victims: None,
            protected,
            until,
        }
    }

    /// Removes candidates in order until the workload fits, then adds back
    /// (latest first) every one it does not need. Returns candidate indices.
    fn greedy_victims(
        &self,
        cq: CqId,
        usage: &[(usize, Amount)],
        base: &Overlay,
        candidates: &[Candidate<'_>],
        allowed: &dyn Fn(&Candidate<'_>) -> bool,
        within_nominal: bool,
    ) -> Option<Vec<usize>> {
        let frs: Vec<FrKey> = usage
            .iter()
            .filter(|&&(s, amount)| !self.fits_overlay(base, cq, &[(s, amount)], false))
            .map(|&(s, _)| self.cqs[cq].slots[s].fr)
            .collect();
        let mut ov = base.clone();
        let mut removed: Vec<usize> = Vec::new();
        let mut fits = false;
        // Victim order: borrowing queues first, then lower priority, then most
        // recently admitted, then UID. The pass usually stops after a few, so
        // the order comes lazily from a heap instead of a full sort.
        let mut keys: Vec<Reverse<VictimKey<'_>>> = Vec::with_capacity(candidates.len());
        keys.extend(
            candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| allowed(c))
                .map(|(i, c)| Reverse((!c.in_borrowing_queue, c.priority, Reverse(c.admitted_at), c.uid, i))),
        );
        let mut order = BinaryHeap::from(keys);
        while let Some(Reverse((.., i))) = order.pop() {
            let c = &candidates[i];
            // Take from another queue only while it still borrows.
            if c.cq != cq && !self.queue_borrows_any(c.cq, &frs, Some(&ov)) {
                continue;
            }
            self.overlay_holding(&mut ov, c.id, -1);
            removed.push(i);
            if self.fits_overlay(&ov, cq, usage, within_nominal) {
                fits = true;
                break;
            }
        }
        if !fits {
            return None;
        }
        let mut needed = removed.clone();
        for k in (0..removed.len().saturating_sub(1)).rev() {
            let c = &candidates[removed[k]];
            self.overlay_holding(&mut ov, c.id, 1);
            if self.fits_overlay(&ov, cq, usage, within_nominal) {
                needed.retain(|&x| x != removed[k]);
            } else {
                self.overlay_holding(&mut ov, c.id, -1);
            }
        }
        Some(needed)
    }

    fn queue_borrows_any(&self, cq: CqId, frs: &[FrKey], ov: Option<&Overlay>) -> bool {
        let q = &self.cqs[cq];
        frs.iter().any(|fr| {
            q.slot_of.get(fr).is_some_and(|&s| {
                let d = ov.and_then(|o| o.slot.get(&(cq, s)).copied()).unwrap_or(0);
                q.slots[s].effective() + d > q.slots[s].nominal
            })
        })
    }

    /// The state once every eviction under way in the domain has completed.
    fn evictions_overlay(&self, cq: CqId) -> Overlay {
        let mut ov = Overlay::default();
        if !self.evicting_in_domain(cq) {
            return ov;
        }
        for m in self.domain(cq) {
            if self.cqs[m].evicting == 0 {
                continue;
            }
            for &v in &self.cqs[m].admitted {
                if matches!(self.wl(v).state, State::Evicting(_)) {
                    self.overlay_holding(&mut ov, v, -1);
                }
            }
        }
        ov
    }

    fn evicting_in_domain(&self, cq: CqId) -> bool {
        self.domain(cq).any(|m| self.cqs[m].evicting > 0)
    }

    fn domain(&self, cq: CqId) -> impl Iterator<Item = CqId> + '_ {
        let members = self.cqs[cq].cohort.map(|c| &self.cohorts[c].members);
        let single = members.is_none().then_some(cq);
        members.into_iter().flat_map(|m| m.iter().copied()).chain(single)
    }

    fn overlay_holding(&self, ov: &mut Overlay, id: WlId, sign: Amount) {
        let (State::Admitted(h) | State::Evicting(h)) = &self.wl(id).state else {
            return;
        };
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.cqs[h.cq].slot_of.get(&fr) {
                self.overlay_add(ov, h.cq, slot, sign * amount);
            }
        }
    }

    fn overlay_add(&self, ov: &mut Overlay, cq: CqId, slot: usize, delta: Amount) {
        let s = &self.cqs[cq].slots[slot];
        let d0 = ov.slot.get(&(cq, slot)).copied().unwrap_or(0);
        let d1 = d0 + delta;
        if let (Some(p), Some(c)) = (s.pool, self.cqs[cq].cohort) {
            let g = s.guaranteed();
            let e = s.effective();
            *ov.pool.entry((c, p)).or_default() += ledger::draw(e + d1, g) - ledger::draw(e + d0, g);
        }
        ov.slot.insert((cq, slot), d1);
    }

    fn fits_overlay(&self, ov: &Overlay, cq: CqId, usage: &[(usize, Amount)], within_nominal: bool) -> bool {
        let q = &self.cqs[cq];
        usage.iter().all(|&(slot, amount)| {
            let s = &q.slots[slot];
            let sd = ov.slot.get(&(cq, slot)).copied().unwrap_or(0);
            if within_nominal && s.effective() + sd + amount > s.nominal {
                return false;
            }
            let (pool, pd) = match (s.pool, q.cohort) {
                (Some(p), Some(c)) => (
                    Some(&self.cohorts[c].pools[p]),
                    ov.pool.get(&(c, p)).copied().unwrap_or(0),
                ),
                _ => (None, 0),
            };
            matches!(ledger::check(s, pool, sd, pd, amount), Fit::Fits | Fit::Borrows)
        })
    }

    // ----- applying decisions ------------------------------------------------------------

    fn admit(&mut self, cq: CqId, id: WlId, attempt: Attempt, now: Millis, out: &mut Cycle) {
        for &(slot, amount) in &attempt.usage {
            self.add_usage(cq, slot, amount, 0);
        }
        let key = self.wl(id).key(id);
        let shape = self.wl(id).shape;
        self.cqs[cq].remove_pending(&key, shape);
        let holding = self.holding(cq, id, &attempt, now);
        self.admit_holding(id, holding, now, out);
    }

    fn holding(&mut self, cq: CqId, id: WlId, attempt: &Attempt, now: Millis) -> Holding {
        let q = &self.cqs[cq];
        let usage: Vec<(FrKey, Amount)> = attempt.usage.iter().map(|&(s, a)| (q.slots[s].fr, a)).collect();
        let shape = self.wl(id).shape;
        let cached = self
            .assignments
            .get(&(cq, shape))
            .and_then(|list| list.iter().find(|(c, _)| *c == attempt.choice))
            .map(|(_, a)| a.clone());
        let assignment = match cached {
            Some(a) => a,
            None => {
                let a = self.build_assignment(cq, id, &attempt.choice);
                self.assignments
                    .entry((cq, shape))
                    .or_default()
                    .push((attempt.choice.clone(), a.clone()));
                a
            }
        };
        Holding {
            cq,
            usage,
            assignment,
            borrowing: attempt.borrowing,
            admitted_at: now,
            victims: Vec::new(),
        }
    }

    /// The reported assignment of a flavor choice: per pod set, the flavor
    /// and total of every resource it requests. It depends only on the
    /// queue, the workload's shape and the choice.
    fn build_assignment(&self, cq: CqId, id: WlId, choice: &Choice) -> SharedAssignment {
        let q = &self.cqs[cq];
        self.wl(id)
            .pod_sets
            .iter()
            .zip(choice)
            .map(|(ps, choice)| {
                let mut flavors = BTreeMap::new();
                let mut ps_usage = BTreeMap::new();
                for &(res, amount) in &ps.total {
                    let g = q.group_of[&res];
                    let flavor = choice
                        .iter()
                        .find(|(gg, _)| *gg == g)
                        .map(|(_, f)| *f)
                        .expect("group chosen");
                    flavors.insert(
                        self.resources.name(res).to_string(),
                        self.flavor_names.name(flavor).to_string(),
                    );
                    ps_usage.insert(self.resources.name(res).to_string(), amount);
                }
                PodSetAssignment {
                    name: ps.name.to_string(),
                    count: ps.count,
                    flavors,
                    usage: ps_usage,
                }
            })
            .collect()
    }

    fn admit_holding(&mut self, id: WlId, mut holding: Holding, now: Millis, out: &mut Cycle) {
        let cq = holding.cq;
        holding.admitted_at = now;
        holding.victims.clear();
        holding.borrowing = self.is_borrowing(cq, &holding.usage);
        let wl = self.wls[id].as_mut().expect("live workload");
        wl.explanation = None;
        wl.shaped = false;
        self.admitted_now.insert(id, out.admitted.len());
        out.admitted.push(Admission {
            uid: wl.uid.clone(),
            cluster_queue: self.cqs[cq].name.clone(),
            pod_sets: holding.assignment.clone(),
            borrowing: holding.borrowing,
        });
        wl.state = State::Admitted(Box::new(holding));
        self.cqs[cq].admitted.insert(id);
    }

    fn is_borrowing(&self, cq: CqId, usage: &[(FrKey, Amount)]) -> bool {
        let q = &self.cqs[cq];
        usage.iter().any(|(fr, _)| {
            q.slot_of
                .get(fr)
                .is_some_and(|&s| q.slots[s].usage > q.slots[s].nominal)
        })
    }

    fn start_claim(
        &mut self,
        cq: CqId,
        id: WlId,
        victims: Vec<(WlId, PreemptionReason)>,
        attempt: Attempt,
        now: Millis,
        out: &mut Cycle,
    ) {
        // Admission time is set when the claim completes.
        let mut holding = self.holding(cq, id, &attempt, 0);
        holding.victims = victims.iter().map(|(v, _)| (*v, self.wl(*v).uid.clone())).collect();
        for &(slot, amount) in &attempt.usage {
            self.add_usage(cq, slot, 0, amount);
        }
        let (preemptor_uid, preemptor_name) = {
            let w = self.wl(id);
            (w.uid.clone(), w.name.clone())
        };
        let preemptor_cq = self.cqs[cq].name.clone();
        let mut retracted = Vec::new();
        for (v, reason) in &victims {
            if let Some(index) = self.admitted_now.remove(v) {
                self.withdrawn.push(index);
                // Admitted earlier in this same cycle: nothing was applied
                // yet, so the admission is withdrawn instead of evicted.
                retracted.push(*v);
                continue;
            }
            let _ = self.start_eviction(*v);
            let w = self.wl(*v);
            let message = match reason {
                PreemptionReason::InClusterQueue => {
                    format!(
                        "Preempted to accommodate {preemptor_name} (higher priority) in ClusterQueue {preemptor_cq}"
                    )
                }
                PreemptionReason::InCohortReclamation => format!(
                    "Preempted to accommodate {preemptor_name}: ClusterQueue {preemptor_cq} reclaims quota its cohort borrowed"
                ),
                PreemptionReason::InCohortReclaimWhileBorrowing => format!(
                    "Preempted to accommodate {preemptor_name}: ClusterQueue {preemptor_cq} borrows in the cohort at higher priority"
                ),
            };
            out.preempted.push(Preemption {
                victim: w.uid.clone(),
                preemptor: preemptor_uid.clone(),
                reason: *reason,
                message,
            });
        }
        for v in retracted {
            self.release(v);
            self.wl_mut(v).state = State::Pending;
            self.enqueue(v);
        }
        let key = self.wl(id).key(id);
        let shape = self.wl(id).shape;
        self.cqs[cq].take_off_lists(&key, shape);
        self.wl_mut(id).shaped = false;
        self.cqs[cq].preempting += 1;
        self.preempting.insert(key.clone());
        let n = out.preempted.iter().filter(|p| p.preemptor == preemptor_uid).count();
        self.wl_mut(id).state = State::Preempting(Box::new(holding));
        if n == 0 {
            self.try_complete_claim(key, now, out);
        } else {
            let e = Explanation::new(PendingReason::WaitingForPreemption { victims: n });
            self.explain(id, Arc::new(e), out);
        }
    }

    /// Releases a preemptor's claim; it goes back to plain pending.
    fn drop_claim(&mut self, id: WlId) {
        let State::Preempting(h) = std::mem::replace(&mut self.wl_mut(id).state, State::Pending) else {
            return;
        };
        let key = self.wl(id).key(id);
        self.preempting.remove(&key);
        self.cqs[h.cq].preempting -= 1;
        if self.cqs[h.cq].pending.contains(&key) {
            self.cqs[h.cq].loose.insert(key.clone());
            self.cqs[h.cq].fresh.insert(key.clone());
        }
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.cqs[h.cq].slot_of.get(&fr) {
                self.add_usage(h.cq, slot, 0, -amount);
            }
        }
        self.wake_domain(h.cq);
    }

    fn start_eviction(&mut self, id: WlId) -> Result<(), &'static str> {
        let wl = self.wl_mut(id);
        match std::mem::replace(&mut wl.state, State::Finished) {
            State::Admitted(h) => {
                let cq = h.cq;
                wl.state = State::Evicting(h);
                self.cqs[cq].evicting += 1;
                Ok(())
            }
            other => {
                let name = other.name();
                wl.state = other;
                Err(name)
            }
        }
    }

    /// Evicts every admitted workload of a queue (or of one of its local queues).
    fn drain(&mut self, cq: CqId, lq: Option<Arc<str>>) {
        let ids: Vec<WlId> = self.cqs[cq]
            .admitted
            .iter()
            .copied()
            .filter(|&v| lq.as_ref().is_none_or(|l| self.wl(v).lq == *l))
            .collect();
        let (reason, message) = match &lq {
            None => (
                EvictionReason::ClusterQueueStopped,
                format!("ClusterQueue {} is stopped (HoldAndDrain)", self.cqs[cq].name),
            ),
            Some(l) => (
                EvictionReason::LocalQueueStopped,
                format!("LocalQueue {l} is stopped (HoldAndDrain)"),
            ),
        };
        for v in ids {
            if self.start_eviction(v).is_ok() {
                self.buffered_evictions.push(Eviction {
                    uid: self.wl(v).uid.clone(),
                    reason,
                    message: message.clone(),
                });
            }
        }
        let claims: Vec<WlId> = self
            .preempting
            .iter()
            .map(|k| k.id)
            .filter(|&p| {
                matches!(&self.wl(p).state, State::Preempting(h) if h.cq == cq)
                    && lq.as_ref().is_none_or(|l| self.wl(p).lq == *l)
            })
            .collect();
        for p in claims {
            self.drop_claim(p);
        }
    }

    /// Releases what an admitted or evicting workload holds.
    fn release(&mut self, id: WlId) {
        let state = std::mem::replace(&mut self.wl_mut(id).state, State::Pending);
        let (State::Admitted(h) | State::Evicting(h)) = &state else {
            self.wl_mut(id).state = state;
            return;
        };
        let cq = h.cq;
        if matches!(state, State::Evicting(_)) {
            self.cqs[cq].evicting -= 1;
        }
        for &(fr, amount) in &h.usage {
            if let Some(&slot) = self.cqs[cq].slot_of.get(&fr) {
                self.add_usage(cq, slot, -amount, 0);
            }
        }
        self.cqs[cq].admitted.remove(&id);
        self.wake_domain(cq);
        self.collect_deleted(cq);
    }

    /// Adds to a slot's usage and claim, keeping its cohort pool in step.
    fn add_usage(&mut self, cq: CqId, slot: usize, usage: Amount, claimed: Amount) {
        let q = &mut self.cqs[cq];
        let s = &mut q.slots[slot];
        let g = s.guaranteed();
        let (before, idle_before) = (ledger::draw(s.effective(), g), ledger::idle(s));
        s.usage += usage;
        s.claimed += claimed;
        let (after, idle_after) = (ledger::draw(s.effective(), g), ledger::idle(s));
        if let (Some(p), Some(c)) = (s.pool, q.cohort) {
            let pool = &mut self.cohorts[c].pools[p];
            pool.usage += after - before;
            pool.idle += idle_after - idle_before;
        }
    }

    // ----- queues and waking ---------------------------------------------------------

    fn insert_workload(&mut self, spec: WorkloadSpec) -> Result<WlId, EngineError> {
        if self.by_uid.contains_key(spec.uid.as_str()) {
            return Err(EngineError::DuplicateWorkload(spec.uid));
        }
        let mut pod_sets = Vec::with_capacity(spec.pod_sets.len());
        for ps in &spec.pod_sets {
            if ps.count == 0 {
                return Err(EngineError::EmptyPodSet {
                    uid: spec.uid.clone(),
                    pod_set: ps.name.clone(),
                });
            }
            let mut total = Vec::with_capacity(ps.requests.len());
            for (res, &per_pod) in &ps.requests {
                if per_pod < 0 {
                    return Err(EngineError::NegativeRequest {
                        uid: spec.uid.clone(),
                        pod_set: ps.name.clone(),
                        resource: res.clone(),
                    });
                }
                if per_pod == 0 {
                    continue;
                }
                let Some(t) = per_pod.checked_mul(ps.count as i64) else {
                    return Err(EngineError::Overflow {
                        uid: spec.uid.clone(),
                        pod_set: ps.name.clone(),
                        resource: res.clone(),
                    });
                };
                total.push((self.resources.intern(res), t));
            }
            total.sort_unstable();
            let mut tolerations = ps.tolerations.clone();
            tolerations.sort();
            pod_sets.push(PodSet {
                name: Arc::from(ps.name.as_str()),
                count: ps.count,
                total,
                node_selector: ps.node_selector.clone(),
                tolerations,
            });
        }
        // Totals across pod sets must fit as well (they add up on a flavor).
        let mut sums: BTreeMap<ResId, Amount> = BTreeMap::new();
        for ps in &pod_sets {
            for &(res, amount) in &ps.total {
                let sum = sums.entry(res).or_default();
                *sum = sum.checked_add(amount).ok_or_else(|| EngineError::Overflow {
                    uid: spec.uid.clone(),
                    pod_set: ps.name.to_string(),
                    resource: self.resources.name(res).to_string(),
                })?;
            }
        }
        let shape_key: ShapeKey = pod_sets
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.count,
                    p.total.clone(),
                    p.node_selector.clone(),
                    p.tolerations.clone(),
                )
            })
            .collect();
        let next_shape = self.shapes.len() as u32;
        let shape = *self.shapes.entry(shape_key).or_insert(next_shape);
        let uid: Arc<str> = Arc::from(spec.uid.as_str());
        let wl = Wl {
            uid: uid.clone(),
            name: Arc::from(spec.name.as_str()),
            lq: Arc::from(spec.local_queue.as_str()),
            priority: spec.priority,
            ts: spec.queue_order_time,
            pod_sets,
            shape,
            state: State::Pending,
            cq: None,
            explanation: None,
            shaped: false,
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.wls[id] = Some(wl);
                id
            }
            None => {
                self.wls.push(Some(wl));
                self.wls.len() - 1
            }
        };
        self.by_uid.insert(uid, id);
        Ok(id)
    }

    /// Puts a pending workload into its ClusterQueue, or parks it as
    /// unresolved with the reason.
    fn enqueue(&mut self, id: WlId) {
        let lq_key = self.wl(id).lq.clone();
        let target = match self.lqs.get(&lq_key) {
            None => Err(PendingReason::LocalQueueMissing {
                local_queue: lq_key.to_string(),
            }),
            Some(lq) => match self.cq_by_name.get(lq.cluster_queue.as_str()) {
                Some(&cq) if !self.cqs[cq].deleted => Ok(cq),
                _ => Err(PendingReason::ClusterQueueMissing {
                    cluster_queue: lq.cluster_queue.clone(),
                }),
            },
        };
        match target {
            Ok(cq) => {
                self.unresolved.remove(&id);
                let key = self.wl(id).key(id);
                let wl = self.wl_mut(id);
                wl.cq = Some(cq);
                wl.shaped = false;
                self.cqs[cq].insert_pending(key);
                self.dirty.insert(cq);
                if self.cqs[cq].spec.strategy == QueueingStrategy::StrictFifo {
                    // The head may be parked: it must be looked at (and block)
                    // before a newcomer behind it.
                    self.cqs[cq].woken = true;
                }
            }
            Err(reason) => {
                self.unresolved.insert(id);
                self.note(id, Explanation::new(reason));
            }
        }
    }

    /// Takes a pending workload out of its queue.
    fn unqueue(&mut self, id: WlId) {
        let key = self.wl(id).key(id);
        if let Some(cq) = self.wl(id).cq {
            let shape = self.wl(id).shape;
            let q = &mut self.cqs[cq];
            q.remove_pending(&key, shape);
            if q.spec.strategy == QueueingStrategy::StrictFifo {
                self.wake_queue(cq);
            }
        }
        let wl = self.wl_mut(id);
        wl.cq = None;
        wl.shaped = false;
        self.unresolved.remove(&id);
    }

    fn resolve_unresolved(&mut self) {
        if self.unresolved.is_empty() {
            return;
        }
        let ids: Vec<WlId> = self.unresolved.iter().copied().collect();
        for id in ids {
            self.enqueue(id);
        }
    }

    fn note(&mut self, id: WlId, e: Explanation) {
        let wl = self.wl_mut(id);
        if wl.explanation.as_deref().is_none_or(|old| !old.same_reason(&e)) {
            self.buffered_notes.insert(id);
        }
        self.wl_mut(id).explanation = Some(Arc::new(e));
    }

    /// What a pending workload is told: its own explanation, or its
    /// queue's for its shape when parked by shape.
    fn current_explanation(&self, id: WlId) -> Option<&Arc<Explanation>> {
        let wl = self.wl(id);
        if wl.shaped {
            return self.shape_expl.get(&(wl.cq?, wl.shape));
        }
        wl.explanation.as_ref()
    }

    /// Records why a workload waits, and reports it when the reason changed.
    /// Explanations are shared: re-explaining the same one is a pointer
    /// comparison.
    fn explain(&mut self, id: WlId, e: Arc<Explanation>, out: &mut Cycle) {
        if let Some(old) = self.current_explanation(id) {
            if Arc::ptr_eq(old, &e) {
                return;
            }
            if old.same_reason(&e) {
                self.own_explanation(id, e);
                return;
            }
        }
        out.pending_changed.push((self.wl(id).uid.clone(), e.clone()));
        self.buffered_notes.remove(&id);
        self.own_explanation(id, e);
    }

    fn own_explanation(&mut self, id: WlId, e: Arc<Explanation>) {
        let wl = self.wls[id].as_mut().expect("live workload");
        wl.explanation = Some(e);
        if wl.shaped {
            wl.shaped = false;
            let (key, shape, cq) = (wl.key(id), wl.shape, wl.cq.expect("shaped workloads are queued"));
            let q = &mut self.cqs[cq];
            q.take_off_lists(&key, shape);
            q.loose.insert(key);
        }
    }

    /// Sets why workloads of a shape wait in a queue; when the reason
    /// changed, every workload parked under it is told.
    fn set_shape_explanation(&mut self, cq: CqId, shape: u32, e: Arc<Explanation>, out: &mut Cycle) {
        let old = self.shape_expl.insert((cq, shape), e.clone());
        if old.is_some_and(|o| !o.same_reason(&e))
            && let Some(members) = self.cqs[cq].shaped.get(&shape)
        {
            for key in members {
                out.pending_changed.push((key.uid.clone(), e.clone()));
            }
        }
    }

    /// Parks a workload under its queue's explanation for its shape.
    fn park_shaped(&mut self, cq: CqId, id: WlId, out: &mut Cycle) {
        let wl = self.wl(id);
        if wl.shaped {
            return;
        }
        let shape = wl.shape;
        let e = self.shape_expl[&(cq, shape)].clone();
        if wl.explanation.as_ref().is_none_or(|old| !old.same_reason(&e)) {
            out.pending_changed.push((wl.uid.clone(), e.clone()));
            self.buffered_notes.remove(&id);
        }
        let wl = self.wls[id].as_mut().expect("live workload");
        wl.explanation = None;
        wl.shaped = true;
        let key = wl.key(id);
        let q = &mut self.cqs[cq];
        q.loose.remove(&key);
        q.fresh.remove(&key);
        q.shaped.entry(shape).or_default().insert(key);
    }

    fn wake_queue(&mut self, cq: CqId) {
        self.cqs[cq].woken = true;
        self.dirty.insert(cq);
    }

    fn wake_domain(&mut self, cq: CqId) {
        match self.cqs[cq].cohort {
            Some(c) => {
                let members: Vec<CqId> = self.cohorts[c].members.iter().copied().collect();
                for m in members {
                    self.wake_queue(m);
                }
            }
            None => self.wake_queue(cq),
        }
    }

    fn wake_all(&mut self) {
        for cq in 0..self.cqs.len() {
            self.wake_queue(cq);
        }
    }

    fn cohort_id(&mut self, name: &str) -> CohortId {
        if let Some(&id) = self.cohort_by_name.get(name) {
            return id;
        }
        let id = self.cohorts.len();
        self.cohorts.push(Cohort {
            members: BTreeSet::new(),
            pools: Vec::new(),
            pool_of: FastMap::default(),
        });
        self.cohort_by_name.insert(name.to_string(), id);
        id
    }

    fn detach_from_cohort(&mut self, cq: CqId) {
        let Some(c) = self.cqs[cq].cohort else { return };
        let cohort = &mut self.cohorts[c];
        cohort.members.remove(&cq);
        for s in &mut self.cqs[cq].slots {
            if let Some(p) = s.pool.take() {
                let pool = &mut cohort.pools[p];
                pool.capacity -= s.lendable();
                pool.usage -= ledger::draw(s.effective(), s.guaranteed());
                pool.idle -= ledger::idle(s);
            }
        }
        self.cqs[cq].cohort = None;
    }

    fn attach_to_cohort(&mut self, cq: CqId) {
        let Some(c) = self.cqs[cq].cohort else { return };
        let cohort = &mut self.cohorts[c];
        cohort.members.insert(cq);
        for s in &mut self.cqs[cq].slots {
            let p = *cohort.pool_of.entry(s.fr).or_insert_with(|| {
                cohort.pools.push(Pool::default());
                cohort.pools.len() - 1
            });
            let pool = &mut cohort.pools[p];
            pool.capacity += s.lendable();
            pool.usage += ledger::draw(s.effective(), s.guaranteed());
            pool.idle += ledger::idle(s);
            s.pool = Some(p);
        }
    }

    /// Builds a queue's groups and slots from its spec, carrying over usage
    /// and claims by (flavor, resource). Must run while detached from its cohort.
    fn rebuild_slots(&mut self, cq: CqId, spec: &ClusterQueueSpec) {
        // Group indices change meaning: cached assignments are stale.
        self.assignments.retain(|&(c, _), _| c != cq);
        let old: Vec<Slot> = std::mem::take(&mut self.cqs[cq].slots);
        let mut slots: Vec<Slot> = Vec::new();
        let mut slot_of: FastMap<FrKey, usize> = FastMap::default();
        let mut groups = Vec::with_capacity(spec.resource_groups.len());
        let mut group_of = FastMap::default();
        for (gi, g) in spec.resource_groups.iter().enumerate() {
            let resources: Vec<ResId> = g.covered_resources.iter().map(|r| self.resources.intern(r)).collect();
            for &r in &resources {
                group_of.entry(r).or_insert(gi);
            }
            let mut flavors = Vec::with_capacity(g.flavors.len());
            for f in &g.flavors {
                let flavor = self.flavor_names.intern(&f.flavor);
                let mut fslots = Vec::with_capacity(resources.len());
                for &r in &resources {
                    let fr = (flavor, r);
                    let quota = f.resources.iter().find(|q| self.resources.get(&q.resource) == Some(r));
                    let slot = *slot_of.entry(fr).or_insert_with(|| {
                        let (nominal, b, l) = quota
                            .map(|q| (q.nominal, q.borrowing_limit, q.lending_limit))
                            .unwrap_or((0, None, None));
                        slots.push(Slot::new(
                            fr,
                            nominal.max(0),
                            b.map(|b| b.max(0)),
                            l.map(|l| l.clamp(0, nominal.max(0))),
                        ));
                        slots.len() - 1
                    });
                    fslots.push(slot);
                }
                flavors.push(GroupFlavor { flavor, slots: fslots });
            }
            groups.push(Group { resources, flavors });
        }
        for o in old {
            if o.usage == 0 && o.claimed == 0 {
                continue;
            }
            let slot = *slot_of.entry(o.fr).or_insert_with(|| {
                // No longer in the spec: keep accounting with no quota.
                slots.push(Slot::new(o.fr, 0, Some(0), None));
                slots.len() - 1
            });
            slots[slot].usage += o.usage;
            slots[slot].claimed += o.claimed;
        }
        let q = &mut self.cqs[cq];
        q.slots = slots;
        q.slot_of = slot_of;
        q.groups = groups;
        q.group_of = group_of;
    }

    /// The slot for (flavor, resource) in a queue, created with no quota when
    /// the spec does not list it (only for restored admissions).
    fn slot_for(&mut self, cq: CqId, fr: FrKey) -> usize {
        if let Some(&s) = self.cqs[cq].slot_of.get(&fr) {
            return s;
        }
        self.detach_from_cohort_keep(cq);
        let q = &mut self.cqs[cq];
        q.slots.push(Slot::new(fr, 0, Some(0), None));
        let s = q.slots.len() - 1;
        q.slot_of.insert(fr, s);
        self.attach_to_cohort(cq);
        s
    }

    fn detach_from_cohort_keep(&mut self, cq: CqId) {
        let cohort = self.cqs[cq].cohort;
        self.detach_from_cohort(cq);
        self.cqs[cq].cohort = cohort;
    }

    /// A deleted queue with nothing admitted is forgotten by its cohort.
    fn collect_deleted(&mut self, cq: CqId) {
        let q = &self.cqs[cq];
        if q.deleted && q.admitted.is_empty() && q.preempting == 0 {
            self.detach_from_cohort(cq);
            let q = &mut self.cqs[cq];
            q.slots.clear();
            q.slot_of.clear();
            q.groups.clear();
            q.group_of.clear();
        }
    }

    fn id_of(&self, uid: &str) -> Result<WlId, EngineError> {
        self.by_uid
            .get(uid)
            .copied()
            .ok_or_else(|| EngineError::UnknownWorkload(uid.to_string()))
    }

    fn wl(&self, id: WlId) -> &Wl {
        self.wls[id].as_ref().expect("live workload")
    }

    fn wl_mut(&mut self, id: WlId) -> &mut Wl {
        self.wls[id].as_mut().expect("live workload")
    }

    /// Checks the ledger against the workloads (for tests): every slot's usage
    /// and claim equals the sum over holders, every pool equals the sum of
    /// draws, and admitted usage respects quota where `strict`.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        let mut usage: HashMap<(CqId, FrKey), Amount> = HashMap::new();
        let mut claimed: HashMap<(CqId, FrKey), Amount> = HashMap::new();
        for wl in self.wls.iter().flatten() {
            match &wl.state {
                State::Admitted(h) | State::Evicting(h) => {
                    for &(fr, a) in &h.usage {
                        *usage.entry((h.cq, fr)).or_default() += a;
                    }
                }
                State::Preempting(h) => {
                    for &(fr, a) in &h.usage {
                        *claimed.entry((h.cq, fr)).or_default() += a;
                    }
                }
                _ => {}
            }
        }
        for (ci, q) in self.cqs.iter().enumerate() {
            for s in &q.slots {
                let u = usage.remove(&(ci, s.fr)).unwrap_or(0);
                let c = claimed.remove(&(ci, s.fr)).unwrap_or(0);
                if u != s.usage || c != s.claimed {
                    return Err(format!(
                        "queue {} slot {:?}: ledger usage {} claimed {}, workloads hold {} claim {}",
                        q.name, s.fr, s.usage, s.claimed, u, c
                    ));
                }
            }
        }
        if let Some(((cq, fr), a)) = usage.into_iter().chain(claimed).find(|(_, a)| *a != 0) {
            return Err(format!("queue {} holds {a} of {fr:?} with no slot", self.cqs[cq].name));
        }
        for (ci, q) in self.cqs.iter().enumerate() {
            let shaped: usize = q.shaped.values().map(|s| s.len()).sum();
            let preempting = q
                .pending
                .iter()
                .filter(|k| matches!(self.wl(k.id).state, State::Preempting(_)))
                .count();
            if q.pending.len() != q.loose.len() + shaped + preempting || preempting != q.preempting {
                return Err(format!(
                    "queue {}: {} pending but {} loose + {} shaped + {} preempting (counter {})",
                    q.name,
                    q.pending.len(),
                    q.loose.len(),
                    shaped,
                    preempting,
                    q.preempting
                ));
            }
            for k in &q.loose {
                let wl = self.wl(k.id);
                if wl.shaped || wl.cq != Some(ci) || !q.pending.contains(k) {
                    return Err(format!("queue {}: loose {} is shaped or elsewhere", q.name, k.uid));
                }
            }
            for (shape, set) in &q.shaped {
                for k in set {
                    let wl = self.wl(k.id);
                    if !wl.shaped || wl.shape != *shape || !q.pending.contains(k) {
                        return Err(format!("queue {}: shaped {} inconsistent", q.name, k.uid));
                    }
                    if !self.shape_expl.contains_key(&(ci, *shape)) {
                        return Err(format!(
                            "queue {}: shape {shape} has members but no explanation",
                            q.name
                        ));
                    }
                }
            }
        }
        for (c, cohort) in self.cohorts.iter().enumerate() {
            let mut sums = vec![(0, 0, 0); cohort.pools.len()];
            for &m in &cohort.members {
                for s in &self.cqs[m].slots {
                    let p = s
                        .pool
                        .ok_or_else(|| format!("queue {} in cohort {c} has a slot without pool", self.cqs[m].name))?;
                    sums[p].0 += s.lendable();
                    sums[p].1 += ledger::draw(s.effective(), s.guaranteed());
                    sums[p].2 += ledger::idle(s);
                }
            }
            for (p, pool) in cohort.pools.iter().enumerate() {
                if (pool.capacity, pool.usage, pool.idle) != sums[p] {
                    return Err(format!(
                        "cohort {c} pool {p}: capacity/usage/idle {}/{}/{} but members sum to {}/{}/{}",
                        pool.capacity, pool.usage, pool.idle, sums[p].0, sums[p].1, sums[p].2
                    ));
                }
            }
        }
        Ok(())
    }
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
