//! The answer to a backend's server-to-client request (MCP 2025-11-25 `client/` features; transports §"Sending
//! Messages to the Client"), the same on every transport.
//!
//! Rule: it knows the relay to the agent and JSON-RPC, nothing of exchanges, sessions or transports, so every
//! transport can use it.

use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use crate::mcp::{Relay, jsonrpc, method};

/// The answer to a backend's server-to-client request, whatever the transport: `ping` is answered here; what
/// the agent declared it can answer is relayed to it (the answer keeps the backend's id, and the agent has until
/// `deadline`); anything else is -32601 (with the relay's reason when it refuses every request).
pub(crate) async fn answer_server_request(
    relay: Option<&Relay>,
    deadline: Instant,
    id: &Value,
    method: &str,
    message: Value,
) -> Value {
    if method == method::PING {
        return jsonrpc::result(id, json!({}));
    }
    let relayed = relay.and_then(|relay| relay.ask(method, message));
    let Some(answer) = relayed else {
        return jsonrpc::error(Some(id), jsonrpc::METHOD_NOT_FOUND, &Relay::refusal(relay, method));
    };
    match timeout_at(deadline, answer).await {
        Ok(Ok(mut reply)) => {
            reply["id"] = id.clone();
            reply
        }
        _ => jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, "the agent did not answer the request"),
    }
}
