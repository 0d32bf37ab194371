//! The `[telemetry]` section: where `/metrics` is served and how the log is written; plus the
//! `SWITCHYARD_METRICS_LISTEN` and `SWITCHYARD_LOG_FORMAT` environment overrides of those keys. Its trace keys and
//! the standard OpenTelemetry variables are [`super::traces`]'s.
//!
//! Rules:
//! - Without `metrics_listen`, `/metrics` is served on the main listener; with it, only on its own listener at
//!   that address (a loopback or private one, for a scraper).
//! - `metrics_tls = true` serves that listener over TLS with `[server] tls_cert` / `tls_key` (so it needs both
//!   and `metrics_listen`); default off, since a scraper beside the gateway often speaks plain HTTP.
//! - `log_format` is `"text"` (the default) or `"json"`; `serve --log-format` overrides both the file and the
//!   environment. One parser per key, shared by the file, the environment and the flag.

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::Deserialize;
use serde::de;

use super::error::ConfigError;
use super::fields::{EnvLookup, Fault, KeyPath, optional};
use super::traces::{self, TraceKeys, TracesConfig};
use super::values::{Expected, TextVisitor, listen_text, parse_bool, parse_listen};

const LOG_FORMAT_EXPECTED: &str = "\"text\" or \"json\"";

/// The validated `[telemetry]` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetryConfig {
    /// The address of `/metrics`'s own listener; `None`: `/metrics` is on the main listener.
    pub metrics_listen: Option<SocketAddr>,
    /// Whether that listener speaks TLS with the main listener's certificate (`[server] tls_cert`).
    pub metrics_tls: bool,
    pub log_format: LogFormat,
    pub traces: TracesConfig,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Lines for people (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl LogFormat {
    fn parse(text: &str) -> Result<LogFormat, Expected> {
        match text.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(LOG_FORMAT_EXPECTED.into()),
        }
    }
}

/// Parses `--log-format` the way the file's `log_format` is parsed.
pub fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    LogFormat::parse(text).map_err(|expected| format!("`{text}`: expected {}", expected.0))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawTelemetry {
    #[serde(deserialize_with = "listen_text")]
    pub(super) metrics_listen: Option<String>,
    pub(super) metrics_tls: Option<bool>,
    #[serde(deserialize_with = "log_format_text")]
    pub(super) log_format: Option<String>,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) service_name: Option<String>,
    pub(super) traces_sampler: Option<String>,
    /// A TOML float or integer (`1` is a ratio too).
    pub(super) traces_sampler_arg: Option<f64>,
}

fn log_format_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(LOG_FORMAT_EXPECTED)).map(Some)
}

/// Validates the `[telemetry]` section read from the file.
pub(super) fn build(raw: &RawTelemetry) -> Result<TelemetryConfig, Fault> {
    let section = KeyPath::root().key("telemetry");
    Ok(TelemetryConfig {
        metrics_listen: optional(&section.key("metrics_listen"), raw.metrics_listen.as_deref(), parse_listen)?,
        metrics_tls: raw.metrics_tls.unwrap_or_default(),
        log_format: optional(&section.key("log_format"), raw.log_format.as_deref(), LogFormat::parse)?
            .unwrap_or_default(),
        traces: traces::build(&TraceKeys {
            otlp_endpoint: raw.otlp_endpoint.as_deref(),
            service_name: raw.service_name.as_deref(),
            traces_sampler: raw.traces_sampler.as_deref(),
            traces_sampler_arg: raw.traces_sampler_arg,
        })?,
    })
}

/// Applies the `SWITCHYARD_METRICS_LISTEN` and `SWITCHYARD_LOG_FORMAT` overrides found in `env`.
pub(super) fn apply_env(telemetry: &mut TelemetryConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let lookup = EnvLookup::new(env, "telemetry");
    if let Some(listen) = lookup.get("SWITCHYARD_METRICS_LISTEN", "metrics_listen", parse_listen)? {
        telemetry.metrics_listen = Some(listen);
    }
    if let Some(format) = lookup.get("SWITCHYARD_LOG_FORMAT", "log_format", LogFormat::parse)? {
        telemetry.log_format = format;
    }
    if let Some(tls) = lookup.get("SWITCHYARD_METRICS_TLS", "metrics_tls", parse_bool)? {
        telemetry.metrics_tls = tls;
    }
    traces::apply_env(&mut telemetry.traces, env)
}

