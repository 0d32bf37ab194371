//! The trace keys of `[telemetry]` (`otlp_endpoint`, `service_name`, `traces_sampler`, `traces_sampler_arg`) and
//! the standard OpenTelemetry environment variables that set the same things and more (OpenTelemetry
//! specification, "Environment Variable Specification" and "OTLP Exporter Configuration").
//!
//! Rules (precedence, strongest first):
//! - Off: `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn traces off whatever else is set.
//! - Where: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, used as given), else `OTEL_EXPORTER_OTLP_ENDPOINT`
//!   (a base URL; `v1/traces` is appended), else `otlp_endpoint` (a base URL too; a path already ending in
//!   `/v1/traces` is refused, because it would be appended twice), else `http://localhost:4318/v1/traces` when
//!   `OTEL_TRACES_EXPORTER=otlp` asks for OTLP explicitly; nothing set: traces are off (the default).
//! - Sampler: `OTEL_TRACES_SAMPLER` over `traces_sampler` over `parentbased_always_on`; the ratio of the
//!   `*traceidratio` samplers is `OTEL_TRACES_SAMPLER_ARG` over `traces_sampler_arg` over 1.0.
//! - Service name: `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else `service_name`,
//!   else `switchyard`. The other resource attributes come from `OTEL_RESOURCE_ATTRIBUTES` only.
//! - Headers (`OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_TRACES_HEADERS` per name), the timeout
//!   (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` over `OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds, default 10 s) and the
//!   batch bounds (`OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`) come from
//!   the environment only. The protocol (`OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`) may be `http/json` (what is sent)
//!   or `http/protobuf` (collectors take JSON on the same endpoint); `grpc` is refused.
//! - Empty variables count as unset. Every variable read is checked, also when traces end up off, and a bad one
//!   is an error naming it; header values are never shown (they often hold an API key).

use std::collections::HashMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use reqwest::Url;

use super::error::ConfigError;
use super::fields::{Count, EnvLookup, Fault, KeyPath, env_setting, optional, quoted};
use super::values::{Expected, parse_bool};
use crate::ledger_url::redact;

pub const DEFAULT_SERVICE_NAME: &str = "switchyard";
pub const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_secs(10);
/// Where `OTEL_TRACES_EXPORTER=otlp` sends spans when no endpoint is set (the OTLP/HTTP default).
pub const DEFAULT_OTLP_TRACES_URL: &str = "http://localhost:4318/v1/traces";
/// The signal path appended to a base endpoint.
const TRACES_PATH: &str = "v1/traces";
pub const DEFAULT_BATCH_DELAY: Duration = Duration::from_secs(5);
pub const DEFAULT_MAX_QUEUE: usize = 2048;
pub const DEFAULT_MAX_BATCH: usize = 512;

/// Where traces go and how they are sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct TracesConfig {
    /// The full URL spans are `POST`ed to; `None`: traces are off.
    pub endpoint: Option<Url>,
    /// Sent with every export (marked sensitive).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub timeout: Duration,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES` in order, without `service.name`.
    pub resource_attributes: Vec<(String, String)>,
    pub sampler: TracesSampler,
    pub batch_delay: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
}

impl Default for TracesConfig {
    fn default() -> Self {
        TracesConfig {
            endpoint: None,
            headers: Vec::new(),
            timeout: DEFAULT_OTLP_TIMEOUT,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            resource_attributes: Vec::new(),
            sampler: TracesSampler::default(),
            batch_delay: DEFAULT_BATCH_DELAY,
            max_queue: DEFAULT_MAX_QUEUE,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

/// One of the OpenTelemetry SDK samplers, by its `OTEL_TRACES_SAMPLER` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplerKind {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio,
    #[default]
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio,
}

/// The sampler and the ratio its `*traceidratio` forms use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracesSampler {
    pub kind: SamplerKind,
    /// 0.0 to 1.0; used only by the `*traceidratio` kinds.
    pub ratio: f64,
}

impl Default for TracesSampler {
    fn default() -> Self {
        TracesSampler { kind: SamplerKind::default(), ratio: 1.0 }
    }
}

const SAMPLERS: [(&str, SamplerKind); 6] = [
    ("always_on", SamplerKind::AlwaysOn),
    ("always_off", SamplerKind::AlwaysOff),
    ("traceidratio", SamplerKind::TraceIdRatio),
    ("parentbased_always_on", SamplerKind::ParentBasedAlwaysOn),
    ("parentbased_always_off", SamplerKind::ParentBasedAlwaysOff),
    ("parentbased_traceidratio", SamplerKind::ParentBasedTraceIdRatio),
];

impl SamplerKind {
    fn uses_ratio(self) -> bool {
        matches!(self, SamplerKind::TraceIdRatio | SamplerKind::ParentBasedTraceIdRatio)
    }
}

/// The trace keys of the `[telemetry]` section as written (the section's raw type is `telemetry`'s, which lends
/// them).
pub(super) struct TraceKeys<'a> {
    pub(super) otlp_endpoint: Option<&'a str>,
    pub(super) service_name: Option<&'a str>,
    pub(super) traces_sampler: Option<&'a str>,
    pub(super) traces_sampler_arg: Option<f64>,
}

