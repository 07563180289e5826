//! What a run is given ([`Scenario`], [`SimOptions`]) and what it gives
//! back ([`SimResult`]: per-workload runs, per-queue time series).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_api::v1alpha1::IdlePolicy;
use sluice_scheduler::{ClusterQueueSpec, CohortSpec, FairSharing, FlavorSpec, LocalQueueSpec};

use super::forecast::ForecastOutcome;
use crate::fairness::FairnessOutcome;
use crate::idle::{DEFAULT_REQUEUE_LIMIT, IdleOutcome};
use crate::placement::PlacementOutcome;
use crate::trace::{ScenarioNode, TraceWorkload};
use crate::units::Millis;

/// Everything a run needs, already checked.
pub struct Scenario {
    pub name: String,
    pub flavors: Vec<FlavorSpec>,
    pub cluster_queues: Vec<ClusterQueueSpec>,
    pub local_queues: Vec<LocalQueueSpec>,
    pub workloads: Vec<TraceWorkload>,
    /// The Trace's `spec.evictionDelay`, if it sets one.
    pub eviction_delay: Option<Millis>,
    /// `spec.idleReclaim` of the ClusterQueues that have one, by name.
    pub idle_reclaim: BTreeMap<String, IdlePolicy>,
    /// `spec.preemption.noticeSeconds` of the ClusterQueues that set it,
    /// in ms, by name: their victims keep running that long (or until
    /// they have saved their state, `checkpointOnNotice`).
    pub notice: BTreeMap<String, Millis>,
    /// The Trace's `spec.idleInterval`, if it sets one.
    pub idle_interval: Option<Millis>,
    /// The Trace's `spec.nodes`; any at all runs the engine with
    /// [`sluice_scheduler::PlacementMode::Nodes`].
    pub nodes: Vec<ScenarioNode>,
    /// The scenario's Cohort documents, in file order.
    pub cohorts: Vec<CohortSpec>,
    /// The Trace's `spec.fairSharing` (on, both strategies, unless it says
    /// otherwise).
    pub fair_sharing: FairSharing,
    /// `spec.budget` of the ClusterQueues that have one, by name.
    pub budgets: BTreeMap<String, sluice_scheduler::usage::Budget>,
    /// The Trace's `spec.usageHalfLife`: fair sharing over time.
    pub usage_half_life: Option<Millis>,
    /// The Trace's `spec.resourceTransformations`, for the engine.
    pub transformations: Vec<sluice_scheduler::Transformation>,
}

#[derive(Debug, Clone)]
pub struct SimOptions {
    /// API writes per second for admissions and evictions; `None` = unlimited.
    pub api_qps: Option<f64>,
    pub api_burst: u32,
    /// Time one API write takes once it has its token (the writer makes
    /// them one at a time): what bounds the write rate without a limit.
    pub api_latency: Millis,
    /// Events gathered into one cycle: the controller's
    /// [`sluice_scheduler::pace::COALESCE_MS`]; 0 decides at each event's
    /// own instant.
    pub coalesce: Millis,
    /// Time from a workload's run time ending to the controller seeing it
    /// finished (its owner's `Finished` mark through the API, then the
    /// watch); its quota is held meanwhile.
    pub finish_lag: Millis,
    /// Time from the eviction write until the victim's pods are gone.
    pub eviction_delay: Millis,
    /// Time between idle-GPU checks; `None`: the Trace's
    /// `spec.idleInterval`, else 1 minute.
    pub idle_interval: Option<Millis>,
    /// Idle evictions of a workload that requeue it; the next deactivates
    /// it (the controller's `--requeue-limit`).
    pub requeue_limit: u32,
    /// Estimate every workload's start at its submission with
    /// [`sluice_scheduler::Engine::forecast`] and measure the estimates
    /// against what happened ([`ForecastOutcome`]). Off by default: it runs
    /// a forecast per arrival instant.
    pub forecast: bool,
    /// The run times workloads declare to the engine (backfill trusts them).
    pub declared_runtimes: super::DeclaredRuntimes,
    /// Every ClusterQueue's `backfill` policy instead of its own.
    pub backfill: Option<sluice_scheduler::Backfill>,
    /// Every ClusterQueue's `backfill.depth` instead of its own.
    pub backfill_depth: Option<u32>,
    /// Fair sharing over time with this half-life, instead of the Trace's
    /// `spec.usageHalfLife`.
    pub usage_half_life: Option<Millis>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            api_qps: None,
            api_burst: 1,
            api_latency: 0,
            coalesce: sluice_scheduler::pace::COALESCE_MS as Millis,
            finish_lag: 0,
            eviction_delay: 30_000,
            idle_interval: None,
            requeue_limit: DEFAULT_REQUEUE_LIMIT,
            forecast: false,
            declared_runtimes: super::DeclaredRuntimes::Trace,
            backfill: None,
            backfill_depth: None,
            usage_half_life: None,
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
    /// Evicted by idle-GPU reclaim (`Evict` or `Deactivate`).
    IdleReclaimed,
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
    /// Chosen as a victim: how long it ran on (its notice, or less).
    pub ran_on_ms: Millis,
    /// Cut short: the work of this run it kept (checkpoints), not done
    /// again by its next run.
    pub kept_ms: Millis,
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
    /// Deactivated by idle-GPU reclaim: evicted and never run again.
    pub deactivated: bool,
    /// A serving object removed by its owner (`serving`): while it
    /// waited, it was withdrawn, not left unadmitted.
    pub removed: bool,
}

