//! The simulation loop: the real engine driven in virtual time.
//!
//! ```text
//!  trace ──arrivals──▶ EventQueue ──(all events at t)──▶ Engine::schedule(t)
//!                         ▲                                     │
//!                         │  Start (admission write done)       │ admitted / preempted / evicted
//!                         │  Finish (run time elapsed)          ▼
//!                         │  EvictionDone (pods terminated) ◀── WriteLimiter (API qps)
//!                         └─ Wakeup (engine's next_wakeup)
//! ```
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
//! ([`forecast`]). The types a run is given and gives back are in
//! `result.rs`.

pub mod forecast;
mod result;

pub use forecast::{Estimate, ForecastOutcome};
pub use result::{
    CohortQuota, Progress, QueueSeries, Run, RunEnd, Sample, Scenario, SimOptions, SimResult, Slot, WorkloadRecord,
};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::{Context, Result};
use sluice_scheduler::{Engine, EngineConfig, PlacementMode, PodSetSpec, WorkloadSpec};

use super::clock::{EventQueue, WriteLimiter};
use super::fairness::FairnessOutcome;
use super::idle::{IdleOutcome, Reclaimer};
use super::placement::{PlacementOutcome, WaitClock};
use super::trace::profile::DEFAULT_IDLE_INTERVAL;
use super::units::Millis;
use forecast::Forecaster;

#[derive(Debug, Clone, Copy)]
enum Event {
    Arrive(usize),
    /// The admission write went through; pods start.
    Start(usize, u32),
    Finish(usize, u32),
    /// The victim's pods are gone.
    EvictionDone(usize, u32),
    Wakeup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotArrived,
    Pending,
    Admitted,
    Evicting,
    Done,
}

pub(crate) fn uid_of(i: usize) -> String {
    format!("w{i:08}")
}

pub(crate) fn index_of(uid: &str) -> Option<usize> {
    uid.strip_prefix('w')?.parse().ok()
}

struct QueueState {
    series: QueueSeries,
    slot_index: HashMap<(String, String), usize>,
    used: Vec<i64>,
    pending: u32,
    admitted: u32,
}

impl QueueState {
    fn record(&mut self, at: Millis) {
        let sample = Sample {
            at,
            used: self.used.clone().into_boxed_slice(),
            pending: self.pending,
            admitted: self.admitted,
        };
        match self.series.samples.last_mut() {
            Some(last) if last.at == at => *last = sample,
            Some(last)
                if last.used == sample.used && last.pending == sample.pending && last.admitted == sample.admitted => {}
            _ => self.series.samples.push(sample),
        }
    }
}

/// Runs the scenario to completion: until no event is left (every workload
/// finished, or the rest can never be admitted). When a ClusterQueue has
/// `idleReclaim` and some workload a utilisation profile, the scenario is
/// run a second time without any `idleReclaim`, for the report's wait-time
/// comparison ([`IdleOutcome::baseline_waits`]); without profiles nothing
/// can be reclaimed, and that run would be this one.
pub fn run(scenario: &Scenario, opts: &SimOptions, progress: &mut dyn FnMut(Progress)) -> Result<SimResult> {
    let mut result = run_once(scenario, opts, progress, true)?;
    if result.idle.is_some() && !scenario.idle_reclaim.is_empty() {
        let waits = |records: &[WorkloadRecord]| {
            (records.iter().zip(&scenario.workloads))
                .map(|(rec, w)| rec.latest_start().map(|s| s - w.arrival))
                .collect()
        };
        let baseline = if scenario.workloads.iter().any(|w| w.utilization.is_some()) {
            waits(&run_once(scenario, opts, progress, false)?.records)
        } else {
            waits(&result.records)
        };
        if let Some(idle) = result.idle.as_mut() {
            idle.baseline_waits = Some(baseline);
        }
    }
    Ok(result)
}

