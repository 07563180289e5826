//! The harness's writes: Workload creations in plan order (a failed one
//! again [`RETRY_MS`] later) and Finished marks when a run time is up.
//!
//! At most `--concurrency` creations and as many Finished marks are in
//! flight, every try under the `--harness-qps` bucket. A task is spawned
//! only with a permit in hand: a backlog (50 000 arrivals due at once in
//! kueue-large-scale) stays an index into the plan and a heap of timers,
//! not 50 000 waiting tasks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::Value;
use sluice_api::v1alpha1::conditions as cond;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use super::msg::Msg;
use super::progress::Warnings;
use super::{RETRY_MS, RunOptions};
use crate::cluster::{self, CallError};
use crate::plan::Plan;
use crate::track::{FinishAt, Ms, Tracker};
use sluice_controller::limit::Limiter;

/// What a write task needs: where it writes, under which limit, and where
/// it says it is done.
pub(super) struct Writer<'a> {
    client: &'a Client,
    pub(super) plan: &'a Plan,
    tx: mpsc::UnboundedSender<Msg>,
    limiter: Arc<Limiter>,
}

impl<'a> Writer<'a> {
    pub(super) fn new(client: &'a Client, plan: &'a Plan, opts: &RunOptions, tx: mpsc::UnboundedSender<Msg>) -> Self {
        Self {
            client,
            plan,
            tx,
            limiter: Arc::new(Limiter::new(opts.harness_qps, opts.harness_burst)),
        }
    }

    /// Creates the plan's workload `index` (server-side apply) in a task.
    fn create(&self, tasks: &mut JoinSet<()>, permit: OwnedSemaphorePermit, index: usize) {
        let w = self.plan.workloads[index].clone();
        let api = cluster::workloads(self.client, &w.namespace);
        let (tx, run_id, limiter) = (self.tx.clone(), self.plan.run_id.clone(), self.limiter.clone());
        tasks.spawn(async move {
            // Built once a creation may go: a backlog holds no bodies.
            let result = match serde_json::to_value(w.object(&run_id)) {
                Ok(body) => cluster::apply_limited(&api, &w.name, &body, &limiter).await,
                Err(e) => Err(CallError::Api(kube::Error::SerdeError(e))),
            };
            let at = Instant::now();
            // Given back before the answer is read: the loop may start
            // the next one as soon as it hears of this one.
            drop(permit);
            let _ = tx.send(Msg::Created { index, at, result });
        });
    }

    /// Marks the plan's workload `index` Finished (its admission `epoch`,
    /// object `generation`) in a task.
    fn finish(
        &self,
        tasks: &mut JoinSet<()>,
        permit: OwnedSemaphorePermit,
        index: usize,
        epoch: u32,
        generation: Option<i64>,
    ) {
        let w = &self.plan.workloads[index];
        let body = finish_body(&w.namespace, &w.name, generation, w.runtime, Timestamp::now());
        let api = cluster::workloads(self.client, &w.namespace);
        let (tx, name, limiter) = (self.tx.clone(), w.name.clone(), self.limiter.clone());
        tasks.spawn(async move {
            let result = cluster::retry(|| async {
                limiter.acquire().await;
                cluster::apply_status(&api, &name, &body).await
            })
            .await;
            drop(permit);
            let _ = tx.send(Msg::Finished { index, epoch, result });
        });
    }
}

/// The creations: the plan's arrivals in order, and failed ones to try
/// again.
pub(super) struct Creations {
    /// The plan's next arrival.
    next: usize,
    /// Creations the API server took.
    pub(super) created: usize,
    /// (when, index) of creations to try again.
    retries: BinaryHeap<Reverse<(Ms, usize)>>,
    permits: Arc<Semaphore>,
    warnings: Warnings,
    /// Tries that failed and were tried again.
    pub(super) write_errors: u64,
}

