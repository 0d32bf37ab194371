//! The agent-facing MCP server: Streamable HTTP, protocol 2025-11-25, also accepting 2025-06-18 and 2025-03-26
//! clients (design §3; MCP transports §"Streamable HTTP", lifecycle §"Initialization").
//!
//! Owns: the HTTP surface (`POST`/`DELETE`/`GET` on `/mcp` and `/mcp/{backend}`, `/healthz`, `/readyz`), the
//! admission checks ([`guard`]), sealed session ids ([`session`]) and the mapping of JSON-RPC messages to router
//! calls. Rules: a body that is not JSON → 400/-32700; a batch → 400 (batches were removed in 2025-06-18); a
//! message without `"jsonrpc": "2.0"` → 400/-32600; a non-`initialize` request without a session id → 400; an
//! id that is forged, expired, revoked or another principal's → 404; notifications and responses → 202 without
//! a body; `/mcp/{backend}` for an unknown backend → 404 for every method; a `DELETE` or `initialize` the
//! revocation list cannot take ([`revocations`]) → 503 with a JSON-RPC error; a malformed `Idempotency-Key`
//! header on a request → 400/-32602 (the key rules are `router::idempotency`'s). How a body is read (415, 413,
//! 408) is [`body`]'s rule, how connections are accepted and timed out [`listener`]'s. `/readyz` passes the same
//! admission checks as `/mcp` (it names the backends); `/healthz` says only "ok" and passes none.
//!
//! Must not know: backends' wire formats, backend sessions, how a tool call is executed. It hands the router
//! the caller and the method, and writes back what the router answers.

mod body;
pub mod cancels;
pub mod guard;
mod http;
pub mod listener;
pub mod pending;
pub mod replay;
pub mod revocations;
pub mod session;
pub mod standalone;
mod stream;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::mcp::jsonrpc::{self, Kind};
use crate::mcp::{ANONYMOUS, Relay, SessionMessage};
use crate::mcp::{LATEST_PROTOCOL_VERSION, SESSION_ID_HEADER, SUPPORTED_PROTOCOL_VERSIONS};
use crate::router::{CallRouter, Caller, View, idempotency};
use guard::Admission;
use revocations::{Revocations, RevokeError};
use session::{AgentSession, OpenError, Sealer, SessionRef};

/// Methods whose backend may send notifications or requests while it serves them; the agent gets SSE when one
/// arrives.
const RELAYING_METHODS: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "completion/complete"];

/// Everything the front needs to serve requests.
pub struct Front {
    pub admission: Admission,
    pub sealer: Sealer,
    pub revocations: Arc<Revocations>,
    pub router: Arc<CallRouter>,
    pub max_body: usize,
    /// How long a request's body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// The standalone `GET` streams open on this replica.
    pub streams: Arc<standalone::Streams>,
    /// Server-to-client requests relayed to agents, waiting for their answers.
    pub pending: Arc<pending::PendingRequests>,
    /// Agents' requests that are running and may be cancelled.
    pub cancels: Arc<cancels::Cancels>,
    /// Call streams kept for resumption with `Last-Event-ID`.
    pub replays: Arc<replay::Replays>,
}

/// The HTTP application.
pub fn app(front: Arc<Front>) -> Router {
    Router::new()
        .route("/mcp", post(post_all).delete(delete_session).get(get_all))
        .route("/mcp/{backend}", post(post_one).delete(delete_one).get(get_one))
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(readyz))
        .with_state(front)
}

/// The agent's address, when the server was built to record it (`ConnectInfo`); it tells anonymous agents apart
/// in the backend session table.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

fn peer_ip(peer: Peer) -> Option<IpAddr> {
    peer.map(|Extension(ConnectInfo(address))| address.ip())
}

async fn post_all(State(front): State<Arc<Front>>, peer: Peer, headers: HeaderMap, body: Body) -> Response {
    front.serve_post(None, peer_ip(peer), &headers, body).await
}

