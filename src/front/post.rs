//! A `POST` to the MCP endpoint: one JSON-RPC message in, its answer out (MCP 2025-11-25 transports §"Sending
//! Messages to the Server").
//!
//! Rules, in the order they are checked after admission: the body is read by [`super::body`]'s rules; it must be
//! JSON (else -32700), not a batch, and carry `"jsonrpc": "2.0"`; `initialize` needs no session (see
//! [`super::initialize`]), every other message is served in the session its id opens. Responses (to relayed
//! server-to-client requests) and notifications are 202 without a body; `notifications/cancelled` cancels the
//! named request of the same session (on a fleet, a response or cancel for a request of another replica goes
//! there, and a 2026-07-28 retry continuing another replica's call is served by it: [`super::fleet`]). A request's `Idempotency-Key` header is checked before the router sees it
//! (the key rules are `router::idempotency`'s). A request whose method may relay messages for the agent is polled
//! as a [`polled::Call`] (a task of its own only once it must outlive the handler) and answered JSON or SSE by
//! [`super::stream`]; the others are answered JSON. The message's `params` are moved to the router, not copied;
//! a backend's `tools/call` result comes back as its text and is spliced into the response ([`super::splice`]).
//! Such a request still running when a shutdown's drain runs out is answered then ([`super::cutoff`]).
//!
//! Era (a gateway serving MCP 2025-11-25 and 2026-07-28 on one endpoint): a message that names the 2026-07-28 era
//! ([`modern::is_modern`]: its `_meta` protocol version, or a 2026-07-28 `MCP-Protocol-Version`) and carries no
//! live session goes to [`super::modern`]; everything else is served here as before. An unsupported
//! `MCP-Protocol-Version` is therefore judged once the body is read (and after authentication), still before
//! anything else of the session era, which serves only its own versions.

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use super::admit::Admitted;
use super::caller::{CallerScope, Requester};
use super::error::FrontError;
use super::guard::Admission;
use super::session::AgentSession;
use super::splice::JsonRpcReply;
use super::{Front, admin, body, cutoff, http, modern, polled, stream};
use crate::mcp::Relay;
use crate::mcp::message::{Incoming, Message, Request};
use crate::mcp::method::Method;
use crate::router::{Audience, Caller, HeldElsewhere, View};
use crate::telemetry::trace::ServerRequest;

/// Whether the backend may send notifications or requests while it serves `method`; the agent gets SSE when one
/// arrives.
fn relays(method: &Method) -> bool {
    matches!(method, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead | Method::CompletionComplete)
}

/// Whether the agent takes SSE answers (MCP clients must accept both; a client that did not say so gets JSON).
pub(super) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers.get_all(axum::http::header::ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|accept| accept.split(',').any(|kind| kind.trim().starts_with("text/event-stream")))
    })
}

/// One request handed to the router: who asks (the caller holds the request's id), at which endpoint
/// (`/mcp/{backend}` or `/mcp`), its method, and the session's negotiated protocol version.
struct Routed<'a> {
    caller: &'a Caller,
    backend: Option<&'a str>,
    method: &'a Method,
    version: &'static str,
}

/// A request of an open session: the session, the admission of this request (its principal's name is the
/// session's; its groups are this request's), the backend of `/mcp/{backend}` and the agent's address.
struct InSessionRequest<'a> {
    session: AgentSession,
    admitted: &'a Admitted,
    backend: Option<String>,
    peer: Option<IpAddr>,
    audience: Audience,
}

/// One JSON-RPC message, not a batch, saying it is JSON-RPC 2.0 (both eras).
pub(super) fn well_formed(incoming: Incoming) -> Result<Message, FrontError> {
    if incoming.batch {
        return Err(FrontError::Batch);
    }
    if !incoming.declares_version {
        return Err(FrontError::NotJsonRpc { id: incoming.id().cloned() });
    }
    Ok(incoming.message)
}

