//! The loop: watch events into the cache (and the index, when leading),
//! cycles when due, plans into the write queue, the writer's feedback back
//! into the index, queue status on its tick, leadership changes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, DynamicObject};
use sluice_api::v1alpha1::Workload;
use tokio::sync::{Mutex, watch};

use super::cache::{Cache, build_index, handle};
use super::lease::Election;
use super::queue_status::QueueStatusWriter;
use super::watches::{Msg, MsgStream, all_watches};
use super::{RunConfig, RunError, Shared, now_ms};
use crate::index::{Index, Kind};
use crate::metrics::Metrics;
use crate::writer;
use sluice_kinds::JobKind;

/// The loop's side of the writer: where plans go, and what comes back.
pub(super) struct LoopIo {
    pub(super) queue: Arc<writer::WriteQueue>,
    /// The writer's Lease fence (with leader election): no index is built
    /// and no cycle runs while it refuses writes.
    pub(super) fence: Option<Arc<writer::LeaseFence>>,
    pub(super) failed: tokio::sync::mpsc::UnboundedReceiver<(u64, crate::plan::Plan, writer::Feedback)>,
    /// Idle-GPU checks, run beside the loop.
    pub(super) checker: Arc<crate::idle::Checker>,
}

/// The loop's timers: when the next cycle runs, and since when the Lease
/// fence has refused writes while this replica leads.
#[derive(Default)]
struct Timing {
    cycle_at: Option<Instant>,
    fenced_since: Option<Instant>,
}

impl Timing {
    /// No cycle can run now: a deadline that has passed is not left in
    /// place (the loop would wake at once, again and again); a leader the
    /// fence holds looks again in a second, a follower waits for
    /// leadership.
    fn hold(&mut self, leader: bool) {
        if self.cycle_at.is_some_and(|t| t <= Instant::now()) {
            self.cycle_at = leader.then(|| Instant::now() + RETRY);
        }
    }

    /// When the loop wakes if nothing else happens.
    fn next_wake(&self) -> Instant {
        self.cycle_at
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))
    }

    /// A cycle no later than `after` from now.
    fn cycle_within(&mut self, after: Duration) {
        let at = Instant::now() + after;
        self.cycle_at = Some(self.cycle_at.map_or(at, |t| t.min(at)));
    }
}

/// Estimates of start times computed off the loop: (epoch, when, uid → ms).
type Estimates = (u64, i64, HashMap<String, i64>);

/// Runs until shutdown (or the lease task ends): waits for whatever
/// comes first (a watch event, a tick, work done off the loop, a write's
/// answer, a leadership change), then looks at the fence and leadership
/// and runs a cycle when one is due.
#[allow(clippy::too_many_arguments)]
pub(super) async fn event_loop(
    client: Client,
    cfg: &RunConfig,
    mut io: LoopIo,
    mut leader_rx: watch::Receiver<bool>,
    election: &mut Option<Election>,
    shared: &Shared,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let mut stream = all_watches(&client, cfg);
    let mut cache = Cache::empty(cfg.index.kueue_compat);
    let mut index: Option<Mutex<Index>> = None;
    let mut timing = Timing::default();
    let mut queue_status = QueueStatusWriter::default();
    let backlog = crate::limit::cycle_backlog(cfg.kube_qps, cfg.kube_burst);
    let mut ticks = Ticks::new(cfg);
    let mut off = OffLoop::new();
    tokio::pin!(shutdown);
    loop {
        let sleep_until = timing.next_wake();
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
            msg = stream.next() => {
                let Some(msg) = msg else { return Ok(()) };
                take_events(msg, &mut stream, &mut cache, &index, cfg, shared).await;
                // One cycle for a burst of events.
                timing.cycle_within(COALESCE);
            }
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
            _ = ticks.queue.tick() => {
                hand_out_lazy_writes(&index, &io, &mut queue_status, cfg, shared).await;
                continue;
            }
            _ = ticks.idle.tick() => {
                off.start_idle_check(&index, &io).await;
                continue;
            }
            _ = ticks.positions.tick() => {
                off.start_forecast(&index, &io).await;
                continue;
            }
            Some(estimates) = off.forecast_rx.recv() => {
                off.take_estimates(&index, &io, estimates).await;
                continue;
            }
            Some((epoch, outcome)) = off.idle_rx.recv() => {
                off.idle_in_flight = false;
                if apply_idle(&index, &io, shared, epoch, outcome).await {
                    // Evictions and warnings to write, a waiter to admit.
                    timing.cycle_at = Some(Instant::now());
                }
            }
            Some((epoch, plan, result)) = io.failed.recv() => {
                if written(&index, &io, &mut queue_status, epoch, &plan, &result).await {
                    timing.cycle_within(RETRY);
                }
                continue;
            }
            changed = leader_rx.changed() => {
                changed.map_err(|_| RunError::Lease("the election task ended".into()))?;
                if step_down(*leader_rx.borrow(), &io, &mut queue_status, &mut index) {
                    (cache, stream) = relist(&client, cfg, shared);
                }
            }
            why = lease_done(election) => {
                *election = None;
                return Err(RunError::Lease(why));
            }
        }
        // After whatever woke the loop: the fence, leadership, a cycle.
        let leading = *leader_rx.borrow();
        let fenced = check_fence(leading, &io, cfg, &mut timing)?;
        lead_when_ready(leading, fenced, cfg, shared, &mut cache, &mut index, &mut timing);
        decide(&client, &io, shared, &index, fenced, backlog, &mut timing).await;
    }
}