async fn post_one(
    State(front): State<Arc<Front>>,
    Path(backend): Path<String>,
    peer: Peer,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !front.router.has_backend(&backend) {
        return http::error(StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such backend");
    }
    front.serve_post(Some(backend), peer_ip(peer), &headers, body).await
}

async fn get_all(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    front.open_standalone(None, &headers)
}

async fn get_one(State(front): State<Arc<Front>>, Path(backend): Path<String>, headers: HeaderMap) -> Response {
    if !front.router.has_backend(&backend) {
        return http::error(StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such backend");
    }
    front.open_standalone(Some(backend), &headers)
}

async fn delete_one(State(front): State<Arc<Front>>, Path(backend): Path<String>, headers: HeaderMap) -> Response {
    if !front.router.has_backend(&backend) {
        return http::error(StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such backend");
    }
    delete_session(State(front), headers).await
}

async fn delete_session(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = front.admission.check(&headers) {
        return http::error(refusal.status(), None, jsonrpc::INVALID_REQUEST, &refusal.message());
    }
    match front.open_session(&headers) {
        Ok(session) => {
            let expires_at = front.sealer.expires_at(&session);
            if let Err(refused) = front.revocations.revoke(session.id, expires_at, now_unix()).await {
                return revocation_refused(None, &format!("the session was not deleted: {refused}"), &refused);
            }
            front.router.forget_session(&session.id.to_string());
            StatusCode::OK.into_response()
        }
        Err(failure) => failure.response(),
    }
}

/// 503 with a JSON-RPC error: the revocation list cannot take more now (`Retry-After` says when it can) or its
/// log cannot be written.
fn revocation_refused(id: Option<&Value>, text: &str, refused: &RevokeError) -> Response {
    let mut response = http::error(StatusCode::SERVICE_UNAVAILABLE, id, jsonrpc::INTERNAL_ERROR, text);
    if let RevokeError::Full { retry_after, .. } = refused {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(*retry_after));
    }
    response
}

async fn readyz(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = front.admission.check(&headers) {
        return http::error(refusal.status(), None, jsonrpc::INVALID_REQUEST, &refusal.message());
    }
    let report = front.router.readiness().await;
    let status = if report.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    http::json(status, &report.detail)
}

/// Why a request's session could not be used.
enum SessionFailure {
    Missing,
    Unknown(&'static str),
}

impl SessionFailure {
    fn response(&self) -> Response {
        match self {
            SessionFailure::Missing => http::error(
                StatusCode::BAD_REQUEST,
                None,
                jsonrpc::INVALID_REQUEST,
                "missing MCP-Session-Id header: send `initialize` first",
            ),
            SessionFailure::Unknown(why) => {
                http::error(StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, &format!("session {why}"))
            }
        }
    }
}

/// Whether the agent takes SSE answers (MCP clients must accept both; a client that did not say so gets JSON).
fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers.get_all(axum::http::header::ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|accept| accept.split(',').any(|kind| kind.trim().starts_with("text/event-stream")))
    })
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or_default()
}

impl Front {
    /// Delivers what a backend sent on its standalone stream to the agent's standalone stream. With none open,
    /// the message is dropped (a request then fails at once at the backend instead of waiting).
    pub fn deliver_session_message(&self, message: SessionMessage) {
        if self.streams.has(&message.agent_session)
            && let Some(prepared) = self.pending.prepare(&message.agent_session, message.message)
        {
            self.streams.deliver(&message.agent_session, prepared);
        }
    }

    fn open_standalone(&self, backend: Option<String>, headers: &HeaderMap) -> Response {
        if let Err(refusal) = self.admission.check(headers) {
            return http::error(refusal.status(), None, jsonrpc::INVALID_REQUEST, &refusal.message());
        }
        let session = match self.open_session(headers) {
            Ok(session) => session.id.to_string(),
            Err(failure) => return failure.response(),
        };
        let Some(last_event_id) = headers.get("last-event-id").and_then(|id| id.to_str().ok()) else {
            return standalone::open(&self.streams, session, backend, self.router.tool_changes());
        };
        match self.replays.resume(&session, last_event_id) {
            Some(rest) => stream::sse_body(rest),
            None => http::error(StatusCode::NOT_FOUND, None, jsonrpc::INVALID_REQUEST, "no such stream to resume"),
        }
    }

