//! Multi-Job gangs, as pure functions.
//!
//! Jobs of one namespace labelled with the same [`labels::GANG`] name and
//! [`labels::GANG_SIZE`] `N` are one workload: the Workload `gang-<name>`
//! ([`workload_name`]), made once all `N` Jobs exist ([`assess`]), with one
//! pod set per Job (named after the Job, as the simulator names them), an
//! owner reference to each Job (none of them its controller: the Workload
//! goes when the last of them goes) and the [`labels::GANG`] label. Its
//! members are the pod set names; their uids are the owner references'.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::labels;
use sluice_api::v1alpha1::Workload;

use crate::job::{self, JobError};

/// Prefix of a gang's Workload name.
pub const WORKLOAD_PREFIX: &str = "gang-";

/// The name of gang `gang`'s Workload.
pub fn workload_name(gang: &str) -> String {
    format!("{WORKLOAD_PREFIX}{gang}")
}

pub use member::Labels;

impl Labels {
    /// The gang size: a positive integer.
    pub fn size(&self) -> Result<usize, GangError> {
        let raw = self.size.as_deref().ok_or_else(|| GangError::MissingSize {
            gang: self.name.clone(),
        })?;
        match raw.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(GangError::BadSize {
                gang: self.name.clone(),
                value: raw.to_string(),
            }),
        }
    }
}

/// The Workload name of a Job: its gang's, or its own.
pub fn workload_name_of(job_name: &str, gang: Option<&Labels>) -> String {
    match gang {
        Some(g) => workload_name(&g.name),
        None => job::workload_name(job_name),
    }
}

/// Why a gang's Jobs cannot become one Workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GangError {
    #[error("metadata.labels[{}]: must be set on every Job of gang {gang:?}", labels::GANG_SIZE)]
    MissingSize { gang: String },
    #[error(
        "metadata.labels[{}]: {value:?} is not a positive integer (gang {gang:?})",
        labels::GANG_SIZE
    )]
    BadSize { gang: String, value: String },
    #[error("gang {gang:?}: its Jobs disagree on {}: {found}", labels::GANG_SIZE)]
    SizeConflict { gang: String, found: String },
    #[error("gang {gang:?}: its Jobs are queued in different LocalQueues: {found}")]
    QueueConflict { gang: String, found: String },
    #[error("gang {gang:?}: {have} Jobs carry it, more than its {} of {want}", labels::GANG_SIZE)]
    TooMany { gang: String, have: usize, want: usize },
    #[error("gang {gang:?}: its Workload would be refused: {reason}")]
    Unusable { gang: String, reason: String },
    #[error("gang {gang:?}: Job {job}: {source}")]
    Member {
        gang: String,
        job: String,
        #[source]
        source: JobError,
    },
}

impl GangError {
    /// Short label for metrics and event reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            GangError::MissingSize { .. } | GangError::BadSize { .. } => "InvalidGangSize",
            GangError::SizeConflict { .. } | GangError::QueueConflict { .. } | GangError::TooMany { .. } => {
                "GangConflict"
            }
            GangError::Member { .. } | GangError::Unusable { .. } => "InvalidGangMember",
        }
    }
}

/// A gang member as [`assess`] reads it.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    pub job: &'a str,
    pub labels: &'a Labels,
    pub queue: Option<&'a str>,
}

/// Where a gang stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// All its Jobs exist and agree: its Workload can be made.
    Complete { size: usize, queue: String },
    /// Fewer Jobs than its size.
    Incomplete { have: usize, want: usize },
    /// Its Jobs cannot be one Workload: nothing of it is admitted.
    Conflict(GangError),
}

