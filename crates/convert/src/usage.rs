//! Usage over time between the API and the usage book
//! ([`sluice_scheduler::usage`]): a ClusterQueue's `spec.budget` into a
//! [`Budget`], `status.usage` into the record a restarted controller
//! restores and back, and a budget's spending into `status.budget`.
//! Resource-hours are decimal strings with up to six decimals (a
//! thousandth of a unit held 3.6 seconds); reading one back is exact to
//! that.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use sluice_api::quantity;
use sluice_api::v1alpha1::{self as api, BudgetStatus, ResourceHours, UsageBucket, UsageStatus};
use sluice_scheduler::usage::{self, AccountRecord, Buckets, Budget, MeterRecord, Period, Spending, Window};
use sluice_scheduler::{BudgetAction, Millis};

use crate::adapter::{AdapterError, millis_of, time_of};

/// Milli-units × ms in a millionth of a unit-hour.
const PER_MICRO_HOUR: i128 = 3_600;

/// A ClusterQueue's budget as the book reads it.
pub fn budget(spec: &api::Budget) -> Result<Budget, AdapterError> {
    let milli_hours = spec.milli_hours("spec.budget.hours")?;
    let resource = spec.resource.as_deref().unwrap_or(api::usage::DEFAULT_BUDGET_RESOURCE);
    Ok(Budget {
        resource: Arc::from(resource),
        flavor: spec.flavor.as_deref().map(Arc::from),
        // Thousandths of a unit-hour × 1000 milli-units × 3 600 000 ms,
        // over 1000; in the resource's engine units.
        limit: quantity::from_milli(resource, milli_hours * usage::HOUR as i128),
        period: match spec.period {
            api::BudgetPeriod::Day => Period::Day,
            api::BudgetPeriod::Week => Period::Week,
            api::BudgetPeriod::Month => Period::Month,
        },
        window: match spec.window {
            api::BudgetWindow::Calendar => Window::Calendar,
            api::BudgetWindow::Rolling => Window::Rolling,
        },
        actions: spec.steps().iter().map(|s| (s.at_percent, action(s.action))).collect(),
    })
}

fn action(a: api::BudgetAction) -> BudgetAction {
    match a {
        api::BudgetAction::Warn => BudgetAction::Warn,
        api::BudgetAction::Deprioritize => BudgetAction::Deprioritize,
        api::BudgetAction::Stop => BudgetAction::Stop,
    }
}

/// The API's name of an engine action.
pub fn api_action(a: BudgetAction) -> api::BudgetAction {
    match a {
        BudgetAction::Warn => api::BudgetAction::Warn,
        BudgetAction::Deprioritize => api::BudgetAction::Deprioritize,
        BudgetAction::Stop => api::BudgetAction::Stop,
    }
}

/// Engine units of `resource` × ms as resource-hours, six decimals at
/// most, trailing zeros dropped; rounded down.
pub fn hours_text(resource: &str, amount_ms: i128) -> String {
    crate::text::hours_with(quantity::to_milli(resource, amount_ms), 6)
}

/// Resource-hours written by [`hours_text`] back into engine units of
/// `resource` × ms.
pub fn parse_hours(resource: &str, field: &str, text: &str) -> Result<i128, AdapterError> {
    milli_hours_text(field, text).map(|v| quantity::from_milli(resource, v))
}

/// Resource-hours as milli-units × ms.
fn milli_hours_text(field: &str, text: &str) -> Result<i128, AdapterError> {
    let bad = || AdapterError::Hours {
        field: field.to_string(),
        value: text.to_string(),
    };
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || frac.len() > 6 || !whole.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let whole: i128 = whole.parse().map_err(|_| bad())?;
    let frac: i128 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().map_err(|_| bad())?
    };
    let micro = whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(frac))
        .ok_or_else(bad)?;
    let v = micro.checked_mul(PER_MICRO_HOUR).ok_or_else(bad)?;
    Ok(if negative { -v } else { v })
}