fn run_once(
    scenario: &Scenario,
    opts: &SimOptions,
    progress: &mut dyn FnMut(Progress),
    reclaim: bool,
) -> Result<SimResult> {
    // Nodes, when the scenario has any: then pods must fit on them too.
    let placement = if scenario.nodes.is_empty() {
        PlacementMode::QuotaOnly
    } else {
        PlacementMode::Nodes
    };
    let mut engine = Engine::with_config(EngineConfig {
        placement,
        fair_sharing: scenario.fair_sharing,
        ..EngineConfig::default()
    });
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
    let mut queues: Vec<QueueState> = Vec::new();
    let mut queue_index: HashMap<String, usize> = HashMap::new();
    for cq in &scenario.cluster_queues {
        engine.upsert_cluster_queue(cq.clone());
        let mut slots = Vec::new();
        let mut slot_index = HashMap::new();
        for rg in &cq.resource_groups {
            for fq in &rg.flavors {
                for rq in &fq.resources {
                    slot_index.insert((fq.flavor.clone(), rq.resource.clone()), slots.len());
                    slots.push(Slot {
                        flavor: fq.flavor.clone(),
                        resource: rq.resource.clone(),
                        nominal: rq.nominal,
                    });
                }
            }
        }
        queue_index.insert(cq.name.clone(), queues.len());
        queues.push(QueueState {
            used: vec![0; slots.len()],
            series: QueueSeries {
                name: cq.name.clone(),
                cohort: cq.cohort.clone(),
                slots,
                samples: Vec::new(),
            },
            slot_index,
            pending: 0,
            admitted: 0,
        });
    }
    for q in &mut queues {
        q.record(0);
    }
    let mut fairness = FairnessOutcome::new(scenario);
    let mut lq_to_cq: HashMap<&str, &str> = HashMap::new();
    for lq in &scenario.local_queues {
        engine.upsert_local_queue(lq.clone());
        lq_to_cq.insert(lq.key.as_str(), lq.cluster_queue.as_str());
    }

    let n = scenario.workloads.len();
    let mut records: Vec<WorkloadRecord> = scenario
        .workloads
        .iter()
        .map(|w| WorkloadRecord {
            cluster_queue: Arc::from(lq_to_cq.get(w.local_queue.as_str()).copied().unwrap_or("")),
            runs: Vec::new(),
            preempted: 0,
            evicted: 0,
            rejected: None,
            last_pending: None,
            deactivated: false,
        })
        .collect();
    let mut state = vec![State::NotArrived; n];
    let mut waits = WaitClock::new(n);
    let mut epoch = vec![0u32; n];
    // What each admitted workload holds: (queue, slot, amount).
    let mut held: Vec<Vec<(usize, usize, i64)>> = vec![Vec::new(); n];

    let mut events: EventQueue<Event> = EventQueue::new();
    for (i, w) in scenario.workloads.iter().enumerate() {
        events.push(w.arrival, Event::Arrive(i));
    }
    let mut limiter = WriteLimiter::new(opts.api_qps, opts.api_burst);
    let mut wakeups: BTreeSet<Millis> = BTreeSet::new();
    let mut touched: BTreeSet<usize> = BTreeSet::new();
    let mut done = 0usize;
    let mut cycles = 0u64;
    let mut now: Millis = 0;
    // The last instant anything happened: the leftover events of a
    // deactivated workload (its finish) do not lengthen the run.
    let mut last: Millis = 0;
    let mut steps = 0u64;
    let idle_interval = opts
        .idle_interval
        .or(scenario.idle_interval)
        .unwrap_or(DEFAULT_IDLE_INTERVAL);
    let mut idle = if reclaim {
        Reclaimer::new(scenario, idle_interval, opts.requeue_limit)
    } else {
        None
    };
    // Estimates in the run reported, not in the comparison run.
    let mut forecaster = (opts.forecast && reclaim).then(|| Forecaster::new(&scenario.workloads, &records));

    // Ends workload `i`'s run at `t` (`why`): one eviction write, then its
    // pods take the eviction delay to go, then its quota is free.
    macro_rules! begin_eviction {
        ($i:expr, $why:expr, $t:expr) => {{
            let (i, why, t): (usize, RunEnd, Millis) = ($i, $why, $t);
            epoch[i] += 1;
            state[i] = State::Evicting;
            if let Some(run) = records[i].runs.last_mut() {
                run.ended_at = Some(t);
                run.end = why;
            }
            match why {
                RunEnd::Evicted => records[i].evicted += 1,
                RunEnd::Preempted => records[i].preempted += 1,
                _ => {}
            }
            if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                queues[q].admitted = queues[q].admitted.saturating_sub(1);
                touched.insert(q);
            }
            if let Some(idle) = idle.as_mut() {
                idle.released(i);
            }
            let write_at = limiter.acquire(t);
            events.push(write_at + opts.eviction_delay, Event::EvictionDone(i, epoch[i]));
            if let Some(f) = forecaster.as_mut() {
                f.evicting(i, write_at + opts.eviction_delay);
            }
        }};
    }

    while let Some(mut t) = events.peek_time() {
        let mut need_cycle = false;
        // Idle checks come first at their instant, so that a cycle then
        // already sees the workloads they evict.
        let check = idle.as_ref().and_then(Reclaimer::due).filter(|&c| c <= t);
        if let Some(c) = check {
            t = c;
            let reclaimed = idle
                .as_mut()
                .map(|d| d.check(t, &engine, &scenario.workloads, &records))
                .unwrap_or_default();
            for i in reclaimed {
                engine
                    .evict(&uid_of(i))
                    .with_context(|| format!("engine refused to evict idle {}", scenario.workloads[i].name))?;
                begin_eviction!(i, RunEnd::IdleReclaimed, t);
            }
        }
        now = t;
        let mut left_over = check.is_none();
        while let Some(ev) = events.pop_due(t) {
            left_over &= matches!(ev, Event::Start(i, _) | Event::Finish(i, _) if records[i].deactivated);
            match ev {
                Event::Arrive(i) => {
                    let w = &scenario.workloads[i];
                    let spec = WorkloadSpec {
                        uid: uid_of(i),
                        name: w.name.clone(),
                        local_queue: w.local_queue.clone(),
                        priority: w.priority,
                        queue_order_time: w.arrival,
                        pod_sets: w
                            .pod_sets
                            .iter()
                            .map(|ps| PodSetSpec {
                                name: ps.name.clone(),
                                count: ps.count,
                                requests: ps.requests.clone(),
                                require_single_domain: w.require_single_domain.contains(&ps.name),
                                min_count: w.min_counts.get(&ps.name).copied(),
                                ..PodSetSpec::default()
                            })
                            .collect(),
                    };
                    match engine.add_workload(spec) {
                        Ok(()) => {
                            state[i] = State::Pending;
                            waits.pending(i, t);
                            if let Some(f) = forecaster.as_mut() {
                                f.arrived(i);
                            }
                            if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                                queues[q].pending += 1;
                                touched.insert(q);
                            }
                            need_cycle = true;
                        }
                        Err(e) => {
                            state[i] = State::Done;
                            done += 1;
                            records[i].rejected = Some(e.to_string());
                        }
                    }
                }
                Event::Start(i, e) => {
                    if epoch[i] == e && state[i] == State::Admitted {
                        let run = records[i].runs.last_mut().expect("admitted workload has a run");
                        run.started_at = Some(t);
                        events.push(t + scenario.workloads[i].duration, Event::Finish(i, e));
                    }
                }
                Event::Finish(i, e) => {
                    if epoch[i] == e && state[i] == State::Admitted {
                        engine
                            .finish(&uid_of(i))
                            .with_context(|| format!("engine refused to finish {}", scenario.workloads[i].name))?;
                        let run = records[i].runs.last_mut().expect("admitted workload has a run");
                        run.ended_at = Some(t);
                        run.end = RunEnd::Finished;
                        if let (Some(f), Some(started)) = (forecaster.as_mut(), run.started_at) {
                            f.finished(i, t - started);
                        }
                        release(&mut queues, &mut held[i], &mut touched);
                        if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                            queues[q].admitted = queues[q].admitted.saturating_sub(1);
                            touched.insert(q);
                        }
                        if let Some(idle) = idle.as_mut() {
                            idle.released(i);
                        }
                        state[i] = State::Done;
                        done += 1;
                        need_cycle = true;
                    }
                }
                Event::EvictionDone(i, e) => {
                    if epoch[i] == e
                        && state[i] == State::Evicting
                        && idle.as_ref().is_some_and(|d| d.is_deactivated(i))
                    {
                        // Deactivated: out of the queue for good.
                        engine
                            .remove_workload(&uid_of(i))
                            .with_context(|| format!("engine refused to remove {}", scenario.workloads[i].name))?;
                        release(&mut queues, &mut held[i], &mut touched);
                        records[i].deactivated = true;
                        state[i] = State::Done;
                        done += 1;
                        need_cycle = true;
                    } else if epoch[i] == e && state[i] == State::Evicting {
                        engine
                            .eviction_complete(&uid_of(i), t)
                            .with_context(|| format!("engine refused eviction of {}", scenario.workloads[i].name))?;
                        release(&mut queues, &mut held[i], &mut touched);
                        state[i] = State::Pending;
                        waits.pending(i, t);
                        if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                            queues[q].pending += 1;
                            touched.insert(q);
                        }
                        need_cycle = true;
                    }
                }
                Event::Wakeup => {
                    wakeups.remove(&t);
                    need_cycle = true;
                }
            }
        }
        if !left_over {
            last = t;
        }
        if need_cycle {
            cycles += 1;
            let cycle = engine.schedule(t);
            for a in &cycle.admitted {
                let Some(i) = index_of(&a.uid) else { continue };
                epoch[i] += 1;
                state[i] = State::Admitted;
                waits.admitted(i, t);
                let q = *queue_index
                    .get(&*a.cluster_queue)
                    .with_context(|| format!("admitted into unknown queue {}", a.cluster_queue))?;
                records[i].cluster_queue = a.cluster_queue.clone();
                let qs = &mut queues[q];
                qs.pending = qs.pending.saturating_sub(1);
                qs.admitted += 1;
                let mut flavors: Vec<String> = Vec::new();
                for ps in a.pod_sets.iter() {
                    for (resource, amount) in &ps.usage {
                        let Some(flavor) = ps.flavors.get(resource) else {
                            continue;
                        };
                        if !flavors.contains(flavor) {
                            flavors.push(flavor.clone());
                        }
                        if let Some(&slot) = qs.slot_index.get(&(flavor.clone(), resource.clone())) {
                            qs.used[slot] += amount;
                            held[i].push((q, slot, *amount));
                        }
                    }
                }
                touched.insert(q);
                let write_at = limiter.acquire(t);
                records[i].runs.push(Run {
                    admitted_at: t,
                    started_at: None,
                    ended_at: None,
                    end: RunEnd::Running,
                    borrowing: a.borrowing,
                    flavors,
                });
                records[i].last_pending = None;
                if let Some(idle) = idle.as_mut() {
                    idle.admitted(i, &scenario.workloads[i], &a.cluster_queue, t);
                }
                if let Some(f) = forecaster.as_mut() {
                    f.admitted(i, t, write_at);
                }
                events.push(write_at, Event::Start(i, epoch[i]));
            }
            let victims = cycle
                .preempted
                .iter()
                .map(|p| (&p.victim, RunEnd::Preempted))
                .chain(cycle.evicted.iter().map(|e| (&e.uid, RunEnd::Evicted)));
            for (uid, why) in victims {
                let Some(i) = index_of(uid) else { continue };
                if state[i] != State::Admitted {
                    continue;
                }
                begin_eviction!(i, why, t);
            }
            for (uid, explanation) in &cycle.pending_changed {
                if let Some(i) = index_of(uid) {
                    records[i].last_pending = Some(sluice_convert::text::explanation(explanation));
                    waits.explained(i, t, explanation);
                }
            }
            if let Some(f) = forecaster.as_mut() {
                f.after_cycle(&engine, t);
            }
            // `w == t`: work was requeued during the cycle; one more cycle at
            // the same instant (the set keeps it to one).
            if let Some(w) = cycle.next_wakeup
                && w >= t
                && wakeups.insert(w)
            {
                events.push(w, Event::Wakeup);
            }
        }
        for q in std::mem::take(&mut touched) {
            queues[q].record(t);
            if let Some(f) = fairness.as_mut() {
                f.record(q, &queues[q].series.name, t, &engine);
            }
        }
        steps += 1;
        if steps.is_multiple_of(512) {
            progress(Progress { now: t, done, total: n });
        }
    }
    progress(Progress { now, done, total: n });

    // Anything still admitted when events ran out cannot happen (every
    // admission schedules its finish), but keep the record honest.
    for (i, s) in state.iter().enumerate() {
        if *s == State::Admitted
            && let Some(run) = records[i].runs.last_mut()
        {
            run.end = RunEnd::Running;
        }
    }
    let end = queues
        .iter()
        .filter_map(|q| q.series.samples.last().map(|s| s.at))
        .max()
        .unwrap_or(0)
        .max(last);
    Ok(SimResult {
        workloads: scenario.workloads.clone(),
        cohort_quota: cohort_quota(&scenario.cohorts),
        records,
        queues: queues.into_iter().map(|q| q.series).collect(),
        end,
        cycles,
        api_writes: limiter.writes,
        write_delay_total: limiter.delay_total,
        write_delay_max: limiter.delay_max,
        idle: (reclaim
            && (!scenario.idle_reclaim.is_empty() || scenario.workloads.iter().any(|w| w.utilization.is_some())))
        .then(|| IdleOutcome {
            interval: idle_interval,
            policies: scenario.idle_reclaim.clone(),
            events: idle.map(Reclaimer::into_events).unwrap_or_default(),
            baseline_waits: None,
        }),
        forecast: forecaster.map(Forecaster::into_outcome),
        placement: (!scenario.nodes.is_empty()).then(|| PlacementOutcome {
            nodes: scenario.nodes.clone(),
            topology_keys: (scenario.flavors.iter())
                .filter_map(|f| Some((f.name.clone(), f.topology_key.clone()?)))
                .collect(),
            waits: waits.finish(end),
        }),
        fairness,
    })
}

fn release(queues: &mut [QueueState], held: &mut Vec<(usize, usize, i64)>, touched: &mut BTreeSet<usize>) {
    for (q, slot, amount) in held.drain(..) {
        queues[q].used[slot] -= amount;
        touched.insert(q);
    }
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
