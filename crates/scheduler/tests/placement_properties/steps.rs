//! The model's steps: what each event does to the engine and to what the
//! test knows, and the check after every step.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use sluice_scheduler::*;

use super::world::*;

impl Model {
    pub fn new(gens: &[NodeGen], queues: &[QueueGen], strict: bool) -> Self {
        let mut e = Engine::with_config(EngineConfig {
            placement: PlacementMode::Nodes,
            ..Default::default()
        });
        for (i, f) in FLAVORS.iter().enumerate() {
            e.upsert_flavor(FlavorSpec {
                name: f.to_string(),
                node_labels: BTreeMap::from([("pool".to_string(), f.to_string())]),
                topology_key: (i == 1).then(|| "rack".to_string()),
                ..Default::default()
            });
        }
        for (i, g) in queues.iter().enumerate() {
            e.upsert_cluster_queue(cq_spec(i, g));
            e.upsert_local_queue(LocalQueueSpec {
                key: format!("ns/q{i}"),
                cluster_queue: format!("q{i}"),
                ..Default::default()
            });
        }
        let nodes: Vec<NodeSpec> = gens.iter().enumerate().map(|(i, g)| node_spec(i, g)).collect();
        for n in &nodes {
            e.upsert_node(n.clone());
        }
        Self {
            e,
            strict,
            reported: vec![NodeUsage::default(); nodes.len()],
            foreign: vec![([0; 3], [0; 3]); nodes.len()],
            excess: vec![[(0, 0); 3]; nodes.len()],
            nodes,
            gens: gens.to_vec(),
            queues: queues.to_vec(),
            wls: BTreeMap::new(),
            uids: Vec::new(),
            told: HashMap::new(),
            now: 0,
        }
    }

    pub fn pick(&self, i: u16) -> Option<String> {
        (!self.uids.is_empty()).then(|| self.uids[i as usize % self.uids.len()].clone())
    }

    pub fn node_index(&self, name: &str) -> usize {
        self.nodes.iter().position(|n| n.name == name).expect("known node")
    }

    pub fn alloc(&self, n: usize) -> Res {
        let g = &self.gens[n];
        [g.gpus * 1000, g.cpus * 1000, g.pods * 1000]
    }

    /// The planned pods of a workload as (node, requests with pods).
    pub fn plan(&self, uid: &str) -> Vec<(usize, Res)> {
        self.e
            .workload_placement(uid)
            .iter()
            .map(|b| (self.node_index(&b.node), res_of(&b.requested, b.pods)))
            .collect()
    }

    pub fn fail(&self, what: String) -> TestCaseError {
        TestCaseError::fail(what)
    }

