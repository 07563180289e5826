//! What the index keeps of each Workload ([`WlEntry`]).

use std::collections::BTreeMap;

use sluice_api::v1alpha1::WorkloadStatus;
use sluice_scheduler as eng;

use super::visibility;
use crate::plan::{JobRef, ObjKey, Step};

/// What the index keeps of a Workload: a few fields and the status, not
/// the object (its pod templates are what the engine already holds).
pub(super) struct WlEntry {
    pub(super) uid: String,
    /// The controlling object (a Job, a JobSet) and its uid.
    pub(super) owner: Option<(JobRef, String)>,
    /// The [`job::JOB_UID_LABEL`]: made by Sluice for that Job (kept when
    /// the owner reference is stripped by an orphaning delete).
    pub(super) job_uid: Option<String>,
    /// A multi-Job gang's Workload: its gang and members.
    pub(super) gang: Option<GangEntry>,
    /// Its object's fields as last observed.
    pub(super) observed: Observed,
    /// The engine's view of it, kept only while it is not in the engine
    /// (waiting for its ClusterQueue).
    pub(super) spec: Option<Box<eng::WorkloadSpec>>,
    /// Its status, and the writes of it in flight (`workload.rs`,
    /// `feedback.rs`, `explain.rs`, `finish.rs`, `visibility.rs`).
    pub(super) written: Written,
    /// Where it stands in the engine and in its run (`workload.rs`,
    /// `cycle.rs`, `eviction.rs`, `jobs.rs`).
    pub(super) run: RunState,
}

/// A Workload object's fields the index reads, as last observed.
#[derive(Clone, Debug)]
pub(super) struct Observed {
    pub(super) generation: Option<i64>,
    pub(super) active: bool,
    pub(super) queue_name: String,
    /// `spec.priority` as observed.
    pub(super) priority: Option<i32>,
    /// Pods of the first pod set (a Job's parallelism).
    pub(super) count: i32,
    pub(super) created_ms: i64,
}

/// A Workload's status as the index holds it, and what it knows of the
/// writes of it.
#[derive(Clone, Debug, Default)]
pub(super) struct Written {
    /// The status as last written by us or observed, whichever is later,
    /// without the text of a pending explanation (see `pending_fp`).
    pub(super) status: WorkloadStatus,
    /// Fingerprint of the pending explanation last written or observed.
    pub(super) pending_fp: Option<u64>,
    /// Sequence number of the latest status write planned for it.
    pub(super) seq: u64,
    /// That write is not acknowledged yet: watch events (older than it)
    /// must not undo what it writes.
    pub(super) awaiting: bool,
    /// resourceVersion our last acknowledged status write produced: events
    /// older than it are stale.
    pub(super) written_rv: Option<u64>,
    /// A [`Step::PatchWorkloadState`] of it is due, queued or in flight.
    pub(super) state_out: bool,
    /// That write is due and not handed out yet
    /// ([`super::Index::take_finished_states`]).
    pub(super) state_due: bool,
    /// Position and estimate last handed to its status (pending only).
    pub(super) published: Option<visibility::Published>,
    /// Finished: `status` is cut down to its state and its Finished
    /// condition ([`super::finish::slim_finished`]), never written whole again.
    pub(super) slim: bool,
}

/// Where a Workload stands in the engine and in its run.
#[derive(Clone, Debug, Default)]
pub(super) struct RunState {
    /// Known to the engine (pending, admitted, evicting or finished).
    pub(super) in_engine: bool,
    /// Admission time (epoch ms) while admitted.
    pub(super) admitted_at: Option<i64>,
    /// All pods were ready at least once since admission.
    pub(super) pods_ready_seen: bool,
    /// The `PodsReady=True` write failed: retried on the next Job event.
    pub(super) pods_ready_unwritten: bool,
}

/// A gang Workload's members ([`sluice_kinds::gang::members_of`]).
#[derive(Clone, Debug, Default)]
pub(super) struct GangEntry {
    /// The [`sluice_api::labels::GANG`] name.
    pub(super) name: String,
    /// Job name (its pod set's) and the uid of its owner reference, if the
    /// Workload still has one.
    pub(super) members: Vec<(String, Option<String>)>,
    /// Members deleted after they finished (a Job's TTL), with their
    /// outcome (`true`: Complete): they count as finished, not as missing.
    /// Known only to this process.
    pub(super) done: BTreeMap<String, bool>,
}

impl WlEntry {
    /// Jobs run its pods: its own Job, or a gang's.
    pub(super) fn has_jobs(&self) -> bool {
        self.owner.is_some() || self.gang.is_some()
    }

    /// Numbers a status write about to be planned.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.written.seq += 1;
        self.written.awaiting = true;
        self.written.seq
    }

    /// The step that writes the status as the index now holds it,
    /// numbered with [`WlEntry::next_seq`].
    pub(super) fn status_write(&mut self, key: &ObjKey) -> Step {
        debug_assert!(!self.written.slim, "whole-status write of {key}, finished and cut down");
        if self.written.slim {
            tracing::error!(workload = %key, "a whole-status write of a finished workload whose status is cut down: fields may be removed");
        }
        let status = self.written.status.clone();
        let seq = self.next_seq();
        Step::workload_status(key.clone(), self.uid.clone(), status, seq)
    }
}
