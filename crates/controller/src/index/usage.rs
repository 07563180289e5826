//! Usage over time ([`sluice_scheduler::usage::Accounting`]): the engine's
//! changes of held quota charged at each cycle, budgets governed before
//! it, and the records flushed into `status.usage` of ClusterQueues and
//! LocalQueues on the bookkeeping lane, every flush interval.
//!
//! Changes are stamped with the time of the cycle that takes them: an
//! event between cycles (a finish) is charged up to the next cycle, which
//! the event itself brings within moments. Nothing is charged until the
//! index is ready: by then every queue's record (its `status.usage`) is
//! restored, so a workload restored as admitted is charged from its
//! admission or from the record's flush, whichever is later. A record is
//! read only for an account the book has no meters for (at start, or a
//! queue first seen later): the controller's own writes, coming back, are
//! not read again. What finished between the last flush and a restart is
//! lost: at most one flush interval.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use sluice_api::v1alpha1::conditions as cond;
use sluice_api::v1alpha1::{BudgetStatus, UsageStatus};
use sluice_convert::text::{self, resource_hours};
use sluice_convert::usage as conv;
use sluice_scheduler::BudgetAction;
use sluice_scheduler::usage::{Account, AccountRecord, Accounting, Budget, BudgetChange, Spending};

use super::Index;
use crate::plan::{EventSpec, Plan, Purpose, Step};

/// How often a budget is looked at when nothing else wakes the loop.
const GOVERN_MS: i64 = 2_000;

/// The index's accounting and what it last flushed.
pub(super) struct Usage {
    pub(super) accounting: Accounting,
    flush_ms: i64,
    next_flush: i64,
    /// What `status.usage` should say, per account, as of the last flush.
    flushed: BTreeMap<Account, AccountRecord>,
    /// `status.budget` per ClusterQueue with a budget, as of the last flush.
    budgets: BTreeMap<Arc<str>, Spending>,
}

impl Usage {
    pub(super) fn new(flush_ms: i64, half_life_ms: Option<i64>) -> Self {
        Self {
            accounting: Accounting::new(half_life_ms),
            flush_ms: flush_ms.max(1),
            next_flush: 0,
            flushed: BTreeMap::new(),
            budgets: BTreeMap::new(),
        }
    }
}

impl Index {
    /// Restores an account from the `status.usage` its queue carries, if
    /// the book has nothing for it yet; a record that cannot be read is
    /// reported and skipped (the account starts from nothing).
    pub(super) fn restore_usage(&mut self, account: Account, status: Option<&UsageStatus>, object: ObjectReference) {
        let Some(status) = status else { return };
        if self.usage.accounting.book.meters_of(&account).next().is_some() {
            return;
        }
        match conv::record(status) {
            Ok(record) => {
                self.usage.accounting.book.restore(&account, &record);
                self.usage.flushed.insert(account, record);
            }
            Err(e) => {
                let note = format!("status.usage cannot be read, usage is counted from now: {e}");
                tracing::warn!(object = ?object.name, "{note}");
                self.outbox.plans.push(Plan {
                    purpose: Purpose::Report,
                    steps: vec![Step::Event(EventSpec {
                        regarding: object,
                        type_: "Warning",
                        reason: "UsageUnreadable".into(),
                        action: "Account",
                        note,
                    })],
                });
            }
        }
    }

    /// Before the engine runs: what changed since the last cycle charged,
    /// and every budget's standing given; an Event on each ClusterQueue
    /// whose budget action changed (and a flush, so its status says so).
    pub(super) fn govern_usage(&mut self, now_ms: i64) {
        let changes = self.usage.accounting.govern(&mut self.engine, now_ms);
        if !changes.is_empty() {
            self.usage.next_flush = now_ms;
        }
        for c in changes {
            self.tell_budget_change(&c);
        }
    }

    /// After the engine ran: its admissions charged from now.
    pub(super) fn charge_usage(&mut self, now_ms: i64) {
        self.usage.accounting.charge(&mut self.engine, now_ms);
    }

    /// When a budget should next be looked at (with any budget).
    pub(super) fn next_govern(&self, now_ms: i64) -> Option<i64> {
        self.defs
            .cluster_queues
            .values()
            .any(|cq| cq.spec.budget.is_some())
            .then_some(now_ms + GOVERN_MS)
    }

