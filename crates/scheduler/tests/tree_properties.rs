//! Cohort trees under random shapes and events. An independent oracle
//! recomputes, from the admitted workloads alone, each queue's usage and
//! each cohort's draw bottom-up, and checks every bound of the tree:
//!
//! ```text
//! usage(q) <= nominal(q) + borrowingLimit(q)                  every queue in a cohort
//! Σ draw(children of c) <= quota(c) + borrowingLimit(c)       every cohort with a parent
//! Σ draw(children of root) <= quota(root)                     every root
//! draw(x) = max(0, usage(x) - (quota(x) - lendingLimit(x)))   what x takes from its parent
//! quota(c) = nominal(c) + Σ (quota(child) - guaranteed(child))
//! ```
//!
//! The lending limits are in the last two lines: what a child keeps for
//! itself is neither in its parent's quota nor drawn from it.
//!
//! And fairness: with equal weights, one-GPU workloads, no limits, and
//! more demand in every queue than the tree holds, one cycle leaves any
//! two sibling nodes' weighted shares within one workload of each other.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice_scheduler::*;

const GPU: &str = "nvidia.com/gpu";

#[derive(Clone, Debug)]
struct Limits {
    nominal: i64,
    borrowing: Option<i64>,
    lending: Option<i64>,
}

#[derive(Clone, Debug)]
struct Tree {
    /// Cohort i's parent (an earlier cohort), and its quota.
    cohorts: Vec<(Option<usize>, Limits)>,
    /// Queue i's cohort and quota.
    queues: Vec<(usize, Limits)>,
}

fn limits(limited: bool) -> impl Strategy<Value = Limits> {
    let opt = move || {
        if limited {
            prop::option::of(0i64..6).boxed()
        } else {
            Just(None).boxed()
        }
    };
    (0i64..6, opt(), opt()).prop_map(|(nominal, borrowing, lending)| Limits {
        nominal,
        borrowing,
        lending: lending.map(|l| l.min(nominal)),
    })
}

fn tree(limited: bool) -> impl Strategy<Value = Tree> {
    (1usize..6, 2usize..7).prop_flat_map(move |(nc, nq)| {
        let parents: Vec<_> = (0..nc)
            .map(|i| {
                if i == 0 {
                    Just(None).boxed()
                } else {
                    prop::option::of(0..i).boxed()
                }
            })
            .collect();
        (
            parents,
            prop::collection::vec(limits(limited), nc),
            prop::collection::vec((0..nc, limits(limited)), nq),
        )
            .prop_map(|(parents, quotas, queues)| Tree {
                cohorts: parents.into_iter().zip(quotas).collect(),
                queues,
            })
    })
}

fn quota(l: &Limits) -> Vec<ResourceGroupSpec> {
    vec![ResourceGroupSpec {
        covered_resources: vec![GPU.into()],
        flavors: vec![FlavorQuotaSpec {
            flavor: "f".into(),
            resources: vec![ResourceQuotaSpec {
                resource: GPU.into(),
                nominal: l.nominal * 1000,
                borrowing_limit: l.borrowing.map(|b| b * 1000),
                lending_limit: l.lending.map(|x| x * 1000),
            }],
        }],
    }]
}

fn build(t: &Tree, reclaim: ReclaimWithinCohort) -> Engine {
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "f".into(),
        ..Default::default()
    });
    for (i, (parent, l)) in t.cohorts.iter().enumerate() {
        // A root's borrowing limit means nothing (no parent to borrow from).
        let mut l = l.clone();
        if parent.is_none() {
            l.borrowing = None;
        }
        e.upsert_cohort(CohortSpec {
            name: format!("c{i}"),
            parent: parent.map(|p| format!("c{p}")),
            resource_groups: quota(&l),
            fair_weight: Weight::default(),
        })
        .expect("parents come first: no cycle");
    }
    for (i, (c, l)) in t.queues.iter().enumerate() {
        e.upsert_cluster_queue(ClusterQueueSpec {
            name: format!("q{i}"),
            cohort: Some(format!("c{c}")),
            resource_groups: quota(l),
            preemption: PreemptionPolicy {
                within_cluster_queue: WithinClusterQueue::LowerPriority,
                reclaim_within_cohort: reclaim,
                ..Default::default()
            },
            ..Default::default()
        });
        e.upsert_local_queue(LocalQueueSpec {
            key: format!("ns/q{i}"),
            cluster_queue: format!("q{i}"),
            ..Default::default()
        });
    }
    e
}