impl Front {
    /// `backend`: the backend of `/mcp/{backend}`, `None` for `/mcp`.
    pub(super) async fn serve_post(
        self: &Arc<Self>,
        backend: Option<String>,
        admitted: &Admitted,
        peer: Option<IpAddr>,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Response, FrontError> {
        let settings = self.settings.load();
        let limits = body::BodyLimits { max_body: settings.max_body, body_timeout: settings.body_timeout };
        let body = body::read_json(headers, body, limits).await?;
        let message: Value = match serde_json::from_slice(&body) {
            Ok(message) => message,
            Err(error) => {
                Admission::check_version(headers)?;
                return Err(FrontError::NotJson(error));
            }
        };
        let incoming = Incoming::read(message);
        if let Some((method, request)) = incoming.method() {
            admitted.record.message(method.as_str(), request);
        }
        let audience = admin::audience(&settings, peer, headers, &admitted.principal);
        if modern::is_modern(&incoming, headers) && !self.in_live_session(admitted, headers) {
            if let Some((held, id)) = self.held_elsewhere(&incoming).await {
                let path = backend.map_or_else(|| "/mcp".to_owned(), |backend| format!("/mcp/{backend}"));
                return Ok(self.forwarded(held, &id, path, headers, &body).await);
            }
            let requester = Requester::of(admitted, peer, headers, audience);
            return self.serve_modern(modern::ModernPost { backend, requester }, incoming).await;
        }
        Admission::check_version(headers)?;
        match well_formed(incoming)? {
            Message::Request(Request { id, method: Method::Initialize, params }) => {
                self.initialize(admitted, peer, &id, &params)
            }
            Message::Invalid { .. } => Err(FrontError::NotAMessage),
            message => {
                let session = admitted.open_session(self, headers)?;
                let request = InSessionRequest { session, admitted, backend, peer, audience };
                self.serve_in_session(request, message, headers).await
            }
        }
    }

    /// The other replica holding the tool call a 2026-07-28 retry continues, and the retry's id (see `fleet`).
    async fn held_elsewhere(&self, incoming: &Incoming) -> Option<(HeldElsewhere, Value)> {
        self.fleet.as_ref()?;
        let Message::Request(Request { id, method: Method::ToolsCall, params }) = &incoming.message else {
            return None;
        };
        // Boxed: inline, the fleet's lookup would size every request's handler future (which axum boxes, copying it
        // whole), fleet or not.
        Some((Box::pin(self.router.held_elsewhere(params)).await?, id.clone()))
    }

    /// Whether `headers` name a session this request's principal may use now (the dispatch order of a gateway
    /// serving both eras: a live session keeps a request in the session era, whatever else it carries).
    fn in_live_session(&self, admitted: &Admitted, headers: &HeaderMap) -> bool {
        headers.contains_key(crate::mcp::SESSION_ID_HEADER) && admitted.open_session(self, headers).is_ok()
    }

    async fn serve_in_session(
        self: &Arc<Self>,
        request: InSessionRequest<'_>,
        message: Message,
        headers: &HeaderMap,
    ) -> Result<Response, FrontError> {
        let InSessionRequest { session, admitted, backend, peer, audience } = request;
        let AgentSession { id: session_id, version, capabilities, .. } = session;
        let session_key = session_id.to_string();
        let Request { id, method, params } = match message {
            Message::Request(request) => request,
            Message::Response { message, .. } => {
                // An answer to a relayed server-to-client request; one nobody waits for here may be another
                // replica's (see `fleet`), else it is dropped.
                let copy = self.fleet.as_ref().map(|fleet| (fleet, message.clone()));
                if !self.pending.answer(&session_key, message)
                    && let Some((fleet, message)) = copy
                {
                    fleet.answer_elsewhere(&session_key, message);
                }
                return Ok(StatusCode::ACCEPTED.into_response());
            }
            Message::Notification { method: Method::Cancelled, params } => {
                if let Some(id) = params.get("requestId")
                    && !self.cancels.cancel(&session_key, id)
                    && let Some(fleet) = &self.fleet
                {
                    fleet.cancel_elsewhere(&session_key, id);
                }
                return Ok(StatusCode::ACCEPTED.into_response());
            }
            Message::Notification { .. } | Message::Invalid { .. } => return Ok(StatusCode::ACCEPTED.into_response()),
        };
        let requester = Requester::of(admitted, peer, headers, audience);
        let caller = requester.caller(&id, CallerScope::Session(session_key))?;
        let _allowance = self.admit_by_limits(&caller, &method).await?;
        let cancellable = self.cancels.register(&caller.request_scope, &id);
        let streaming = relays(&method) && accepts_event_stream(headers);
        let (sink, messages) = match streaming {
            true => {
                let (sink, messages) = mpsc::unbounded_channel();
                (Some(sink), Some(messages))
            }
            false => (None, None),
        };
        let relay = Relay::new(capabilities, sink).cancellable(Arc::clone(&cancellable.signal));
        if !relays(&method) {
            let request = Routed { caller: &caller, backend: backend.as_deref(), method: &method, version };
            // Boxed: inline, the call's future would size every request's handler future.
            let reply = Box::pin(self.reply(request, params, &relay)).await;
            return Ok(http::reply(StatusCode::OK, reply));
        }
        // Polled here, detached to a task only when it must outlive this handler (see `polled::Call`).
        let front = Arc::clone(self);
        let (cut_id, cut_method) = (id.clone(), method.clone());
        let call = polled::Call::new(async move {
            let _cancellable = cancellable;
            let request = Routed { caller: &caller, backend: backend.as_deref(), method: &method, version };
            front.reply(request, params, &relay).await
        })
        .cut_at(&self.cutoff, move || cutoff::response(&cut_id, &cut_method));
        let Some(messages) = messages else {
            return Ok(http::reply(StatusCode::OK, call.await));
        };
        let outbox = stream::Outbox {
            messages,
            pending: Arc::clone(&self.pending),
            replays: Arc::clone(&self.replays),
            session: session_id.to_string(),
        };
        Ok(stream::answer(call, outbox).await)
    }

    /// The JSON-RPC response to one request; with tracing on, its work is one SERVER span.
    async fn reply(&self, request: Routed<'_>, params: Value, relay: &Relay) -> JsonRpcReply {
        let reply = match &self.tracer {
            None => self.route(&request, params, relay).await,
            Some(tracer) => {
                let holder = request.caller.session.to_string();
                let session = Some((holder.as_str(), request.version));
                let (method, id, peer) = (request.method.as_str(), &request.caller.request_id, request.caller.peer);
                let span = tracer.server_span(&ServerRequest { method, id, params: &params, session, peer });
                // Boxed, so the untraced call's future is not sized by this branch too.
                let reply = Box::pin(span.run(self.route(&request, params, relay))).await;
                span.end(&reply.to_value());
                reply
            }
        };
        reply.report(&request.caller.record);
        reply
    }

    /// The router's answer as the agent's response: a backend's `tools/call` result is spliced in as its text.
    async fn route(&self, request: &Routed<'_>, params: Value, relay: &Relay) -> JsonRpcReply {
        let view = request.backend.map_or(View::All, View::Backend);
        let answer = self.router.handle(request.caller, view, request.method, params, relay).await;
        JsonRpcReply::of(&request.caller.request_id, answer)
    }
}
