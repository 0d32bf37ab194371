//! The value parsers every section shares: durations (`"60s"`, `"1h30m"`), byte sizes (`"4MiB"`), listen
//! addresses, http(s) URLs, header names and principal names, with [`Expected`], the phrase a parser answers with.
//!
//! Rules: this module imports no other file of `config`, so every section may use it and none depends on another
//! for a parser. A unit is always required for durations (a bare `60` could mean seconds or milliseconds); a bare
//! number is bytes for sizes. Amounts are whole numbers and every sum is overflow-checked. Parsers return the
//! [`Expected`] phrase on failure so the caller can name the key or variable. The `*_text` deserializers keep a
//! value with rules a string in the raw types, answering a value of another type with what the string should hold.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use http::HeaderName;
use reqwest::Url;
use serde::de::{self, Visitor};

/// What a value should have been, phrased to follow "expected" in a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Expected(pub(super) String);

impl From<&str> for Expected {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl From<String> for Expected {
    fn from(text: String) -> Self {
        Self(text)
    }
}

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

/// A byte size as written: a TOML integer (bytes) or a string with a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SizeInput {
    Bytes(i64),
    Text(String),
}

impl<'de> de::Deserialize<'de> for SizeInput {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SizeVisitor)
    }
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = SizeInput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SIZE_EXPECTED)
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<SizeInput, E> {
        Ok(SizeInput::Bytes(bytes))
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<SizeInput, E> {
        i64::try_from(bytes).map(SizeInput::Bytes).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(bytes), &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<SizeInput, E> {
        Ok(SizeInput::Text(text.to_owned()))
    }
}

/// Reads a string key whose content has rules, so that a value of another type (`timeout = 60`) is answered
/// with what the string should contain rather than with a bare "expected a string".
pub(super) struct TextVisitor(pub(super) &'static str);

impl Visitor<'_> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<String, E> {
        Ok(text.to_owned())
    }
}

/// `deserialize_with` for a duration key of a raw type.
pub(super) fn duration_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(DURATION_EXPECTED)).map(Some)
}

/// `deserialize_with` for a listen-address key of a raw type.
pub(super) fn listen_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(LISTEN_EXPECTED)).map(Some)
}

pub(super) const LISTEN_EXPECTED: &str = "an IP address and port such as \"127.0.0.1:8808\" or \"[::1]:8808\"";

/// A listen address (`server.listen`, `telemetry.metrics_listen`).
pub(super) fn parse_listen(text: &str) -> Result<SocketAddr, Expected> {
    text.trim().parse().map_err(|_| LISTEN_EXPECTED.into())
}

/// Longest principal or group name.
pub const MAX_PRINCIPAL_NAME: usize = 256;

pub(super) const PRINCIPAL_EXPECTED: &str = "a name of 1–256 characters without control characters";

/// Principal and group names: anything printable, so that JWT subjects (emails, `auth0|123`) fit.
pub(super) fn parse_principal(text: &str) -> Result<String, Expected> {
    let valid = !text.is_empty() && text.chars().count() <= MAX_PRINCIPAL_NAME && !text.chars().any(char::is_control);
    valid.then(|| text.to_owned()).ok_or_else(|| PRINCIPAL_EXPECTED.into())
}

/// An http(s) URL without credentials, query or fragment.
pub(super) fn parse_http_url(text: &str, example: &str) -> Result<Url, Expected> {
    let expected =
        || Expected(format!("an http or https URL such as {example:?}, without credentials, query or fragment"));
    let url = Url::parse(text).map_err(|_| expected())?;
    let plain = url.username().is_empty() && url.password().is_none() && url.query().is_none();
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() || !plain || url.fragment().is_some() {
        return Err(expected());
    }
    Ok(url)
}

/// `server.public_url`: kept in canonical form (lowercase scheme and host, no trailing slash, RFC 8707 §2).
pub(super) fn parse_public_url(text: &str) -> Result<String, Expected> {
    let url = parse_http_url(text, "https://switchyard.example.com")?;
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Headers the MCP client sets itself; letting configuration override them would break the protocol.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "accept-encoding",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A header name the configuration may set (any valid name the MCP client does not manage itself).
pub(super) fn parse_header_name(text: &str) -> Result<HeaderName, Expected> {
    let name = HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| Expected::from("a header name such as \"Authorization\" or \"X-Api-Key\""))?;
    if RESERVED_HEADERS.contains(&name.as_str()) || name.as_str().starts_with("mcp-param-") {
        return Err("a header the gateway does not manage itself (it sets this one per the MCP protocol)".into());
    }
    Ok(name)
}

/// `true` or `false`, in any case (how environment variables spell a boolean key).
pub(super) fn parse_bool(text: &str) -> Result<bool, Expected> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("\"true\" or \"false\"".into()),
    }
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
