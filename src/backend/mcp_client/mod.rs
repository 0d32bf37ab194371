//! The gateway's client to backend MCP servers over Streamable HTTP, protocol 2025-11-25 (design §2).
//!
//! Owns: the handshake (`initialize` offering [`LATEST_PROTOCOL_VERSION`], then `notifications/initialized`),
//! session-id validation (exactly one header, 1–1024 visible ASCII), the headers every later request carries,
//! the reaction to `404` (drop the session, re-initialize, retry exactly once — the backend did not process the
//! request, so the retry cannot run a tool twice), paginated `tools/list` within bounds, and the bounded table of
//! backend sessions per (agent session, backend) pair, shared fairly between owners ([`table`]). The wire exchange
//! itself lives in [`exchange`]; which HTTP error statuses prove a refusal is decided in [`refusal`].
//!
//! Must not know: agents' HTTP requests, tool names as agents see them, the ledger. Its one promise to the layers
//! above is the error class: only [`McpError::NotDelivered`] proves that the backend did not process a request
//! (it never reached the backend, or the backend refused it with a status that proves so).

mod exchange;
mod listener;
mod refusal;
mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use exchange::{Exchange, ExchangeError, Strays};
pub(crate) use exchange::{Listener, answer_server_request};
pub use exchange::{MAX_RESUMPTIONS, MAX_RETRY_WAIT};
pub(crate) use exchange::{classify_send_error, error_chain};
pub use refusal::Refusal;
use table::{SessionTable, Slot, TableFull};

use crate::mcp::jsonrpc;
use crate::mcp::method;
pub use crate::mcp::{
    LATEST_PROTOCOL_VERSION, PROTOCOL_VERSION_HEADER, Relay, RelayMessage, SESSION_ID_HEADER,
    SUPPORTED_PROTOCOL_VERSIONS, SessionMessage, is_supported_version,
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
const MAX_SESSION_ID_LEN: usize = 1024;
/// Best-effort `DELETE`s of forgotten sessions get this long.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request to a backend failed. Callers branch on the class.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The backend did not process the request: connecting failed, the handshake before it did, or the backend
    /// refused it with a status that proves it was not processed ([`Refusal`]; the reason names the status).
    /// Only this error proves that a tool did not run.
    #[error("the backend did not process the request: {reason}")]
    NotDelivered { reason: String },
    /// The backend received the request, or may have, but its answer is unusable. The outcome is unknown.
    #[error("the backend may have received the request, but its answer was unusable: {reason}")]
    AfterDelivery { reason: String },
    /// The backend answered with an HTTP error status that does not prove a refusal (see [`Refusal`]; nor the
    /// `404` of an ended session). The outcome is unknown.
    #[error("the backend answered HTTP {status}: {body}")]
    HttpStatus { status: u16, body: String },
    /// The agent cancelled the request after it was sent; the backend was told. It may have partly run.
    #[error("the request was cancelled by the agent after it was sent")]
    Cancelled,
    /// The backend answered with a JSON-RPC error.
    #[error("the backend answered with error {code}: {message}")]
    Rpc { code: i64, message: String, data: Option<Value> },
}

impl McpError {
    /// True only when the backend provably did not process the request.
    pub fn proves_not_delivered(&self) -> bool {
        matches!(self, McpError::NotDelivered { .. })
    }
}

/// Where and how to send one exchange: the URL, the backend's credential (marked sensitive, so it is never
/// printed), extra headers (such as a per-call intent token), and the absolute deadline of the exchange.
#[derive(Debug, Clone)]
pub struct BackendEndpoint {
    url: Url,
    credential: Option<(HeaderName, HeaderValue)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// How long an exchange may take, from when its endpoint is made ([`BackendEndpoint::renewed`]).
    timeout: Duration,
    deadline: Instant,
}

impl BackendEndpoint {
    /// An endpoint whose deadline is `timeout` from now.
    pub fn new(url: Url, timeout: Duration) -> Self {
        Self { url, credential: None, headers: Vec::new(), timeout, deadline: Instant::now() + timeout }
    }

    /// The same endpoint for a new exchange: its deadline is the timeout from now. Callers keep one endpoint per
    /// backend as a template and renew it for every call.
    pub fn renewed(&self) -> Self {
        Self { deadline: Instant::now() + self.timeout, ..self.clone() }
    }