/// An account's record as `status.usage` (`decayed` only with a
/// half-life).
pub fn usage_status(record: &AccountRecord, with_decayed: bool) -> UsageStatus {
    UsageStatus {
        flushed_at: MicroTime(time_of(record.flushed_at).0),
        resources: record
            .meters
            .iter()
            .map(|m| ResourceHours {
                flavor: m.flavor.to_string(),
                resource: m.resource.to_string(),
                total: hours_text(&m.resource, m.total),
                hourly: buckets(&m.resource, m.buckets.hourly()),
                daily: buckets(&m.resource, m.buckets.daily()),
                // Units of the resource, three decimals.
                decayed: with_decayed
                    .then(|| format!("{:.3}", m.decayed / quantity::units_per_whole(&m.resource) as f64)),
            })
            .collect(),
    }
}

fn buckets(resource: &str, list: impl Iterator<Item = (Millis, i128)>) -> Vec<UsageBucket> {
    list.filter(|&(_, v)| v != 0)
        .map(|(start, v)| UsageBucket {
            start: time_of(start),
            hours: hours_text(resource, v),
        })
        .collect()
}

/// `status.usage` back into the record it was written from.
pub fn record(status: &UsageStatus) -> Result<AccountRecord, AdapterError> {
    let flushed_at = status.flushed_at.0.as_millisecond();
    let meters = status
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let field = format!("status.usage.resources[{i}]");
            let read = |list: &[UsageBucket], name: &str| -> Result<Vec<(Millis, i128)>, AdapterError> {
                list.iter()
                    .enumerate()
                    .map(|(j, b)| {
                        Ok((
                            millis_of(&b.start),
                            parse_hours(&r.resource, &format!("{field}.{name}[{j}].hours"), &b.hours)?,
                        ))
                    })
                    .collect()
            };
            let decayed = match &r.decayed {
                None => 0.0,
                Some(d) => {
                    d.parse::<f64>().map_err(|_| AdapterError::Hours {
                        field: format!("{field}.decayed"),
                        value: d.clone(),
                    })? * quantity::units_per_whole(&r.resource) as f64
                }
            };
            Ok(MeterRecord {
                flavor: Arc::from(r.flavor.as_str()),
                resource: Arc::from(r.resource.as_str()),
                total: parse_hours(&r.resource, &format!("{field}.total"), &r.total)?,
                buckets: Buckets::from_parts(read(&r.hourly, "hourly")?, read(&r.daily, "daily")?, flushed_at),
                decayed,
            })
        })
        .collect::<Result<_, AdapterError>>()?;
    Ok(AccountRecord {
        flushed_at: status.flushed_at.0.as_millisecond(),
        meters,
    })
}

