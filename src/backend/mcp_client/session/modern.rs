//! The 2026-07-28 wire to modern backends (MCP 2026-07-28 §2–§3): what every
//! request carries, and the `server/discover` probe over Streamable HTTP.
//!
//! Rules:
//! - No `initialize`, no session id: every request's `params._meta` carries the protocol version, the client
//!   capabilities (what the gateway can relay for this call: the agent's declared ones; none for the gateway's own
//!   requests) and the client info, plus the log level the agent asked for, if any. The caller's other `_meta`
//!   members (its progress token, trace context) stay.
//! - Over HTTP every request also carries `Mcp-Method`, `Mcp-Name` for `tools/call` and `prompts/get` (the
//!   backend's own, unprefixed tool or prompt name), `resources/read` (the URI) and the tasks extension's
//!   `tasks/get`, `tasks/update` and `tasks/cancel` (the backend's task id), each as
//!   [`encode_header_value`] gives it, and the `Mcp-Param-*` headers of the tool called ([`super::tool_headers`]).
//! - Methods 2026-07-28 removed are answered here for the slot: `logging/setLevel` becomes the `_meta` log level of
//!   later requests; `resources/subscribe` and `resources/unsubscribe` change the slot's `subscriptions/listen`
//!   stream ([`super::subscriptions`]).

use http::header::{HeaderName, HeaderValue};
use serde_json::Value;

use super::asked::Asked;
use super::era::{LATEST_MODERN_VERSION, Verdict, verdict_of_error, verdict_of_result};
use super::params::request_params;
use super::shared::Shared;
use crate::backend::mcp_client::context::CallContext;
use crate::backend::mcp_client::endpoint::BackendEndpoint;
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use crate::backend::mcp_client::wire::exchange::{Answer, Wire, encode};
use crate::backend::mcp_client::wire::failure::ExchangeError;
use crate::backend::mcp_client::wire::response::into_result;
use crate::mcp::modern::encode_header_value;
use crate::mcp::{METHOD_HEADER, NAME_HEADER, jsonrpc, method};

/// What a slot keeps for its modern HTTP backend, which keeps nothing: the era verdict it was made from, and
/// what the agent asked.
#[derive(Debug)]
pub(crate) struct ModernSlot {
    /// The epoch of the era verdict ([`super::era::Eras`]); a session of an older one is replaced.
    pub(crate) epoch: u64,
    pub(crate) asked: Asked,
}

/// `Mcp-Method`, and `Mcp-Name` where the method names something, for a request `message`.
pub(crate) fn mirrored_headers(message: &Value) -> Result<Vec<(HeaderName, HeaderValue)>, McpError> {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let named = match method {
        method::TOOLS_CALL | method::PROMPTS_GET => message.pointer("/params/name"),
        method::RESOURCES_READ => message.pointer("/params/uri"),
        method::TASKS_GET | method::TASKS_UPDATE | method::TASKS_CANCEL => message.pointer("/params/taskId"),
        _ => None,
    };
    let mut headers = vec![(HeaderName::from_static(METHOD_HEADER), header_value(method)?)];
    if let Some(name) = named.and_then(Value::as_str) {
        headers.push((HeaderName::from_static(NAME_HEADER), header_value(name)?));
    }
    Ok(headers)
}

fn header_value(text: &str) -> Result<HeaderValue, McpError> {
    HeaderValue::from_str(&encode_header_value(text)).map_err(|error| McpError::NotDelivered {
        cause: NotDeliveredCause::Encode,
        reason: format!("cannot put {text:?} in a header: {error}").into(),
    })
}

/// Asks an HTTP backend which era it speaks with `server/discover` (at most twice, when a `-32022` names another
/// modern version), within the call that needs the verdict. `Err` is no verdict: the backend could not be reached
/// or failed.
pub(crate) async fn probe(
    shared: &Shared,
    endpoint: &BackendEndpoint,
    context: &CallContext<'_>,
) -> Result<Verdict, McpError> {
    let mut version = LATEST_MODERN_VERSION;
    let mut retried = false;
    loop {
        let id = shared.next_id();
        let params = request_params(None, version, &Value::Null, None);
        let message = jsonrpc::request(&id, method::SERVER_DISCOVER, Some(params));
        let headers = mirrored_headers(&message)?;
        let exchange = shared.own_exchange(endpoint, Wire::Modern { version, headers: &headers }, context);
        let verdict = probe_verdict(exchange.call(&id, encode(&message)?).await, version, retried)?;
        // `verdict_of_error` asks for a retry only on the first probe.
        match verdict {
            Verdict::Retry(next) => (version, retried) = (next, true),
            verdict => return Ok(verdict),
        }
    }
}

/// What one probe's exchange says: any answer of the backend is a verdict (an unrecognised 4xx, or a body that
/// is not a JSON-RPC response, means "fall back"); not reaching it, its deadline or a 5xx is none.
fn probe_verdict(
    answer: Result<Answer, ExchangeError>,
    sent: &'static str,
    retried: bool,
) -> Result<Verdict, McpError> {
    let error = match answer {
        Ok(answer) => {
            return Ok(match into_result(&answer.message).map(|result| result.to_value()) {
                Ok(result) => verdict_of_result(&result, sent),
                Err(McpError::Rpc { code, message, data }) => {
                    verdict_of_error(code, &message, data.as_ref(), Some(200), sent, retried)
                }
                Err(_) => Verdict::Legacy,
            });
        }
        Err(ExchangeError::Rejected(rejection)) => {
            let (code, status) = (rejection.code, Some(rejection.status));
            return Ok(verdict_of_error(code, &rejection.message, rejection.data.as_ref(), status, sent, retried));
        }
        Err(ExchangeError::NotModern(_) | ExchangeError::SessionGone) => return Ok(Verdict::Legacy),
        Err(ExchangeError::Failed(error)) => error,
    };
    match error {
        McpError::HttpStatus { status, .. } if (400..500).contains(&status) => Ok(Verdict::Legacy),
        McpError::NotDelivered { cause: NotDeliveredCause::Refused, .. } => Ok(Verdict::Legacy),
        McpError::AfterDelivery { cause: AfterDeliveryCause::Malformed, .. } => Ok(Verdict::Legacy),
        error => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_headers_mirror_the_name_or_uri_the_method_carries() {
        let headers = |message: Value| -> Vec<(String, String)> {
            let headers = mirrored_headers(&message).expect("encodable");
            headers.into_iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned())).collect()
        };
        let call = json!({"method": "tools/call", "params": {"name": "echo"}});
        assert_eq!(headers(call), [("mcp-method".into(), "tools/call".into()), ("mcp-name".into(), "echo".into())]);
        let read = json!({"method": "resources/read", "params": {"uri": "file:///tmp/ä"}});
        assert_eq!(headers(read)[1], ("mcp-name".into(), "=?base64?ZmlsZTovLy90bXAvw6Q=?=".into()));
        let prompt = json!({"method": "prompts/get", "params": {"name": "p"}});
        assert_eq!(headers(prompt)[1].1, "p");
        let task = json!({"method": "tasks/cancel", "params": {"taskId": "t-1"}});
        assert_eq!(headers(task)[1], ("mcp-name".into(), "t-1".into()), "the task id, as the tasks extension names it");
        assert_eq!(headers(json!({"method": "tools/list", "params": {}})).len(), 1, "nothing named");
    }
}
