//! The transport dispatch: one live backend session, whatever carries it, and the two things
//! the client does with one — start it and send a request on it.
//!
//! Rules: a session is carried by Streamable HTTP (its requests are exchanges, [`super::http`]; a 2026-07-28
//! backend keeps no session, so the slot keeps what the agent asked of it, [`super::modern`]) or by the shared
//! session core (a stdio process or a legacy SSE stream, [`crate::backend::duplex`]). A duplex session that ended
//! (`!is_alive()`) is treated like an HTTP session the backend ended: the slot drops it and the NEXT call starts a
//! fresh one; the call that was in it already failed `AfterDelivery` and is never repeated. A stdio session holds
//! a [`ProcessPermit`] for as long as it lives, so the process caps count live processes only.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::HeaderValue;
use serde_json::{Value, json};

use super::NotDeliveredCause;
use super::endpoint::{DuplexTarget, DuplexTransport};
use super::exchange::ExchangeError;
use super::http::Call;
use super::modern::ModernSlot;
use super::processes::ProcessPermit;
use super::{BackendEndpoint, BackendTarget, McpBackendClient, McpError, SlotKey};
use crate::backend::duplex::{Announce, DuplexConnection, Sharing, Standing};
use crate::backend::legacy_sse::LegacySseConnection;
use crate::backend::stdio::StdioConnection;
use crate::raw_json::RawJson;
use crate::telemetry::LiveSession;

/// One live backend session.
#[derive(Debug, Clone)]
pub struct BackendSession {
    /// The backend's `MCP-Session-Id`, as it goes back on every request (visible ASCII, checked at the handshake).
    pub(super) id: Option<HeaderValue>,
    pub(super) version: &'static str,
    /// The backend's `ServerCapabilities` from its `InitializeResult`.
    pub(super) capabilities: Arc<Value>,
    /// Distinguishes this session from the one that replaces it, even when a backend reuses ids.
    pub(super) generation: u64,
    /// The configuration revision of the target that started it ([`BackendTarget::with_revision`]).
    pub(super) revision: u64,
    pub(super) carrier: Carrier,
    /// Counts the session (and its process) as live while any clone of it exists; set by the client.
    pub(super) live: Option<Arc<LiveSession>>,
}

/// What carries a session's messages.
#[derive(Clone)]
pub(super) enum Carrier {
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
}

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Carrier::Http { home } => f.debug_struct("Http").field("url", home.url()).finish(),
            Carrier::Modern { home, slot } => {
                f.debug_struct("Modern").field("url", home.url()).field("epoch", &slot.epoch).finish()
            }
            Carrier::Duplex(link) => f.debug_struct("Duplex").field("alive", &link.is_alive()).finish(),
        }
    }
}

/// A live session over the shared session core; dropping the last reference ends it (and stops its process).
pub(super) struct DuplexLink {
    connection: Connection,
    /// Counts a stdio process against its caps while it lives.
    _permit: Option<ProcessPermit>,
}

enum Connection {
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
            Carrier::Http { .. } | Carrier::Modern { .. } => None,
        }
    }

    /// Whether the session can still take requests (an HTTP session is alive until its backend says otherwise).
    pub(super) fn is_alive(&self) -> bool {
        match &self.carrier {
            Carrier::Http { .. } | Carrier::Modern { .. } => true,
            Carrier::Duplex(link) => link.is_alive(),
        }
    }

    /// The home endpoint of a 2025-era HTTP session.
    pub(super) fn http_home(&self) -> Option<&Arc<BackendEndpoint>> {
        match &self.carrier {
            Carrier::Http { home } => Some(home),
            Carrier::Modern { .. } | Carrier::Duplex(_) => None,
        }
    }

    /// Where a 2026-07-28 HTTP backend's `subscriptions/listen` streams go.
    pub(super) fn modern_home(&self) -> Option<&BackendEndpoint> {
        match &self.carrier {
            Carrier::Modern { home, .. } => Some(home),
            Carrier::Http { .. } | Carrier::Duplex(_) => None,
        }
    }

    /// What the slot keeps for a 2026-07-28 HTTP backend.
    pub(super) fn modern(&self) -> Option<&Arc<ModernSlot>> {
        match &self.carrier {
            Carrier::Modern { slot, .. } => Some(slot),
            Carrier::Http { .. } | Carrier::Duplex(_) => None,
        }
    }
}

