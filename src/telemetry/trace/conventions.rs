//! The OpenTelemetry semantic conventions for MCP (open-telemetry/semantic-conventions-genai, `docs/gen-ai/mcp.md`,
//! status Development) applied to one request: span names, attributes and `error.type`.
//!
//! Rules:
//! - The span name is `{mcp.method.name} {target}`, the target being the tool (`tools/call`) or prompt
//!   (`prompts/get`) name; a resource URI is recorded as `mcp.resource.uri` but kept out of the name (the
//!   convention's default: URIs are high-cardinality). A name is a target only when it has the shape the catalog
//!   allows (1–64 of `[A-Za-z0-9_-]`); anything else an agent sends is left out of the name and the attributes.
//! - `gen_ai.operation.name` is `execute_tool` for `tools/call` and absent otherwise.
//! - `jsonrpc.request.id` is the id's string form; a `null` id is not recorded.
//! - `error.type`: a JSON-RPC error's code (also `rpc.response.status_code`, the message as the status message);
//!   a `CallToolResult` with `isError: true` is `tool_error`, or the gateway's `switchyard/outcome` when it says
//!   why the call failed (`not_delivered`, `unknown`, `in_progress`).

use serde_json::Value;

use super::span::Attr;
use crate::mcp::{OUTCOME_META, method};

pub const METHOD_NAME: &str = "mcp.method.name";
pub const SESSION_ID: &str = "mcp.session.id";
pub const PROTOCOL_VERSION: &str = "mcp.protocol.version";
pub const RESOURCE_URI: &str = "mcp.resource.uri";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const PROMPT_NAME: &str = "gen_ai.prompt.name";
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const REQUEST_ID: &str = "jsonrpc.request.id";
pub const STATUS_CODE: &str = "rpc.response.status_code";
pub const NETWORK_TRANSPORT: &str = "network.transport";
pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
pub const NETWORK_PROTOCOL_VERSION: &str = "network.protocol.version";
pub const SERVER_ADDRESS: &str = "server.address";
pub const SERVER_PORT: &str = "server.port";
pub const CLIENT_ADDRESS: &str = "client.address";
/// `error.type` of a tool that ran and reported failure.
pub const TOOL_ERROR: &str = "tool_error";
const EXECUTE_TOOL: &str = "execute_tool";
/// The longest tool or prompt name the catalog exposes.
const MAX_TARGET: usize = 64;

/// `{mcp.method.name} {target}`, or the method alone.
pub fn span_name(method: &str, params: &Value) -> String {
    match target(method, params) {
        Some(target) => format!("{method} {target}"),
        None => method.to_owned(),
    }
}

/// The tool or prompt the request names, when it names one in the catalog's shape.
fn target<'a>(method: &str, params: &'a Value) -> Option<&'a str> {
    if method != method::TOOLS_CALL && method != method::PROMPTS_GET {
        return None;
    }
    let name = params.get("name")?.as_str()?;
    let shaped = (1..=MAX_TARGET).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    shaped.then_some(name)
}

/// The attributes the request itself determines: method, tool or prompt, operation, resource URI, request id.
pub fn request_attributes(method: &str, id: Option<&Value>, params: &Value) -> Vec<Attr> {
    let mut attributes = vec![Attr::text(METHOD_NAME, method)];
    match (method, target(method, params)) {
        (method::TOOLS_CALL, target) => {
            attributes.push(Attr::text(OPERATION_NAME, EXECUTE_TOOL));
            attributes.extend(target.map(|name| Attr::text(TOOL_NAME, name)));
        }
        (method::PROMPTS_GET, Some(name)) => attributes.push(Attr::text(PROMPT_NAME, name)),
        (method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE | method::RESOURCES_UNSUBSCRIBE, _) => {
            attributes.extend(params.get("uri").and_then(Value::as_str).map(|uri| Attr::text(RESOURCE_URI, uri)));
        }
        _ => {}
    }
    attributes.extend(id.and_then(request_id).map(|id| Attr::text(REQUEST_ID, &id)));
    attributes
}

