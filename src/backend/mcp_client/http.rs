//! Backend sessions over Streamable HTTP (design §2; MCP 2025-11-25 `basic/transports.mdx` §"Streamable HTTP"):
//! the handshake, one request on a session, and ending a session with `DELETE`.
//!
//! Rules: the handshake is `initialize` offering [`LATEST_PROTOCOL_VERSION`] then `notifications/initialized`;
//! a returned `MCP-Session-Id` must be exactly one header of 1–1024 visible ASCII characters; the progress token
//! is swapped for the request's own id; a cancelled call tells the backend by that id. The wire exchange itself
//! is [`super::exchange`]'s.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::NotDeliveredCause;
use super::exchange::{Exchange, ExchangeError, Listener};
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
        let exchange =
            Exchange { http: &self.http, endpoint, session: None, limit, listener, strays: None, span: None };
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
        let exchange = Exchange { session: Some(&session), ..exchange };
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
        let message = jsonrpc::request(&id, call.method, params);
        let backend = &call.key.backend;
        let list_changed = |method: &str| self.subscribers.announce(backend, method);
        let listener = Listener {
            relay: Some(call.relay),
            progress: theirs.as_ref().map(|theirs| (&id, theirs)),
            list_changed: Some(&list_changed),
        };
        let limit = self.config.max_exchange_bytes;
        let strays = Some(&*self.strays);
        let span = call.span;
        let exchange = Exchange { http: &self.http, endpoint, session: Some(session), limit, listener, strays, span };
        let Some(cancel) = &call.relay.cancel() else {
            return Ok(into_result(exchange.call(&id, &message).await?.message)?);
        };
        tokio::select! {
            answer = exchange.call(&id, &message) => Ok(into_result(answer?.message)?),
            () = cancel.notified() => {
                // The backend learns which of its requests to stop by its own id (utilities/cancellation).
                let params = json!({"requestId": id, "reason": "cancelled by the agent"});
                if let Err(error) = exchange.deliver(&jsonrpc::notification(method::CANCELLED, Some(params))).await {
                    tracing::warn!(?error, "could not forward a cancellation to the backend");
                }
                Err(ExchangeError::Failed(McpError::Cancelled))
            }
        }
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
        ExchangeError::Failed(error) => error,
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
