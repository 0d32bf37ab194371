//! One live backend session, whatever carries it: the one session type of every transport and era (started and
//! used by [`super::sessions`]).
//!
//! Rules: a session is carried by Streamable HTTP (its requests are exchanges, [`super::http`]; a 2026-07-28
//! backend keeps no session, so the slot keeps what the agent asked of it, [`super::modern`]) or by the shared
//! session core (a stdio process or a legacy SSE stream, [`crate::backend::duplex`]). A duplex session that ended
//! (`!is_alive()`) is treated like an HTTP session the backend ended: the slot drops it and the NEXT call starts a
//! fresh one; the call that was in it already failed `AfterDelivery` and is never repeated. A stdio session holds
//! a [`ProcessPermit`] for as long as it lives, so the process caps count live processes only.

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::Arc;

use http::HeaderValue;
use serde_json::Value;

use super::modern::ModernSlot;
use super::processes::ProcessPermit;
use crate::backend::duplex::{DuplexConnection, Sharing};
use crate::backend::legacy_sse::LegacySseConnection;
use crate::backend::mcp_client::endpoint::{BackendEndpoint, BackendTarget, SlotKey};
use crate::backend::mcp_client::wire::exchange::Wire;
use crate::backend::stdio::StdioConnection;
use crate::mcp::SessionHolder;
use crate::telemetry::Counted;
use parking_lot::Mutex;

/// One live backend session.
#[derive(Debug, Clone)]
pub struct BackendSession {
    /// The backend's `MCP-Session-Id`, as it goes back on every request (visible ASCII, checked at the handshake).
    pub(crate) id: Option<HeaderValue>,
    pub(crate) version: &'static str,
    /// The backend's `ServerCapabilities` from its `InitializeResult`.
    pub(crate) capabilities: Arc<Value>,
    /// Distinguishes this session from the one that replaces it, even when a backend reuses ids.
    pub(crate) generation: u64,
    /// The configuration revision of the target that started it ([`BackendTarget::with_revision`]).
    pub(crate) revision: u64,
    pub(crate) carrier: Carrier,
    /// Whose tokens the session's own streams carry (HTTP): the principal of the call that started it.
    pub(crate) principal: Option<Arc<str>>,
    /// Counts the session as live while any clone of it exists; set by the client.
    pub(crate) live: Option<Arc<Counted>>,
}

/// What carries a session's messages.
#[derive(Clone)]
pub(crate) enum Carrier {
    /// Streamable HTTP, 2025 era; `home` is where a `DELETE` and the standalone stream go (without per-call
    /// headers).
    Http {
        home: Arc<BackendEndpoint>,
    },
    /// Streamable HTTP, 2026-07-28: no session at the backend; `home` is where `subscriptions/listen` goes.
    Modern {
        home: Arc<BackendEndpoint>,
        slot: Arc<ModernSlot>,
    },
    Duplex(Arc<DuplexLink>),
    /// A REST API: no session at the API; each call is one request ([`super::rest`]).
    Rest,
}

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Carrier::Http { home } => f.debug_struct("Http").field("url", home.url()).finish(),
            Carrier::Modern { home, slot } => {
                f.debug_struct("Modern").field("url", home.url()).field("epoch", &slot.epoch).finish()
            }
            Carrier::Duplex(link) => f.debug_struct("Duplex").field("alive", &link.is_alive()).finish(),
            Carrier::Rest => f.write_str("Rest"),
        }
    }
}

/// A live session over the shared session core; dropping the last reference ends it (and stops its process).
pub(crate) struct DuplexLink {
    pub(crate) connection: Connection,
    /// Counts a stdio process against its caps until the session is dropped or the process has ended, whichever
    /// comes first (a watcher takes it at the process's end).
    pub(crate) permit: Arc<Mutex<Option<ProcessPermit>>>,
}

impl Drop for DuplexLink {
    fn drop(&mut self) {
        // A process cap's place is free for the next start at once, as the session's own end stops its process.
        drop(self.permit.lock().take());
    }
}

pub(crate) enum Connection {
    Stdio(StdioConnection),
    LegacySse(LegacySseConnection),
}

impl Deref for DuplexLink {
    type Target = DuplexConnection;

    fn deref(&self) -> &DuplexConnection {
        match &self.connection {
            Connection::Stdio(connection) => connection,
            Connection::LegacySse(connection) => connection,
        }
    }
}

impl BackendSession {
    /// The backend-assigned `MCP-Session-Id`, if it assigned one (HTTP only).
    pub fn id(&self) -> Option<&str> {
        self.id.as_ref().and_then(|id| id.to_str().ok())
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The backend's declared server capabilities.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// The id of the process serving this session (stdio only).
    pub fn process_id(&self) -> Option<u32> {
        match &self.carrier {
            Carrier::Duplex(link) => match &link.connection {
                Connection::Stdio(connection) => Some(connection.pid()),
                Connection::LegacySse(_) => None,
            },
            Carrier::Http { .. } | Carrier::Modern { .. } | Carrier::Rest => None,
        }
    }

    /// Completes when the process serving this session has ended (stdio only: `None` for other transports), so
    /// what counts a process lets go of it then, not when the session is dropped.
    pub(crate) fn process_ended(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        match &self.carrier {
            Carrier::Duplex(link) => match &link.connection {
                Connection::Stdio(connection) => Some(connection.ended()),
                Connection::LegacySse(_) => None,
            },
            Carrier::Http { .. } | Carrier::Modern { .. } | Carrier::Rest => None,
        }
    }

    /// Whether the session can still take requests (an HTTP session is alive until its backend says otherwise).
    pub(crate) fn is_alive(&self) -> bool {
        match &self.carrier {
            Carrier::Http { .. } | Carrier::Modern { .. } | Carrier::Rest => true,
            Carrier::Duplex(link) => link.is_alive(),
        }
    }

    /// What a 2025-era session puts on its requests' wire (a duplex or modern session: as if it had no id).
    pub(crate) fn wire(&self) -> Wire<'_> {
        Wire::Session { id: self.id.as_ref(), version: self.version }
    }

    /// The home endpoint of a 2025-era HTTP session.
    pub(crate) fn http_home(&self) -> Option<&Arc<BackendEndpoint>> {
        match &self.carrier {
            Carrier::Http { home } => Some(home),
            Carrier::Modern { .. } | Carrier::Duplex(_) | Carrier::Rest => None,
        }
    }

    /// Where a 2026-07-28 HTTP backend's `subscriptions/listen` streams go.
    pub(crate) fn modern_home(&self) -> Option<&BackendEndpoint> {
        match &self.carrier {
            Carrier::Modern { home, .. } => Some(home),
            Carrier::Http { .. } | Carrier::Duplex(_) | Carrier::Rest => None,
        }
    }

    /// What the slot keeps for a 2026-07-28 HTTP backend.
    pub(crate) fn modern(&self) -> Option<&Arc<ModernSlot>> {
        match &self.carrier {
            Carrier::Modern { slot, .. } => Some(slot),
            Carrier::Http { .. } | Carrier::Duplex(_) | Carrier::Rest => None,
        }
    }
}

/// The slot key a call really uses: every agent shares one slot of a `sessions = "shared"` backend.
pub(crate) fn effective_key<'a>(key: &'a SlotKey, target: &BackendTarget) -> Cow<'a, SlotKey> {
    match target {
        BackendTarget::Duplex(duplex) if duplex.transport.sharing() == Sharing::Shared => {
            Cow::Owned(SlotKey::new(SessionHolder::Shared, &key.backend))
        }
        _ => Cow::Borrowed(key),
    }
}
