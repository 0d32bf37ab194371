//! The gateway's client to backend MCP servers, of both protocol eras — 2025-11-25 and earlier
//! (`initialize`, sessions) and 2026-07-28 (sessionless): one API — [`McpBackendClient`] with `session`,
//! `request`, `list_tools`, `forget_agent_session` — over three transports: Streamable HTTP, stdio processes and
//! legacy HTTP+SSE streams.
//!
//! Three layers, each owning its state, each knowing only the one below:
//! - the client ([`client`]): the object the router holds, the bounded session table ([`table`]), the pure retry
//!   decision ([`retry`]), metrics and the CLIENT span of every call; what it holds per backend ([`census`]) and
//!   what its exchanges showed of each backend's health ([`health`]);
//! - the session ([`session`]): one session type over every transport and era, its start, one request on it,
//!   and what is known per backend (era, tools' headers, list-change streams, live processes);
//! - the wire ([`wire`]): one HTTP exchange, SSE decoding and resumption, and the error class of its failures.
//!
//! Beside them, the vocabulary all three share: the error classes ([`error`]), their root causes ([`fault`]) and
//! the one sentence that names the backend with its failure ([`sentence`]), where a backend is reached and
//! which slot a call uses ([`endpoint`]), and what one call carries down — deadline, principal, span
//! ([`context`]).
//!
//! Must not know: agents' HTTP requests, tool names as agents see them, the ledger. Its one promise to the layers
//! above is the error class: only [`McpError::NotDelivered`] proves that the backend did not process a request.

mod census;
mod client;
mod context;
mod endpoint;
mod error;
mod fault;
mod health;
mod retry;
mod sentence;
mod session;
mod table;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::telemetry::Metrics;

pub use census::BackendCensus;
pub use client::McpBackendClient;
pub use context::{CallContext, Destination};
pub use endpoint::{BackendEndpoint, BackendTarget, DuplexTarget, SlotKey};
pub use error::{AfterDeliveryCause, ClientBuildError, McpError, NotDeliveredCause};
pub use fault::{Audience, Exit, Fault, ManagerError, ProcessEnd};
pub use health::{BackendHealth, HealthBoard};
pub use sentence::{Failure, Place, quoted};
pub(crate) use session::asked::Asked;
pub use session::era::{Era, LATEST_MODERN_VERSION};
pub(crate) use session::era::{Verdict, verdict_of_error, verdict_of_result};
pub(crate) use session::params::initialize_params;
pub(crate) use session::params::{listen_interests, request_params};
pub use session::transport::BackendSession;
pub use wire::authorize::OAuthBinding;
pub(crate) use wire::failure::{classify_send_error, connect_fault, error_chain};
pub(crate) use wire::notifications::NotificationRoute;
pub use wire::refusal::Refusal;
pub(crate) use wire::response::{into_result, response_id};
pub(crate) use wire::server_request::answer_server_request;

pub use crate::backend::stdio::SpawnStatus;
use crate::telemetry::trace::Tracer;

pub use crate::mcp::{
    LATEST_PROTOCOL_VERSION, Relay, RelayMessage, SUPPORTED_PROTOCOL_VERSIONS, SessionMessage, is_supported_version,
};

/// The most bytes one exchange may read, resumptions included.
pub const MAX_EXCHANGE_BYTES: usize = 16 * 1024 * 1024;
/// `tools/list` discovery bounds: pages followed, tools accepted.
pub const MAX_TOOL_PAGES: usize = 32;
pub const MAX_TOOLS: usize = 2048;
/// The default bound of the (agent session, backend) table.
pub const DEFAULT_MAX_SESSIONS: usize = 4096;
/// The default share of the table one owner may hold: a quarter, so at least four owners always fit.
pub const DEFAULT_MAX_SESSIONS_PER_OWNER: usize = DEFAULT_MAX_SESSIONS / 4;
/// Live stdio backend processes of the whole client, by default.
pub const DEFAULT_MAX_STDIO_PROCESSES: usize = 128;
/// Best-effort `DELETE`s of forgotten sessions get this long.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bound of the (agent session, backend) table.
    pub max_sessions: usize,
    /// How many of the table's slots one owner (a [`SlotKey::owner`]) may hold.
    pub max_sessions_per_owner: usize,
    /// Bytes one exchange may read.
    pub max_exchange_bytes: usize,
    /// Live stdio processes of all backends together.
    pub max_stdio_processes: usize,
    /// Where request durations and live sessions are counted.
    pub metrics: Arc<Metrics>,
    /// Records a CLIENT span per request when traces are on (`None`: off, and nothing is recorded).
    pub tracer: Option<Tracer>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_owner: DEFAULT_MAX_SESSIONS_PER_OWNER,
            max_exchange_bytes: MAX_EXCHANGE_BYTES,
            max_stdio_processes: DEFAULT_MAX_STDIO_PROCESSES,
            metrics: Arc::default(),
            tracer: None,
        }
    }
}

/// A backend announced that one of its lists (tools, prompts, resources) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListChanged {
    pub backend: Arc<str>,
    /// e.g. `notifications/tools/list_changed`.
    pub method: String,
}

/// Replaces the caller's `params._meta.progressToken` with `ours` (the request's own id, unique within the
/// backend session) and returns the caller's, to be restored on the way back.
pub(crate) fn swap_progress_token(params: &mut Option<Value>, ours: &Value) -> Option<Value> {
    let token = params.as_mut().and_then(|params| params.pointer_mut("/_meta/progressToken"));
    token.map(|token| std::mem::replace(token, ours.clone()))
}

pub(crate) fn negotiated_version(result: &Value) -> Result<&'static str, McpError> {
    let offered = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    SUPPORTED_PROTOCOL_VERSIONS.iter().copied().find(|supported| *supported == offered).ok_or_else(|| {
        McpError::NotDelivered {
            cause: NotDeliveredCause::Handshake,
            reason: format!("the backend negotiated unsupported protocol version `{offered}`").into(),
        }
    })
}