fn job(uid: &str, queue: usize, gpus: i64, priority: i32, at: Millis) -> WorkloadSpec {
    WorkloadSpec {
        uid: uid.into(),
        name: format!("ns/{uid}"),
        local_queue: format!("ns/q{queue}"),
        priority,
        queue_order_time: at,
        pod_sets: vec![PodSetSpec {
            name: "main".into(),
            count: 1,
            requests: [(GPU.to_string(), gpus * 1000)].into(),
            ..Default::default()
        }],
        expected_runtime: None,
    }
}

/// Checks every bound of the tree against usage per queue (milli-GPUs).
fn check_bounds(t: &Tree, usage: &[i64]) -> Result<(), TestCaseError> {
    let g = |l: &Limits, quota: i64| l.lending.map_or(0, |x| (quota - x * 1000).max(0));
    let mut sum_draw = vec![0i64; t.cohorts.len()];
    let mut subtree = vec![0i64; t.cohorts.len()];
    for (i, (c, l)) in t.queues.iter().enumerate() {
        let nominal = l.nominal * 1000;
        if let Some(b) = l.borrowing {
            prop_assert!(
                usage[i] <= nominal + b * 1000,
                "q{} uses {} over its limit",
                i,
                usage[i]
            );
        }
        sum_draw[*c] += (usage[i] - g(l, nominal)).max(0);
        subtree[*c] += nominal - g(l, nominal);
    }
    // Children have higher indices than parents: go from the last up.
    for i in (0..t.cohorts.len()).rev() {
        let (parent, l) = &t.cohorts[i];
        let quota = l.nominal * 1000 + subtree[i];
        match parent {
            None => prop_assert!(sum_draw[i] <= quota, "root c{} draws {} of {}", i, sum_draw[i], quota),
            Some(p) => {
                if let Some(b) = l.borrowing {
                    prop_assert!(
                        sum_draw[i] <= quota + b * 1000,
                        "c{} draws {} over quota {} + limit {}",
                        i,
                        sum_draw[i],
                        quota,
                        b * 1000
                    );
                }
                sum_draw[*p] += (sum_draw[i] - g(l, quota)).max(0);
                subtree[*p] += quota - g(l, quota);
            }
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Op {
    Add { queue: usize, gpus: i64, priority: i32 },
    Cycle,
    Finish(usize),
}

fn ops(queues: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            4 => (0..queues, 1i64..4, 0i32..3).prop_map(|(queue, gpus, priority)| Op::Add { queue, gpus, priority }),
            3 => Just(Op::Cycle),
            1 => any::<usize>().prop_map(Op::Finish),
        ],
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    /// Every bound of a random tree holds after every cycle, nothing is
    /// admitted twice, and the engine's ledger equals its holders.
    #[test]
    fn random_trees_never_exceed_any_bound(
        (t, ops, reclaim) in tree(true).prop_flat_map(|t| {
            let n = t.queues.len();
            (Just(t), ops(n), prop_oneof![Just(ReclaimWithinCohort::Never), Just(ReclaimWithinCohort::Any)])
        })
    ) {
        let mut e = build(&t, reclaim);
        let mut holding: BTreeMap<String, (usize, i64)> = BTreeMap::new();
        let mut ever: BTreeSet<String> = BTreeSet::new();
        let mut next = 0;
        for (now, op) in ops.iter().enumerate() {
            let now = now as Millis;
            match *op {
                Op::Add { queue, gpus, priority } => {
                    e.add_workload(job(&format!("w{next}"), queue, gpus, priority, now)).unwrap();
                    next += 1;
                }
                Op::Finish(i) => {
                    if !holding.is_empty() {
                        let uid = holding.keys().nth(i % holding.len()).unwrap().clone();
                        e.finish(&uid).unwrap();
                        holding.remove(&uid);
                    }
                }
                Op::Cycle => {
                    let c = e.schedule(now);
                    for p in &c.preempted {
                        prop_assert!(holding.remove(&*p.victim).is_some(), "victim {} held nothing", p.victim);
                        e.eviction_complete(&p.victim, now).unwrap();
                    }
                    for a in &c.admitted {
                        let uid = a.uid.to_string();
                        prop_assert!(holding.insert(uid.clone(), (0, 0)).is_none(), "{} admitted twice", uid);
                        let q: usize = a.cluster_queue[1..].parse().unwrap();
                        holding.insert(uid.clone(), (q, a.pod_sets[0].usage[GPU]));
                        ever.insert(uid);
                    }
                }
            }
            let mut usage = vec![0; t.queues.len()];
            for (q, amount) in holding.values() {
                usage[*q] += amount;
            }
            check_bounds(&t, &usage)?;
            e.check_consistency().map_err(TestCaseError::fail)?;
        }
    }

    /// Equal weights, one-GPU jobs, no limits, every queue saturated: one
    /// cycle leaves the shares of siblings with demand within one job.
    #[test]
    fn equal_weight_siblings_end_within_one_workload(t in tree(false).prop_filter("three cohort levels", |t| depth(t) <= 3)) {
        let mut e = build(&t, ReclaimWithinCohort::Never);
        let total: i64 = t.cohorts.iter().map(|(_, l)| l.nominal).sum::<i64>()
            + t.queues.iter().map(|(_, l)| l.nominal).sum::<i64>();
        let mut n = 0;
        for round in 0..=total {
            for q in 0..t.queues.len() {
                e.add_workload(job(&format!("w{n}"), q, 1, 0, round)).unwrap();
                n += 1;
            }
        }
        e.schedule(0);
        e.check_consistency().map_err(TestCaseError::fail)?;
        // Siblings: queues of one cohort, and cohorts of one parent. With
        // no limits a parent can lend its whole tree; shares are thousandths
        // of that (rounded down), so one job is 1000 / lendable + 1 apart.
        let share = |name: &str, cohort: bool| {
            if cohort { e.cohort_share(name) } else { e.cluster_queue_share(name) }
                .unwrap()
                .weighted_share
        };
        let mut siblings: BTreeMap<usize, Vec<(String, bool)>> = BTreeMap::new();
        for (i, (c, _)) in t.queues.iter().enumerate() {
            siblings.entry(*c).or_default().push((format!("q{i}"), false));
        }
        // Only cohorts with queues below them have demand.
        let has_queues = |c: usize| {
            t.queues.iter().any(|(q, _)| {
                let mut x = *q;
                loop {
                    if x == c {
                        return true;
                    }
                    match t.cohorts[x].0 {
                        Some(p) => x = p,
                        None => return false,
                    }
                }
            })
        };
        for (i, (p, _)) in t.cohorts.iter().enumerate() {
            if let Some(p) = p
                && has_queues(i)
            {
                siblings.entry(*p).or_default().push((format!("c{i}"), true));
            }
        }
        for (parent, nodes) in siblings {
            let shares: Vec<i64> = nodes.iter().map(|(n, c)| share(n, *c)).collect();
            let (lo, hi) = (*shares.iter().min().unwrap(), *shares.iter().max().unwrap());
            let one_job = 1000 / lendable_of(&t, parent).max(1) + 1;
            prop_assert!(
                hi - lo <= one_job,
                "children of c{}: shares {:?} of {:?} differ by more than one job ({})",
                parent,
                shares,
                nodes,
                one_job
            );
        }
    }
}

/// Cohort levels of the deepest path (the fair-share order compares three
/// levels of cohorts and the queue).
fn depth(t: &Tree) -> usize {
    (0..t.cohorts.len())
        .map(|mut c| {
            let mut d = 1;
            while let Some(p) = t.cohorts[c].0 {
                d += 1;
                c = p;
            }
            d
        })
        .max()
        .unwrap_or(0)
}

/// What cohort `c` can lend its children with no limits: everything in its
/// tree (its root's quota, all of it lendable).
fn lendable_of(t: &Tree, c: usize) -> i64 {
    let mut root = c;
    while let Some(p) = t.cohorts[root].0 {
        root = p;
    }
    let in_tree = |mut x: usize| loop {
        if x == root {
            return true;
        }
        match t.cohorts[x].0 {
            Some(p) => x = p,
            None => return false,
        }
    };
    t.cohorts
        .iter()
        .enumerate()
        .filter(|(i, _)| in_tree(*i))
        .map(|(_, (_, l))| l.nominal)
        .sum::<i64>()
        + t.queues
            .iter()
            .filter(|(q, _)| in_tree(*q))
            .map(|(_, l)| l.nominal)
            .sum::<i64>()
}
