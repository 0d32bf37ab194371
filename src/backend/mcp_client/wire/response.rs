//! The final response of a request to a backend, decoded without building a tree of its `result` (JSON-RPC 2.0
//! §5 "Response object"; docs/ledger.md, *Raw results*), on every transport: Streamable HTTP (a JSON body or an
//! SSE `data` line), stdio and legacy SSE.
//!
//! Rules: a message is a response when it has a valid id (a string or an integer), a `result` or an `error`, and
//! no string `method` — exactly what [`jsonrpc::kind`] calls one — ([`response_id`] reads only those members). The response the caller waits for is then decoded by
//! [`into_result`]: its `result` is kept as the backend's text ([`RawJson`]), an `error` becomes
//! [`McpError::Rpc`], and anything else — not JSON, no id, both a `result` and an `error`, neither — is
//! `AfterDelivery` (`Malformed`): the request was delivered, so the call is settled as unknown, never retried.
//! An `"error": null` beside a `result` is read as no error (JSON-RPC 1.0 libraries write it).

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError};
use crate::backend::mcp_client::fault::Fault;
use crate::mcp::jsonrpc;
use crate::raw_json::RawJson;

/// The members that say what a message is, read without building the rest.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "present")]
    error: Option<IgnoredAny>,
}

/// A response as the caller decodes it.
#[derive(Deserialize)]
struct Response {
    #[serde(default, deserialize_with = "present")]
    id: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "present")]
    result: Option<RawJson>,
    #[serde(default)]
    error: Option<Value>,
}

/// `Some` for a member that is there, `null` included (serde's `Option` reads `null` as absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

fn malformed(reason: impl Into<Fault>) -> McpError {
    McpError::AfterDelivery { cause: AfterDeliveryCause::Malformed, reason: reason.into() }
}

/// The id of `message` when it is a response (see the module rules); `Ok(None)` for any other message.
pub(crate) fn response_id(message: &[u8]) -> Result<Option<Value>, serde_json::Error> {
    let envelope: Envelope = serde_json::from_slice(message)?;
    // As [`jsonrpc::kind`] reads a parsed message: only a string `method` makes it a request or notification.
    let has_method = envelope.method.as_ref().is_some_and(Value::is_string);
    let answers = !has_method && (envelope.result.is_some() || envelope.error.is_some());
    Ok(envelope.id.filter(|id| answers && jsonrpc::is_valid_id(id)))
}

/// The `result` of the response `message`, as the backend wrote it, or its `error` as [`McpError::Rpc`].
pub(crate) fn into_result(message: &[u8]) -> Result<RawJson, McpError> {
    let response: Response = serde_json::from_slice(message)
        .map_err(|error| malformed(format!("the backend's response is not a JSON-RPC response: {error}")))?;
    if response.id.is_none() {
        return Err(malformed("the backend's response has no id"));
    }
    match (response.result, response.error) {
        (Some(_), Some(_)) => Err(malformed("the backend's response has both a result and an error")),
        (Some(result), None) => Ok(result),
        (None, error) => Err(rpc_error(error.as_ref())),
    }
}

/// The backend's JSON-RPC `error`, or why it is none.
fn rpc_error(error: Option<&Value>) -> McpError {
    let field = |name: &str| error.and_then(|error| error.get(name));
    match field("code").and_then(Value::as_i64) {
        Some(code) => McpError::Rpc {
            code,
            message: field("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
            data: field("data").cloned(),
        },
        None => malformed("the backend's response has neither result nor error"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reason(error: McpError) -> String {
        match error {
            McpError::AfterDelivery { cause: AfterDeliveryCause::Malformed, reason } => reason.to_string(),
            other => panic!("not a malformed answer: {other:?}"),
        }
    }

    #[test]
    fn results_keep_the_backends_text() {
        let text = br#"{"jsonrpc":"2.0","id":3,"result":{"z": 1.50, "content":[{"text":"\u00e9 \"result\""}]}}"#;
        let result = into_result(text).expect("a result");
        assert_eq!(result.get(), r#"{"z": 1.50, "content":[{"text":"\u00e9 \"result\""}]}"#);
        let null = into_result(br#"{"jsonrpc":"2.0","id":"a","result":null,"error":null}"#).expect("a null result");
        assert_eq!(null.get(), "null");
    }

    #[test]
    fn errors_keep_code_message_and_data() {
        let error = into_result(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":[1]}}"#);
        match error {
            Err(McpError::Rpc { code: -32602, message, data }) => {
                assert_eq!((message.as_str(), data), ("bad", Some(json!([1]))));
            }
            other => panic!("not the backend's error: {other:?}"),
        }
    }

    #[test]
    fn bad_responses_are_malformed_and_say_why() {
        let cases: [(&[u8], &str); 6] = [
            (br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"#, "is not a JSON-RPC response"),
            (br#"{"jsonrpc":"2.0","result":{}}"#, "has no id"),
            (
                br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":-1,"message":"x"}}"#,
                "both a result and an error",
            ),
            (br#"{"jsonrpc":"2.0","id":1}"#, "neither result nor error"),
            (br#"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#, "neither result nor error"),
            (b"\xff", "is not a JSON-RPC response"),
        ];
        for (text, expected) in cases {
            let why = reason(into_result(text).expect_err("refused"));
            assert!(why.contains(expected), "{}: {why}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn only_responses_have_a_response_id() {
        let id = |text: &str| response_id(text.as_bytes()).expect("JSON");
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Some(json!(7)));
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}"#), Some(json!("x")));
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"result":null}"#), Some(json!(7)), "a null result is a result");
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#), None, "a request");
        assert_eq!(id(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#), None);
        for text in [r#"{"id":7,"method":null,"result":{}}"#, r#"{"id":7,"error":null}"#, r#"{"id":7,"method":"m"}"#] {
            let parsed: Value = serde_json::from_str(text).expect("JSON");
            let kind_says = matches!(jsonrpc::kind(&parsed), jsonrpc::Kind::Response { .. });
            assert_eq!(id(text).is_some(), kind_says, "{text}");
        }
        assert!(response_id(b"{\"id\":1,").is_err(), "truncated");
    }
}
