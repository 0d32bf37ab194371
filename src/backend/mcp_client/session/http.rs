//! Backend sessions over Streamable HTTP (MCP 2025-11-25 `basic/transports.mdx` §"Streamable HTTP"):
//! the handshake, one request on a session (of either era), and ending a session with `DELETE`.
//!
//! Rules: the handshake is `initialize` offering [`LATEST_PROTOCOL_VERSION`] then `notifications/initialized`;
//! a returned `MCP-Session-Id` must be exactly one header of 1–1024 visible ASCII characters; the progress token
//! is swapped for the request's own id. A cancelled call tells a 2025-era backend by that id
//! (`notifications/cancelled`); a 2026-07-28 backend learns it from its response stream closing, which dropping
//! the exchange does (it has no other cancellation over HTTP). The wire exchange itself is [`super::exchange`]'s;
//! what the modern wire adds to a request is [`super::modern`]'s.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use super::modern::mirrored_headers;
use super::params::initialize_params;
use super::params::request_params;
use super::shared::Shared;
use super::tool_headers::{ToolHeaders, header_values};
use super::transport::{BackendSession, Carrier};
use crate::backend::http_client::{self, HttpClient};
use crate::backend::mcp_client::context::{Call, CallContext};
use crate::backend::mcp_client::endpoint::BackendEndpoint;
use crate::backend::mcp_client::error::{McpError, NotDeliveredCause};
use crate::backend::mcp_client::wire::exchange::{Exchange, Wire, encode};
use crate::backend::mcp_client::wire::failure::ExchangeError;
use crate::backend::mcp_client::wire::notifications::NotificationRoute;
use crate::backend::mcp_client::wire::response::into_result;
use crate::backend::mcp_client::{DELETE_TIMEOUT, negotiated_version, swap_progress_token};
use crate::mcp::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER, jsonrpc, method};
use crate::raw_json::RawJson;

const MAX_SESSION_ID_LEN: usize = 1024;

/// The 2025-era handshake within the call `context`; `capabilities`: the agent's declared client capabilities
/// (`null`: none), offered as the gateway's own.
pub(crate) async fn handshake(
    shared: &Shared,
    endpoint: &BackendEndpoint,
    context: &CallContext<'_>,
    capabilities: &Value,
) -> Result<BackendSession, McpError> {
    let id = shared.next_id();
    let initialize = jsonrpc::request(&id, method::INITIALIZE, Some(initialize_params(capabilities)));
    let exchange = shared.own_exchange(endpoint, Wire::Handshake, context);
    let answer = exchange.call(&id, encode(&initialize)?).await.map_err(handshake_error)?;
    // The handshake reads inside its result: a tree, once per session.
    let result = into_result(&answer.message)?.to_value();
    let version = negotiated_version(&result)?;
    let session_id = session_id(&answer.headers)?;
    let session = BackendSession {
        id: session_id,
        version,
        capabilities: Arc::new(result.get("capabilities").cloned().unwrap_or_else(|| json!({}))),
        generation: shared.next_generation(),
        revision: 0,
        carrier: Carrier::Http { home: Arc::new(endpoint.home()) },
        principal: context.principal().cloned(),
        live: None,
    };
    let exchange = Exchange { wire: session.wire(), ..exchange };
    exchange.deliver(&jsonrpc::notification(method::INITIALIZED, None)).await.map_err(handshake_error)?;
    Ok(session)
}

/// Sends one request on an HTTP `session` (of either era); `tool_headers` gives a modern `tools/call` its
/// `Mcp-Param-*` headers.
pub(crate) async fn send_http(
    shared: &Shared,
    tool_headers: &ToolHeaders,
    session: &BackendSession,
    endpoint: &BackendEndpoint,
    call: Call<'_>,
) -> Result<RawJson, ExchangeError> {
    let id = shared.next_id();
    if let Some(span) = call.context.span() {
        span.request_id(&id);
    }
    // Our progress token replaces the caller's: only then are the caller's params copied.
    let mut swapped = call.params.filter(|params| params.pointer("/_meta/progressToken").is_some()).cloned();
    let theirs = swap_progress_token(&mut swapped, &id);
    let modern = session.modern();
    let (body, headers) = match modern {
        // The common case: the caller's params go on the wire as they are, serialized once, never copied.
        None => {
            let params = swapped.as_ref().or(call.params);
            (encode(&Request { jsonrpc: "2.0", id: &id, method: call.method, params })?, Vec::new())
        }
        Some(modern) => {
            let log_level = modern.asked.log_level();
            let params = swapped.or_else(|| call.params.cloned());
            let params = request_params(params, session.version, call.relay.capabilities(), log_level);
            let message = jsonrpc::request(&id, call.method, Some(params));
            let mut headers = mirrored_headers(&message)?;
            if call.method == method::TOOLS_CALL {
                headers.extend(param_headers(tool_headers, &call.key.backend, &message));
            }
            (encode(&message)?, headers)
        }
    };
    let wire = match modern {
        None => session.wire(),
        Some(_) => Wire::Modern { version: session.version, headers: &headers },
    };
    let backend = &call.key.backend;
    let list_changed = |method: &str| shared.subscribers.announce(backend, method);
    let notifications = NotificationRoute {
        relay: Some(call.relay),
        progress: theirs.as_ref().map(|theirs| (&id, theirs)),
        list_changed: Some(&list_changed),
    };
    let exchange = Exchange {
        http: &shared.http,
        endpoint,
        wire,
        deadline: call.context.deadline(),
        principal: call.context.principal().map(|principal| &**principal),
        subject_token: call.context.subject_token(),
        limit: shared.limit,
        notifications,
        // Responses on another stream exist only where there are other streams (a 2025-era session's `GET`).
        strays: modern.is_none().then_some(&shared.strays),
        span: call.context.span(),
    };
    let Some(cancel) = &call.relay.cancel() else {
        return Ok(into_result(&exchange.call(&id, body).await?.message)?);
    };
    tokio::select! {
        answer = exchange.call(&id, body) => Ok(into_result(&answer?.message)?),
        () = cancel.notified() => {
            // The call's future is dropped by now, and with it its response stream: that closing is all a
            // 2026-07-28 backend gets. A 2025-era backend learns which request to stop by its own id.
            if modern.is_none() {
                let params = json!({"requestId": id, "reason": "cancelled by the agent"});
                let cancelled = jsonrpc::notification(method::CANCELLED, Some(params));
                if let Err(error) = exchange.deliver(&cancelled).await {
                    tracing::warn!(%error, "could not forward a cancellation to the backend");
                }
            }
            Err(ExchangeError::Failed(McpError::Cancelled))
        }
    }
}