/// Validates the trace keys of the `[telemetry]` section read from the file.
pub(super) fn build(raw: &TraceKeys<'_>) -> Result<TracesConfig, Fault> {
    let section = KeyPath::root().key("telemetry");
    let defaults = TracesConfig::default();
    let endpoint = build_endpoint(&section.key("otlp_endpoint"), raw.otlp_endpoint)?;
    let service_name = optional(&section.key("service_name"), raw.service_name, parse_service_name)?;
    let kind = optional(&section.key("traces_sampler"), raw.traces_sampler, parse_sampler)?;
    let ratio_key = section.key("traces_sampler_arg");
    let ratio = raw
        .traces_sampler_arg
        .map(|ratio| {
            check_ratio(ratio).map_err(|expected| Fault::invalid(&ratio_key, Some(ratio.to_string()), expected))
        })
        .transpose()?;
    let kind = kind.unwrap_or_default();
    if let (Some(ratio), false) = (ratio, kind.uses_ratio()) {
        let expected = "no traces_sampler_arg: it is the ratio of the traceidratio and parentbased_traceidratio \
                        samplers, and traces_sampler is not one of them";
        return Err(Fault::invalid(&ratio_key, Some(ratio.to_string()), expected.into()));
    }
    Ok(TracesConfig {
        endpoint,
        service_name: service_name.unwrap_or(defaults.service_name),
        sampler: TracesSampler { kind, ratio: ratio.unwrap_or(1.0) },
        ..defaults
    })
}

/// `otlp_endpoint` as written: a base URL (the value is shown without a password when refused).
fn build_endpoint(key: &KeyPath, raw: Option<&str>) -> Result<Option<Url>, Fault> {
    let Some(text) = raw else { return Ok(None) };
    let refused = |expected: Expected| Fault::invalid(key, Some(quoted(&redact(text))), expected);
    let base = parse_base_url(text).map_err(refused)?;
    if base.path().trim_end_matches('/').ends_with("/v1/traces") {
        return Err(refused(
            "the collector's base URL such as \"http://127.0.0.1:4318\": traces go to <otlp_endpoint>/v1/traces, \
             so leave /v1/traces out"
                .into(),
        ));
    }
    Ok(Some(traces_url(base)))
}

/// Applies the OpenTelemetry variables found in `env` (see the module rules for their precedence).
pub(super) fn apply_env(traces: &mut TracesConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let lookup = EnvLookup::new(env, "telemetry");
    let full = lookup.get_shown("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "otlp_endpoint", parse_base_url, redact)?;
    let base = lookup.get_shown("OTEL_EXPORTER_OTLP_ENDPOINT", "otlp_endpoint", parse_base_url, redact)?;
    if let Some(endpoint) = full.or_else(|| base.map(traces_url)) {
        traces.endpoint = Some(endpoint);
    }
    match env_setting(env, "OTEL_TRACES_EXPORTER", parse_exporter, str::to_owned)? {
        Some(Exporter::None) => traces.endpoint = None,
        Some(Exporter::Otlp) if traces.endpoint.is_none() => {
            traces.endpoint = Url::parse(DEFAULT_OTLP_TRACES_URL).ok();
        }
        _ => {}
    }
    for var in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
        env_setting(env, var, parse_protocol, str::to_owned)?;
    }
    apply_exporter_env(traces, env)?;
    apply_resource_env(traces, env)?;
    apply_sampler_env(traces, env)?;
    if env_setting(env, "OTEL_SDK_DISABLED", parse_bool, str::to_owned)? == Some(true) {
        traces.endpoint = None;
    }
    Ok(())
}

