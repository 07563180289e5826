//! The simulation loop: the real engine driven in virtual time.
//!
//! ```text
//!  trace ──arrivals──▶ EventQueue ──(all events at t)──▶ Engine::schedule(t)
//!                         ▲                                     │
//!                         │  Start (admission write done)       │ admitted / preempted / evicted
//!                         │  Finish (run time elapsed)          ▼
//!                         │  EvictionDone (pods terminated) ◀── StateLane (API qps)
//!                         └──────────── Pacer (when the next cycle runs, how much it decides)
//! ```
//!
//! Cycles are paced as the controller paces them, by its own rules
//! ([`pacing`]): the events of 50 ms make one cycle, a cycle waits while
//! more than a second of state changes is queued for the writer, and
//! decides at most about two seconds of writes.
//!
//! Quota is the engine's: a workload holds it from the cycle that admits it
//! until it finishes or its eviction completes. Its pods run from the moment
//! the admission write goes through (later than the decision when
//! `--api-qps` throttles writes) for the trace's duration. A preempted
//! workload loses its progress, releases its quota after the eviction write
//! plus `--eviction-delay`, requeues and runs again from the start when
//! re-admitted.
//!
//! With nodes in the scenario (`spec.nodes`) the engine runs with
//! [`PlacementMode::Nodes`] and gets every node at the start: a workload
//! is admitted only where its pods fit, and holds its room on the nodes
//! (the engine's reservation: pods are never bound here) until it
//! finishes or its eviction completes. [`WaitClock`] splits every
//! workload's time pending into waiting for nodes and for quota.
//!
//! The scenario's Cohorts are given to the engine before the queues, and
//! the engine runs with the Trace's fair-sharing setting (`spec.fairSharing`,
//! on by default); every queue in a cohort has its weighted share sampled
//! as its usage changes ([`FairnessOutcome`]).
//!
//! Idle-GPU reclaim ([`super::idle`]) checks admitted workloads at its own
//! interval, before the events of that instant, and evicts through the
//! same path. With [`SimOptions::forecast`], every workload still pending
//! after the cycle at its arrival gets start-time estimates
//! ([`forecast`]).
//!
//! | file | what |
//! |------|------|
//! | `sim.rs` | the loop: each instant's idle check, events, cycle, samples |
//! | `book.rs` | each workload's state, record and held quota, its queue kept in step |
//! | `queues.rs` | each ClusterQueue's usage and counts, sampled |
//! | `forecast.rs` | start-time estimates |
//! | `pacing.rs` | when cycles run and writes are made, by the controller's rules |
//! | `result.rs` | the types a run is given and gives back |

mod book;
pub mod checkpoint;
mod declared;
pub mod forecast;
mod pacing;
mod queues;
mod result;
mod usage;

pub use declared::DeclaredRuntimes;
pub use forecast::{Estimate, ForecastOutcome};
pub use result::{
    BackfillBaseline, BudgetEvent, CohortQuota, Progress, QueueSeries, QueueUsage, Run, RunEnd, Sample, Scenario,
    SimOptions, SimResult, Slot, UsageOutcome, WorkloadRecord,
};
pub use usage::action_at;

use std::sync::Arc;

use anyhow::{Context, Result};
use sluice_scheduler::{Admission, Backfill, Engine, EngineConfig, PlacementMode, PodSetSpec, WorkloadSpec};

use super::clock::EventQueue;
use super::fairness::FairnessOutcome;
use super::idle::{IdleOutcome, Reclaimer};
use super::placement::{PlacementOutcome, WaitClock};
use super::trace::TraceWorkload;
use super::trace::profile::DEFAULT_IDLE_INTERVAL;
use super::units::Millis;
use book::{Book, State};
use forecast::Forecaster;
use pacing::{Pacer, StateLane};
use usage::UsageWatch;

#[derive(Debug, Clone, Copy)]
enum Event {
    Arrive(usize),
    /// The admission write went through; pods start.
    Start(usize, u32),
    Finish(usize, u32),
    /// The victim's pods are gone.
    EvictionDone(usize, u32),
    /// A serving object is removed (deleted by its owner).
    Remove(usize),
}

