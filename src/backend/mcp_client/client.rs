//! The client layer: the object the router holds, its bounded table of backend sessions, and every call made
//! on them, whatever the transport — the slot taken, the session made or found ([`super::session`] makes it),
//! the request sent, a failure retried as [`super::retry`] decides, and the call timed and traced in one place.
//!
//! Rules: one backend session per (agent session, backend) slot, or one reserved slot per backend for every agent
//! when the backend's sessions are shared; concurrent first callers of a slot share one handshake; a duplex
//! session that ended is replaced for the next call only; a request is retried at most once. Forgetting an agent
//! session ends all its sessions (a `DELETE` for HTTP; the process stopped or the stream closed otherwise).
//! Retiring a backend (a reload removed or replaced it) takes all its slots out of the table and ends each session
//! once the calls running on it have ended; a session started from an older configuration revision of a backend,
//! or (2026-07-28) from an older era verdict, is replaced before a newer target uses it. Every request is timed
//! into `mcp_client_operation_duration_seconds` (handshake and retry included), and a session counts as live (and
//! its process) while any clone of it exists.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use super::census::BackendCensus;
use super::context::{Call, Destination};
use super::endpoint::{BackendTarget, SlotKey};
use super::error::{AfterDeliveryCause, ClientBuildError, McpError, NotDeliveredCause};
use super::health::HealthBoard;
use super::retry::{Decision, Retry, decide};
use super::session::processes::Full;
use super::session::sessions::Sessions;
use super::session::standalone;
use super::session::transport::{BackendSession, effective_key};
use super::table::{SessionTable, SlotGuard, TableFull, reap_when_idle};
use super::{ClientConfig, ListChanged, MAX_TOOL_PAGES, MAX_TOOLS};
use crate::backend::http_client::HttpClient;
use crate::mcp::{Relay, SessionHolder, SessionMessage, method};
use crate::raw_json::RawJson;
use crate::telemetry::trace::{ClientRequest, Tracer};
use crate::telemetry::{ErrorType, Metrics};

/// The client. Cheap to share behind an `Arc`; all state is internally synchronized.
pub struct McpBackendClient {
    /// The session layer: sessions of every transport, and what is known per backend.
    sessions: Sessions,
    table: SessionTable,
    /// What the exchanges showed of each backend's health.
    health: HealthBoard,
    /// Where request durations and live sessions are counted.
    metrics: Arc<Metrics>,
    /// Records a CLIENT span per request when traces are on.
    tracer: Option<Tracer>,
}

impl McpBackendClient {
    /// Fails only when the HTTP client cannot be built (e.g. the TLS roots cannot be loaded): the gateway then
    /// refuses to start rather than fall back to a client that would follow redirects.
    pub fn new(config: ClientConfig) -> Result<Self, ClientBuildError> {
        // It follows no redirect: backend URLs come only from configuration.
        let http = HttpClient::new().map_err(ClientBuildError)?;
        Ok(Self {
            sessions: Sessions::new(http, config.max_exchange_bytes, config.max_stdio_processes),
            table: SessionTable::new(config.max_sessions, config.max_sessions_per_owner),
            health: HealthBoard::new(Arc::clone(&config.metrics)),
            metrics: config.metrics,
            tracer: config.tracer,
        })
    }

    /// The slot's backend session, starting one within `context` if there is none (concurrent callers share one
    /// handshake).
    pub async fn session(&self, to: Destination<'_>) -> Result<BackendSession, McpError> {
        let key = effective_key(to.slot, to.target);
        let to = Destination { slot: &key, ..to };
        let slot = self.acquire(to.slot)?;
        let session = self.ensure_session(&slot, to, None, &Value::Null).await;
        self.health.exchanged(&to.slot.backend, to.target, &session);
        session
    }

    /// Sends one request on the slot's backend session and returns the JSON-RPC `result`. A `404` for an HTTP
    /// session re-initializes and retries exactly once. `params` of `Value::Null` are omitted.
    pub async fn request(&self, to: Destination<'_>, method: &str, params: Value) -> Result<Value, McpError> {
        self.request_relayed(to, method, params, &Relay::default()).await
    }

