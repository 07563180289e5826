//! Budgets: how much of a resource (on one flavor, or all) a ClusterQueue
//! may use per period, and what happens as it is spent. [`spending`] reads
//! the book; [`Spending::standing`] is what the engine is given
//! ([`crate::Engine::set_budget_standing`]).

use std::sync::Arc;

use super::period::{Period, Span, Window};
use super::{Account, UsageBook};
use crate::model::{Amount, BudgetAction, BudgetStanding, Millis};

/// A ClusterQueue's budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub resource: Arc<str>,
    /// Only this flavor's usage counts; `None`: every flavor's.
    pub flavor: Option<Arc<str>>,
    /// Milli-units × ms per period (8 GPU-hours: 8 000 × 3 600 000).
    pub limit: i128,
    pub period: Period,
    pub window: Window,
    /// From which percentage of `limit` spent each action applies,
    /// ascending; the last one reached applies.
    pub actions: Vec<(u32, BudgetAction)>,
}

/// A budget's spending now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spending {
    pub span: Span,
    /// Milli-units × ms used within the span.
    pub spent: i128,
    pub limit: i128,
    /// Milli-units of the resource held now.
    pub held: Amount,
    /// Spent by the end of a calendar period if what is held now stays
    /// held; for a rolling one, what a whole period of it would spend.
    pub projected: i128,
    /// The last action reached, with its percentage.
    pub reached: Option<(u32, BudgetAction)>,
    /// Spending at which `Stop` applies, if the budget stops.
    pub stop_at: Option<i128>,
}

/// How much of `budget` the ClusterQueue `cq` has spent at `now` (the book
/// advanced to `now`).
pub fn spending(budget: &Budget, book: &UsageBook, cq: &str, now: Millis) -> Spending {
    let account = Account::ClusterQueue(Arc::from(cq));
    let span = budget.period.span(budget.window, now);
    let flavor = budget.flavor.as_deref();
    let spent = book.used_within(&account, flavor, &budget.resource, span.start, now);
    let held = book.held(&account, flavor, &budget.resource);
    let projected = match budget.window {
        Window::Calendar => spent + i128::from(held) * i128::from((span.end - now).max(0)),
        Window::Rolling => i128::from(held) * i128::from(budget.period.length()),
    };
    let threshold = |pct: u32| budget.limit * i128::from(pct) / 100;
    let reached = budget
        .actions
        .iter()
        .copied()
        .filter(|&(pct, _)| spent >= threshold(pct))
        .max_by_key(|&(pct, _)| pct);
    let stop_at = budget
        .actions
        .iter()
        .find(|(_, a)| *a == BudgetAction::Stop)
        .map(|&(pct, _)| threshold(pct));
    Spending {
        span,
        spent,
        limit: budget.limit,
        held,
        projected,
        reached,
        stop_at,
    }
}

impl Spending {
    /// Percent of the limit spent (rounded down).
    pub fn percent(&self) -> i128 {
        if self.limit <= 0 {
            return 0;
        }
        self.spent * 100 / self.limit
    }

    /// What the engine obeys.
    pub fn standing(&self, budget: &Budget) -> BudgetStanding {
        BudgetStanding {
            action: self.reached.map(|(_, a)| a),
            resource: budget.resource.to_string(),
            flavor: budget.flavor.as_deref().map(str::to_string),
            spent: self.spent,
            limit: self.limit,
            stop_at: self.stop_at,
            period: format!("{} {}", budget.period, budget.window),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UsageChange;
    use crate::usage::HOUR;

    fn change(cq: &str, delta: Amount) -> UsageChange {
        UsageChange {
            uid: "w".into(),
            cluster_queue: cq.into(),
            local_queue: "ns/lq".into(),
            flavor: "h100".into(),
            resource: "nvidia.com/gpu".into(),
            delta,
            since: None,
        }
    }

    fn budget(hours: i128, actions: Vec<(u32, BudgetAction)>) -> Budget {
        Budget {
            resource: "nvidia.com/gpu".into(),
            flavor: None,
            limit: hours * 1000 * i128::from(HOUR),
            period: Period::Day,
            window: Window::Calendar,
            actions,
        }
    }

    #[test]
    fn actions_apply_in_turn_as_the_budget_is_spent() {
        let b = budget(
            10,
            vec![
                (50, BudgetAction::Warn),
                (80, BudgetAction::Deprioritize),
                (100, BudgetAction::Stop),
            ],
        );
        let mut book = UsageBook::new(None);
        // 2 GPUs from midnight.
        book.apply(0, &[change("a", 2000)]);
        let at = |book: &mut UsageBook, h: i64| {
            book.advance(h * HOUR);
            spending(&b, book, "a", h * HOUR)
        };
        assert_eq!(at(&mut book, 2).reached, None, "4 of 10 GPU-hours");
        assert_eq!(at(&mut book, 3).reached, Some((50, BudgetAction::Warn)), "6 of 10");
        assert_eq!(
            at(&mut book, 4).reached,
            Some((80, BudgetAction::Deprioritize)),
            "8 of 10"
        );
        let s = at(&mut book, 5);
        assert_eq!(s.reached, Some((100, BudgetAction::Stop)));
        assert_eq!(s.percent(), 100);
        assert_eq!(s.stop_at, Some(b.limit));
        // A new calendar day starts from nothing.
        assert_eq!(at(&mut book, 25).reached, None);
    }

    #[test]
    fn projection_assumes_what_is_held_stays_held() {
        let b = budget(100, vec![(100, BudgetAction::Warn)]);
        let mut book = UsageBook::new(None);
        book.apply(0, &[change("a", 1000)]);
        book.advance(6 * HOUR);
        let s = spending(&b, &book, "a", 6 * HOUR);
        assert_eq!(s.spent, 6 * 1000 * i128::from(HOUR));
        assert_eq!(s.projected, 24 * 1000 * i128::from(HOUR), "one GPU all day");
        assert_eq!(s.held, 1000);
    }

    #[test]
    fn a_flavor_budget_counts_that_flavor_only() {
        let mut b = budget(1, vec![(100, BudgetAction::Stop)]);
        b.flavor = Some("a100".into());
        let mut book = UsageBook::new(None);
        book.apply(0, &[change("a", 8000)]);
        book.advance(3 * HOUR);
        assert_eq!(spending(&b, &book, "a", 3 * HOUR).spent, 0);
    }
}
