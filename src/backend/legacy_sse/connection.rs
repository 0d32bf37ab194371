//! One MCP session with one legacy HTTP+SSE backend (2024-11-05 transports §"HTTP with SSE"; design §2, §7):
//! the event stream ([`super::stream`]) is the session's message source, POSTs to its endpoint
//! ([`super::post`]) its sink, and the JSON-RPC rules (ids, the handshake, server-to-client requests, relaying,
//! cancellation) are the shared session core's ([`crate::backend::duplex`]).
//!
//! Error classes keep at most once: opening the stream, the `endpoint` event and the handshake fail as
//! `NotDelivered`; so does a request whose `POST` could not connect or was refused with a status that proves it
//! (the refusal table). Once a `POST` may have been received, the stream ending, a timeout or a garbled event is
//! `AfterDelivery`. A stream that ends ends the session: every call in flight on it fails `AfterDelivery` (its
//! outcome is unknown) and is never repeated; the caller opens a new session for the next call.

use std::sync::Arc;

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

use super::LegacySseBackend;
use super::post::PostSink;
use super::stream;
use crate::backend::duplex::{Duplex, Peer};
use crate::backend::mcp_client::{McpError, Relay};

/// A live session with one legacy SSE backend; dropping it closes the event stream, which ends the session at the
/// backend.
pub struct LegacySseConnection {
    duplex: Arc<Duplex<PostSink>>,
    endpoint: Url,
    version: &'static str,
    capabilities: Value,
}

impl LegacySseConnection {
    /// Opens the backend's event stream, reads its endpoint and completes the handshake before `deadline`,
    /// offering the agent's client `capabilities`. Every failure is `NotDelivered`: no request of the caller was
    /// sent yet. `http` must not follow redirects ([`super::http_client`]).
    pub async fn connect(
        http: &reqwest::Client,
        backend: &LegacySseBackend,
        capabilities: &Value,
        deadline: Instant,
    ) -> Result<LegacySseConnection, McpError> {
        let headers = headers(backend);
        let (events, endpoint) = stream::open(http, &backend.url, &headers, deadline).await?;
        let sink = PostSink { http: http.clone(), endpoint: endpoint.clone(), headers };
        let peer =
            Peer { backend: Arc::clone(&backend.name), what: "the backend's SSE session", sharing: backend.sharing };
        let duplex = Duplex::start(peer, sink, events);
        // Built before the handshake so that a failed one drops it, which closes the stream.
        let mut connection = LegacySseConnection { duplex, endpoint, version: "", capabilities: Value::Null };
        let handshake = connection.duplex.handshake(capabilities, deadline).await?;
        connection.version = handshake.version;
        connection.capabilities = handshake.capabilities;
        Ok(connection)
    }

    /// Sends one request and returns its JSON-RPC `result`; `params` of `Value::Null` are omitted. The backend's
    /// messages about the request go to `relay`; the agent may cancel through it.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        relay: &Relay,
        deadline: Instant,
    ) -> Result<Value, McpError> {
        self.duplex.request(method, params, relay, deadline).await
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The server capabilities from the backend's `InitializeResult`.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// Where messages are POSTed (from the `endpoint` event).
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// Whether the session can still take requests (its stream is open).
    pub fn is_alive(&self) -> bool {
        self.duplex.ended_reason().is_none()
    }
}

impl Drop for LegacySseConnection {
    fn drop(&mut self) {
        // The reading task drops the stream, which closes its connection.
        self.duplex.end("the gateway closed the session".into());
    }
}

/// The credential (marked sensitive) and the extra headers, sent on the `GET` and on every `POST`.
fn headers(backend: &LegacySseBackend) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in &backend.headers {
        headers.append(name.clone(), value.clone());
    }
    if let Some((name, value)) = &backend.credential {
        let mut value = value.clone();
        value.set_sensitive(true);
        headers.insert(name.clone(), value);
    }
    headers
}
