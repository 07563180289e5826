//! Recording a trace from a cluster's Workloads: Kueue's
//! (`kueue.x-k8s.io`) or Sluice's (`sluice.dev`), which share the fields
//! read here. Each Workload created in the window becomes one job of a
//! `Trace` (a Workload of several pod sets: one job per pod set, in one
//! gang): its arrival (creation, from the window's start), its queue, its
//! priority class, its pods and their requests (the template's container
//! requests, else limits, summed over containers), its `minCount`, and how
//! long it ran (quota reserved until finished). What the cluster gave it is
//! kept beside: its wait (creation to quota reserved), per queue, so a
//! replay can be compared with it. Pure: the caller lists the Workloads.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use crate::units::Millis;

/// What to record.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Workloads created at or after this time (ms since the epoch).
    pub since_ms: Millis,
    /// When the recording is made: a workload still running ran until now.
    pub now_ms: Millis,
    /// How long a workload that was never admitted runs in the replay.
    pub unadmitted_runtime_ms: Millis,
}

/// A recorded trace and what the cluster gave each queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The `Trace` document (YAML).
    pub trace: String,
    /// Per LocalQueue (`namespace/name`): the observed waits (ms), in
    /// arrival order; `None` for one not admitted yet.
    pub waits: BTreeMap<String, Vec<Option<Millis>>>,
    /// Workloads left out, with why.
    pub skipped: Vec<String>,
}

/// One job of the trace.
#[derive(Debug, Clone, PartialEq)]
struct Job {
    name: String,
    namespace: String,
    queue: String,
    priority_class: Option<String>,
    pods: u32,
    min_count: Option<u32>,
    requests: BTreeMap<String, String>,
    arrival: Millis,
    duration: Millis,
    gang: Option<String>,
}

/// Records the Workloads created in the window into a trace.
pub fn record(workloads: &[Value], window: Window) -> Recorded {
    let mut jobs = Vec::new();
    let mut waits: BTreeMap<String, Vec<(Millis, Option<Millis>)>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for wl in workloads {
        let name = format!(
            "{}/{}",
            wl["metadata"]["namespace"].as_str().unwrap_or(""),
            wl["metadata"]["name"].as_str().unwrap_or("")
        );
        match workload_jobs(wl, window) {
            Ok(Some((mut js, wait))) => {
                let first = &js[0];
                waits
                    .entry(format!("{}/{}", first.namespace, first.queue))
                    .or_default()
                    .push((first.arrival, wait));
                jobs.append(&mut js);
            }
            Ok(None) => {}
            Err(why) => skipped.push(format!("{name}: {why}")),
        }
    }
    jobs.sort_by(|a, b| a.arrival.cmp(&b.arrival).then(a.name.cmp(&b.name)));
    let waits = waits
        .into_iter()
        .map(|(q, mut w)| {
            w.sort_by_key(|(at, _)| *at);
            (q, w.into_iter().map(|(_, wait)| wait).collect())
        })
        .collect();
    Recorded {
        trace: render(&jobs),
        waits,
        skipped,
    }
}

/// The jobs of one Workload (one per pod set) and its observed wait (`None`:
/// not admitted yet).
type Recording = (Vec<Job>, Option<Millis>);

