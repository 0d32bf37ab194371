//! The JSON-RPC response a session-era agent gets (MCP 2025-11-25 transports §"Sending Messages to the Server";
//! docs/ledger.md, *Raw results*): a tree the gateway built, or — for a backend's `tools/call` result — the text
//! `{"jsonrpc":"2.0","id":<the agent's id>,"result":<the backend's bytes>}` spliced together, so the result is
//! never parsed nor re-encoded on its way to the agent.
//!
//! Rules: a result carrying `resultType` (only a 2026-07-28-era backend writes one) is the exception: it is read,
//! loses that member and is written again, so a session-era agent never sees a member its revision does not
//! define; the check costs nothing more, as the result's flags are read anyway. The same text is the body of a JSON answer and the data of an SSE event; a result whose text spans
//! lines (a backend that pretty-prints) is written as one `data:` line per line, which the agent's SSE decoder
//! joins with `\n` — whitespace between JSON tokens, since a JSON string holds no raw line break. What the access
//! record and the trace are told is what the tree would have told them.

use std::borrow::Cow;

use serde_json::Value;

use crate::mcp::modern::without_result_type;
use crate::raw_json::RawJson;
use crate::router::{Found, Relayed, RpcFailure};
use crate::telemetry::{ErrorType, RequestRecord};

/// The agent's JSON-RPC response to one request.
#[derive(Debug)]
pub(super) enum JsonRpcReply {
    /// A message the gateway wrote itself: errors, and every result it built or edited.
    Tree(Value),
    /// A response around a backend's result, already as text; `error` is what that result reports.
    Spliced { text: String, error: ErrorType },
}

impl JsonRpcReply {
    /// The response to the request `id` that ended with `answer`.
    pub(super) fn of(id: &Value, answer: Result<Found, RpcFailure>) -> JsonRpcReply {
        match answer {
            Ok(Found::Relayed(Relayed { result, flags })) => {
                if flags.has_result_type() {
                    return JsonRpcReply::Tree(crate::mcp::jsonrpc::result(id, without_result_type(result.to_value())));
                }
                JsonRpcReply::Spliced { text: response_text(id, &result), error: ErrorType::of_flags(&flags) }
            }
            Ok(Found::Built(result)) => JsonRpcReply::Tree(crate::mcp::jsonrpc::result(id, result)),
            Err(failure) => JsonRpcReply::Tree(failure.into_message(id)),
        }
    }

