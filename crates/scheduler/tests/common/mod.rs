//! Builders for engine tests: small, fluent, and close to how an admin
//! would describe queues. Amounts are whole units unless a helper says
//! otherwise (`m(500)` is 500 milli-units).
#![allow(dead_code)]

use std::collections::BTreeMap;

use sluice_scheduler::*;

pub const GPU: &str = "nvidia.com/gpu";
pub const CPU: &str = "cpu";

/// Whole units to milli-units.
pub fn u(n: i64) -> Amount {
    n * 1000
}

/// An admission of pod set `main`: `pods` pods of `gpus` GPUs each on
/// a100 (as a controller restores it).
pub fn a100_assignment(pods: u32, gpus: i64) -> PodSetAssignment {
    PodSetAssignment {
        name: "main".into(),
        count: pods,
        flavors: [(GPU.to_string(), "a100".to_string())].into(),
        usage: [(GPU.to_string(), u(gpus) * pods as i64)].into(),
        topology: None,
    }
}

pub fn flavor(name: &str) -> FlavorSpec {
    FlavorSpec {
        name: name.to_string(),
        ..Default::default()
    }
}

pub fn tainted_flavor(name: &str, taint_key: &str) -> FlavorSpec {
    FlavorSpec {
        name: name.to_string(),
        taints: vec![Taint {
            key: taint_key.into(),
            value: Some("present".into()),
            effect: TaintEffect::NoSchedule,
        }],
        ..Default::default()
    }
}

pub fn labelled_flavor(name: &str, key: &str, value: &str) -> FlavorSpec {
    FlavorSpec {
        name: name.to_string(),
        node_labels: BTreeMap::from([(key.to_string(), value.to_string())]),
        ..Default::default()
    }
}

pub fn tolerate(key: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: TolerationOperator::Exists,
        value: None,
        effect: None,
    }
}

pub struct Quota {
    pub resource: &'static str,
    pub nominal: i64,
    pub borrowing: Option<i64>,
    pub lending: Option<i64>,
}

/// `q(GPU, 8)`: 8 nominal, no limits.
pub fn q(resource: &'static str, nominal: i64) -> Quota {
    Quota {
        resource,
        nominal,
        borrowing: None,
        lending: None,
    }
}

impl Quota {
    pub fn borrow(mut self, n: i64) -> Self {
        self.borrowing = Some(n);
        self
    }
    pub fn lend(mut self, n: i64) -> Self {
        self.lending = Some(n);
        self
    }
}

pub struct CqBuilder(ClusterQueueSpec);

pub fn cq(name: &str) -> CqBuilder {
    CqBuilder(ClusterQueueSpec {
        name: name.to_string(),
        ..Default::default()
    })
}

impl CqBuilder {
    pub fn cohort(mut self, c: &str) -> Self {
        self.0.cohort = Some(c.to_string());
        self
    }
    pub fn strict(mut self) -> Self {
        self.0.strategy = QueueingStrategy::StrictFifo;
        self
    }
    /// A resource group covering the quotas' resources with these flavors in order.
    pub fn group(mut self, flavors: Vec<(&str, Vec<Quota>)>) -> Self {
        let covered: Vec<String> = flavors[0].1.iter().map(|q| q.resource.to_string()).collect();
        self.0.resource_groups.push(ResourceGroupSpec {
            covered_resources: covered,
            flavors: flavors
                .into_iter()
                .map(|(f, quotas)| FlavorQuotaSpec {
                    flavor: f.to_string(),
                    resources: quotas
                        .into_iter()
                        .map(|q| ResourceQuotaSpec {
                            resource: q.resource.to_string(),
                            nominal: u(q.nominal),
                            borrowing_limit: q.borrowing.map(u),
                            lending_limit: q.lending.map(u),
                        })
                        .collect(),
                })
                .collect(),
        });
        self
    }
    /// One group, one flavor.
    pub fn quota(self, flavor: &str, quotas: Vec<Quota>) -> Self {
        self.group(vec![(flavor, quotas)])
    }
    pub fn within(mut self, p: WithinClusterQueue) -> Self {
        self.0.preemption.within_cluster_queue = p;
        self
    }
    pub fn reclaim(mut self, p: ReclaimWithinCohort) -> Self {
        self.0.preemption.reclaim_within_cohort = p;
        self
    }
    pub fn borrow_within(mut self, threshold: Option<i32>) -> Self {
        self.0.preemption.borrow_within_cohort = BorrowWithinCohort::LowerPriority {
            max_priority_threshold: threshold,
        };
        self
    }
    pub fn victim_order(mut self, order: VictimOrderPolicy) -> Self {
        self.0.preemption.victim_order = order;
        self
    }
    pub fn grace(mut self, ms: Millis) -> Self {
        self.0.preemption.recently_preempted_grace = Some(ms);
        self
    }
    pub fn min_runtime(mut self, ms: Millis) -> Self {
        self.0.min_runtime = ms;
        self
    }
    /// Its first workload that does not fit reserves quota (backfill).
    pub fn reserve(mut self) -> Self {
        self.0.backfill = Backfill::Reserve;
        self
    }
    /// How much later than first told a reservation may start.
    pub fn max_delay(mut self, ms: Millis) -> Self {
        self.0.backfill_max_delay = ms;
        self
    }
    /// How many of its first workloads that do not fit hold a reservation.
    pub fn depth(mut self, n: u32) -> Self {
        self.0.backfill_depth = n;
        self
    }
    pub fn stop(mut self, p: StopPolicy) -> Self {
        self.0.stop_policy = p;
        self
    }
    /// Fair-sharing weight in thousandths (1000 is weight 1).
    pub fn weight(mut self, milli: i64) -> Self {
        self.0.fair_weight = Weight(milli);
        self
    }
    pub fn build(self) -> ClusterQueueSpec {
        self.0
    }
}

