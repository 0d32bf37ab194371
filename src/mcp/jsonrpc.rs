//! JSON-RPC 2.0 as MCP uses it (MCP 2025-11-25 "Base protocol"): message classification, the standard error
//! codes, and builders for the messages the gateway writes. Messages stay `serde_json::Value` so that fields this
//! code does not know about pass through untouched.

use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2025-11-25's code for an unknown resource (server/resources §"Error Handling"); 2026-07-28 uses
/// [`INVALID_PARAMS`] instead.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2025-11-25's "URL elicitation required"; 2026-07-28 has no such error.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// 2026-07-28: a request header does not match the body (transports §"Standard MCP Request Headers").
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: serving the request needs a client capability the request's `_meta` did not declare
/// (`data.requiredCapabilities`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28: the request's protocol version is not served (`data.supported`, `data.requested`).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// What one JSON-RPC message is, by the members it carries.
#[derive(Debug, PartialEq)]
pub enum Kind<'a> {
    Request { id: &'a Value, method: &'a str },
    Notification { method: &'a str },
    Response { id: &'a Value },
    Invalid,
}

/// Classifies a message: a `method` with an `id` is a request, without one a notification; an `id` with
/// `result` or `error` is a response.
pub fn kind(message: &Value) -> Kind<'_> {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").filter(|id| is_valid_id(id));
    match (method, id) {
        (Some(method), Some(id)) => Kind::Request { id, method },
        (Some(method), None) if message.get("id").is_none() => Kind::Notification { method },
        (None, Some(id)) if message.get("result").is_some() || message.get("error").is_some() => Kind::Response { id },
        _ => Kind::Invalid,
    }
}

/// Whether a message says it is JSON-RPC 2.0 (`"jsonrpc": "2.0"`, which the specification requires of every
/// message).
pub fn declares_version(message: &Value) -> bool {
    message.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
}

/// MCP narrows JSON-RPC ids to strings and integers (never null).
pub fn is_valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

pub fn request(id: &Value, method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

pub fn notification(method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response; `id` is `None` when the request's id could not be read (it is then sent as `null`).
pub fn error(id: Option<&Value>, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_each_kind_of_message() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        assert_eq!(kind(&request), Kind::Request { id: &json!(1), method: "ping" });
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(kind(&note), Kind::Notification { method: "notifications/initialized" });
        let response = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        assert_eq!(kind(&response), Kind::Response { id: &json!("a") });
        let failure = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -1, "message": "x"}});
        assert_eq!(kind(&failure), Kind::Response { id: &json!(2) });
    }

    #[test]
    fn only_version_2_0_is_declared() {
        assert!(declares_version(&json!({"jsonrpc": "2.0", "method": "ping", "id": 1})));
        for message in [json!({"method": "ping", "id": 1}), json!({"jsonrpc": "1.0"}), json!({"jsonrpc": 2.0})] {
            assert!(!declares_version(&message), "{message}");
        }
    }

    #[test]
    fn null_or_fractional_ids_are_invalid() {
        assert_eq!(kind(&json!({"jsonrpc": "2.0", "id": null, "method": "ping"})), Kind::Invalid);
        assert_eq!(kind(&json!({"jsonrpc": "2.0", "id": 1.5, "result": {}})), Kind::Invalid);
        assert_eq!(kind(&json!({"jsonrpc": "2.0", "id": 3})), Kind::Invalid);
    }
}
