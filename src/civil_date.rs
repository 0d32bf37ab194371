//! The calendar date of a day since the Unix epoch, for the timestamps the gateway writes itself (access lines,
//! `switchyard calls`) without a date crate. Proleptic Gregorian, UTC (Howard Hinnant's `civil_from_days`); and the
//! wall clock in whole seconds since that epoch, the one reading every part takes for expiry and timestamps.
//!
//! Rule: a clock before the epoch reads 0 (a deadline then looks passed, never valid forever).

use std::time::{SystemTime, UNIX_EPOCH};

/// Whole seconds since 1970-01-01 UTC by the wall clock; 0 when the clock reads earlier.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// The proleptic Gregorian date of day `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub fn civil_date(days: u64) -> (u64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    // Both fit: a day is 1..=31, a month 1..=12.
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

/// The day since 1970-01-01 of a proleptic Gregorian date; `None` for a date that does not exist or precedes the
/// epoch.
pub fn days_from_civil(year: u64, month: u32, day: u32) -> Option<u64> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let lengths = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let length = *lengths.get(usize::try_from(month).ok()?.checked_sub(1)?)?;
    if year < 1970 || day == 0 || day > length {
        return None;
    }
    let (year, month, day) = (year - u64::from(month <= 2), u64::from(month), u64::from(day));
    let era = year / 400;
    let year_of_era = year % 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * 146_097 + day_of_era - 719_468)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (ISO 8601, UTC) of `millis` since the Unix epoch (earlier times read as the epoch).
pub fn iso8601_millis(millis: i64) -> String {
    let millis = u64::try_from(millis).unwrap_or_default();
    let seconds = millis / 1000;
    let (year, month, day) = civil_date(seconds / 86_400);
    let rest = seconds % 86_400;
    let (hour, minute, second) = (rest / 3600, rest % 3600 / 60, rest % 60);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{:03}Z", millis % 1000)
}

#[cfg(test)]
mod tests {
    use super::{civil_date, days_from_civil, iso8601_millis};

    #[test]
    fn dates_become_days_and_back() {
        for days in [0, 11_016, 19_782, 19_783, 20_788, 20_878] {
            let (year, month, day) = civil_date(days);
            assert_eq!(days_from_civil(year, month, day), Some(days), "{year}-{month}-{day}");
        }
        assert_eq!(days_from_civil(2027, 2, 29), None, "not a leap year");
        assert_eq!(days_from_civil(2028, 2, 29).map(civil_date), Some((2028, 2, 29)));
        assert_eq!(days_from_civil(2027, 13, 1), None);
        assert_eq!(days_from_civil(1969, 12, 31), None);
    }

    #[test]
    fn iso8601_times_are_utc_with_milliseconds() {
        assert_eq!(iso8601_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601_millis(-5), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn days_become_dates_across_leap_years() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(19_782), (2024, 2, 29));
        assert_eq!(civil_date(19_783), (2024, 3, 1));
        assert_eq!(civil_date(20_788), (2026, 12, 1));
    }
}
