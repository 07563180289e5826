//! The usage book and the queues' budgets applied to an engine: what the
//! controller and the simulator both run. After every engine call that may
//! change held quota, [`Accounting::charge`] stamps the changes with their
//! time; before every cycle, [`Accounting::govern`] gives each queue with
//! a budget its standing and, with a half-life, each queue its usage
//! history.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::UsageBook;
use super::budget::{Budget, Spending, spending};
use crate::engine::Engine;
use crate::model::{BudgetAction, Millis};

/// A queue's budget action changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetChange {
    pub cluster_queue: Arc<str>,
    pub before: Option<BudgetAction>,
    pub after: Option<BudgetAction>,
}

/// See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Accounting {
    pub book: UsageBook,
    budgets: BTreeMap<Arc<str>, Budget>,
    /// The spending last governed by, per queue with a budget.
    spent: BTreeMap<Arc<str>, Spending>,
}

impl Accounting {
    pub fn new(half_life: Option<Millis>) -> Self {
        Self {
            book: UsageBook::new(half_life),
            ..Default::default()
        }
    }

    /// Sets or clears a ClusterQueue's budget (applied by the next
    /// [`Accounting::govern`]).
    pub fn set_budget(&mut self, cluster_queue: &str, budget: Option<Budget>) {
        match budget {
            Some(b) => {
                self.budgets.insert(Arc::from(cluster_queue), b);
            }
            None => {
                self.budgets.remove(cluster_queue);
            }
        }
    }

    pub fn budget(&self, cluster_queue: &str) -> Option<&Budget> {
        self.budgets.get(cluster_queue)
    }

    /// The spending the last [`Accounting::govern`] found.
    pub fn spending(&self, cluster_queue: &str) -> Option<&Spending> {
        self.spent.get(cluster_queue)
    }

    /// Charges what the engine changed, at `now`.
    pub fn charge(&mut self, engine: &mut Engine, now: Millis) {
        let changes = engine.take_usage_changes();
        if !changes.is_empty() {
            self.book.apply(now, &changes);
        }
    }

    /// Gives the engine every budget's standing and every queue's usage
    /// history at `now`; returns the queues whose action changed.
    pub fn govern(&mut self, engine: &mut Engine, now: Millis) -> Vec<BudgetChange> {
        self.charge(engine, now);
        self.book.advance(now);
        let mut changes = Vec::new();
        let queues = engine.cluster_queue_names();
        for cq in &queues {
            let Some(budget) = self.budgets.get(cq) else {
                if self.spent.remove(cq).is_some() {
                    let _ = engine.set_budget_standing(cq, None);
                }
                continue;
            };
            let now_spent = spending(budget, &self.book, cq, now);
            let before = self.spent.get(cq).and_then(|s| s.reached.map(|(_, a)| a));
            let after = now_spent.reached.map(|(_, a)| a);
            if before != after {
                changes.push(BudgetChange {
                    cluster_queue: cq.clone(),
                    before,
                    after,
                });
            }
            let _ = engine.set_budget_standing(cq, Some(now_spent.standing(budget)));
            self.spent.insert(cq.clone(), now_spent);
        }
        if self.book.half_life().is_some() {
            for cq in &queues {
                let decayed = self.book.decayed_of(cq);
                let list: Vec<(&str, &str, i64)> = decayed.iter().map(|(f, r, a)| (&**f, &**r, *a)).collect();
                let _ = engine.set_usage_history(cq, &list);
            }
        }
        changes
    }
}
