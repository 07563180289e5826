//! When a run has stopped moving, and why its workloads wait. No I/O: the
//! run loop feeds [`Sample`]s of what its watch saw to a [`StallRule`] and
//! reads the [`Verdict`]; once stalled, it lists the run's Workloads and
//! [`pending_reasons`] groups the reasons the controller wrote on them.
//!
//! A run is **stalled** when, for `--stall-window`, workloads wait (created,
//! neither running nor finished), none runs, and none was admitted or
//! finished. While a workload runs the harness will mark it `Finished`
//! after its run time, which frees quota, so a long run time is not a
//! stall; with nothing running and nothing admitted, nothing will change
//! by itself: the controller admits nothing (e.g. `--placement=nodes` on a
//! cluster without Nodes, where every workload waits with "no node
//! matches"), or the workloads can never fit.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use sluice_api::v1alpha1::Workload;
use sluice_api::v1alpha1::conditions as cond;

use crate::track::{self, Ms};

/// What the run looked like at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// Milliseconds since the start of the run.
    pub at: Ms,
    /// Admissions so far (re-admissions included).
    pub admissions: u64,
    /// Workloads seen finished so far.
    pub finished: u64,
    /// Created and neither running nor finished.
    pub pending: u64,
    /// Admitted, not evicted, not finished.
    pub running: u64,
}

/// A stall: workloads have waited with nothing running and nothing
/// admitted or finished since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub since: Ms,
    /// Workloads waiting at the sample that found the stall.
    pub pending: u64,
}

/// The rule's answer to a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Moving,
    Stalled(Stall),
}

/// The stall rule over samples in time order (see the module's
/// documentation); `window` in milliseconds.
#[derive(Debug, Clone)]
pub struct StallRule {
    window: Ms,
    /// Since when workloads have waited with nothing running and no
    /// admission or finish.
    idle_since: Option<Ms>,
    /// (admissions, finished) of the previous sample.
    last: Option<(u64, u64)>,
}

impl StallRule {
    pub fn new(window: Ms) -> Self {
        Self {
            window,
            idle_since: None,
            last: None,
        }
    }

    /// Takes the next sample and says whether the run is stalled.
    pub fn sample(&mut self, s: Sample) -> Verdict {
        let counts = (s.admissions, s.finished);
        let progressed = self.last.is_some_and(|last| last != counts);
        self.last = Some(counts);
        if s.pending == 0 || s.running > 0 {
            self.idle_since = None;
            return Verdict::Moving;
        }
        // Admitted or finished since the last sample: idle from now on.
        let since = match self.idle_since {
            Some(t) if !progressed => t,
            _ => s.at,
        };
        self.idle_since = Some(since);
        if s.at - since >= self.window {
            Verdict::Stalled(Stall {
                since,
                pending: s.pending,
            })
        } else {
            Verdict::Moving
        }
    }
}

/// How many waiting workloads give one reason; `reason` is `None` for
/// those the controller has not explained yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCount {
    pub workloads: u64,
    pub reason: Option<String>,
}

/// Why a waiting workload waits, as the controller wrote it:
/// `status.pending` (reason code, summary, then each flavor's verdict), or
/// else the reason and message of its `QuotaReserved=False` condition.
/// The queue position the controller appends ("(position 3 in
/// ClusterQueue, 1 in LocalQueue)") is left out, so that workloads waiting
/// for the same reason read the same. `None`: no reason written yet.
pub fn pending_reason(wl: &Workload) -> Option<String> {
    let status = wl.status.as_ref()?;
    if let Some(p) = &status.pending {
        let mut out = p.reason.clone();
        let summary = without_position(&p.message);
        if !summary.is_empty() {
            let _ = write!(out, ": {summary}");
        }
        for f in &p.flavors {
            let _ = write!(out, "; {}: {}", f.name, f.message);
        }
        return Some(out);
    }
    let c = status
        .condition(cond::QUOTA_RESERVED)
        .filter(|c| c.status == cond::status::FALSE && !c.reason.is_empty())?;
    let message = without_position(&c.message);
    Some(if message.is_empty() {
        c.reason.clone()
    } else {
        format!("{}: {message}", c.reason)
    })
}

/// `message` without a trailing " (position N in ClusterQueue, M in
/// LocalQueue)".
fn without_position(message: &str) -> &str {
    match message.rfind(" (position ") {
        Some(i) if message.ends_with(" in LocalQueue)") => &message[..i],
        _ => message,
    }
}

/// The reasons of the waiting workloads among `workloads` (those neither
/// running nor finished), grouped: most workloads first, then by reason;
/// the unexplained last.
pub fn pending_reasons<'a>(workloads: impl IntoIterator<Item = &'a Workload>) -> Vec<ReasonCount> {
    let mut groups: BTreeMap<Option<String>, u64> = BTreeMap::new();
    for wl in workloads {
        let waiting = track::observe(wl).map_or(true, |o| !o.running() && !o.finished);
        if waiting {
            *groups.entry(pending_reason(wl)).or_default() += 1;
        }
    }
    let mut out: Vec<ReasonCount> = groups
        .into_iter()
        .map(|(reason, workloads)| ReasonCount { workloads, reason })
        .collect();
    out.sort_by(|a, b| {
        (a.reason.is_none(), std::cmp::Reverse(a.workloads), &a.reason).cmp(&(
            b.reason.is_none(),
            std::cmp::Reverse(b.workloads),
            &b.reason,
        ))
    });
    out
}

#[cfg(test)]
mod tests;