pub(crate) fn uid_of(i: usize) -> String {
    format!("w{i:08}")
}

pub(crate) fn index_of(uid: &str) -> Option<usize> {
    uid.strip_prefix('w')?.parse().ok()
}

/// Runs the scenario to completion: until no event is left (every workload
/// finished, or the rest can never be admitted). When a ClusterQueue has
/// `idleReclaim` and some workload a utilisation profile, the scenario is
/// run a second time without any `idleReclaim`, for the report's wait-time
/// comparison ([`IdleOutcome::baseline_waits`]); without profiles nothing
/// can be reclaimed, and that run would be this one. When a ClusterQueue
/// has `backfill`, it is run once more with no queue reserving
/// ([`SimResult::without_backfill`]).
pub fn run(scenario: &Scenario, opts: &SimOptions, progress: &mut dyn FnMut(Progress)) -> Result<SimResult> {
    let mut result = run_once(scenario, opts, progress, Variant::AS_WRITTEN)?;
    if result.idle.is_some() && !scenario.idle_reclaim.is_empty() {
        let waits = |records: &[WorkloadRecord]| {
            (records.iter().zip(&scenario.workloads))
                .map(|(rec, w)| rec.latest_start().map(|s| s - w.arrival))
                .collect()
        };
        let baseline = if scenario.workloads.iter().any(|w| w.utilization.is_some()) {
            let without = Variant {
                reclaim: false,
                ..Variant::AS_WRITTEN
            };
            waits(&run_once(scenario, opts, progress, without)?.records)
        } else {
            waits(&result.records)
        };
        if let Some(idle) = result.idle.as_mut() {
            idle.baseline_waits = Some(baseline);
        }
    }
    let reserving: Vec<String> = (scenario.cluster_queues.iter())
        .filter(|q| opts.backfill.unwrap_or(q.backfill) == Backfill::Reserve)
        .map(|q| q.name.clone())
        .collect();
    if !reserving.is_empty() {
        let without = Variant {
            backfill: false,
            ..Variant::AS_WRITTEN
        };
        let run = Box::new(run_once(scenario, opts, progress, without)?);
        result.without_backfill = Some(BackfillBaseline { reserving, run });
    }
    Ok(result)
}

/// A run of the scenario as written, or without one of its policies (for
/// the report's comparisons).
#[derive(Clone, Copy)]
struct Variant {
    /// Idle-GPU reclaim acts.
    reclaim: bool,
    /// ClusterQueues keep their `backfill`; else none reserves.
    backfill: bool,
}

impl Variant {
    const AS_WRITTEN: Variant = Variant {
        reclaim: true,
        backfill: true,
    };
}