/// A budget's spending as `status.budget`.
pub fn budget_status(budget: &Budget, s: &Spending) -> BudgetStatus {
    BudgetStatus {
        resource: budget.resource.to_string(),
        flavor: budget.flavor.as_deref().map(str::to_string),
        period_start: time_of(s.span.start),
        period_end: time_of(s.span.end),
        spent: hours_text(&budget.resource, s.spent),
        limit: hours_text(&budget.resource, s.limit),
        percent: i64::try_from(s.percent()).unwrap_or(i64::MAX),
        projected: hours_text(&budget.resource, s.projected),
        action: s.reached.map(|(_, a)| api_action(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_scheduler::usage::{DAY, HOUR};

    #[test]
    fn hours_round_trip_to_a_millionth_of_a_unit_hour() {
        let gpu = "nvidia.com/gpu";
        for v in [0, 3_600, 8_000 * HOUR as i128, 123_456_789_000, -7_200] {
            assert_eq!(
                parse_hours(gpu, "f", &hours_text(gpu, v)).unwrap(),
                v - v % PER_MICRO_HOUR
            );
        }
        assert_eq!(hours_text(gpu, 8_000 * HOUR as i128), "8");
        assert_eq!(hours_text(gpu, 1_500 * HOUR as i128), "1.5");
        assert_eq!(parse_hours(gpu, "f", "0.02").unwrap(), 20 * HOUR as i128);
        let err = parse_hours(gpu, "status.usage.resources[0].total", "1e3").unwrap_err();
        assert_eq!(
            err.to_string(),
            "status.usage.resources[0].total: \"1e3\" is not a number of resource-hours (digits, at most six decimals)"
        );
    }

    #[test]
    fn a_record_survives_its_status() {
        let record = AccountRecord {
            flushed_at: 3 * DAY + 5 * HOUR + 123,
            meters: vec![MeterRecord {
                flavor: "h100".into(),
                resource: "nvidia.com/gpu".into(),
                total: 40 * 1000 * HOUR as i128,
                buckets: Buckets::from_parts(
                    [(3 * DAY + 4 * HOUR, 8_000 * HOUR as i128)],
                    [(DAY, 32_000 * HOUR as i128)],
                    3 * DAY + 5 * HOUR + 123,
                ),
                decayed: 2500.0,
            }],
        };
        let status = usage_status(&record, true);
        assert_eq!(status.resources[0].decayed.as_deref(), Some("2.500"));
        assert_eq!(status.resources[0].daily[0].hours, "32");
        assert_eq!(super::record(&status).unwrap(), record);
    }

    #[test]
    fn the_hour_in_progress_at_the_flush_holds_usage_up_to_the_flush_only() {
        // 4 GPUs from 10:00 to the flush at 10:30: 2 GPU-hours in the 10:00 bucket.
        let at = 10 * HOUR;
        let record = AccountRecord {
            flushed_at: at + HOUR / 2,
            meters: vec![MeterRecord {
                flavor: "h100".into(),
                resource: "nvidia.com/gpu".into(),
                total: 2_000 * HOUR as i128,
                buckets: Buckets::from_parts([(at, 2_000 * HOUR as i128)], [], at + HOUR / 2),
                decayed: 0.0,
            }],
        };
        let back = super::record(&usage_status(&record, false)).unwrap();
        let b = &back.meters[0].buckets;
        // The last 15 minutes before the flush: half of what the bucket holds.
        assert_eq!(b.within(at + HOUR / 4, at + HOUR / 2), 1_000 * HOUR as i128);
        assert_eq!(b.within(at, at + HOUR), 2_000 * HOUR as i128);
    }

    #[test]
    fn a_budget_in_hours_is_milli_units_times_ms() {
        let spec = api::Budget {
            hours: k8s_openapi::apimachinery::pkg::api::resource::Quantity("20m".into()),
            ..Default::default()
        };
        let b = budget(&spec).unwrap();
        assert_eq!(b.limit, 20 * HOUR as i128, "0.02 GPU-hours");
        assert_eq!(&*b.resource, "nvidia.com/gpu");
        assert_eq!(b.actions, [(100, BudgetAction::Warn)]);
    }

    #[test]
    fn gpu_equivalent_hours_are_in_its_own_units() {
        let eq = quantity::GPU_EQUIVALENT;
        let per = quantity::GPU_EQUIVALENT_UNITS;
        let spec = api::Budget {
            resource: Some(eq.into()),
            hours: k8s_openapi::apimachinery::pkg::api::resource::Quantity("10".into()),
            ..Default::default()
        };
        // 10 equivalent-hours: 10 × 720 720 units × 3 600 000 ms.
        assert_eq!(budget(&spec).unwrap().limit, 10 * per * HOUR as i128);
        // A seventh of an equivalent for seven hours is one equivalent-hour.
        let v = per / 7 * 7 * HOUR as i128;
        assert_eq!(hours_text(eq, v), "1");
        assert_eq!(parse_hours(eq, "f", "1").unwrap(), per * HOUR as i128);
    }
}
