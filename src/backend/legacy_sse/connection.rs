//! One MCP session with one legacy HTTP+SSE backend (2024-11-05 transports §"HTTP with SSE"):
//! the event stream ([`super::stream`]) is the session's message source, POSTs to its endpoint
//! ([`super::post`]) its sink, and the JSON-RPC rules (ids, the handshake, server-to-client requests, relaying,
//! cancellation) are the shared session core's ([`crate::backend::duplex`]).
//!
//! Error classes keep at most once: opening the stream, the `endpoint` event and the handshake fail as
//! `NotDelivered`; so does a request whose `POST` could not connect or was refused with a status that proves it
//! (the refusal table). Once a `POST` may have been received, the stream ending, a timeout or a garbled event is
//! `AfterDelivery`. A stream that ends ends the session: every call in flight on it fails `AfterDelivery` (its
//! outcome is unknown) and is never repeated; the caller opens a new session for the next call.

use std::ops::Deref;
use std::sync::Arc;

use http::HeaderValue;
use http::header::{self, HeaderMap};
use reqwest::Url;
use serde_json::Value;
use tokio::time::Instant;

use super::LegacySseBackend;
use super::post::PostSink;
use super::stream;
use crate::backend::duplex::{Duplex, DuplexConnection, Opening, Peer, Standing};
use crate::backend::http_client::{self, HttpClient};
use crate::backend::mcp_client::{McpError, NotDeliveredCause};

/// A live session with one legacy SSE backend; the MCP side of it is the [`DuplexConnection`] it dereferences
/// to. Dropping it closes the event stream, which ends the session at the backend.
pub struct LegacySseConnection {
    connection: DuplexConnection,
    endpoint: Url,
}

impl LegacySseConnection {
    /// Opens the backend's event stream, reads its endpoint and completes the handshake before `deadline`,
    /// offering the agent's client `capabilities`; what the backend sends outside calls goes to `standing`. Every
    /// failure is `NotDelivered`: no request of the caller was sent yet.
    pub async fn connect(
        http: &HttpClient,
        backend: &LegacySseBackend,
        capabilities: &Value,
        standing: Standing,
        deadline: Instant,
    ) -> Result<LegacySseConnection, McpError> {
        let headers = headers(backend);
        let (events, endpoint) = stream::open(http, &backend.url, &headers, deadline).await?;
        let uri = http_client::uri_of(&endpoint)
            .map_err(|reason| McpError::NotDelivered { cause: NotDeliveredCause::Handshake, reason: reason.into() })?;
        let mut headers = headers;
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let sink = PostSink { http: http.clone(), endpoint: uri, headers };
        let what = "the backend's SSE session";
        let peer = Peer { backend: Arc::clone(&backend.name), what, sharing: backend.sharing, standing };
        let duplex = Duplex::start(peer, sink, events);
        // A failed handshake ends the session, which closes the stream.
        // The 2024-11-05 transport predates the modern era: no probe.
        let connection = DuplexConnection::establish(duplex, capabilities, Opening::Legacy, deadline).await?;
        Ok(LegacySseConnection { connection, endpoint })
    }

    /// Where messages are POSTed (from the `endpoint` event; for [`crate::backend::testing`]).
    pub(crate) fn endpoint(&self) -> &Url {
        &self.endpoint
    }
}

impl Deref for LegacySseConnection {
    type Target = DuplexConnection;

    fn deref(&self) -> &DuplexConnection {
        &self.connection
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