    /// The response's JSON text.
    pub(super) fn text(&self) -> Cow<'_, str> {
        match self {
            JsonRpcReply::Tree(message) => Cow::Owned(message.to_string()),
            JsonRpcReply::Spliced { text, .. } => Cow::Borrowed(text),
        }
    }

    /// The response as a tree, for a trace (only when traces are on).
    pub(super) fn to_value(&self) -> Value {
        match self {
            JsonRpcReply::Tree(message) => message.clone(),
            // The text was put together from an id and a checked JSON value, so it parses.
            JsonRpcReply::Spliced { text, .. } => serde_json::from_str(text).unwrap_or(Value::Null),
        }
    }

    /// Tells the request's access record how the request ended.
    pub(super) fn report(&self, record: &RequestRecord) {
        match self {
            JsonRpcReply::Tree(message) => record.answered(message),
            JsonRpcReply::Spliced { error, .. } => record.answered_with(*error),
        }
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, the members in [`crate::mcp::jsonrpc::result`]'s order.
pub(super) fn response_text(id: &Value, result: &RawJson) -> String {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const MIDDLE: &str = r#","result":"#;
    let mut text = String::with_capacity(HEAD.len() + MIDDLE.len() + result.get().len() + 24);
    text.push_str(HEAD);
    // An id is a string or a number (the front checked it), which serde_json writes as it writes any id.
    text.push_str(&id.to_string());
    text.push_str(MIDDLE);
    text.push_str(result.get());
    text.push('}');
    text
}

/// The `data:` lines of an SSE event carrying `text` (see the module rules).
pub(super) fn data_lines(text: &str) -> String {
    let mut lines = String::with_capacity(text.len() + 8);
    for line in text.split(['\n', '\r']).filter(|line| !line.is_empty()) {
        lines.push_str("data: ");
        lines.push_str(line);
        lines.push('\n');
    }
    lines
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw(text: &str) -> RawJson {
        RawJson::from_text(text.to_owned()).expect("valid JSON")
    }

    fn relayed(text: &str) -> Relayed {
        Relayed::read(raw(text))
    }

    #[test]
    fn splices_ids_of_every_json_type_the_agent_may_send() {
        let result = raw(r#"{"content":[]}"#);
        for id in [json!(7), json!(-3), json!(u64::MAX), json!("a\"b\\c"), json!("é ☃"), json!(1.5), json!(null)] {
            let text = response_text(&id, &result);
            let parsed: Value = serde_json::from_str(&text).expect("the splice is JSON");
            assert_eq!(parsed, jsonrpc_result(&id, json!({"content": []})), "{text}");
        }
    }

    fn jsonrpc_result(id: &Value, result: Value) -> Value {
        crate::mcp::jsonrpc::result(id, result)
    }

    #[test]
    fn the_backends_bytes_are_kept_and_read_as_the_same_value() {
        let backend = r#"{"content":[{"type":"text","text":"{\"result\":1,\"id\":2} \u00e9\ud83d\ude00 \"result\":"}],
  "structuredContent": {"result": {"id": "x"}, "n": 1.50}, "isError": false}"#;
        let text = response_text(&json!("req-1"), &raw(backend));
        assert!(text.ends_with(&format!(",\"result\":{backend}}}")), "the backend's bytes, unchanged: {text}");
        let parsed: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(parsed["id"], json!("req-1"));
        let expected: Value = serde_json::from_str(backend).expect("JSON");
        assert_eq!(parsed["result"], expected);
        assert_eq!(parsed["result"]["content"][0]["text"], json!("{\"result\":1,\"id\":2} é😀 \"result\":"));
    }

    #[test]
    fn replies_say_what_the_tree_would() {
        let record = |reply: &JsonRpcReply| match reply {
            JsonRpcReply::Spliced { error, .. } => *error,
            JsonRpcReply::Tree(message) => ErrorType::of_response(message),
        };
        let failed = JsonRpcReply::of(&json!(1), Ok(Found::Relayed(relayed(r#"{"content":[],"isError":true}"#))));
        assert_eq!(record(&failed), ErrorType::ToolError);
        assert_eq!(failed.to_value(), json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}}));
        let built = JsonRpcReply::of(&json!(2), Ok(Found::Built(json!({"tools": []}))));
        assert_eq!(built.text(), r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#);
        let refused = JsonRpcReply::of(&json!(3), Err(RpcFailure { code: -32602, message: "no".into(), data: None }));
        assert_eq!(record(&refused), ErrorType::Rpc(-32602));
    }

    #[test]
    fn only_a_result_with_a_result_type_is_rewritten_and_it_loses_that_member() {
        let modern =
            JsonRpcReply::of(&json!(4), Ok(Found::Relayed(relayed(r#"{"content":[],"resultType":"complete"}"#))));
        assert!(matches!(modern, JsonRpcReply::Tree(_)));
        assert_eq!(modern.text(), r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]}}"#);
        let failed =
            JsonRpcReply::of(&json!(5), Ok(Found::Relayed(relayed(r#"{"isError":true,"resultType":"complete"}"#))));
        assert_eq!(failed.to_value()["result"], json!({"isError": true}));
        let legacy =
            JsonRpcReply::of(&json!(6), Ok(Found::Relayed(relayed(r#"{"content": [], "kind": "resultType"}"#))));
        assert!(matches!(legacy, JsonRpcReply::Spliced { .. }), "the ordinary path keeps the backend's bytes");
    }

    #[test]
    fn every_line_of_a_pretty_printed_result_is_a_data_line() {
        assert_eq!(data_lines(r#"{"a":1}"#), "data: {\"a\":1}\n");
        let lines = data_lines("{\"jsonrpc\":\"2.0\",\"result\":{\r\n  \"a\": \"x\\ny\"\n}}");
        assert_eq!(lines, "data: {\"jsonrpc\":\"2.0\",\"result\":{\ndata:   \"a\": \"x\\ny\"\ndata: }}\n");
        let joined: String = lines.lines().map(|line| &line["data: ".len()..]).collect::<Vec<_>>().join("\n");
        let parsed: Value = serde_json::from_str(&joined).expect("the joined data is the JSON");
        assert_eq!(parsed["result"]["a"], json!("x\ny"));
    }
}