/// The loop's tickers: queue status, idle-GPU checks, queue positions.
struct Ticks {
    queue: tokio::time::Interval,
    idle: tokio::time::Interval,
    positions: tokio::time::Interval,
}

impl Ticks {
    fn new(cfg: &RunConfig) -> Self {
        Ticks {
            queue: interval(cfg.queue_status_interval),
            idle: interval(cfg.idle.interval.max(Duration::from_secs(1))),
            positions: interval(cfg.positions_interval.max(Duration::from_secs(1))),
        }
    }
}

/// Work done off the loop (idle-GPU checks, start-time estimates): where
/// its results come back, and whether one is running.
struct OffLoop {
    idle_tx: tokio::sync::mpsc::Sender<(u64, crate::index::IdleOutcome)>,
    idle_rx: tokio::sync::mpsc::Receiver<(u64, crate::index::IdleOutcome)>,
    idle_in_flight: bool,
    forecast_tx: tokio::sync::mpsc::Sender<Estimates>,
    forecast_rx: tokio::sync::mpsc::Receiver<Estimates>,
    forecast_in_flight: bool,
}

impl OffLoop {
    fn new() -> Self {
        let (idle_tx, idle_rx) = tokio::sync::mpsc::channel(1);
        let (forecast_tx, forecast_rx) = tokio::sync::mpsc::channel(1);
        OffLoop {
            idle_tx,
            idle_rx,
            idle_in_flight: false,
            forecast_tx,
            forecast_rx,
            forecast_in_flight: false,
        }
    }
}

impl OffLoop {
    /// An idle-GPU check started, unless one is running.
    async fn start_idle_check(&mut self, index: &Option<Mutex<Index>>, io: &LoopIo) {
        if !self.idle_in_flight {
            self.idle_in_flight = start_idle_check(index, io, &self.idle_tx).await;
        }
    }

    /// Start-time estimates started, unless they are being computed.
    async fn start_forecast(&mut self, index: &Option<Mutex<Index>>, io: &LoopIo) {
        if !self.forecast_in_flight {
            self.forecast_in_flight = start_forecast(index, io, &self.forecast_tx).await;
        }
    }

    /// Start-time estimates computed off the loop, into the index if they
    /// are of this leadership. Workloads' own positions wait while
    /// admissions or evictions wait to be written (the lists always go).
    async fn take_estimates(&mut self, index: &Option<Mutex<Index>>, io: &LoopIo, (epoch, at, estimates): Estimates) {
        self.forecast_in_flight = false;
        if let Some(m) = index
            && epoch == io.queue.epoch()
        {
            let publish = io.queue.state_len() == 0;
            m.lock().await.refresh_positions(estimates, at, publish);
        }
    }
}

/// Leadership changed (to `leading`): a replica that no longer leads
/// drops its queued writes and its index. Whether an index was dropped
/// (everything is then listed again).
fn step_down(
    leading: bool,
    io: &LoopIo,
    queue_status: &mut QueueStatusWriter,
    index: &mut Option<Mutex<Index>>,
) -> bool {
    tracing::info!(leading, "leadership changed");
    if leading {
        return false;
    }
    io.queue.clear();
    *queue_status = QueueStatusWriter::default();
    index.take().is_some()
}

