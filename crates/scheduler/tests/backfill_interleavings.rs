//! Backfill driven as a controller drives the engine: arrivals and
//! finishes at random instants, each bringing a cycle a little later
//! (events between coalesce into it), with read-only refreshes
//! (explanations, positions, a forecast on a copy) in between. Workloads
//! are queued with whole-second creation times, so many tie, and their
//! UIDs sort in no relation to when they arrived. Declared run times are
//! exact or longer than the real ones (work ends on time or early).
//!
//! - With one priority, a reservation, once announced, never moves: no
//!   workload admitted behind it ends (by what it declares; never, when it
//!   declares nothing) after its start unless the head still fits then
//!   beside it, the head is admitted by its first start (give or take the
//!   cycle's delay), and no move is reported.
//! - With some workloads of higher priority, a start may move, but never
//!   silently: each time the start a head is shown is later than the one it
//!   was announced, by a minute or more, the cycle reports the move
//!   (`Cycle::moved`), or the head was told it no longer reserves (another
//!   reason); and it is admitted by the last start announced.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice_scheduler::*;

const GPU: &str = "nvidia.com/gpu";
/// How late a cycle may follow the event that asks for it.
const MAX_CYCLE_DELAY: Millis = 2_000;
/// Moves smaller than this are not reported (`review.rs`).
const WORTH_TELLING: Millis = 60_000;

#[derive(Clone, Debug)]
struct Job {
    arrival: Millis,
    gpu: i64,
    runtime: Millis,
    /// What it declares: none, or at least its real run time.
    declared: Option<Millis>,
    prio: i32,
    /// Its UID's sort key, drawn apart from its arrival.
    uid_key: u32,
}

fn job_gen(high_priority: bool) -> impl Strategy<Value = Job> {
    let prio = if high_priority {
        prop::bool::weighted(0.15).prop_map(|h| if h { 5 } else { 0 }).boxed()
    } else {
        Just(0).boxed()
    };
    (
        0i64..600_000,
        1i64..9,
        1i64..900_000,
        prop::option::weighted(0.8, 0i64..300_000),
        prio,
        any::<u32>(),
    )
        .prop_map(|(arrival, gpu, runtime, extra, prio, uid_key)| Job {
            arrival,
            gpu,
            runtime,
            declared: extra.map(|x| runtime + x),
            prio,
            uid_key,
        })
}

fn engine(nominal: i64, depth: u32) -> Engine {
    let mut e = Engine::new();
    e.upsert_flavor(FlavorSpec {
        name: "a100".into(),
        ..Default::default()
    });
    e.upsert_cluster_queue(ClusterQueueSpec {
        name: "a".into(),
        resource_groups: vec![ResourceGroupSpec {
            covered_resources: vec![GPU.into()],
            flavors: vec![FlavorQuotaSpec {
                flavor: "a100".into(),
                resources: vec![ResourceQuotaSpec {
                    resource: GPU.into(),
                    nominal: nominal * 1000,
                    borrowing_limit: None,
                    lending_limit: None,
                }],
            }],
        }],
        backfill: Backfill::Reserve,
        backfill_depth: depth,
        ..Default::default()
    });
    e.upsert_local_queue(LocalQueueSpec {
        key: "ns/a".into(),
        cluster_queue: "a".into(),
        stop_policy: StopPolicy::None,
    });
    e
}

/// Job `i`'s UID: its sort key first, so UID order is not arrival order.
fn uid(i: usize, j: &Job) -> String {
    format!("{:08x}-{i:03}", j.uid_key)
}

fn spec(i: usize, j: &Job) -> WorkloadSpec {
    let uid = uid(i, j);
    WorkloadSpec {
        name: format!("ns/{uid}"),
        uid,
        local_queue: "ns/a".into(),
        priority: j.prio,
        // The API server's creation times have whole seconds.
        queue_order_time: j.arrival / 1000 * 1000,
        pod_sets: vec![PodSetSpec {
            name: "main".into(),
            count: 1,
            requests: BTreeMap::from([(GPU.to_string(), j.gpu * 1000)]),
            ..Default::default()
        }],
        expected_runtime: j.declared,
    }
}

/// A reservation as its head was told it.
#[derive(Clone, Copy, Debug)]
struct Told {
    /// The start announced (first told, or last reported moved to).
    announced: Millis,
}

/// What went wrong, if anything.
type Verdict = Result<(), String>;

struct Run<'a> {
    jobs: &'a [Job],
    nominal: i64,
    depth: u32,
    e: Engine,
    /// Index by UID; arrival order (the order the engine was given them).
    index: BTreeMap<String, usize>,
    arrived: Vec<usize>,
    admitted_at: BTreeMap<usize, Millis>,
    running: BTreeSet<usize>,
    /// Heads reserving from a known start, as of the last cycle.
    heads: BTreeMap<usize, Told>,
}