    /// `backend`: the backend of `/mcp/{backend}`, `None` for `/mcp`.
    async fn serve_post(
        self: &Arc<Self>,
        backend: Option<String>,
        peer: Option<IpAddr>,
        headers: &HeaderMap,
        body: Body,
    ) -> Response {
        if let Err(refusal) = self.admission.check(headers) {
            return http::error(refusal.status(), None, jsonrpc::INVALID_REQUEST, &refusal.message());
        }
        let limits = body::BodyLimits { max_body: self.max_body, body_timeout: self.body_timeout };
        let body = match body::read_json(headers, body, limits).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let message: Value = match serde_json::from_slice(&body) {
            Ok(message) => message,
            Err(error) => {
                let text = format!("the body is not valid JSON: {error}");
                return http::error(StatusCode::BAD_REQUEST, None, jsonrpc::PARSE_ERROR, &text);
            }
        };
        if message.is_array() {
            let text = "JSON-RPC batches are not supported (removed in MCP 2025-06-18); send one message per POST";
            return http::error(StatusCode::BAD_REQUEST, None, jsonrpc::INVALID_REQUEST, text);
        }
        if !jsonrpc::declares_version(&message) {
            let text = "not a JSON-RPC 2.0 message: it must carry \"jsonrpc\": \"2.0\"";
            let id = message.get("id").filter(|id| jsonrpc::is_valid_id(id));
            return http::error(StatusCode::BAD_REQUEST, id, jsonrpc::INVALID_REQUEST, text);
        }
        match jsonrpc::kind(&message) {
            Kind::Request { id, method: "initialize" } => self.initialize(id, &message),
            Kind::Invalid => {
                let text = "not a JSON-RPC 2.0 request, notification or response";
                http::error(StatusCode::BAD_REQUEST, None, jsonrpc::INVALID_REQUEST, text)
            }
            kind => match self.open_session(headers) {
                Ok(session) => self.serve_in_session(&session, backend, peer, kind, &message, headers).await,
                Err(failure) => failure.response(),
            },
        }
    }