/// A Cohort object: `cohort("org").parent("root").quota("a100", vec![q(GPU, 8)])`.
pub fn cohort(name: &str) -> CohortSpec {
    CohortSpec {
        name: name.to_string(),
        ..Default::default()
    }
}

/// Builder steps for [`CohortSpec`], reusing the queue builder's quota shape.
pub trait CohortBuild {
    fn parent(self, p: &str) -> Self;
    fn quota(self, flavor: &str, quotas: Vec<Quota>) -> Self;
    fn weight(self, milli: i64) -> Self;
}

impl CohortBuild for CohortSpec {
    fn parent(mut self, p: &str) -> Self {
        self.parent = Some(p.to_string());
        self
    }
    fn quota(mut self, flavor: &str, quotas: Vec<Quota>) -> Self {
        self.resource_groups
            .extend(cq("").quota(flavor, quotas).build().resource_groups);
        self
    }
    fn weight(mut self, milli: i64) -> Self {
        self.fair_weight = Weight(milli);
        self
    }
}

pub struct WlBuilder(WorkloadSpec);

/// A workload in local queue `ns/<uid's queue>` (set with `.queue`), one pod set.
pub fn wl(uid: &str) -> WlBuilder {
    WlBuilder(WorkloadSpec {
        uid: uid.to_string(),
        name: format!("ns/{uid}"),
        local_queue: "ns/lq".to_string(),
        ..Default::default()
    })
}

impl WlBuilder {
    pub fn queue(mut self, lq: &str) -> Self {
        self.0.local_queue = format!("ns/{lq}");
        self
    }
    pub fn prio(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    pub fn at(mut self, t: Millis) -> Self {
        self.0.queue_order_time = t;
        self
    }
    /// Its declared run time.
    pub fn runs(mut self, ms: Millis) -> Self {
        self.0.expected_runtime = Some(ms);
        self
    }
    /// A pod set `main` of `count` pods each requesting `reqs` (whole units).
    pub fn pods(self, count: u32, reqs: &[(&str, i64)]) -> Self {
        self.pod_set("main", count, reqs)
    }
    pub fn pod_set(mut self, name: &str, count: u32, reqs: &[(&str, i64)]) -> Self {
        self.0.pod_sets.push(PodSetSpec {
            name: name.to_string(),
            count,
            requests: reqs.iter().map(|(r, n)| (r.to_string(), u(*n))).collect(),
            ..Default::default()
        });
        self
    }
    /// Per-pod requests in milli-units.
    pub fn pods_milli(mut self, count: u32, reqs: &[(&str, i64)]) -> Self {
        self.0.pod_sets.push(PodSetSpec {
            name: "main".to_string(),
            count,
            requests: reqs.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
            ..Default::default()
        });
        self
    }
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        for ps in &mut self.0.pod_sets {
            ps.node_selector.insert(k.to_string(), v.to_string());
        }
        self
    }
    pub fn tolerating(mut self, key: &str) -> Self {
        for ps in &mut self.0.pod_sets {
            ps.tolerations.push(tolerate(key));
        }
        self
    }
    /// The last pod set may run with as few as `min` pods.
    pub fn min_count(mut self, min: u32) -> Self {
        if let Some(ps) = self.0.pod_sets.last_mut() {
            ps.min_count = Some(min);
        }
        self
    }
    /// Every pod set in one topology domain of its flavor.
    pub fn single_domain(mut self) -> Self {
        for ps in &mut self.0.pod_sets {
            ps.require_single_domain = true;
        }
        self
    }
    pub fn build(self) -> WorkloadSpec {
        self.0
    }
}