fn run_once(
    scenario: &Scenario,
    opts: &SimOptions,
    progress: &mut dyn FnMut(Progress),
    variant: Variant,
) -> Result<SimResult> {
    let backfill = if variant.backfill {
        opts.backfill
    } else {
        Some(Backfill::None)
    };
    let mut fairness = FairnessOutcome::new(scenario);
    let mut book = Book::new(scenario);
    let idle_interval = (opts.idle_interval.or(scenario.idle_interval)).unwrap_or(DEFAULT_IDLE_INTERVAL);
    let mut watchers = Watchers::new(scenario, opts, variant.reclaim, idle_interval, &book.records);
    let metering = watchers.usage.is_some();
    let mut engine = engine_for(scenario, backfill, opts.backfill_depth, metering)?;
    let mut agenda = Agenda::new(scenario, opts);
    let total = scenario.workloads.len();
    let mut report = |now, done| progress(Progress { now, done, total });
    let (mut cycles, mut steps, mut now) = (0u64, 0u64, 0);
    // The last instant anything happened: the leftover events of a
    // deactivated workload (its finish) do not lengthen the run.
    let mut last: Millis = 0;
    while let Some(next) = agenda.next_time() {
        // 1. Idle checks come first at their instant, so that a cycle then
        //    already sees the workloads they evict.
        let checked = check_idle(next, scenario, &mut engine, &mut book, &mut agenda, &mut watchers)?;
        let t = checked.unwrap_or(next);
        now = t;
        // 2. Every event due by then.
        let due = apply_events(t, scenario, &mut engine, &mut book, &mut agenda, &mut watchers)?;
        if checked.is_some() || !due.left_over {
            last = t;
        }
        if due.need_cycle {
            agenda.pacer.changed(t);
        }
        // 3. A scheduling cycle when one is due, within its budget.
        if let Some(budget) = agenda.pacer.due(t, &mut agenda.lane) {
            cycles += 1;
            run_cycle(t, budget, scenario, &mut engine, &mut book, &mut agenda, &mut watchers)?;
        }
        // 4. A sample of every queue that changed.
        book.queues.record_touched(t, fairness.as_mut(), &engine);
        steps += 1;
        if steps.is_multiple_of(512) {
            report(t, book.done);
        }
    }
    report(now, book.done);

    book.close_running();
    let end = book.queues.last_sample().unwrap_or(0).max(last);
    Ok(SimResult {
        workloads: scenario.workloads.clone(),
        cohort_quota: cohort_quota(&scenario.cohorts),
        records: book.records,
        queues: book.queues.into_series(),
        end,
        cycles,
        api_writes: agenda.lane.writes,
        write_delay_total: agenda.lane.delay_total,
        write_delay_max: agenda.lane.delay_max,
        idle: idle_outcome(scenario, variant.reclaim, idle_interval, watchers.idle),
        forecast: watchers.forecast.map(Forecaster::into_outcome),
        placement: placement_outcome(scenario, book.waits, end),
        fairness,
        without_backfill: None,
        usage: watchers.usage.map(|u| u.into_outcome(end)),
    })
}

/// The engine with the scenario's flavors, cohorts, nodes, ClusterQueues
/// and LocalQueues, in that order (a cohort before the queues in it). With
/// nodes, pods must fit on them too.
/// The engine of the scenario, with every ClusterQueue's `backfill` set
/// to `backfill`, and its depth to `depth`, when given; recording its
/// changes of held quota with `metering`.
fn engine_for(scenario: &Scenario, backfill: Option<Backfill>, depth: Option<u32>, metering: bool) -> Result<Engine> {
    let placement = if scenario.nodes.is_empty() {
        PlacementMode::QuotaOnly
    } else {
        PlacementMode::Nodes
    };
    let mut engine = Engine::with_config(EngineConfig {
        placement,
        fair_sharing: scenario.fair_sharing,
        metering,
        ..EngineConfig::default()
    });
    engine
        .set_transformations(&scenario.transformations)
        .context("engine refused the resource transformations")?;
    for f in &scenario.flavors {
        engine.upsert_flavor(f.clone());
    }
    for c in &scenario.cohorts {
        engine
            .upsert_cohort(c.clone())
            .with_context(|| format!("engine refused cohort {}", c.name))?;
    }
    for node in &scenario.nodes {
        engine.upsert_node(node.spec.clone());
    }
    for cq in &scenario.cluster_queues {
        let mut cq = cq.clone();
        cq.backfill = backfill.unwrap_or(cq.backfill);
        cq.backfill_depth = depth.unwrap_or(cq.backfill_depth);
        engine.upsert_cluster_queue(cq);
    }
    for lq in &scenario.local_queues {
        engine.upsert_local_queue(lq.clone());
    }
    Ok(engine)
}

/// What is to happen and when: the events ahead, the API writes that
/// delay their effects, and the next cycle.
struct Agenda {
    events: EventQueue<Event>,
    lane: StateLane,
    pacer: Pacer,
    eviction_delay: Millis,
    finish_lag: Millis,
    declared: DeclaredRuntimes,
}

impl Agenda {
    /// Every workload's arrival ahead.
    fn new(scenario: &Scenario, opts: &SimOptions) -> Self {
        let mut events = EventQueue::new();
        for (i, w) in scenario.workloads.iter().enumerate() {
            events.push(w.arrival, Event::Arrive(i));
            if w.serving {
                events.push(w.arrival.saturating_add(w.duration), Event::Remove(i));
            }
        }
        Agenda {
            events,
            lane: StateLane::new(opts.api_qps, opts.api_burst, opts.api_latency),
            pacer: Pacer::new(opts.api_qps, opts.api_burst, opts.coalesce),
            eviction_delay: opts.eviction_delay,
            finish_lag: opts.finish_lag.max(0),
            declared: opts.declared_runtimes,
        }
    }