fn apply_exporter_env(traces: &mut TracesConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let hidden = |_: &str| "<hidden: header values may hold credentials>".to_owned();
    let mut headers = env_setting(env, "OTEL_EXPORTER_OTLP_HEADERS", parse_headers, hidden)?.unwrap_or_default();
    for (name, value) in
        env_setting(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", parse_headers, hidden)?.unwrap_or_default()
    {
        headers.retain(|(known, _)| *known != name);
        headers.push((name, value));
    }
    traces.headers = headers;
    let general = env_setting(env, "OTEL_EXPORTER_OTLP_TIMEOUT", parse_millis, str::to_owned)?;
    let specific = env_setting(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", parse_millis, str::to_owned)?;
    if let Some(timeout) = specific.or(general) {
        traces.timeout = timeout;
    }
    if let Some(delay) = env_setting(env, "OTEL_BSP_SCHEDULE_DELAY", parse_millis, str::to_owned)? {
        traces.batch_delay = delay;
    }
    let queue = Count { max: MAX_QUEUE_LIMIT, unit: "spans" };
    if let Some(max_queue) = env_setting(env, "OTEL_BSP_MAX_QUEUE_SIZE", |text| queue.parse(text), str::to_owned)? {
        traces.max_queue = max_queue;
    }
    let batch = Count { max: traces.max_queue, unit: "spans (at most OTEL_BSP_MAX_QUEUE_SIZE)" };
    match env_setting(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", |text| batch.parse(text), str::to_owned)? {
        Some(max_batch) => traces.max_batch = max_batch,
        None => traces.max_batch = traces.max_batch.min(traces.max_queue),
    }
    Ok(())
}

/// The largest accepted `OTEL_BSP_MAX_QUEUE_SIZE`.
const MAX_QUEUE_LIMIT: usize = 1_000_000;

fn apply_resource_env(traces: &mut TracesConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let attributes =
        env_setting(env, "OTEL_RESOURCE_ATTRIBUTES", parse_resource_attributes, str::to_owned)?.unwrap_or_default();
    let (named, others): (Vec<_>, Vec<_>) = attributes.into_iter().partition(|(key, _)| key == "service.name");
    traces.resource_attributes = others;
    if let Some((_, name)) = named.into_iter().next_back() {
        traces.service_name = name;
    }
    let lookup = EnvLookup::new(env, "telemetry");
    if let Some(name) = lookup.get("OTEL_SERVICE_NAME", "service_name", parse_service_name)? {
        traces.service_name = name;
    }
    Ok(())
}

fn apply_sampler_env(traces: &mut TracesConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let lookup = EnvLookup::new(env, "telemetry");
    if let Some(kind) = lookup.get("OTEL_TRACES_SAMPLER", "traces_sampler", parse_sampler)? {
        traces.sampler.kind = kind;
    }
    // The argument means something only to the ratio samplers; to the others it is ignored, as the spec says.
    if traces.sampler.kind.uses_ratio()
        && let Some(ratio) = lookup.get("OTEL_TRACES_SAMPLER_ARG", "traces_sampler_arg", parse_ratio)?
    {
        traces.sampler.ratio = ratio;
    }
    Ok(())
}

fn parse_base_url(text: &str) -> Result<Url, Expected> {
    let expected = "an http or https URL such as \"http://127.0.0.1:4318\"";
    let url = Url::parse(text.trim()).map_err(|error| Expected(format!("{expected} ({error})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(expected.into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a URL without credentials (`user:pass@`); send them in OTEL_EXPORTER_OTLP_HEADERS".into());
    }
    Ok(url)
}

/// `base` with `v1/traces` appended to its path.
fn traces_url(mut base: Url) -> Url {
    let path = format!("{}/{TRACES_PATH}", base.path().trim_end_matches('/'));
    base.set_path(&path);
    base
}

fn parse_service_name(text: &str) -> Result<String, Expected> {
    let name = text.trim();
    let valid = (1..=255).contains(&name.len()) && !name.chars().any(char::is_control);
    valid.then(|| name.to_owned()).ok_or_else(|| "a service name of 1–255 characters such as \"switchyard\"".into())
}

fn parse_sampler(text: &str) -> Result<SamplerKind, Expected> {
    let name = text.trim().to_ascii_lowercase();
    SAMPLERS.iter().find(|(known, _)| *known == name).map(|(_, kind)| *kind).ok_or_else(|| {
        let names: Vec<&str> = SAMPLERS.iter().map(|(name, _)| *name).collect();
        Expected(format!("one of {}", names.join(", ")))
    })
}

const RATIO_EXPECTED: &str = "a sampling ratio from 0.0 to 1.0 such as 0.25";

fn check_ratio(ratio: f64) -> Result<f64, Expected> {
    (0.0..=1.0).contains(&ratio).then_some(ratio).ok_or_else(|| RATIO_EXPECTED.into())
}

fn parse_ratio(text: &str) -> Result<f64, Expected> {
    text.trim().parse::<f64>().map_err(|_| Expected::from(RATIO_EXPECTED)).and_then(check_ratio)
}

enum Exporter {
    Otlp,
    None,
}

fn parse_exporter(text: &str) -> Result<Exporter, Expected> {
    match text.trim().to_ascii_lowercase().as_str() {
        "otlp" => Ok(Exporter::Otlp),
        "none" => Ok(Exporter::None),
        _ => Err("\"otlp\" or \"none\" (the only trace exporter is OTLP over HTTP)".into()),
    }
}

fn parse_protocol(text: &str) -> Result<(), Expected> {
    match text.trim() {
        "http/json" | "http/protobuf" => Ok(()),
        _ => Err("\"http/json\" or \"http/protobuf\" (traces are sent over HTTP as JSON, which OTLP/HTTP \
                  collectors accept on the same endpoint; gRPC is not spoken)"
            .into()),
    }
}

/// A positive whole number of milliseconds.
fn parse_millis(text: &str) -> Result<Duration, Expected> {
    let expected = "a whole number of milliseconds from 1 to 3600000";
    let millis: u64 = text.trim().parse().map_err(|_| Expected::from(expected))?;
    (1..=3_600_000).contains(&millis).then(|| Duration::from_millis(millis)).ok_or_else(|| expected.into())
}

/// `key=value` pairs separated by commas, keys and values percent-encoded (the W3C Baggage format the
/// OpenTelemetry variables use); blank items are skipped.
fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, Expected> {
    let mut pairs = Vec::new();
    for (index, item) in text.split(',').map(str::trim).enumerate().filter(|(_, item)| !item.is_empty()) {
        let position = index + 1;
        let Some((key, value)) = item.split_once('=') else {
            return Err(Expected(format!("comma-separated key=value pairs; item {position} has no `=`")));
        };
        let decode = |part: &str| {
            percent_decode(part.trim()).ok_or_else(|| {
                Expected(format!("comma-separated key=value pairs; item {position} is not valid percent-encoded UTF-8"))
            })
        };
        let key = decode(key)?;
        if key.is_empty() {
            return Err(Expected(format!("comma-separated key=value pairs; item {position} has an empty key")));
        }
        pairs.push((key, decode(value)?));
    }
    Ok(pairs)
}

fn parse_headers(text: &str) -> Result<Vec<(HeaderName, HeaderValue)>, Expected> {
    parse_pairs(text)?
        .into_iter()
        .enumerate()
        .map(|(index, (name, value))| {
            let position = index + 1;
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Expected(format!("HTTP headers as name=value pairs; header {position} has an invalid name"))
            })?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                Expected(format!("HTTP headers as name=value pairs; the value of `{name}` is not a valid header value"))
            })?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

fn parse_resource_attributes(text: &str) -> Result<Vec<(String, String)>, Expected> {
    parse_pairs(text)
}

/// Decodes `%XX` escapes; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes.get(at + 1..at + 3).filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))?;
            decoded.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
#[path = "traces_tests.rs"]
mod tests;