impl<'a> Run<'a> {
    fn new(nominal: i64, depth: u32, jobs: &'a [Job]) -> Self {
        let index = jobs.iter().enumerate().map(|(i, j)| (uid(i, j), i)).collect();
        Run {
            jobs,
            nominal,
            depth,
            e: engine(nominal, depth),
            index,
            arrived: Vec::new(),
            admitted_at: BTreeMap::new(),
            running: BTreeSet::new(),
            heads: BTreeMap::new(),
        }
    }

    /// Whether `w` is behind `h` in queue order (priority, creation time,
    /// arrival).
    fn behind(&self, w: usize, h: usize) -> bool {
        let key = |i: usize| {
            let j = &self.jobs[i];
            let seq = self.arrived.iter().position(|&a| a == i).unwrap_or(usize::MAX);
            (-j.prio, j.arrival / 1000, seq)
        };
        key(w) > key(h)
    }

    /// GPUs admitted work still holds at `t`, by what it declared (all of
    /// it, when it declared nothing).
    fn holding_at(&self, t: Millis) -> i64 {
        (self.running.iter())
            .filter(|&&i| match self.jobs[i].declared {
                Some(d) => self.admitted_at[&i] + d > t,
                None => true,
            })
            .map(|&i| self.jobs[i].gpu)
            .sum()
    }

    /// The read-only calls a controller makes between cycles (now and
    /// then a forecast, on a copy): they must change nothing.
    fn refresh(&self, now: Millis, forecast: bool) {
        for &i in &self.arrived {
            let u = uid(i, &self.jobs[i]);
            let _ = self.e.explanation(&u);
            let _ = self.e.position(&u);
        }
        let _ = self.e.pending_in_order("a");
        if !forecast {
            return;
        }
        let ends = |u: &str| {
            let i = self.index[u];
            let at = self.admitted_at.get(&i)?;
            self.jobs[i].declared.map(|d| at + d)
        };
        let runtime = |u: &str| self.jobs[self.index[u]].declared.unwrap_or(3_600_000);
        let _ = self.e.forecast(now, ends, runtime, ForecastSettings::default());
    }

    /// One cycle at `now`, checked against what the heads were told;
    /// when the engine wants the next.
    fn cycle(&mut self, now: Millis, high_priority: bool) -> Result<Option<Millis>, String> {
        let c = self.e.schedule(now);
        self.e.check_consistency()?;
        for a in &c.admitted {
            let i = self.index[&*a.uid];
            self.admitted_at.insert(i, now);
            self.running.insert(i);
        }
        self.check_behind(&c)?;
        if !high_priority && !c.moved.is_empty() {
            return Err(format!("moved with one priority: {:?}", c.moved));
        }
        self.observe(now, &c, high_priority)?;
        Ok(c.next_wakeup)
    }

    /// Every workload admitted this cycle behind the first reservation
    /// announced before it ends before its start, or the head still fits
    /// then beside what is admitted. A move reported names what went ahead
    /// (in this model nothing else moves a reservation).
    fn check_behind(&self, c: &Cycle) -> Verdict {
        if let Some(m) = c.moved.iter().find(|m| m.ahead.is_empty()) {
            return Err(format!("moved with nothing admitted ahead: {m:?}"));
        }
        let reserving = |h: usize| {
            matches!(
                self.e.explanation(&uid(h, &self.jobs[h])).map(|x| &x.reason),
                Some(PendingReason::Reserved { .. })
            )
        };
        // A head given up this cycle was told why (another reason).
        let Some(h) = (self.heads.keys().copied())
            .filter(|h| !self.admitted_at.contains_key(h) && reserving(*h))
            .min_by(|&a, &b| {
                if self.behind(a, b) {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Less
                }
            })
        else {
            return Ok(());
        };
        // As its head is told now: judged (in queue order) before anything
        // behind it this cycle, or told of a move.
        let head = uid(h, &self.jobs[h]);
        let Some(Explanation {
            reason: PendingReason::Reserved { start, .. },
            ..
        }) = self.e.explanation(&head).cloned()
        else {
            return Ok(());
        };
        for a in &c.admitted {
            let w = self.index[&*a.uid];
            if !self.behind(w, h) {
                continue;
            }
            let ends = self.jobs[w].declared.map(|d| self.admitted_at[&w] + d);
            let (ends_before, fits_beside) = match start {
                ReservedStart::At(s) => (
                    ends.is_some_and(|e| e <= s),
                    self.nominal - self.holding_at(s) >= self.jobs[h].gpu,
                ),
                // Declared work all ends by then; undeclared, it never does.
                ReservedStart::AfterUndeclared => (ends.is_some(), self.nominal - self.jobs[w].gpu >= self.jobs[h].gpu),
            };
            if !ends_before && !fits_beside {
                return Err(format!(
                    "{} admitted behind {head}'s reservation from {start:?}, ending at {ends:?}",
                    a.uid
                ));
            }
        }
        Ok(())
    }