impl Creations {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            next: 0,
            created: 0,
            retries: BinaryHeap::new(),
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            warnings: Warnings::default(),
            write_errors: 0,
        }
    }

    /// Starts the creations due at `now`, failed ones first, then the
    /// plan's arrivals; says whether it stopped for want of a permit.
    pub(super) fn start_due(&mut self, writer: &Writer, tasks: &mut JoinSet<()>, now: Ms) -> bool {
        let workloads = &writer.plan.workloads;
        loop {
            let retry_due = self.retries.peek().is_some_and(|Reverse((at, _))| *at <= now);
            let arrival_due = self.next < workloads.len() && workloads[self.next].arrival <= now;
            if !(retry_due || arrival_due) {
                return false;
            }
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                return true;
            };
            let index = match retry_due.then(|| self.retries.pop()).flatten() {
                Some(Reverse((_, i))) => i,
                None => {
                    self.next += 1;
                    self.next - 1
                }
            };
            writer.create(tasks, permit, index);
        }
    }

    /// When the next creation is due: the next arrival or retry.
    pub(super) fn next_due(&self, plan: &Plan) -> Option<Ms> {
        let arrival = plan.workloads.get(self.next).map(|w| w.arrival);
        let retry = self.retries.peek().map(|Reverse((at, _))| *at);
        arrival.into_iter().chain(retry).min()
    }

    /// A creation's answer (`at`: when it came; `now`: the loop's time):
    /// counted, or, when the API server is overloaded or away, tried again
    /// [`RETRY_MS`] later; any other error ends the run.
    pub(super) fn answered(
        &mut self,
        tracker: &mut Tracker,
        plan: &Plan,
        index: usize,
        (at, now): (Ms, Ms),
        result: Result<(), CallError>,
    ) -> Result<()> {
        match result {
            Ok(()) => {
                self.created += 1;
                tracker.created(index, at);
            }
            Err(e) => {
                let key = plan.workloads[index].key();
                if !e.transient() {
                    bail!("creating Workload {key}: {e}");
                }
                // The run goes on, and this creation is tried again (late,
                // which creationLag shows).
                self.write_errors += 1;
                self.warnings
                    .warn(&format!("creating Workload {key}: {e}; trying again"));
                self.retries.push(Reverse((now + RETRY_MS, index)));
            }
        }
        Ok(())
    }
}

/// The Finished marks: a timer per admission, at its start plus the
/// workload's run time.
pub(super) struct Finishes {
    /// (when, index, admission epoch) of the marks to write.
    timers: BinaryHeap<Reverse<(Ms, usize, u32)>>,
    permits: Arc<Semaphore>,
    warnings: Warnings,
    /// Marks that failed (and were tried again).
    pub(super) write_errors: u64,
}

impl Finishes {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            timers: BinaryHeap::new(),
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            warnings: Warnings::default(),
            write_errors: 0,
        }
    }

    /// Sets the timer of a new admission.
    pub(super) fn set(&mut self, f: FinishAt) {
        self.timers.push(Reverse((f.at, f.index, f.epoch)));
    }

    /// Starts the Finished marks due at `now` of workloads still running
    /// in the admission their timer is for; says whether it stopped for
    /// want of a permit.
    pub(super) fn start_due(&mut self, writer: &Writer, tracker: &Tracker, tasks: &mut JoinSet<()>, now: Ms) -> bool {
        while let Some(&Reverse((at, index, epoch))) = self.timers.peek() {
            if at > now {
                return false;
            }
            let Some(generation) = tracker.finish_due(index, epoch) else {
                // An earlier admission's timer, or no longer running.
                self.timers.pop();
                continue;
            };
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                return true;
            };
            self.timers.pop();
            writer.finish(tasks, permit, index, epoch, generation);
        }
        false
    }

    /// When the next timer is due.
    pub(super) fn next_due(&self) -> Option<Ms> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// A Finished mark's answer: a transient error sets its timer again
    /// [`RETRY_MS`] after `now`; any other error ends the run.
    pub(super) fn answered(
        &mut self,
        plan: &Plan,
        index: usize,
        epoch: u32,
        now: Ms,
        result: Result<(), CallError>,
    ) -> Result<()> {
        if let Err(e) = result {
            self.write_errors += 1;
            let key = plan.workloads[index].key();
            if !e.transient() {
                bail!("marking Workload {key} Finished: {e}");
            }
            self.warnings
                .warn(&format!("marking Workload {key} Finished: {e}; trying again"));
            self.timers.push(Reverse((now + RETRY_MS, index, epoch)));
        }
        Ok(())
    }
}

/// The `Finished` mark of a workload: what the controller writes when a
/// Job completes (type Finished, status True, reason Succeeded), applied
/// by the harness's own field manager.
pub fn finish_body(namespace: &str, name: &str, generation: Option<i64>, runtime: Ms, now: Timestamp) -> Value {
    let condition = Condition {
        type_: cond::FINISHED.into(),
        status: cond::status::TRUE.into(),
        reason: cond::reasons::SUCCEEDED.into(),
        message: format!("Finished by sluice bench after its run time of {runtime} ms"),
        last_transition_time: Time(now),
        observed_generation: generation,
    };
    cluster::condition_apply_body(namespace, name, condition)
}
