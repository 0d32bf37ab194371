//! The client object: the bounded table of backend sessions and the calls made on them, whatever the
//! transport ([`super::transport`] dispatches).
//!
//! Rules: one backend session per (agent session, backend) slot, or one reserved slot per backend for every agent
//! when the backend's sessions are shared; concurrent first callers of a slot share one handshake; a duplex
//! session that ended is replaced for the next call only; a request is retried at most once, as [`super::retry`]
//! decides. Forgetting an agent session ends all its sessions (a `DELETE` for HTTP; the process stopped or the
//! stream closed otherwise). Retiring a backend (a reload removed or replaced it) takes all its slots out of the
//! table and ends each session once the calls running on it have ended; a session started from an older
//! configuration revision of a backend, or (2026-07-28) from an older era verdict, is replaced before a newer target
//! uses it. Every request is timed into `mcp_client_operation_duration_seconds` (handshake and retry included), and
//! a session counts as live (and its process) while any clone of it exists.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use super::era::Eras;
use super::exchange::Strays;
use super::http::{Call, delete_in_background};
use super::processes::{ProcessCounts, reap_when_idle};
use super::retry::Retry;
use super::subscriptions::Watches;
use super::table::{SessionTable, Slot, SlotGuard, TableFull};
use super::tool_headers::ToolHeaders;
use super::transport::{BackendSession, effective_key};
use super::{AfterDeliveryCause, NotDeliveredCause};
use super::{
    BackendTarget, ClientBuildError, ClientConfig, ListChanged, MAX_TOOL_PAGES, MAX_TOOLS, McpError, Relay,
    SessionMessage, SlotKey, listener,
};
use crate::backend::http_client::HttpClient;
use crate::mcp::method;
use crate::raw_json::RawJson;
use crate::telemetry::ErrorType;
use crate::telemetry::trace::{CallFailure, ClientRequest, ClientSpan};

/// The client. Cheap to share behind an `Arc`; all state is internally synchronized.
pub struct McpBackendClient {
    /// Every HTTP request to backends (Streamable HTTP and legacy SSE) goes through this one pooled client.
    pub(super) http: HttpClient,
    pub(super) table: SessionTable,
    pub(super) processes: Arc<ProcessCounts>,
    pub(super) config: ClientConfig,
    next_request_id: AtomicU64,
    pub(super) next_generation: AtomicU64,
    pub(super) subscribers: Arc<Subscribers>,
    pub(super) strays: Arc<Strays>,
    /// What is known of each backend's protocol era.
    pub(super) eras: Arc<Eras>,
    /// The `x-mcp-header` arguments of modern backends' tools.
    pub(super) tool_headers: ToolHeaders,
    /// Modern backends' list-change streams.
    pub(super) watches: Watches,
}

/// Who hears list changes and messages outside calls. Looked up when each message arrives, so a session started
/// before anyone subscribed (discovery's, at start-up) still reaches a later subscriber.
#[derive(Default)]
pub(super) struct Subscribers {
    list_changed: std::sync::Mutex<Option<mpsc::UnboundedSender<ListChanged>>>,
    session_messages: std::sync::Mutex<Option<mpsc::UnboundedSender<SessionMessage>>>,
}

impl Subscribers {
    /// Tells the subscriber (the catalog's discovery) that a backend's list changed.
    pub(super) fn announce(&self, backend: &Arc<str>, method: &str) {
        if let Some(subscriber) = lock(&self.list_changed).as_ref() {
            let _ = subscriber.send(ListChanged { backend: Arc::clone(backend), method: method.to_owned() });
        }
    }

    /// Hands a message outside calls to the subscriber (the front), if any.
    pub(super) fn deliver(&self, message: SessionMessage) {
        if let Some(subscriber) = lock(&self.session_messages).as_ref() {
            let _ = subscriber.send(message);
        }
    }

    pub(super) fn has_session_messages(&self) -> bool {
        lock(&self.session_messages).is_some()
    }

    pub(super) fn has_list_changed(&self) -> bool {
        lock(&self.list_changed).is_some()
    }
}

