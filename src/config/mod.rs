//! The gateway's configuration: `switchyard.toml` (see `switchyard.example.toml`, which documents every key)
//! plus `SWITCHYARD_*` environment overrides, validated into a [`Config`] the rest of the gateway can trust.
//!
//! Rules:
//! - Loading is three steps: TOML syntax (errors keep the parser's line and column), shape (unknown keys and
//!   wrong types, reported with their dotted key path), rules (names, URLs, durations, duplicates; each error
//!   quotes the value and says what was expected). The first problem found stops the load.
//! - Every message names the file (or the environment variable) and the key; none contains a secret.
//! - Everything that can fail is resolved here, at load (credentials included), so a running gateway never
//!   discovers a configuration mistake on its first call.
//! - The environment is passed in as pairs; only [`Config::load`] and the functions of [`locate`] read the
//!   process environment, so tests never touch it.
//! - Before deserializing, `${VAR}` references in string values are expanded ([`expand`]) and, for a file, the
//!   relative paths it names are anchored to its directory ([`anchor`]); defaults and `SWITCHYARD_*` overrides
//!   stay relative to the working directory.

mod anchor;
mod approvals;
mod audit;
mod auth;
mod backend;
mod catalog;
mod credential;
mod de;
mod error;
mod expand;
mod fields;
pub mod import;
use crate::glob;
mod ledger;
mod limits;
mod locate;
mod oauth;
mod openapi;
mod pins;
mod policy;
mod principals;
mod server;
mod starter;
mod stdio;
mod telemetry;
mod traces;
mod values;

use std::collections::HashMap;
use std::path::Path;

pub use approvals::{ApprovalsConfig, DEFAULT_APPROVAL_TIMEOUT, DEFAULT_APPROVAL_WAIT};
pub use audit::{AuditArguments, AuditConfig, AuditFile, DEFAULT_REDACT};
#[cfg(test)]
pub(crate) use auth::ANONYMOUS;
pub use auth::{AnonymousAgents, ApiKeyConfig, AuthConfig, JwksLocation, JwtConfig};
pub use backend::{BackendConfig, Endpoint, ProtocolEra, TaskMode, ToolFilter, Transport};
pub use catalog::{CatalogConfig, CatalogMode, DEFAULT_EXPAND_MAX};
pub use credential::{BackendCredential, CredentialSource, CredentialTarget};
pub use error::ConfigError;
pub use glob::{Glob, GlobError};
pub use ledger::{DEFAULT_MAX_RESULT, LedgerConfig};
pub use limits::{LimitConfig, LimitedCalls, QuotaConfig, RateConfig, RepeatConfig};
pub use oauth::{OAuthClientIdentity, OAuthConfig, OAuthGrant, OAuthPrivateKey, TokenEndpointAuthMethod};
pub use openapi::{DEFAULT_IDEMPOTENT_RETRIES, OpenApiConfig, SpecLocation};
pub use pins::{DEFAULT_MAX_DESCRIPTION, DEFAULT_REFRESH, PinConfig, PinMode, PinNew, ScreenMode};
pub use policy::{PolicyConfig, PolicySubject};
pub use server::{STREAM_REPLAY_KEPT, ServerConfig, TlsFiles};
pub use starter::starter_file;
pub use stdio::{EnvValue, StdioConfig, StdioSessions};
pub use telemetry::{LogFormat, TelemetryConfig, parse_log_format};
pub use traces::{SamplerKind, TracesConfig, TracesSampler};

use approvals::RawApprovals;
use audit::RawAudit;
use auth::RawAuth;
use backend::RawBackend;
use catalog::RawCatalog;
use fields::{Fault, KeyPath, quoted};
use ledger::RawLedger;
use limits::RawLimit;
use policy::RawPolicy;
use serde::Deserialize;
use server::RawServer;
use telemetry::RawTelemetry;

