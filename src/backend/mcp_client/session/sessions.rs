//! The session layer's state and what the client asks of it: start a backend session of any transport and era,
//! send one request on it, answer locally what a 2026-07-28 backend no longer serves, keep a session's background
//! stream, and forget what is known of a backend that was retired.
//!
//! Rules: one [`BackendSession`] type over every transport ([`super::transport`]): Streamable HTTP of the 2025 era
//! ([`super::http`]) or of 2026-07-28 ([`super::modern`], which needs no request to start), a stdio process or a
//! legacy SSE stream (the shared session core, [`crate::backend::duplex`]). What is known per backend lives here,
//! not in the client: its era ([`super::era`], [`super::negotiate`]), its tools' `Mcp-Param-*` headers
//! ([`super::tool_headers`]), its list-change stream ([`super::subscriptions`]) and its live processes
//! ([`super::processes`]). A shared session (`sessions = "shared"`) serves many agents, so it offers none of their
//! capabilities and relays nothing to any of them.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::background::BackgroundStream;
use super::era::Eras;
use super::http::{delete_in_background, send_http};
use super::negotiate::Negotiation;
use super::processes::{Full, ProcessCounts};
use super::rest;
use super::shared::Shared;
use super::standalone::{self, OPEN_WAIT, standing_relay};
use super::subscribers::Subscribers;
use super::subscriptions::{Watches, resubscribe};
use super::tool_headers::ToolHeaders;
use super::transport::{BackendSession, Carrier, Connection, DuplexLink};
use crate::backend::duplex::{Announce, Sharing, Standing};
use crate::backend::http_client::HttpClient;
use crate::backend::legacy_sse::LegacySseConnection;
use crate::backend::mcp_client::context::{Call, CallContext};
use crate::backend::mcp_client::endpoint::{BackendTarget, DuplexTarget, DuplexTransport, SlotKey};
use crate::backend::mcp_client::error::{McpError, NotDeliveredCause};
use crate::backend::mcp_client::wire::failure::ExchangeError;
use crate::raw_json::RawJson;

pub(crate) struct Sessions {
    shared: Arc<Shared>,
    /// What is known of each backend's protocol era.
    eras: Arc<Eras>,
    /// The `x-mcp-header` arguments of modern backends' tools.
    tool_headers: ToolHeaders,
    /// Modern backends' list-change streams.
    watches: Watches,
    processes: Arc<ProcessCounts>,
}

impl Sessions {
    /// `limit`: the bytes one exchange may read; `max_stdio_processes`: live processes of all backends together.
    pub(crate) fn new(http: HttpClient, limit: usize, max_stdio_processes: usize) -> Self {
        Self {
            shared: Arc::new(Shared::new(http, limit)),
            eras: Arc::default(),
            tool_headers: ToolHeaders::default(),
            watches: Watches::default(),
            processes: ProcessCounts::new(max_stdio_processes),
        }
    }

    pub(crate) fn subscribers(&self) -> &Subscribers {
        &self.shared.subscribers
    }

    /// Whether `session` may still serve: not made from an era verdict that has since been replaced.
    pub(crate) fn is_current(&self, backend: &str, session: &BackendSession) -> bool {
        session.modern().is_none_or(|modern| self.eras.is_current(backend, modern.epoch))
    }

    /// Starts a session on `target` for `key` within the call `context`; `capabilities` are the agent's declared
    /// client capabilities; `recycle` stops an idle process when a process cap is full (false: none is idle).
    pub(crate) async fn start(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        context: &CallContext<'_>,
        capabilities: &Value,
        recycle: &(dyn Fn(&Full) -> bool + Sync),
    ) -> Result<BackendSession, McpError> {
        let session = match target {
            BackendTarget::Http(endpoint) => {
                let negotiation = Negotiation { shared: &self.shared, eras: &self.eras };
                negotiation.start_http(key, endpoint, context, capabilities).await.map_err(|error| match error {
                    // The principal must authorize first: the agent is told where, not that a handshake failed.
                    McpError::AuthorizationRequired { .. } => error,
                    // What stopped the handshake stays the cause (a refused connection is still `Connect`), and
                    // its root cause the reason, unwrapped.
                    error => {
                        let cause = match &error {
                            McpError::NotDelivered { cause, .. } => *cause,
                            _ => NotDeliveredCause::Handshake,
                        };
                        McpError::NotDelivered { cause, reason: error.into_fault() }
                    }
                })
            }
            BackendTarget::Duplex(duplex) => self.start_duplex(key, duplex, context, capabilities, recycle).await,
            BackendTarget::Rest(_) => Ok(self.rest_session()),
        }?;
        self.watches.watch(&self.shared, &self.eras, key, &session);
        Ok(session)
    }