    pub fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Add(g) => {
                let uid = format!("w{:03}", self.uids.len());
                let pod_sets = g
                    .pod_sets
                    .iter()
                    .enumerate()
                    .map(|(i, &(count, gpu, cpu))| PodSetSpec {
                        name: format!("ps{i}"),
                        count,
                        requests: res_map(&[gpu * 1000, cpu * 500, 0]),
                        tolerations: if g.tolerates {
                            vec![Toleration {
                                key: Some("special".into()),
                                operator: TolerationOperator::Exists,
                                value: None,
                                effect: None,
                            }]
                        } else {
                            Vec::new()
                        },
                        require_single_domain: g.single_domain,
                        ..Default::default()
                    })
                    .collect();
                let spec = WorkloadSpec {
                    uid: uid.clone(),
                    name: format!("ns/{uid}"),
                    local_queue: format!("ns/q{}", g.queue),
                    priority: g.priority,
                    queue_order_time: self.now,
                    pod_sets,
                    expected_runtime: None,
                };
                self.e.add_workload(spec).map_err(|e| self.fail(e.to_string()))?;
                self.wls.insert(
                    uid.clone(),
                    Wm {
                        spec: g.clone(),
                        ts: self.now,
                        phase: Phase::Pending,
                        admission: None,
                        bound: Vec::new(),
                    },
                );
                self.uids.push(uid);
            }
            Op::Cycle => self.cycle()?,
            Op::Finish(i) => {
                if let Some(uid) = self.pick(*i) {
                    let w = &self.wls[&uid];
                    let ok = self.e.finish(&uid).is_ok();
                    prop_assert_eq!(
                        ok,
                        matches!(w.phase, Phase::Admitted | Phase::Evicting),
                        "finish {}",
                        uid
                    );
                    if ok {
                        let w = self.wls.get_mut(&uid).unwrap();
                        w.phase = Phase::Finished;
                        w.bound.clear();
                    }
                }
            }
            Op::Evict(i) => {
                if let Some(uid) = self.pick(*i) {
                    let ok = self.e.evict(&uid).is_ok();
                    prop_assert_eq!(ok, self.wls[&uid].phase == Phase::Admitted, "evict {}", uid);
                    if ok {
                        self.wls.get_mut(&uid).unwrap().phase = Phase::Evicting;
                    }
                }
            }
            Op::Complete(i) => {
                if let Some(uid) = self.pick(*i) {
                    let ok = self.e.eviction_complete(&uid, self.now).is_ok();
                    prop_assert_eq!(ok, self.wls[&uid].phase == Phase::Evicting, "complete {}", uid);
                    if ok {
                        let w = self.wls.get_mut(&uid).unwrap();
                        w.phase = Phase::Pending;
                        w.ts = self.now;
                        w.admission = None;
                        w.bound.clear();
                    }
                }
            }
            &Op::Foreign(n, gpu, cpu, pods, term) => {
                let n = n as usize;
                let mut want = [gpu * 1000, cpu * 1000, pods * 1000];
                if self.strict {
                    // Foreign pods never over-commit: at most what is left.
                    let (now, later) = self.committed(n, true);
                    let alloc = self.alloc(n);
                    for r in 0..3 {
                        want[r] = want[r]
                            .min((alloc[r] - now[r]).max(0))
                            .min((alloc[r] - later[r]).max(0));
                    }
                }
                let terminating = want.map(|a| a * term as i64 / 2);
                self.foreign[n] = (want, terminating);
            }
            Op::Bind(i) => {
                if let Some(uid) = self.pick(*i)
                    && self.wls[&uid].phase == Phase::Admitted
                    && self.wls[&uid].bound.is_empty()
                {
                    let plan = self.e.workload_placement(&uid);
                    let mut bound = plan.clone();
                    for b in &mut bound {
                        b.requested.insert(PODS.into(), b.pods as i64 * 1000);
                    }
                    self.e
                        .set_workload_pods(&uid, &bound)
                        .map_err(|e| self.fail(e.to_string()))?;
                    let list = self.plan(&uid);
                    self.wls.get_mut(&uid).unwrap().bound = list;
                }
            }
            &Op::Cordon(n, cordoned) => {
                let n = n as usize;
                self.nodes[n].schedulable = !cordoned;
                self.e.upsert_node(self.nodes[n].clone());
            }
            Op::Tick => self.now += 1,
        }
        self.sync_usage();
        let foreign_changed = matches!(op, Op::Foreign(..));
        self.check(!foreign_changed)
    }

    /// Tells the engine what the nodes' pods request where it changed.
    pub fn sync_usage(&mut self) {
        for n in 0..self.nodes.len() {
            let (mut used, mut terminating) = self.foreign[n];
            for w in self.wls.values() {
                for (m, r) in &w.bound {
                    if *m == n {
                        (0..3).for_each(|i| used[i] += r[i]);
                        if w.phase == Phase::Evicting {
                            (0..3).for_each(|i| terminating[i] += r[i]);
                        }
                    }
                }
            }
            let usage = NodeUsage {
                requested: res_map(&used),
                terminating: res_map(&terminating),
            };
            if usage != self.reported[n] {
                self.e.set_node_usage(&self.nodes[n].name, &usage);
                self.reported[n] = usage;
            }
        }
    }

    pub fn cycle(&mut self) -> Result<(), TestCaseError> {
        let c = self.e.schedule(self.now);
        for a in &c.admitted {
            let uid = a.uid.to_string();
            let w = &self.wls[&uid];
            prop_assert!(
                matches!(w.phase, Phase::Pending),
                "{} admitted twice ({:?})",
                uid,
                w.phase
            );
            for (n, _) in self.plan(&uid) {
                prop_assert!(self.nodes[n].schedulable, "{} placed on cordoned n{}", uid, n);
            }
            let w = self.wls.get_mut(&uid).unwrap();
            w.phase = Phase::Admitted;
            w.admission = Some(a.clone());
        }
        for p in &c.preempted {
            self.check_preemption(p)?;
            let w = self.wls.get_mut(&*p.victim).unwrap();
            prop_assert_eq!(w.phase, Phase::Admitted, "victim {} is admitted", p.victim);
            w.phase = Phase::Evicting;
        }
        prop_assert!(c.evicted.is_empty(), "no stop policy evicts");
        for (uid, e) in &c.pending_changed {
            self.told.insert(uid.to_string(), Explanation::clone(e));
        }
        // Reporting is complete: a pending workload is told what was last
        // reported for it (placement reasons included).
        if let Some(msg) = crate::common::unreported(&self.e, &self.uids, &self.told) {
            prop_assert!(false, "{}", msg);
        }
        Ok(())
    }

    /// A victim is allowed by the preemptor's queue's policy for its reason.
    pub fn check_preemption(&self, p: &Preemption) -> Result<(), TestCaseError> {
        let (v, by) = (&self.wls[&*p.victim], &self.wls[&*p.preemptor]);
        let policy = &self.queues[by.spec.queue];
        let (vp, pp) = (v.spec.priority, by.spec.priority);
        prop_assert_eq!((p.victim_priority, p.preemptor_priority), (vp, pp));
        let allowed = match p.reason {
            PreemptionReason::InClusterQueue => {
                v.spec.queue == by.spec.queue
                    && match policy.within {
                        WithinClusterQueue::Never => false,
                        WithinClusterQueue::LowerPriority => vp < pp,
                        WithinClusterQueue::LowerOrNewerEqualPriority => vp < pp || (vp == pp && v.ts > by.ts),
                    }
            }
            PreemptionReason::InCohortReclamation => {
                v.spec.queue != by.spec.queue
                    && self.queues[v.spec.queue].cohort
                    && policy.cohort
                    && match policy.reclaim {
                        ReclaimWithinCohort::Never => false,
                        ReclaimWithinCohort::LowerPriority => vp < pp,
                        ReclaimWithinCohort::Any => true,
                    }
            }
            PreemptionReason::InCohortReclaimWhileBorrowing => {
                v.spec.queue != by.spec.queue
                    && self.queues[v.spec.queue].cohort
                    && policy.cohort
                    && policy.borrow_within.is_some_and(|t| vp < pp && vp <= t)
            }
            PreemptionReason::InCohortFairSharing => {
                v.spec.queue != by.spec.queue
                    && self.queues[v.spec.queue].cohort
                    && policy.cohort
                    && (match policy.reclaim {
                        ReclaimWithinCohort::Never => false,
                        ReclaimWithinCohort::LowerPriority => vp < pp,
                        ReclaimWithinCohort::Any => true,
                    } || policy.borrow_within.is_some_and(|t| vp < pp && vp <= t))
            }
        };
        prop_assert!(allowed, "{:?} not allowed by {:?}", p, policy);
        Ok(())
    }
}
