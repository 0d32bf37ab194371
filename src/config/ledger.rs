//! The `[ledger]` section: where the call ledger lives (the at-most-once guarantee), how long settled
//! calls are kept, how large a stored result may be, and how long a claim's lease runs; plus the
//! `SWITCHYARD_LEDGER_*` environment overrides of those keys.
//!
//! Rules:
//! - The URL is parsed by [`LedgerUrl::parse`], the parser the ledger itself uses, so configuration and store
//!   accept exactly the same spellings; a URL is only ever quoted back with its password replaced by `***`.
//! - The default URL (`sqlite`) means `<data_dir>/ledger.db`, resolved when the store is opened, so moving the
//!   data directory (also through `SWITCHYARD_DATA_DIR`) moves the ledger with it.
//! - `max_result = 0` is allowed: every result is then kept as a digest only.
//! - `encrypt_results` (default true): a SQLite or PostgreSQL ledger keeps results sealed with the vault key
//!   (`ledger/at_rest.rs`); rows written before, or with it off, keep replaying.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::fields::{EnvLookup, Fault, KeyPath, optional, optional_size, quoted};
use super::values::{
    DURATION_EXPECTED, Expected, SIZE_EXPECTED, SizeInput, duration_text, parse_byte_size, parse_positive_duration,
};
use crate::ledger_url::{LedgerUrl, redact};

/// Results larger than this (JSON bytes) are kept as a digest only.
pub const DEFAULT_MAX_RESULT: usize = 1 << 20;
pub const DEFAULT_LEDGER_RETENTION: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_LEDGER_LEASE: Duration = Duration::from_secs(30);
/// The largest accepted `max_result`: results are held in memory while they are stored.
pub const MAX_RESULT_LIMIT: usize = 1 << 30;
/// The shortest accepted lease: shorter ones would expire between two renewals of a busy instance.
pub const MIN_LEDGER_LEASE: Duration = Duration::from_secs(1);

/// The validated `[ledger]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerConfig {
    pub url: LedgerUrl,
    /// How long completed and unknown calls are kept before they are purged.
    pub retention: Duration,
    /// Largest result stored with its call, in bytes of JSON; larger results are kept as a SHA-256 digest.
    pub max_result: usize,
    /// How long an in-flight claim stays valid without renewal before it is presumed dead (`unknown`).
    pub lease: Duration,
    /// Whether new results are stored sealed with the vault key (SQLite and PostgreSQL).
    pub encrypt_results: bool,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            url: LedgerUrl::default(),
            retention: DEFAULT_LEDGER_RETENTION,
            max_result: DEFAULT_MAX_RESULT,
            lease: DEFAULT_LEDGER_LEASE,
            encrypt_results: true,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawLedger {
    url: Option<String>,
    #[serde(deserialize_with = "duration_text")]
    retention: Option<String>,
    max_result: Option<SizeInput>,
    #[serde(deserialize_with = "duration_text")]
    lease: Option<String>,
    encrypt_results: Option<bool>,
}

/// Validates the `[ledger]` section read from the file.
pub(super) fn build(raw: &RawLedger) -> Result<LedgerConfig, Fault> {
    let section = KeyPath::root().key("ledger");
    let defaults = LedgerConfig::default();
    let url_key = section.key("url");
    let url = match raw.url.as_deref() {
        None => defaults.url,
        Some(text) => {
            parse_url(text).map_err(|expected| Fault::invalid(&url_key, Some(quoted(&shown_url(text))), expected))?
        }
    };
    Ok(LedgerConfig {
        url,
        retention: optional(&section.key("retention"), raw.retention.as_deref(), parse_positive_duration)?
            .unwrap_or(defaults.retention),
        max_result: optional_size(&section.key("max_result"), raw.max_result.as_ref(), check_max_result)?
            .unwrap_or(defaults.max_result),
        lease: optional(&section.key("lease"), raw.lease.as_deref(), parse_lease)?.unwrap_or(defaults.lease),
        encrypt_results: raw.encrypt_results.unwrap_or(defaults.encrypt_results),
    })
}

/// Applies the `SWITCHYARD_LEDGER_*` overrides found in `env`.
pub(super) fn apply_env(ledger: &mut LedgerConfig, env: &HashMap<String, String>) -> Result<(), ConfigError> {
    let lookup = EnvLookup::new(env, "ledger");
    if let Some(url) = lookup.get_shown("SWITCHYARD_LEDGER_URL", "url", parse_url, shown_url)? {
        ledger.url = url;
    }
    if let Some(retention) = lookup.get("SWITCHYARD_LEDGER_RETENTION", "retention", parse_positive_duration)? {
        ledger.retention = retention;
    }
    if let Some(max_result) = lookup
        .get("SWITCHYARD_LEDGER_MAX_RESULT", "max_result", |text| parse_byte_size(text).and_then(check_max_result))?
    {
        ledger.max_result = max_result;
    }
    if let Some(lease) = lookup.get("SWITCHYARD_LEDGER_LEASE", "lease", parse_lease)? {
        ledger.lease = lease;
    }
    Ok(())
}

fn parse_url(text: &str) -> Result<LedgerUrl, Expected> {
    LedgerUrl::parse(text).map_err(|invalid| Expected(invalid.expected))
}

/// The URL as it may appear in a message: without its password.
fn shown_url(text: &str) -> String {
    redact(text)
}

fn check_max_result(bytes: u64) -> Result<usize, Expected> {
    usize::try_from(bytes)
        .ok()
        .filter(|bytes| *bytes <= MAX_RESULT_LIMIT)
        .ok_or_else(|| Expected(format!("{SIZE_EXPECTED}, at most 1GiB")))
}

fn parse_lease(text: &str) -> Result<Duration, Expected> {
    parse_positive_duration(text)
        .ok()
        .filter(|lease| *lease >= MIN_LEDGER_LEASE)
        .ok_or_else(|| Expected(format!("{DURATION_EXPECTED}, of at least 1s")))
}
