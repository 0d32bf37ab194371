//! Backend sessions over Streamable HTTP (design §2; MCP 2025-11-25 `basic/transports.mdx` §"Streamable HTTP"):
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
use crate::mcp::{jsonrpc, method};
use crate::telemetry::trace::ClientSpan;

const MAX_SESSION_ID_LEN: usize = 1024;

/// One request as the caller asked for it.
pub(super) struct Call<'a> {
    pub(super) key: &'a SlotKey,
    pub(super) method: &'a str,
    pub(super) params: Option<Value>,
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
        let answer = exchange.call(&id, &initialize).await.map_err(handshake_error)?;
        let result = into_result(answer.message)?;
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
    ) -> Result<Value, ExchangeError> {
        let id = self.next_id();
        if let Some(span) = call.span {
            span.request_id(&id);
        }
        let mut params = call.params;
        let theirs = swap_progress_token(&mut params, &id);
        let modern = session.modern();
        let (message, headers) = match modern {
            None => (jsonrpc::request(&id, call.method, params), Vec::new()),
            Some(modern) => {
                let log_level = modern.asked.log_level();
                let params = request_params(params, session.version, call.relay.capabilities(), log_level);
                let message = jsonrpc::request(&id, call.method, Some(params));
                let mut headers = mirrored_headers(&message)?;
                if call.method == method::TOOLS_CALL {
                    headers.extend(self.param_headers(&call.key.backend, &message));
                }
                (message, headers)
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
            return Ok(into_result(exchange.call(&id, &message).await?.message)?);
        };
        tokio::select! {
            answer = exchange.call(&id, &message) => Ok(into_result(answer?.message)?),
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
    fn param_headers(
        &self,
        backend: &str,
        message: &Value,
    ) -> Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)> {
        let tool = message.pointer("/params/name").and_then(Value::as_str).unwrap_or_default();
        let Some(specs) = self.tool_headers.of(backend, tool) else { return Vec::new() };
        header_values(&specs, message.pointer("/params/arguments"))
    }
}

/// Ends an HTTP session at its backend with a best-effort `DELETE`, in the background.
pub(super) fn delete_in_background(http: &reqwest::Client, session: &BackendSession) {
    let (Some(home), Some(id)) = (session.http_home(), session.id.clone()) else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let mut request = http
        .delete(home.url.clone())
        .header(SESSION_ID_HEADER, id.as_ref())
        .header(PROTOCOL_VERSION_HEADER, session.version)
        .timeout(DELETE_TIMEOUT);
    if let Some((name, value)) = &home.credential {
        request = request.header(name, value);
    }
    runtime.spawn(async move {
        // The backend may refuse (405) or have forgotten the session already; neither matters.
        let _ = request.send().await;
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
fn session_id(headers: &reqwest::header::HeaderMap) -> Result<Option<Arc<str>>, McpError> {
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
    Ok(Some(String::from_utf8_lossy(bytes).into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn session_id_must_be_one_header_of_visible_ascii() {
        let mut headers = HeaderMap::new();
        assert!(session_id(&headers).unwrap().is_none());
        headers.insert(SESSION_ID_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(session_id(&headers).unwrap().as_deref(), Some("abc-123"));
        headers.append(SESSION_ID_HEADER, HeaderValue::from_static("other"));
        assert!(session_id(&headers).unwrap_err().proves_not_delivered());
        for bad in [&b""[..], b"a b", &[b'x'; 1025][..], b"a\x80b"] {
            let mut headers = HeaderMap::new();
            headers.insert(SESSION_ID_HEADER, HeaderValue::from_bytes(bad).unwrap());
            assert!(session_id(&headers).is_err(), "{bad:?} must be refused");
        }
    }
}