/// An engine plus shortcuts used by every test.
pub struct World {
    pub e: Engine,
}

/// Placement flavors: a100 and h100 nodes are told apart by the label
/// `gpu`; `racked` nodes (label `gpu: racked`) form topology domains by
/// their label `rack`.
pub const RACK: &str = "rack";

pub struct NodeBuilder(NodeSpec);

/// A schedulable node of flavor `flavor` (its label `gpu`) with `gpus`
/// GPUs, 64 CPUs and room for 110 pods.
pub fn node(name: &str, flavor: &str, gpus: i64) -> NodeBuilder {
    NodeBuilder(NodeSpec {
        name: name.to_string(),
        labels: BTreeMap::from([("gpu".to_string(), flavor.to_string())]),
        taints: Vec::new(),
        allocatable: BTreeMap::from([
            (GPU.to_string(), u(gpus)),
            (CPU.to_string(), u(64)),
            ("pods".to_string(), u(110)),
        ]),
        schedulable: true,
    })
}

impl NodeBuilder {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.to_string(), v.to_string());
        self
    }
    pub fn rack(self, r: &str) -> Self {
        self.label(RACK, r)
    }
    pub fn cpus(mut self, n: i64) -> Self {
        self.0.allocatable.insert(CPU.to_string(), u(n));
        self
    }
    pub fn taint(mut self, key: &str) -> Self {
        self.0.taints.push(Taint {
            key: key.to_string(),
            value: None,
            effect: TaintEffect::NoSchedule,
        });
        self
    }
    pub fn cordoned(mut self) -> Self {
        self.0.schedulable = false;
        self
    }
    pub fn build(self) -> NodeSpec {
        self.0
    }
}

/// `(resource, whole units)` pairs as a request map in milli-units.
pub fn reqs(r: &[(&str, i64)]) -> BTreeMap<String, Amount> {
    r.iter().map(|(k, n)| (k.to_string(), u(*n))).collect()
}

/// Pods bound to one node: (node, pods, per-pod requests in whole units).
pub type Bound<'a> = (&'a str, u32, &'a [(&'a str, i64)]);

impl World {
    /// Like [`World::new`] but with [`PlacementMode::Nodes`] and flavors
    /// whose nodes are told apart by labels (see [`RACK`]); no nodes yet.
    pub fn placement(queues: Vec<CqBuilder>) -> Self {
        Self::placement_with(FairSharing::default(), queues)
    }

    pub fn placement_with(fair_sharing: FairSharing, queues: Vec<CqBuilder>) -> Self {
        let mut e = Engine::with_config(EngineConfig {
            placement: PlacementMode::Nodes,
            fair_sharing,
            ..Default::default()
        });
        for f in ["a100", "h100"] {
            e.upsert_flavor(labelled_flavor(f, "gpu", f));
        }
        let mut racked = labelled_flavor("racked", "gpu", "racked");
        racked.topology_key = Some(RACK.to_string());
        e.upsert_flavor(racked);
        let mut w = Self { e };
        for q in queues {
            w.add_queue(q);
        }
        w
    }

    pub fn node(&mut self, n: NodeBuilder) {
        self.e.upsert_node(n.build());
    }

    /// What the pods bound to a node request (whole units), none terminating.
    pub fn usage(&mut self, node: &str, requested: &[(&str, i64)]) {
        self.usage_terminating(node, requested, &[]);
    }

    pub fn usage_terminating(&mut self, node: &str, requested: &[(&str, i64)], terminating: &[(&str, i64)]) {
        self.e.set_node_usage(
            node,
            &NodeUsage {
                requested: reqs(requested),
                terminating: reqs(terminating),
            },
        );
    }

