//! The demo server's JSON-RPC methods (MCP 2025-11-25 `basic/lifecycle.mdx`, `utilities/ping.mdx`,
//! `server/tools.mdx`; reference §A2.2, §A2.4, §A3): `initialize`, `ping`, `tools/list` and `tools/call`.
//!
//! Rules:
//! - Version negotiation (§A2.2): answer with the client's `protocolVersion` when it is supported, otherwise with
//!   the latest this server speaks; never fail the handshake over the version.
//! - The server declares only `tools` (with `listChanged: false`: the set never changes), so it implements only
//!   the methods that capability implies, plus `ping`. Anything else is `-32601`.
//! - Protocol errors (`-32602`) are reserved for requests that break the `tools/call` schema and for unknown
//!   tools; argument problems are tool results (§A3.5, SEP-1303), which [`super::tools`] produces.
//! - This layer knows nothing of HTTP: it maps (method, params) to a result or a [`MethodError`].

use serde_json::{Map, Value, json};

use super::SUPPORTED_PROTOCOL_VERSIONS;
use super::tools::{self, Caller, Tool};
use crate::mcp::jsonrpc;
use crate::mcp::method;

/// Why a request got a JSON-RPC error instead of a result.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MethodError {
    #[error("Method not found: {0}")]
    NotFound(String),
    #[error("Invalid params: {0}")]
    InvalidParams(&'static str),
    #[error("Unknown tool: {0}")]
    UnknownTool(String),
}

impl MethodError {
    pub fn code(&self) -> i64 {
        match self {
            MethodError::NotFound(_) => jsonrpc::METHOD_NOT_FOUND,
            MethodError::InvalidParams(_) | MethodError::UnknownTool(_) => jsonrpc::INVALID_PARAMS,
        }
    }
}

/// The `initialize` result for the client's requested version.
pub fn initialize(params: Option<&Value>) -> Result<Value, MethodError> {
    let requested = params
        .and_then(|params| params.get("protocolVersion"))
        .and_then(Value::as_str)
        .ok_or(MethodError::InvalidParams("initialize needs params.protocolVersion, a string"))?;
    Ok(json!({
        "protocolVersion": negotiate(requested),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {
            "name": "switchyard-demo",
            "title": "Switchyard demo server",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": "A demo MCP server built into Switchyard. Tools: echo (returns text), add (sums two \
                         numbers), counter (counts calls in this session), sleep (waits up to 10 s) and fail \
                         (returns a tool error). Nothing here has side effects outside the session.",
    }))
}

/// The client's version if this server speaks it, else the latest (§A2.2).
pub fn negotiate(requested: &str) -> &'static str {
    SUPPORTED_PROTOCOL_VERSIONS
        .into_iter()
        .find(|supported| *supported == requested)
        .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[0])
}

/// Answers any request but `initialize`, within an established session.
pub async fn handle(method: &str, params: Option<&Value>, caller: Caller<'_>) -> Result<Value, MethodError> {
    match method {
        method::PING => Ok(json!({})),
        // One page holds every tool, so a cursor (opaque to clients, §A3.1) is accepted and ignored.
        method::TOOLS_LIST => Ok(tools::list_result().clone()),
        method::TOOLS_CALL => call_tool(params, caller).await,
        _ => Err(MethodError::NotFound(method.to_owned())),
    }
}

async fn call_tool(params: Option<&Value>, caller: Caller<'_>) -> Result<Value, MethodError> {
    let name = params
        .and_then(|params| params.get("name"))
        .and_then(Value::as_str)
        .ok_or(MethodError::InvalidParams("tools/call needs params.name, a string"))?;
    // `arguments` is optional in the schema; when present it must be an object (a schema violation otherwise,
    // hence a protocol error rather than a tool result).
    let no_arguments = Map::new();
    let arguments = match params.and_then(|params| params.get("arguments")) {
        None | Some(Value::Null) => &no_arguments,
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err(MethodError::InvalidParams("tools/call params.arguments must be an object")),
    };
    let tool = Tool::named(name).ok_or_else(|| MethodError::UnknownTool(name.to_owned()))?;
    Ok(tool.call(arguments, caller).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_keeps_a_supported_version_and_otherwise_offers_the_latest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2024-11-05"), "2025-11-25");
        assert_eq!(negotiate("bogus"), "2025-11-25");
    }

    #[test]
    fn initialize_needs_a_requested_version() {
        let error = initialize(Some(&json!({"capabilities": {}}))).expect_err("no version");
        assert_eq!(error.code(), jsonrpc::INVALID_PARAMS);
        let result = initialize(Some(&json!({"protocolVersion": "2025-11-25"}))).expect("result");
        assert_eq!(result["capabilities"], json!({"tools": {"listChanged": false}}));
    }
}