    async fn start_duplex(
        &self,
        key: &SlotKey,
        target: &DuplexTarget,
        context: &CallContext<'_>,
        capabilities: &Value,
        recycle: &(dyn Fn(&Full) -> bool + Sync),
    ) -> Result<BackendSession, McpError> {
        let sharing = target.transport.sharing();
        // A shared session serves many agents, so it offers none of their capabilities.
        let capabilities = if sharing == Sharing::Shared { &Value::Null } else { capabilities };
        let standing = self.standing(key, sharing, capabilities);
        let (connection, permit) = match &target.transport {
            DuplexTransport::Stdio(launcher) => {
                let permit = self.processes.permit(launcher.backend(), recycle)?;
                let negotiation = Negotiation { shared: &self.shared, eras: &self.eras };
                let (opening, relied_on) = negotiation.opening(&key.backend, launcher.backend().era);
                let connected = launcher.connect(capabilities, standing, opening, context.deadline()).await;
                let outcome = connected.as_ref().map(|connection| connection.is_modern());
                negotiation.learn_opening(&key.backend, relied_on, outcome);
                let connection = connected?;
                // A process that ends by itself (a crash, a kill from outside) frees its place at once, not when
                // its session is next used and dropped.
                let (ended, permit) = (connection.ended(), Arc::new(Mutex::new(Some(permit))));
                let held = Arc::clone(&permit);
                tokio::spawn(async move {
                    ended.await;
                    drop(held.lock().take());
                });
                (Connection::Stdio(connection), permit)
            }
            DuplexTransport::LegacySse(backend) => {
                let connection = LegacySseConnection::connect(
                    &self.shared.http,
                    backend,
                    capabilities,
                    standing,
                    context.deadline(),
                )
                .await?;
                (Connection::LegacySse(connection), Arc::default())
            }
        };
        let link = DuplexLink { connection, permit };
        Ok(BackendSession {
            id: None,
            version: link.version(),
            capabilities: Arc::new(link.capabilities().clone()),
            generation: self.shared.next_generation(),
            revision: 0,
            carrier: Carrier::Duplex(Arc::new(link)),
            principal: None,
            live: None,
        })
    }

    /// A REST API's session: nothing to start, as the API keeps none.
    fn rest_session(&self) -> BackendSession {
        BackendSession {
            id: None,
            version: crate::mcp::LATEST_PROTOCOL_VERSION,
            capabilities: Arc::new(rest::capabilities()),
            generation: self.shared.next_generation(),
            revision: 0,
            carrier: Carrier::Rest,
            principal: None,
            live: None,
        }
    }

    /// Sends one request on `session`.
    pub(crate) async fn send(
        &self,
        session: &BackendSession,
        target: &BackendTarget,
        call: Call<'_>,
    ) -> Result<RawJson, ExchangeError> {
        match (&session.carrier, target) {
            (Carrier::Http { .. } | Carrier::Modern { .. }, BackendTarget::Http(endpoint)) => {
                send_http(&self.shared, &self.tool_headers, session, endpoint, call).await
            }
            (Carrier::Duplex(link), BackendTarget::Duplex(_)) => {
                let params = call.params.cloned().unwrap_or(Value::Null);
                Ok(link.request_raw(call.method, params, call.relay, call.context.deadline()).await?)
            }
            (Carrier::Rest, BackendTarget::Rest(target)) => rest::send(&self.shared, target, call).await,
            _ => Err(ExchangeError::Failed(McpError::NotDelivered {
                cause: NotDeliveredCause::SessionEnded,
                reason: "the backend's transport changed under its session".into(),
            })),
        }
    }