/// The slot key a call really uses: every agent shares one slot of a `sessions = "shared"` backend.
pub(super) fn effective_key(key: &SlotKey, target: &BackendTarget) -> Option<SlotKey> {
    match target {
        BackendTarget::Duplex(duplex) if duplex.transport.sharing() == Sharing::Shared => {
            Some(SlotKey::new(super::SHARED_SESSION, &key.backend))
        }
        _ => None,
    }
}

impl McpBackendClient {
    /// Starts a session on `target` for `key`; `capabilities` are the agent's declared client capabilities.
    pub(super) async fn start_session(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        match target {
            BackendTarget::Http(endpoint) => {
                self.start_http(key, endpoint, capabilities).await.map_err(|error| match error {
                    // The principal must authorize first: the agent is told where, not that a handshake failed.
                    McpError::AuthorizationRequired { .. } => error,
                    // What stopped the handshake stays the cause (a refused connection is still `Connect`).
                    error => {
                        let cause = match &error {
                            McpError::NotDelivered { cause, .. } => *cause,
                            _ => NotDeliveredCause::Handshake,
                        };
                        McpError::NotDelivered { cause, reason: format!("the backend handshake failed: {error}") }
                    }
                })
            }
            BackendTarget::Duplex(duplex) => self.start_duplex(key, duplex, capabilities).await,
        }
    }

    async fn start_duplex(
        &self,
        key: &SlotKey,
        target: &DuplexTarget,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        let sharing = target.transport.sharing();
        // A shared session serves many agents, so it offers none of their capabilities.
        let capabilities = if sharing == Sharing::Shared { &Value::Null } else { capabilities };
        let standing = self.standing(key, sharing, capabilities);
        let (connection, permit) = match &target.transport {
            DuplexTransport::Stdio(launcher) => {
                let permit = self.process_permit(launcher.backend())?;
                let (opening, relied_on) = self.opening(&key.backend, launcher.backend().era);
                let connected = launcher.connect(capabilities, standing, opening, target.deadline).await;
                let outcome = connected.as_ref().map(|connection| connection.is_modern());
                self.learn_opening(&key.backend, relied_on, outcome);
                (Connection::Stdio(connected?), Some(permit))
            }
            DuplexTransport::LegacySse(backend) => {
                let connection =
                    LegacySseConnection::connect(&self.http, backend, capabilities, standing, target.deadline).await?;
                (Connection::LegacySse(connection), None)
            }
        };
        let link = DuplexLink { connection, _permit: permit };
        Ok(BackendSession {
            id: None,
            version: link.version(),
            capabilities: Arc::new(link.capabilities().clone()),
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            revision: 0,
            carrier: Carrier::Duplex(Arc::new(link)),
            live: None,
        })
    }

    /// Sends one request on `session`.
    pub(super) async fn send(
        &self,
        session: &BackendSession,
        target: &BackendTarget,
        call: Call<'_>,
    ) -> Result<RawJson, ExchangeError> {
        match (&session.carrier, target) {
            (Carrier::Http { .. } | Carrier::Modern { .. }, BackendTarget::Http(endpoint)) => {
                self.send_http(session, endpoint, call).await
            }
            (Carrier::Duplex(link), BackendTarget::Duplex(duplex)) => {
                let params = call.params.cloned().unwrap_or(Value::Null);
                Ok(link.request_raw(call.method, params, call.relay, duplex.deadline).await?)
            }
            _ => Err(ExchangeError::Failed(McpError::NotDelivered {
                cause: NotDeliveredCause::SessionEnded,
                reason: "the backend's transport changed under its session".into(),
            })),
        }
    }

    /// Where a duplex session's messages outside calls go: list changes to the catalog's subscriber, and (for a
    /// per-agent session) everything else to the agent session, as the HTTP client's standalone stream does.
    fn standing(&self, key: &SlotKey, sharing: Sharing, capabilities: &Value) -> Standing {
        let (subscribers, backend) = (Arc::clone(&self.subscribers), Arc::clone(&key.backend));
        let announce = move |method: &str| subscribers.announce(&backend, method);
        let relay = (sharing == Sharing::PerAgent)
            .then(|| super::listener::standing_relay(Arc::clone(&self.subscribers), key.clone(), capabilities.clone()));
        Standing { relay, list_changed: Some(Arc::new(announce) as Announce) }
    }
}

/// The `initialize` params the gateway sends on every transport; `capabilities` are the agent's declared client
/// capabilities (`null`: none), offered as the gateway's own.
pub(crate) fn initialize_params(capabilities: &Value) -> Value {
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    json!({
        "protocolVersion": super::LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
    })
}
