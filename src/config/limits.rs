//! The `[[limits]]` list: rates, quotas, concurrency and the runaway-loop guard, per principal.
//!
//! Rules:
//! - `principals` is required, with the policies' vocabulary (a name, `group:NAME`, `*`); the counting is per
//!   principal (the router's rule), so `*` gives every principal its own allowance, not one shared by all.
//! - `tools` (globs over exposed names) or `backends` (configured backends, or `*`) say which calls count; never
//!   both; neither: every tool. With `methods = ["*"]` the limit counts every request, so neither may be given.
//! - At least one of `rate`, `quota`, `concurrency`, `repeat`; the keys that refine one (`burst`, `period`,
//!   `repeat_window`) are refused without it, so a half-written limit never silently limits nothing.
//! - `rate = "N/s" | "N/m" | "N/h"` with `burst` (default N); `quota = N` per `period` (default `"1d"`, whole
//!   hours up to `"366d"`; windows are aligned on the Unix epoch, so `"1d"` resets at 00:00 UTC);
//!   `repeat = N` within `repeat_window` (default `"10m"`).
//! - `name` (optional) is how refusals, metrics and `switchyard limits` name the limit; without one the limit is
//!   `limits[INDEX]`. Names are unique.

use std::time::Duration;

use serde::Deserialize;

use super::backend::BackendConfig;
use super::fields::{Fault, KeyPath, list, optional, quoted};
use super::policy::{PolicySubject, parse_backend_ref, parse_name_glob, parse_subject};
use super::values::{Expected, parse_duration};
use crate::glob::Glob;

/// A validated `[[limits]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitConfig {
    /// `name`, or `limits[INDEX]` when the entry has none.
    pub label: String,
    pub principals: Vec<PolicySubject>,
    pub calls: LimitedCalls,
    pub rate: Option<RateConfig>,
    pub quota: Option<QuotaConfig>,
    pub concurrency: Option<u32>,
    pub repeat: Option<RepeatConfig>,
}

/// Which requests a limit counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitedCalls {
    /// Tool calls whose exposed name matches one glob (`["*"]` when `tools` is not given).
    Tools(Vec<Glob>),
    /// Tool calls of these backends (`*`: every backend).
    Backends(Vec<String>),
    /// `methods = ["*"]`: every request.
    Every,
}

/// `rate = "N/<unit>"` with `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    pub calls: u32,
    pub per: Duration,
    pub burst: u32,
}

/// `quota = N` per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaConfig {
    pub calls: u64,
    pub period: Duration,
}

/// `repeat = N` within `repeat_window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatConfig {
    pub times: u32,
    pub window: Duration,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawLimit {
    name: Option<String>,
    principals: Vec<String>,
    tools: Option<Vec<String>>,
    backends: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    rate: Option<String>,
    burst: Option<i64>,
    quota: Option<i64>,
    period: Option<String>,
    concurrency: Option<i64>,
    repeat: Option<i64>,
    repeat_window: Option<String>,
}

const DEFAULT_PERIOD: Duration = Duration::from_secs(86_400);
const DEFAULT_REPEAT_WINDOW: Duration = Duration::from_secs(600);
const HOUR: u64 = 3_600;
const MAX_PERIOD_HOURS: u64 = 366 * 24;
const MAX_COUNT: i64 = 1_000_000_000;

/// Validates `limits[index]` against the configured backends.
pub(super) fn build(index: usize, raw: &RawLimit, backends: &[BackendConfig]) -> Result<LimitConfig, Fault> {
    let entry = KeyPath::root().key("limits").index(index);
    if raw.principals.is_empty() {
        let expected = "a list of principals the limit counts: names, \"group:NAME\" or \"*\" (this key is required)";
        return Err(Fault::invalid(&entry.key("principals"), None, expected.into()));
    }
    let limit = LimitConfig {
        label: optional(&entry.key("name"), raw.name.as_deref(), parse_name)?.unwrap_or_else(|| entry.to_string()),
        principals: list(&entry.key("principals"), &raw.principals, parse_subject)?,
        calls: calls(&entry, raw, backends)?,
        rate: rate(&entry, raw)?,
        quota: quota(&entry, raw)?,
        concurrency: count(&entry.key("concurrency"), raw.concurrency, "calls in flight at once")?,
        repeat: repeat(&entry, raw)?,
    };
    if limit.rate.is_none() && limit.quota.is_none() && limit.concurrency.is_none() && limit.repeat.is_none() {
        let expected =
            "a limit with at least one of `rate`, `quota`, `concurrency` or `repeat` (this one limits nothing)";
        return Err(Fault::invalid(&entry, None, expected.into()));
    }
    Ok(limit)
}

/// Refuses a name two limits share (refusals and metrics would not tell them apart).
pub(super) fn check_unique_labels(limits: &[LimitConfig]) -> Result<(), Fault> {
    for (index, limit) in limits.iter().enumerate() {
        if let Some(first) = limits[..index].iter().position(|earlier| earlier.label == limit.label) {
            return Err(Fault::invalid(
                &KeyPath::root().key("limits").index(index).key("name"),
                Some(quoted(&limit.label)),
                format!("a name no other limit uses (limits[{first}] is also named {:?})", limit.label).into(),
            ));
        }
    }
    Ok(())
}

fn parse_name(text: &str) -> Result<String, Expected> {
    let valid = (1..=64).contains(&text.len())
        && text.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'));
    match valid {
        true => Ok(text.to_owned()),
        false => Err("a name of 1 to 64 letters, digits, `_`, `-` or `.`".into()),
    }
}