impl WorkloadRecord {
    /// Time of the first admission write (pods first started).
    pub fn first_start(&self) -> Option<Millis> {
        // A run preempted before its admission write went through never started.
        self.runs.iter().find_map(|r| r.started_at)
    }

    /// Time of the latest admission write (the run it finished in).
    pub fn latest_start(&self) -> Option<Millis> {
        self.runs.iter().rev().find_map(|r| r.started_at)
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

/// A Cohort's own quota of one resource of one flavor (what it lends to
/// the queues below it): part of the cluster's capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortQuota {
    pub cohort: String,
    pub flavor: String,
    pub resource: String,
    /// Milli-units.
    pub nominal: i64,
}

/// The raw outcome of a run; `report` turns it into figures.
pub struct SimResult {
    pub workloads: Vec<TraceWorkload>,
    /// The Cohorts' own quota.
    pub cohort_quota: Vec<CohortQuota>,
    pub records: Vec<WorkloadRecord>,
    pub queues: Vec<QueueSeries>,
    pub end: Millis,
    pub cycles: u64,
    pub api_writes: u64,
    pub write_delay_total: i64,
    pub write_delay_max: i64,
    /// Idle-GPU reclaim's doings; `None` unless some ClusterQueue has
    /// `idleReclaim` or some workload a utilisation profile.
    pub idle: Option<IdleOutcome>,
    /// Start-time estimates made at submission; `None` unless
    /// [`SimOptions::forecast`].
    pub forecast: Option<ForecastOutcome>,
    /// Waits for nodes against waits for quota; `None` unless the scenario
    /// declares nodes.
    pub placement: Option<PlacementOutcome>,
    /// Weighted shares over time; `None` unless some ClusterQueue is in a
    /// cohort.
    pub fairness: Option<FairnessOutcome>,
    /// The same run with no ClusterQueue reserving; `None` unless some
    /// ClusterQueue has `backfill: Reserve`.
    pub without_backfill: Option<BackfillBaseline>,
    /// Usage over time and budgets; `None` unless some ClusterQueue has a
    /// budget or the run a usage half-life.
    pub usage: Option<UsageOutcome>,
}

/// Usage over time of a run ([`SimResult::usage`]).
#[derive(Debug, Clone)]
pub struct UsageOutcome {
    /// Fair sharing over time with this half-life.
    pub half_life: Option<Millis>,
    /// Per ClusterQueue, in name order.
    pub queues: Vec<QueueUsage>,
}

/// One ClusterQueue's GPU-hours over the run.
#[derive(Debug, Clone)]
pub struct QueueUsage {
    pub name: String,
    pub gpu_hours: f64,
    /// (time, GPU-hours used so far), every virtual hour and at the end.
    pub series: Vec<(Millis, f64)>,
    /// Its budget and the spending of the period the run ends in.
    pub budget: Option<(sluice_scheduler::usage::Budget, sluice_scheduler::usage::Spending)>,
    /// When its budget's action changed.
    pub actions: Vec<BudgetEvent>,
}

/// A budget's action changed (before a cycle at `at_ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetEvent {
    pub at_ms: Millis,
    pub cluster_queue: String,
    /// `None`: within budget again.
    pub action: Option<sluice_scheduler::BudgetAction>,
}

/// The run [`SimResult::without_backfill`]: which queues reserved in the
/// run it is compared with, and its outcome.
pub struct BackfillBaseline {
    pub reserving: Vec<String>,
    pub run: Box<SimResult>,
}

/// Progress of a run, for the terminal indicator.
pub struct Progress {
    pub now: Millis,
    pub done: usize,
    pub total: usize,
}
