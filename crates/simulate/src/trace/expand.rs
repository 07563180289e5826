//! Step 2 of reading a trace: explicit jobs, gangs and generators become
//! [`TraceWorkload`]s, with every cross-reference checked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

use super::profile::{self, SegmentEntry, Utilization};
use super::{Diagnostic, DocOrigin, GeneratorEntry, JobEntry, TraceDoc};
use serde_saphyr::{Location, Spanned};

use crate::units::Millis;

/// What [`expand`] needs to know about the rest of the scenario.
pub struct ScenarioNames<'a> {
    /// LocalQueue keys, `namespace/name`.
    pub local_queues: &'a BTreeSet<String>,
    /// WorkloadPriorityClass name → value.
    pub priority_classes: &'a BTreeMap<String, i32>,
}

/// A pod set of a trace workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracePodSet {
    pub name: String,
    pub count: u32,
    /// Per pod, milli-units.
    pub requests: BTreeMap<String, i64>,
    /// Its pods' node selector (e.g. `nvidia.com/gpu.sharing-strategy:
    /// time-slicing` asks for a shared GPU).
    pub node_selector: BTreeMap<String, String>,
}

/// One workload as the simulator feeds it to the engine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceWorkload {
    /// `namespace/name`; unique in the trace.
    pub name: String,
    pub class: String,
    pub local_queue: String,
    pub priority: i32,
    pub arrival: Millis,
    pub duration: Millis,
    /// The trace's `expectedRuntime` (start-time estimates); `None`: not given.
    pub expected_runtime: Option<Millis>,
    /// Saves its state every this much run time (`checkpointInterval`).
    pub checkpoint_interval: Option<Millis>,
    /// Saves its state in this long when given a preemption notice
    /// (`checkpointOnNotice`).
    pub checkpoint_on_notice: Option<Millis>,
    pub pod_sets: Vec<TracePodSet>,
    /// GPU utilisation of every pod over a run; `None`: always busy.
    pub utilization: Option<Utilization>,
    /// Names of its pod sets whose pods must all run within one topology
    /// domain (`topology: required`).
    pub require_single_domain: BTreeSet<String>,
    /// Pod set name → its `minCount` (partial admission), for the pod sets
    /// that have one.
    pub min_counts: BTreeMap<String, u32>,
    /// A serving object: removed `duration` after it arrives, never
    /// finished by running (`serving`).
    pub serving: bool,
}

impl TraceWorkload {
    /// Total of one resource over every pod, milli-units.
    pub fn total(&self, resource: &str) -> i64 {
        self.pod_sets
            .iter()
            .map(|ps| ps.requests.get(resource).copied().unwrap_or(0) * i64::from(ps.count))
            .sum()
    }

    pub fn pods(&self) -> u32 {
        self.pod_sets.iter().map(|ps| ps.count).sum()
    }
}

/// Expands explicit jobs, gangs and generators into workloads sorted by
/// arrival (then name), checking every cross-reference.
pub fn expand(
    doc: &TraceDoc,
    names: &ScenarioNames<'_>,
    origin: DocOrigin<'_>,
) -> Result<Vec<TraceWorkload>, Vec<Diagnostic>> {
    let mut refs = Refs {
        names,
        origin,
        errors: Vec::new(),
    };
    let mut made = Made::default();
    for (i, job) in doc.spec.jobs.iter().enumerate() {
        add_job(i, job, &mut refs, &mut made);
    }
    for (g, gen_) in doc.spec.generators.iter().enumerate() {
        if add_generated(g, gen_, &mut refs, &mut made).is_break() {
            break;
        }
    }
    if !refs.errors.is_empty() {
        return Err(refs.errors);
    }
    let mut out = made.workloads;
    out.sort_by(|a, b| a.arrival.cmp(&b.arrival).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

/// The rest of the scenario as the trace refers to it; a reference to
/// nothing, or any other mistake, becomes a diagnostic.
struct Refs<'a> {
    names: &'a ScenarioNames<'a>,
    origin: DocOrigin<'a>,
    errors: Vec<Diagnostic>,
}

impl Refs<'_> {
    fn error(&mut self, at: Location, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(self.origin.at(at, path, message));
    }

    /// The value of a WorkloadPriorityClass; none named: 0.
    fn priority(&mut self, pc: &Option<Spanned<String>>, path: String) -> i32 {
        let Some(s) = pc else { return 0 };
        match self.names.priority_classes.get(&s.value) {
            Some(v) => *v,
            None => {
                let known = known(self.names.priority_classes.keys());
                self.error(
                    s.referenced,
                    path,
                    format!("unknown WorkloadPriorityClass {:?}{known}", s.value),
                );
                0
            }
        }
    }

    /// A pod set's `minCount`, from 1 to its pods.
    fn min_count(&mut self, m: &Option<Spanned<u32>>, pods: u32, path: String) -> Option<u32> {
        let m = m.as_ref()?;
        if m.value == 0 || m.value > pods {
            let message = format!("minCount must be from 1 to pods ({pods}), got {}", m.value);
            self.error(m.referenced, path, message);
        }
        Some(m.value)
    }

    /// The key (`namespace/name`) of LocalQueue `q` in `ns`, which must be
    /// in the scenario.
    fn queue_key(&mut self, ns: &str, q: &Spanned<String>, path: String) -> String {
        let key = format!("{ns}/{}", q.value);
        if !self.names.local_queues.contains(&key) {
            let known = known(self.names.local_queues.iter());
            self.error(
                q.referenced,
                path,
                format!("no LocalQueue {key:?} in this scenario{known}"),
            );
        }
        key
    }

    fn utilization(&mut self, entries: &[SegmentEntry], path: String, owner: Location) -> Option<Utilization> {
        profile::read(entries, &path, owner, self.origin, &mut self.errors)
    }
}

