//! Pending explanations: a workload's explanation is written only when its
//! reason changes (a fingerprint, not the text, is kept per workload), and
//! writes are handed out in bounded batches with the engine's explanation
//! as it is then.

use sluice_api::v1alpha1::{WorkloadStatus, conditions as cond};
use sluice_convert::text;
use sluice_scheduler::{Explanation, ReservationMoved, WorkloadState};

use super::status::{self, verdict_reason};
use super::{Index, WlEntry};
use crate::plan::{Plan, Purpose, Step};

impl Index {
    pub(super) fn on_pending(&mut self, uid: &str, expl: &Explanation, now_ms: i64) {
        let Some(wk) = self.table.by_uid.get(uid).cloned() else {
            return;
        };
        if !matches!(
            self.engine.workload_state(uid),
            Some(WorkloadState::Pending | WorkloadState::Preempting)
        ) {
            return;
        }
        let e = self.table.workloads.get_mut(&wk).expect("indexed");
        // Same reason (per flavor too) as what is written: nothing to write,
        // even if the numbers or the position moved (e.g. after a restart).
        let fp = explanation_fp(
            expl.reason_code(),
            expl.flavors
                .iter()
                .map(|f| (f.flavor.as_str(), verdict_reason(&f.verdict))),
        );
        if e.written.pending_fp == Some(fp) {
            return;
        }
        e.written.pending_fp = Some(fp);
        // The text is not kept here (15 000 pending workloads would hold
        // 15 000 copies of a few shared explanations): `take_explanations`
        // writes the engine's explanation as it is then.
        status::pending(
            &mut e.written.status,
            expl.reason_code(),
            e.observed.active,
            now_ms,
            e.observed.generation,
        );
        self.outbox.explain.insert(uid.to_string());
    }

    /// A reservation that starts later than its head was told: the head's
    /// explanation is written again (its reason, `Reserved`, did not
    /// change, so [`Index::on_pending`] would not), and an Event on it says
    /// from when to when, and what went ahead of it.
    pub(super) fn on_reservation_moved(&mut self, m: &ReservationMoved) {
        let Some(wk) = self.table.by_uid.get(&*m.uid).cloned() else {
            return;
        };
        self.outbox.explain.insert(m.uid.to_string());
        let note = text::reservation_moved(m);
        let steps = self.events(&wk, "Normal", text::RESERVATION_MOVED, "Reserve", &note);
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps,
        });
    }

    /// A workload that waiting alone cannot help
    /// ([`cond::reasons::waiting_cannot_admit`]: its quota or the nodes can
    /// never hold it, its LocalQueue or ClusterQueue does not exist, a
    /// resource no group covers) gets a Warning Event with the whole explanation,
    /// on it and on its objects, with the write of that explanation (made
    /// once per reason).
    fn inadmissible_events(&self, wk: &super::ObjKey, uid: &str) -> Vec<Step> {
        match self.engine.explanation(uid) {
            Some(expl) if cond::reasons::waiting_cannot_admit(expl.reason_code()) => {
                let note = sluice_convert::text::explanation(expl);
                self.events(wk, "Warning", expl.reason_code(), "Admit", &note)
            }
            _ => Vec::new(),
        }
    }

    /// The status to write for a pending workload: what the index keeps,
    /// with the engine's current explanation and position filled in.
    pub(super) fn pending_status(&self, uid: &str, e: &WlEntry, now_ms: i64) -> WorkloadStatus {
        let mut status = e.written.status.clone();
        let Some(expl) = self.engine.explanation(uid) else {
            return status;
        };
        let pos = self.engine.position(uid);
        status::explained(&mut status, expl, pos, e.observed.active, now_ms, e.observed.generation);
        if let Some(p) = status.pending.as_mut() {
            p.estimated_start = self.estimate_of(uid).map(super::time_of);
        }
        status
    }

    /// Plans writing at most `max` changed explanations (the status as it
    /// is now; workloads no longer pending are skipped). The rest stay
    /// marked for later calls: memory and the write queue stay bounded,
    /// and the latest explanation is what gets written.
    ///
    /// A workload created less than `explain_after_ms` ago is left marked:
    /// most waits in a busy queue end sooner, and its admission then makes
    /// the only write.
    ///
    /// No more than `explanations_per_cycle` are out (handed out, not yet
    /// answered) at once.
    pub fn take_explanations(&mut self, max: usize, now_ms: i64) -> Vec<Plan> {
        let max = max.min(
            self.config
                .explanations_per_cycle
                .saturating_sub(self.outbox.explain_out),
        );
        let grace = self.config.explain_after_ms;
        let mut due = Vec::new();
        let mut gone = Vec::new();
        for uid in &self.outbox.explain {
            if due.len() >= max {
                break;
            }
            match self.table.by_uid.get(uid).and_then(|wk| self.table.workloads.get(wk)) {
                Some(e) if grace > 0 && e.observed.created_ms.saturating_add(grace) > now_ms => {}
                Some(_) => due.push(uid.clone()),
                None => gone.push(uid.clone()),
            }
        }
        for uid in gone.iter().chain(&due) {
            self.outbox.explain.remove(uid);
        }
        let mut out = Vec::new();
        for uid in due {
            if !matches!(
                self.engine.workload_state(&uid),
                Some(WorkloadState::Pending | WorkloadState::Preempting)
            ) {
                continue;
            }
            let Some(wk) = self.table.by_uid.get(&uid).cloned() else {
                continue;
            };
            let Some(e) = self.table.workloads.get(&wk) else {
                continue;
            };
            let status = self.pending_status(&uid, e, now_ms);
            let seq = self.table.workloads.get_mut(&wk).expect("present").next_seq();
            let mut steps = vec![Step::workload_status(wk.clone(), uid.clone(), status, seq)];
            steps.extend(self.inadmissible_events(&wk, &uid));
            out.push(Plan {
                purpose: Purpose::Pending { uid },
                steps,
            });
        }
        self.outbox.explain_out += out.len();
        out
    }

    /// Explanations changed but not yet handed out.
    pub fn explanations_due(&self) -> usize {
        self.outbox.explain.len()
    }
}

/// What decides whether a pending explanation is worth a write: its reason
/// and, per flavor (first mention), the flavor's reason; not the numbers,
/// the wording or the position.
pub(super) fn explanation_fp<'a>(reason: &str, flavors: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the same explanation gives the same value in every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    reason.hash(&mut h);
    let mut seen: Vec<&str> = Vec::new();
    for (name, why) in flavors {
        if !seen.contains(&name) {
            seen.push(name);
            (name, why).hash(&mut h);
        }
    }
    h.finish()
}

/// Keeps only the fingerprint of an observed pending explanation (and
/// blanks its condition message): the text is rebuilt from the engine when
/// it is written again.
pub(super) fn slim_pending(e: &mut WlEntry) {
    e.written.pending_fp = e.written.status.pending.take().map(|p| {
        explanation_fp(
            &p.reason,
            p.flavors.iter().map(|f| (f.name.as_str(), f.reason.as_str())),
        )
    });
    if e.written.pending_fp.is_some()
        && let Some(c) = e
            .written
            .status
            .conditions
            .iter_mut()
            .find(|c| c.type_ == cond::QUOTA_RESERVED && c.status == cond::status::FALSE)
    {
        c.message = String::new();
    }
}