    /// When something is next to happen: an event or a cycle.
    fn next_time(&self) -> Option<Millis> {
        match (self.events.peek_time(), self.pacer.cycle_at()) {
            (Some(e), Some(c)) => Some(e.min(c)),
            (e, c) => e.or(c),
        }
    }

    /// `i`'s eviction (its `epoch`) decided at `t`, carried out `runs_on`
    /// later (a notice): one write, then its pods take the eviction delay
    /// to go. Returns when its quota is free.
    /// Without pods (an eviction delay of 0) the quota is free at once, as
    /// the controller completes the eviction of a workload without Jobs
    /// at its next cycle; the write follows in its place in the lane, and
    /// everything admitted with that quota is written after it.
    fn eviction(&mut self, i: usize, epoch: u32, t: Millis, runs_on: Millis) -> Millis {
        // With a notice this write is the notice's; the suspension's, at
        // its end, is not modelled (it delays no admission).
        let written = self.lane.write(t);
        let free_at = if self.eviction_delay == 0 && runs_on == 0 {
            t
        } else {
            written + runs_on + self.eviction_delay
        };
        self.events.push(free_at, Event::EvictionDone(i, epoch));
        free_at
    }
}

/// What follows each workload's life besides its [`Book`], when the run
/// has it: idle-GPU reclaim, start-time estimates, usage over time.
struct Watchers {
    idle: Option<Reclaimer>,
    forecast: Option<Forecaster>,
    usage: Option<UsageWatch>,
}

impl Watchers {
    /// Idle-GPU reclaim when the run reclaims and the scenario has it;
    /// estimates when asked for, in the run reported (`reclaim`), not in
    /// the comparison run.
    fn new(
        scenario: &Scenario,
        opts: &SimOptions,
        reclaim: bool,
        idle_interval: Millis,
        records: &[WorkloadRecord],
    ) -> Self {
        Watchers {
            idle: reclaim
                .then(|| Reclaimer::new(scenario, idle_interval, opts.requeue_limit))
                .flatten(),
            forecast: (opts.forecast && reclaim).then(|| Forecaster::new(&scenario.workloads, records)),
            usage: UsageWatch::new(scenario, opts),
        }
    }

    fn arrived(&mut self, i: usize) {
        if let Some(f) = self.forecast.as_mut() {
            f.arrived(i);
        }
    }

    fn admitted(&mut self, i: usize, w: &TraceWorkload, cluster_queue: &Arc<str>, t: Millis, starts_at: Millis) {
        if let Some(idle) = self.idle.as_mut() {
            idle.admitted(i, w, cluster_queue, t);
        }
        if let Some(f) = self.forecast.as_mut() {
            f.admitted(i, t, starts_at);
        }
    }

    fn finished(&mut self, i: usize, t: Millis, started: Option<Millis>) {
        if let (Some(f), Some(started)) = (self.forecast.as_mut(), started) {
            f.finished(i, t - started);
        }
        if let Some(idle) = self.idle.as_mut() {
            idle.released(i);
        }
    }

    fn evicting(&mut self, i: usize, free_at: Millis) {
        if let Some(idle) = self.idle.as_mut() {
            idle.released(i);
        }
        if let Some(f) = self.forecast.as_mut() {
            f.evicting(i, free_at);
        }
    }

    fn is_deactivated(&self, i: usize) -> bool {
        self.idle.as_ref().is_some_and(|d| d.is_deactivated(i))
    }

    /// Before a cycle at `t`: budgets and usage histories given.
    fn before_cycle(&mut self, engine: &mut Engine, t: Millis) {
        if let Some(u) = self.usage.as_mut() {
            u.govern(engine, t);
        }
    }

    /// After the events or the cycle of `t`: what they changed charged.
    fn charge(&mut self, engine: &mut Engine, t: Millis) {
        if let Some(u) = self.usage.as_mut() {
            u.charge(engine, t);
        }
    }

