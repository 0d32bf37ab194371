//! The `initialize` params the gateway offers on every transport (MCP 2025-11-25 `basic/lifecycle.mdx`): the
//! latest version it speaks, the agent's declared client capabilities as its own, and its client info.
//!
//! Rule: the gateway declares no capability the agent did not (a shared session or the gateway's own: none).

use serde_json::{Value, json};

use crate::mcp::LATEST_PROTOCOL_VERSION;

/// The `initialize` params the gateway sends on every transport; `capabilities` are the agent's declared client
/// capabilities (`null`: none), offered as the gateway's own.
pub(crate) fn initialize_params(capabilities: &Value) -> Value {
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    json!({
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
    })
}
