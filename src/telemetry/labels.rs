//! Bounded label values: every value a metric label or an access-log field takes comes from a fixed
//! list of this file or from a name the catalog or the configuration gave, never from what an agent or a backend
//! sent, so a flood of odd requests cannot grow the number of series.
//!
//! Rules: a method outside [`METHODS`] is [`OTHER`]; a tool name the catalog does not know is [`UNKNOWN_TOOL`]
//! (callers pass only names they resolved); a JSON-RPC error code outside [`RPC_CODES`] is [`OTHER`]. Label text
//! is `&'static str` or an interned `Arc<str>` ([`Names`]), so a label set costs no allocation once its name is
//! known.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::mcp::{ResultFlags, method};

/// A method, or a JSON-RPC error code, outside the known lists.
pub const OTHER: &str = "_other";
/// A tool name an agent asked for that the catalog does not know (or none at all).
pub const UNKNOWN_TOOL: &str = "_unknown";

/// The MCP methods a label may name: requests and notifications of either direction (MCP 2025-11-25).
const METHODS: [&str; 24] = [
    method::INITIALIZE,
    method::PING,
    method::TOOLS_LIST,
    method::TOOLS_CALL,
    method::PROMPTS_LIST,
    method::PROMPTS_GET,
    method::RESOURCES_LIST,
    method::RESOURCES_TEMPLATES_LIST,
    method::RESOURCES_READ,
    method::RESOURCES_SUBSCRIBE,
    method::RESOURCES_UNSUBSCRIBE,
    method::COMPLETION_COMPLETE,
    method::LOGGING_SET_LEVEL,
    method::SAMPLING_CREATE_MESSAGE,
    method::ELICITATION_CREATE,
    method::ROOTS_LIST,
    method::INITIALIZED,
    method::CANCELLED,
    method::PROGRESS,
    method::MESSAGE,
    method::RESOURCES_UPDATED,
    method::TOOLS_LIST_CHANGED,
    method::PROMPTS_LIST_CHANGED,
    method::RESOURCES_LIST_CHANGED,
];

/// The JSON-RPC error codes a label may name: JSON-RPC 2.0's own, and those MCP defines (resource not found,
/// URL elicitation required) or servers commonly use (-32000, -32001).
const RPC_CODES: [(i64, &str); 9] = [
    (-32700, "-32700"),
    (-32600, "-32600"),
    (-32601, "-32601"),
    (-32602, "-32602"),
    (-32603, "-32603"),
    (-32000, "-32000"),
    (-32001, "-32001"),
    (-32002, "-32002"),
    (-32042, "-32042"),
];

/// The label of an MCP method name.
pub fn method(name: &str) -> &'static str {
    METHODS.iter().find(|known| **known == name).copied().unwrap_or(OTHER)
}

/// How an operation ended, as the `error_type` label says it (OpenTelemetry `error.type`): empty on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorType {
    #[default]
    None,
    /// A `CallToolResult` with `isError: true`.
    ToolError,
    /// A JSON-RPC error with this code.
    Rpc(i64),
    /// A failure without a JSON-RPC answer, named by the layer that saw it (`not_delivered`, `timeout`, …).
    Failure(&'static str),
}

impl ErrorType {
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::None => "",
            ErrorType::ToolError => "tool_error",
            ErrorType::Rpc(code) => RPC_CODES.iter().find(|(known, _)| *known == code).map_or(OTHER, |(_, text)| text),
            ErrorType::Failure(name) => name,
        }
    }

    /// Of a JSON-RPC response: its error's code, else what its result says.
    pub fn of_response(response: &Value) -> ErrorType {
        match response.get("error") {
            Some(error) => ErrorType::Rpc(error.get("code").and_then(Value::as_i64).unwrap_or_default()),
            None => response.get("result").map_or(ErrorType::None, ErrorType::of_result),
        }
    }

    /// [`of_result`](Self::of_result) for a result kept as its JSON text (read, not parsed into a tree).
    pub fn of_result_text(result: &str) -> ErrorType {
        ErrorType::of_flags(&ResultFlags::read(result))
    }

    /// [`of_result`](Self::of_result) for a result whose flags were read already.
    pub fn of_flags(flags: &ResultFlags) -> ErrorType {
        if flags.is_error() { ErrorType::ToolError } else { ErrorType::None }
    }

    /// Of a JSON-RPC result: `tool_error` when it is a tool's failure.
    pub fn of_result(result: &Value) -> ErrorType {
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            ErrorType::ToolError
        } else {
            ErrorType::None
        }
    }
}

