//! Human-written quantities: durations (`"60s"`, `"500ms"`, `"1h30m"`) and byte sizes (`"4MiB"`, `"512KB"`).
//!
//! Rules: a unit is always required for durations (a bare `60` could mean seconds or milliseconds); a bare
//! number is bytes for sizes. Amounts are whole numbers and every sum is overflow-checked. Parsers return the
//! [`Expected`] phrase on failure so the caller can name the key or variable.

use std::time::Duration;

use super::fields::Expected;

pub(super) const DURATION_EXPECTED: &str =
    "a duration such as \"60s\", \"500ms\", \"5m\", \"24h\" or \"1h30m\" (units: ms, s, m, h, d)";

pub(super) const SIZE_EXPECTED: &str =
    "a byte size: a whole number of bytes or a string such as \"4MiB\" (units: B, KB, KiB, MB, MiB, GB, GiB)";

/// Parses a sequence of `<amount><unit>` components, optionally separated by blanks: `"1h 30m"`.
pub(super) fn parse_duration(text: &str) -> Result<Duration, Expected> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(DURATION_EXPECTED.into());
    }
    let mut total_ms: u64 = 0;
    while !rest.is_empty() {
        let (amount, after_amount) = split_amount(rest).ok_or(DURATION_EXPECTED)?;
        let unit_len = after_amount.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after_amount.len());
        let (unit, after_unit) = after_amount.split_at(unit_len);
        let unit_ms = duration_unit_ms(unit).ok_or(DURATION_EXPECTED)?;
        total_ms = amount
            .checked_mul(unit_ms)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or("a duration small enough to count in milliseconds")?;
        rest = after_unit.trim_start();
    }
    Ok(Duration::from_millis(total_ms))
}

fn duration_unit_ms(unit: &str) -> Option<u64> {
    match unit {
        "ms" => Some(1),
        "s" => Some(1_000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        "d" => Some(86_400_000),
        _ => None,
    }
}

/// A duration that must not be zero (a zero timeout or lifetime would make the feature unusable).
pub(super) fn parse_positive_duration(text: &str) -> Result<Duration, Expected> {
    match parse_duration(text)? {
        Duration::ZERO => Err(Expected(format!("{DURATION_EXPECTED}, longer than zero"))),
        duration => Ok(duration),
    }
}

/// Parses `"4MiB"`, `"4 MiB"`, `"512kb"` or `"1048576"`; decimal (KB) and binary (KiB) units are both accepted
/// because both are in common use and the `i` removes the ambiguity.
pub(super) fn parse_byte_size(text: &str) -> Result<u64, Expected> {
    let (amount, unit) = split_amount(text.trim()).ok_or(SIZE_EXPECTED)?;
    let multiplier = size_unit_multiplier(&unit.trim().to_ascii_lowercase()).ok_or(SIZE_EXPECTED)?;
    amount.checked_mul(multiplier).ok_or_else(|| SIZE_EXPECTED.into())
}

fn size_unit_multiplier(unit: &str) -> Option<u64> {
    match unit {
        "" | "b" => Some(1),
        "kb" => Some(1_000),
        "kib" => Some(1 << 10),
        "mb" => Some(1_000_000),
        "mib" => Some(1 << 20),
        "gb" => Some(1_000_000_000),
        "gib" => Some(1 << 30),
        _ => None,
    }
}

/// Splits the leading decimal digits off `text`; `None` when there are none or they overflow.
fn split_amount(text: &str) -> Option<(u64, &str)> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits == 0 {
        return None;
    }
    let amount = text[..digits].parse().ok()?;
    Some((amount, &text[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn durations_combine_components() {
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration(" 1h 30m 5s "), Ok(Duration::from_secs(5_405)));
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1_500)));
    }

    #[test]
    fn durations_refuse_bad_input() {
        for bad in ["", "60", "s", "1.5s", "5x", "-5s", "5 s", "1h30", "99999999999999999999s"] {
            assert_eq!(parse_duration(bad), Err(DURATION_EXPECTED.into()), "{bad:?}");
        }
        assert!(parse_duration("18446744073709551615d").is_err());
    }

    #[test]
    fn positive_durations_refuse_zero() {
        assert_eq!(parse_positive_duration("1ms"), Ok(Duration::from_millis(1)));
        assert!(parse_positive_duration("0s").is_err_and(|e| e.0.ends_with("longer than zero")));
        assert_eq!(parse_positive_duration("x"), Err(DURATION_EXPECTED.into()));
    }

    #[test]
    fn sizes_in_every_unit() {
        assert_eq!(parse_byte_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_byte_size("10B"), Ok(10));
        assert_eq!(parse_byte_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_byte_size("4 mib"), Ok(4 << 20));
        assert_eq!(parse_byte_size("512KB"), Ok(512_000));
        assert_eq!(parse_byte_size("2KiB"), Ok(2_048));
        assert_eq!(parse_byte_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_byte_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_byte_size("1GiB"), Ok(1 << 30));
    }

    #[test]
    fn sizes_refuse_bad_input() {
        for bad in ["", "MiB", "4M", "1.5MiB", "-1", "4 MiB extra", "18446744073709551615GiB"] {
            assert_eq!(parse_byte_size(bad), Err(SIZE_EXPECTED.into()), "{bad:?}");
        }
    }
}