fn calls(entry: &KeyPath, raw: &RawLimit, backends: &[BackendConfig]) -> Result<LimitedCalls, Fault> {
    let every = match &raw.methods {
        None => false,
        Some(methods) => every_method(&entry.key("methods"), methods)?,
    };
    let selected = match (&raw.tools, &raw.backends) {
        (Some(_), Some(_)) => {
            let expected = "either `tools` or `backends`, not both (a call is counted by one of them)";
            return Err(Fault::invalid(&entry.key("backends"), None, expected.into()));
        }
        (Some(tools), None) => Some(("tools", LimitedCalls::Tools(list(&entry.key("tools"), tools, parse_name_glob)?))),
        (None, Some(names)) => {
            let parse = |name: &str| parse_backend_ref(name, backends);
            Some(("backends", LimitedCalls::Backends(list(&entry.key("backends"), names, parse)?)))
        }
        (None, None) => None,
    };
    match (every, selected) {
        (true, Some((key, _))) => {
            let expected = "no `tools` or `backends` with `methods = [\"*\"]`, which counts every request";
            Err(Fault::invalid(&entry.key(key), None, expected.into()))
        }
        (true, None) => Ok(LimitedCalls::Every),
        (false, Some((_, calls))) => Ok(calls),
        // `*` is a valid glob, so this list holds it.
        (false, None) => Ok(LimitedCalls::Tools(Glob::new("*").into_iter().collect())),
    }
}

/// `methods`: `["tools/call"]` (the default) or `["*"]`.
fn every_method(key: &KeyPath, methods: &[String]) -> Result<bool, Fault> {
    let expected = "[\"tools/call\"] (the default) or [\"*\"] (every request, refused with HTTP 429)";
    match methods {
        [one] if one == "*" => Ok(true),
        [one] if one == "tools/call" => Ok(false),
        _ => Err(Fault::invalid(key, Some(format!("{methods:?}")), expected.into())),
    }
}

fn rate(entry: &KeyPath, raw: &RawLimit) -> Result<Option<RateConfig>, Fault> {
    let Some((calls, per)) = optional(&entry.key("rate"), raw.rate.as_deref(), parse_rate)? else {
        return refine_nothing(entry, "burst", raw.burst.is_some(), "rate");
    };
    let burst = count(&entry.key("burst"), raw.burst, "calls admitted at once")?.unwrap_or(calls);
    Ok(Some(RateConfig { calls, per, burst }))
}

fn parse_rate(text: &str) -> Result<(u32, Duration), Expected> {
    let expected = || Expected::from("a rate such as \"5/s\", \"100/m\" or \"1000/h\" (at least 1 call per unit)");
    let (calls, unit) = text.split_once('/').ok_or_else(expected)?;
    let calls: u32 = calls.trim().parse().ok().filter(|calls| *calls > 0).ok_or_else(expected)?;
    let per = match unit.trim() {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(HOUR),
        _ => return Err(expected()),
    };
    Ok((calls, per))
}

fn quota(entry: &KeyPath, raw: &RawLimit) -> Result<Option<QuotaConfig>, Fault> {
    let Some(calls) = raw.quota else {
        return refine_nothing(entry, "period", raw.period.is_some(), "quota");
    };
    let calls = u64::from(count(&entry.key("quota"), Some(calls), "calls per period")?.unwrap_or(1));
    let period = optional(&entry.key("period"), raw.period.as_deref(), parse_period)?.unwrap_or(DEFAULT_PERIOD);
    Ok(Some(QuotaConfig { calls, period }))
}

fn parse_period(text: &str) -> Result<Duration, Expected> {
    let expected = "a period of whole hours such as \"1h\", \"1d\" or \"30d\" (at most \"366d\")";
    let period = parse_duration(text).map_err(|_| Expected::from(expected))?;
    let whole_hours = period.as_millis() % u128::from(HOUR * 1_000) == 0;
    match whole_hours && (HOUR..=MAX_PERIOD_HOURS * HOUR).contains(&period.as_secs()) {
        true => Ok(period),
        false => Err(expected.into()),
    }
}

fn repeat(entry: &KeyPath, raw: &RawLimit) -> Result<Option<RepeatConfig>, Fault> {
    let Some(times) = count(&entry.key("repeat"), raw.repeat, "identical calls allowed within the window")? else {
        return refine_nothing(entry, "repeat_window", raw.repeat_window.is_some(), "repeat");
    };
    let parse = |text: &str| {
        parse_duration(text)
            .ok()
            .filter(|window| *window >= Duration::from_secs(1))
            .ok_or(Expected::from("a duration of at least one second such as \"10m\" or \"1h\""))
    };
    let window = optional(&entry.key("repeat_window"), raw.repeat_window.as_deref(), parse)?;
    Ok(Some(RepeatConfig { times, window: window.unwrap_or(DEFAULT_REPEAT_WINDOW) }))
}

/// A whole number from 1 to a billion (`what` says what it counts).
fn count(key: &KeyPath, raw: Option<i64>, what: &str) -> Result<Option<u32>, Fault> {
    let Some(value) = raw else { return Ok(None) };
    match u32::try_from(value).ok().filter(|_| (1..=MAX_COUNT).contains(&value)) {
        Some(value) => Ok(Some(value)),
        None => Err(Fault::invalid(
            key,
            Some(value.to_string()),
            format!("a whole number from 1 to {MAX_COUNT}: {what}").into(),
        )),
    }
}

/// `Ok(None)` for a limit without `base`, unless its refining key `key` is given (`given`).
fn refine_nothing<T>(entry: &KeyPath, key: &str, given: bool, base: &str) -> Result<Option<T>, Fault> {
    match given {
        false => Ok(None),
        true => {
            Err(Fault::invalid(&entry.key(key), None, format!("`{key}` only with `{base}`, which it refines").into()))
        }
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