/// How one `tools/call` ended (`switchyard_tool_calls_total`'s `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The backend answered with a result.
    Completed,
    /// The backend asked a 2026-07-28 agent for input (`input_required`): a round of a call that goes on with the
    /// agent's retry, so the call is neither completed nor failed yet.
    InputRequired,
    /// The backend answered with a tool failure (`isError`) or a JSON-RPC error.
    ToolError,
    /// The call provably did not reach the backend (or was not sent because its claim could not be written).
    NotDelivered,
    /// The call may have run; its answer was lost.
    Unknown,
    /// A duplicate answered from an earlier call's claim; the tool did not run again.
    Replayed,
    /// Refused before anything was claimed or sent: by policy, or an invalid or reused idempotency key.
    Denied,
    /// Refused by a `[[limits]]` entry before anything was claimed or sent.
    Limited,
}

impl ToolOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Completed => "completed",
            ToolOutcome::InputRequired => "input_required",
            ToolOutcome::ToolError => "tool_error",
            ToolOutcome::NotDelivered => "not_delivered",
            ToolOutcome::Unknown => "unknown",
            ToolOutcome::Replayed => "replayed",
            ToolOutcome::Denied => "denied",
            ToolOutcome::Limited => "limited",
        }
    }
}

/// A state this instance wrote to a ledger claim (`switchyard_ledger_claims_total`'s `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimWrite {
    /// A new claim, before its call is sent.
    InFlight,
    Completed,
    /// Settled `unknown`, or left in flight by this instance (at start or shutdown).
    Unknown,
    /// Deleted: the call provably did not run.
    Released,
}

impl ClaimWrite {
    pub const ALL: [ClaimWrite; 4] =
        [ClaimWrite::InFlight, ClaimWrite::Completed, ClaimWrite::Unknown, ClaimWrite::Released];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimWrite::InFlight => "in_flight",
            ClaimWrite::Completed => "completed",
            ClaimWrite::Unknown => "unknown",
            ClaimWrite::Released => "released",
        }
    }
}

/// Interned names (backends, tools): one `Arc<str>` per distinct name, found without allocating. Only names
/// the configuration or the catalog gave are interned, so the set is as bounded as they are.
#[derive(Default)]
pub(super) struct Names(RwLock<HashSet<Arc<str>>>);

impl Names {
    pub(super) fn get(&self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.read().get(name) {
            return Arc::clone(known);
        }
        let mut names = self.0.write();
        if let Some(known) = names.get(name) {
            return Arc::clone(known);
        }
        let name: Arc<str> = Arc::from(name);
        names.insert(Arc::clone(&name));
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn methods_and_codes_outside_the_lists_are_other() {
        assert_eq!(method("tools/call"), "tools/call");
        assert_eq!(method("notifications/cancelled"), "notifications/cancelled");
        assert_eq!(method("tools/call2"), OTHER);
        assert_eq!(method(""), OTHER);
        assert_eq!(ErrorType::Rpc(-32602).label(), "-32602");
        assert_eq!(ErrorType::Rpc(-32042).label(), "-32042");
        assert_eq!(ErrorType::Rpc(12345).label(), OTHER);
        assert_eq!(ErrorType::Failure("timeout").label(), "timeout");
        assert_eq!(ErrorType::None.label(), "");
    }

    #[test]
    fn responses_are_classified_by_error_code_then_is_error() {
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}});
        assert_eq!(ErrorType::of_response(&error), ErrorType::Rpc(-32601));
        let failed = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}});
        assert_eq!(ErrorType::of_response(&failed), ErrorType::ToolError);
        let fine = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": false}});
        assert_eq!(ErrorType::of_response(&fine), ErrorType::None);
        assert_eq!(ErrorType::of_response(&json!({"error": {}})).label(), OTHER, "a code-less error is still one");
    }

    #[test]
    fn names_are_interned_once() {
        let names = Names::default();
        let first = names.get("github__create_issue");
        let again = names.get("github__create_issue");
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &names.get("other")));
        assert_eq!(names.0.read().len(), 2);
    }
}