    async fn serve_in_session(
        self: &Arc<Self>,
        session: &AgentSession,
        backend: Option<String>,
        peer: Option<IpAddr>,
        kind: Kind<'_>,
        message: &Value,
        headers: &HeaderMap,
    ) -> Response {
        let (id, method) = match kind {
            Kind::Request { id, method } => (id, method),
            Kind::Response { .. } => {
                // An answer to a relayed server-to-client request; an answer nobody waits for is dropped.
                self.pending.answer(&session.id.to_string(), message.clone());
                return StatusCode::ACCEPTED.into_response();
            }
            Kind::Notification { method: "notifications/cancelled" } => {
                if let Some(id) = message.pointer("/params/requestId") {
                    self.cancels.cancel(&session.id.to_string(), id);
                }
                return StatusCode::ACCEPTED.into_response();
            }
            _ => return StatusCode::ACCEPTED.into_response(),
        };
        let key_headers = headers.get_all(idempotency::IDEMPOTENCY_HEADER).iter().map(HeaderValue::as_bytes);
        let idempotency_key = match idempotency::from_header(key_headers) {
            Ok(key) => key,
            Err(refusal) => {
                let text = refusal.to_string();
                return http::error(StatusCode::BAD_REQUEST, Some(id), jsonrpc::INVALID_PARAMS, &text);
            }
        };
        let caller = Caller {
            session: session.id.to_string(),
            principal: session.principal.clone(),
            request_id: id.clone(),
            idempotency_key,
            peer,
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let cancellable = self.cancels.register(&caller.session, id);
        if !RELAYING_METHODS.contains(&method) {
            let relay = Relay::new(session.capabilities.clone(), None).cancellable(Arc::clone(&cancellable.signal));
            let reply = self.reply(&caller, backend.as_deref(), id, method, params, &relay).await;
            return http::json(StatusCode::OK, &reply);
        }
        // The call runs on its own task, so an agent that goes away (a disconnect is not a cancel) neither stops
        // it half-way nor leaves its ledger claim unsettled.
        let (sink, messages) = mpsc::unbounded_channel();
        let streaming = accepts_event_stream(headers);
        let relay = Relay::new(session.capabilities.clone(), streaming.then_some(sink))
            .cancellable(Arc::clone(&cancellable.signal));
        let (front, owned_id, owned_method) = (Arc::clone(self), id.clone(), method.to_owned());
        let session_key = caller.session.clone();
        let call = tokio::spawn(async move {
            let _cancellable = cancellable;
            front.reply(&caller, backend.as_deref(), &owned_id, &owned_method, params, &relay).await
        });
        if !streaming {
            let reply = call.await.unwrap_or_else(|error| stream::internal_error(&error));
            return http::json(StatusCode::OK, &reply);
        }
        let outbox = stream::Outbox {
            messages,
            pending: Arc::clone(&self.pending),
            replays: Arc::clone(&self.replays),
            session: session_key,
        };
        stream::answer(call, outbox).await
    }

    /// The JSON-RPC response to one request.
    async fn reply(
        &self,
        caller: &Caller,
        backend: Option<&str>,
        id: &Value,
        method: &str,
        params: Value,
        relay: &Relay,
    ) -> Value {
        let view = backend.map_or(View::All, View::Backend);
        match self.router.handle(caller, view, method, params, relay).await {
            Ok(result) => jsonrpc::result(id, result),
            Err(failure) => failure.into_message(id),
        }
    }

    fn initialize(&self, id: &Value, message: &Value) -> Response {
        if let Err(full) = self.revocations.room(now_unix()) {
            return revocation_refused(Some(id), &format!("cannot start a session: {full}"), &full);
        }
        let params = message.get("params");
        let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str).unwrap_or_default();
        let version =
            SUPPORTED_PROTOCOL_VERSIONS.into_iter().find(|v| *v == requested).unwrap_or(LATEST_PROTOCOL_VERSION);
        let Ok(session_ref) = SessionRef::random() else {
            let text = "the system's random source failed; no session could be created";
            return http::error(StatusCode::INTERNAL_SERVER_ERROR, Some(id), jsonrpc::INTERNAL_ERROR, text);
        };
        let session = AgentSession {
            id: session_ref,
            principal: ANONYMOUS.to_owned(),
            version,
            issued_at: now_unix(),
            capabilities: params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_else(|| json!({})),
        };
        let result = json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "prompts": {"listChanged": false},
                "resources": {"subscribe": true, "listChanged": false},
                "completions": {},
                "logging": {},
            },
            "serverInfo": {"name": "switchyard", "title": "Switchyard MCP gateway", "version": env!("CARGO_PKG_VERSION")},
            "instructions": self.router.instructions(),
        });
        let token = match self.sealer.seal(&session) {
            Ok(token) => token,
            Err(error) => {
                let text = format!("cannot start a session: {error}");
                return http::error(StatusCode::BAD_REQUEST, Some(id), jsonrpc::INVALID_PARAMS, &text);
            }
        };
        let mut response = http::json(StatusCode::OK, &jsonrpc::result(id, result));
        // A sealed token is base64url and '.', always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&token) {
            response.headers_mut().insert(SESSION_ID_HEADER, value);
        }
        response
    }

    fn open_session(&self, headers: &HeaderMap) -> Result<AgentSession, SessionFailure> {
        let token = headers.get(SESSION_ID_HEADER).ok_or(SessionFailure::Missing)?;
        let token = token.to_str().map_err(|_| SessionFailure::Unknown("id is malformed"))?;
        let now = now_unix();
        let session = self.sealer.open(token, now).map_err(|error| {
            SessionFailure::Unknown(match error {
                OpenError::Malformed => "id is malformed",
                OpenError::Forged => "id was not issued by this gateway",
                OpenError::Expired => "has expired; initialize a new one",
            })
        })?;
        if !session.belongs_to(ANONYMOUS) {
            return Err(SessionFailure::Unknown("belongs to another principal"));
        }
        if self.revocations.is_revoked(&session.id, now) {
            return Err(SessionFailure::Unknown("was deleted; initialize a new one"));
        }
        Ok(session)
    }
}
