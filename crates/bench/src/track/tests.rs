use super::*;
use serde_json::json;

fn slot() -> Slot {
    ("rf".to_string(), "cpu".to_string())
}

/// Two queues in cohort `c` (a: nominal 20, borrowingLimit 10; b:
/// nominal 20, no borrowingLimit: cohort pool 40) and `solo` (nominal 5,
/// no cohort).
fn model() -> QuotaModel {
    let q = |cohort: Option<&str>, nominal: i64, borrowing: Option<i64>| QueueQuota {
        cohort: cohort.map(String::from),
        limits: BTreeMap::from([(
            slot(),
            Limit {
                nominal,
                borrowing_limit: borrowing,
                lending_limit: None,
            },
        )]),
    };
    QuotaModel::new(BTreeMap::from([
        ("a".to_string(), q(Some("c"), 20_000, Some(10_000))),
        ("b".to_string(), q(Some("c"), 20_000, None)),
        ("solo".to_string(), q(None, 5_000, None)),
    ]))
}

fn holding(queue: &str, cpu: i64) -> Observation {
    Observation {
        generation: Some(1),
        admitted: true,
        holding: Some(Holding {
            cluster_queue: queue.to_string(),
            usage: BTreeMap::from([(slot(), cpu)]),
        }),
        ..Observation::default()
    }
}

fn finished() -> Observation {
    Observation {
        generation: Some(1),
        admitted: true,
        finished: true,
        ..Observation::default()
    }
}

fn tracker(n: usize, runtime: Ms) -> Tracker {
    Tracker::new(model(), (0..n).map(|i| (format!("ns/w{i}"), runtime)))
}

