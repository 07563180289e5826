//! Usage over time: a ClusterQueue's budget (`spec.budget`), and the
//! usage ClusterQueues and LocalQueues report (`status.usage`), in
//! resource-hours (a GPU held for an hour is one GPU-hour).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::{QuantityError, non_negative_milli};
use crate::validation::Violations;

/// The resource a budget counts when it names none.
pub const DEFAULT_BUDGET_RESOURCE: &str = "nvidia.com/gpu";

/// The highest `atPercent` of a budget action.
pub const MAX_BUDGET_PERCENT: u32 = 1000;

/// How much of a resource a ClusterQueue may use per period, and what
/// happens as it is spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// The resource counted. Unset: `nvidia.com/gpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub resource: Option<String>,
    /// Only this flavor's usage counts. Unset: every flavor's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub flavor: Option<String>,
    /// Resource-hours per period (`5000`, `0.5`, `20m`), more than 0.
    #[schemars(schema_with = "super::common::non_negative_quantity")]
    pub hours: Quantity,
    /// `1d`, `7d` (default) or `30d`.
    #[serde(default)]
    pub period: BudgetPeriod,
    /// `Calendar` (default): the UTC day, the week from Monday, or the
    /// calendar month that contains now; spending starts again when it
    /// ends. `Rolling`: the last 1, 7 or 30 days.
    #[serde(default)]
    pub window: BudgetWindow,
    /// What happens from which percentage of `hours` spent, in ascending
    /// order of both; the last one reached applies. Unset: `Warn` at 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub actions: Vec<BudgetStep>,
}

/// See [`Budget::period`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BudgetPeriod {
    /// A day.
    #[serde(rename = "1d")]
    Day,
    /// A week.
    #[default]
    #[serde(rename = "7d")]
    Week,
    /// A calendar month, or 30 days rolling.
    #[serde(rename = "30d")]
    Month,
}

/// See [`Budget::window`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BudgetWindow {
    /// The calendar period that contains now.
    #[default]
    Calendar,
    /// The period that ends now.
    Rolling,
}

/// One step of a budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStep {
    /// Percentage of the budget spent from which the action applies (1 to
    /// 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub at_percent: u32,
    /// What happens from then on.
    pub action: BudgetAction,
}

/// What a spent budget does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BudgetAction {
    /// A `Budget` condition and a Warning Event; admission is unchanged.
    #[default]
    Warn,
    /// The queue's workloads come after every other queue's of its
    /// cohort, and it may not borrow.
    Deprioritize,
    /// Nothing new is admitted; admitted work runs on.
    Stop,
}

impl Budget {
    /// The budget in thousandths of a resource-hour.
    pub fn milli_hours(&self, field: &str) -> Result<i128, QuantityError> {
        non_negative_milli(field, &self.hours)
    }

    /// The actions, `Warn` at 100 when none are given.
    pub fn steps(&self) -> Vec<BudgetStep> {
        if self.actions.is_empty() {
            vec![BudgetStep {
                at_percent: 100,
                action: BudgetAction::Warn,
            }]
        } else {
            self.actions.clone()
        }
    }

    pub(crate) fn validate_into(&self, v: &mut Violations, path: &str) {
        match self.milli_hours(&format!("{path}.hours")) {
            Err(e) => v.push(format!("{path}.hours"), e.to_string()),
            Ok(0) => v.push(format!("{path}.hours"), "must be more than 0 resource-hours"),
            Ok(_) => {}
        }
        for (i, step) in self.actions.iter().enumerate() {
            if !(1..=MAX_BUDGET_PERCENT).contains(&step.at_percent) {
                v.push(
                    format!("{path}.actions[{i}].atPercent"),
                    format!("must be between 1 and {MAX_BUDGET_PERCENT}, got {}", step.at_percent),
                );
            }
        }
        for (i, pair) in self.actions.windows(2).enumerate() {
            if pair[1].at_percent <= pair[0].at_percent || pair[1].action <= pair[0].action {
                v.push(
                    format!("{path}.actions[{}]", i + 1),
                    format!(
                        "must come after {:?} at {}% in both percentage and action (Warn, then Deprioritize, then Stop); got {:?} at {}%",
                        pair[0].action, pair[0].at_percent, pair[1].action, pair[1].at_percent
                    ),
                );
            }
        }
    }
}

/// Usage over time of a ClusterQueue or LocalQueue, kept by the
/// controller; what a restarted controller counts on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageStatus {
    /// The figures below count usage up to this instant (to the
    /// microsecond: a restarted controller counts on from exactly here).
    pub flushed_at: MicroTime,
    /// Per flavor and resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub resources: Vec<ResourceHours>,
}

/// Resource-hours of one flavor and resource, as decimal strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHours {
    /// Name of the ResourceFlavor.
    pub flavor: String,
    /// Name of the resource, e.g. `nvidia.com/gpu`.
    pub resource: String,
    /// Since accounting began.
    pub total: String,
    /// Per hour, for the last two days.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub hourly: Vec<UsageBucket>,
    /// Per UTC day before that, for 62 days.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub daily: Vec<UsageBucket>,
    /// With fair sharing over time: the decayed average amount held, in
    /// units of the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decayed: Option<String>,
}

/// Resource-hours used within an hour or a day from `start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageBucket {
    /// When the hour or day starts.
    pub start: Time,
    /// Resource-hours used within it.
    pub hours: String,
}

/// A ClusterQueue's budget now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    /// The resource counted.
    pub resource: String,
    /// The one flavor counted, if the budget names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// Start of the period counted.
    pub period_start: Time,
    /// End of the period counted (for a rolling one, now).
    pub period_end: Time,
    /// Resource-hours spent in the period.
    pub spent: String,
    /// Resource-hours the period allows.
    pub limit: String,
    /// Percentage of the limit spent.
    pub percent: i64,
    /// Spent by the end of a calendar period if what is held now stays
    /// held; for a rolling one, what a whole period of it would spend.
    pub projected: String,
    /// The action reached, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<BudgetAction>,
}
