//! The 2026-07-28 wire to modern backends (MCP 2026-07-28 §2–§3): what every
//! request carries, and the `server/discover` probe over Streamable HTTP.
//!
//! Rules:
//! - No `initialize`, no session id: every request's `params._meta` carries the protocol version, the client
//!   capabilities (what the gateway can relay for this call: the agent's declared ones; none for the gateway's own
//!   requests) and the client info, plus the log level the agent asked for, if any. The caller's other `_meta`
//!   members (its progress token, trace context) stay.
//! - Over HTTP every request also carries `Mcp-Method`, `Mcp-Name` for `tools/call` and `prompts/get` (the
//!   backend's own, unprefixed tool or prompt name) and `resources/read` (the URI), each as
//!   [`encode_header_value`] gives it, and the `Mcp-Param-*` headers of the tool called ([`super::tool_headers`]).
//! - Methods 2026-07-28 removed are answered here for the slot: `logging/setLevel` becomes the `_meta` log level of
//!   later requests; `resources/subscribe` and `resources/unsubscribe` change the slot's `subscriptions/listen`
//!   stream ([`super::subscriptions`]).

use std::collections::BTreeSet;

use http::header::{HeaderName, HeaderValue};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::era::{LATEST_MODERN_VERSION, Verdict, verdict_of_error, verdict_of_result};
use super::shared::Shared;
use crate::backend::mcp_client::context::CallContext;
use crate::backend::mcp_client::endpoint::BackendEndpoint;
use crate::backend::mcp_client::error::{AfterDeliveryCause, McpError, NotDeliveredCause};
use crate::backend::mcp_client::wire::exchange::{Answer, Wire, encode};
use crate::backend::mcp_client::wire::failure::ExchangeError;
use crate::backend::mcp_client::wire::response::into_result;
use crate::mcp::meta::{
    CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES, CLIENT_INFO as META_CLIENT_INFO, LOG_LEVEL as META_LOG_LEVEL,
    PROTOCOL_VERSION as META_PROTOCOL_VERSION,
};
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

/// What an agent asked of a 2026-07-28 backend that the backend keeps no record of: the log level of later
/// requests, and the resources it subscribed to.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    log_level: Mutex<Option<Value>>,
    subscriptions: Mutex<BTreeSet<String>>,
}

impl Asked {
    pub(crate) fn log_level(&self) -> Option<Value> {
        self.log_level.lock().clone()
    }

    /// Applies a method 2026-07-28 removed (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`)
    /// for a backend with these `capabilities`; `None` for any other method. `Some(Ok(Some(uris)))`: the
    /// subscriptions are now `uris`, and the listen stream must follow.
    pub(crate) fn apply(
        &self,
        method: &str,
        params: Option<&Value>,
        capabilities: &Value,
    ) -> Option<Result<Option<Vec<String>>, McpError>> {
        let param = |name: &str| params.and_then(|params| params.get(name));
        let subscribe = match method {
            method::LOGGING_SET_LEVEL => {
                let Some(level @ Value::String(_)) = param("level") else {
                    return Some(Err(invalid_params("logging/setLevel needs `params.level`, a string")));
                };
                *self.log_level.lock() = Some(level.clone());
                return Some(Ok(None));
            }
            method::RESOURCES_SUBSCRIBE => true,
            method::RESOURCES_UNSUBSCRIBE => false,
            _ => return None,
        };
        if subscribe && capabilities.pointer("/resources/subscribe") != Some(&Value::Bool(true)) {
            let message = "the backend offers no resource subscriptions".to_owned();
            return Some(Err(McpError::Rpc { code: jsonrpc::METHOD_NOT_FOUND, message, data: None }));
        }
        let Some(uri) = param("uri").and_then(Value::as_str) else {
            return Some(Err(invalid_params(&format!("{method} needs `params.uri`, a string"))));
        };
        let mut subscriptions = self.subscriptions.lock();
        if subscribe {
            subscriptions.insert(uri.to_owned());
        } else {
            subscriptions.remove(uri);
        }
        Some(Ok(Some(subscriptions.iter().cloned().collect())))
    }
}

