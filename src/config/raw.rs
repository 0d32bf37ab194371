//! The file's shape exactly as written: every key optional, every value in its TOML type, no rule applied yet.
//!
//! Rules: every struct denies unknown keys (a typo must never silently fall back to a default); values that need
//! rules (names, URLs, durations, sizes) stay strings here so the validation step can quote them back with their
//! key path; nothing here is public outside `config`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::backend::{ProtocolEra, Transport};
use super::server::LISTEN_EXPECTED;
use super::stdio::StdioSessions;
use super::telemetry::LOG_FORMAT_EXPECTED;
use super::units::{DURATION_EXPECTED, SIZE_EXPECTED};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawConfig {
    pub(super) server: RawServer,
    pub(super) ledger: RawLedger,
    pub(super) backends: Vec<RawBackend>,
    /// `None` when the file has no `[auth]` section (the loopback-only anonymous default).
    pub(super) auth: Option<RawAuth>,
    pub(super) policies: Vec<RawPolicy>,
    pub(super) telemetry: RawTelemetry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawServer {
    #[serde(deserialize_with = "listen_text")]
    pub(super) listen: Option<String>,
    pub(super) data_dir: Option<String>,
    pub(super) session_secret_file: Option<String>,
    pub(super) allowed_origins: Vec<String>,
    pub(super) allowed_hosts: Vec<String>,
    pub(super) max_body: Option<SizeInput>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) session_ttl: Option<String>,
    pub(super) max_revocations: Option<i64>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) shutdown_drain: Option<String>,
    pub(super) max_backend_sessions: Option<i64>,
    pub(super) max_backend_sessions_per_principal: Option<i64>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) header_timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) body_timeout: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) idle_timeout: Option<String>,
    pub(super) max_connections: Option<i64>,
    pub(super) max_connections_per_principal: Option<i64>,
    pub(super) max_streams_per_session: Option<i64>,
    pub(super) max_stdio_processes: Option<i64>,
    pub(super) public_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawLedger {
    pub(super) url: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) retention: Option<String>,
    pub(super) max_result: Option<SizeInput>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) lease: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawTelemetry {
    #[serde(deserialize_with = "listen_text")]
    pub(super) metrics_listen: Option<String>,
    #[serde(deserialize_with = "log_format_text")]
    pub(super) log_format: Option<String>,
    pub(super) otlp_endpoint: Option<String>,
    pub(super) service_name: Option<String>,
    pub(super) traces_sampler: Option<String>,
    /// A TOML float or integer (`1` is a ratio too).
    pub(super) traces_sampler_arg: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawBackend {
    pub(super) name: Option<String>,
    pub(super) url: Option<String>,
    pub(super) transport: Transport,
    pub(super) era: Option<ProtocolEra>,
    pub(super) prefix: Option<String>,
    pub(super) resource_prefix: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) timeout: Option<String>,
    pub(super) tools: RawTools,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) credential: Option<RawCredential>,
    pub(super) oauth: Option<super::oauth::RawOAuth>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) env: Option<BTreeMap<String, RawEnvValue>>,
    pub(super) cwd: Option<String>,
    pub(super) sessions: Option<StdioSessions>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) idle_timeout: Option<String>,
    pub(super) max_processes: Option<i64>,
}

/// A value of a stdio backend's `env` table: a plain string, or `{ env = "VAR" }` / `{ file = "/path" }` for a
/// secret (the same forms as `credential`).
#[derive(Debug)]
pub(super) enum RawEnvValue {
    Plain(String),
    Secret(RawSecretRef),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawSecretRef {
    pub(super) env: Option<String>,
    pub(super) file: Option<String>,
}

impl<'de> Deserialize<'de> for RawEnvValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EnvValueVisitor)
    }
}

struct EnvValueVisitor;

impl<'de> Visitor<'de> for EnvValueVisitor {
    type Value = RawEnvValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, or a secret written { env = \"VAR\" } or { file = \"/path\" }")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<RawEnvValue, E> {
        Ok(RawEnvValue::Plain(text.to_owned()))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawEnvValue, A::Error> {
        RawSecretRef::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawEnvValue::Secret)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawTools {
    pub(super) allow: Vec<String>,
    pub(super) deny: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawCredential {
    pub(super) header: Option<String>,
    pub(super) env: Option<String>,
    pub(super) file: Option<String>,
    pub(super) prefix: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAuth {
    pub(super) anonymous: bool,
    pub(super) admin_principals: Vec<String>,
    pub(super) console_loopback: bool,
    pub(super) api_keys: Vec<RawApiKey>,
    pub(super) jwt: Option<RawJwt>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawApiKey {
    pub(super) principal: Option<String>,
    pub(super) sha256: Option<String>,
    pub(super) groups: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawJwt {
    pub(super) issuer: Option<String>,
    pub(super) audiences: Option<Vec<String>>,
    pub(super) jwks_url: Option<String>,
    pub(super) jwks_file: Option<String>,
    pub(super) principal_claim: Option<String>,
    pub(super) principal_prefix: Option<String>,
    pub(super) groups_claim: Option<String>,
    pub(super) scopes_supported: Vec<String>,
    pub(super) required_scopes: Vec<String>,
    pub(super) authorization_servers: Option<Vec<String>>,
    #[serde(deserialize_with = "duration_text")]
    pub(super) leeway: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawPolicy {
    pub(super) principals: Vec<String>,
    pub(super) allow: Vec<String>,
    pub(super) deny: Vec<String>,
    pub(super) backends: Vec<String>,
}

/// A byte size as written: a TOML integer (bytes) or a string with a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SizeInput {
    Bytes(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for SizeInput {
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
struct TextVisitor(&'static str);

impl Visitor<'_> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<String, E> {
        Ok(text.to_owned())
    }
}

fn duration_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(DURATION_EXPECTED)).map(Some)
}

fn listen_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(LISTEN_EXPECTED)).map(Some)
}

fn log_format_text<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    deserializer.deserialize_str(TextVisitor(LOG_FORMAT_EXPECTED)).map(Some)
}