    pub fn with_credential(mut self, name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        self.credential = Some((name, value));
        self
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// One live backend session.
#[derive(Debug, Clone)]
pub struct BackendSession {
    id: Option<Arc<str>>,
    version: &'static str,
    /// The backend's `ServerCapabilities` from its `InitializeResult`.
    capabilities: Arc<Value>,
    /// Distinguishes this session from the one that replaces it, even when a backend reuses ids.
    generation: u64,
    /// Where a `DELETE` goes when the session is forgotten (without per-call headers).
    home: Arc<BackendEndpoint>,
}

impl BackendSession {
    /// The backend-assigned `MCP-Session-Id`, if it assigned one.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The backend's declared server capabilities.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }
}

/// Identifies one slot of the session table: the (agent session, backend) pair, and the owner the slot counts
/// against for fairness. The owner is not part of the slot's identity (equality and hashing ignore it): an agent
/// session may come back from another address, and must still find its backend session.
#[derive(Debug, Clone)]
pub struct SlotKey {
    pub agent_session: Arc<str>,
    pub backend: Arc<str>,
    /// Who the slot counts against: the principal, or `anonymous@<address>` (see the router's `Caller`).
    pub owner: Arc<str>,
}

impl SlotKey {
    /// A slot owned by its own agent session (callers that know better say so with [`SlotKey::owned_by`]).
    pub fn new(agent_session: &str, backend: &str) -> Self {
        let agent_session: Arc<str> = agent_session.into();
        Self { owner: Arc::clone(&agent_session), agent_session, backend: backend.into() }
    }

    pub fn owned_by(mut self, owner: &str) -> Self {
        self.owner = owner.into();
        self
    }
}

impl PartialEq for SlotKey {
    fn eq(&self, other: &Self) -> bool {
        self.agent_session == other.agent_session && self.backend == other.backend
    }
}

impl Eq for SlotKey {}

impl std::hash::Hash for SlotKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.agent_session.hash(state);
        self.backend.hash(state);
    }
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bound of the (agent session, backend) table.
    pub max_sessions: usize,
    /// How many of the table's slots one owner (a [`SlotKey::owner`]) may hold.
    pub max_sessions_per_owner: usize,
    /// Bytes one exchange may read.
    pub max_exchange_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_owner: DEFAULT_MAX_SESSIONS_PER_OWNER,
            max_exchange_bytes: MAX_EXCHANGE_BYTES,
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

/// One request as the caller asked for it.
struct Call<'a> {
    key: &'a SlotKey,
    method: &'a str,
    params: Option<Value>,
    relay: &'a Relay,
}

/// The backend client's HTTP stack could not be built.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot build the backend HTTP client: {0}")]
pub struct ClientBuildError(String);

/// The client. Cheap to share behind an `Arc`; all state is internally synchronized.
pub struct McpBackendClient {
    http: reqwest::Client,
    table: SessionTable,
    config: ClientConfig,
    next_request_id: AtomicU64,
    next_generation: AtomicU64,
    list_changed: std::sync::Mutex<Option<mpsc::UnboundedSender<ListChanged>>>,
    session_messages: std::sync::Mutex<Option<mpsc::UnboundedSender<SessionMessage>>>,
    strays: Arc<Strays>,
}

impl McpBackendClient {
    /// Fails only when the HTTP client cannot be built (e.g. the TLS roots cannot be loaded): the gateway then
    /// refuses to start rather than fall back to a client that would follow redirects.
    pub fn new(config: ClientConfig) -> Result<Self, ClientBuildError> {
        let http = reqwest::Client::builder()
            // Backend URLs come only from configuration; a redirect could lead anywhere (design §6).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| ClientBuildError(error.to_string()))?;
        Ok(Self {
            http,
            table: SessionTable::new(config.max_sessions, config.max_sessions_per_owner),
            config,
            next_request_id: AtomicU64::new(1),
            next_generation: AtomicU64::new(1),
            list_changed: std::sync::Mutex::default(),
            session_messages: std::sync::Mutex::default(),
            strays: Arc::default(),
        })
    }

    /// The slot's backend session, initializing one if there is none (concurrent callers share one handshake).
    pub async fn session(&self, key: &SlotKey, endpoint: &BackendEndpoint) -> Result<BackendSession, McpError> {
        let slot = self.acquire(key)?;
        self.ensure_session(&slot, endpoint, None, &Value::Null).await
    }

    /// Sends one request on the slot's backend session and returns the JSON-RPC `result`. A `404` for the
    /// session re-initializes and retries exactly once. `params` of `Value::Null` are omitted.
    pub async fn request(
        &self,
        key: &SlotKey,
        endpoint: &BackendEndpoint,
        method: &str,
        params: Value,
    ) -> Result<Value, McpError> {
        self.request_relayed(key, endpoint, method, params, &Relay::default()).await
    }