/// The `Mcp-Param-*` headers of a `tools/call` `message`, from what the backend's tool list declared.
fn param_headers(tool_headers: &ToolHeaders, backend: &str, message: &Value) -> Vec<(HeaderName, HeaderValue)> {
    let tool = message.pointer("/params/name").and_then(Value::as_str).unwrap_or_default();
    let Some(specs) = tool_headers.of(backend, tool) else { return Vec::new() };
    header_values(&specs, message.pointer("/params/arguments"))
}

/// A JSON-RPC request whose params are borrowed, serialized straight to the wire (members in
/// [`jsonrpc::request`]'s order).
#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

/// Ends an HTTP session at its backend with a best-effort `DELETE`, in the background.
pub(crate) fn delete_in_background(http: &HttpClient, session: &BackendSession) {
    let (Some(home), Some(id)) = (session.http_home(), session.id.clone()) else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let Ok(uri) = home.uri().cloned() else { return };
    let mut headers = home.common_headers().clone();
    headers.append(SESSION_ID_HEADER, id);
    headers.append(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(session.version));
    let (http, request) = (http.clone(), http_client::request(Method::DELETE, &uri, headers, Bytes::new()));
    runtime.spawn(async move {
        // The backend may refuse (405) or have forgotten the session already; neither matters.
        let _ = tokio::time::timeout(DELETE_TIMEOUT, http.send(request)).await;
    });
}

fn handshake_error(error: ExchangeError) -> McpError {
    match error {
        ExchangeError::SessionGone => McpError::NotDelivered {
            cause: NotDeliveredCause::SessionEnded,
            reason: "the backend ended the new session".into(),
        },
        error => error.into_error(),
    }
}

/// The backend's `MCP-Session-Id`: none, or exactly one header of 1–1024 visible ASCII characters.
fn session_id(headers: &HeaderMap) -> Result<Option<HeaderValue>, McpError> {
    let mut values = headers.get_all(SESSION_ID_HEADER).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.get_all(SESSION_ID_HEADER).iter().count() {
            0 => Ok(None),
            n => Err(McpError::NotDelivered {
                cause: NotDeliveredCause::Handshake,
                reason: format!("the backend sent {n} MCP-Session-Id headers").into(),
            }),
        };
    };
    let bytes = value.as_bytes();
    let visible = bytes.iter().all(|byte| (0x21..=0x7e).contains(byte));
    if bytes.is_empty() || bytes.len() > MAX_SESSION_ID_LEN || !visible {
        return Err(McpError::NotDelivered {
            cause: NotDeliveredCause::Handshake,
            reason: "the backend's MCP-Session-Id is not 1–1024 visible ASCII characters".into(),
        });
    }
    Ok(Some(value.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_must_be_one_header_of_visible_ascii() {
        let mut headers = HeaderMap::new();
        assert!(session_id(&headers).unwrap().is_none());
        headers.insert(SESSION_ID_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(session_id(&headers).unwrap().unwrap(), "abc-123");
        headers.append(SESSION_ID_HEADER, HeaderValue::from_static("other"));
        assert!(session_id(&headers).unwrap_err().proves_not_delivered());
        for bad in [&b""[..], b"a b", &[b'x'; 1025][..], b"a\x80b"] {
            let mut headers = HeaderMap::new();
            headers.insert(SESSION_ID_HEADER, HeaderValue::from_bytes(bad).unwrap());
            assert!(session_id(&headers).is_err(), "{bad:?} must be refused");
        }
    }
}
