//! Step 2 of reading a trace: explicit jobs, gangs and generators become
//! [`TraceWorkload`]s, with every cross-reference checked.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::profile::{self, Utilization};
use super::{Diagnostic, DocOrigin, TraceDoc};
use serde_saphyr::Spanned;

use crate::units::Millis;

/// What [`expand`] needs to know about the rest of the scenario.
pub struct ScenarioNames<'a> {
    /// LocalQueue keys, `namespace/name`.
    pub local_queues: &'a BTreeSet<String>,
    /// WorkloadPriorityClass name → value.
    pub priority_classes: &'a BTreeMap<String, i32>,
}

/// A pod set of a trace workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePodSet {
    pub name: String,
    pub count: u32,
    /// Per pod, milli-units.
    pub requests: BTreeMap<String, i64>,
}

/// One workload as the simulator feeds it to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub pod_sets: Vec<TracePodSet>,
    /// GPU utilisation of every pod over a run; `None`: always busy.
    pub utilization: Option<Utilization>,
    /// Names of its pod sets whose pods must all run within one topology
    /// domain (`topology: required`).
    pub require_single_domain: BTreeSet<String>,
    /// Pod set name → its `minCount` (partial admission), for the pod sets
    /// that have one.
    pub min_counts: BTreeMap<String, u32>,
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
    let mut errors = Vec::new();
    let mut out: Vec<TraceWorkload> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    // gang name (namespaced) → index into `out`
    let mut gangs: HashMap<String, usize> = HashMap::new();
    let mut numbering: HashMap<(String, String), u32> = HashMap::new();

    let priority = |pc: &Option<Spanned<String>>, path: String, errors: &mut Vec<Diagnostic>| -> i32 {
        match pc {
            None => 0,
            Some(s) => match names.priority_classes.get(&s.value) {
                Some(v) => *v,
                None => {
                    errors.push(origin.at(
                        s.referenced,
                        path,
                        format!(
                            "unknown WorkloadPriorityClass {:?}{}",
                            s.value,
                            known(names.priority_classes.keys())
                        ),
                    ));
                    0
                }
            },
        }
    };
    let min_count = |m: &Option<Spanned<u32>>, pods: u32, path: String, errors: &mut Vec<Diagnostic>| {
        let m = m.as_ref()?;
        if m.value == 0 || m.value > pods {
            let message = format!("minCount must be from 1 to pods ({pods}), got {}", m.value);
            errors.push(origin.at(m.referenced, path, message));
        }
        Some(m.value)
    };
    let queue_key = |ns: &str, q: &Spanned<String>, path: String, errors: &mut Vec<Diagnostic>| -> String {
        let key = format!("{ns}/{}", q.value);
        if !names.local_queues.contains(&key) {
            errors.push(origin.at(
                q.referenced,
                path,
                format!(
                    "no LocalQueue {key:?} in this scenario{}",
                    known(names.local_queues.iter())
                ),
            ));
        }
        key
    };

    for (i, job) in doc.spec.jobs.iter().enumerate() {
        let p = format!("spec.jobs[{i}]");
        if job.pods == 0 {
            errors.push(origin.at(job.name.referenced, format!("{p}.pods"), "pods must be at least 1"));
        }
        if job.requests.is_empty() {
            errors.push(origin.at(
                job.name.referenced,
                format!("{p}.requests"),
                "a job must request at least one resource",
            ));
        }
        let local_queue = queue_key(&job.namespace, &job.queue, format!("{p}.queue"), &mut errors);
        let prio = priority(&job.priority_class, format!("{p}.priorityClass"), &mut errors);
        let utilization = job
            .utilization
            .as_ref()
            .and_then(|u| profile::read(u, &format!("{p}.utilization"), job.name.referenced, origin, &mut errors));
        let pod_set = TracePodSet {
            name: job.name.value.clone(),
            count: job.pods,
            requests: job.requests.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        };
        let single_domain: BTreeSet<String> = job.topology.iter().map(|_| pod_set.name.clone()).collect();
        let min_counts: BTreeMap<String, u32> =
            min_count(&job.min_count, job.pods, format!("{p}.minCount"), &mut errors)
                .map(|m| (pod_set.name.clone(), m))
                .into_iter()
                .collect();
        if let Some(gang) = &job.gang {
            let key = format!("{}/{}", job.namespace, gang.value);
            if let Some(&idx) = gangs.get(&key) {
                let w = &mut out[idx];
                // As the controller does: the gang's Workload is made when
                // its last Job arrives, at the highest priority among them.
                w.arrival = w.arrival.max(job.arrival.value.0);
                w.priority = w.priority.max(prio);
                if w.local_queue != local_queue {
                    errors.push(origin.at(
                        gang.referenced,
                        format!("{p}.gang"),
                        format!(
                            "gang {:?} members must share queue: this job has {local_queue}, an earlier member {}",
                            gang.value, w.local_queue
                        ),
                    ));
                }
                if w.pod_sets.iter().any(|ps| ps.name == pod_set.name) {
                    errors.push(origin.at(
                        job.name.referenced,
                        format!("{p}.name"),
                        format!("job {:?} appears twice in gang {:?}", job.name.value, gang.value),
                    ));
                }
                // All pods of a workload follow one profile.
                if job.utilization.is_some() == utilization.is_some() && w.utilization != utilization {
                    errors.push(origin.at(
                        job.name.referenced,
                        format!("{p}.utilization"),
                        format!(
                            "gang {:?} members must all give the same utilization, or none",
                            gang.value
                        ),
                    ));
                }
                w.duration = w.duration.max(job.duration.0);
                // The gang runs as long as its longest member is expected to.
                w.expected_runtime = w.expected_runtime.max(job.expected_runtime.map(|d| d.0));
                if job.topology.is_some() {
                    w.require_single_domain.insert(pod_set.name.clone());
                }
                w.min_counts.extend(min_counts);
                w.pod_sets.push(pod_set);
                continue;
            }
            if seen.insert(key.clone(), i).is_some() {
                errors.push(origin.at(
                    gang.referenced,
                    format!("{p}.gang"),
                    format!("{key:?} is already the name of a job"),
                ));
            }
            gangs.insert(key.clone(), out.len());
            out.push(TraceWorkload {
                name: key,
                class: job.class.clone().unwrap_or_else(|| gang.value.clone()),
                local_queue,
                priority: prio,
                arrival: job.arrival.value.0,
                duration: job.duration.0,
                expected_runtime: job.expected_runtime.map(|d| d.0),
                pod_sets: vec![pod_set],
                utilization,
                require_single_domain: single_domain,
                min_counts,
            });
            continue;
        }
        let key = format!("{}/{}", job.namespace, job.name.value);
        if seen.insert(key.clone(), i).is_some() || gangs.contains_key(&key) {
            errors.push(origin.at(
                job.name.referenced,
                format!("{p}.name"),
                format!("duplicate job {key:?}"),
            ));
        }
        out.push(TraceWorkload {
            name: key,
            class: job.class.clone().unwrap_or_else(|| job.name.value.clone()),
            local_queue,
            priority: prio,
            arrival: job.arrival.value.0,
            duration: job.duration.0,
            expected_runtime: job.expected_runtime.map(|d| d.0),
            pod_sets: vec![pod_set],
            utilization,
            require_single_domain: single_domain,
            min_counts,
        });
    }

    for (g, gen_) in doc.spec.generators.iter().enumerate() {
        let p = format!("spec.generators[{g}]");
        let prio = priority(&gen_.priority_class, format!("{p}.priorityClass"), &mut errors);
        let mut targets: Vec<String> = Vec::new();
        match (&gen_.queue, &gen_.namespace) {
            (Some(q), Some(ns)) => targets.push(queue_key(ns, q, format!("{p}.queue"), &mut errors)),
            (Some(q), None) => errors.push(origin.at(
                q.referenced,
                format!("{p}.namespace"),
                "queue needs a namespace (or use queues: [namespace/name, ...])",
            )),
            (None, _) => {}
        }
        for (qi, q) in gen_.queues.iter().enumerate() {
            match q.value.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                    let named = Spanned::new(name.to_string(), q.referenced, q.defined);
                    targets.push(queue_key(ns, &named, format!("{p}.queues[{qi}]"), &mut errors));
                }
                _ => errors.push(origin.at(
                    q.referenced,
                    format!("{p}.queues[{qi}]"),
                    format!("{:?} is not namespace/name", q.value),
                )),
            }
        }
        if targets.is_empty() && gen_.queue.is_none() {
            errors.push(origin.at(
                gen_.class.referenced,
                p.clone(),
                format!("generator {:?} needs queue + namespace or queues", gen_.class.value),
            ));
        }
        if gen_.pods == 0 {
            errors.push(origin.at(gen_.class.referenced, format!("{p}.pods"), "pods must be at least 1"));
        }
        let jitter_ok = gen_
            .jitter
            .as_ref()
            .is_none_or(|j| (0.0..=1.0).contains(&j.arrival) && (0.0..=1.0).contains(&j.duration));
        if !jitter_ok {
            errors.push(origin.at(
                gen_.class.referenced,
                format!("{p}.jitter"),
                "jitter fractions must be between 0 and 1",
            ));
        }
        let requests: BTreeMap<String, i64> = gen_.requests.iter().map(|(k, v)| (k.clone(), v.0)).collect();
        let utilization = gen_.utilization.as_ref().and_then(|u| {
            let at = gen_.class.referenced;
            profile::read(u, &format!("{p}.utilization"), at, origin, &mut errors)
        });
        let start = gen_.start.map_or(0, |d| d.0);
        let single_domain: BTreeSet<String> = gen_.topology.iter().map(|_| "main".to_string()).collect();
        let min_counts: BTreeMap<String, u32> =
            min_count(&gen_.min_count, gen_.pods, format!("{p}.minCount"), &mut errors)
                .map(|m| ("main".to_string(), m))
                .into_iter()
                .collect();
        let total = out.len() as u64 + u64::from(gen_.count) * targets.len() as u64;
        if total > crate::checks::MAX_WORKLOADS {
            errors.push(origin.at(
                gen_.class.referenced,
                format!("{p}.count"),
                format!(
                    "{} jobs in each of {} queue(s) make {total} workloads with those before, more than the simulator's limit of {}",
                    gen_.count,
                    targets.len(),
                    crate::checks::MAX_WORKLOADS
                ),
            ));
            break;
        }
        for (qi, target) in targets.iter().enumerate() {
            let (ns, q) = target.split_once('/').unwrap_or(("", target));
            // One stream per (generator, queue): adding a queue does not move
            // the arrivals of the others.
            let mut rng = gen_
                .jitter
                .as_ref()
                .map(|j| SplitMix64::new(j.seed ^ ((g as u64) << 32) ^ qi as u64));
            for n in 0..gen_.count {
                let mut arrival = start + gen_.interval.0 * Millis::from(n);
                let mut duration = gen_.duration.0;
                if let (Some(j), Some(rng)) = (&gen_.jitter, rng.as_mut()) {
                    arrival += (rng.next_f64() * j.arrival * gen_.interval.0 as f64).round() as Millis;
                    let factor = 1.0 + j.duration * (2.0 * rng.next_f64() - 1.0);
                    duration = (duration as f64 * factor).round().max(0.0) as Millis;
                }
                // Numbered per (class, queue), continuing across generators.
                let counter = numbering.entry((gen_.class.value.clone(), target.clone())).or_insert(0);
                let name = format!("{ns}/{}-{q}-{counter}", gen_.class.value);
                *counter += 1;
                if seen.insert(name.clone(), usize::MAX).is_some() {
                    errors.push(origin.at(
                        gen_.class.referenced,
                        p.clone(),
                        format!("generated job name {name:?} collides with another job"),
                    ));
                    break;
                }
                out.push(TraceWorkload {
                    name,
                    class: gen_.class.value.clone(),
                    local_queue: target.clone(),
                    priority: prio,
                    arrival,
                    duration,
                    expected_runtime: gen_.expected_runtime.map(|d| d.0),
                    pod_sets: vec![TracePodSet {
                        name: "main".into(),
                        count: gen_.pods,
                        requests: requests.clone(),
                    }],
                    utilization: utilization.clone(),
                    require_single_domain: single_domain.clone(),
                    min_counts: min_counts.clone(),
                });
            }
        }
    }

    if !errors.is_empty() {
        return Err(errors);
    }
    out.sort_by(|a, b| a.arrival.cmp(&b.arrival).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
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
