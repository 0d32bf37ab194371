//! The `[telemetry]` section: what the gateway reports to operators, and where. Its trace keys and the standard
//! OpenTelemetry variables are [`super::traces`]'s.

use std::collections::HashMap;

use super::error::ConfigError;
use super::fields::Fault;
use super::raw::RawTelemetry;
use super::traces::{self, TracesConfig};

/// The validated `[telemetry]` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetryConfig {
    pub traces: TracesConfig,
}

pub(super) fn build(raw: &RawTelemetry) -> Result<TelemetryConfig, Fault> {
    Ok(TelemetryConfig { traces: traces::build(raw)? })
}

pub(super) fn apply_env(telemetry: &mut TelemetryConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    traces::apply_env(&mut telemetry.traces, env)
}