/// A Workload's [`Recording`]; `None` when it was created before the window.
fn workload_jobs(wl: &Value, window: Window) -> Result<Option<Recording>, String> {
    let meta = &wl["metadata"];
    let created = time(&meta["creationTimestamp"]).ok_or("no metadata.creationTimestamp")?;
    if created < window.since_ms {
        return Ok(None);
    }
    let spec = &wl["spec"];
    let namespace = meta["namespace"].as_str().ok_or("no metadata.namespace")?.to_string();
    let queue = spec["queueName"]
        .as_str()
        .filter(|q| !q.is_empty())
        .ok_or("no spec.queueName")?;
    let reserved = condition_time(wl, "QuotaReserved");
    let finished = condition_time(wl, "Finished");
    let duration = match (reserved, finished) {
        (Some(r), Some(f)) => (f - r).max(0),
        (Some(r), None) => (window.now_ms - r).max(0),
        (None, _) => window.unadmitted_runtime_ms,
    };
    let pod_sets = spec["podSets"]
        .as_array()
        .filter(|p| !p.is_empty())
        .ok_or("no spec.podSets")?;
    let base = meta["name"].as_str().unwrap_or("workload").to_string();
    let gang = (pod_sets.len() > 1).then(|| format!("{namespace}-{base}"));
    let mut jobs = Vec::with_capacity(pod_sets.len());
    for (i, ps) in pod_sets.iter().enumerate() {
        let ps_name = ps["name"].as_str().unwrap_or("main");
        let pods = ps["count"]
            .as_u64()
            .filter(|c| *c >= 1)
            .ok_or(format!("spec.podSets[{i}].count: not a count"))?;
        let requests = pod_requests(&ps["template"]["spec"]);
        if requests.is_empty() {
            return Err(format!("spec.podSets[{i}] ({ps_name}): its containers request nothing"));
        }
        jobs.push(Job {
            name: match &gang {
                Some(_) => format!("{namespace}-{base}-{ps_name}"),
                None => format!("{namespace}-{base}"),
            },
            namespace: namespace.clone(),
            queue: queue.to_string(),
            priority_class: spec["priorityClassName"]
                .as_str()
                .filter(|p| !p.is_empty())
                .map(str::to_string),
            pods: pods as u32,
            min_count: ps["minCount"].as_u64().map(|m| m as u32),
            requests,
            arrival: created - window.since_ms,
            duration,
            gang: gang.clone(),
        });
    }
    Ok(Some((jobs, reserved.map(|r| (r - created).max(0)))))
}

/// A pod's requests: each container's requests (its limits where it has
/// no requests), summed, as the quantities were written.
fn pod_requests(pod: &Value) -> BTreeMap<String, String> {
    let mut milli: BTreeMap<String, i128> = BTreeMap::new();
    for c in pod["containers"].as_array().into_iter().flatten() {
        let res = &c["resources"];
        let requests = res["requests"]
            .as_object()
            .filter(|r| !r.is_empty())
            .or(res["limits"].as_object());
        for (r, q) in requests.into_iter().flatten() {
            let text = match q {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Ok(m) = sluice_api::quantity::parse_amount(r, "", &text) {
                *milli.entry(r.clone()).or_default() += m;
            }
        }
    }
    milli
        .into_iter()
        .map(|(r, m)| {
            let q = sluice_api::quantity::format_amount(&r, m);
            (r, q)
        })
        .collect()
}

fn time(v: &Value) -> Option<Millis> {
    v.as_str()?
        .parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// When condition `type_` last became True.
fn condition_time(wl: &Value, type_: &str) -> Option<Millis> {
    wl["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"].as_str() == Some(type_) && c["status"].as_str() == Some("True"))
        .and_then(|c| time(&c["lastTransitionTime"]))
}

/// A duration the trace reads back exactly.
fn exact(ms: Millis) -> String {
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn render(jobs: &[Job]) -> String {
    let mut out =
        String::from("apiVersion: sluice.dev/v1alpha1\nkind: Trace\nmetadata:\n  name: recorded\nspec:\n  jobs:\n");
    if jobs.is_empty() {
        out = out.replace("  jobs:\n", "  jobs: []\n");
    }
    for j in jobs {
        let _ = writeln!(out, "    - name: {}", j.name);
        let _ = writeln!(out, "      namespace: {}", j.namespace);
        let _ = writeln!(out, "      queue: {}", j.queue);
        if let Some(p) = &j.priority_class {
            let _ = writeln!(out, "      priorityClass: {p}");
        }
        let _ = writeln!(out, "      arrival: {}", exact(j.arrival));
        let _ = writeln!(out, "      duration: {}", exact(j.duration));
        let _ = writeln!(out, "      pods: {}", j.pods);
        if let Some(m) = j.min_count {
            let _ = writeln!(out, "      minCount: {m}");
        }
        if let Some(g) = &j.gang {
            let _ = writeln!(out, "      gang: {g}");
        }
        let requests: Vec<String> = j.requests.iter().map(|(r, q)| format!("{r}: \"{q}\"")).collect();
        let _ = writeln!(out, "      requests: {{{}}}", requests.join(", "));
    }
    out
}

#[cfg(test)]
mod tests;
