//! Budget periods: a day, a week or a month, either the calendar one
//! (UTC; weeks start on Monday) that contains now, or the rolling one
//! that ends now (a month rolling is 30 days).

use std::fmt;

use super::buckets::DAY;
use crate::model::Millis;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Period {
    /// `1d`.
    Day,
    /// `7d`.
    #[default]
    Week,
    /// `30d`: a calendar month, or 30 days rolling.
    Month,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Window {
    /// The calendar period that contains now; spending starts again at
    /// its end.
    #[default]
    Calendar,
    /// The period that ends now.
    Rolling,
}

/// Where a period lies: `[start, end)`; for a rolling one, `end` is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: Millis,
    pub end: Millis,
}

impl Period {
    /// Its length when rolling.
    pub fn length(self) -> Millis {
        match self {
            Period::Day => DAY,
            Period::Week => 7 * DAY,
            Period::Month => 30 * DAY,
        }
    }

    /// The span of this period at `now` in `window`.
    pub fn span(self, window: Window, now: Millis) -> Span {
        match window {
            Window::Rolling => Span {
                start: now - self.length(),
                end: now,
            },
            Window::Calendar => self.calendar(now),
        }
    }

    fn calendar(self, now: Millis) -> Span {
        let day = now.div_euclid(DAY);
        match self {
            Period::Day => Span {
                start: day * DAY,
                end: (day + 1) * DAY,
            },
            Period::Week => {
                // 1970-01-01 was a Thursday: Monday is 3 days before.
                let monday = day - (day + 3).rem_euclid(7);
                Span {
                    start: monday * DAY,
                    end: (monday + 7) * DAY,
                }
            }
            Period::Month => {
                let (y, m, _) = civil_from_days(day);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                Span {
                    start: days_from_civil(y, m, 1) * DAY,
                    end: days_from_civil(ny, nm, 1) * DAY,
                }
            }
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Period::Day => "1d",
            Period::Week => "7d",
            Period::Month => "30d",
        })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Window::Calendar => "calendar",
            Window::Rolling => "rolling",
        })
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOV_28_2026_1530: Millis = 1_795_879_800_000; // Saturday

    #[test]
    fn calendar_periods_are_utc_day_monday_week_and_month() {
        let now = NOV_28_2026_1530;
        let day = Period::Day.span(Window::Calendar, now);
        assert_eq!(day.start, days_from_civil(2026, 11, 28) * DAY);
        assert_eq!(day.end - day.start, DAY);
        let week = Period::Week.span(Window::Calendar, now);
        assert_eq!(week.start, days_from_civil(2026, 11, 23) * DAY, "Monday 23 November");
        let month = Period::Month.span(Window::Calendar, now);
        assert_eq!(month.start, days_from_civil(2026, 11, 1) * DAY);
        assert_eq!(month.end, days_from_civil(2026, 12, 1) * DAY);
        let dec = Period::Month.span(Window::Calendar, days_from_civil(2026, 12, 31) * DAY);
        assert_eq!(dec.end, days_from_civil(2027, 1, 1) * DAY);
    }

    #[test]
    fn rolling_periods_end_now() {
        let s = Period::Month.span(Window::Rolling, NOV_28_2026_1530);
        assert_eq!((s.start, s.end), (NOV_28_2026_1530 - 30 * DAY, NOV_28_2026_1530));
    }

    #[test]
    fn civil_dates_round_trip() {
        for z in [-1, 0, 59, 365, 20_000, 20_785] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
    }
}
