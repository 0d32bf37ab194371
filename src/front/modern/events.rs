//! The event streams of the 2026-07-28 era (transports §"Streamable HTTP": no event ids, no resumption): each
//! message one `data` line, keep-alive comments while idle; the stream's headers are the front's
//! ([`crate::front::stream::sse_body`]).

use axum::body::Bytes;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::front::stream::sse_body;

/// Writes one response's events; the response ends when this is dropped.
pub(super) struct Events(mpsc::UnboundedSender<Bytes>);

/// A new event stream: the writer, and the response reading it.
pub(super) fn open() -> (Events, Response) {
    let (live, body) = mpsc::unbounded_channel();
    (Events(live), sse_body(body))
}

impl Events {
    /// Writes a message; false once the agent has gone away.
    pub(super) fn send(&self, message: &Value) -> bool {
        // serde_json never writes a raw newline, so the message is one `data` line.
        self.0.send(Bytes::from(format!("data: {message}\n\n"))).is_ok()
    }

    /// Writes a keep-alive comment; false once the agent has gone away.
    pub(super) fn keep_alive(&self) -> bool {
        self.0.send(Bytes::from_static(b": keep-alive\n\n")).is_ok()
    }

    /// Completes when the agent has gone away.
    pub(super) async fn closed(&self) {
        self.0.closed().await;
    }
}
