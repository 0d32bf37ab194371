//! `switchyard::demo`: a small MCP server over Streamable HTTP (MCP 2025-11-25; also 2025-06-18 and 2025-03-26
//! clients) with five tools: `echo`, `add`, `counter`, `sleep` and `fail`.
//!
//! It is served by `switchyard demo-server`, embedded by `switchyard serve` when there is no configuration,
//! and used as the fast backend of the latency benchmark. So the hot path stays lean: one parse of
//! the body, one map lookup under a short lock, and the answer's JSON; tool definitions are built once.
//!
//! Owns: the endpoint ([`router`], [`spawn`]) and its body limit ([`MAX_BODY`], above what a gateway in front
//! accepts, so that a request the gateway admits is never refused here). The parts follow the spec's layers: [`http`] the transport (§A1),
//! [`methods`] the lifecycle and tool methods (§A2, §A3), [`tools`] the tools themselves, [`sessions`] the
//! bounded session set (§A1.6); [`stdio`] serves the same methods over stdin/stdout (`demo-server --stdio`). Each
//! submodule's doc lists the rules it follows.
//!
//! Must not know: anything of the gateway. The demo is an ordinary MCP server, and the gateway talks to it as to
//! any other backend.

pub(crate) mod http;
pub(crate) mod methods;
pub(crate) mod sessions;
pub mod stdio;
pub(crate) mod tools;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::post;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use sessions::Sessions;

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";
/// Protocol versions the demo speaks, newest first; the first is offered to clients asking for another.
/// (2024-11-05 is missing on purpose: it used the older HTTP+SSE transport, which the demo does not serve.)
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
pub use crate::mcp::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
/// The largest request body the demo accepts. A gateway in front of it may accept bodies of 4 MiB (Switchyard's
/// default `max_body`) and forwards them slightly rewritten (its own request id, the backend's tool name), so the
/// demo takes twice that: whatever such a gateway accepts, the demo accepts too.
pub const MAX_BODY: usize = 8 << 20;

/// The demo server's routes: `/mcp` only, with a fresh session set per call.
pub fn router() -> Router {
    let sessions = Arc::new(Sessions::default());
    Router::new()
        .route(MCP_PATH, post(http::post).delete(http::delete).get(http::get))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(sessions)
}

/// Binds `addr` (e.g. `127.0.0.1:0`) and serves [`router`] in a task until that task is aborted. Returns the
/// address actually bound.
///
/// Aborting the task stops accepting and also closes idle keep-alive connections (requests in flight finish
/// first), so a client sees the server gone rather than still answering on a pooled connection.
pub async fn spawn(addr: SocketAddr) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    // Small answers would otherwise wait on Nagle's algorithm, which distorts the latency benchmark.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "demo server: could not set TCP_NODELAY");
        }
    });
    // Aborting drops the serve future, and axum tells its per-connection tasks to shut down gracefully when that
    // happens, which is what closes idle keep-alive connections (the integration tests pin this down).
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router()).await {
            tracing::error!(%error, "demo server stopped");
        }
    });
    Ok((local, task))
}