/// `params` with the `_meta` members every modern request carries; `capabilities` of `null` declare none.
pub(crate) fn request_params(
    params: Option<Value>,
    version: &str,
    capabilities: &Value,
    log_level: Option<Value>,
) -> Value {
    let mut params = match params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    if let Value::Object(meta) = meta {
        meta.insert(META_PROTOCOL_VERSION.into(), json!(version));
        meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities);
        meta.insert(META_CLIENT_INFO.into(), json!({"name": "switchyard", "version": env!("CARGO_PKG_VERSION")}));
        if let Some(level) = log_level {
            meta.insert(META_LOG_LEVEL.into(), level);
        }
    }
    Value::Object(params)
}

/// `Mcp-Method`, and `Mcp-Name` where the method names something, for a request `message`.
pub(crate) fn mirrored_headers(message: &Value) -> Result<Vec<(HeaderName, HeaderValue)>, McpError> {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let named = match method {
        method::TOOLS_CALL | method::PROMPTS_GET => message.pointer("/params/name"),
        method::RESOURCES_READ => message.pointer("/params/uri"),
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
        reason: format!("cannot put {text:?} in a header: {error}"),
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

/// What a `subscriptions/listen` request asks for: the changes of those `lists` ("tools", "prompts",
/// "resources") whose `listChanged` the backend's `capabilities` announce, and updates of the resources `uris`.
pub(crate) fn listen_interests(capabilities: &Value, lists: &[&str], uris: &[String]) -> Map<String, Value> {
    let announced = |list: &str| capabilities.get(list).and_then(|list| list.get("listChanged")) == Some(&json!(true));
    let mut interests: Map<String, Value> =
        lists.iter().filter(|list| announced(list)).map(|list| (format!("{list}ListChanged"), json!(true))).collect();
    if !uris.is_empty() {
        interests.insert("resourceSubscriptions".into(), json!(uris));
    }
    interests
}

fn invalid_params(message: &str) -> McpError {
    McpError::Rpc { code: jsonrpc::INVALID_PARAMS, message: message.to_owned(), data: None }
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

    #[test]
    fn the_meta_members_are_added_and_the_callers_kept() {
        let params =
            json!({"name": "t", "_meta": {"progressToken": 7, "io.modelcontextprotocol/protocolVersion": "x"}});
        let params = request_params(Some(params), "2026-07-28", &json!({"elicitation": {}}), Some(json!("debug")));
        let meta = &params["_meta"];
        assert_eq!(meta["progressToken"], 7, "the caller's token stays");
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28", "the backend's version, not the caller's");
        assert_eq!(meta[META_CLIENT_CAPABILITIES], json!({"elicitation": {}}));
        assert_eq!(meta[META_CLIENT_INFO]["name"], "switchyard");
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        let bare = request_params(None, "2026-07-28", &Value::Null, None);
        assert_eq!(bare["_meta"][META_CLIENT_CAPABILITIES], json!({}), "no capabilities is an empty object");
        assert!(bare["_meta"].get(META_LOG_LEVEL).is_none());
    }

    #[test]
    fn listen_asks_for_the_announced_lists_and_the_subscribed_resources() {
        let capabilities = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": false}, "resources": {}});
        let asked = listen_interests(&capabilities, &["tools", "prompts", "resources"], &[]);
        assert_eq!(Value::Object(asked), json!({"toolsListChanged": true}));
        let asked = listen_interests(&json!({"resources": {"listChanged": true}}), &["resources"], &["a://b".into()]);
        assert_eq!(Value::Object(asked), json!({"resourcesListChanged": true, "resourceSubscriptions": ["a://b"]}));
        assert!(listen_interests(&json!({"tools": {}}), &["tools"], &[]).is_empty());
    }

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
        assert_eq!(headers(json!({"method": "tools/list", "params": {}})).len(), 1, "nothing named");
    }
}