    fn after_cycle(&mut self, engine: &mut Engine, t: Millis) {
        self.charge(engine, t);
        if let Some(f) = self.forecast.as_mut() {
            f.after_cycle(engine, t);
        }
    }

    /// When a budget that holds a queue back is next to be looked at.
    fn next_check(&self, t: Millis) -> Option<Millis> {
        self.usage.as_ref().and_then(|u| u.next_check(t))
    }
}

/// Idle-GPU reclaim's check, when one is due by `next`: evicts what it
/// reclaims, at the check's instant, which it returns.
fn check_idle(
    next: Millis,
    scenario: &Scenario,
    engine: &mut Engine,
    book: &mut Book,
    agenda: &mut Agenda,
    watchers: &mut Watchers,
) -> Result<Option<Millis>> {
    let Some(t) = watchers.idle.as_ref().and_then(Reclaimer::due).filter(|&c| c <= next) else {
        return Ok(None);
    };
    let reclaimed = (watchers.idle.as_mut())
        .map(|d| d.check(t, engine, &scenario.workloads, &book.records))
        .unwrap_or_default();
    for i in reclaimed {
        engine
            .evict(&uid_of(i))
            .with_context(|| format!("engine refused to evict idle {}", scenario.workloads[i].name))?;
        begin_eviction(i, RunEnd::IdleReclaimed, t, scenario, book, agenda, watchers);
        // Evictions to write, a waiter to admit: a cycle now.
        agenda.pacer.cycle_within(t);
    }
    Ok(Some(t))
}

/// What the events of one instant asked for.
struct Due {
    need_cycle: bool,
    /// Every event was a leftover of a deactivated workload (or none came).
    left_over: bool,
}

/// Applies every event due by `t`, each if it still applies to its
/// workload.
fn apply_events(
    t: Millis,
    scenario: &Scenario,
    engine: &mut Engine,
    book: &mut Book,
    agenda: &mut Agenda,
    watchers: &mut Watchers,
) -> Result<Due> {
    let mut due = Due {
        need_cycle: false,
        left_over: true,
    };
    while let Some(ev) = agenda.events.pop_due(t) {
        due.left_over &= matches!(ev, Event::Start(i, _) | Event::Finish(i, _) if book.records[i].deactivated);
        due.need_cycle |= match ev {
            Event::Arrive(i) => {
                let spec = workload_spec(i, &scenario.workloads[i], agenda.declared);
                arrive(i, t, spec, engine, book, watchers)
            }
            Event::Start(i, e) if book.is_current(i, e, State::Admitted) => {
                book.started(i, t);
                // A serving object runs until it is removed.
                if !scenario.workloads[i].serving {
                    let ends = t + book.left(i, scenario.workloads[i].duration) + agenda.finish_lag;
                    agenda.events.push(ends, Event::Finish(i, e));
                }
                false
            }
            Event::Remove(i) => remove(i, t, &scenario.workloads[i], engine, book, watchers)?,
            Event::Finish(i, e) if book.is_current(i, e, State::Admitted) => {
                finish(i, t, &scenario.workloads[i], engine, book, watchers)?;
                true
            }
            Event::EvictionDone(i, e) if book.is_current(i, e, State::Evicting) => {
                eviction_done(i, t, &scenario.workloads[i], engine, book, watchers)?;
                true
            }
            Event::Start(..) | Event::Finish(..) | Event::EvictionDone(..) => false,
        };
    }
    watchers.charge(engine, t);
    Ok(due)
}

/// `w` (workload `i`) arrives at `t`: pending in its queue, or rejected
/// by the engine. Returns whether it is pending.
fn arrive(
    i: usize,
    t: Millis,
    spec: WorkloadSpec,
    engine: &mut Engine,
    book: &mut Book,
    watchers: &mut Watchers,
) -> bool {
    match engine.add_workload(spec) {
        Ok(()) => {
            book.pending(i, t);
            watchers.arrived(i);
            true
        }
        Err(e) => {
            book.rejected(i, e.to_string());
            false
        }
    }
}