/// The workloads made so far, and the names they took.
#[derive(Default)]
struct Made {
    workloads: Vec<TraceWorkload>,
    /// Job (or gang) name → the job's index; generated names → `usize::MAX`.
    seen: HashMap<String, usize>,
    /// Gang name (namespaced) → index into `workloads`.
    gangs: HashMap<String, usize>,
    /// Generated names' next number per (class, queue).
    numbering: HashMap<(String, String), u32>,
}

/// Explicit job `i`: a workload of its own, or, in a gang, the gang's
/// workload (made by its first member) or one more pod set of it.
fn add_job(i: usize, job: &JobEntry, refs: &mut Refs<'_>, made: &mut Made) {
    let p = format!("spec.jobs[{i}]");
    let workload = job_workload(&p, job, refs);
    let Some(gang) = &job.gang else {
        let key = workload.name.clone();
        if made.seen.insert(key.clone(), i).is_some() || made.gangs.contains_key(&key) {
            refs.error(
                job.name.referenced,
                format!("{p}.name"),
                format!("duplicate job {key:?}"),
            );
        }
        made.workloads.push(workload);
        return;
    };
    let key = format!("{}/{}", job.namespace, gang.value);
    if let Some(&idx) = made.gangs.get(&key) {
        join_gang(&p, job, gang, workload, &mut made.workloads[idx], refs);
        return;
    }
    if made.seen.insert(key.clone(), i).is_some() {
        refs.error(
            gang.referenced,
            format!("{p}.gang"),
            format!("{key:?} is already the name of a job"),
        );
    }
    made.gangs.insert(key.clone(), made.workloads.len());
    made.workloads.push(TraceWorkload {
        name: key,
        class: job.class.clone().unwrap_or_else(|| gang.value.clone()),
        ..workload
    });
}

/// The workload of one job alone (`p` is its path), its references
/// checked.
fn job_workload(p: &str, job: &JobEntry, refs: &mut Refs<'_>) -> TraceWorkload {
    if job.pods == 0 {
        refs.error(job.name.referenced, format!("{p}.pods"), "pods must be at least 1");
    }
    if job.requests.is_empty() {
        refs.error(
            job.name.referenced,
            format!("{p}.requests"),
            "a job must request at least one resource",
        );
    }
    let local_queue = refs.queue_key(&job.namespace, &job.queue, format!("{p}.queue"));
    let priority = refs.priority(&job.priority_class, format!("{p}.priorityClass"));
    let utilization =
        (job.utilization.as_ref()).and_then(|u| refs.utilization(u, format!("{p}.utilization"), job.name.referenced));
    let pod_set = TracePodSet {
        name: job.name.value.clone(),
        count: job.pods,
        requests: job.requests.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        node_selector: job.node_selector.clone(),
    };
    let require_single_domain = job.topology.iter().map(|_| pod_set.name.clone()).collect();
    let min_counts = (refs.min_count(&job.min_count, job.pods, format!("{p}.minCount")))
        .map(|m| (pod_set.name.clone(), m))
        .into_iter()
        .collect();
    TraceWorkload {
        name: format!("{}/{}", job.namespace, job.name.value),
        class: job.class.clone().unwrap_or_else(|| job.name.value.clone()),
        local_queue,
        priority,
        arrival: job.arrival.value.0,
        duration: job.duration.0,
        expected_runtime: job.expected_runtime.map(|d| d.0),
        checkpoint_interval: job.checkpoint_interval.map(|d| d.0),
        checkpoint_on_notice: job.checkpoint_on_notice.map(|d| d.0),
        pod_sets: vec![pod_set],
        utilization,
        require_single_domain,
        min_counts,
        serving: job.serving,
    }
}

