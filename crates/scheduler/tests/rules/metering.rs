//! Metering: the engine records every change of held quota, and the usage
//! book charges it over time to the ClusterQueue and the LocalQueue, from
//! admission to finish or eviction, partial admissions and shrinking
//! included; a restart in the middle neither loses nor counts twice.

use crate::common::*;
use sluice_scheduler::usage::{Account, HOUR, UsageBook};
use sluice_scheduler::*;

/// A world whose engine meters, with a book fed after every step at the
/// step's time.
struct Metered {
    w: World,
    book: UsageBook,
}

impl Metered {
    fn new(queues: Vec<CqBuilder>) -> Self {
        let config = EngineConfig {
            metering: true,
            ..Default::default()
        };
        Self {
            w: World::with_config(config, queues),
            book: UsageBook::new(None),
        }
    }

    /// Runs `f` at `now` (hours) and charges what it changed.
    fn at(&mut self, hours: i64, f: impl FnOnce(&mut World)) {
        f(&mut self.w);
        let changes = self.w.e.take_usage_changes();
        self.book.apply(hours * HOUR, &changes);
    }

    fn cycle(&mut self, hours: i64) -> Cycle {
        let mut out = None;
        self.at(hours, |w| out = Some(w.cycle(hours * HOUR)));
        out.expect("ran")
    }

    /// GPU-hours of an account up to `hours`.
    fn gpu_hours(&mut self, account: Account, hours: i64) -> f64 {
        self.book.advance(hours * HOUR);
        usage::hours(
            self.book
                .meters_of(&account)
                .filter(|(_, r, _)| &***r == GPU)
                .map(|(_, _, m)| m.total)
                .sum(),
        )
    }
}

fn queue(name: &str) -> Account {
    Account::ClusterQueue(name.into())
}

#[test]
fn usage_runs_from_admission_to_finish_for_the_queue_and_its_local_queue() {
    let mut m = Metered::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    m.w.add(wl("job").queue("a").pods(2, &[(GPU, 2)]));
    assert_eq!(admitted(&m.cycle(1)), ["job"]);
    m.at(4, |w| w.e.finish("job").unwrap());
    assert_eq!(m.gpu_hours(queue("a"), 10), 12.0, "4 GPUs for 3 hours");
    assert_eq!(m.gpu_hours(Account::LocalQueue("ns/a".into()), 10), 12.0);
}

#[test]
fn an_evicted_workload_is_charged_until_its_eviction_completes_and_again_once_readmitted() {
    let mut m = Metered::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    m.w.add(wl("job").queue("a").pods(1, &[(GPU, 8)]));
    m.cycle(0);
    m.at(2, |w| w.e.evict("job").unwrap());
    // The pods take an hour to go: the quota is held until then.
    m.at(3, |w| w.e.eviction_complete("job", 3 * HOUR).unwrap());
    assert_eq!(m.gpu_hours(queue("a"), 3), 24.0);
    // Requeued: admitted again at 5, finishes at 6.
    assert_eq!(admitted(&m.cycle(5)), ["job"]);
    m.at(6, |w| w.e.finish("job").unwrap());
    assert_eq!(m.gpu_hours(queue("a"), 8), 32.0);
}

#[test]
fn a_preempted_victim_stops_and_its_preemptor_starts_being_charged_when_the_quota_changes_hands() {
    let mut m = Metered::new(vec![
        cq("a")
            .quota("a100", vec![q(GPU, 8)])
            .within(WithinClusterQueue::LowerPriority),
    ]);
    m.w.add(wl("low").queue("a").prio(0).pods(1, &[(GPU, 8)]));
    m.cycle(0);
    m.w.add(wl("high").queue("a").prio(10).pods(1, &[(GPU, 8)]));
    let c = m.cycle(1);
    assert_eq!(victims(&c), ["low"]);
    m.at(2, |w| w.e.eviction_complete("low", 2 * HOUR).unwrap());
    assert_eq!(admitted(&m.cycle(2)), ["high"]);
    assert_eq!(m.gpu_hours(queue("a"), 4), 32.0, "low 0–2 h, high 2–4 h, 8 GPUs each");
}

#[test]
fn a_partial_admission_is_charged_for_its_admitted_pods_and_a_shrink_from_then_on() {
    let mut m = Metered::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    m.w.add(wl("other").queue("a").pods(1, &[(GPU, 3)]));
    m.cycle(0);
    m.w.add(wl("elastic").queue("a").pods(8, &[(GPU, 1)]).min_count(2));
    m.cycle(0);
    assert_eq!(m.w.used("a", "a100", GPU), 8, "5 of its 8 pods admitted");
    m.at(2, |w| {
        assert!(w.e.shrink_admitted("elastic", &[("main".into(), 2)]).unwrap())
    });
    assert_eq!(m.gpu_hours(queue("a"), 4), 3.0 * 4.0 + 5.0 * 2.0 + 2.0 * 2.0);
}

#[test]
fn a_restart_in_the_middle_neither_loses_nor_double_counts() {
    let mut m = Metered::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    m.w.add(wl("job").queue("a").pods(1, &[(GPU, 4)]));
    m.cycle(1);
    m.book.advance(3 * HOUR);
    let record = m.book.record(&queue("a"), 3 * HOUR);

    // A new controller at 5 h: the record, then the workload restored as
    // admitted at 1 h.
    let mut after = Metered::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    after.book.restore(&queue("a"), &record);
    let adm = m.w.e.admission("job").unwrap();
    let spec = m.w.e.workload_spec("job").unwrap();
    after.at(5, |w| w.e.restore_admitted(spec, "a", &adm.pod_sets, HOUR).unwrap());
    after.at(7, |w| w.e.finish("job").unwrap());
    m.at(7, |w| w.e.finish("job").unwrap());
    assert_eq!(after.gpu_hours(queue("a"), 9), 24.0, "4 GPUs from 1 h to 7 h");
    assert_eq!(after.gpu_hours(queue("a"), 9), m.gpu_hours(queue("a"), 9));
}

#[test]
fn an_engine_that_does_not_meter_records_nothing() {
    let mut w = World::new(vec![cq("a").quota("a100", vec![q(GPU, 8)])]);
    w.add(wl("job").queue("a").pods(1, &[(GPU, 4)]));
    w.cycle(0);
    assert!(w.e.take_usage_changes().is_empty());
}