/// The engine's workload for trace workload `i`.
fn workload_spec(i: usize, w: &TraceWorkload, declared: DeclaredRuntimes) -> WorkloadSpec {
    WorkloadSpec {
        uid: uid_of(i),
        name: w.name.clone(),
        local_queue: w.local_queue.clone(),
        priority: w.priority,
        queue_order_time: w.arrival,
        pod_sets: (w.pod_sets.iter())
            .map(|ps| PodSetSpec {
                name: ps.name.clone(),
                count: ps.count,
                requests: ps.requests.clone(),
                node_selector: ps.node_selector.clone(),
                require_single_domain: w.require_single_domain.contains(&ps.name),
                min_count: w.min_counts.get(&ps.name).copied(),
                ..PodSetSpec::default()
            })
            .collect(),
        expected_runtime: declared.of(i, w),
    }
}

/// `w` (workload `i`) ran its duration: done, its quota free.
fn finish(
    i: usize,
    t: Millis,
    w: &TraceWorkload,
    engine: &mut Engine,
    book: &mut Book,
    watchers: &mut Watchers,
) -> Result<()> {
    engine
        .finish(&uid_of(i))
        .with_context(|| format!("engine refused to finish {}", w.name))?;
    let started = book.finished(i, t);
    watchers.finished(i, t, started);
    Ok(())
}

/// Serving object `w` (workload `i`) is removed at `t`: running, it
/// finishes (its quota is free); waiting, it leaves its queue; being
/// evicted, it leaves once its pods are gone. Whether a cycle is due.
fn remove(
    i: usize,
    t: Millis,
    w: &TraceWorkload,
    engine: &mut Engine,
    book: &mut Book,
    watchers: &mut Watchers,
) -> Result<bool> {
    match book.state(i) {
        State::Admitted => finish(i, t, w, engine, book, watchers).map(|()| true),
        State::Pending => {
            engine
                .remove_workload(&uid_of(i))
                .with_context(|| format!("engine refused to remove {}", w.name))?;
            book.removed(i);
            Ok(false)
        }
        State::Evicting => {
            book.remove_when_gone(i);
            Ok(false)
        }
        State::NotArrived | State::Done => Ok(false),
    }
}

/// `w`'s (workload `i`'s) pods are gone: its quota is free, and it is
/// pending again, or out of the queue for good when idle reclaim
/// deactivated it (or its owner removed it).
fn eviction_done(
    i: usize,
    t: Millis,
    w: &TraceWorkload,
    engine: &mut Engine,
    book: &mut Book,
    watchers: &Watchers,
) -> Result<()> {
    if watchers.is_deactivated(i) || book.removing(i) {
        engine
            .remove_workload(&uid_of(i))
            .with_context(|| format!("engine refused to remove {}", w.name))?;
        if book.removing(i) {
            book.removed(i);
        } else {
            book.deactivated(i);
        }
    } else {
        engine
            .eviction_complete(&uid_of(i), t)
            .with_context(|| format!("engine refused eviction of {}", w.name))?;
        book.requeued(i, t);
    }
    Ok(())
}

/// One scheduling cycle at `t` making at most `budget` decisions, and its
/// decisions carried out: admissions (their pods start once the write is
/// through), evictions begun, new reasons for waiting, the next cycle.
fn run_cycle(
    t: Millis,
    budget: usize,
    scenario: &Scenario,
    engine: &mut Engine,
    book: &mut Book,
    agenda: &mut Agenda,
    watchers: &mut Watchers,
) -> Result<()> {
    watchers.before_cycle(engine, t);
    let cycle = engine.schedule_within(t, budget);
    for a in &cycle.admitted {
        admit(a, t, scenario, book, agenda, watchers)?;
    }
    let victims = (cycle.preempted.iter())
        .map(|p| (&p.victim, RunEnd::Preempted))
        .chain(cycle.evicted.iter().map(|e| (&e.uid, RunEnd::Evicted)));
    for (uid, why) in victims {
        let Some(i) = index_of(uid) else { continue };
        if book.is_admitted(i) {
            begin_eviction(i, why, t, scenario, book, agenda, watchers);
        }
    }
    book.explained(&cycle.pending_changed, t);
    watchers.after_cycle(engine, t);
    let decided = !(cycle.admitted.is_empty() && cycle.preempted.is_empty() && cycle.evicted.is_empty());
    agenda.pacer.after_cycle(cycle.next_wakeup, t, decided);
    // A budget that holds a queue back is looked at again while work is left.
    if let Some(at) = watchers.next_check(t).filter(|_| book.done < scenario.workloads.len()) {
        agenda.pacer.cycle_within(at);
    }
    Ok(())
}