/// A written plan's result: a queue status write is the queue status
/// writer's; any other goes back into the index (if of this leadership).
/// Whether a cycle should run again soon.
async fn written(
    index: &Option<Mutex<Index>>,
    io: &LoopIo,
    queue_status: &mut QueueStatusWriter,
    epoch: u64,
    plan: &crate::plan::Plan,
    result: &writer::Feedback,
) -> bool {
    if plan.purpose == crate::plan::Purpose::QueueStatus {
        queue_status.written(plan, result.is_ok());
        return false;
    }
    epoch == io.queue.epoch() && feedback(index, plan, result).await
}

/// The leader's cache kept Workloads as keys only: after stepping down,
/// everything is listed again, as a follower that may lead later.
fn relist(client: &Client, cfg: &RunConfig, shared: &Shared) -> (Cache, MsgStream) {
    let cache = Cache::empty(cfg.index.kueue_compat);
    let stream = all_watches(client, cfg);
    shared.synced.store(false, Ordering::Relaxed);
    (cache, stream)
}

/// Why the election's task ended (never, without leader election).
async fn lease_done(election: &mut Option<Election>) -> String {
    match election.as_mut() {
        Some(e) => e.ended().await,
        None => std::future::pending().await,
    }
}

/// A leader the fence allows, once every kind is listed, builds its index
/// (and runs a cycle at once); ready means able to serve as what this
/// replica is.
fn lead_when_ready(
    leading: bool,
    fenced: bool,
    cfg: &RunConfig,
    shared: &Shared,
    cache: &mut Cache,
    index: &mut Option<Mutex<Index>>,
    timing: &mut Timing,
) {
    let synced = shared.synced.load(Ordering::Relaxed);
    if leading && !fenced && synced && index.is_none() {
        *index = Some(Mutex::new(lead(cache, cfg)));
        timing.cycle_at = Some(Instant::now());
    }
    shared
        .ready
        .store(synced && (!leading || index.is_some()), Ordering::Relaxed);
}

/// A cycle when one is due; nothing to decide for a follower (leading
/// sets the next cycle) or a leader the fence holds (looked at again in a
/// second).
async fn decide(
    client: &Client,
    io: &LoopIo,
    shared: &Shared,
    index: &Option<Mutex<Index>>,
    fenced: bool,
    backlog: usize,
    timing: &mut Timing,
) {
    match index {
        Some(m) if !fenced => {
            if cycle_due(io, backlog, timing) {
                run_cycle(client, io, shared, m, backlog, timing).await;
            }
        }
        _ => timing.hold(index.is_some()),
    }
}

/// Watch events a cycle waits for, so that a burst is one cycle.
const COALESCE: Duration = Duration::from_millis(sluice_scheduler::pace::COALESCE_MS);
/// A failed write, a rolled-back admission or a pods-gone check: worked on
/// again this much later.
const RETRY: Duration = Duration::from_secs(1);

/// A tick that skips the ticks it missed.
fn interval(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick
}

/// Whether the Lease fence refuses writes now.
fn fence_refuses(io: &LoopIo) -> bool {
    io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()))
}

/// `first` and whatever else the watches have ready (up to 1024) into the
/// cache, and into the index when leading; whether every watched kind is
/// listed is shared.
async fn take_events(
    first: Msg,
    stream: &mut MsgStream,
    cache: &mut Cache,
    index: &Option<Mutex<Index>>,
    cfg: &RunConfig,
    shared: &Shared,
) {
    let mut batch = vec![first];
    while batch.len() < 1024 {
        match futures::FutureExt::now_or_never(stream.next()) {
            Some(Some(m)) => batch.push(m),
            _ => break,
        }
    }
    let mut ix = match index {
        Some(m) => Some(m.lock().await),
        None => None,
    };
    for m in batch {
        handle(cache, ix.as_deref_mut(), m, now_ms());
    }
    drop(ix);
    let all_synced = Kind::all()
        .filter(|k| cfg.index.watches(*k))
        .all(|k| cache.synced.contains(&k));
    shared.synced.store(all_synced, Ordering::Relaxed);
}