    /// Asks whether the backend answers on the slot's session: `ping` (MCP 2025-11-25, *Ping*) on a 2025-era
    /// session, `server/discover` on a 2026-07-28 one, which has no `ping`. The exchange counts for the health.
    pub async fn probe(&self, to: Destination<'_>) -> Result<(), McpError> {
        let session = self.session(to).await?;
        let method = if session.modern().is_some() { method::SERVER_DISCOVER } else { method::PING };
        self.request_on_slot(to, method, Value::Null, &Relay::default()).await.map(drop)
    }

    /// [`request`](Self::request), relaying the backend's notifications about it.
    pub async fn request_relayed(
        &self,
        to: Destination<'_>,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<Value, McpError> {
        self.request_raw(to, method, params, relay).await.map(|result| result.to_value())
    }

    /// [`request_relayed`](Self::request_relayed), returning the `result` as the backend's text, for a caller that
    /// passes it on without looking inside (no tree is built). With tracing on, the request is one CLIENT span
    /// whose context goes to the backend in `params._meta`.
    pub async fn request_raw(
        &self,
        to: Destination<'_>,
        method: &str,
        mut params: Value,
        relay: &Relay,
    ) -> Result<RawJson, McpError> {
        let Some(tracer) = &self.tracer else {
            return self.request_on_slot(to, method, params, relay).await;
        };
        let span = tracer.client_span(&ClientRequest { method, params: &params, peer: to.target.peer() });
        span.inject(&mut params);
        let traced = to.context.traced(&span);
        let answer = self.request_on_slot(Destination { context: &traced, ..to }, method, params, relay).await;
        // The span reads inside a result (`isError`, the outcome): a tree, only when traces are on.
        match &answer {
            Ok(result) => span.end(Ok(&result.to_value())),
            Err(error) => span.end(Err(error.call_failure())),
        }
        answer
    }

    async fn request_on_slot(
        &self,
        to: Destination<'_>,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<RawJson, McpError> {
        let Destination { slot: key, target, context } = to;
        let started = Instant::now();
        // Only the router calls tools, and only by names its catalog resolved: a bounded label.
        let tool = (method == method::TOOLS_CALL).then(|| params.get("name").and_then(Value::as_str)).flatten();
        let tool = tool.map(|name| self.metrics.name(name));
        let params = (!params.is_null()).then_some(&params);
        let answer = self.send_with_retry(target, Call { key, method, params, relay, context }).await;
        self.health.exchanged(&key.backend, target, &answer);
        let error = match &answer {
            Ok(result) => ErrorType::of_result_text(result.get()),
            Err(error) => error.error_type(),
        };
        self.metrics.observe_client(&key.backend, method, tool.as_ref(), error, started.elapsed());
        answer
    }

    /// Sends `call` on its slot's session, retrying at most once as [`decide`] says.
    async fn send_with_retry(&self, target: &BackendTarget, call: Call<'_>) -> Result<RawJson, McpError> {
        let Call { key, method, params, relay, context } = call;
        let key = &*effective_key(key, target);
        let to = Destination { slot: key, target, context };
        let capabilities = relay.session_capabilities();
        let slot = self.acquire(key)?;
        let mut session = self.ensure_session(&slot, to, None, capabilities).await?;
        if standalone::wanted(capabilities) || method == method::RESOURCES_SUBSCRIBE || relay.wants_standalone_stream()
        {
            self.sessions.keep_standalone(&slot.background, key, &session, capabilities).await;
        }
        let mut retried = false;
        loop {
            if let Some(answer) = self.sessions.answer_locally(&slot.background, key, &session, method, params).await {
                return answer;
            }
            if let Some(span) = context.span() {
                span.session(session.id(), session.version());
            }
            let call = Call { key, method, params, relay, context };
            let error = match self.sessions.send(&session, target, call).await {
                Ok(result) if method == method::TOOLS_LIST && session.modern().is_some() => {
                    // Learning the tools' headers edits the list: a tree (tools/list is not a per-call path).
                    let mut result = result.to_value();
                    self.sessions.learn_tools(&key.backend, &mut result);
                    return Ok(RawJson::of(&result));
                }
                Ok(result) => return Ok(result),
                Err(error) => error,
            };
            let Decision { forget_era, then } = decide(&key.backend, method, error, retried);
            if forget_era {
                self.sessions.forget_era(&key.backend, &session);
            }
            let retry = then?;
            if retry == Retry::SameSessionAfterListing {
                Box::pin(self.list_tools(to)).await?;
            }
            retried = true;
            if let Some(span) = context.span() {
                span.retry(if retry == Retry::NewSession { "session_ended" } else { "resent" });
            }
            if retry == Retry::NewSession {
                session = self.ensure_session(&slot, to, Some(&session), capabilities).await?;
            }
        }
    }

