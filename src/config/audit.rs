//! The `[audit]` section: where the audit trail goes (a JSON-lines file rotated by size, OpenTelemetry logs, or
//! both) and how much of a tool call's arguments it shows.
//!
//! Rules:
//! - No section: no audit trail (the default). A section must name a sink: `file`, `otlp = true`, or both.
//! - `max_size` (default 100 MiB, at least 4 KiB) is the size past which the file is rotated; `keep` (default 10,
//!   1 to 1000) is how many rotated files are kept beside the current one.
//! - `arguments` is `digest` (the default: the SHA-256 the ledger records), `redacted` or `full`; `redact` lists
//!   the globs of argument names whose values `redacted` replaces, matched without regard to case at every depth
//!   (default: the common secret names of [`DEFAULT_REDACT`]). `redact` with another mode is refused as a mistake.
//! - `otlp = true` needs the telemetry's OTLP endpoint (`[telemetry] otlp_endpoint` or the `OTEL_EXPORTER_OTLP_*`
//!   variables); checked once the environment is applied ([`check_otlp`]).

use std::path::PathBuf;

use serde::Deserialize;

use super::fields::{Count, Fault, KeyPath, list, optional, optional_size, quoted};
use super::traces::TracesConfig;
use super::values::{Expected, SizeInput};
use crate::glob::Glob;

/// The argument names `redacted` hides when `redact` is not given.
pub const DEFAULT_REDACT: [&str; 10] = [
    "*password*",
    "*passwd*",
    "*secret*",
    "*token*",
    "*api_key*",
    "*apikey*",
    "*authorization*",
    "*credential*",
    "*private_key*",
    "*cookie*",
];
pub const DEFAULT_AUDIT_MAX_SIZE: u64 = 100 << 20;
pub const DEFAULT_AUDIT_KEEP: usize = 10;
/// The smallest `max_size`: a rotation per few events would only churn files.
const MIN_MAX_SIZE: u64 = 4 << 10;

/// The validated `[audit]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    pub file: Option<AuditFile>,
    /// Whether events also go to the telemetry's OTLP endpoint as log records.
    pub otlp: bool,
    pub arguments: AuditArguments,
    /// Lowercase globs of the argument names `redacted` hides.
    pub redact: Vec<Glob>,
}

/// The file sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFile {
    pub path: PathBuf,
    pub max_size: u64,
    pub keep: usize,
}

/// How a tool call's arguments appear in its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditArguments {
    Digest,
    Redacted,
    Full,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAudit {
    file: Option<String>,
    max_size: Option<SizeInput>,
    keep: Option<i64>,
    otlp: bool,
    arguments: Option<String>,
    redact: Option<Vec<String>>,
}

/// Validates the `[audit]` section read from the file (`None`: there is none).
pub(super) fn build(raw: Option<&RawAudit>) -> Result<Option<AuditConfig>, Fault> {
    let Some(raw) = raw else { return Ok(None) };
    let section = KeyPath::root().key("audit");
    let file = match raw.file.as_deref() {
        Some(path) => Some(build_file(&section, path, raw)?),
        None if raw.max_size.is_some() || raw.keep.is_some() => {
            let expected = "a file path: `max_size` and `keep` rotate the audit file";
            return Err(Fault::invalid(&section.key("file"), None, expected.into()));
        }
        None => None,
    };
    if file.is_none() && !raw.otlp {
        let expected = "a path for the audit file, or `otlp = true` (an [audit] section needs a sink)";
        return Err(Fault::invalid(&section.key("file"), None, expected.into()));
    }
    let arguments = optional(&section.key("arguments"), raw.arguments.as_deref(), parse_arguments)?
        .unwrap_or(AuditArguments::Digest);
    let redact = match &raw.redact {
        Some(_) if arguments != AuditArguments::Redacted => {
            let expected = "no `redact` unless `arguments = \"redacted\"` (the globs apply to nothing else)";
            return Err(Fault::invalid(&section.key("redact"), None, expected.into()));
        }
        Some(globs) => list(&section.key("redact"), globs, parse_glob)?,
        None => DEFAULT_REDACT
            .iter()
            .map(|glob| parse_glob(glob))
            .collect::<Result<_, _>>()
            .map_err(|_| Fault::invalid(&section.key("redact"), None, "the default globs are valid".into()))?,
    };
    Ok(Some(AuditConfig { file, otlp: raw.otlp, arguments, redact }))
}

fn build_file(section: &KeyPath, path: &str, raw: &RawAudit) -> Result<AuditFile, Fault> {
    if path.is_empty() {
        return Err(Fault::invalid(&section.key("file"), Some(quoted(path)), "a file path".into()));
    }
    let max_size = optional_size(&section.key("max_size"), raw.max_size.as_ref(), check_max_size)?
        .map_or(DEFAULT_AUDIT_MAX_SIZE, |size| size as u64);
    let keep = Count { max: 1000, unit: "rotated files" }.build(&section.key("keep"), raw.keep)?;
    Ok(AuditFile { path: PathBuf::from(path), max_size, keep: keep.unwrap_or(DEFAULT_AUDIT_KEEP) })
}

fn check_max_size(size: u64) -> Result<usize, Expected> {
    if size < MIN_MAX_SIZE {
        return Err("a size of at least 4 KiB".into());
    }
    usize::try_from(size).map_err(|_| "a smaller size".into())
}

fn parse_arguments(text: &str) -> Result<AuditArguments, Expected> {
    match text {
        "digest" => Ok(AuditArguments::Digest),
        "redacted" => Ok(AuditArguments::Redacted),
        "full" => Ok(AuditArguments::Full),
        _ => Err("\"digest\", \"redacted\" or \"full\"".into()),
    }
}

fn parse_glob(text: &str) -> Result<Glob, Expected> {
    Glob::new(&text.to_lowercase()).map_err(|error| error.to_string().into())
}

/// `otlp = true` needs somewhere to send to: the traces' endpoint, known once the environment is applied.
pub(super) fn check_otlp(audit: Option<&AuditConfig>, traces: &TracesConfig) -> Result<(), Fault> {
    match audit {
        Some(audit) if audit.otlp && traces.endpoint.is_none() => Err(Fault::invalid(
            &KeyPath::root().key("audit").key("otlp"),
            Some("true".into()),
            "an OTLP endpoint to send to: `[telemetry] otlp_endpoint` or OTEL_EXPORTER_OTLP_ENDPOINT, with traces \
             on (audit events go to <endpoint>/v1/logs)"
                .into(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
