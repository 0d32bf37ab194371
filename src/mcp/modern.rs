//! The wire vocabulary of MCP 2026-07-28, the sessionless ("modern") revision that
//! the root and [`super::meta`] do not already hold: the version a modern request is first sent with, the headers
//! that mirror `tools/call` arguments (`basic/transports/streamable-http.mdx` §Headers), the value encoding of every
//! mirrored header, the `input_required` result type, and a result without `resultType` for earlier revisions. The versions, `mcp-method` / `mcp-name` and the `_meta`
//! keys live once, in the root ([`super::MODERN_PROTOCOL_VERSIONS`]) and [`super::meta`].
//!
//! Rules: a header value is sent as-is unless it is not plain visible ASCII without leading or trailing
//! whitespace, or looks like the sentinel itself; then it is `=?base64?{base64 of its UTF-8}?=` (lowercase
//! sentinel). Receivers decode before comparing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::MODERN_PROTOCOL_VERSIONS;

/// The version a modern request is first sent with.
pub const LATEST_MODERN_VERSION: &str = MODERN_PROTOCOL_VERSIONS[0];

/// The prefix of the headers mirroring `tools/call` arguments whose schema names them (`x-mcp-header`).
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";
/// The schema keyword that names an argument's header.
pub const HEADER_KEYWORD: &str = "x-mcp-header";

/// `result.resultType` of a result that asks the client for input (multi round-trip requests).
pub const INPUT_REQUIRED: &str = "input_required";

/// `result` as a session-era client may see it: without `resultType`, a member every 2026-07-28 result carries
/// and no earlier revision defines (2025-11-25 clients may refuse what their schema does not know).
pub fn without_result_type(mut result: Value) -> Value {
    if let Some(members) = result.as_object_mut() {
        members.remove("resultType");
    }
    result
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// A mirrored header's value for `text`: as-is when it is safe on the wire, else in the base64 sentinel.
pub fn encode_header_value(text: &str) -> String {
    let plain = text.bytes().all(|byte| (0x20..0x7f).contains(&byte))
        && text.trim() == text
        && !(text.starts_with(SENTINEL_START) && text.ends_with(SENTINEL_END));
    if plain { text.to_owned() } else { format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(text)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_go_as_they_are() {
        for plain in ["echo", "tools/call", "file:///a b.txt", "x=1;y=2", ""] {
            assert_eq!(encode_header_value(plain), plain);
        }
    }

    #[test]
    fn unsafe_values_are_wrapped_in_the_sentinel() {
        assert_eq!(encode_header_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode_header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode_header_value("tab\there"), "=?base64?dGFiCWhlcmU=?=");
        assert_eq!(encode_header_value("line\r\nbreak"), "=?base64?bGluZQ0KYnJlYWs=?=");
        // A value that merely looks like the sentinel must not be taken for an encoded one.
        assert_eq!(encode_header_value("=?base64?YQ==?="), "=?base64?PT9iYXNlNjQ/WVE9PT89?=");
    }
}