/// The file's shape exactly as written: every key optional, every value in its TOML type, no rule applied yet.
/// Each section's raw type lives with its rules; every one denies unknown keys (a typo must never silently fall
/// back to a default), and values that need rules stay strings so the validation step can quote them back.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    server: RawServer,
    ledger: RawLedger,
    backends: Vec<RawBackend>,
    catalog: RawCatalog,
    /// `None` when the file has no `[auth]` section (the loopback-only anonymous default).
    auth: Option<RawAuth>,
    policies: Vec<RawPolicy>,
    approvals: RawApprovals,
    limits: Vec<RawLimit>,
    telemetry: RawTelemetry,
    /// `None` when the file has no `[audit]` section (no audit trail).
    audit: Option<RawAudit>,
}

/// The file looked for in the working directory when no path is given.
pub const DEFAULT_CONFIG_FILE: &str = "switchyard.toml";

/// The environment variable naming the configuration file when `--config` is not given.
pub const CONFIG_ENV: &str = "SWITCHYARD_CONFIG";

/// A validated configuration. Comparable (a reload diffs the new one against the running one); secrets compare
/// by value, so a rotated credential file counts as a change.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerConfig,
    pub ledger: LedgerConfig,
    /// In file order; names are unique.
    pub backends: Vec<BackendConfig>,
    /// How tools are offered: every definition, or search ([`CatalogConfig`]).
    pub catalog: CatalogConfig,
    pub auth: AuthConfig,
    /// In file order.
    pub policies: Vec<PolicyConfig>,
    pub approvals: ApprovalsConfig,
    /// In file order; labels are unique.
    pub limits: Vec<LimitConfig>,
    pub telemetry: TelemetryConfig,
    /// `None`: no audit trail.
    pub audit: Option<AuditConfig>,
}

impl Config {
    /// Reads, parses and validates `path` (its relative paths anchored to its directory), then applies the
    /// process's `SWITCHYARD_*` overrides.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (file, text) = read(path)?;
        Self::parse(&text, &file, path.parent(), collect_env(process_env()))
    }

    /// Parses and validates `text`; `source_name` is the file name used in messages, `env` the environment
    /// (`${VAR}` references, overrides and credential variables). Relative paths stay relative to the working
    /// directory ([`Config::load`] anchors a file's to its directory).
    pub fn from_toml_str<I, K, V>(text: &str, source_name: &str, env: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self::parse(text, source_name, None, collect_env(env))
    }

    /// The three steps of a load: TOML syntax, then the tree's `${VAR}` references and relative paths (against
    /// `base`), then shape and rules.
    pub(super) fn parse(
        text: &str,
        source_name: &str,
        base: Option<&Path>,
        env: HashMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let mut table: toml::Table = text.parse().map_err(|error| ConfigError::syntax(source_name, text, &error))?;
        expand::expand_table(&mut table, &env).map_err(|fault| fault.in_file(source_name))?;
        if let Some(base) = base {
            anchor::anchor(&mut table, base);
        }
        let raw: RawConfig = de::from_table(table).map_err(|error| error.in_file(source_name))?;
        let mut config = build(&raw, &env).map_err(|fault| fault.in_file(source_name))?;
        config.apply_env(&env)?;
        audit::check_otlp(config.audit.as_ref(), &config.telemetry.traces)
            .map_err(|fault| fault.in_file(source_name))?;
        telemetry::check_metrics_tls(&config.telemetry, config.server.tls.is_some())
            .map_err(|fault| fault.in_file(source_name))?;
        Ok(config)
    }

    /// The configuration of a first run: server defaults and no backends (the caller serves its demo backend).
    pub fn default_demo() -> Config {
        Config {
            server: ServerConfig::default(),
            ledger: LedgerConfig::default(),
            backends: Vec::new(),
            catalog: CatalogConfig::default(),
            auth: AuthConfig::default(),
            policies: Vec::new(),
            approvals: ApprovalsConfig::default(),
            limits: Vec::new(),
            telemetry: TelemetryConfig::default(),
            audit: None,
        }
    }

    /// Applies `SWITCHYARD_*` overrides, for configurations that did not come from a file
    /// (`Config::default_demo().with_env_overrides(std::env::vars())`).
    pub fn with_env_overrides<I, K, V>(mut self, env: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.apply_env(&collect_env(env))?;
        Ok(self)
    }

    fn apply_env(&mut self, env: &HashMap<String, String>) -> Result<(), ConfigError> {
        server::apply_env(&mut self.server, env)?;
        ledger::apply_env(&mut self.ledger, env)?;
        telemetry::apply_env(&mut self.telemetry, env)
    }

    /// What `check` tells the operator about principals (`auth`'s rules): who may use each `authorization_code`
    /// backend, and every policy or admin entry naming a principal no agent can be.
    pub fn principal_notes(&self) -> Vec<String> {
        principals::principal_notes(&self.auth, &self.backends, &self.policies)
    }

    /// Whether this configuration may serve on its (final) listen address (`auth`'s rules): a gateway reachable
    /// from other machines must authenticate its agents unless `[auth] anonymous = true` says otherwise, and a JWT
    /// resource server on a wildcard address needs `public_url`.
    pub fn check_serving(&self) -> Result<(), ConfigError> {
        principals::check_serving(&self.auth, self.server.listen, self.server.public_url.is_some())
    }

    #[cfg(test)]
    pub fn backend(&self, name: &str) -> Option<&BackendConfig> {
        self.backends.iter().find(|backend| backend.name == name)
    }
}

