//! Budgets as the engine obeys them, and usage history. The driver
//! measures spending over time ([`crate::usage`]) and gives each
//! ClusterQueue with a budget its standing; here the standing acts:
//! - `Stop`: nothing new is admitted, preemptors included (as a `Hold`),
//!   with what was spent in the explanation; admitted work runs on.
//! - `Deprioritize`: the queue's candidates come after every other
//!   queue's of its cohort ([`super::order::Merge`]), and it may not
//!   borrow ([`super::flavor`]).
//! - Below `Stop`, a workload that declares its run time and whose
//!   resource × run time is more than what is left before `Stop` waits,
//!   told the arithmetic.
//!
//! The usage history is each queue's decayed average usage per (flavor,
//! resource); fair sharing adds what it held above nominal quota to what
//! it borrows now ([`super::share`]).

use std::sync::Arc;

use crate::decision::{BudgetOverrun, BudgetSpent, Explanation, PendingReason};
use crate::ledger::FrKey;
use crate::model::{Amount, BudgetAction, BudgetStanding};

use super::fast_map::FastMap;
use super::{CqId, Engine, EngineError, WlId};

/// Standings and histories per queue.
#[derive(Clone, Default)]
pub(super) struct Budgets {
    by_cq: FastMap<CqId, Standing>,
    /// Decayed average usage per (flavor, resource), milli-units.
    pub(super) history: FastMap<CqId, Vec<(FrKey, Amount)>>,
}

#[derive(Clone)]
struct Standing {
    given: BudgetStanding,
    /// Shared by every workload a stopped queue holds back.
    stopped: Option<Arc<Explanation>>,
}

impl Engine {
    /// Gives a ClusterQueue's budget standing (`None`: no budget). A change
    /// of what it does wakes the queue's domain.
    pub fn set_budget_standing(
        &mut self,
        cluster_queue: &str,
        standing: Option<BudgetStanding>,
    ) -> Result<(), EngineError> {
        let Some(&cq) = self.queues.cq_by_name.get(cluster_queue) else {
            return Err(EngineError::UnknownClusterQueue(cluster_queue.to_string()));
        };
        let before = self.budgets.by_cq.get(&cq).map(|s| s.given.clone());
        if before == standing {
            return Ok(());
        }
        // A new figure with the same action changes only explanations
        // (and what is left for a declared run time): those are read again
        // when the queue next wakes.
        let acts_differently = before.as_ref().map(|s| s.action) != standing.as_ref().map(|s| s.action);
        match standing {
            None => {
                self.budgets.by_cq.remove(&cq);
            }
            Some(given) => {
                let stopped = (given.action == Some(BudgetAction::Stop)).then(|| {
                    Arc::new(Explanation::new(PendingReason::BudgetSpent(Box::new(BudgetSpent {
                        resource: given.resource.clone(),
                        flavor: given.flavor.clone(),
                        spent: given.spent,
                        stop_at: given.stop_at.unwrap_or(given.limit),
                        period: given.period.clone(),
                    }))))
                });
                self.budgets.by_cq.insert(cq, Standing { given, stopped });
            }
        }
        if acts_differently {
            self.wake_domain(cq);
        }
        Ok(())
    }

    /// Gives a ClusterQueue's decayed average usage per (flavor, resource),
    /// milli-units (empty: none). Unknown flavors and resources are skipped.
    pub fn set_usage_history(
        &mut self,
        cluster_queue: &str,
        decayed: &[(&str, &str, Amount)],
    ) -> Result<(), EngineError> {
        let Some(&cq) = self.queues.cq_by_name.get(cluster_queue) else {
            return Err(EngineError::UnknownClusterQueue(cluster_queue.to_string()));
        };
        let history: Vec<(FrKey, Amount)> = decayed
            .iter()
            .filter_map(|&(f, r, a)| {
                let fr = (self.catalog.flavor_names.get(f)?, self.catalog.resources.get(r)?);
                Some((fr, a))
            })
            .collect();
        if history.is_empty() {
            self.budgets.history.remove(&cq);
        } else {
            self.budgets.history.insert(cq, history);
        }
        Ok(())
    }

    /// Why a stopped queue admits nothing.
    #[inline(always)]
    pub(super) fn budget_stopped(&self, cq: CqId) -> Option<Arc<Explanation>> {
        if self.budgets.by_cq.is_empty() {
            return None;
        }
        self.budgets.by_cq.get(&cq)?.stopped.clone()
    }

    /// Whether the queue's budget puts it last and keeps it from borrowing.
    #[inline(always)]
    pub(super) fn deprioritized(&self, cq: CqId) -> bool {
        !self.budgets.by_cq.is_empty()
            && self
                .budgets
                .by_cq
                .get(&cq)
                .is_some_and(|s| s.given.action == Some(BudgetAction::Deprioritize))
    }

    /// Why a workload that fits still waits: its declared run time would
    /// spend more of the budget than is left before `Stop`.
    pub(super) fn overruns_budget(&self, cq: CqId, id: WlId, usage: &[(usize, Amount)]) -> Option<Explanation> {
        let s = &self.budgets.by_cq.get(&cq)?.given;
        let stop_at = s.stop_at?;
        let runtime = self.wl(id).expected_runtime?;
        let res = self.catalog.resources.get(&s.resource)?;
        let flavor = match &s.flavor {
            Some(f) => Some(self.catalog.flavor_names.get(f)?),
            None => None,
        };
        let q = &self.queues.cqs[cq];
        let held: Amount = usage
            .iter()
            .filter(|&&(slot, _)| {
                let fr = q.quota.slots[slot].fr;
                fr.1 == res && flavor.is_none_or(|f| fr.0 == f)
            })
            .map(|&(_, a)| a)
            .sum();
        let left = (stop_at - s.spent).max(0);
        (held > 0 && i128::from(held) * i128::from(runtime) > left).then(|| {
            Explanation::new(PendingReason::BudgetWouldOverrun(Box::new(BudgetOverrun {
                resource: s.resource.clone(),
                held,
                runtime,
                left,
                period: s.period.clone(),
            })))
        })
    }
}