/// Admission `a` at `t`: its quota counted in its queue, one write, after
/// which its pods start.
fn admit(
    a: &Admission,
    t: Millis,
    scenario: &Scenario,
    book: &mut Book,
    agenda: &mut Agenda,
    watchers: &mut Watchers,
) -> Result<()> {
    let Some(i) = index_of(&a.uid) else { return Ok(()) };
    let epoch = book.admitted(i, t, a)?;
    let starts_at = agenda.lane.write(t);
    watchers.admitted(i, &scenario.workloads[i], &a.cluster_queue, t, starts_at);
    agenda.events.push(starts_at, Event::Start(i, epoch));
    Ok(())
}

/// Ends workload `i`'s run at `t` (`why`): a victim of preemption whose
/// queue gives notice runs on for it (or until it saved its state); then
/// one eviction write, its pods take the eviction delay to go, and its
/// quota is free. What the run keeps follows [`checkpoint`].
fn begin_eviction(
    i: usize,
    why: RunEnd,
    t: Millis,
    scenario: &Scenario,
    book: &mut Book,
    agenda: &mut Agenda,
    watchers: &mut Watchers,
) {
    let w = &scenario.workloads[i];
    let notice = match why {
        RunEnd::Preempted => (scenario.notice.get(&*book.records[i].cluster_queue))
            .copied()
            .unwrap_or(0),
        _ => 0,
    };
    let saving = checkpoint::Saving {
        interval: w.checkpoint_interval,
        on_notice: w.checkpoint_on_notice,
    };
    let left = book.left(i, w.duration);
    let victim = match book.run_started(i) {
        // A serving object has no work to lose: what it served is done.
        Some(started) if w.serving => checkpoint::Victim {
            runs_on: 0,
            kept: t - started,
        },
        Some(started) => checkpoint::preempted(saving, notice, started, left, t),
        // Chosen before its pods started: nothing to run on or keep.
        None => checkpoint::Victim { runs_on: 0, kept: 0 },
    };
    let epoch = book.evicting(i, why, t, victim);
    let free_at = agenda.eviction(i, epoch, t, victim.runs_on);
    watchers.evicting(i, free_at);
}

fn idle_outcome(scenario: &Scenario, reclaim: bool, interval: Millis, idle: Option<Reclaimer>) -> Option<IdleOutcome> {
    let followed = !scenario.idle_reclaim.is_empty() || scenario.workloads.iter().any(|w| w.utilization.is_some());
    (reclaim && followed).then(|| IdleOutcome {
        interval,
        policies: scenario.idle_reclaim.clone(),
        events: idle.map(Reclaimer::into_events).unwrap_or_default(),
        baseline_waits: None,
    })
}

fn placement_outcome(scenario: &Scenario, waits: WaitClock, end: Millis) -> Option<PlacementOutcome> {
    (!scenario.nodes.is_empty()).then(|| PlacementOutcome {
        nodes: scenario.nodes.clone(),
        topology_keys: (scenario.flavors.iter())
            .filter_map(|f| Some((f.name.clone(), f.topology_key.clone()?)))
            .collect(),
        waits: waits.finish(end),
    })
}

/// The Cohorts' own quota, per flavor and resource.
fn cohort_quota(cohorts: &[sluice_scheduler::CohortSpec]) -> Vec<CohortQuota> {
    cohorts
        .iter()
        .flat_map(|c| {
            c.resource_groups.iter().flat_map(move |g| {
                g.flavors.iter().flat_map(move |f| {
                    f.resources.iter().map(move |r| CohortQuota {
                        cohort: c.name.clone(),
                        flavor: f.flavor.clone(),
                        resource: r.resource.clone(),
                        nominal: r.nominal,
                    })
                })
            })
        })
        .collect()
}
