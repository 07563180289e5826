//! The `Trace` document: what arrives, when, how big it is and how long it runs.
//!
//! `Trace` (`apiVersion: sluice.dev/v1alpha1`) is a simulator-only kind; it
//! never reaches a cluster. Its `spec` holds explicit `jobs` and `generators`
//! that expand into many similar jobs (enough to express Kueue's performance
//! scenarios). See `docs/simulate.md` for the full reference.
//!
//! Parsing happens in two steps so that every error can name its place:
//! 1. [`parse_trace`] deserializes the document. Shape errors (a missing
//!    field, a bad duration or quantity) come from the deserializer with the
//!    line and column, and `serde_path_to_error` supplies the field path.
//! 2. [`expand`] checks what spans the scenario (does the LocalQueue exist,
//!    is the priority class known, do gang members agree) using the locations
//!    kept with [`Spanned`] and turns everything into [`TraceWorkload`]s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::Spanned;

use super::units::{Millis, parse_duration};

/// A problem in the scenario, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// Field path inside the document, e.g. `spec.jobs[2].requests.cpu`;
    /// empty when the problem is the document as a whole.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Where a document starts in its file, to turn document-relative positions
/// into file positions.
#[derive(Debug, Clone, Copy)]
pub struct DocOrigin<'a> {
    pub file: &'a str,
    /// Number of file lines before the document's first line.
    pub line_offset: u32,
}