/// Whether the Jobs carrying gang `gang` (in one namespace) make a whole
/// gang: every one names the same size and the same queue (a member
/// without a queue label conflicts with one that has it), and there are
/// exactly that many.
pub fn assess(gang: &str, members: &[Member<'_>]) -> Assessment {
    let mut sizes: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    let mut queues: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
    for m in members {
        match m.labels.size() {
            Ok(n) => sizes.entry(n).or_default().push(m.job),
            Err(e) => return Assessment::Conflict(e),
        }
        queues.entry(m.queue).or_default().push(m.job);
    }
    let listing = |groups: Vec<String>| groups.join("; ");
    if sizes.len() > 1 {
        let found = sizes
            .iter()
            .map(|(n, jobs)| format!("{n} ({})", jobs.join(", ")))
            .collect();
        return Assessment::Conflict(GangError::SizeConflict {
            gang: gang.to_string(),
            found: listing(found),
        });
    }
    if queues.len() > 1 {
        let found = queues
            .iter()
            .map(|(q, jobs)| format!("{} ({})", q.unwrap_or("no queue label"), jobs.join(", ")))
            .collect();
        return Assessment::Conflict(GangError::QueueConflict {
            gang: gang.to_string(),
            found: listing(found),
        });
    }
    let Some((&want, _)) = sizes.iter().next() else {
        return Assessment::Incomplete { have: 0, want: 0 };
    };
    let have = members.len();
    if have > want {
        return Assessment::Conflict(GangError::TooMany {
            gang: gang.to_string(),
            have,
            want,
        });
    }
    match queues.keys().next() {
        Some(Some(q)) if have == want => Assessment::Complete {
            size: want,
            queue: q.to_string(),
        },
        _ => Assessment::Incomplete { have, want },
    }
}

/// What a waiting gang's Jobs are told.
pub fn waiting_message(gang: &str, have: usize, want: usize) -> String {
    format!("{have} of {want} Jobs of gang {gang} exist; admission waits for all of them")
}

/// The Workload of a complete gang (without status): one pod set per Job,
/// named after it, in the order of `jobs`; the highest priority of its
/// Jobs (and the WorkloadPriorityClass it came from).
pub fn workload_for_gang(
    gang: &str,
    queue: &str,
    jobs: &[&Job],
    workload_class: impl Fn(&str) -> Option<i32>,
    pod_class: impl Fn(&str) -> Option<i32>,
) -> Result<Workload, GangError> {
    let member_error = |job: &Job, source| GangError::Member {
        gang: gang.to_string(),
        job: job.metadata.name.clone().unwrap_or_default(),
        source,
    };
    let mut pod_sets = Vec::with_capacity(jobs.len());
    let mut owners = Vec::with_capacity(jobs.len());
    let mut best: Option<(i32, Option<String>)> = None;
    let mut namespace = None;
    for j in jobs {
        let (name, ns, uid) = job::identity(j).map_err(|e| member_error(j, e))?;
        namespace.get_or_insert(ns);
        pod_sets.push(job::pod_set_of(j, name).map_err(|e| member_error(j, e))?);
        owners.push(job::owner_reference(name, uid, false));
        let p = job::resolve_priority(j, &workload_class, &pod_class);
        if best.as_ref().is_none_or(|b| p.0 > b.0) {
            best = Some(p);
        }
    }
    let metadata = ObjectMeta {
        name: Some(workload_name(gang)),
        namespace: namespace.map(String::from),
        labels: Some(BTreeMap::from([
            (labels::QUEUE.to_string(), queue.to_string()),
            (labels::GANG.to_string(), gang.to_string()),
        ])),
        owner_references: Some(owners),
        ..Default::default()
    };
    let mut wl = crate::queued_workload(metadata, queue, pod_sets, best.unwrap_or((0, None)));
    // The gang runs until its longest Job ends; one without a declared
    // run time leaves the gang's undeclared.
    let declared: Option<Vec<i64>> = jobs.iter().map(|j| job::declared_runtime_ms(j)).collect();
    crate::declare_runtime(&mut wl, declared.and_then(|d| d.into_iter().max()));
    Ok(wl)
}

/// The members of a gang Workload: each pod set's name (its Job's) and,
/// where the Workload still has one, the uid of its owner reference to
/// that Job. `None` when the Workload is not a gang's.
pub fn members_of(wl: &Workload) -> Option<Vec<(String, Option<String>)>> {
    wl.metadata.labels.as_ref()?.get(labels::GANG)?;
    let owners = wl.metadata.owner_references.as_deref().unwrap_or_default();
    Some(
        wl.spec
            .pod_sets
            .iter()
            .map(|ps| {
                let uid = owners
                    .iter()
                    .find(|o| o.kind == "Job" && o.api_version == "batch/v1" && o.name == ps.name)
                    .map(|o| o.uid.clone());
                (ps.name.clone(), uid)
            })
            .collect(),
    )
}

pub mod member;

#[cfg(test)]
mod tests;