#[test]
fn reads_conditions_and_admission_from_a_workload() {
    let wl: Workload = serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "generation": 2},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {}}]},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": "Evicted", "status": "False", "reason": "Admitted", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
            ],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "count": 2, "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "2500m"}}
            ]}
        }
    }))
    .expect("a Workload");
    let obs = observe(&wl).expect("readable");
    assert_eq!(obs.generation, Some(2));
    assert!(obs.running());
    let h = obs.holding.expect("holds quota");
    assert_eq!(h.cluster_queue, "cq");
    assert_eq!(h.usage[&slot()], 2_500);

    // Finished: no longer holds quota, no longer runs.
    let mut done = wl.clone();
    let st = done.status.as_mut().expect("status");
    st.conditions.push(serde_json::from_value(json!({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": "2024-01-01T00:00:01Z"})).expect("condition"));
    let obs = observe(&done).expect("readable");
    assert!(obs.finished && !obs.running() && obs.holding.is_none());

    // A usage without a flavor is an error naming the field.
    let mut bad = wl;
    let adm = bad
        .status
        .as_mut()
        .and_then(|s| s.admission.as_mut())
        .expect("admission");
    adm.pod_set_assignments[0].flavors.clear();
    let err = observe(&bad).unwrap_err();
    assert!(err.contains("podSetAssignments[0].resourceUsage[cpu]"), "{err}");
}

#[test]
fn limits_of_queues_and_cohorts() {
    let l = Limit {
        nominal: 20,
        borrowing_limit: Some(100),
        lending_limit: None,
    };
    assert_eq!(l.queue_cap(true), Some(120));
    assert_eq!(l.queue_cap(false), Some(20));
    assert_eq!((l.lendable(), l.guaranteed()), (20, 0));
    let keeps = Limit {
        nominal: 20,
        borrowing_limit: None,
        lending_limit: Some(5),
    };
    // Lends 5, keeps 15 for itself; no cap of its own in a cohort.
    assert_eq!((keeps.lendable(), keeps.guaranteed()), (5, 15));
    assert_eq!(keeps.queue_cap(true), None);
}

#[test]
fn admission_starts_the_run_time_and_preemption_restarts_it() {
    let mut t = tracker(1, 200);
    t.created(0, 10);
    // Admitted at 50: finish at 250, epoch 1.
    assert_eq!(
        t.observe(0, 50, holding("a", 1_000)),
        Some(FinishAt {
            index: 0,
            epoch: 1,
            at: 250
        })
    );
    // The same state again (e.g. a status write of another field): nothing new.
    assert_eq!(t.observe(0, 60, holding("a", 1_000)), None);
    assert_eq!(t.finish_due(0, 1), Some(Some(1)));
    // Preempted at 100: the epoch-1 timer is stale.
    let mut evicted = holding("a", 1_000);
    evicted.evicted = true;
    assert_eq!(t.observe(0, 100, evicted), None);
    assert_eq!(t.finish_due(0, 1), None);
    // Eviction complete (quota released), then admitted again at 300.
    t.observe(0, 150, Observation::default());
    assert_eq!(
        t.observe(0, 300, holding("a", 1_000)),
        Some(FinishAt {
            index: 0,
            epoch: 2,
            at: 500
        })
    );
    assert_eq!(t.finish_due(0, 1), None);
    assert_eq!(t.finish_due(0, 2), Some(Some(1)));
    t.observe(0, 510, finished());
    assert!(t.done());
    let c = t.close(600);
    let r = &c.records[0];
    // Time to admission (Kueue's): the admission it finished in −
    // creation = 300 − 10 = 290 ms; to its first admission 50 − 10 = 40.
    assert_eq!(r.time_to_admission(), Some(290));
    assert_eq!(r.time_to_first_admission(), Some(40));
    assert_eq!((r.admissions, r.evictions, r.finished_at), (2, 1, Some(510)));
    assert_eq!(c.admissions, vec![50, 300]);
}

#[test]
fn samples_count_waiting_running_admitted_and_finished_workloads() {
    use crate::stall::Sample;
    let mut t = tracker(4, 200);
    // Not created yet: not waiting.
    assert_eq!(t.sample(0), Sample::default());
    t.created(0, 10);
    t.created(1, 10);
    t.created(2, 10);
    t.observe(0, 20, holding("a", 1_000));
    t.observe(1, 30, holding("a", 1_000));
    t.observe(1, 40, finished());
    let mut evicted = holding("a", 1_000);
    evicted.evicted = true;
    t.observe(0, 50, evicted);
    // 0 evicted (waits again), 1 finished, 2 waits, 3 not created.
    assert_eq!(
        t.sample(60),
        Sample {
            at: 60,
            admissions: 2,
            finished: 1,
            pending: 2,
            running: 0
        }
    );
    t.observe(2, 70, holding("a", 1_000));
    assert_eq!(
        t.sample(80),
        Sample {
            at: 80,
            admissions: 3,
            finished: 1,
            pending: 1,
            running: 1
        }
    );
}

#[test]
fn creation_time_is_the_earlier_of_the_answer_and_the_watch() {
    let mut t = tracker(2, 0);
    // The watch saw w0 at 12 before its create call answered at 15.
    t.observe(0, 12, Observation::default());
    t.created(0, 15);
    t.created(1, 20);
    t.observe(1, 25, Observation::default());
    assert_eq!(t.records()[0].created_at, Some(12));
    assert_eq!(t.records()[1].created_at, Some(20));
}

#[test]
fn a_missed_admission_is_counted_at_first_sight() {
    // The watch relisted and first sees w0 already Finished at 900.
    let mut t = tracker(1, 100);
    t.created(0, 100);
    assert_eq!(t.observe(0, 900, finished()), None);
    let c = t.close(900);
    assert_eq!(c.records[0].first_admitted_at, Some(900));
    assert_eq!(c.records[0].time_to_admission(), Some(800));
    assert_eq!(c.records[0].admissions, 1);
    assert_eq!(c.admissions, vec![900]);
}

#[test]
fn usage_is_integrated_per_queue() {
    // Queue a: 2 CPU from 0 to 1 000 ms, 5 CPU (2 + 3) from 1 000 to
    // 2 000, 3 CPU from 2 000 to the end at 4 000:
    // ∫ = 2 000·1 000 + 5 000·1 000 + 3 000·2 000 = 13 000 000 milli-CPU·ms
    // (13 CPU·s; with nominal 20 CPU over 4 s that is 13 / 80 = 16.25 %).
    let mut t = tracker(2, 10_000);
    t.observe(0, 0, holding("a", 2_000));
    t.observe(1, 1_000, holding("a", 3_000));
    t.observe(0, 2_000, finished());
    let c = t.close(4_000);
    assert_eq!(c.usage["a"][&slot()], 13_000_000.0);
    assert!(c.violations.is_empty());
}

#[test]
fn a_queue_over_nominal_plus_borrowing_limit_is_a_violation() {
    // a: cap 20 + 10 = 30 CPU. 25 CPU at 0 is borrowing within the cap;
    // another 6 CPU at 100 makes 31 > 30 until the first finishes at 300.
    // The cohort (pool 20 + 20 = 40) is within its quota throughout.
    let mut t = tracker(3, 10_000);
    t.observe(0, 0, holding("a", 25_000));
    assert_eq!(t.violations(), 0);
    t.observe(1, 100, holding("a", 6_000));
    t.observe(2, 200, holding("a", 1_000)); // 32 CPU: still broken, peak 32
    t.observe(0, 300, finished()); // 7 CPU
    let c = t.close(1_000);
    assert_eq!(
        c.violations,
        vec![Violation {
            scope: Scope::ClusterQueue,
            name: "a".into(),
            flavor: "rf".into(),
            resource: "cpu".into(),
            limit: 30_000,
            peak: 32_000,
            from_ms: 100,
            to_ms: 300,
        }]
    );
}

#[test]
fn a_cohort_over_its_total_nominal_is_a_violation() {
    // Cohort c: a (20) + b (20) = 40 CPU. b has no borrowingLimit, so
    // only the cohort rule bounds it: a 15 + b 26 = 41 > 40 at 50, still
    // broken at the end (1 000).
    let mut t = tracker(2, 10_000);
    t.observe(0, 0, holding("a", 15_000));
    t.observe(1, 50, holding("b", 26_000));
    let c = t.close(1_000);
    assert_eq!(c.violations.len(), 1);
    let v = &c.violations[0];
    assert_eq!((v.scope, v.name.as_str()), (Scope::Cohort, "c"));
    assert_eq!((v.limit, v.peak, v.from_ms, v.to_ms), (40_000, 41_000, 50, 1_000));
}

#[test]
fn a_queue_without_a_cohort_never_exceeds_nominal() {
    // solo: nominal 5; 5 is fine, 5.5 is not. A queue unknown to the
    // scenario, or a flavor it has no quota for, allows nothing.
    let mut t = tracker(3, 10_000);
    t.observe(0, 0, holding("solo", 5_000));
    assert_eq!(t.violations(), 0);
    t.observe(1, 10, holding("solo", 500));
    t.observe(2, 20, holding("elsewhere", 1));
    let c = t.close(30);
    let got: Vec<(&str, i64, i64)> = c
        .violations
        .iter()
        .map(|v| (v.name.as_str(), v.limit, v.peak))
        .collect();
    assert_eq!(got, vec![("solo", 5_000, 5_500), ("elsewhere", 0, 1)]);
}

#[test]
fn a_queue_in_a_cohort_cannot_use_a_flavor_it_has_no_quota_for() {
    // a is in cohort c with quota of rf only; 1 CPU of another flavor
    // is over its cap of 0 (the cohort has 40 CPU of rf to spare, but
    // a queue borrows only what it lists).
    let mut t = tracker(1, 10_000);
    let mut obs = holding("a", 0);
    obs.holding = Some(Holding {
        cluster_queue: "a".into(),
        usage: BTreeMap::from([(("other".to_string(), "cpu".to_string()), 1_000)]),
    });
    t.observe(0, 5, obs);
    let c = t.close(10);
    let got: Vec<(Scope, &str, &str, i64, i64)> = c
        .violations
        .iter()
        .map(|v| (v.scope, v.name.as_str(), v.flavor.as_str(), v.limit, v.peak))
        .collect();
    assert!(got.contains(&(Scope::ClusterQueue, "a", "other", 0, 1_000)), "{got:?}");
}

#[test]
fn a_relist_is_checked_as_one_moment() {
    // a (cap 30) holds w0 (25 CPU). While the watch is away w0 is
    // evicted and released, and w1 (25 CPU) admitted in its place. The
    // relist shows w1 before w0: one by one that would be 50 > 30 for
    // a moment; as the list it is, 25 CPU, no violation.
    let mut t = tracker(2, 10_000);
    t.observe(0, 0, holding("a", 25_000));
    let finishes = t.observe_list([(1, 500, holding("a", 25_000)), (0, 501, Observation::default())]);
    assert_eq!(
        finishes,
        vec![FinishAt {
            index: 1,
            epoch: 1,
            at: 10_500
        }]
    );
    assert_eq!(t.violations(), 0);
    // The same list taken one by one does show the phantom.
    let mut one_by_one = tracker(2, 10_000);
    one_by_one.observe(0, 0, holding("a", 25_000));
    one_by_one.observe(1, 500, holding("a", 25_000));
    one_by_one.observe(0, 501, Observation::default());
    // The queue (50 > 30) and the cohort (50 > 40).
    assert_eq!(one_by_one.violations(), 2);
    // A list that really is over quota is still caught, at its last time.
    let mut over = tracker(2, 10_000);
    over.observe_list([(0, 700, holding("a", 20_000)), (1, 701, holding("a", 20_000))]);
    let c = over.close(1_000);
    assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
    let v = &c.violations[0];
    assert_eq!((v.limit, v.peak, v.from_ms, v.to_ms), (30_000, 40_000, 701, 1_000));
    // Usage is still integrated from each item's own time: 20 CPU from
    // 700 and 20 more from 701, to 1 000.
    assert_eq!(c.usage["a"][&slot()], 20_000.0 * 300.0 + 20_000.0 * 299.0);
}

#[test]
fn lending_limits_shrink_the_cohort_pool() {
    // x: nominal 10, lends 4 (keeps 6); y: nominal 10, lends all.
    // Pool = 4 + 10 = 14. x uses 10 (4 from the pool), y 10 (all from
    // the pool): 14 ≤ 14. One more CPU in y: 15 > 14.
    let lim = |lending| Limit {
        nominal: 10_000,
        borrowing_limit: None,
        lending_limit: lending,
    };
    let model = QuotaModel::new(BTreeMap::from([
        (
            "x".to_string(),
            QueueQuota {
                cohort: Some("c".into()),
                limits: BTreeMap::from([(slot(), lim(Some(4_000)))]),
            },
        ),
        (
            "y".to_string(),
            QueueQuota {
                cohort: Some("c".into()),
                limits: BTreeMap::from([(slot(), lim(None))]),
            },
        ),
    ]));
    let mut t = Tracker::new(model, (0..3).map(|i| (format!("ns/w{i}"), 1_000)));
    t.observe(0, 0, holding("x", 10_000));
    t.observe(1, 0, holding("y", 10_000));
    assert_eq!(t.violations(), 0);
    t.observe(2, 5, holding("y", 1_000));
    let c = t.close(10);
    assert_eq!(c.violations.len(), 1);
    assert_eq!((c.violations[0].limit, c.violations[0].peak), (14_000, 15_000));
}