    /// All of the backend's tools, following `nextCursor` within [`MAX_TOOL_PAGES`] and [`MAX_TOOLS`].
    pub async fn list_tools(&self, to: Destination<'_>) -> Result<Vec<Value>, McpError> {
        self.list_all(to, method::TOOLS_LIST, "tools").await
    }

    /// Every item of a paginated list method (`tools/list` → `tools`, `prompts/list` → `prompts`, …), following
    /// `nextCursor` within [`MAX_TOOL_PAGES`] pages and [`MAX_TOOLS`] items.
    pub async fn list_all(&self, to: Destination<'_>, method: &str, field: &str) -> Result<Vec<Value>, McpError> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor.take().map_or(Value::Null, |cursor| json!({ "cursor": cursor }));
            let mut page = self.request(to, method, params).await?;
            let Some(Value::Array(listed)) = page.get_mut(field).map(Value::take) else {
                return Err(McpError::AfterDelivery {
                    cause: AfterDeliveryCause::Malformed,
                    reason: format!("{method} answered without a `{field}` array").into(),
                });
            };
            if items.len() + listed.len() > MAX_TOOLS {
                return Err(McpError::AfterDelivery {
                    cause: AfterDeliveryCause::Malformed,
                    reason: format!("the backend lists more than {MAX_TOOLS} {field}").into(),
                });
            }
            items.extend(listed);
            match page.get_mut("nextCursor").map(Value::take) {
                Some(next @ Value::String(_)) => cursor = Some(next),
                _ => return Ok(items),
            }
        }
        Err(McpError::AfterDelivery {
            cause: AfterDeliveryCause::Malformed,
            reason: format!("{method} did not end within {MAX_TOOL_PAGES} pages").into(),
        })
    }

    /// Drops every backend session of one agent session and ends them at the backends (best effort, in the
    /// background: the agent does not wait for backends to acknowledge; a process still serving a call of the
    /// session stops when that call ends).
    pub fn forget_agent_session(&self, agent_session: &SessionHolder) {
        let ender = self.sessions.ender();
        for slot in self.table.remove_holder(agent_session) {
            if let Some(session) = slot.take_session() {
                ender.end(session);
            }
        }
    }

    /// Ends every session of `backend`, whose configuration was removed or replaced: its slots leave the table at
    /// once (the next call starts a new session), and each session ends — an HTTP `DELETE`, a process stopped, a
    /// stream closed — as soon as the calls running on it have ended; those calls are not disturbed.
    pub fn retire_backend(&self, backend: &str) {
        // A replaced backend may be another server: its era is asked again, its tools' headers learnt again.
        self.sessions.retire(backend);
        for slot in self.table.remove_backend(backend) {
            let ender = self.sessions.ender();
            tokio::spawn(async move {
                slot.until_idle().await;
                if let Some(session) = slot.take_session() {
                    ender.end(session);
                }
            });
        }
    }

    /// Changes the table's per-owner share and the global stdio process cap (a configuration reload); sessions
    /// and processes already live above a lowered bound are not ended for it.
    pub fn set_limits(&self, max_sessions_per_owner: usize, max_stdio_processes: usize) {
        self.table.set_per_owner(max_sessions_per_owner);
        self.sessions.set_process_cap(max_stdio_processes);
    }

    /// How many (agent session, backend) slots the table holds (for [`crate::backend::testing`]).
    pub(crate) fn cached_sessions(&self) -> usize {
        self.table.len()
    }

    /// What the exchanges showed of each backend's health.
    pub fn health(&self) -> &HealthBoard {
        &self.health
    }

    /// Live sessions and processes per backend; a backend with neither is absent.
    pub fn census(&self) -> HashMap<Arc<str>, BackendCensus> {
        let mut census: HashMap<Arc<str>, BackendCensus> = HashMap::new();
        for (backend, sessions) in self.table.live_sessions() {
            census.entry(backend).or_default().sessions = sessions;
        }
        for (backend, processes) in self.sessions.live_processes() {
            census.entry(backend).or_default().processes = processes;
        }
        census
    }

    /// Receives what backends send agents' backend sessions outside calls (the standalone streams of HTTP
    /// sessions; a stdio process's or SSE stream's messages while no call is in flight). One subscriber at a
    /// time; subscribing again replaces it. Without a subscriber no standalone stream is opened.
    pub fn subscribe_session_messages(&self) -> mpsc::UnboundedReceiver<SessionMessage> {
        self.sessions.subscribers().subscribe_session_messages()
    }

    /// Receives every `notifications/*/list_changed` any backend sends on any exchange. One subscriber at a
    /// time; subscribing again replaces it.
    pub fn subscribe_list_changed(&self) -> mpsc::UnboundedReceiver<ListChanged> {
        self.sessions.subscribers().subscribe_list_changed()
    }

    fn acquire(&self, key: &SlotKey) -> Result<SlotGuard, McpError> {
        let (slot, evicted) = self.table.acquire(key).map_err(|full| McpError::NotDelivered {
            cause: NotDeliveredCause::NoRoom,
            reason: match full {
                TableFull::Busy { capacity } => format!("all {capacity} backend session slots are in use").into(),
                TableFull::OwnerBusy { cap } => {
                    format!("all {cap} backend session slots this caller may hold are in use").into()
                }
            },
        })?;
        if let Some(session) = evicted.and_then(|evicted| evicted.take_session()) {
            self.sessions.ender().end(session);
        }
        Ok(slot)
    }

    /// Stops an idle process that counts against the `full` cap, taken from the idle slot used longest ago; false
    /// when there is none.
    fn recycle_process(&self, backend: &str, full: &Full) -> bool {
        // Dropped here, outside the table's lock: the process stops and its permit is released.
        match full {
            Full::Backend(_) => self.table.take_idle_session(|key, _| &*key.backend == backend).is_some(),
            Full::Global(_) => self.table.take_idle_session(|_, session| session.process_id().is_some()).is_some(),
        }
    }

    /// Returns the slot's session, first replacing it when it is `stale` (ended by the backend) — unless a
    /// concurrent caller already replaced it — or when it is a duplex session that ended. A handshake made for a
    /// traced request is an event of its span.
    async fn ensure_session(
        &self,
        slot: &SlotGuard,
        to: Destination<'_>,
        stale: Option<&BackendSession>,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        let Destination { slot: key, target, context } = to;
        let deadline = context.deadline();
        let not_delivered =
            |reason: &str| McpError::NotDelivered { cause: NotDeliveredCause::Handshake, reason: reason.into() };
        let mut current = timeout_at(deadline, slot.session.lock())
            .await
            .map_err(|_| not_delivered("the deadline passed while waiting for the backend handshake"))?;
        if let Some(held) = current.as_ref() {
            let replaced = stale.is_some_and(|stale| held.generation == stale.generation);
            // A reload replaced the backend, or its era verdict changed; a call still holding the older target
            // keeps what it finds.
            let outdated = held.revision < target.revision() || !self.sessions.is_current(&key.backend, held);
            if replaced || outdated || !held.is_alive() {
                *current = None;
            }
        }
        if let Some(session) = current.as_ref() {
            return Ok(session.clone());
        }
        let recycle = |full: &Full| self.recycle_process(&key.backend, full);
        // Boxed: the handshake is rare, and its future would otherwise size every call's (see `docs/decisions.md`).
        let start = self.sessions.start(key, target, context, capabilities, &recycle);
        let started = timeout_at(deadline, Box::pin(start))
            .await
            .map_err(|_| not_delivered("the deadline passed during the backend handshake"))
            .and_then(|started| started);
        if let Some(span) = context.span() {
            span.handshake(started.as_ref().map(BackendSession::version).map_err(ToString::to_string));
        }
        let mut session = started?;
        session.revision = target.revision();
        if let (Some(idle), Some(_)) = (target.idle_timeout(), session.process_id()) {
            reap_when_idle(Arc::downgrade(slot.arc()), session.generation, idle);
        }
        session.live = Some(Arc::new(self.metrics.live_session(&key.backend)));
        if let Some(ended) = session.process_ended() {
            let process = self.metrics.live_process(&key.backend);
            tokio::spawn(async move {
                ended.await;
                drop(process);
            });
        }
        *current = Some(session.clone());
        Ok(session)
    }
}