    /// Where a duplex session's messages outside calls go: list changes to the catalog's subscriber, and (for a
    /// per-agent session) everything else to the agent session, as the HTTP client's standalone stream does.
    fn standing(&self, key: &SlotKey, sharing: Sharing, capabilities: &Value) -> Standing {
        let (shared, backend) = (Arc::clone(&self.shared), Arc::clone(&key.backend));
        let announce = move |method: &str| shared.subscribers.announce(&backend, method);
        let relay = (sharing == Sharing::PerAgent)
            .then(|| standing_relay(Arc::clone(&self.shared), key.clone(), capabilities.clone()));
        Standing { relay, list_changed: Some(Arc::new(announce) as Announce) }
    }

    /// The answer to a method 2026-07-28 removed, given here for a modern HTTP session (see
    /// [`super::modern::Asked::apply`]); a changed resource subscription replaces the slot's stream in
    /// `background`. `None` for any other request.
    pub(crate) async fn answer_locally(
        &self,
        background: &BackgroundStream,
        key: &SlotKey,
        session: &BackendSession,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Result<RawJson, McpError>> {
        let modern = session.modern()?;
        match modern.asked.apply(method, params, session.capabilities())? {
            Err(error) => Some(Err(error)),
            Ok(changed) => {
                if let Some(uris) = changed {
                    resubscribe(&self.shared, background, key, session, uris).await;
                }
                Some(Ok(RawJson::of(&json!({}))))
            }
        }
    }

    /// Keeps a standalone stream on an HTTP `session` in `background` (see [`standalone`]), when anyone hears
    /// session messages. A new stream is waited for (up to [`OPEN_WAIT`]) until it is open, so that what the
    /// backend sends there while serving the request about to go out is not lost.
    pub(crate) async fn keep_standalone(
        &self,
        background: &BackgroundStream,
        key: &SlotKey,
        session: &BackendSession,
        capabilities: &Value,
    ) {
        if session.http_home().is_none() || !self.shared.subscribers.has_session_messages() {
            return;
        }
        let mut opened = None;
        background.ensure(session.generation, || {
            let shared = Arc::clone(&self.shared);
            let (handle, ready) = standalone::spawn(shared, session.clone(), key.clone(), capabilities.clone());
            opened = Some(ready);
            handle
        });
        if let Some(ready) = opened {
            let _ = tokio::time::timeout(OPEN_WAIT, ready).await;
        }
    }

    /// Learns the `Mcp-Param-*` headers of a modern backend's tools from its `tools/list` `result` (dropping the
    /// tools that break the rules).
    pub(crate) fn learn_tools(&self, backend: &Arc<str>, result: &mut Value) {
        self.tool_headers.learn(backend, result);
    }

    /// Forgets the era verdict a modern HTTP session was made from, so that the next session probes again.
    pub(crate) fn forget_era(&self, backend: &str, session: &BackendSession) {
        if let Some(slot) = session.modern() {
            self.eras.forget(backend, slot.epoch);
        }
    }

    /// Forgets what is known of `backend` (a replaced backend may be another server): its era, its tools'
    /// headers, its list-change stream.
    pub(crate) fn retire(&self, backend: &str) {
        self.eras.clear(backend);
        self.tool_headers.clear(backend);
        self.watches.stop(backend);
    }

    pub(crate) fn set_process_cap(&self, max_stdio_processes: usize) {
        self.processes.set_global_cap(max_stdio_processes);
    }

    /// How many processes of each backend are live.
    pub(crate) fn live_processes(&self) -> HashMap<Arc<str>, usize> {
        self.processes.live()
    }

    /// Something that ends sessions, for a task that outlives this borrow.
    pub(crate) fn ender(&self) -> Ender {
        Ender(Arc::clone(&self.shared))
    }
}

/// Ends sessions: an HTTP session with a best-effort `DELETE` in the background; a duplex one by dropping it
/// (which stops its process or closes its stream once no call uses it).
pub(crate) struct Ender(Arc<Shared>);

impl Ender {
    pub(crate) fn end(&self, session: BackendSession) {
        delete_in_background(&self.0.http, &session);
    }
}
