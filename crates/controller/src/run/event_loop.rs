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
use super::queue_status::QueueStatusWriter;
use super::watches::all_watches;
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

#[allow(clippy::too_many_arguments)]
pub(super) async fn event_loop(
    client: Client,
    cfg: &RunConfig,
    mut io: LoopIo,
    mut leader_rx: watch::Receiver<bool>,
    lease_task: &mut Option<tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>>,
    shared: &Shared,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let mut stream = all_watches(&client, cfg);
    let mut cache = Cache::empty(cfg.index.kueue_compat);
    let mut index: Option<Mutex<Index>> = None;
    let mut cycle_at: Option<Instant> = None;
    let mut fenced_since: Option<Instant> = None;
    let mut queue_tick = tokio::time::interval(cfg.queue_status_interval);
    queue_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut queue_status = QueueStatusWriter::default();
    let coalesce = Duration::from_millis(50);
    let backlog = crate::limit::cycle_backlog(cfg.kube_qps, cfg.kube_burst);
    let mut idle_tick = tokio::time::interval(cfg.idle.interval.max(Duration::from_secs(1)));
    idle_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (idle_tx, mut idle_rx) = tokio::sync::mpsc::channel::<(u64, crate::index::IdleOutcome)>(1);
    let mut idle_in_flight = false;
    let mut positions_tick = tokio::time::interval(cfg.positions_interval.max(Duration::from_secs(1)));
    positions_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (forecast_tx, mut forecast_rx) = tokio::sync::mpsc::channel::<(u64, i64, HashMap<String, i64>)>(1);
    let mut forecast_in_flight = false;
    tokio::pin!(shutdown);
    loop {
        let sleep_until = cycle_at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
            msg = stream.next() => {
                let Some(msg) = msg else { return Ok(()) };
                let mut batch = vec![msg];
                // Take whatever else is ready: one cycle for a burst of events.
                while batch.len() < 1024 {
                    match futures::FutureExt::now_or_never(stream.next()) {
                        Some(Some(m)) => batch.push(m),
                        _ => break,
                    }
                }
                let mut ix = match &index { Some(m) => Some(m.lock().await), None => None };
                for m in batch {
                    handle(&mut cache, ix.as_deref_mut(), m, now_ms());
                }
                drop(ix);
                let all_synced = Kind::all()
                    .filter(|k| cfg.index.watches(*k))
                    .all(|k| cache.synced.contains(&k));
                shared.synced.store(all_synced, Ordering::Relaxed);
                let soon = Instant::now() + coalesce;
                cycle_at = Some(cycle_at.map_or(soon, |t| t.min(soon)));
            }
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
            _ = queue_tick.tick() => {
                // Nothing is handed out while the Lease fence refuses writes
                // (it would come back as failures).
                let fenced = io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
                if let Some(ix) = &index
                    && !fenced
                {
                    let mut ix = ix.lock().await;
                    // Refill explanation writes as they are answered (the
                    // index keeps at most explanations_per_cycle out), and
                    // hand out those whose grace period (--explain-after) ended.
                    let mut plans = ix.take_explanations(cfg.index.explanations_per_cycle, now_ms());
                    plans.extend(ix.take_finished_states());
                    plans.extend(queue_status.plans(&ix, &shared.metrics, cfg));
                    for plan in plans {
                        enqueue(&io.queue, &mut ix, plan, &shared.metrics);
                    }
                }
                continue;
            }
            _ = idle_tick.tick() => {
                let fenced = io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
                if let Some(ix) = &index
                    && !fenced
                    && !idle_in_flight
                {
                    let targets = {
                        let ix = ix.lock().await;
                        ix.has_idle_policies().then(|| ix.idle_targets(now_ms()))
                    };
                    if let Some(targets) = targets {
                        idle_in_flight = true;
                        let (checker, tx, epoch) = (io.checker.clone(), idle_tx.clone(), io.queue.epoch());
                        tokio::spawn(async move {
                            let outcome = checker.check(targets, now_ms()).await;
                            let _ = tx.send((epoch, outcome)).await;
                        });
                    }
                }
                continue;
            }
            _ = positions_tick.tick() => {
                let fenced = io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
                if let Some(ix) = &index
                    && !fenced
                    && !forecast_in_flight
                {
                    // The copy is made under the lock; the forecast runs off it.
                    let now = now_ms();
                    let job = ix.lock().await.forecast_job(now);
                    forecast_in_flight = true;
                    let (tx, epoch) = (forecast_tx.clone(), io.queue.epoch());
                    tokio::spawn(async move {
                        let estimates = tokio::task::spawn_blocking(move || job.run()).await.unwrap_or_default();
                        let _ = tx.send((epoch, now, estimates)).await;
                    });
                }
                continue;
            }
            Some((epoch, at, estimates)) = forecast_rx.recv() => {
                forecast_in_flight = false;
                if let Some(m) = &index
                    && epoch == io.queue.epoch()
                {
                    // Workloads' own positions wait while admissions or
                    // evictions wait to be written (the lists always go).
                    let publish = io.queue.state_len() == 0;
                    m.lock().await.refresh_positions(estimates, at, publish);
                }
                continue;
            }
            Some((epoch, outcome)) = idle_rx.recv() => {
                idle_in_flight = false;
                if let crate::index::IdleOutcome::Unavailable { metric, .. } = &outcome {
                    shared.metrics.idle_check_failures.get_or_create(&vec![("reason", metric.to_string())]).inc();
                }
                if let Some(m) = &index
                    && epoch == io.queue.epoch()
                {
                    let mut ix = m.lock().await;
                    let applied = ix.apply_idle(outcome, now_ms());
                    shared.metrics.idle(&applied);
                    for plan in ix.take_plans() {
                        enqueue(&io.queue, &mut ix, plan, &shared.metrics);
                    }
                    drop(ix);
                    if !applied.reclaims.is_empty() {
                        // Evictions and warnings to write, a waiter to admit.
                        cycle_at = Some(Instant::now());
                    }
                }
            }
            Some((epoch, plan, result)) = io.failed.recv() => {
                if plan.purpose == crate::plan::Purpose::QueueStatus {
                    queue_status.written(&plan, result.is_ok());
                    continue;
                }
                // About an index that is gone (leadership lost since).
                if epoch != io.queue.epoch() {
                    continue;
                }
                if let Some(m) = &index {
                    let mut ix = m.lock().await;
                    ix.feedback(&plan, &result, now_ms());
                    // A rolled-back admission, a failed write or a requeue
                    // after the pods are gone is worked on a little later
                    // (an acknowledged write needs nothing).
                    if result.is_err() || matches!(plan.purpose, crate::plan::Purpose::ConfirmPodsGone { .. }) {
                        let retry = Instant::now() + Duration::from_secs(1);
                        cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
                    }
                }
                continue;
            }
            changed = leader_rx.changed() => {
                if changed.is_err() {
                    return Err(RunError::Lease("lease task ended".into()));
                }
                let leading = *leader_rx.borrow();
                tracing::info!(leading, "leadership changed");
                if !leading {
                    io.queue.clear();
                    queue_status = QueueStatusWriter::default();
                    if index.take().is_some() {
                        // The leader's cache kept Workloads as keys only:
                        // list everything again, as a follower that may
                        // lead later.
                        cache = Cache::empty(cfg.index.kueue_compat);
                        stream = all_watches(&client, cfg);
                        shared.synced.store(false, Ordering::Relaxed);
                    }
                }
            }
            done = async { match lease_task.as_mut() { Some(t) => t.await, None => std::future::pending().await } } => {
                *lease_task = None;
                return Err(RunError::Lease(match done {
                    Ok(Ok(_)) => "lease task ended".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                }));
            }
        }
        let leading = *leader_rx.borrow();
        // The Lease as the API server shows it must name us and be fresh
        // (it lags the lease manager by a watch event at most).
        let fenced = leading && io.fence.as_ref().is_some_and(|f| !f.allows(now_ms()));
        if fenced {
            let retry = Instant::now() + Duration::from_secs(1);
            cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
            // Holding the Lease but never seeing it (its watch fails): no
            // other replica could take over. Stop, so that it expires.
            let since = *fenced_since.get_or_insert_with(Instant::now);
            let limit = Duration::from_secs(cfg.lease.as_ref().map_or(15, |l| l.duration_seconds).saturating_mul(2));
            if since.elapsed() > limit {
                return Err(RunError::Lease(format!(
                    "holding the Lease, but the Lease as the API server shows it has not named this replica for {}s (is its watch failing?); stopping so that another replica takes over",
                    limit.as_secs()
                )));
            }
        } else {
            fenced_since = None;
        }
        let synced = shared.synced.load(Ordering::Relaxed);
        if leading && !fenced && synced && index.is_none() {
            let ix = build_index(&cache, &cfg.index);
            cache.keep_workload_keys_only();
            tracing::info!(
                workloads = ix.engine().workload_count(),
                unrestored = ix.unrestored(),
                "leading: ledger rebuilt from Workload statuses"
            );
            index = Some(Mutex::new(ix));
            cycle_at = Some(Instant::now());
        }
        shared
            .ready
            .store(synced && (!leading || index.is_some()), Ordering::Relaxed);
        let mut due = cycle_at.is_some_and(|t| t <= Instant::now());
        if due && io.queue.state_len() > backlog {
            // The writer has a second of decisions to write: decide later,
            // on what the cluster looks like then (see `cycle_backlog`).
            due = false;
            cycle_at = Some(Instant::now() + Duration::from_millis(20));
        }
        if let Some(m) = &index
            && due
            && !fenced
        {
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
            // Workloads whose status write failed: read them again.
            let refetch = m.lock().await.take_workload_refetch();
            for key in refetch {
                let api: Api<Workload> = Api::namespaced(client.clone(), &key.namespace);
                match tokio::time::timeout(writer::CALL_TIMEOUT, api.get_opt(&key.name)).await {
                    Ok(Ok(Some(wl))) => m.lock().await.apply_fetched_workload(&wl, now_ms()),
                    // Gone: its deletion comes through the watch.
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => tracing::warn!(workload = %key, error = %e, "cannot read Workload"),
                    Err(_) => tracing::warn!(workload = %key, "reading Workload timed out"),
                }
            }
            // Objects whose Workload must be (re)created: read them again.
            let refetch = m.lock().await.take_refetch();
            if !refetch.is_empty() {
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
                        Ok(Err(e)) => tracing::warn!(kind, object = %key, error = %e, "cannot read it"),
                        Err(_) => tracing::warn!(kind, object = %key, "reading it timed out"),
                    }
                }
            }
            cycle_at = wake.and_then(|w| wake_instant(Instant::now(), now_ms(), w));
            // Rolled-back admissions are retried a little later.
            if m.lock().await.wants_cycle() {
                let retry = Instant::now() + Duration::from_secs(1);
                cycle_at = Some(cycle_at.map_or(retry, |t| t.min(retry)));
            }
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
    for kind in stats.drift {
        m.drift.get_or_create(&vec![("kind", kind.to_string())]).inc();
    }
    m.unrestored.set(ix.unrestored() as i64);
}
