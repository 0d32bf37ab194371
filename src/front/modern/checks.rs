//! The checks every 2026-07-28 request passes before it is served, in the order the era's dual-era dispatch
//! gives them (2026-07-28 basic §"`_meta`", transports §"Standard MCP Request Headers", basic §"Versioning"):
//! the `_meta` client fields, then the headers against the body, then the version.
//!
//! Rules:
//! - `params._meta` must carry `io.modelcontextprotocol/protocolVersion` (a string) and
//!   `io.modelcontextprotocol/clientCapabilities` (an object; `{}` declares none); `clientInfo` is optional.
//!   Missing or mistyped: 400/`-32602`. A `logLevel` must be one of the eight levels (`-32602`).
//! - No `Mcp-Session-Id` (the era has no sessions); `MCP-Protocol-Version` equals the `_meta` version;
//!   `Mcp-Method` equals `method`; `Mcp-Name` equals `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//!   (`resources/read`), after decoding a `=?base64?…?=` value. Each header at most once, visible ASCII only.
//!   Any failure: 400/`-32020`, naming the header.
//! - The version must be one the gateway serves in this era, else 400/`-32022` with the supported ones.

use axum::http::{HeaderMap, HeaderName};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde_json::Value;

use crate::front::error::FrontError;
use crate::mcp::meta;
use crate::mcp::method::Method;
use crate::mcp::{METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER, is_modern_version};

/// What a request's `_meta` says that serving it needs.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RequestMeta {
    /// The rank ([`meta::log_level_rank`]) of the lowest log level the agent wants; `None`: no log messages.
    pub(super) log_level: Option<usize>,
    /// The client capabilities the agent declared for this request (an object).
    pub(super) capabilities: Value,
}

/// Runs every check on request `id` (see the module rules).
pub(super) fn admit(
    id: &Value,
    method: &Method,
    params: &Value,
    headers: &HeaderMap,
) -> Result<RequestMeta, FrontError> {
    let bad_meta = |why: String| FrontError::BadParams { id: id.clone(), why };
    let Some(request_meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(bad_meta(format!(
            "`params._meta` is required in MCP 2026-07-28: it carries `{}` and `{}`",
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES
        )));
    };
    let Some(version) = request_meta.get(meta::PROTOCOL_VERSION).and_then(Value::as_str) else {
        return Err(bad_meta(format!("`_meta` needs `{}`, the request's protocol version", meta::PROTOCOL_VERSION)));
    };
    let Some(capabilities) = request_meta.get(meta::CLIENT_CAPABILITIES).filter(|c| c.is_object()).cloned() else {
        return Err(bad_meta(format!(
            "`_meta` needs `{}`, the client capabilities of this request (`{{}}` declares none)",
            meta::CLIENT_CAPABILITIES
        )));
    };
    headers_match(method, params, version, headers)
        .map_err(|why| FrontError::HeaderMismatch { id: id.clone(), why })?;
    if !is_modern_version(version) {
        return Err(FrontError::UnsupportedVersion { id: id.clone(), requested: version.to_owned() });
    }
    let log_level = match request_meta.get(meta::LOG_LEVEL) {
        None => None,
        Some(level) => Some(level.as_str().and_then(meta::log_level_rank).ok_or_else(|| {
            bad_meta(format!("`{}` must be one of {}", meta::LOG_LEVEL, meta::LOG_LEVELS.join(", ")))
        })?),
    };
    Ok(RequestMeta { log_level, capabilities })
}

/// Whether the headers say what the body says; the error names the header that does not.
fn headers_match(method: &Method, params: &Value, version: &str, headers: &HeaderMap) -> Result<(), String> {
    if headers.contains_key(SESSION_ID_HEADER) {
        return Err("MCP 2026-07-28 has no sessions: send requests without `Mcp-Session-Id`".into());
    }
    expect(headers, PROTOCOL_VERSION_HEADER, Some(version), "`_meta` protocol version")?;
    expect(headers, METHOD_HEADER, Some(method.as_str()), "`method`")?;
    let (field, what) = match method {
        Method::ToolsCall | Method::PromptsGet => ("name", "`params.name`"),
        Method::ResourcesRead => ("uri", "`params.uri`"),
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => ("taskId", "`params.taskId`"),
        _ => return Ok(()),
    };
    expect(headers, NAME_HEADER, params.get(field).and_then(Value::as_str), what)
}

/// Header `name` must be sent once and decode to `body` (`None`: the body has no such value, so neither may the
/// header).
fn expect(headers: &HeaderMap, name: &'static str, body: Option<&str>, what: &str) -> Result<(), String> {
    let mut values = headers.get_all(HeaderName::from_static(name)).iter();
    let (first, second) = (values.next(), values.next());
    if second.is_some() {
        return Err(format!("`{name}` was sent more than once"));
    }
    let sent = match first {
        None => None,
        Some(value) => {
            let text = value.to_str().map_err(|_| format!("`{name}` has characters a header value may not carry"))?;
            Some(decode(text).ok_or_else(|| format!("`{name}` is not valid `=?base64?…?=`-encoded UTF-8"))?)
        }
    };
    match (sent.as_deref(), body) {
        (Some(sent), Some(body)) if sent == body => Ok(()),
        (None, None) => Ok(()),
        (None, Some(_)) => Err(format!("`{name}` is required and must equal {what}")),
        (Some(sent), _) => Err(format!("`{name}` is `{sent}`, which does not match {what}")),
    }
}

/// A header value as its sender meant it: `=?base64?{base64 of UTF-8}?=` decoded, anything else as it is.
fn decode(value: &str) -> Option<String> {
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let bytes = STANDARD.decode(encoded).or_else(|_| STANDARD_NO_PAD.decode(encoded)).ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