/// The lazy lanes' writes, on the queue-status tick: explanations whose
/// grace period (`--explain-after`) ended, refilled as they are answered
/// (at most `explanations_per_cycle` out), finished states, queue status.
/// Nothing is handed out while the Lease fence refuses writes (it would
/// come back as failures).
async fn hand_out_lazy_writes(
    index: &Option<Mutex<Index>>,
    io: &LoopIo,
    queue_status: &mut QueueStatusWriter,
    cfg: &RunConfig,
    shared: &Shared,
) {
    let Some(m) = index else { return };
    if fence_refuses(io) {
        return;
    }
    let mut ix = m.lock().await;
    ix.flush_usage(now_ms());
    let mut plans = ix.take_explanations(cfg.index.explanations_per_cycle, now_ms());
    plans.extend(ix.take_finished_states());
    plans.extend(queue_status.plans(&ix, &shared.metrics, cfg));
    for plan in plans {
        enqueue(&io.queue, &mut ix, plan, &shared.metrics);
    }
}

/// Starts an idle-GPU check off the loop when the index has idle
/// policies; whether one is now in flight.
async fn start_idle_check(
    index: &Option<Mutex<Index>>,
    io: &LoopIo,
    tx: &tokio::sync::mpsc::Sender<(u64, crate::index::IdleOutcome)>,
) -> bool {
    let Some(m) = index else { return false };
    if fence_refuses(io) {
        return false;
    }
    let targets = {
        let ix = m.lock().await;
        ix.has_idle_policies().then(|| ix.idle_targets(now_ms()))
    };
    let Some(targets) = targets else { return false };
    let (checker, tx, epoch) = (io.checker.clone(), tx.clone(), io.queue.epoch());
    tokio::spawn(async move {
        let outcome = checker.check(targets, now_ms()).await;
        let _ = tx.send((epoch, outcome)).await;
    });
    true
}

/// Starts a forecast of start times off the loop (the copy is made under
/// the lock; the forecast runs off it); whether one is now in flight.
async fn start_forecast(index: &Option<Mutex<Index>>, io: &LoopIo, tx: &tokio::sync::mpsc::Sender<Estimates>) -> bool {
    let Some(m) = index else { return false };
    if fence_refuses(io) {
        return false;
    }
    let now = now_ms();
    let job = m.lock().await.forecast_job(now);
    let (tx, epoch) = (tx.clone(), io.queue.epoch());
    tokio::spawn(async move {
        let estimates = tokio::task::spawn_blocking(move || job.run()).await.unwrap_or_default();
        let _ = tx.send((epoch, now, estimates)).await;
    });
    true
}

/// An idle-GPU check's outcome into the index (of the same leadership);
/// whether it reclaimed anything (a cycle then runs at once).
async fn apply_idle(
    index: &Option<Mutex<Index>>,
    io: &LoopIo,
    shared: &Shared,
    epoch: u64,
    outcome: crate::index::IdleOutcome,
) -> bool {
    if let crate::index::IdleOutcome::Unavailable { metric, .. } = &outcome {
        shared
            .metrics
            .idle_check_failures
            .get_or_create(&vec![("reason", metric.to_string())])
            .inc();
    }
    let Some(m) = index else { return false };
    if epoch != io.queue.epoch() {
        return false;
    }
    let mut ix = m.lock().await;
    let applied = ix.apply_idle(outcome, now_ms());
    shared.metrics.idle(&applied);
    for plan in ix.take_plans() {
        enqueue(&io.queue, &mut ix, plan, &shared.metrics);
    }
    !applied.reclaims.is_empty()
}

/// The writer's answer to a plan, into the index; whether it is worked on
/// again a little later (a rolled-back admission, a failed write, a
/// requeue after the pods are gone; an acknowledged write needs nothing).
async fn feedback(index: &Option<Mutex<Index>>, plan: &crate::plan::Plan, result: &writer::Feedback) -> bool {
    let Some(m) = index else { return false };
    m.lock().await.feedback(plan, result, now_ms());
    result.is_err() || matches!(plan.purpose, crate::plan::Purpose::ConfirmPodsGone { .. })
}