/// The string form of a JSON-RPC id; `None` for `null` (and anything that is not an id).
pub fn request_id(id: &Value) -> Option<String> {
    match id {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// How a request failed, as the span records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    pub error_type: String,
    /// The JSON-RPC error code, when the peer answered with one.
    pub rpc_code: Option<i64>,
    pub message: Option<String>,
}

impl CallFailure {
    /// A failure with no JSON-RPC code (the gateway's own classification of what went wrong).
    pub fn new(error_type: impl Into<String>, message: impl Into<String>) -> Self {
        CallFailure { error_type: error_type.into(), rpc_code: None, message: Some(message.into()) }
    }

    /// A JSON-RPC error answer.
    pub fn rpc(code: i64, message: &str) -> Self {
        CallFailure { error_type: code.to_string(), rpc_code: Some(code), message: Some(message.to_owned()) }
    }
}

/// The failure a JSON-RPC response message reports, if any.
pub fn response_failure(response: &Value) -> Option<CallFailure> {
    if let Some(error) = response.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
        return Some(CallFailure::rpc(code, message));
    }
    response.get("result").and_then(result_failure)
}

/// The failure a successful JSON-RPC `result` reports inside it: a `CallToolResult` with `isError: true`.
pub fn result_failure(result: &Value) -> Option<CallFailure> {
    if result.get("isError") != Some(&Value::Bool(true)) {
        return None;
    }
    let outcome = result.pointer("/_meta").and_then(|meta| meta.get(OUTCOME_META)).and_then(Value::as_str);
    Some(CallFailure { error_type: outcome.unwrap_or(TOOL_ERROR).to_owned(), rpc_code: None, message: None })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::span::AttrValue;
    use super::*;

    fn texts(attributes: &[Attr]) -> Vec<(&str, String)> {
        attributes
            .iter()
            .map(|attribute| match &attribute.value {
                AttrValue::Text(text) => (attribute.key, text.clone()),
                other => (attribute.key, format!("{other:?}")),
            })
            .collect()
    }

    #[test]
    fn names_carry_the_tool_or_prompt_and_never_a_uri() {
        assert_eq!(span_name("tools/call", &json!({"name": "github__search"})), "tools/call github__search");
        assert_eq!(span_name("prompts/get", &json!({"name": "review"})), "prompts/get review");
        assert_eq!(span_name("resources/read", &json!({"uri": "file:///a"})), "resources/read");
        assert_eq!(span_name("tools/list", &Value::Null), "tools/list");
        for odd in [json!({"name": "a b"}), json!({"name": "x".repeat(65)}), json!({"name": ""}), json!({"name": 3})] {
            assert_eq!(span_name("tools/call", &odd), "tools/call", "{odd}");
        }
    }

    #[test]
    fn attributes_follow_the_conventions() {
        let call = request_attributes("tools/call", Some(&json!(7)), &json!({"name": "echo"}));
        assert_eq!(
            texts(&call),
            [
                ("mcp.method.name", "tools/call".into()),
                ("gen_ai.operation.name", "execute_tool".into()),
                ("gen_ai.tool.name", "echo".into()),
                ("jsonrpc.request.id", "7".into()),
            ]
        );
        let read = request_attributes("resources/read", Some(&json!("r-1")), &json!({"uri": "file:///a"}));
        assert_eq!(
            texts(&read),
            [
                ("mcp.method.name", "resources/read".into()),
                ("mcp.resource.uri", "file:///a".into()),
                ("jsonrpc.request.id", "r-1".into()),
            ]
        );
        let prompt = request_attributes("prompts/get", Some(&Value::Null), &json!({"name": "p"}));
        assert_eq!(texts(&prompt), [("mcp.method.name", "prompts/get".into()), ("gen_ai.prompt.name", "p".into())]);
    }

    #[test]
    fn failures_are_classified() {
        assert_eq!(response_failure(&json!({"id": 1, "result": {"content": []}})), None);
        assert_eq!(response_failure(&json!({"result": {"isError": false}})), None);
        let rpc = response_failure(&json!({"error": {"code": -32602, "message": "unknown tool"}})).expect("failed");
        assert_eq!(
            rpc,
            CallFailure { error_type: "-32602".into(), rpc_code: Some(-32602), message: Some("unknown tool".into()) }
        );
        let tool = response_failure(&json!({"result": {"isError": true, "content": []}})).expect("failed");
        assert_eq!(tool.error_type, "tool_error");
        let gateway = result_failure(&json!({"isError": true, "_meta": {"switchyard/outcome": "not_delivered"}}));
        assert_eq!(gateway.expect("failed").error_type, "not_delivered");
    }
}