/// `metrics_tls` needs the listener it applies to and the certificate it serves (checked once the environment's
/// overrides are applied, since either may come from there).
pub(super) fn check_metrics_tls(telemetry: &TelemetryConfig, server_tls: bool) -> Result<(), Fault> {
    let problem = match (telemetry.metrics_listen, server_tls) {
        _ if !telemetry.metrics_tls => return Ok(()),
        (None, _) => "`metrics_listen` to be set too (without it /metrics is served on `listen`, with its TLS)",
        (Some(_), false) => "`[server] tls_cert` and `tls_key` to be set too (their certificate is the one served)",
        (Some(_), true) => return Ok(()),
    };
    let key = KeyPath::root().key("telemetry").key("metrics_tls");
    Err(Fault::invalid(&key, Some("true".to_owned()), Expected(problem.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn telemetry(text: &str, env: &[(&str, &str)]) -> Result<TelemetryConfig, String> {
        Config::from_toml_str(text, "t.toml", env.iter().copied()).map(|c| c.telemetry).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_file_values_and_overrides() {
        assert_eq!(telemetry("", &[]), Ok(TelemetryConfig::default()));
        let text = "[telemetry]\nmetrics_listen = \"127.0.0.1:9464\"\nlog_format = \"json\"\n";
        let expected = TelemetryConfig {
            metrics_listen: Some("127.0.0.1:9464".parse().unwrap()),
            log_format: LogFormat::Json,
            ..TelemetryConfig::default()
        };
        assert_eq!(telemetry(text, &[]), Ok(expected));
        let env = [("SWITCHYARD_METRICS_LISTEN", "[::1]:9000"), ("SWITCHYARD_LOG_FORMAT", "text")];
        let overridden = telemetry(text, &env).unwrap();
        assert_eq!(overridden.metrics_listen, Some("[::1]:9000".parse().unwrap()));
        assert_eq!(overridden.log_format, LogFormat::Text);
        assert_eq!(telemetry(text, &[("SWITCHYARD_LOG_FORMAT", "")]).unwrap().log_format, LogFormat::Json);
    }

    #[test]
    fn bad_values_name_the_key_and_what_was_expected() {
        let bad_format = telemetry("[telemetry]\nlog_format = \"xml\"\n", &[]).unwrap_err();
        assert_eq!(bad_format, "t.toml: telemetry.log_format = \"xml\": expected \"text\" or \"json\"");
        let bad_listen = telemetry("[telemetry]\nmetrics_listen = \"localhost\"\n", &[]).unwrap_err();
        assert!(
            bad_listen.starts_with("t.toml: telemetry.metrics_listen = \"localhost\": expected an IP address and port"),
            "{bad_listen}"
        );
        let wrong_type = telemetry("[telemetry]\nmetrics_listen = 9464\n", &[]).unwrap_err();
        assert!(
            wrong_type
                .starts_with("t.toml: telemetry.metrics_listen: invalid type: integer `9464`, expected an IP address"),
            "{wrong_type}"
        );
        let wrong_type = telemetry("[telemetry]\nlog_format = true\n", &[]).unwrap_err();
        assert!(
            wrong_type.starts_with(
                "t.toml: telemetry.log_format: invalid type: boolean `true`, expected \"text\" or \"json\""
            ),
            "{wrong_type}"
        );
        let unknown = telemetry("[telemetry]\nlog_fromat = \"json\"\n", &[]).unwrap_err();
        assert!(unknown.starts_with("t.toml: unknown key telemetry.log_fromat"), "{unknown}");
        let env = telemetry("", &[("SWITCHYARD_LOG_FORMAT", "yaml")]).unwrap_err();
        assert_eq!(
            env,
            "environment variable SWITCHYARD_LOG_FORMAT = \"yaml\" (overrides telemetry.log_format): expected \"text\" or \"json\""
        );
        let env = telemetry("", &[("SWITCHYARD_METRICS_LISTEN", "9464")]).unwrap_err();
        assert!(env.contains("SWITCHYARD_METRICS_LISTEN = \"9464\" (overrides telemetry.metrics_listen)"), "{env}");
    }

    /// A key added later without its variable and its line in the example fails here (the keys are the parser's
    /// own list, from the hint of an unknown key).
    #[test]
    fn every_key_has_its_variable_and_its_example() {
        let hint = telemetry("[telemetry]\nno_such_key = 1\n", &[]).unwrap_err();
        let keys: Vec<&str> = hint.split('`').skip(1).step_by(2).filter(|key| *key != "no_such_key").collect();
        let variables = [
            ("metrics_listen", "SWITCHYARD_METRICS_LISTEN"),
            ("metrics_tls", "SWITCHYARD_METRICS_TLS"),
            ("log_format", "SWITCHYARD_LOG_FORMAT"),
        ];
        // The trace keys are overridden by the standard OTEL_* variables instead (tested in `traces`).
        let trace_keys = ["otlp_endpoint", "service_name", "traces_sampler", "traces_sampler_arg"];
        let own: Vec<&str> = keys.into_iter().filter(|key| !trace_keys.contains(key)).collect();
        assert_eq!(own, variables.map(|(key, _)| key), "{hint}");
        let example = include_str!("../../switchyard.example.toml");
        for (key, var) in variables {
            assert!(example.contains(&format!("Env: {var}.")), "the example does not document {var}");
            assert!(example.contains(&format!("\n{key} = ")) || example.contains(&format!("# {key} = ")), "{key}");
            let refused = telemetry("", &[(var, "a b")]).unwrap_err();
            assert!(refused.contains(&format!("overrides telemetry.{key}")), "{refused}");
        }
    }

    #[test]
    fn the_flag_parses_like_the_key() {
        assert_eq!(parse_log_format("json"), Ok(LogFormat::Json));
        assert_eq!(parse_log_format("JSON"), Err("`JSON`: expected \"text\" or \"json\"".to_owned()));
    }
}