/// Whether the Lease fence refuses writes while this replica leads (the
/// Lease as the API server shows it must name us and be fresh; it lags the
/// election by a watch event at most). Holding the Lease but never
/// seeing it for twice its duration (its watch fails) is an error: no
/// other replica could take over, so the controller stops and the Lease
/// expires.
fn check_fence(leading: bool, io: &LoopIo, cfg: &RunConfig, timing: &mut Timing) -> Result<bool, RunError> {
    if !(leading && fence_refuses(io)) {
        timing.fenced_since = None;
        return Ok(false);
    }
    timing.cycle_within(RETRY);
    let since = *timing.fenced_since.get_or_insert_with(Instant::now);
    let limit = Duration::from_secs(cfg.lease.as_ref().map_or(15, |l| l.duration_seconds).saturating_mul(2));
    if since.elapsed() > limit {
        return Err(RunError::Lease(format!(
            "holding the Lease, but the Lease as the API server shows it has not named this replica for {}s (is its watch failing?); stopping so that another replica takes over",
            limit.as_secs()
        )));
    }
    Ok(true)
}

/// A new leader's index, built from the cache (the ledger restored from
/// Workload statuses first); the cache then keeps Workloads as keys only.
fn lead(cache: &mut Cache, cfg: &RunConfig) -> Index {
    let ix = build_index(cache, &cfg.index);
    cache.keep_workload_keys_only();
    tracing::info!(
        workloads = ix.engine().workload_count(),
        unrestored = ix.unrestored(),
        "leading: ledger rebuilt from Workload statuses"
    );
    ix
}

/// Whether a cycle runs now: it is due, and the writer does not have a
/// second of decisions still to write (else it is put off `DEFER_MS`, to decide
/// on what the cluster looks like then: see `cycle_backlog`).
fn cycle_due(io: &LoopIo, backlog: usize, timing: &mut Timing) -> bool {
    if timing.cycle_at.is_none_or(|t| t > Instant::now()) {
        return false;
    }
    if io.queue.state_len() > backlog {
        timing.cycle_at = Some(Instant::now() + Duration::from_millis(sluice_scheduler::pace::DEFER_MS));
        return false;
    }
    true
}

/// One cycle: the index decides (within the budget the write backlog
/// leaves), its plans are queued, Workloads and objects it needs read again
/// are read, and the next cycle is set (the engine's next wake-up, or a
/// retry of rolled-back admissions).
async fn run_cycle(
    client: &Client,
    io: &LoopIo,
    shared: &Shared,
    m: &Mutex<Index>,
    backlog: usize,
    timing: &mut Timing,
) {
    let started = Instant::now();
    let (plans, wake) = {
        let mut ix = m.lock().await;
        ix.set_cycle_budget(crate::limit::cycle_budget(backlog, io.queue.state_len()));
        let out = ix.cycle(now_ms());
        record_stats(&mut ix, &shared.metrics);
        out
    };
    shared.metrics.cycle_duration.observe(started.elapsed().as_secs_f64());
    {
        let mut ix = m.lock().await;
        for plan in plans {
            enqueue(&io.queue, &mut ix, plan, &shared.metrics);
        }
    }
    refetch_workloads(client, m).await;
    refetch_objects(client, m).await;
    timing.cycle_at = wake.and_then(|w| wake_instant(Instant::now(), now_ms(), w));
    if m.lock().await.wants_cycle() {
        timing.cycle_within(RETRY);
    }
}

/// Workloads whose status write failed: read again (one gone comes
/// through the watch as a deletion).
async fn refetch_workloads(client: &Client, m: &Mutex<Index>) {
    let refetch = m.lock().await.take_workload_refetch();
    for key in refetch {
        let api: Api<Workload> = Api::namespaced(client.clone(), &key.namespace);
        match tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(&key.name)).await {
            Ok(Ok(Some(wl))) => {
                crate::outage::succeeded();
                m.lock().await.apply_fetched_workload(&wl, now_ms());
            }
            Ok(Ok(None)) => crate::outage::succeeded(),
            Ok(Err(e)) => crate::outage::report("read", &e, &format!("cannot read Workload {key}")),
            Err(_) => crate::outage::failed("read", &format!("reading Workload {key} timed out")),
        }
    }
}

