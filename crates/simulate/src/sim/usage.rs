//! Usage over time in a run: the engine's changes of held quota charged at
//! their virtual time, budgets governed before every cycle, by the same
//! [`Accounting`] the controller runs; what each queue used, sampled every
//! virtual hour, and when each budget action fired. On when a ClusterQueue
//! has `spec.budget` or the run has a usage half-life; otherwise the run is
//! exactly as without it (the engine does not even record changes).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_scheduler::usage::{self, Account, Accounting, HOUR};
use sluice_scheduler::{BudgetAction, Engine};

use super::result::{BudgetEvent, QueueUsage, Scenario, SimOptions, UsageOutcome};
use crate::units::Millis;

/// The resource the report counts.
const GPU: &str = "nvidia.com/gpu";

pub(super) struct UsageWatch {
    accounting: Accounting,
    events: Vec<BudgetEvent>,
    /// Per ClusterQueue: (time, GPU-hours used so far).
    series: BTreeMap<Arc<str>, Vec<(Millis, f64)>>,
    next_sample: Millis,
    half_life: Option<Millis>,
}

impl UsageWatch {
    /// The watch when the run accounts usage.
    pub(super) fn new(scenario: &Scenario, opts: &SimOptions) -> Option<Self> {
        let half_life = opts.usage_half_life.or(scenario.usage_half_life).filter(|&h| h > 0);
        if scenario.budgets.is_empty() && half_life.is_none() {
            return None;
        }
        let mut accounting = Accounting::new(half_life);
        for (cq, b) in &scenario.budgets {
            accounting.set_budget(cq, Some(b.clone()));
        }
        let series = (scenario.cluster_queues.iter())
            .map(|q| (Arc::from(q.name.as_str()), vec![(0, 0.0)]))
            .collect();
        Some(UsageWatch {
            accounting,
            events: Vec::new(),
            series,
            next_sample: HOUR,
            half_life,
        })
    }

    /// What the engine changed, charged at `t`; the hours passed sampled.
    pub(super) fn charge(&mut self, engine: &mut Engine, t: Millis) {
        self.sample_until(t);
        self.accounting.charge(engine, t);
    }

    /// Before a cycle at `t`: budgets and usage histories given to the
    /// engine; a budget whose action changed is noted.
    pub(super) fn govern(&mut self, engine: &mut Engine, t: Millis) {
        self.sample_until(t);
        for c in self.accounting.govern(engine, t) {
            self.events.push(BudgetEvent {
                at_ms: t,
                cluster_queue: c.cluster_queue.to_string(),
                action: c.after,
            });
        }
    }

    /// When a budget that holds a queue back (`Deprioritize`, `Stop`) is
    /// next to be looked at again, with nothing else happening: the end of
    /// its calendar period, or in an hour for a rolling one (spending falls
    /// as the window moves on). The controller looks every few seconds.
    pub(super) fn next_check(&self, t: Millis) -> Option<Millis> {
        (self.series.keys())
            .filter_map(|cq| {
                let s = self.accounting.spending(cq)?;
                let holds_back = s.reached.is_some_and(|(_, a)| a != BudgetAction::Warn);
                let b = self.accounting.budget(cq)?;
                holds_back.then(|| match b.window {
                    usage::Window::Calendar => s.span.end,
                    usage::Window::Rolling => t + HOUR,
                })
            })
            .min()
    }

    /// A sample at every whole hour up to `t` (usage held since the last
    /// charge runs on until then).
    fn sample_until(&mut self, t: Millis) {
        while self.next_sample <= t {
            let at = self.next_sample;
            self.accounting.book.advance(at);
            for (cq, points) in &mut self.series {
                points.push((at, gpu_hours(&self.accounting, cq)));
            }
            self.next_sample += HOUR;
        }
    }

    /// Each queue's usage, budget and actions at the run's end.
    pub(super) fn into_outcome(mut self, end: Millis) -> UsageOutcome {
        self.accounting.book.advance(end);
        let mut queues = Vec::new();
        for (cq, mut points) in std::mem::take(&mut self.series) {
            let total = gpu_hours(&self.accounting, &cq);
            if points.last().is_some_and(|&(t, _)| t < end) {
                points.push((end, total));
            }
            let budget = self.accounting.budget(&cq).map(|b| {
                let s = usage::spending(b, &self.accounting.book, &cq, end);
                (b.clone(), s)
            });
            let actions = (self.events.iter())
                .filter(|e| *e.cluster_queue == *cq)
                .cloned()
                .collect();
            queues.push(QueueUsage {
                name: cq.to_string(),
                gpu_hours: total,
                series: points,
                budget,
                actions,
            });
        }
        UsageOutcome {
            half_life: self.half_life,
            queues,
        }
    }
}

fn gpu_hours(accounting: &Accounting, cq: &str) -> f64 {
    let account = Account::ClusterQueue(Arc::from(cq));
    usage::hours(
        (accounting.book.meters_of(&account))
            .filter(|(_, r, _)| &***r == GPU)
            .map(|(_, _, m)| m.total)
            .sum(),
    )
}

/// The last action a queue's budget reached by `t` (`None`: within).
pub fn action_at(q: &QueueUsage, t: Millis) -> Option<BudgetAction> {
    q.actions
        .iter()
        .take_while(|e| e.at_ms <= t)
        .last()
        .and_then(|e| e.action)
}