impl DocOrigin<'_> {
    pub fn at(&self, loc: serde_saphyr::Location, path: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.to_string(),
            line: loc.line() as u32 + self.line_offset,
            column: loc.column() as u32,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A duration field: `90s`, `2h30m`, or a number of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration(pub Millis);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 90s, 2h30m, 150ms or a number of milliseconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).map(Duration).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                Millis::try_from(v)
                    .map(Duration)
                    .map_err(|_| E::custom("duration too large"))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                if v < 0 {
                    return Err(E::custom("a duration must not be negative"));
                }
                Ok(Duration(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
                parse_duration(&v.to_string()).map(Duration).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A per-pod resource amount in milli-units, written as a Kubernetes quantity
/// (`8`, `500m`, `64Gi`) and parsed exactly by the api crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(pub i64);

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Amount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as 8, 500m or 64Gi")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Amount, E> {
                let milli = sluice_api::quantity::parse_milli("", v)
                    .map_err(|e| E::custom(format!("quantity {v:?} {}", e.kind)))?;
                i64::try_from(milli)
                    .map(Amount)
                    .map_err(|_| E::custom(format!("quantity {v:?} is too large")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Amount, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceDoc {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<TraceMeta>,
    pub spec: TraceSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceMeta {
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceSpec {
    #[serde(default)]
    pub jobs: Vec<JobEntry>,
    #[serde(default)]
    pub generators: Vec<GeneratorEntry>,
    /// Default for `--eviction-delay` in this scenario.
    #[serde(default)]
    pub eviction_delay: Option<Duration>,
}

/// One explicit job: a Job with `pods` pods (its parallelism), all of which
/// must be admitted together.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobEntry {
    pub name: Spanned<String>,
    /// Workload class for the report; defaults to the job's name.
    #[serde(default)]
    pub class: Option<String>,
    pub arrival: Spanned<Duration>,
    pub namespace: String,
    /// LocalQueue name in `namespace`.
    pub queue: Spanned<String>,
    #[serde(default)]
    pub priority_class: Option<Spanned<String>>,
    #[serde(default = "one")]
    pub pods: u32,
    pub requests: BTreeMap<String, Amount>,
    pub duration: Duration,
    /// Jobs sharing a gang name are admitted as one workload, one pod set each.
    #[serde(default)]
    pub gang: Option<Spanned<String>>,
}

/// `count` similar jobs, one every `interval` from `start`, in each queue.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorEntry {
    /// Its position locates errors about the generator as a whole.
    pub class: Spanned<String>,
    pub count: u32,
    #[serde(default)]
    pub start: Option<Duration>,
    pub interval: Duration,
    pub duration: Duration,
    #[serde(default = "one")]
    pub pods: u32,
    pub requests: BTreeMap<String, Amount>,
    #[serde(default)]
    pub priority_class: Option<Spanned<String>>,
    /// With `queue`: the LocalQueue's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub queue: Option<Spanned<String>>,
    /// Several LocalQueues as `namespace/name`; the generator runs once per
    /// queue (`count` jobs in each).
    #[serde(default)]
    pub queues: Vec<Spanned<String>>,
    #[serde(default)]
    pub jitter: Option<Jitter>,
}

/// Deterministic randomness: the same seed gives the same trace.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Jitter {
    pub seed: u64,
    /// Each arrival moves later by up to this fraction of `interval` (0–1).
    #[serde(default)]
    pub arrival: f64,
    /// Each run time is scaled by a factor in `1 ± duration` (0–1).
    #[serde(default)]
    pub duration: f64,
}

fn one() -> u32 {
    1
}

/// Deserializes a `Trace` document (its text starts at `origin`).
pub fn parse_trace(text: &str, origin: DocOrigin<'_>) -> Result<TraceDoc, Diagnostic> {
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    let doc: TraceDoc = result.map_err(|e| saphyr_diagnostic(&e, &path, origin))?;
    if doc.kind != "Trace" || doc.api_version != "sluice.dev/v1alpha1" {
        return Err(Diagnostic {
            file: origin.file.into(),
            line: origin.line_offset + 1,
            column: 1,
            path: String::new(),
            message: format!(
                "expected apiVersion sluice.dev/v1alpha1 kind Trace, found {} {}",
                doc.api_version, doc.kind
            ),
        });
    }
    Ok(doc)
}

/// Turns a serde-saphyr error into a diagnostic; `path` is the field path
/// where deserialization stopped (`.` means the document root).
pub fn saphyr_diagnostic(e: &serde_saphyr::Error, path: &str, origin: DocOrigin<'_>) -> Diagnostic {
    let (line, column) = e
        .location()
        .map(|l| (l.line() as u32, l.column() as u32))
        .unwrap_or((1, 1));
    let message = plain_message(e);
    Diagnostic {
        file: origin.file.into(),
        line: line + origin.line_offset,
        column,
        path: if path == "." { String::new() } else { path.to_string() },
        message,
    }
}

/// The error's message without serde-saphyr's own position suffix or snippet.
fn plain_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    let first = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    first.trim_start_matches("error: ").to_string()
}

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
    pub pod_sets: Vec<TracePodSet>,
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
        let pod_set = TracePodSet {
            name: job.name.value.clone(),
            count: job.pods,
            requests: job.requests.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        };
        if let Some(gang) = &job.gang {
            let key = format!("{}/{}", job.namespace, gang.value);
            if let Some(&idx) = gangs.get(&key) {
                let w = &mut out[idx];
                let mut mismatch = |what: &str, here: String, there: String| {
                    errors.push(origin.at(
                        gang.referenced,
                        format!("{p}.gang"),
                        format!(
                            "gang {:?} members must share {what}: this job has {here}, an earlier member {there}",
                            gang.value
                        ),
                    ));
                };
                if w.arrival != job.arrival.value.0 {
                    mismatch(
                        "arrival",
                        job.arrival.value.0.to_string() + "ms",
                        w.arrival.to_string() + "ms",
                    );
                }
                if w.local_queue != local_queue {
                    mismatch("queue", local_queue.clone(), w.local_queue.clone());
                }
                if w.priority != prio {
                    mismatch("priority", prio.to_string(), w.priority.to_string());
                }
                if w.pod_sets.iter().any(|ps| ps.name == pod_set.name) {
                    errors.push(origin.at(
                        job.name.referenced,
                        format!("{p}.name"),
                        format!("job {:?} appears twice in gang {:?}", job.name.value, gang.value),
                    ));
                }
                w.duration = w.duration.max(job.duration.0);
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
                pod_sets: vec![pod_set],
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
            pod_sets: vec![pod_set],
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
        let start = gen_.start.map_or(0, |d| d.0);
        let total = out.len() as u64 + u64::from(gen_.count) * targets.len() as u64;
        if total > super::checks::MAX_WORKLOADS {
            errors.push(origin.at(
                gen_.class.referenced,
                format!("{p}.count"),
                format!(
                    "{} jobs in each of {} queue(s) make {total} workloads with those before, more than the simulator's limit of {}",
                    gen_.count,
                    targets.len(),
                    super::checks::MAX_WORKLOADS
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
                    pod_sets: vec![TracePodSet {
                        name: "main".into(),
                        count: gen_.pods,
                        requests: requests.clone(),
                    }],
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