    /// The heads as told after a cycle: a start later than announced is
    /// reported, or the head no longer reserves.
    fn observe(&mut self, now: Millis, c: &Cycle, high_priority: bool) -> Verdict {
        // A head admitted a little after its start (the cycle's delay)
        // moves those behind it by as much; moves too small to tell are
        // allowed only where starts may move.
        let small = MAX_CYCLE_DELAY * Millis::from(self.depth) + if high_priority { WORTH_TELLING } else { 1 };
        let mut heads = BTreeMap::new();
        for &i in &self.arrived {
            let u = uid(i, &self.jobs[i]);
            let Some(Explanation {
                reason:
                    PendingReason::Reserved {
                        start: ReservedStart::At(s),
                        ..
                    },
                ..
            }) = self.e.explanation(&u)
            else {
                continue;
            };
            // What it was last announced: reported moved to, or as before.
            let reported = c.moved.iter().rev().find(|m| &*m.uid == u.as_str());
            let announced = match (reported.map(|m| m.to), self.heads.get(&i)) {
                (Some(ReservedStart::At(t)), _) => t,
                (Some(ReservedStart::AfterUndeclared), _) | (None, None) => *s,
                (None, Some(old)) => old.announced,
            };
            if *s >= announced.max(now) + small {
                return Err(format!("{u} moved from {announced} to {s} unreported"));
            }
            heads.insert(
                i,
                Told {
                    announced: announced.min(*s),
                },
            );
        }
        // A head admitted this cycle: by its start, give or take the delay
        // of the cycle and the moves too small to tell.
        for (h, told) in &self.heads {
            if self.admitted_at.get(h) == Some(&now) && now >= told.announced + MAX_CYCLE_DELAY + small {
                return Err(format!(
                    "{} admitted at {now}, announced {}",
                    uid(*h, &self.jobs[*h]),
                    told.announced
                ));
            }
        }
        self.heads = heads;
        Ok(())
    }

    /// Plays the jobs: `delays` says how late each event's cycle follows it.
    fn play(&mut self, delays: &[Millis], high_priority: bool) -> Verdict {
        let mut arrivals: Vec<(Millis, usize)> = self.jobs.iter().enumerate().map(|(i, j)| (j.arrival, i)).collect();
        arrivals.sort_by_key(|&(t, i)| (t, self.jobs[i].uid_key));
        let mut next = 0;
        let mut ends: BTreeSet<(Millis, usize)> = BTreeSet::new();
        let mut due: Option<Millis> = None;
        let mut wake: Option<Millis> = None;
        let mut events = 0usize;
        loop {
            let t = [arrivals.get(next).map(|a| a.0), ends.first().map(|e| e.0), due, wake]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = t else { return Ok(()) };
            let mut ask = |due: &mut Option<Millis>| {
                let at = t + delays[events % delays.len()];
                events += 1;
                *due = Some(due.map_or(at, |d| d.min(at)));
            };
            while let Some(&(at, i)) = ends.first().filter(|e| e.0 == t) {
                ends.remove(&(at, i));
                self.running.remove(&i);
                self.e.finish(&uid(i, &self.jobs[i])).map_err(|e| e.to_string())?;
                ask(&mut due);
            }
            while let Some(&(_, i)) = arrivals.get(next).filter(|a| a.0 == t) {
                self.e.add_workload(spec(i, &self.jobs[i])).map_err(|e| e.to_string())?;
                self.arrived.push(i);
                next += 1;
                ask(&mut due);
            }
            self.refresh(t, events.is_multiple_of(5));
            if due == Some(t) || wake == Some(t) {
                due = None;
                let before: BTreeSet<usize> = self.admitted_at.keys().copied().collect();
                wake = self.cycle(t, high_priority)?.map(|w| w.max(t + 1));
                for (&i, &at) in &self.admitted_at {
                    if !before.contains(&i) {
                        ends.insert((at + self.jobs[i].runtime, i));
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn with_one_priority_an_announced_reservation_is_never_delayed(
        nominal in 4i64..12,
        depth in 1u32..4,
        jobs in prop::collection::vec(job_gen(false), 1..40),
        delays in prop::collection::vec(prop_oneof![Just(0i64), 1i64..MAX_CYCLE_DELAY], 1..20),
    ) {
        let mut run = Run::new(nominal, depth, &jobs);
        let verdict = run.play(&delays, false);
        prop_assert!(verdict.is_ok(), "{}", verdict.unwrap_err());
    }

    #[test]
    fn a_reservation_moves_only_when_its_head_is_told(
        nominal in 4i64..12,
        depth in 1u32..4,
        jobs in prop::collection::vec(job_gen(true), 1..40),
        delays in prop::collection::vec(prop_oneof![Just(0i64), 1i64..MAX_CYCLE_DELAY], 1..20),
    ) {
        let mut run = Run::new(nominal, depth, &jobs);
        let verdict = run.play(&delays, true);
        prop_assert!(verdict.is_ok(), "{}", verdict.unwrap_err());
    }
}