/// Objects whose Workload must be (re)created: read again.
async fn refetch_objects(client: &Client, m: &Mutex<Index>) {
    let refetch = m.lock().await.take_refetch();
    for key in refetch {
        let kind = key.kind.kind();
        let read = match key.kind {
            JobKind::Job => {
                let api: Api<Job> = Api::namespaced(client.clone(), key.namespace());
                tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(key.name()))
                    .await
                    .map(|r| r.map(|o| o.map(|j| serde_json::to_value(j).unwrap_or_default())))
            }
            _ => {
                let ar = key.kind.api_resource();
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), key.namespace(), &ar);
                tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(key.name()))
                    .await
                    .map(|r| r.map(|o| o.map(|d| serde_json::to_value(d).unwrap_or_default())))
            }
        };
        if matches!(read, Ok(Ok(_))) {
            crate::outage::succeeded();
        }
        match read {
            Ok(Ok(Some(v))) => {
                let mut ix = m.lock().await;
                match key.kind {
                    JobKind::Job => match serde_json::from_value::<Job>(v) {
                        Ok(j) => ix.apply_job(j, now_ms()),
                        Err(e) => ix.report_malformed(Kind::JOB, &key.to_string(), &e.to_string()),
                    },
                    other => ix.apply_object(other, &v, now_ms()),
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => crate::outage::report("read", &e, &format!("cannot read {kind} {key}")),
            Err(_) => crate::outage::failed("read", &format!("reading {kind} {key} timed out")),
        }
    }
}

/// Queues a plan; the index hears of the queued plans it supersedes,
/// which are counted as dropped.
pub(super) fn enqueue(queue: &writer::WriteQueue, ix: &mut Index, plan: crate::plan::Plan, metrics: &Metrics) {
    for old in queue.push(plan) {
        metrics.dropped(writer::Lane::of(&old.purpose).label(), "superseded");
        ix.superseded(&old);
    }
}

/// When to run the next cycle for a wake-up at `wake_ms`: never an
/// overflowing `Instant` (a far deadline saturates; events still wake the loop).
pub(super) fn wake_instant(now: Instant, now_ms: i64, wake_ms: i64) -> Option<Instant> {
    let wait = wake_ms.saturating_sub(now_ms).max(0) as u64;
    now.checked_add(Duration::from_millis(wait))
}

pub(super) fn record_stats(ix: &mut Index, m: &Metrics) {
    let stats = ix.take_stats();
    m.admitted.inc_by(stats.admitted as u64);
    m.preempted.inc_by(stats.preempted as u64);
    for r in stats.evicted {
        m.evicted.get_or_create(&vec![("reason", r.to_string())]).inc();
    }
    for w in stats.wait_seconds {
        m.wait_time.observe(w);
    }
    for (kind, reason) in stats.errors {
        m.reconcile_errors
            .get_or_create(&vec![("kind", kind.to_string()), ("reason", reason.to_string())])
            .inc();
    }
    m.pods_over_admission.inc_by(stats.pods_over_admission as u64);
    m.unqueued_gpu_pods.inc_by(stats.unqueued_gpu_pods as u64);
    for kind in stats.drift {
        m.drift.get_or_create(&vec![("kind", kind.to_string())]).inc();
    }
    m.unrestored.set(ix.unrestored() as i64);
}

#[cfg(test)]
mod timing_tests {
    use super::*;

    /// A replica that cannot run a cycle never keeps a deadline that has
    /// passed: the loop would wake at once, again and again (a follower
    /// used to spin after its first watch event).
    #[test]
    fn a_cycle_that_cannot_run_leaves_no_past_deadline() {
        let past = Instant::now() - Duration::from_millis(10);
        let mut follower = Timing {
            cycle_at: Some(past),
            fenced_since: None,
        };
        follower.hold(false);
        assert_eq!(follower.cycle_at, None);
        let mut fenced = Timing {
            cycle_at: Some(past),
            fenced_since: None,
        };
        fenced.hold(true);
        assert!(fenced.cycle_at.is_some_and(|t| t > Instant::now()));
        let later = Instant::now() + Duration::from_secs(5);
        let mut waiting = Timing {
            cycle_at: Some(later),
            fenced_since: None,
        };
        waiting.hold(false);
        assert_eq!(waiting.cycle_at, Some(later), "a deadline still ahead is kept");
    }
}
