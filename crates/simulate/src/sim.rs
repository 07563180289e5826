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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::{Context, Result};
use sluice_scheduler::{ClusterQueueSpec, Engine, FlavorSpec, LocalQueueSpec, PodSetSpec, WorkloadSpec};

use super::clock::{EventQueue, WriteLimiter};
use super::trace::TraceWorkload;
use super::units::Millis;

/// Everything a run needs, already checked.
pub struct Scenario {
    pub name: String,
    pub flavors: Vec<FlavorSpec>,
    pub cluster_queues: Vec<ClusterQueueSpec>,
    pub local_queues: Vec<LocalQueueSpec>,
    pub workloads: Vec<TraceWorkload>,
    /// The Trace's `spec.evictionDelay`, if it sets one.
    pub eviction_delay: Option<Millis>,
}

#[derive(Debug, Clone)]
pub struct SimOptions {
    /// API writes per second for admissions and evictions; `None` = unlimited.
    pub api_qps: Option<f64>,
    pub api_burst: u32,
    /// Time from the eviction write until the victim's pods are gone.
    pub eviction_delay: Millis,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            api_qps: None,
            api_burst: 1,
            eviction_delay: 30_000,
        }
    }
}

/// How one admission of a workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RunEnd {
    Finished,
    Preempted,
    Evicted,
    /// Still running when the simulation stopped (only with a time limit).
    Running,
}

/// One admission of a workload, from decision to end.
#[derive(Debug, Clone)]
pub struct Run {
    /// The cycle that reserved quota.
    pub admitted_at: Millis,
    /// When the admission write went through and the pods started.
    pub started_at: Option<Millis>,
    /// When it finished, or when it was chosen as a victim / evicted.
    pub ended_at: Option<Millis>,
    pub end: RunEnd,
    pub borrowing: bool,
    /// Flavors used, e.g. `h100-80gb`.
    pub flavors: Vec<String>,
}

/// What happened to one workload.
#[derive(Debug, Clone)]
pub struct WorkloadRecord {
    pub cluster_queue: Arc<str>,
    pub runs: Vec<Run>,
    pub preempted: u32,
    pub evicted: u32,
    /// Set when the engine refused the workload at arrival.
    pub rejected: Option<String>,
    /// The last pending explanation the engine gave.
    pub last_pending: Option<String>,
}

impl WorkloadRecord {
    /// Time of the first admission write (pods first started).
    pub fn first_start(&self) -> Option<Millis> {
        // A run preempted before its admission write went through never started.
        self.runs.iter().find_map(|r| r.started_at)
    }

    pub fn finished_at(&self) -> Option<Millis> {
        self.runs
            .last()
            .filter(|r| r.end == RunEnd::Finished)
            .and_then(|r| r.ended_at)
    }
}

/// A point of a cluster queue's time series; the value holds until the next.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Millis,
    /// Per quota slot (see [`QueueSeries::slots`]), milli-units in use.
    pub used: Box<[i64]>,
    pub pending: u32,
    pub admitted: u32,
}

/// One (flavor, resource) of a cluster queue's quota.
#[derive(Debug, Clone)]
pub struct Slot {
    pub flavor: String,
    pub resource: String,
    pub nominal: i64,
}

#[derive(Debug, Clone)]
pub struct QueueSeries {
    pub name: String,
    pub cohort: Option<String>,
    pub slots: Vec<Slot>,
    pub samples: Vec<Sample>,
}

/// The raw outcome of a run; `report` turns it into figures.
pub struct SimResult {
    pub workloads: Vec<TraceWorkload>,
    pub records: Vec<WorkloadRecord>,
    pub queues: Vec<QueueSeries>,
    pub end: Millis,
    pub cycles: u64,
    pub api_writes: u64,
    pub write_delay_total: i64,
    pub write_delay_max: i64,
}

/// Progress of a run, for the terminal indicator.
pub struct Progress {
    pub now: Millis,
    pub done: usize,
    pub total: usize,
}

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

fn uid_of(i: usize) -> String {
    format!("w{i:08}")
}

fn index_of(uid: &str) -> Option<usize> {
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
/// finished, or the rest can never be admitted).
pub fn run(scenario: &Scenario, opts: &SimOptions, progress: &mut dyn FnMut(Progress)) -> Result<SimResult> {
    let mut engine = Engine::new();
    for f in &scenario.flavors {
        engine.upsert_flavor(f.clone());
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
        })
        .collect();
    let mut state = vec![State::NotArrived; n];
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
    let mut steps = 0u64;

    while let Some(t) = events.peek_time() {
        now = t;
        let mut need_cycle = false;
        while let Some(ev) = events.pop_due(t) {
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
                                ..PodSetSpec::default()
                            })
                            .collect(),
                    };
                    match engine.add_workload(spec) {
                        Ok(()) => {
                            state[i] = State::Pending;
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
                        release(&mut queues, &mut held[i], &mut touched);
                        if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                            queues[q].admitted = queues[q].admitted.saturating_sub(1);
                            touched.insert(q);
                        }
                        state[i] = State::Done;
                        done += 1;
                        need_cycle = true;
                    }
                }
                Event::EvictionDone(i, e) => {
                    if epoch[i] == e && state[i] == State::Evicting {
                        engine
                            .eviction_complete(&uid_of(i), t)
                            .with_context(|| format!("engine refused eviction of {}", scenario.workloads[i].name))?;
                        release(&mut queues, &mut held[i], &mut touched);
                        state[i] = State::Pending;
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
        if need_cycle {
            cycles += 1;
            let cycle = engine.schedule(t);
            for a in &cycle.admitted {
                let Some(i) = index_of(&a.uid) else { continue };
                epoch[i] += 1;
                state[i] = State::Admitted;
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
                epoch[i] += 1;
                state[i] = State::Evicting;
                if let Some(run) = records[i].runs.last_mut() {
                    run.ended_at = Some(t);
                    run.end = why;
                }
                match why {
                    RunEnd::Evicted => records[i].evicted += 1,
                    _ => records[i].preempted += 1,
                }
                if let Some(&q) = queue_index.get(&*records[i].cluster_queue) {
                    queues[q].admitted = queues[q].admitted.saturating_sub(1);
                    touched.insert(q);
                }
                let write_at = limiter.acquire(t);
                events.push(write_at + opts.eviction_delay, Event::EvictionDone(i, epoch[i]));
            }
            for (uid, explanation) in &cycle.pending_changed {
                if let Some(i) = index_of(uid) {
                    records[i].last_pending = Some(sluice_convert::text::explanation(explanation));
                }
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
        .max(now);
    Ok(SimResult {
        workloads: scenario.workloads.clone(),
        records,
        queues: queues.into_iter().map(|q| q.series).collect(),
        end,
        cycles,
        api_writes: limiter.writes,
        write_delay_total: limiter.delay_total,
        write_delay_max: limiter.delay_max,
    })
}

fn release(queues: &mut [QueueState], held: &mut Vec<(usize, usize, i64)>, touched: &mut BTreeSet<usize>) {
    for (q, slot, amount) in held.drain(..) {
        queues[q].used[slot] -= amount;
        touched.insert(q);
    }
}
