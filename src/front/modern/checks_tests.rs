//! Tests of the 2026-07-28 request checks: which refusal each broken request gets, in the era's order.

use axum::http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::*;

fn request_meta(version: &str) -> Value {
    json!({meta::PROTOCOL_VERSION: version, meta::CLIENT_CAPABILITIES: {}})
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn call_headers(name: &str) -> HeaderMap {
    headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", name)])
}

fn call(name: &str) -> Value {
    json!({"name": name, "_meta": request_meta("2026-07-28")})
}

/// The JSON-RPC code and the message of a refusal.
fn refusal(result: Result<RequestMeta, FrontError>) -> (i64, String) {
    match result.expect_err("a refusal") {
        FrontError::HeaderMismatch { why, .. } => (crate::mcp::jsonrpc::HEADER_MISMATCH, why),
        FrontError::BadParams { why, .. } => (crate::mcp::jsonrpc::INVALID_PARAMS, why),
        FrontError::UnsupportedVersion { requested, .. } => {
            (crate::mcp::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION, requested)
        }
        other => panic!("unexpected refusal {other:?}"),
    }
}

#[test]
fn a_matching_request_passes() {
    let mut params = call("echo");
    params["_meta"][meta::CLIENT_CAPABILITIES] = json!({"sampling": {}});
    let admitted = admit(&json!(1), &Method::ToolsCall, &params, &call_headers("echo")).unwrap();
    assert_eq!(admitted.log_level, None);
    assert_eq!(admitted.capabilities, json!({"sampling": {}}), "the request's capabilities are kept for the backend");
}

#[test]
fn missing_meta_fields_are_invalid_params_before_headers_are_looked_at() {
    let id = json!(1);
    for params in [
        json!({"name": "echo"}),
        json!({"name": "echo", "_meta": {meta::CLIENT_CAPABILITIES: {}}}),
        json!({"name": "echo", "_meta": {meta::PROTOCOL_VERSION: "2026-07-28"}}),
        json!({"name": "echo", "_meta": {meta::PROTOCOL_VERSION: "2026-07-28", meta::CLIENT_CAPABILITIES: []}}),
    ] {
        let (code, why) = refusal(admit(&id, &Method::ToolsCall, &params, &HeaderMap::new()));
        assert_eq!(code, crate::mcp::jsonrpc::INVALID_PARAMS, "{params}: {why}");
    }
}

#[test]
fn every_header_must_match_the_body() {
    let id = json!(1);
    let (code, why) = refusal(admit(&id, &Method::ToolsCall, &call("echo"), &call_headers("other")));
    assert_eq!(code, crate::mcp::jsonrpc::HEADER_MISMATCH);
    assert!(why.contains("mcp-name") && why.contains("`other`"), "{why}");
    let wrong_method =
        headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list"), ("mcp-name", "echo")]);
    assert!(refusal(admit(&id, &Method::ToolsCall, &call("echo"), &wrong_method)).1.contains("mcp-method"));
    let no_name = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call")]);
    assert!(refusal(admit(&id, &Method::ToolsCall, &call("echo"), &no_name)).1.contains("required"));
    let no_version = headers(&[("mcp-method", "tools/call"), ("mcp-name", "echo")]);
    assert!(refusal(admit(&id, &Method::ToolsCall, &call("echo"), &no_version)).1.contains("mcp-protocol-version"));
    let mut twice = call_headers("echo");
    twice.append("mcp-method", HeaderValue::from_static("tools/call"));
    assert!(refusal(admit(&id, &Method::ToolsCall, &call("echo"), &twice)).1.contains("more than once"));
    let mut session = call_headers("echo");
    session.insert("mcp-session-id", HeaderValue::from_static("abc"));
    assert!(refusal(admit(&id, &Method::ToolsCall, &call("echo"), &session)).1.contains("no sessions"));
}

#[test]
fn names_may_be_base64_encoded() {
    let id = json!(1);
    // "héllo wörld " (non-ASCII, trailing space) as UTF-8, base64.
    let name = "héllo wörld ";
    let encoded = format!("=?base64?{}?=", STANDARD.encode(name));
    assert!(admit(&id, &Method::ToolsCall, &call(name), &call_headers(&encoded)).is_ok());
    let garbage = refusal(admit(&id, &Method::ToolsCall, &call(name), &call_headers("=?base64?not base64!?=")));
    assert!(garbage.1.contains("base64"), "{garbage:?}");
    let read = json!({"uri": "file:///a b", "_meta": request_meta("2026-07-28")});
    let read_headers = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "resources/read"),
        ("mcp-name", &format!("=?base64?{}?=", STANDARD_NO_PAD.encode("file:///a b"))),
    ]);
    assert!(admit(&id, &Method::ResourcesRead, &read, &read_headers).is_ok(), "unpadded base64 is decoded too");
}

#[test]
fn header_mismatch_comes_before_the_version_and_the_version_before_log_levels() {
    let id = json!(1);
    let future = json!({"_meta": request_meta("2099-01-01")});
    let agreeing = headers(&[("mcp-protocol-version", "2099-01-01"), ("mcp-method", "tools/list")]);
    let (code, requested) = refusal(admit(&id, &Method::ToolsList, &future, &agreeing));
    assert_eq!((code, requested.as_str()), (crate::mcp::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION, "2099-01-01"));
    let disagreeing = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]);
    assert_eq!(refusal(admit(&id, &Method::ToolsList, &future, &disagreeing)).0, crate::mcp::jsonrpc::HEADER_MISMATCH);

    let list_headers = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]);
    let mut with_level = json!({"_meta": request_meta("2026-07-28")});
    with_level["_meta"][meta::LOG_LEVEL] = json!("warning");
    let level = admit(&id, &Method::ToolsList, &with_level, &list_headers).unwrap().log_level;
    assert_eq!(level, meta::log_level_rank("warning"));
    with_level["_meta"][meta::LOG_LEVEL] = json!("loud");
    assert_eq!(
        refusal(admit(&id, &Method::ToolsList, &with_level, &list_headers)).0,
        crate::mcp::jsonrpc::INVALID_PARAMS
    );
}