/// The mutex's value, poisoned or not: the client's mutexes guard values replaced or edited in one step, so a
/// panic elsewhere never leaves one half-updated.
pub(super) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl McpBackendClient {
    /// Fails only when the HTTP client cannot be built (e.g. the TLS roots cannot be loaded): the gateway then
    /// refuses to start rather than fall back to a client that would follow redirects.
    pub fn new(config: ClientConfig) -> Result<Self, ClientBuildError> {
        // It follows no redirect: backend URLs come only from configuration.
        let http = HttpClient::new().map_err(ClientBuildError)?;
        Ok(Self {
            http,
            table: SessionTable::new(config.max_sessions, config.max_sessions_per_owner),
            processes: ProcessCounts::new(config.max_stdio_processes),
            config,
            next_request_id: AtomicU64::new(1),
            next_generation: AtomicU64::new(1),
            subscribers: Arc::default(),
            strays: Arc::default(),
            eras: Arc::default(),
            tool_headers: ToolHeaders::default(),
            watches: Watches::default(),
        })
    }

    /// The slot's backend session, starting one if there is none (concurrent callers share one handshake).
    pub async fn session(&self, key: &SlotKey, target: &BackendTarget) -> Result<BackendSession, McpError> {
        let shared = effective_key(key, target);
        let key = shared.as_ref().unwrap_or(key);
        let slot = self.acquire(key)?;
        self.ensure_session(&slot, key, target, None, &Value::Null, None).await
    }

    /// Sends one request on the slot's backend session and returns the JSON-RPC `result`. A `404` for an HTTP
    /// session re-initializes and retries exactly once. `params` of `Value::Null` are omitted.
    pub async fn request(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        method: &str,
        params: Value,
    ) -> Result<Value, McpError> {
        self.request_relayed(key, target, method, params, &Relay::default()).await
    }

    /// [`request`](Self::request), relaying the backend's notifications about it.
    pub async fn request_relayed(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<Value, McpError> {
        self.request_raw(key, target, method, params, relay).await.map(|result| result.to_value())
    }

    /// [`request_relayed`](Self::request_relayed), returning the `result` as the backend's text, for a caller that
    /// passes it on without looking inside (no tree is built). With tracing on, the request is one CLIENT span
    /// whose context goes to the backend in `params._meta`.
    pub async fn request_raw(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        method: &str,
        mut params: Value,
        relay: &Relay,
    ) -> Result<RawJson, McpError> {
        let Some(tracer) = &self.config.tracer else {
            return self.request_on_slot(key, target, method, params, relay, None).await;
        };
        let span = tracer.client_span(&ClientRequest { method, params: &params, peer: target.peer() });
        span.inject(&mut params);
        let answer = self.request_on_slot(key, target, method, params, relay, Some(&span)).await;
        // The span reads inside a result (`isError`, the outcome): a tree, only when traces are on.
        match &answer {
            Ok(result) => span.end(Ok(&result.to_value())),
            Err(error) => span.end(Err(call_failure(error))),
        }
        answer
    }

    async fn request_on_slot(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        method: &str,
        params: Value,
        relay: &Relay,
        span: Option<&ClientSpan>,
    ) -> Result<RawJson, McpError> {
        let started = Instant::now();
        // Only the router calls tools, and only by names its catalog resolved: a bounded label.
        let tool = (method == method::TOOLS_CALL).then(|| params.get("name").and_then(Value::as_str)).flatten();
        let tool = tool.map(|name| self.config.metrics.name(name));
        let params = (!params.is_null()).then_some(&params);
        let answer = self.send_with_retry(target, Call { key, method, params, relay, span }).await;
        let error = match &answer {
            Ok(result) => ErrorType::of_result_text(result.get()),
            Err(error) => error.error_type(),
        };
        self.config.metrics.observe_client(&key.backend, method, tool.as_ref(), error, started.elapsed());
        answer
    }

    /// Sends `call` on its slot's session, retrying at most once as [`super::retry`] decides.
    async fn send_with_retry(&self, target: &BackendTarget, call: Call<'_>) -> Result<RawJson, McpError> {
        let Call { key, method, params, relay, span } = call;
        let shared = effective_key(key, target);
        let key = shared.as_ref().unwrap_or(key);
        let slot = self.acquire(key)?;
        let mut session = self.ensure_session(&slot, key, target, None, relay.session_capabilities(), span).await?;
        let wants_stream = listener::wanted(relay.session_capabilities()) || method == method::RESOURCES_SUBSCRIBE;
        if wants_stream && session.http_home().is_some() {
            self.listen(&slot, key, &session, relay.session_capabilities()).await;
        }
        let mut retried = false;
        loop {
            if let Some(answer) = self.answer_locally(&slot, key, &session, method, params).await {
                return answer;
            }
            if let Some(span) = span {
                span.session(session.id(), session.version());
            }
            let call = Call { key, method, params, relay, span };
            let error = match self.send(&session, target, call).await {
                Ok(result) if method == method::TOOLS_LIST && session.modern().is_some() => {
                    // Learning the tools' headers edits the list: a tree (tools/list is not a per-call path).
                    let mut result = result.to_value();
                    self.tool_headers.learn(&key.backend, &mut result);
                    return Ok(RawJson::of(&result));
                }
                Ok(result) => return Ok(result),
                Err(error) => error,
            };
            let retry = Box::pin(self.recover(key, target, &session, method, error, retried)).await?;
            retried = true;
            if let Some(span) = span {
                span.retry(if retry == Retry::NewSession { "session_ended" } else { "resent" });
            }
            if retry == Retry::NewSession {
                session =
                    self.ensure_session(&slot, key, target, Some(&session), relay.session_capabilities(), span).await?;
            }
        }
    }

    /// All of the backend's tools, following `nextCursor` within [`MAX_TOOL_PAGES`] and [`MAX_TOOLS`].
    pub async fn list_tools(&self, key: &SlotKey, target: &BackendTarget) -> Result<Vec<Value>, McpError> {
        self.list_all(key, target, method::TOOLS_LIST, "tools").await
    }

    /// Every item of a paginated list method (`tools/list` → `tools`, `prompts/list` → `prompts`, …), following
    /// `nextCursor` within [`MAX_TOOL_PAGES`] pages and [`MAX_TOOLS`] items.
    pub async fn list_all(
        &self,
        key: &SlotKey,
        target: &BackendTarget,
        method: &str,
        field: &str,
    ) -> Result<Vec<Value>, McpError> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor.take().map_or(Value::Null, |cursor| json!({ "cursor": cursor }));
            let mut page = self.request(key, target, method, params).await?;
            let Some(Value::Array(listed)) = page.get_mut(field).map(Value::take) else {
                return Err(McpError::AfterDelivery {
                    cause: AfterDeliveryCause::Malformed,
                    reason: format!("{method} answered without a `{field}` array"),
                });
            };
            if items.len() + listed.len() > MAX_TOOLS {
                return Err(McpError::AfterDelivery {
                    cause: AfterDeliveryCause::Malformed,
                    reason: format!("the backend lists more than {MAX_TOOLS} {field}"),
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
            reason: format!("{method} did not end within {MAX_TOOL_PAGES} pages"),
        })
    }

    /// Drops every backend session of one agent session and ends them at the backends (best effort, in the
    /// background: the agent does not wait for backends to acknowledge; a process still serving a call of the
    /// session stops when that call ends).
    pub fn forget_agent_session(&self, agent_session: &str) {
        for slot in self.table.remove_agent(agent_session) {
            self.end_in_background(&slot);
        }
    }

    /// Ends every session of `backend`, whose configuration was removed or replaced: its slots leave the table at
    /// once (the next call starts a new session), and each session ends — an HTTP `DELETE`, a process stopped, a
    /// stream closed — as soon as the calls running on it have ended; those calls are not disturbed.
    pub fn retire_backend(&self, backend: &str) {
        // A replaced backend may be another server: its era is asked again, its tools' headers learnt again.
        self.eras.clear(backend);
        self.tool_headers.clear(backend);
        self.watches.stop(backend);
        for slot in self.table.remove_backend(backend) {
            let http = self.http.clone();
            tokio::spawn(async move {
                slot.until_idle().await;
                end(&http, &slot);
            });
        }
    }

    /// Changes the table's per-owner share and the global stdio process cap (a configuration reload); sessions
    /// and processes already live above a lowered bound are not ended for it.
    pub fn set_limits(&self, max_sessions_per_owner: usize, max_stdio_processes: usize) {
        self.table.set_per_owner(max_sessions_per_owner);
        self.processes.set_global_cap(max_stdio_processes);
    }

    /// How many (agent session, backend) slots the table holds.
    pub fn cached_sessions(&self) -> usize {
        self.table.len()
    }

    fn acquire(&self, key: &SlotKey) -> Result<SlotGuard, McpError> {
        let (slot, evicted) = self.table.acquire(key).map_err(|full| McpError::NotDelivered {
            cause: NotDeliveredCause::NoRoom,
            reason: match full {
                TableFull::Busy { capacity } => format!("all {capacity} backend session slots are in use"),
                TableFull::OwnerBusy { cap } => {
                    format!("all {cap} backend session slots this caller may hold are in use")
                }
            },
        })?;
        if let Some(evicted) = evicted {
            self.end_in_background(&evicted);
        }
        Ok(slot)
    }

    fn end_in_background(&self, slot: &Slot) {
        end(&self.http, slot);
    }

    /// Returns the slot's session, first replacing it when it is `stale` (ended by the backend) — unless a
    /// concurrent caller already replaced it — or when it is a duplex session that ended. A handshake made for a
    /// traced request is an event of its `span`.
    async fn ensure_session(
        &self,
        slot: &SlotGuard,
        key: &SlotKey,
        target: &BackendTarget,
        stale: Option<&BackendSession>,
        capabilities: &Value,
        span: Option<&ClientSpan>,
    ) -> Result<BackendSession, McpError> {
        let deadline = target.deadline();
        let not_delivered =
            |reason: &str| McpError::NotDelivered { cause: NotDeliveredCause::Handshake, reason: reason.into() };
        let mut current = timeout_at(deadline, slot.session.lock())
            .await
            .map_err(|_| not_delivered("the deadline passed while waiting for the backend handshake"))?;
        if let Some(held) = current.as_ref() {
            let replaced = stale.is_some_and(|stale| held.generation == stale.generation);
            // A reload replaced the backend, or its era verdict changed; a call still holding the older target
            // keeps what it finds.
            let outdated = held.revision < target.revision()
                || held.modern().is_some_and(|modern| !self.eras.is_current(&key.backend, modern.epoch));
            if replaced || outdated || !held.is_alive() {
                *current = None;
            }
        }
        if let Some(session) = current.as_ref() {
            return Ok(session.clone());
        }
        // Boxed: the handshake is rare, and its future would otherwise size every call's (see `docs/decisions.md`).
        let started = timeout_at(deadline, Box::pin(self.start_session(key, target, capabilities)))
            .await
            .map_err(|_| not_delivered("the deadline passed during the backend handshake"))
            .and_then(|started| started);
        if let Some(span) = span {
            span.handshake(started.as_ref().map(BackendSession::version).map_err(ToString::to_string));
        }
        let mut session = started?;
        session.revision = target.revision();
        if let (Some(idle), Some(_)) = (target.idle_timeout(), session.process_id()) {
            reap_when_idle(Arc::downgrade(slot.arc()), session.generation, idle);
        }
        self.watch_lists(key, &session);
        let mut session = session;
        let live = self.config.metrics.live_session(&key.backend, session.process_id().is_some());
        session.live = Some(Arc::new(live));
        *current = Some(session.clone());
        Ok(session)
    }

    /// Receives what backends send agents' backend sessions outside calls (the standalone streams of HTTP
    /// sessions; a stdio process's or SSE stream's messages while no call is in flight). One subscriber at a
    /// time; subscribing again replaces it. Without a subscriber no standalone stream is opened.
    pub fn subscribe_session_messages(&self) -> mpsc::UnboundedReceiver<SessionMessage> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *lock(&self.subscribers.session_messages) = Some(sender);
        receiver
    }

    /// Keeps a listener on an HTTP `session`'s standalone stream (see [`listener`]). A new listener is waited for
    /// (up to [`listener::OPEN_WAIT`]) until its stream is open, so that what the backend sends there while
    /// serving the request about to go out is not lost.
    async fn listen(&self, slot: &Slot, key: &SlotKey, session: &BackendSession, capabilities: &Value) {
        if !self.subscribers.has_session_messages() {
            return;
        }
        let mut opened = None;
        slot.ensure_listener(session.generation, || {
            let context = listener::Context {
                http: self.http.clone(),
                strays: Arc::clone(&self.strays),
                subscribers: Arc::clone(&self.subscribers),
                limit: self.config.max_exchange_bytes,
            };
            let (handle, ready) = listener::spawn(context, session.clone(), key.clone(), capabilities.clone());
            opened = Some(ready);
            handle
        });
        if let Some(ready) = opened {
            let _ = tokio::time::timeout(listener::OPEN_WAIT, ready).await;
        }
    }

    /// Receives every `notifications/*/list_changed` any backend sends on any exchange. One subscriber at a
    /// time; subscribing again replaces it.
    pub fn subscribe_list_changed(&self) -> mpsc::UnboundedReceiver<ListChanged> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *lock(&self.subscribers.list_changed) = Some(sender);
        receiver
    }

    /// Request ids are the client's own, unique across all its backend sessions; agents' ids never reach a
    /// backend.
    pub(super) fn next_id(&self) -> Value {
        Value::from(self.next_request_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// Ends the slot's session: an HTTP session with a `DELETE`; a duplex one by dropping it (which stops its process
/// or closes its stream once no call uses it).
fn end(http: &HttpClient, slot: &Slot) {
    if let Some(session) = slot.take_session() {
        delete_in_background(http, &session);
    }
}

/// How a failed backend request reads on its CLIENT span: the JSON-RPC code, the HTTP status, or the error class
/// (`not_delivered`, `timeout`, `after_delivery`, `cancelled`, `authorization_required`).
fn call_failure(error: &McpError) -> CallFailure {
    let error_type = match error {
        McpError::Rpc { code, message, .. } => return CallFailure::rpc(*code, message),
        McpError::HttpStatus { status, .. } => status.to_string(),
        McpError::NotDelivered { .. } => "not_delivered".into(),
        McpError::AfterDelivery { cause: AfterDeliveryCause::Deadline, .. } => "timeout".into(),
        McpError::AfterDelivery { .. } => "after_delivery".into(),
        McpError::Cancelled => "cancelled".into(),
        McpError::AuthorizationRequired { .. } => "authorization_required".into(),
    };
    CallFailure::new(error_type, error.to_string())
}
