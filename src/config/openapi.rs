//! The keys of a `transport = "openapi"` backend: a REST API described by an OpenAPI document, offered as tools.
//!
//! Rules:
//! - `spec` (required) is a file path (relative to the configuration file) or an `https` URL; plain `http` only
//!   to a loopback host. The document itself is read when the gateway lowers the configuration, not here.
//! - `url` (optional) is the API's base URL; without it the document's first server is used. With
//!   `[backends.oauth]` it is required: the tokens are issued for it.
//! - `operations = { allow, deny }` are globs over the tool names (the `operationId`s).
//! - `idempotency_header` (off by default) names the header a non-safe request carries the claim's key in;
//!   `idempotent_operations` (globs) narrows which operations carry it; `idempotent_retries` (default 2, at most
//!   10) bounds the retries of a lost answer; `retry_idempotent_methods` retries GET, HEAD, OPTIONS, PUT and DELETE
//!   without a key. None of these keys is accepted by another transport.

use std::path::PathBuf;

use http::HeaderName;
use reqwest::Url;
use serde::Deserialize;

use super::fields::{Fault, KeyPath, list, optional, refuse_set, required};
use super::values::{Expected, parse_header_name};
use crate::glob::Glob;

/// The default of `idempotent_retries`.
pub const DEFAULT_IDEMPOTENT_RETRIES: u32 = 2;
const MAX_IDEMPOTENT_RETRIES: i64 = 10;

/// Where the OpenAPI document is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecLocation {
    File(PathBuf),
    Url(Url),
}

/// A validated `transport = "openapi"` backend's own keys.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenApiConfig {
    pub spec: SpecLocation,
    /// The API's base URL (`None`: the document's first server).
    pub url: Option<Url>,
    /// Which operations become tools (globs over their names; empty `allow`: all).
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
    pub idempotency_header: Option<HeaderName>,
    /// Empty: every non-safe operation carries the key (when `idempotency_header` is set).
    pub idempotent_operations: Vec<Glob>,
    pub idempotent_retries: u32,
    pub retry_idempotent_methods: bool,
}

/// The openapi keys as the file has them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawOperations {
    allow: Vec<String>,
    deny: Vec<String>,
}

/// Borrowed openapi keys of a `[[backends]]` entry.
pub(super) struct OpenApiKeys<'a> {
    pub(super) spec: Option<&'a str>,
    pub(super) operations: Option<&'a RawOperations>,
    pub(super) idempotency_header: Option<&'a str>,
    pub(super) idempotent_operations: Option<&'a [String]>,
    pub(super) idempotent_retries: Option<i64>,
    pub(super) retry_idempotent_methods: Option<bool>,
}

impl OpenApiKeys<'_> {
    fn present(&self) -> [(&'static str, bool); 6] {
        [
            ("spec", self.spec.is_some()),
            ("operations", self.operations.is_some()),
            ("idempotency_header", self.idempotency_header.is_some()),
            ("idempotent_operations", self.idempotent_operations.is_some()),
            ("idempotent_retries", self.idempotent_retries.is_some()),
            ("retry_idempotent_methods", self.retry_idempotent_methods.is_some()),
        ]
    }
}

/// Refuses the openapi keys on a backend of another transport.
pub(super) fn refuse_keys(entry: &KeyPath, keys: &OpenApiKeys<'_>) -> Result<(), Fault> {
    refuse_set(entry, &keys.present(), "no such key on this backend: it is only for transport = \"openapi\"")
}

/// Validates the openapi keys of `entry`; `url` is the entry's `url`, already parsed; `oauth`: whether the entry
/// has `[backends.oauth]`, whose tokens are issued for `url` (so it must be configured, not read from the document).
pub(super) fn build(
    entry: &KeyPath,
    keys: &OpenApiKeys<'_>,
    url: Option<Url>,
    oauth: bool,
) -> Result<OpenApiConfig, Fault> {
    let spec = required(&entry.key("spec"), keys.spec, parse_spec, SPEC_EXPECTED)?;
    if oauth && url.is_none() {
        return Err(Fault::invalid(
            &entry.key("url"),
            None,
            "the API's base URL: with `[backends.oauth]` its tokens are issued for this URL, so it is not taken from \
             the document"
                .into(),
        ));
    }
    let operations = keys.operations.map_or((Vec::new(), Vec::new()), |raw| (raw.allow.clone(), raw.deny.clone()));
    let operations_key = entry.key("operations");
    let allow = list(&operations_key.key("allow"), &operations.0, parse_glob)?;
    let deny = list(&operations_key.key("deny"), &operations.1, parse_glob)?;
    let idempotency_header = optional(&entry.key("idempotency_header"), keys.idempotency_header, parse_header_name)?;
    let idempotent_operations =
        list(&entry.key("idempotent_operations"), keys.idempotent_operations.unwrap_or_default(), parse_glob)?;
    if idempotency_header.is_none() && !idempotent_operations.is_empty() {
        return Err(Fault::invalid(
            &entry.key("idempotent_operations"),
            None,
            "to be set together with `idempotency_header`, the header the key is sent in".into(),
        ));
    }
    let retries = keys.idempotent_retries.unwrap_or(i64::from(DEFAULT_IDEMPOTENT_RETRIES));
    let idempotent_retries =
        u32::try_from(retries).ok().filter(|_| retries <= MAX_IDEMPOTENT_RETRIES).ok_or_else(|| {
            Fault::invalid(
                &entry.key("idempotent_retries"),
                Some(retries.to_string()),
                format!("a number of retries from 0 to {MAX_IDEMPOTENT_RETRIES}").into(),
            )
        })?;
    Ok(OpenApiConfig {
        spec,
        url,
        allow,
        deny,
        idempotency_header,
        idempotent_operations,
        idempotent_retries,
        retry_idempotent_methods: keys.retry_idempotent_methods.unwrap_or(false),
    })
}

const SPEC_EXPECTED: &str =
    "a path to an OpenAPI document (JSON or YAML), such as \"./petstore.yaml\", or an https URL of one";

fn parse_spec(text: &str) -> Result<SpecLocation, Expected> {
    if text.is_empty() {
        return Err(SPEC_EXPECTED.into());
    }
    if !text.contains("://") {
        return Ok(SpecLocation::File(PathBuf::from(text)));
    }
    let url = Url::parse(text).map_err(|error| Expected(format!("{SPEC_EXPECTED} ({error})")))?;
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => Ok(SpecLocation::Url(url)),
        "http" if loopback => Ok(SpecLocation::Url(url)),
        "http" => Err("an https URL (plain http only to a loopback address)".into()),
        other => Err(format!("a file path or an https URL, not a {other} URL").into()),
    }
}

fn parse_glob(text: &str) -> Result<Glob, Expected> {
    Glob::new(text)
        .map_err(|_| "a non-empty glob pattern over operation names (`*` matches any run of characters)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_files_or_https() {
        assert_eq!(parse_spec("api.yaml"), Ok(SpecLocation::File("api.yaml".into())));
        assert!(matches!(parse_spec("https://example.com/openapi.json"), Ok(SpecLocation::Url(_))));
        assert!(matches!(parse_spec("http://127.0.0.1:8080/openapi.json"), Ok(SpecLocation::Url(_))));
        assert!(parse_spec("http://example.com/openapi.json").is_err_and(|e| e.0.contains("https")));
        assert!(parse_spec("ftp://example.com/a").is_err());
        assert!(parse_spec("").is_err());
    }
}