/// Job `job` (`p`), alone as `member`, joins its gang's workload `w`: one
/// more pod set, in the same queue and with the same utilization.
fn join_gang(
    p: &str,
    job: &JobEntry,
    gang: &Spanned<String>,
    member: TraceWorkload,
    w: &mut TraceWorkload,
    refs: &mut Refs<'_>,
) {
    // As the controller does: the gang's Workload is made when its last
    // Job arrives, at the highest priority among them.
    w.arrival = w.arrival.max(member.arrival);
    w.priority = w.priority.max(member.priority);
    if w.local_queue != member.local_queue {
        refs.error(
            gang.referenced,
            format!("{p}.gang"),
            format!(
                "gang {:?} members must share queue: this job has {}, an earlier member {}",
                gang.value, member.local_queue, w.local_queue
            ),
        );
    }
    if w.pod_sets.iter().any(|ps| ps.name == job.name.value) {
        refs.error(
            job.name.referenced,
            format!("{p}.name"),
            format!("job {:?} appears twice in gang {:?}", job.name.value, gang.value),
        );
    }
    // All pods of a workload follow one profile.
    if job.utilization.is_some() == member.utilization.is_some() && w.utilization != member.utilization {
        refs.error(
            job.name.referenced,
            format!("{p}.utilization"),
            format!(
                "gang {:?} members must all give the same utilization, or none",
                gang.value
            ),
        );
    }
    w.duration = w.duration.max(member.duration);
    // The gang runs as long as its longest member is expected to.
    w.expected_runtime = w.expected_runtime.max(member.expected_runtime);
    // It is as far along as its least saved member: one that never saves
    // its state makes the gang's run lost.
    w.checkpoint_interval = every_member(w.checkpoint_interval, member.checkpoint_interval);
    w.checkpoint_on_notice = every_member(w.checkpoint_on_notice, member.checkpoint_on_notice);
    w.require_single_domain.extend(member.require_single_domain);
    w.min_counts.extend(member.min_counts);
    w.pod_sets.extend(member.pod_sets);
}

/// A gang's checkpoint setting: the slowest of its members', none when a
/// member has none.
fn every_member(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    Some(a?.max(b?))
}

/// Generator `g`: `count` jobs in each of its queues. Breaks when they
/// would pass the simulator's limit on workloads.
fn add_generated(g: usize, gen_: &GeneratorEntry, refs: &mut Refs<'_>, made: &mut Made) -> ControlFlow<()> {
    let p = format!("spec.generators[{g}]");
    let priority = refs.priority(&gen_.priority_class, format!("{p}.priorityClass"));
    let targets = generator_queues(&p, gen_, refs);
    if gen_.pods == 0 {
        refs.error(gen_.class.referenced, format!("{p}.pods"), "pods must be at least 1");
    }
    let jitter_ok =
        (gen_.jitter.as_ref()).is_none_or(|j| (0.0..=1.0).contains(&j.arrival) && (0.0..=1.0).contains(&j.duration));
    if !jitter_ok {
        refs.error(
            gen_.class.referenced,
            format!("{p}.jitter"),
            "jitter fractions must be between 0 and 1",
        );
    }
    let template = generated_workload(&p, gen_, priority, refs);
    let total = made.workloads.len() as u64 + u64::from(gen_.count) * targets.len() as u64;
    if total > crate::checks::MAX_WORKLOADS {
        refs.error(
            gen_.class.referenced,
            format!("{p}.count"),
            format!(
                "{} jobs in each of {} queue(s) make {total} workloads with those before, more than the simulator's limit of {}",
                gen_.count,
                targets.len(),
                crate::checks::MAX_WORKLOADS
            ),
        );
        return ControlFlow::Break(());
    }
    for (qi, target) in targets.iter().enumerate() {
        generate_in_queue((g, qi), &p, gen_, target, &template, refs, made);
    }
    ControlFlow::Continue(())
}

