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
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::Method;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use super::NotDeliveredCause;
use super::exchange::{Exchange, ExchangeError, Listener, Wire};
use super::modern::{mirrored_headers, request_params};
use super::tool_headers::header_values;
use super::transport::{BackendSession, Carrier, initialize_params};
use super::{
    BackendEndpoint, DELETE_TIMEOUT, McpBackendClient, McpError, PROTOCOL_VERSION_HEADER, Relay, SESSION_ID_HEADER,
    SlotKey, into_result, negotiated_version, swap_progress_token,
};
use crate::backend::http_client::{self, HttpClient};
use crate::mcp::{jsonrpc, method};
use crate::raw_json::RawJson;
use crate::telemetry::trace::ClientSpan;

const MAX_SESSION_ID_LEN: usize = 1024;

/// One request as the caller asked for it (its params are borrowed: a retry sends them again).
pub(super) struct Call<'a> {
    pub(super) key: &'a SlotKey,
    pub(super) method: &'a str,
    pub(super) params: Option<&'a Value>,
    pub(super) relay: &'a Relay,
    /// The request's CLIENT span, when traces are on.
    pub(super) span: Option<&'a ClientSpan>,
}

impl McpBackendClient {
    /// `capabilities`: the agent's declared client capabilities (`null`: none), offered as the gateway's own.
    pub(super) async fn handshake(
        &self,
        endpoint: &BackendEndpoint,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        let id = self.next_id();
        let initialize = jsonrpc::request(&id, method::INITIALIZE, Some(initialize_params(capabilities)));
        let limit = self.config.max_exchange_bytes;
        let listener = Listener::default();
        let wire = Wire::Legacy(None);
        let exchange = Exchange { http: &self.http, endpoint, wire, limit, listener, strays: None, span: None };
        let answer = exchange.call(&id, encode(&initialize)?).await.map_err(handshake_error)?;
        // The handshake reads inside its result: a tree, once per session.
        let result = into_result(&answer.message)?.to_value();
        let version = negotiated_version(&result)?;
        let session_id = session_id(&answer.headers)?;
        let session = BackendSession {
            id: session_id,
            version,
            capabilities: Arc::new(result.get("capabilities").cloned().unwrap_or_else(|| json!({}))),
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            revision: 0,
            carrier: Carrier::Http { home: Arc::new(endpoint.home()) },
            live: None,
        };
        let exchange = Exchange { wire: Wire::Legacy(Some(&session)), ..exchange };
        exchange.deliver(&jsonrpc::notification(method::INITIALIZED, None)).await.map_err(handshake_error)?;
        Ok(session)
    }

    pub(super) async fn send_http(
        &self,
        session: &BackendSession,
        endpoint: &BackendEndpoint,
        call: Call<'_>,
    ) -> Result<RawJson, ExchangeError> {
        let id = self.next_id();
        if let Some(span) = call.span {
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
                    headers.extend(self.param_headers(&call.key.backend, &message));
                }
                (encode(&message)?, headers)
            }
        };
        let wire = match modern {
            None => Wire::Legacy(Some(session)),
            Some(_) => Wire::Modern { version: session.version, headers: &headers },
        };
        let backend = &call.key.backend;
        let list_changed = |method: &str| self.subscribers.announce(backend, method);
        let listener = Listener {
            relay: Some(call.relay),
            progress: theirs.as_ref().map(|theirs| (&id, theirs)),
            list_changed: Some(&list_changed),
        };
        let limit = self.config.max_exchange_bytes;
        // Responses on another stream exist only where there are other streams (a 2025-era session's `GET`).
        let strays = modern.is_none().then_some(&*self.strays);
        let span = call.span;
        let exchange = Exchange { http: &self.http, endpoint, wire, limit, listener, strays, span };
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
                        tracing::warn!(?error, "could not forward a cancellation to the backend");
                    }
                }
                Err(ExchangeError::Failed(McpError::Cancelled))
            }
        }
    }

    /// The `Mcp-Param-*` headers of a `tools/call` `message`, from what the backend's tool list declared.
    fn param_headers(&self, backend: &str, message: &Value) -> Vec<(HeaderName, HeaderValue)> {
        let tool = message.pointer("/params/name").and_then(Value::as_str).unwrap_or_default();
        let Some(specs) = self.tool_headers.of(backend, tool) else { return Vec::new() };
        header_values(&specs, message.pointer("/params/arguments"))
    }
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

/// A message's bytes, once: a resend after a refusal sends them again.
pub(super) fn encode(message: &impl Serialize) -> Result<Bytes, McpError> {
    let bytes = serde_json::to_vec(message)
        .map_err(|e| McpError::NotDelivered { cause: NotDeliveredCause::Encode, reason: e.to_string() })?;
    Ok(Bytes::from(bytes))
}

/// Ends an HTTP session at its backend with a best-effort `DELETE`, in the background.
pub(super) fn delete_in_background(http: &HttpClient, session: &BackendSession) {
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
                reason: format!("the backend sent {n} MCP-Session-Id headers"),
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
