//! Backends that speak the 2024-11-05 HTTP+SSE transport (`transport = "sse"`; MCP 2025-11-25
//! `basic/transports.mdx` §"Backwards Compatibility", 2024-11-05 `basic/transports.mdx` §"HTTP with SSE").
//!
//! Owns: opening a backend's event stream with `GET` and waiting for its `endpoint` event, refusing an endpoint on
//! another origin so that the credential only ever goes where it was configured to ([`stream`]); POSTing each
//! message to that endpoint and what the answer's status proves about delivery ([`post`]); and one MCP session
//! per stream, whose JSON-RPC rules are the shared session core's ([`connection`], [`crate::backend::duplex`]).
//!
//! Must not know: agents, the session table (the caller decides which agent session a stream serves; see
//! [`Sharing`]). The plain types here are what the composition root lowers an sse backend's configuration into.

mod connection;
mod post;
mod stream;

use std::sync::Arc;

use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};

pub use crate::backend::duplex::{Sharing, Standing};
pub use connection::LegacySseConnection;

/// A configured legacy SSE backend, as the backend layer needs it.
#[derive(Debug, Clone)]
pub struct LegacySseBackend {
    pub name: Arc<str>,
    /// The SSE endpoint, opened with `GET`; the endpoint for messages must be on the same origin.
    pub url: Url,
    /// Sent on the `GET` and on every `POST` (marked sensitive, so it never prints).
    pub credential: Option<(HeaderName, HeaderValue)>,
    /// Extra headers sent on the `GET` and on every `POST`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub sharing: Sharing,
}