    /// [`request`](Self::request), relaying the backend's notifications about it.
    pub async fn request_relayed(
        &self,
        key: &SlotKey,
        endpoint: &BackendEndpoint,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Result<Value, McpError> {
        let slot = self.acquire(key)?;
        let mut session = self.ensure_session(&slot, endpoint, None, relay.capabilities()).await?;
        if listener::wanted(relay.capabilities()) || method == method::RESOURCES_SUBSCRIBE {
            self.listen(&slot, key, &session, relay.capabilities()).await;
        }
        let params = (!params.is_null()).then_some(params);
        let mut retried = false;
        loop {
            let call = Call { key, method, params: params.clone(), relay };
            match self.send(&session, endpoint, call).await {
                Err(ExchangeError::SessionGone) if !retried => {
                    tracing::info!(backend = %key.backend, "backend ended the session; re-initializing");
                    retried = true;
                    session = self.ensure_session(&slot, endpoint, Some(&session), relay.capabilities()).await?;
                }
                Err(ExchangeError::SessionGone) => {
                    return Err(McpError::NotDelivered {
                        reason: "the backend ended the freshly initialized session too (404 twice)".into(),
                    });
                }
                Err(ExchangeError::Failed(error)) => return Err(error),
                Ok(result) => return Ok(result),
            }
        }
    }

    /// All of the backend's tools, following `nextCursor` within [`MAX_TOOL_PAGES`] and [`MAX_TOOLS`].
    pub async fn list_tools(&self, key: &SlotKey, endpoint: &BackendEndpoint) -> Result<Vec<Value>, McpError> {
        self.list_all(key, endpoint, method::TOOLS_LIST, "tools").await
    }

    /// Every item of a paginated list method (`tools/list` → `tools`, `prompts/list` → `prompts`, …), following
    /// `nextCursor` within [`MAX_TOOL_PAGES`] pages and [`MAX_TOOLS`] items.
    pub async fn list_all(
        &self,
        key: &SlotKey,
        endpoint: &BackendEndpoint,
        method: &str,
        field: &str,
    ) -> Result<Vec<Value>, McpError> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = cursor.take().map_or(Value::Null, |cursor| json!({ "cursor": cursor }));
            let mut page = self.request(key, endpoint, method, params).await?;
            let Some(Value::Array(listed)) = page.get_mut(field).map(Value::take) else {
                return Err(McpError::AfterDelivery { reason: format!("{method} answered without a `{field}` array") });
            };
            if items.len() + listed.len() > MAX_TOOLS {
                return Err(McpError::AfterDelivery {
                    reason: format!("the backend lists more than {MAX_TOOLS} {field}"),
                });
            }
            items.extend(listed);
            match page.get_mut("nextCursor").map(Value::take) {
                Some(next @ Value::String(_)) => cursor = Some(next),
                _ => return Ok(items),
            }
        }
        Err(McpError::AfterDelivery { reason: format!("{method} did not end within {MAX_TOOL_PAGES} pages") })
    }

    /// Drops every backend session of one agent session and ends them at the backends (best effort, in the
    /// background: the agent does not wait for backends to acknowledge).
    pub fn forget_agent_session(&self, agent_session: &str) {
        for slot in self.table.remove_agent(agent_session) {
            self.end_in_background(&slot);
        }
    }

    /// How many (agent session, backend) slots the table holds.
    pub fn cached_sessions(&self) -> usize {
        self.table.len()
    }

    fn acquire(&self, key: &SlotKey) -> Result<table::SlotGuard, McpError> {
        let (slot, evicted) = self.table.acquire(key).map_err(|full| McpError::NotDelivered {
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
        let Some(session) = slot.take_session() else { return };
        let (Some(id), Ok(runtime)) = (session.id.clone(), tokio::runtime::Handle::try_current()) else { return };
        let http = self.http.clone();
        runtime.spawn(async move {
            let mut request = http
                .delete(session.home.url.clone())
                .header(SESSION_ID_HEADER, id.as_ref())
                .header(PROTOCOL_VERSION_HEADER, session.version)
                .timeout(DELETE_TIMEOUT);
            if let Some((name, value)) = &session.home.credential {
                request = request.header(name, value);
            }
            // The backend may refuse (405) or have forgotten the session already; neither matters.
            let _ = request.send().await;
        });
    }

    /// Returns the slot's session, first replacing it when it is `stale` (ended by the backend) — unless a
    /// concurrent caller already replaced it.
    async fn ensure_session(
        &self,
        slot: &Slot,
        endpoint: &BackendEndpoint,
        stale: Option<&BackendSession>,
        capabilities: &Value,
    ) -> Result<BackendSession, McpError> {
        let not_delivered = |reason: &str| McpError::NotDelivered { reason: reason.into() };
        let mut current = timeout_at(endpoint.deadline, slot.session.lock())
            .await
            .map_err(|_| not_delivered("the deadline passed while waiting for the backend handshake"))?;
        if let (Some(held), Some(stale)) = (current.as_ref(), stale)
            && held.generation == stale.generation
        {
            *current = None;
        }
        if let Some(session) = current.as_ref() {
            return Ok(session.clone());
        }
        let session = timeout_at(endpoint.deadline, self.handshake(endpoint, capabilities))
            .await
            .map_err(|_| not_delivered("the deadline passed during the backend handshake"))?
            .map_err(|error| McpError::NotDelivered { reason: format!("the backend handshake failed: {error}") })?;
        *current = Some(session.clone());
        Ok(session)
    }

    /// `capabilities`: the agent's declared client capabilities (`null`: none), offered as the gateway's own.
    async fn handshake(&self, endpoint: &BackendEndpoint, capabilities: &Value) -> Result<BackendSession, McpError> {
        let id = self.next_id();
        let initialize = jsonrpc::request(&id, method::INITIALIZE, Some(initialize_params(capabilities)));
        let limit = self.config.max_exchange_bytes;
        let listener = Listener::default();
        let exchange = Exchange { http: &self.http, endpoint, session: None, limit, listener, strays: None };
        let answer = exchange.call(&id, &initialize).await.map_err(handshake_error)?;
        let result = into_result(answer.message)?;
        let version = negotiated_version(&result)?;
        let session_id = session_id(&answer.headers)?;
        let session = BackendSession {
            id: session_id,
            version,
            capabilities: Arc::new(result.get("capabilities").cloned().unwrap_or_else(|| json!({}))),
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            home: Arc::new(BackendEndpoint { headers: Vec::new(), ..endpoint.clone() }),
        };
        let exchange = Exchange { session: Some(&session), ..exchange };
        exchange.deliver(&jsonrpc::notification(method::INITIALIZED, None)).await.map_err(handshake_error)?;
        Ok(session)
    }

    async fn send(
        &self,
        session: &BackendSession,
        endpoint: &BackendEndpoint,
        call: Call<'_>,
    ) -> Result<Value, ExchangeError> {
        let id = self.next_id();
        let mut params = call.params;
        let theirs = swap_progress_token(&mut params, &id);
        let message = jsonrpc::request(&id, call.method, params);
        let backend = &call.key.backend;
        let list_changed = |method: &str| self.announce_list_changed(backend, method);
        let listener = Listener {
            relay: Some(call.relay),
            progress: theirs.as_ref().map(|theirs| (&id, theirs)),
            list_changed: Some(&list_changed),
        };
        let limit = self.config.max_exchange_bytes;
        let strays = Some(&*self.strays);
        let exchange = Exchange { http: &self.http, endpoint, session: Some(session), limit, listener, strays };
        let Some(cancel) = &call.relay.cancel() else {
            return Ok(into_result(exchange.call(&id, &message).await?.message)?);
        };
        tokio::select! {
            answer = exchange.call(&id, &message) => Ok(into_result(answer?.message)?),
            () = cancel.notified() => {
                // The backend learns which of its requests to stop by its own id (utilities/cancellation).
                let params = json!({"requestId": id, "reason": "cancelled by the agent"});
                if let Err(error) = exchange.deliver(&jsonrpc::notification(method::CANCELLED, Some(params))).await {
                    tracing::warn!(?error, "could not forward a cancellation to the backend");
                }
                Err(ExchangeError::Failed(McpError::Cancelled))
            }
        }
    }

    /// Tells the subscriber (the catalog's discovery) that a backend's list changed.
    fn announce_list_changed(&self, backend: &Arc<str>, method: &str) {
        let subscriber = self.list_changed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(subscriber) = subscriber.as_ref() {
            let _ = subscriber.send(ListChanged { backend: Arc::clone(backend), method: method.to_owned() });
        }
    }

    /// Receives what backends send on the standalone streams of agents' backend sessions. One subscriber at a
    /// time; subscribing again replaces it. Without a subscriber no standalone stream is opened.
    pub fn subscribe_session_messages(&self) -> mpsc::UnboundedReceiver<SessionMessage> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self.session_messages.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(sender);
        receiver
    }

    /// Keeps a listener on `session`'s standalone stream (see [`listener`]). A new listener is waited for (up to
    /// [`listener::OPEN_WAIT`]) until its stream is open, so that what the backend sends there while serving the
    /// request about to go out is not lost.
    async fn listen(&self, slot: &Slot, key: &SlotKey, session: &BackendSession, capabilities: &Value) {
        let sink = self.session_messages.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let Some(sink) = sink else { return };
        let announce = self.list_changed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let mut opened = None;
        slot.ensure_listener(session.generation, || {
            let context = listener::Context {
                http: self.http.clone(),
                strays: Arc::clone(&self.strays),
                sink,
                announce,
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
        *self.list_changed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(sender);
        receiver
    }

    /// Request ids are the client's own, unique across all its backend sessions; agents' ids never reach a
    /// backend.
    fn next_id(&self) -> Value {
        Value::from(self.next_request_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// The `initialize` params the gateway sends on every transport; `capabilities` are the agent's declared client
/// capabilities (`null`: none), offered as the gateway's own.
pub(crate) fn initialize_params(capabilities: &Value) -> Value {
    let capabilities = if capabilities.is_object() { capabilities.clone() } else { json!({}) };
    json!({
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// Replaces the caller's `params._meta.progressToken` with `ours` (the request's own id, unique within the
/// backend session) and returns the caller's, to be restored on the way back.
pub(crate) fn swap_progress_token(params: &mut Option<Value>, ours: &Value) -> Option<Value> {
    let token = params.as_mut().and_then(|params| params.pointer_mut("/_meta/progressToken"));
    token.map(|token| std::mem::replace(token, ours.clone()))
}

fn handshake_error(error: ExchangeError) -> McpError {
    match error {
        ExchangeError::SessionGone => McpError::NotDelivered { reason: "the backend ended the new session".into() },
        ExchangeError::Failed(error) => error,
    }
}

/// The `result` of a JSON-RPC response, or its `error` as [`McpError::Rpc`].
pub(crate) fn into_result(mut message: Value) -> Result<Value, McpError> {
    if let Some(result) = message.get_mut("result") {
        return Ok(result.take());
    }
    let error = message.get("error");
    let field = |name: &str| error.and_then(|error| error.get(name));
    match field("code").and_then(Value::as_i64) {
        Some(code) => Err(McpError::Rpc {
            code,
            message: field("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
            data: field("data").cloned(),
        }),
        None => Err(McpError::AfterDelivery { reason: "the backend's response has neither result nor error".into() }),
    }
}

pub(crate) fn negotiated_version(result: &Value) -> Result<&'static str, McpError> {
    let offered = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    SUPPORTED_PROTOCOL_VERSIONS.iter().copied().find(|supported| *supported == offered).ok_or_else(|| {
        McpError::NotDelivered { reason: format!("the backend negotiated unsupported protocol version `{offered}`") }
    })
}

/// The backend's `MCP-Session-Id`: none, or exactly one header of 1–1024 visible ASCII characters.
fn session_id(headers: &reqwest::header::HeaderMap) -> Result<Option<Arc<str>>, McpError> {
    let mut values = headers.get_all(SESSION_ID_HEADER).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.get_all(SESSION_ID_HEADER).iter().count() {
            0 => Ok(None),
            n => Err(McpError::NotDelivered { reason: format!("the backend sent {n} MCP-Session-Id headers") }),
        };
    };
    let bytes = value.as_bytes();
    let visible = bytes.iter().all(|byte| (0x21..=0x7e).contains(byte));
    if bytes.is_empty() || bytes.len() > MAX_SESSION_ID_LEN || !visible {
        return Err(McpError::NotDelivered {
            reason: "the backend's MCP-Session-Id is not 1–1024 visible ASCII characters".into(),
        });
    }
    Ok(Some(String::from_utf8_lossy(bytes).into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderMap;

    #[test]
    fn session_id_must_be_one_header_of_visible_ascii() {
        let mut headers = HeaderMap::new();
        assert!(session_id(&headers).unwrap().is_none());
        headers.insert(SESSION_ID_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(session_id(&headers).unwrap().as_deref(), Some("abc-123"));
        headers.append(SESSION_ID_HEADER, HeaderValue::from_static("other"));
        assert!(session_id(&headers).unwrap_err().proves_not_delivered());
        for bad in [&b""[..], b"a b", &[b'x'; 1025][..], b"a\x80b"] {
            let mut headers = HeaderMap::new();
            headers.insert(SESSION_ID_HEADER, HeaderValue::from_bytes(bad).unwrap());
            assert!(session_id(&headers).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn rpc_errors_keep_code_message_and_data() {
        let error = into_result(json!({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":[1]}}));
        assert!(matches!(error, Err(McpError::Rpc { code: -32602, ref message, data: Some(_) }) if message == "bad"));
        assert!(matches!(into_result(json!({"id": 1})), Err(McpError::AfterDelivery { .. })));
    }
}
