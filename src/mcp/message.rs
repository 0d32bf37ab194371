//! One message an agent sent, read once: classified by [`jsonrpc::kind`] a single time and taken apart into what
//! each kind carries (MCP 2025-11-25 "Base protocol"; 2026-07-28 basic §"`_meta`"), so every later step of either
//! era matches on [`Method`] and moves the `params` on instead of reading the tree again.
//!
//! Rules: the classification is [`jsonrpc::kind`]'s; `params` stay a `Value` (members the gateway does not know
//! pass through); a response is kept whole, since it is relayed on as it came; what makes a message well formed
//! (one message, `"jsonrpc": "2.0"`) is recorded here and judged by the receiver.

use serde_json::Value;

use super::jsonrpc::{self, Kind};
use super::meta;
use super::method::Method;

/// A JSON-RPC request: its id, method and params (`Null` when it sent none).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Value,
    pub method: Method,
    pub params: Value,
}

/// What one message is.
#[derive(Debug, PartialEq)]
pub enum Message {
    Request(Request),
    Notification {
        method: Method,
        params: Value,
    },
    /// An answer to a request the gateway relayed to the agent, kept whole.
    Response {
        id: Value,
        message: Value,
    },
    /// None of the above (a batch included); `id` is its id when that is a valid one.
    Invalid {
        id: Option<Value>,
    },
}

/// A message as it arrived, read once (see the module rules).
#[derive(Debug, PartialEq)]
pub struct Incoming {
    pub message: Message,
    /// The body is a JSON array: a batch.
    pub batch: bool,
    /// It carries `"jsonrpc": "2.0"`.
    pub declares_version: bool,
    /// Its `params._meta` names a protocol version (`io.modelcontextprotocol/protocolVersion`), the mark of a
    /// 2026-07-28 request.
    pub meta_names_version: bool,
}

impl Incoming {
    pub fn read(mut value: Value) -> Incoming {
        let batch = value.is_array();
        let declares_version = jsonrpc::declares_version(&value);
        let request_meta = value.pointer("/params/_meta").and_then(Value::as_object);
        let meta_names_version =
            request_meta.is_some_and(|request_meta| request_meta.contains_key(meta::PROTOCOL_VERSION));
        let message = match jsonrpc::kind(&value) {
            Kind::Request { method, .. } => {
                let method = Method::from_name(method);
                Message::Request(Request { id: take(&mut value, "id"), method, params: take(&mut value, "params") })
            }
            Kind::Notification { method } => {
                let method = Method::from_name(method);
                Message::Notification { method, params: take(&mut value, "params") }
            }
            Kind::Response { id } => Message::Response { id: id.clone(), message: value },
            Kind::Invalid => Message::Invalid { id: value.get("id").filter(|id| jsonrpc::is_valid_id(id)).cloned() },
        };
        Incoming { message, batch, declares_version, meta_names_version }
    }

    /// The method of a request (`true`) or notification (`false`).
    pub fn method(&self) -> Option<(&Method, bool)> {
        match &self.message {
            Message::Request(request) => Some((&request.method, true)),
            Message::Notification { method, .. } => Some((method, false)),
            Message::Response { .. } | Message::Invalid { .. } => None,
        }
    }

    /// The message's id, when it has a valid one.
    pub fn id(&self) -> Option<&Value> {
        match &self.message {
            Message::Request(Request { id, .. }) | Message::Response { id, .. } => Some(id),
            Message::Invalid { id } => id.as_ref(),
            Message::Notification { .. } => None,
        }
    }
}

/// Member `name` of a message, moved out (`Null` when absent).
fn take(message: &mut Value, name: &str) -> Value {
    message.get_mut(name).map_or(Value::Null, Value::take)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_is_taken_apart() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}});
        let read = Incoming::read(call);
        let request = Request { id: json!(1), method: Method::ToolsCall, params: json!({"name": "t"}) };
        assert_eq!(read.message, Message::Request(request));
        assert!(read.declares_version && !read.batch && !read.meta_names_version);
        assert_eq!(read.method(), Some((&Method::ToolsCall, true)));
        let cancel = Incoming::read(json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}));
        assert_eq!(cancel.message, Message::Notification { method: Method::Cancelled, params: Value::Null });
        assert_eq!(cancel.id(), None);
        let answer = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        assert_eq!(Incoming::read(answer.clone()).message, Message::Response { id: json!("a"), message: answer });
    }

    #[test]
    fn invalid_messages_keep_a_valid_id_only() {
        assert_eq!(Incoming::read(json!({"jsonrpc": "2.0", "id": 3})).id(), Some(&json!(3)));
        assert_eq!(Incoming::read(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})).id(), None);
        let batch = Incoming::read(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]));
        assert!(batch.batch && !batch.declares_version);
        assert_eq!(batch.message, Message::Invalid { id: None });
    }

    #[test]
    fn the_modern_era_is_marked_by_its_meta_version() {
        let params = json!({"_meta": {(meta::PROTOCOL_VERSION): "2026-07-28"}});
        let read = Incoming::read(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}));
        assert!(read.meta_names_version);
        let other = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {}}});
        assert!(!Incoming::read(other).meta_names_version);
    }
}