/// A generator's LocalQueue keys: `queue` in `namespace`, then `queues`.
fn generator_queues(p: &str, gen_: &GeneratorEntry, refs: &mut Refs<'_>) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    match (&gen_.queue, &gen_.namespace) {
        (Some(q), Some(ns)) => targets.push(refs.queue_key(ns, q, format!("{p}.queue"))),
        (Some(q), None) => refs.error(
            q.referenced,
            format!("{p}.namespace"),
            "queue needs a namespace (or use queues: [namespace/name, ...])",
        ),
        (None, _) => {}
    }
    for (qi, q) in gen_.queues.iter().enumerate() {
        match q.value.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                let named = Spanned::new(name.to_string(), q.referenced, q.defined);
                targets.push(refs.queue_key(ns, &named, format!("{p}.queues[{qi}]")));
            }
            _ => refs.error(
                q.referenced,
                format!("{p}.queues[{qi}]"),
                format!("{:?} is not namespace/name", q.value),
            ),
        }
    }
    if targets.is_empty() && gen_.queue.is_none() {
        refs.error(
            gen_.class.referenced,
            p,
            format!("generator {:?} needs queue + namespace or queues", gen_.class.value),
        );
    }
    targets
}

/// What every job of a generator shares: all but its name, queue, arrival
/// (here the generator's start) and jittered duration.
fn generated_workload(p: &str, gen_: &GeneratorEntry, priority: i32, refs: &mut Refs<'_>) -> TraceWorkload {
    let requests: BTreeMap<String, i64> = gen_.requests.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    let utilization = (gen_.utilization.as_ref())
        .and_then(|u| refs.utilization(u, format!("{p}.utilization"), gen_.class.referenced));
    let require_single_domain = gen_.topology.iter().map(|_| "main".to_string()).collect();
    let min_counts = (refs.min_count(&gen_.min_count, gen_.pods, format!("{p}.minCount")))
        .map(|m| ("main".to_string(), m))
        .into_iter()
        .collect();
    TraceWorkload {
        name: String::new(),
        class: gen_.class.value.clone(),
        local_queue: String::new(),
        priority,
        arrival: gen_.start.map_or(0, |d| d.0),
        duration: gen_.duration.0,
        expected_runtime: gen_.expected_runtime.map(|d| d.0),
        checkpoint_interval: gen_.checkpoint_interval.map(|d| d.0),
        checkpoint_on_notice: gen_.checkpoint_on_notice.map(|d| d.0),
        pod_sets: vec![TracePodSet {
            name: "main".into(),
            count: gen_.pods,
            requests,
            node_selector: gen_.node_selector.clone(),
        }],
        utilization,
        require_single_domain,
        min_counts,
        serving: gen_.serving,
    }
}

/// A generator's `count` jobs in one of its queues (`target`, its `qi`-th
/// of generator `g`): one every interval from `template`'s arrival, each
/// jittered when asked, named `<class>-<queue>-<n>`.
fn generate_in_queue(
    (g, qi): (usize, usize),
    p: &str,
    gen_: &GeneratorEntry,
    target: &str,
    template: &TraceWorkload,
    refs: &mut Refs<'_>,
    made: &mut Made,
) {
    let (ns, q) = target.split_once('/').unwrap_or(("", target));
    // One stream per (generator, queue): adding a queue does not move
    // the arrivals of the others.
    let mut rng = (gen_.jitter.as_ref()).map(|j| SplitMix64::new(j.seed ^ ((g as u64) << 32) ^ qi as u64));
    for n in 0..gen_.count {
        let mut arrival = template.arrival + gen_.interval.0 * Millis::from(n);
        let mut duration = template.duration;
        if let (Some(j), Some(rng)) = (&gen_.jitter, rng.as_mut()) {
            arrival += (rng.next_f64() * j.arrival * gen_.interval.0 as f64).round() as Millis;
            let factor = 1.0 + j.duration * (2.0 * rng.next_f64() - 1.0);
            duration = (duration as f64 * factor).round().max(0.0) as Millis;
        }
        // Numbered per (class, queue), continuing across generators.
        let counter = (made.numbering)
            .entry((gen_.class.value.clone(), target.to_string()))
            .or_insert(0);
        let name = format!("{ns}/{}-{q}-{counter}", gen_.class.value);
        *counter += 1;
        if made.seen.insert(name.clone(), usize::MAX).is_some() {
            refs.error(
                gen_.class.referenced,
                p,
                format!("generated job name {name:?} collides with another job"),
            );
            break;
        }
        made.workloads.push(TraceWorkload {
            name,
            local_queue: target.to_string(),
            arrival,
            duration,
            ..template.clone()
        });
    }
}

fn known<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = names.take(8).map(String::as_str).collect();
    if list.is_empty() {
        " (none are defined)".into()
    } else {
        format!(" (known: {})", list.join(", "))
    }
}

/// A tiny, well-known PRNG (splitmix64): deterministic across platforms and
/// versions, which is all jitter needs.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
