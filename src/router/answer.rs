//! What the router answers a request with: a result (built here, or a backend's relayed as its bytes) or a
//! JSON-RPC error.

use serde_json::Value;

use crate::mcp::{ResultFlags, jsonrpc};
use crate::raw_json::RawJson;

/// A request's result for the agent: one the gateway built or edited (a tree), or a backend's `tools/call`
/// result relayed as the text the backend sent, which the front splices into its response unparsed
/// (docs/ledger.md, *Raw results*).
#[derive(Debug, PartialEq)]
pub enum Found {
    Built(Value),
    Relayed(Relayed),
}

impl Found {
    /// The result as a tree, for a caller that must edit it (the 2026-07-28 era's shape).
    pub fn into_value(self) -> Value {
        match self {
            Found::Built(value) => value,
            Found::Relayed(relayed) => relayed.result.to_value(),
        }
    }
}

/// A backend's result as the text it sent, with the flags the gateway decides by, read from it once: the input
/// rounds, the call's outcome and the agent's reply each need them.
#[derive(Debug, PartialEq)]
pub struct Relayed {
    pub result: RawJson,
    pub flags: ResultFlags,
}

impl Relayed {
    pub fn read(result: RawJson) -> Relayed {
        let flags = ResultFlags::read(result.get());
        Relayed { result, flags }
    }
}

/// A JSON-RPC error for the agent.
#[derive(Debug, PartialEq)]
pub struct RpcFailure {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcFailure {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    pub fn into_message(self, id: &Value) -> Value {
        let mut message = jsonrpc::error(Some(id), self.code, &self.message);
        if let Some(data) = self.data {
            message["error"]["data"] = data;
        }
        message
    }
}