    fn tell_budget_change(&mut self, c: &BudgetChange) {
        if self.already_told(c) {
            return;
        }
        let Some(s) = self.usage.accounting.spending(&c.cluster_queue) else {
            return;
        };
        let Some(b) = self.usage.accounting.budget(&c.cluster_queue) else {
            return;
        };
        let figures = format!(
            "{} of {} spent ({}%) in the {} {} period",
            resource_hours(s.spent, &b.resource),
            resource_hours(s.limit, &b.resource),
            s.percent(),
            b.period,
            b.window
        );
        let (type_, reason, note) = match c.after {
            None => ("Normal", "WithinBudget", format!("Within budget again: {figures}")),
            Some(a) => (
                "Warning",
                text::budget_reason(a),
                format!("{}: {figures}", text::budget_effect(a)),
            ),
        };
        tracing::info!(cluster_queue = %c.cluster_queue, reason, "{note}");
        self.outbox.plans.push(Plan {
            purpose: Purpose::Report,
            steps: vec![Step::Event(EventSpec {
                regarding: ObjectReference {
                    api_version: Some("sluice.dev/v1alpha1".into()),
                    kind: Some("ClusterQueue".into()),
                    name: Some(c.cluster_queue.to_string()),
                    ..Default::default()
                },
                type_,
                reason: reason.into(),
                action: "Budget",
                note,
            })],
        });
    }

    /// Whether the queue's status already says what a change says (a new
    /// leader's first look at a budget an earlier one had told of).
    fn already_told(&self, c: &BudgetChange) -> bool {
        if c.before.is_some() {
            return false;
        }
        let reason = c.after.map_or_else(|| "WithinBudget".to_string(), |a| format!("{a:?}"));
        self.defs
            .cluster_queues
            .get(&*c.cluster_queue)
            .and_then(|q| q.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|x| x.type_ == cond::WITHIN_BUDGET))
            .is_some_and(|x| x.reason == reason)
    }

    /// On the bookkeeping tick: every account's record and budget status
    /// taken afresh once the flush interval has passed; whether it had.
    pub fn flush_usage(&mut self, now_ms: i64) -> bool {
        if !self.is_ready() || now_ms < self.usage.next_flush {
            return false;
        }
        self.usage.accounting.charge(&mut self.engine, now_ms);
        let book = &mut self.usage.accounting.book;
        book.prune();
        let before = std::mem::take(&mut self.usage.flushed);
        self.usage.flushed = book
            .accounts()
            .into_iter()
            .map(|a| {
                let r = book.record(&a, now_ms);
                // Nothing accrued since the last flush: the record stands
                // as it was, and its status is not written again.
                let r = match before.get(&a) {
                    Some(old) if old.same_usage(&r) => old.clone(),
                    _ => r,
                };
                (a, r)
            })
            .collect();
        self.usage.budgets = self
            .defs
            .cluster_queues
            .keys()
            .filter_map(|name| {
                let b = self.usage.accounting.budget(name)?;
                let s = sluice_scheduler::usage::spending(b, &self.usage.accounting.book, name, now_ms);
                Some((Arc::from(name.as_str()), s))
            })
            .collect();
        self.usage.next_flush = now_ms + self.usage.flush_ms;
        true
    }

    /// What `status.usage` of an account says as of the last flush.
    pub fn usage_status(&self, account: &Account) -> Option<UsageStatus> {
        let with_decayed = self.usage.accounting.book.half_life().is_some();
        self.usage
            .flushed
            .get(account)
            .map(|r| conv::usage_status(r, with_decayed))
    }

    /// A ClusterQueue's `status.budget` as of the last flush.
    pub fn budget_status(&self, cluster_queue: &str) -> Option<BudgetStatus> {
        let (b, s) = self.budget_spending(cluster_queue)?;
        Some(conv::budget_status(b, s))
    }

    /// A ClusterQueue's budget and its spending as of the last flush.
    pub fn budget_spending(&self, cluster_queue: &str) -> Option<(&Budget, &Spending)> {
        let b = self.usage.accounting.budget(cluster_queue)?;
        Some((b, self.usage.budgets.get(cluster_queue)?))
    }

    /// The records of the last flush, per account (metrics).
    pub fn usage_records(&self) -> &BTreeMap<Account, AccountRecord> {
        &self.usage.flushed
    }

    /// A ClusterQueue's budget action now, if it has a budget.
    pub fn budget_action(&self, cluster_queue: &str) -> Option<Option<BudgetAction>> {
        self.usage.accounting.budget(cluster_queue)?;
        Some(
            self.usage
                .accounting
                .spending(cluster_queue)
                .and_then(|s| s.reached.map(|(_, a)| a)),
        )
    }
}