    /// A workload's pods bound: (node, pods, per-pod requests in whole units).
    pub fn bind(&mut self, uid: &str, bound: &[Bound<'_>]) {
        let list: Vec<BoundPods> = bound
            .iter()
            .map(|(node, pods, per_pod)| BoundPods {
                node: node.to_string(),
                pods: *pods,
                requested: per_pod
                    .iter()
                    .map(|(r, n)| (r.to_string(), u(*n) * *pods as i64))
                    .collect(),
            })
            .collect();
        self.e.set_workload_pods(uid, &list).expect("known workload");
    }

    /// Flavors `default`, `a100`, `h100`; local queue `ns/<q>` for each queue `q`.
    pub fn new(queues: Vec<CqBuilder>) -> Self {
        Self::with_config(EngineConfig::default(), queues)
    }

    /// Like [`World::new`] with fair sharing off: Kueue's classic cohort
    /// preemption (`reclaimWithinCohort`/`borrowWithinCohort` alone).
    pub fn classic(queues: Vec<CqBuilder>) -> Self {
        Self::with_config(
            EngineConfig {
                fair_sharing: FairSharing::Off,
                ..Default::default()
            },
            queues,
        )
    }

    pub fn with_config(config: EngineConfig, queues: Vec<CqBuilder>) -> Self {
        let mut e = Engine::with_config(config);
        for f in ["default", "a100", "h100", "l4"] {
            e.upsert_flavor(flavor(f));
        }
        let mut w = Self { e };
        for q in queues {
            w.add_queue(q);
        }
        w
    }

    pub fn add_queue(&mut self, q: CqBuilder) {
        let spec = q.build();
        let name = spec.name.clone();
        self.e.upsert_cluster_queue(spec);
        self.e.upsert_local_queue(LocalQueueSpec {
            key: format!("ns/{name}"),
            cluster_queue: name,
            stop_policy: StopPolicy::None,
        });
    }

    pub fn cohort(&mut self, c: CohortSpec) {
        self.e.upsert_cohort(c).expect("no cycle");
    }

    /// A queue's weighted share now.
    pub fn share(&self, queue: &str) -> i64 {
        self.e.cluster_queue_share(queue).expect("queue exists").weighted_share
    }

    pub fn add(&mut self, w: WlBuilder) {
        self.e.add_workload(w.build()).expect("add workload");
    }

    pub fn cycle(&mut self, now: Millis) -> Cycle {
        let c = self.e.schedule(now);
        self.e.check_consistency().expect("ledger consistent");
        c
    }

    pub fn used(&self, queue: &str, flavor: &str, resource: &str) -> i64 {
        let usage = self.e.cluster_queue_usage(queue).expect("queue exists");
        usage
            .resources
            .iter()
            .find(|r| r.flavor == flavor && r.resource == resource)
            .map(|r| r.used / 1000)
            .unwrap_or(0)
    }

    pub fn state(&self, uid: &str) -> WorkloadState {
        self.e.workload_state(uid).expect("known workload")
    }

    pub fn why(&self, uid: &str) -> String {
        self.e
            .explanation(uid)
            .map(sluice_convert::text::explanation)
            .unwrap_or_default()
    }
}

pub fn admitted(c: &Cycle) -> Vec<&str> {
    c.admitted.iter().map(|a| &*a.uid).collect()
}

pub fn victims(c: &Cycle) -> Vec<&str> {
    let mut v: Vec<&str> = c.preempted.iter().map(|p| &*p.victim).collect();
    v.sort();
    v
}

/// The topology domain value of an admission's first pod set.
pub fn domain_of(c: &Cycle, uid: &str) -> Option<String> {
    c.admitted
        .iter()
        .find(|a| &*a.uid == uid)
        .and_then(|a| a.pod_sets[0].topology.as_ref().map(|t| t.value.clone()))
}

pub fn flavor_of(c: &Cycle, uid: &str, resource: &str) -> String {
    c.admitted
        .iter()
        .find(|a| &*a.uid == uid)
        .and_then(|a| a.pod_sets[0].flavors.get(resource).cloned())
        .unwrap_or_default()
}

/// One ClusterQueue `a` with 8 GPUs of a100 and the given in-queue policy.
pub fn single_queue(within: WithinClusterQueue) -> World {
    World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)]).within(within)])
}

/// Reporting is complete: every pending workload's explanation now has the
/// reason last reported for it in a cycle's `pending_changed` (`told`).
/// The first one that does not, in words.
pub fn unreported(
    e: &Engine,
    uids: &[String],
    told: &std::collections::HashMap<String, Explanation>,
) -> Option<String> {
    uids.iter()
        .filter(|uid| e.workload_state(uid) == Some(WorkloadState::Pending))
        .find_map(|uid| {
            let now = e.explanation(uid)?;
            let last = told.get(uid);
            (!last.is_some_and(|l| l.same_reason(now))).then(|| {
                format!(
                    "{uid} is told '{}' but was last reported '{}'",
                    sluice_convert::text::explanation(now),
                    last.map(sluice_convert::text::explanation).unwrap_or_default()
                )
            })
        })
}