/// The file's name for messages, and its text.
pub(super) fn read(path: &Path) -> Result<(String, String), ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { file: file.clone(), error })?;
    Ok((file, text))
}

/// The process environment; variables whose name or value is not Unicode cannot be settings and are skipped.
pub(super) fn process_env() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
}

pub(super) fn collect_env<I, K, V>(env: I) -> HashMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    env.into_iter().map(|(name, value)| (name.into(), value.into())).collect()
}

fn build(raw: &RawConfig, env: &HashMap<String, String>) -> Result<Config, Fault> {
    let server = server::build(&raw.server)?;
    let ledger = ledger::build(&raw.ledger)?;
    let backends = raw
        .backends
        .iter()
        .enumerate()
        .map(|(index, backend)| backend::build(index, backend, env))
        .collect::<Result<Vec<_>, _>>()?;
    check_unique_names(&backends)?;
    let catalog = catalog::build(&raw.catalog)?;
    let auth = auth::build(raw.auth.as_ref())?;
    principals::check_per_principal_backends(&auth, &backends)?;
    principals::check_exchange_backends(&auth, &backends)?;
    let policies = raw
        .policies
        .iter()
        .enumerate()
        .map(|(index, policy)| policy::build(index, policy, &backends))
        .collect::<Result<Vec<_>, _>>()?;
    let approvals = approvals::build(&raw.approvals)?;
    let limits = raw
        .limits
        .iter()
        .enumerate()
        .map(|(index, limit)| limits::build(index, limit, &backends))
        .collect::<Result<Vec<_>, _>>()?;
    limits::check_unique_labels(&limits)?;
    let telemetry = telemetry::build(&raw.telemetry)?;
    let audit = audit::build(raw.audit.as_ref())?;
    Ok(Config { server, ledger, backends, catalog, auth, policies, approvals, limits, telemetry, audit })
}

fn check_unique_names(backends: &[BackendConfig]) -> Result<(), Fault> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(backends.len());
    for (index, backend) in backends.iter().enumerate() {
        if let Some(first) = seen.insert(&backend.name, index) {
            return Err(Fault::invalid(
                &KeyPath::root().key("backends").index(index).key("name"),
                Some(quoted(&backend.name)),
                format!("a name no other backend uses (backends[{first}] is also named {:?})", backend.name).into(),
            ));
        }
    }
    Ok(())
}

/// Parses a duration the way configuration files write it (`"30s"`, `"1h30m"`), for command-line flags.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    values::parse_duration(text).map_err(|expected| format!("`{text}`: expected {}", expected.0))
}

#[cfg(test)]
mod tests;
